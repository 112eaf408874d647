//! `behind [DELAY_MS]`: a node that runs ahead into a new collective allocation while another
//! node, still behind it in the collective call sequence, waits for a lock and a page the
//! node ahead holds (`docs/c-api.md`, collective calls).
//!
//! Node 0 writes a page of a first allocation (homed on node 0) and takes and releases a lock,
//! so that both stay with it; then, after a barrier, it makes a second collective allocation,
//! homed on node 1, and reads its first word: a request node 1 cannot answer before it has made
//! that allocation too, so it holds the request back. Node 1 first sleeps DELAY_MS (default
//! 300) so that the request is there before anything else node 0 sends it, then takes the lock
//! (granted by node 0) and reads node 0's page (sent by node 0) — both sent after the held-back
//! request — and only then makes the second allocation, which answers node 0. Every other node
//! makes the allocation at once. After a barrier every node checks both allocations; rank 0
//! prints `behind OK nodes=N`. A wrong value prints `FAIL ...` on stderr and the exit status is
//! 1. Needs at least 2 nodes.
//!
//! ```text
//! svmrun -n 2 target/release/examples/behind
//! ```

mod common;

use std::process::ExitCode;
use std::time::Duration;

use svm::{Home, Mutex, SharedSlice};

const USAGE: &str =
    "usage: behind [DELAY_MS]    (DELAY_MS: node 1's sleep before it waits, default 300)";
const LOCK: u64 = 11;
const WORDS: usize = 1024;
const FIRST_VALUE: u64 = 0x5eed_0001;
const SECOND_VALUE: u64 = 0x5eed_0002;

type BoxError = Box<dyn std::error::Error>;

fn parse_args() -> Result<Option<u64>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Ok(None);
    }
    if args.len() > 1 {
        return Err(format!("expected at most 1 argument, got {}", args.len()));
    }
    match args.first() {
        None => Ok(Some(300)),
        Some(s) => s
            .parse::<u64>()
            .ok()
            .filter(|d| *d <= 60_000)
            .map(Some)
            .ok_or_else(|| format!("DELAY_MS must be an integer in 0..=60000, got {s:?}")),
    }
}

fn check(ok: &mut bool, me: usize, what: &str, got: u64, want: u64) {
    if got != want {
        eprintln!("FAIL rank {me}: {what}: read {got:#x}, expected {want:#x}");
        *ok = false;
    }
}

fn run(delay_ms: u64) -> Result<bool, BoxError> {
    let svm = svm::init()?;
    let me = svm::node_id();
    let n = svm::nodes();
    if n < 2 {
        return Err(format!("needs at least 2 nodes, got {n}").into());
    }
    let first: SharedSlice<u64> = svm::alloc_collective_with(WORDS, Home::Node(0))?;
    let lock = Mutex::new(LOCK);
    if me == 0 {
        first.set(0, FIRST_VALUE);
        lock.lock()?.unlock()?;
    }
    svm::barrier()?;
    let mut ok = true;
    let second: SharedSlice<u64> = if me == 1 {
        std::thread::sleep(Duration::from_millis(delay_ms));
        lock.lock()?.unlock()?;
        check(&mut ok, me, "node 0's page", first.get(0), FIRST_VALUE);
        svm::alloc_collective_with(WORDS, Home::Node(1))?
    } else {
        let second: SharedSlice<u64> = svm::alloc_collective_with(WORDS, Home::Node(1))?;
        if me == 0 {
            // Node 1 has not made this allocation yet: it answers once it has.
            check(&mut ok, me, "the new allocation", second.get(0), 0);
            second.set(1, SECOND_VALUE);
        }
        second
    };
    svm::barrier()?;
    check(&mut ok, me, "first allocation", first.get(0), FIRST_VALUE);
    check(
        &mut ok,
        me,
        "second allocation",
        second.get(1),
        SECOND_VALUE,
    );
    svm::barrier()?;
    if me == 0 && ok {
        println!("behind OK nodes={n}");
    }
    svm.finish()?;
    Ok(ok)
}

fn main() -> ExitCode {
    common::main("behind", USAGE, parse_args(), run)
}
