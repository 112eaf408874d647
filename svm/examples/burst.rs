//! `burst [PAGES_PER_NODE] [ROUNDS] [PROTOCOL]`: every node flushes a large batch of diffs to
//! every other node at the same moment — the traffic pattern that can stall an engine which
//! writes to its sockets while other nodes do the same to it.
//!
//! One collective region of `nodes × PAGES_PER_NODE` pages (default 4096 pages = 16 MiB per
//! node), block-homed (node k is home of block k), under PROTOCOL (default `sc-mw`). Each
//! round, every node writes its share of every page of every *other* node's block: word i of a
//! page in block k belongs to the non-home node `(k + 1 + i % (nodes − 1)) % nodes`, so each
//! page is written by every non-home node and the diffs of one round are the whole region
//! minus the writer's own block (at 2 nodes, 16 MiB each way by default). The barrier that
//! ends the round makes every node send all its diffs to all homes at once. Then every node
//! checks every word of every block, and a second barrier ends the round.
//!
//! Prints `burst OK nodes=<n> pages_per_node=<p> rounds=<r> protocol=<P> time_s=<t>` on rank 0
//! when every check passed; a wrong word is described on stderr and the exit status is 1.
//!
//! ```text
//! svmrun -n 2 target/release/examples/burst
//! svmrun -n 4 --transport deck target/release/examples/burst 2048 3 scope
//! ```

mod common;

use std::process::ExitCode;
use std::time::Instant;

use svm::Home;

const USAGE: &str = "usage: burst [PAGES_PER_NODE] [ROUNDS] [PROTOCOL]    (every node writes its share of every other node's block, then all flush at one barrier; default 4096 pages per node, 2 rounds, sc-mw)";
const DEFAULT_PAGES: usize = 4096;
const DEFAULT_ROUNDS: u64 = 2;
const WORD: usize = std::mem::size_of::<u64>();

struct Args {
    pages: usize,
    rounds: u64,
    protocol: String,
}

fn parse_args() -> Result<Option<Args>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Ok(None);
    }
    if args.len() > 3 {
        return Err(format!(
            "expected at most 3 arguments (PAGES_PER_NODE ROUNDS PROTOCOL), got {}",
            args.len()
        ));
    }
    let pages = match args.first() {
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|p| (1..=1 << 20).contains(p))
            .ok_or_else(|| format!("PAGES_PER_NODE must be an integer in 1..=2^20, got {s:?}"))?,
        None => DEFAULT_PAGES,
    };
    let rounds = match args.get(1) {
        Some(s) => s
            .parse::<u64>()
            .ok()
            .filter(|r| (1..1 << 20).contains(r))
            .ok_or_else(|| format!("ROUNDS must be an integer in 1..2^20, got {s:?}"))?,
        None => DEFAULT_ROUNDS,
    };
    let protocol = args.get(2).cloned().unwrap_or_else(|| "sc-mw".into());
    Ok(Some(Args {
        pages,
        rounds,
        protocol,
    }))
}

/// The node that writes word `i` (of the whole region) when blocks are `block_words` long.
fn writer_of(i: usize, block_words: usize, words_per_page: usize, nodes: usize) -> usize {
    let home = i / block_words;
    (home + 1 + (i % words_per_page) % (nodes - 1)) % nodes
}

/// What word `i` holds after round `round` (1-based; 0 before the first).
fn value(round: u64, i: usize) -> u64 {
    if round == 0 {
        0
    } else {
        (round << 40) | i as u64
    }
}

fn run(args: Args) -> Result<bool, Box<dyn std::error::Error>> {
    let _svm = svm::init()?;
    let me = svm::node_id();
    let nodes = svm::nodes();
    if nodes < 2 {
        if me == 0 {
            println!("burst OK nodes=1 (nothing to flush: no other node)");
        }
        return Ok(true);
    }
    let words_per_page = svm::page_size() / WORD;
    let block_words = args.pages * words_per_page;
    let a = svm::alloc_collective_in::<u64>(nodes * block_words, Home::Block, &args.protocol)?;
    svm::barrier()?;
    let t0 = Instant::now();
    for round in 1..=args.rounds {
        for i in 0..nodes * block_words {
            if writer_of(i, block_words, words_per_page, nodes) == me {
                a.set(i, value(round, i));
            }
        }
        svm::barrier()?;
        for i in 0..nodes * block_words {
            let (got, want) = (a.get(i), value(round, i));
            if got != want {
                eprintln!(
                    "burst: rank {me}: round {round}: word {i} (block of node {}, written by node {}) holds {got:#x}, expected {want:#x}: a diff was lost",
                    i / block_words,
                    writer_of(i, block_words, words_per_page, nodes)
                );
                return Ok(false);
            }
        }
        svm::barrier()?;
    }
    if me == 0 {
        println!(
            "burst OK nodes={nodes} pages_per_node={} rounds={} protocol={} time_s={:.6}",
            args.pages,
            args.rounds,
            args.protocol,
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(true)
}

fn main() -> ExitCode {
    common::main("burst", USAGE, parse_args(), run)
}
