//! `sleeper [SECONDS] [--print-exe-base]`: a test program for failure handling. Every node joins
//! the job, prints `rank=<r> pid=<pid>` and then sits in barriers (one every ~10 ms) for SECONDS
//! seconds (default 30), so that a test can kill one node and watch the others notice. Rank 0
//! decides when to stop and tells the others through shared memory, so every node passes the same
//! number of barriers; it then prints `sleeper done OK`.
//!
//! `--print-exe-base` first prints `exe_base=<hex address>`, where this executable's first mapping
//! starts (from `/proc/self/maps`), before joining the job: under `svmrun` (which disables address
//! randomisation) it is the same in every run, which lets a test pick an `SVM_SPACE_BASE` that is
//! certainly taken.

mod common;

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const USAGE: &str =
    "usage: sleeper [SECONDS] [--print-exe-base]    (sit in barriers for SECONDS, default 30)";
const DEFAULT_SECONDS: u64 = 30;
const TICK: Duration = Duration::from_millis(10);

type BoxError = Box<dyn std::error::Error>;

struct Args {
    seconds: u64,
    print_exe_base: bool,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut seconds = None;
    let mut print_exe_base = false;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--print-exe-base" => print_exe_base = true,
            s if s.starts_with('-') => return Err(format!("unknown option {s:?}")),
            s if seconds.is_none() => {
                seconds =
                    Some(s.parse::<u64>().map_err(|_| {
                        format!("SECONDS must be a non-negative integer, got {s:?}")
                    })?)
            }
            s => return Err(format!("unexpected argument {s:?}")),
        }
    }
    Ok(Some(Args {
        seconds: seconds.unwrap_or(DEFAULT_SECONDS),
        print_exe_base,
    }))
}

/// Start address of the first mapping of this executable's file.
fn exe_base() -> Result<u64, BoxError> {
    let exe = std::fs::read_link("/proc/self/exe")?;
    let exe = exe.to_string_lossy();
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    for line in maps.lines() {
        // start-end perms offset dev inode path
        let mut fields = line.split_whitespace();
        let range = fields.next().unwrap_or("");
        if fields.nth(4).is_some_and(|path| path == exe) {
            let start = range.split('-').next().unwrap_or("");
            return Ok(u64::from_str_radix(start, 16)?);
        }
    }
    Err(format!("no mapping of {exe} in /proc/self/maps").into())
}

fn run(args: &Args) -> Result<(), BoxError> {
    if args.print_exe_base {
        println!("exe_base={:#x}", exe_base()?);
    }
    let svm = svm::init()?;
    let me = svm::node_id();
    println!("rank={me} pid={}", std::process::id());
    std::io::stdout().flush()?;

    // stop[0] != 0: rank 0 has decided that the barrier loop ends.
    let stop = svm::alloc_collective::<u64>(1)?;
    let limit = Duration::from_secs(args.seconds);
    let t0 = Instant::now();
    loop {
        if me == 0 && t0.elapsed() >= limit {
            stop.set(0, 1);
        }
        svm::barrier()?;
        let done = stop.get(0) != 0;
        // Nobody may see the flag change between this barrier and the next.
        svm::barrier()?;
        if done {
            break;
        }
        std::thread::sleep(TICK);
    }
    if me == 0 {
        println!("sleeper done OK");
    }
    svm.finish()?;
    Ok(())
}

fn main() -> ExitCode {
    common::main("sleeper", USAGE, parse_args(), |args| run(&args))
}
