//! `touch [MIB] [--reps R] [--stride S] [--threads T]`: the cost of first touch. Every node allocates MIB MiB (default 64)
//! of fresh shared memory homed on itself (`svm::alloc_local`) and writes one word of every
//! page, timed; as the baseline, in the same process and run, it does the same on MIB MiB of
//! fresh private memory from the allocator (`calloc`, which the C library serves with a fresh
//! anonymous mapping at this size, so each page is the kernel's first-touch fault). Both are
//! repeated R times (default 3) on fresh memory, alternating, and the best of each is kept.
//! Afterwards it checks that every word reads back. With `--stride S` only every S-th page is
//! touched (in both passes): memory use must follow the pages touched, not the allocation.
//! With `--threads T` each pass is made by T threads of the node at once, each on its own
//! contiguous part (faults of one node's threads served concurrently, or not).
//!
//! Each node prints `us_per_page=<best svm> malloc_us_per_page=<best malloc> ratio=<svm/malloc>
//! pages=<n> rss_growth_mib=<resident growth of the svm passes>`.
//!
//! ```text
//! svmrun -n 1 target/release/examples/touch 64
//! ```

mod common;

use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str =
    "usage: touch [MIB] [--reps R] [--stride S] [--threads T]    (first touch of every S-th page of MIB MiB by T threads, shared vs calloc; default 64 MiB, R=3, S=1, T=1)";
const PAGE: usize = 4096;

type BoxError = Box<dyn std::error::Error>;

struct Args {
    mib: usize,
    reps: usize,
    stride: usize,
    threads: usize,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut args = Args {
        mib: 64,
        reps: 3,
        stride: 1,
        threads: 1,
    };
    let mut it = std::env::args().skip(1);
    let mut positional = 0;
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--reps" => {
                let v = it.next().ok_or("--reps needs a value")?;
                args.reps = match v.parse::<usize>() {
                    Ok(r) if (1..=100).contains(&r) => r,
                    _ => return Err(format!("R must be an integer from 1 to 100, got {v:?}")),
                };
            }
            "--stride" => {
                let v = it.next().ok_or("--stride needs a value")?;
                args.stride = match v.parse::<usize>() {
                    Ok(r) if r >= 1 => r,
                    _ => return Err(format!("S must be a positive integer, got {v:?}")),
                };
            }
            "--threads" => {
                let v = it.next().ok_or("--threads needs a value")?;
                args.threads = match v.parse::<usize>() {
                    Ok(t) if (1..=64).contains(&t) => t,
                    _ => return Err(format!("T must be an integer from 1 to 64, got {v:?}")),
                };
            }
            s if s.starts_with('-') => return Err(format!("unknown option {s:?}")),
            m if positional == 0 => {
                positional += 1;
                args.mib = match m.parse::<usize>() {
                    Ok(v) if (1..=4096).contains(&v) => v,
                    _ => return Err(format!("MIB must be an integer from 1 to 4096, got {m:?}")),
                };
            }
            _ => return Err("expected at most one number (MIB)".to_string()),
        }
    }
    Ok(Some(args))
}

/// Resident set size of this process in KiB (0 if /proc is unreadable).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn value(page: usize) -> u64 {
    page as u64 * 7 + 1
}

/// Runs `f(pages)` for `threads` contiguous parts of `0..pages` at once.
fn in_parallel(pages: usize, threads: usize, f: impl Fn(std::ops::Range<usize>) + Sync) {
    let f = &f;
    std::thread::scope(|s| {
        for k in 0..threads {
            s.spawn(move || f(k * pages / threads..(k + 1) * pages / threads));
        }
    });
}

/// Writes one word per page of fresh private memory (`vec![0; n]` is `calloc`); returns
/// seconds.
fn malloc_pass(bytes: usize, stride: usize, threads: usize) -> Result<f64, BoxError> {
    let words_per_page = PAGE / 8;
    let mut v: Vec<u64> = vec![0u64; bytes / 8];
    let v = std::hint::black_box(&mut v);
    let t0 = Instant::now();
    {
        // Each thread gets its own contiguous part of the pages.
        let per = (bytes / PAGE).div_ceil(threads) * words_per_page;
        std::thread::scope(|s| {
            for (k, part) in v.chunks_mut(per).enumerate() {
                s.spawn(move || {
                    let first = k * per / words_per_page;
                    for (i, page) in (first..first + part.len() / words_per_page).enumerate() {
                        if page % stride == 0 {
                            part[i * words_per_page] = value(page);
                        }
                    }
                });
            }
        });
    }
    let v = std::hint::black_box(v);
    let dt = t0.elapsed().as_secs_f64();
    if let Some(page) = (0..bytes / PAGE)
        .step_by(stride)
        .find(|&p| v[p * words_per_page] != value(p))
    {
        return Err(format!("private page {page} lost its write").into());
    }
    Ok(dt)
}

fn run(args: Args) -> Result<bool, BoxError> {
    let svm = svm::init()?;
    let bytes = args.mib << 20;
    let pages = bytes / PAGE;
    let words_per_page = PAGE / 8;
    let mut best_svm = f64::INFINITY;
    let mut best_malloc = f64::INFINITY;
    let mut rss_growth = 0u64;
    let mut ok = true;
    for _ in 0..args.reps {
        best_malloc = best_malloc.min(malloc_pass(bytes, args.stride, args.threads)?);
        let data = svm::alloc_local::<u64>(pages * words_per_page)?;
        let rss0 = rss_kib();
        let t0 = Instant::now();
        in_parallel(pages, args.threads, |part| {
            for page in part.filter(|p| p % args.stride == 0) {
                data.set(page * words_per_page, value(page));
            }
        });
        best_svm = best_svm.min(t0.elapsed().as_secs_f64());
        rss_growth = rss_growth.max(rss_kib().saturating_sub(rss0));
        let wrong = (0..pages).find(|&p| {
            let want = if p % args.stride == 0 { value(p) } else { 0 };
            data.get(p * words_per_page) != want
        });
        if let Some(page) = wrong {
            eprintln!(
                "touch: node {}: shared page {page} lost its write",
                svm::node_id()
            );
            ok = false;
        }
    }
    svm::barrier()?;
    let touched = pages.div_ceil(args.stride);
    let us = best_svm * 1e6 / touched as f64;
    let mus = best_malloc * 1e6 / touched as f64;
    println!(
        "us_per_page={us:.3} malloc_us_per_page={mus:.3} ratio={:.2} pages={touched} rss_growth_mib={:.1}",
        us / mus,
        rss_growth as f64 / 1024.0
    );
    svm.finish()?;
    Ok(ok)
}

fn main() -> ExitCode {
    common::main("touch", USAGE, parse_args(), run)
}
