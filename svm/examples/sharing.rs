//! `sharing MODE [ROUNDS]`: one shared page used with a known sharing pattern, for the
//! profiler's classification (`svmrun --profile FILE`, docs/profiling.md). MODE is one of
//! - `false`: every node writes its own interleaved words of the page (word `i` by node
//!   `i % nodes`), ROUNDS rounds separated by barriers: false sharing;
//! - `true`: every node writes all of the page's first 64 words in every round, no lock, no
//!   reads: true sharing;
//! - `migratory`: every node adds 1 to a counter on the page under a lock (read, then write),
//!   ROUNDS times, the nodes taking turns (node k increments when the counter is k modulo the
//!   node count, so the page moves on every increment however the lock is scheduled):
//!   migratory;
//! - `prodcons`: node 0 writes the page in every round, then the other nodes read it:
//!   producer-consumer;
//! - `readmostly`: node 0 writes the page once, then every node reads it in every round:
//!   read-mostly.
//!
//! ROUNDS defaults to 50. The page is the only shared allocation of the run (one collective
//! allocation homed on node 0). Rank 0 prints `OK mode=MODE rounds=N nodes=N`; a wrong value
//! read back prints `FAIL ...` on stderr and the exit status is 1.
//!
//! ```text
//! svmrun -n 2 --profile p.md target/release/examples/sharing false
//! ```

mod common;

use std::process::ExitCode;

use svm::{Home, Mutex, SharedSlice};

const USAGE: &str =
    "usage: sharing MODE [ROUNDS]    (MODE: false, true, migratory, prodcons, readmostly; ROUNDS default 50)";
const MODES: [&str; 5] = ["false", "true", "migratory", "prodcons", "readmostly"];
const LOCK: u64 = 7;

type BoxError = Box<dyn std::error::Error>;

struct Args {
    mode: String,
    rounds: u64,
}

fn parse_args() -> Result<Option<Args>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Ok(None);
    }
    let mode = match args.first() {
        Some(m) if MODES.contains(&m.as_str()) => m.clone(),
        Some(m) => return Err(format!("unknown MODE {m:?} (one of {})", MODES.join(", "))),
        None => return Err("missing MODE".into()),
    };
    let rounds = match args.get(1) {
        Some(s) => s
            .parse::<u64>()
            .ok()
            .filter(|r| (1..=1_000_000).contains(r))
            .ok_or_else(|| format!("ROUNDS must be an integer in 1..=1000000, got {s:?}"))?,
        None => 50,
    };
    if args.len() > 2 {
        return Err(format!("expected at most 2 arguments, got {}", args.len()));
    }
    Ok(Some(Args { mode, rounds }))
}

fn check(ok: &mut bool, me: usize, what: &str, got: u64, want: u64) {
    if got != want && *ok {
        eprintln!("FAIL rank {me}: {what}: read {got}, expected {want}");
        *ok = false;
    }
}

fn run(args: Args) -> Result<bool, BoxError> {
    let svm = svm::init()?;
    let me = svm::node_id();
    let n = svm::nodes();
    let words = svm::page_size() / 8;
    let page: SharedSlice<u64> = svm::alloc_collective_with(words, Home::Node(0))?;
    svm::barrier()?;
    let mut ok = true;
    let rounds = args.rounds;
    match args.mode.as_str() {
        "false" => {
            for r in 1..=rounds {
                for i in (me..words).step_by(n) {
                    page.set(i, r << 32 | i as u64);
                }
                svm::barrier()?;
            }
            for i in 0..words {
                check(&mut ok, me, "word", page.get(i), rounds << 32 | i as u64);
            }
        }
        "true" => {
            for r in 1..=rounds {
                for i in 0..64 {
                    page.set(i, (r << 32) | (me as u64) << 16 | i as u64);
                }
                svm::barrier()?;
            }
            for i in 0..64 {
                let v = page.get(i);
                check(&mut ok, me, "round", v >> 32, rounds);
            }
        }
        "migratory" => {
            let m = Mutex::new(LOCK);
            let mut done = 0;
            while done < rounds {
                let g = m.lock()?;
                let v = page.get(0);
                let mine = v % n as u64 == me as u64;
                if mine {
                    page.set(0, v + 1);
                    page.set(1, me as u64);
                    done += 1;
                }
                g.unlock()?;
                if !mine {
                    std::thread::yield_now();
                }
            }
            svm::barrier()?;
            check(&mut ok, me, "counter", page.get(0), rounds * n as u64);
        }
        "prodcons" => {
            for r in 1..=rounds {
                if me == 0 {
                    for i in 0..words {
                        page.set(i, r * 1000 + i as u64);
                    }
                }
                svm::barrier()?;
                if me != 0 {
                    for i in (0..words).step_by(64) {
                        check(&mut ok, me, "word", page.get(i), r * 1000 + i as u64);
                    }
                }
                svm::barrier()?;
            }
        }
        "readmostly" => {
            if me == 0 {
                for i in 0..words {
                    page.set(i, 3 * i as u64 + 1);
                }
            }
            svm::barrier()?;
            for _ in 0..rounds {
                let mut sum = 0u64;
                for i in 0..words {
                    sum = sum.wrapping_add(page.get(i));
                }
                let want: u64 = (0..words as u64).map(|i| 3 * i + 1).sum();
                check(&mut ok, me, "sum", sum, want);
                svm::barrier()?;
            }
        }
        other => return Err(format!("unknown mode {other:?}").into()),
    }
    svm::barrier()?;
    if me == 0 && ok {
        println!("OK mode={} rounds={rounds} nodes={n}", args.mode);
    }
    svm.finish()?;
    Ok(ok)
}

fn main() -> ExitCode {
    common::main("sharing", USAGE, parse_args(), run)
}
