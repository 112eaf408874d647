//! `syncbench MODE ITERS`: the synchronization micro-benchmarks of `svm-bench sync`.
//!
//! - `reacquire ITERS` (2 or more nodes): node 0 takes and releases a lock it manages ITERS
//!   times, then a lock node 1 manages ITERS times, with nothing written inside. Prints
//!   `local_us=<µs per lock+unlock> remote_us=<µs per lock+unlock> OK`.
//! - `counter ITERS`: every node adds 1 to one shared counter ITERS times under one lock; the
//!   critical section also records which node held the lock last, so rank 0 can tell how many
//!   acquires changed node. Prints `counter_us=<µs per increment, all nodes together>
//!   changed=<fraction of acquires that found the lock last held by another node>
//!   counter=<value> expected=<nodes*ITERS> OK` (without `OK`, and exit 1, on a lost update).
//! - `barrier ITERS`: every node calls the barrier of all nodes ITERS times. Prints
//!   `barrier_us=<µs per barrier> OK`.
//! - `hold SECONDS` (a failure test): node 1 takes a lock node 0 manages, prints
//!   `rank=1 pid=<pid> holding lock <id>`, holds it for SECONDS and exits without releasing it
//!   or finishing; node 0 waits for the lock meanwhile, so the job must fail naming node 1.
//!
//! ```text
//! svmrun -n 2 target/release/examples/syncbench counter 10000
//! ```

mod common;

use std::process::ExitCode;
use std::time::Instant;

use svm::{Mutex, SharedSlice};

const USAGE: &str = "usage: syncbench reacquire|counter|barrier|hold ITERS    (lock and barrier timings; see the source's header)";
const PAGE: usize = 4096;
const WORDS_PER_PAGE: usize = PAGE / std::mem::size_of::<u64>();

type BoxError = Box<dyn std::error::Error>;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Reacquire,
    Counter,
    Barrier,
    Hold,
}

fn parse_args() -> Result<Option<(Mode, u64)>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [h] if h == "-h" || h == "--help" => Ok(None),
        [mode, iters] => {
            let mode = match mode.as_str() {
                "reacquire" => Mode::Reacquire,
                "counter" => Mode::Counter,
                "barrier" => Mode::Barrier,
                "hold" => Mode::Hold,
                other => {
                    return Err(format!(
                        "unknown MODE {other:?} (expected reacquire, counter, barrier or hold)"
                    ))
                }
            };
            let iters = iters
                .parse::<u64>()
                .ok()
                .filter(|&i| i > 0)
                .ok_or_else(|| format!("ITERS must be a positive integer, got {iters:?}"))?;
            Ok(Some((mode, iters)))
        }
        _ => Err(format!(
            "expected two arguments (MODE ITERS), got {}",
            args.len()
        )),
    }
}

/// Index of the first element of `slice` that starts a page.
fn page_start_index(slice: &SharedSlice<u64>) -> usize {
    let addr = slice.addr();
    ((PAGE - addr % PAGE) % PAGE) / std::mem::size_of::<u64>()
}

fn per_op_us(t: Instant, ops: u64) -> f64 {
    t.elapsed().as_secs_f64() * 1e6 / ops as f64
}

fn reacquire(iters: u64) -> Result<bool, BoxError> {
    let me = svm::node_id();
    let n = svm::nodes();
    if n < 2 {
        eprintln!("syncbench: reacquire needs 2 or more nodes (a lock managed by another node)");
        return Ok(false);
    }
    // Lock ids: manager is id % nodes.
    let local = Mutex::new(10 * n as u64);
    let remote = Mutex::new(10 * n as u64 + 1);
    svm::barrier()?;
    if me == 0 {
        let mut times = [0.0; 2];
        for (k, m) in [local, remote].iter().enumerate() {
            // The first acquire moves the lock here; time the ones after it.
            m.lock()?.unlock()?;
            let t = Instant::now();
            for _ in 0..iters {
                m.lock()?.unlock()?;
            }
            times[k] = per_op_us(t, iters);
        }
        println!("local_us={:.4} remote_us={:.4} OK", times[0], times[1]);
    }
    svm::barrier()?;
    Ok(true)
}

fn counter(iters: u64) -> Result<bool, BoxError> {
    let me = svm::node_id();
    let n = svm::nodes();
    // [value, last holder + 1, acquires that changed node] alone on a page.
    let pages = svm::alloc_collective::<u64>(2 * WORDS_PER_PAGE)?;
    let c = page_start_index(&pages);
    let lock = Mutex::new(7);
    svm::barrier()?;
    let t = Instant::now();
    for _ in 0..iters {
        let g = lock.lock()?;
        let v = pages.get(c);
        pages.set(c, v + 1);
        if pages.get(c + 1) != me as u64 + 1 {
            pages.set(c + 1, me as u64 + 1);
            pages.set(c + 2, pages.get(c + 2) + 1);
        }
        g.unlock()?;
    }
    svm::barrier()?;
    let total = n as u64 * iters;
    let us = per_op_us(t, total);
    let mut ok = true;
    if me == 0 {
        let value = pages.get(c);
        let changed = pages.get(c + 2) as f64 / total as f64;
        if value == total {
            println!("counter_us={us:.3} changed={changed:.4} counter={value} expected={total} OK");
        } else {
            println!("counter_us={us:.3} changed={changed:.4} counter={value} expected={total}");
            eprintln!("syncbench: lost updates: counter {value}, expected {total}");
            ok = false;
        }
    }
    svm::barrier()?;
    Ok(ok)
}

fn barrier(iters: u64) -> Result<bool, BoxError> {
    svm::barrier()?;
    svm::barrier()?;
    let t = Instant::now();
    for _ in 0..iters {
        svm::barrier()?;
    }
    let us = per_op_us(t, iters);
    if svm::node_id() == 0 {
        println!("barrier_us={us:.3} OK");
    }
    Ok(true)
}

fn hold(seconds: u64) -> Result<bool, BoxError> {
    use std::io::Write;
    let me = svm::node_id();
    let n = svm::nodes();
    let lock = Mutex::new(10 * n as u64); // managed by node 0
    svm::barrier()?;
    if me == 1 {
        let g = lock.lock()?;
        println!(
            "rank=1 pid={} holding lock {}",
            std::process::id(),
            lock.id()
        );
        std::io::stdout().flush()?;
        std::thread::sleep(std::time::Duration::from_secs(seconds));
        // Die holding the token: no unlock, no finish.
        std::mem::forget(g);
        std::process::exit(0);
    } else if me == 0 {
        std::thread::sleep(std::time::Duration::from_millis(200));
        lock.lock()?.unlock()?;
    }
    svm::barrier()?;
    if me == 0 {
        println!("hold OK");
    }
    Ok(true)
}

fn run((mode, iters): (Mode, u64)) -> Result<bool, BoxError> {
    let svm = svm::init()?;
    let ok = match mode {
        Mode::Reacquire => reacquire(iters)?,
        Mode::Counter => counter(iters)?,
        Mode::Barrier => barrier(iters)?,
        Mode::Hold => hold(iters)?,
    };
    svm.finish()?;
    Ok(ok)
}

fn main() -> ExitCode {
    common::main("syncbench", USAGE, parse_args(), run)
}
