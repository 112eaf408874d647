//! `counter ITERS`: every node increments one shared `u64` counter ITERS times under one
//! `svm::Mutex`. Between increments each node also writes, under no lock, its own slot of a
//! collective array that shares no page with the counter (the slots of different nodes do share
//! a page: false sharing the protocol must survive).
//!
//! With `--handoff` every node meets the others at a barrier after each increment, so the lock
//! (and the counter's page) changes node every round, and writes its slot once, at the end:
//! the pattern of a lock-bound program, which `SVM_LOCK_PAGES` (the counter's page travelling
//! with the lock) is for.
//!
//! After a barrier rank 0 prints `counter=<value> expected=<nodes*ITERS> OK` (without `OK`, and
//! exit 1, if the two differ); every rank checks its own slot, rank 0 checks all of them.
//!
//! ```text
//! svmrun -n 4 target/release/examples/counter 1000
//! SVM_STATS=1 svmrun -n 2 target/release/examples/counter 200 --handoff
//! ```

mod common;

use std::process::ExitCode;

use svm::{Mutex, SharedSlice};

const USAGE: &str = "usage: counter ITERS [--handoff]    (every node adds 1 to a shared counter ITERS times under one svm::Mutex; --handoff: all nodes meet at a barrier after each increment)";
const PAGE: usize = 4096;
const WORDS_PER_PAGE: usize = PAGE / std::mem::size_of::<u64>();
/// Lock id of the counter's mutex.
const COUNTER_LOCK: u64 = 1;

type BoxError = Box<dyn std::error::Error>;

/// The iterations, and whether every node meets the others after each increment.
fn parse_args() -> Result<Option<(u64, bool)>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let iters = |s: &str| {
        s.parse::<u64>()
            .map_err(|_| format!("ITERS must be a non-negative integer, got {s:?}"))
    };
    match args.as_slice() {
        [h] if h == "-h" || h == "--help" => Ok(None),
        [n] => Ok(Some((iters(n)?, false))),
        [n, h] if h == "--handoff" => Ok(Some((iters(n)?, true))),
        [_, other] => Err(format!("unknown option {other:?} (expected --handoff)")),
        [] => Err("missing ITERS".to_string()),
        _ => Err(format!(
            "expected ITERS and at most --handoff, got {} arguments",
            args.len()
        )),
    }
}

/// Index of the first element of `slice` that starts a page (the slice must span two pages, so
/// that the whole page from there on is inside it).
fn page_start_index(slice: &SharedSlice<u64>) -> usize {
    let addr = slice.addr();
    ((PAGE - addr % PAGE) % PAGE) / std::mem::size_of::<u64>()
}

/// Runs the job; `Ok(true)` if every check passed on this node.
fn run((iters, handoff): (u64, bool)) -> Result<bool, BoxError> {
    let svm = svm::init()?;
    let me = svm::node_id();
    let n = svm::nodes();

    // The counter lives alone on a page: two pages are allocated and the word that starts the
    // page inside them is used.
    let counter_pages = svm::alloc_collective::<u64>(2 * WORDS_PER_PAGE)?;
    let c = page_start_index(&counter_pages);
    // One slot per node, written without a lock; disjoint from the counter's allocation.
    let slots = svm::alloc_collective::<u64>(n)?;
    let lock = Mutex::new(COUNTER_LOCK);

    svm::barrier()?;
    for i in 0..iters {
        let guard = lock.lock()?;
        let v = counter_pages.get(c);
        counter_pages.set(c, v + 1);
        guard.unlock()?;
        if handoff {
            svm::barrier()?;
        } else {
            slots.set(me, i + 1);
        }
    }
    if handoff {
        slots.set(me, iters);
    }
    svm::barrier()?;

    let mut ok = true;
    let mine = slots.get(me);
    if mine != iters {
        eprintln!("counter: rank {me}: own slot holds {mine}, expected {iters}");
        ok = false;
    }
    if me == 0 {
        for r in 1..n {
            let v = slots.get(r);
            if v != iters {
                eprintln!("counter: rank 0: slot of rank {r} holds {v}, expected {iters}");
                ok = false;
            }
        }
        let value = counter_pages.get(c);
        let expected = n as u64 * iters;
        if value == expected {
            println!("counter={value} expected={expected} OK");
        } else {
            println!("counter={value} expected={expected}");
            eprintln!(
                "counter: lost updates: the counter is {value} but {n} nodes x {iters} increments = {expected}"
            );
            ok = false;
        }
    }
    svm.finish()?;
    Ok(ok)
}

fn main() -> ExitCode {
    common::main("counter", USAGE, parse_args(), run)
}
