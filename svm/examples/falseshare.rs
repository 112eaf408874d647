//! `falseshare [ROUNDS] [WORDS_PER_NODE] [PASSES]`: false sharing, the case the
//! multiple-writer protocols exist for. Two collective arrays ("buffers") of
//! `nodes × WORDS_PER_NODE` `u64` words each (default 512 words per node: 4 pages per buffer
//! with 4 nodes), their pages homed cyclically. Node k owns the words `i` with
//! `i % nodes == k`, so every page is written by every node.
//!
//! Round r (of ROUNDS, default 100) uses buffer `r % 2`: every node first checks that its right
//! neighbour's words of the *other* buffer hold what the neighbour wrote there last in round
//! r-1 (nobody writes that buffer in round r, so the program is data-race-free), then makes
//! PASSES (default 8) passes over its own words of buffer `r % 2`, computing a little before
//! each write (a few tens of nanoseconds of private work, so that the nodes' writes to a page
//! interleave in time as in a real computation) and writing `seq << 32 | i` (`seq` counts the
//! node's writes of the word). Each pass visits the pages in turn (page 0, page 1, …, page 0,
//! …). A barrier ends the round. Under `sc-sw` a write may have to take the page away from
//! another node (up to a page transfer per write); under `sc-mw` and `scope` a node twins each
//! page once per round and sends one diff per page at the barrier.
//!
//! After the last round every node checks every word of both buffers (each must hold the value
//! its writer wrote last). Rank 0 prints `OK time_s=<seconds of the rounds> rounds=<n>
//! words_per_node=<n> pages=<pages per buffer> nodes=<n>`. A lost write is reported on stderr
//! by the node that saw it, naming the first bad word (buffer, index, page, writer, value found
//! and expected); rank 0 then prints `FAIL time_s=<seconds> bad_nodes=<k,…>` instead, and the
//! exit status is 1.
//!
//! ```text
//! svmrun -n 4 --protocol sc-mw target/release/examples/falseshare
//! svmrun -n 4 --protocol sc-sw target/release/examples/falseshare 100 512 8
//! ```

mod common;

use std::process::ExitCode;
use std::time::Instant;

use svm::{Home, SharedSlice};

const USAGE: &str = "usage: falseshare [ROUNDS] [WORDS_PER_NODE] [PASSES]    (every node writes its interleaved words of the same pages; default 100 rounds, 512 words per node, 8 passes per round)";
const DEFAULT_ROUNDS: u64 = 100;
const DEFAULT_WORDS: usize = 512;
const DEFAULT_PASSES: u64 = 8;
/// Xorshift steps of private work before each write (a few tens of nanoseconds): long enough
/// that the nodes' writes to a page interleave in time, as in a real computation.
const WORK: u32 = 32;
const WORD: usize = std::mem::size_of::<u64>();

type BoxError = Box<dyn std::error::Error>;

struct Args {
    rounds: u64,
    words: usize,
    passes: u64,
}

fn parse_args() -> Result<Option<Args>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Ok(None);
    }
    if args.len() > 3 {
        return Err(format!(
            "expected at most 3 arguments (ROUNDS WORDS_PER_NODE PASSES), got {}",
            args.len()
        ));
    }
    let rounds = match args.first() {
        Some(s) => s
            .parse::<u64>()
            .ok()
            .filter(|r| (1..1 << 31).contains(r))
            .ok_or_else(|| format!("ROUNDS must be an integer in 1..2^31, got {s:?}"))?,
        None => DEFAULT_ROUNDS,
    };
    let words = match args.get(1) {
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|w| (1..=1 << 24).contains(w))
            .ok_or_else(|| format!("WORDS_PER_NODE must be an integer in 1..=2^24, got {s:?}"))?,
        None => DEFAULT_WORDS,
    };
    let passes = match args.get(2) {
        Some(s) => s
            .parse::<u64>()
            .ok()
            .filter(|p| (1..=1 << 20).contains(p))
            .ok_or_else(|| format!("PASSES must be an integer in 1..=2^20, got {s:?}"))?,
        None => DEFAULT_PASSES,
    };
    if rounds * passes >= 1 << 32 {
        return Err(format!(
            "ROUNDS × PASSES must be below 2^32, got {rounds} × {passes}"
        ));
    }
    Ok(Some(Args {
        rounds,
        words,
        passes,
    }))
}

/// What the writer of word `i` stores there in its `seq`-th write of the word (1-based, counted
/// over all rounds and passes).
fn value(seq: u64, i: usize) -> u64 {
    (seq << 32) | i as u64
}

/// Private computation standing for the work that produces a value: `steps` rounds of xorshift.
fn work(steps: u32, seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..steps {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x)
}

/// The buffer written in `round`.
fn buf_of(round: u64) -> usize {
    (round % 2) as usize
}

/// The words of node `me`, ordered so that consecutive ones lie on different pages: first the
/// node's first word of every page, then its second word of every page, and so on.
fn write_order(me: usize, nodes: usize, words: usize, words_per_page: usize) -> Vec<usize> {
    let mut mine: Vec<usize> = (0..words).map(|j| me + nodes * j).collect();
    mine.sort_by_key(|&i| (i % words_per_page, i / words_per_page));
    mine
}

/// Checks that the words of `writer` hold its `seq`-th write; the first bad one, if any.
fn first_bad(
    a: &SharedSlice<u64>,
    writer: usize,
    nodes: usize,
    words: usize,
    seq: u64,
) -> Option<(usize, u64, u64)> {
    (0..words).map(|j| writer + nodes * j).find_map(|i| {
        let (got, want) = (a.get(i), value(seq, i));
        (got != want).then_some((i, got, want))
    })
}

fn report(me: usize, when: &str, bad: (usize, u64, u64), nodes: usize, words_per_page: usize) {
    let (i, got, want) = bad;
    eprintln!(
        "falseshare: rank {me}: {when}: word {i} (page {} of the buffer, written by node {}) holds {got:#x} (write number {}), expected {want:#x} (write number {}): a write was lost",
        i / words_per_page,
        i % nodes,
        got >> 32,
        want >> 32
    );
}

/// Runs the job; `Ok(true)` if every check passed on this node.
fn run(args: &Args) -> Result<bool, BoxError> {
    let svm = svm::init()?;
    let me = svm::node_id();
    let nodes = svm::nodes();
    let words_per_page = svm::page_size() / WORD;
    let total = nodes
        .checked_mul(args.words)
        .ok_or("the array is too large")?;
    let pages = total.div_ceil(words_per_page);
    // Round r writes buffer r % 2 and checks the other one, which nobody writes in round r.
    let bufs = [
        svm::alloc_collective_with::<u64>(total, Home::Cyclic)?,
        svm::alloc_collective_with::<u64>(total, Home::Cyclic)?,
    ];
    let order = write_order(me, nodes, args.words, words_per_page);
    // One word per node: 1 if that node found a lost write (checked by rank 0 at the end).
    let failed = svm::alloc_collective::<u64>(nodes)?;
    let right = (me + 1) % nodes;

    svm::barrier()?;
    let t0 = Instant::now();
    let mut ok = true;
    for round in 1..=args.rounds {
        let (a, prev) = (&bufs[buf_of(round)], &bufs[buf_of(round - 1)]);
        if round > 1 && ok {
            let seq = (round - 1) * args.passes;
            if let Some(bad) = first_bad(prev, right, nodes, args.words, seq) {
                let when = format!("round {round}, buffer {}", buf_of(round - 1));
                report(me, &when, bad, nodes, words_per_page);
                // Keep going, so that the other nodes are not left waiting at a barrier.
                ok = false;
            }
        }
        for pass in 1..=args.passes {
            let seq = (round - 1) * args.passes + pass;
            for &i in &order {
                work(WORK, i as u64);
                a.set(i, value(seq, i));
            }
        }
        svm::barrier()?;
    }
    let time_s = t0.elapsed().as_secs_f64();

    // The last round's values in one buffer, the round before's in the other.
    for r in args.rounds.saturating_sub(1).max(1)..=args.rounds {
        for writer in 0..nodes {
            if !ok {
                break;
            }
            let seq = r * args.passes;
            if let Some(bad) = first_bad(&bufs[buf_of(r)], writer, nodes, args.words, seq) {
                let when = format!("after the last round, buffer {}", buf_of(r));
                report(me, &when, bad, nodes, words_per_page);
                ok = false;
            }
        }
    }
    failed.set(me, u64::from(!ok));
    svm::barrier()?;
    if me == 0 {
        let bad_nodes: Vec<usize> = (0..nodes).filter(|&k| failed.get(k) != 0).collect();
        if bad_nodes.is_empty() {
            println!(
                "OK time_s={time_s:.6} rounds={} words_per_node={} pages={pages} nodes={nodes}",
                args.rounds, args.words
            );
        } else {
            let list: Vec<String> = bad_nodes.iter().map(|k| k.to_string()).collect();
            println!("FAIL time_s={time_s:.6} bad_nodes={}", list.join(","));
            ok = false;
        }
    }
    svm.finish()?;
    Ok(ok)
}

fn main() -> ExitCode {
    common::main("falseshare", USAGE, parse_args(), |args| run(&args))
}
