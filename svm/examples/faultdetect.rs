//! `faultdetect [PAGES] [ROUNDS]`: page-fault detection time of the current fault backend — the
//! time from a processor fault on a protected page to the moment the runtime sees it, with no
//! network involved (the first metric of the SVMlib paper's measurements). Each round touches
//! PAGES (default 512) fresh local pages once (`svm::measure_fault_detection`); the statistics
//! are over every fault of every round (ROUNDS, default 4; the first is a warm-up and dropped).
//!
//! Prints `detect_us_mean=<x> detect_us_p50=<y> detect_us_p90=<z> faults=<n> backend=<b>`
//! (`key=value` words: `svm-bench fault` reads them).
//!
//! ```text
//! svmrun -n 1 --fault segv target/release/examples/faultdetect
//! svmrun -n 1 --fault uffd target/release/examples/faultdetect 1000 8
//! ```

mod common;

use std::process::ExitCode;

const USAGE: &str =
    "usage: faultdetect [PAGES] [ROUNDS]   (defaults 512 4; PAGES 1..=16384, ROUNDS 2..=100)";

fn parse(args: &[String]) -> Result<(usize, usize), String> {
    let num = |s: &String, what: &str, lo: usize, hi: usize| match s.parse::<usize>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(format!(
            "{what} must be an integer in {lo}..={hi}, got {s:?}"
        )),
    };
    match args {
        [] => Ok((512, 4)),
        [p] => Ok((num(p, "PAGES", 1, 16384)?, 4)),
        [p, r] => Ok((num(p, "PAGES", 1, 16384)?, num(r, "ROUNDS", 2, 100)?)),
        _ => Err(format!(
            "expected at most two arguments, got {}",
            args.len()
        )),
    }
}

fn run(pages: usize, rounds: usize) -> Result<(), Box<dyn std::error::Error>> {
    let svm = svm::init()?;
    let mut samples: Vec<(f64, f64, f64)> = Vec::new();
    // The probe frees its pages, and this node's allocator hands freed pages out again with
    // their contents (they no longer fault): after each round, hold an allocation of the same
    // size so that the next round gets fresh pages.
    let mut held = Vec::new();
    for r in 0..rounds {
        let m = svm::measure_fault_detection(pages)?;
        held.push(svm::alloc_local::<u8>(pages * svm::page_size())?);
        if r > 0 {
            samples.push(m);
        }
    }
    if samples.iter().any(|s| s.0 <= 0.0) {
        return Err(format!(
            "a round of the probe saw no fault (its pages were not fresh): {samples:?}"
        )
        .into());
    }
    for h in held {
        svm::free_local(h)?;
    }
    let backend = svm::stats().fault_backend;
    if svm::node_id() == 0 {
        // Every round has the same number of faults: the mean of the means is the overall mean;
        // the quantiles are the medians of the rounds' quantiles.
        let mean = samples.iter().map(|s| s.0).sum::<f64>() / samples.len() as f64;
        let med = |f: fn(&(f64, f64, f64)) -> f64| {
            let mut v: Vec<f64> = samples.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!(
            "detect_us_mean={mean:.3} detect_us_p50={:.3} detect_us_p90={:.3} faults={} backend={backend}",
            med(|s| s.1),
            med(|s| s.2),
            pages * samples.len()
        );
    }
    svm.finish()?;
    Ok(())
}

/// The command line: `Ok(None)` for `-h`/`--help`, else `(PAGES, ROUNDS)`.
fn parse_args() -> Result<Option<(usize, usize)>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Ok(None);
    }
    parse(&args).map(Some)
}

fn main() -> ExitCode {
    common::main("faultdetect", USAGE, parse_args(), |(pages, rounds)| {
        run(pages, rounds)
    })
}
