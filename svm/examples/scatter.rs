//! `scatter [PAGES] [ROUNDS]`: radix's permutation in miniature — every node writes its own
//! words of every page of one shared array (homed on node 0), node 0 in page order and at
//! once, every other node in a scrambled page order after a short sleep, so node 0 waits at
//! the barrier while the others take the pages it holds (sc-sw's grants around a request at
//! a barrier, `SVM_GRANT_AROUND`, docs/protocols.md). After each round's barrier every node
//! checks every word of every node; rank 0 prints `scatter OK nodes=N pages=P rounds=R`. A
//! wrong value prints `FAIL ...` on stderr and the exit status is 1. Defaults: 256 pages
//! (a power of two), 3 rounds.
//!
//! ```text
//! svmrun -n 2 target/release/examples/scatter 256 3
//! ```

mod common;

use std::process::ExitCode;
use std::time::Duration;

use svm::{Home, SharedSlice};

const USAGE: &str = "usage: scatter [PAGES] [ROUNDS]    (PAGES: a power of two from 16 to 65536, \
                     default 256; ROUNDS: 1 to 1000, default 3)";

/// Words each node writes in each page (its own slots: word `rank * SLOTS + k`).
const SLOTS: usize = 4;

/// How long the nodes other than 0 sleep before their writes, so that node 0 is at the
/// barrier while they take its pages.
const LATE_START: Duration = Duration::from_millis(30);

type BoxError = Box<dyn std::error::Error>;

fn parse_args() -> Result<Option<(usize, u64)>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Ok(None);
    }
    if args.len() > 2 {
        return Err(format!("expected at most 2 arguments, got {}", args.len()));
    }
    let pages = match args.first() {
        None => 256,
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|p| (16..=65536).contains(p) && p.is_power_of_two())
            .ok_or_else(|| format!("PAGES must be a power of two from 16 to 65536, got {s:?}"))?,
    };
    let rounds = match args.get(1) {
        None => 3,
        Some(s) => s
            .parse::<u64>()
            .ok()
            .filter(|r| (1..=1000).contains(r))
            .ok_or_else(|| format!("ROUNDS must be an integer from 1 to 1000, got {s:?}"))?,
    };
    Ok(Some((pages, rounds)))
}

/// The value node `rank` writes into slot `k` of page `page` in round `round`.
fn value(round: u64, page: usize, rank: usize, k: usize) -> u64 {
    (round << 40) | ((page as u64) << 16) | ((rank as u64) << 4) | k as u64
}

fn run((pages, rounds): (usize, u64)) -> Result<bool, BoxError> {
    let svm = svm::init()?;
    let me = svm::node_id();
    let n = svm::nodes();
    let page_words = svm::page_size() / std::mem::size_of::<u64>();
    if n * SLOTS > page_words {
        return Err(format!("{n} nodes do not fit their slots in one page").into());
    }
    let data: SharedSlice<u64> = svm::alloc_collective_with(pages * page_words, Home::Node(0))?;
    let mut ok = true;
    for round in 1..=rounds {
        if me != 0 {
            std::thread::sleep(LATE_START);
        }
        for i in 0..pages {
            // Node 0 in page order; the others in an odd stride's order, which visits every
            // page of a power-of-two count once.
            let page = if me == 0 { i } else { (i * 97 + me) % pages };
            for k in 0..SLOTS {
                data.set(
                    page * page_words + me * SLOTS + k,
                    value(round, page, me, k),
                );
            }
        }
        svm::barrier()?;
        for page in 0..pages {
            for rank in 0..n {
                for k in 0..SLOTS {
                    let got = data.get(page * page_words + rank * SLOTS + k);
                    let want = value(round, page, rank, k);
                    if got != want {
                        eprintln!(
                            "FAIL rank {me}: round {round} page {page} node {rank} slot {k}: \
                             read {got:#x}, expected {want:#x}"
                        );
                        ok = false;
                    }
                }
            }
        }
        svm::barrier()?;
    }
    if me == 0 && ok {
        println!("scatter OK nodes={n} pages={pages} rounds={rounds}");
    }
    svm.finish()?;
    Ok(ok)
}

fn main() -> ExitCode {
    common::main("scatter", USAGE, parse_args(), run)
}
