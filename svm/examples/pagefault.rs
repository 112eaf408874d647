//! `pagefault [MIB] [--threads T]`: the cost of a remote read fault. Rank 0 fills MIB MiB
//! (default 32), homed on itself, with a known pattern; after a barrier every other rank reads one
//! word of every page (so each page is fetched once) and checks it against the pattern. With
//! `--threads T` each reading rank reads with T threads at once, each its own contiguous part of
//! the pages: the faults of one node's threads are outstanding together (the time per page shows
//! whether the node serves them concurrently). Each reading rank prints
//! `us_per_page=<µs per page of its read pass> pages=<n> mib=<m> tcp_rtt_us=<x> ratio_to_rtt=<r>`,
//! where `tcp_rtt_us` is the median round trip of a 32-byte ping-pong over TCP loopback between
//! two threads, measured in the same run as the baseline. With one node rank 0 reads its own
//! (local) pages and prints the same line.
//!
//! With `--home-reads` the last rank fills the pages (still homed on rank 0) and rank 0 alone
//! reads them: the home faulting on pages another node owns (sc-sw forwards each read to the
//! owner, which also sends the pages after it ahead).
//!
//! ```text
//! svmrun -n 2 target/release/examples/pagefault 32
//! svmrun -n 2 target/release/examples/pagefault 32 --threads 2
//! svmrun -n 2 target/release/examples/pagefault 32 --home-reads
//! ```

mod common;

use std::process::ExitCode;
use std::time::Instant;

const USAGE: &str =
    "usage: pagefault [MIB] [--threads T] [--home-reads]    (rank 0 writes MIB MiB, default 32, homed on itself; the other ranks fault them in with T threads, default 1; --home-reads: the last rank writes them and rank 0 reads)";
const DEFAULT_MIB: usize = 32;
const PAGE: usize = 4096;
const WORDS_PER_PAGE: usize = PAGE / std::mem::size_of::<u64>();
/// Words written per `write_from` call while filling.
const CHUNK_WORDS: usize = 16 * WORDS_PER_PAGE;

type BoxError = Box<dyn std::error::Error>;

/// Median round trip (µs) of a 32-byte ping-pong over TCP loopback (TCP_NODELAY) between two
/// threads, over `rounds` round trips.
fn tcp_loopback_rtt_us(rounds: usize) -> Result<f64, BoxError> {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut buf = [0u8; 32];
        loop {
            match s.read_exact(&mut buf) {
                Ok(()) => s.write_all(&buf)?,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    });
    let mut c = std::net::TcpStream::connect(addr)?;
    c.set_nodelay(true)?;
    let mut buf = [7u8; 32];
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        c.write_all(&buf)?;
        c.read_exact(&mut buf)?;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    drop(c);
    echo.join().map_err(|_| "echo thread panicked")??;
    samples.sort_by(|a, b| a.total_cmp(b));
    Ok(samples[samples.len() / 2])
}

struct Args {
    mib: usize,
    threads: usize,
    /// The last rank writes, rank 0 (the home) reads.
    home_reads: bool,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut args = Args {
        mib: DEFAULT_MIB,
        threads: 1,
        home_reads: false,
    };
    let mut mib_seen = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--home-reads" => args.home_reads = true,
            "--threads" => {
                let v = it.next().ok_or("--threads needs a value")?;
                args.threads = match v.parse::<usize>() {
                    Ok(t) if (1..=64).contains(&t) => t,
                    _ => return Err(format!("--threads must be between 1 and 64, got {v:?}")),
                };
            }
            m if !mib_seen && !m.starts_with('-') => {
                mib_seen = true;
                args.mib = match m.parse::<usize>() {
                    Ok(mib) if (1..=1 << 20).contains(&mib) => mib,
                    _ => {
                        return Err(format!(
                            "MIB must be an integer between 1 and 1048576, got {m:?}"
                        ))
                    }
                };
            }
            other => return Err(format!("unexpected argument {other:?}")),
        }
    }
    Ok(Some(args))
}

/// The value of word `w`: distinct per word, never zero (the memory starts zeroed).
fn pattern(w: usize) -> u64 {
    ((w as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA5A5_5A5A_0F0F_F0F0) | 1
}

/// `Ok(true)` if every word read matched.
fn run(args: Args) -> Result<bool, BoxError> {
    let Args {
        mib,
        threads,
        home_reads,
    } = args;
    let svm = svm::init()?;
    let me = svm::node_id();
    let nodes = svm::nodes();
    let pages = mib * (1 << 20) / PAGE;
    let words = pages * WORDS_PER_PAGE;
    let data = svm::alloc_collective::<u64>(words)?;

    let writer = if home_reads { nodes - 1 } else { 0 };
    if me == writer {
        let mut chunk = vec![0u64; CHUNK_WORDS];
        let mut start = 0;
        while start < words {
            let len = CHUNK_WORDS.min(words - start);
            for (i, v) in chunk[..len].iter_mut().enumerate() {
                *v = pattern(start + i);
            }
            data.write_from(start, &chunk[..len]);
            start += len;
        }
    }
    svm::barrier()?;

    let reader = if nodes == 1 || home_reads {
        me == 0
    } else {
        me != 0
    };
    let mut ok = true;
    if reader {
        let t0 = Instant::now();
        // Each thread reads its own contiguous share of the pages and reports its first
        // mismatch.
        let share = pages.div_ceil(threads);
        let data = &data;
        let bad: Result<Option<(usize, u64)>, BoxError> = std::thread::scope(|s| {
            let parts: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || {
                        let mut bad = None;
                        for p in (t * share)..((t + 1) * share).min(pages) {
                            // A different word of each page, so the pattern check covers
                            // more than offset 0.
                            let w = p * WORDS_PER_PAGE + p % WORDS_PER_PAGE;
                            let v = data.get(w);
                            if v != pattern(w) && bad.is_none() {
                                bad = Some((w, v));
                            }
                        }
                        bad
                    })
                })
                .collect();
            let mut first = None;
            for h in parts {
                let b = h.join().map_err(|_| "a reading thread panicked")?;
                first = first.or(b);
            }
            Ok(first)
        });
        let bad = bad?;
        let us = t0.elapsed().as_secs_f64() * 1e6;
        let per_page = us / pages as f64;
        // The baseline, measured in the same run on the same machine: a plain TCP loopback
        // round trip of a request-sized message between two threads of this process.
        let rtt = tcp_loopback_rtt_us(2000)?;
        println!(
            "us_per_page={per_page:.3} pages={pages} mib={mib} threads={threads} tcp_rtt_us={rtt:.3} ratio_to_rtt={:.2}",
            per_page / rtt
        );
        if let Some((w, v)) = bad {
            eprintln!(
                "pagefault: rank {me}: word {w} (page {}) holds {v:#018x}, rank {writer} wrote {:#018x}",
                w / WORDS_PER_PAGE,
                pattern(w)
            );
            ok = false;
        }
    }
    svm::barrier()?;
    svm.finish()?;
    Ok(ok)
}

fn main() -> ExitCode {
    common::main("pagefault", USAGE, parse_args(), run)
}
