//! `firsttouch [PAGES_PER_NODE]`: first-touch home placement. A collective region allocated
//! with `Home::FirstTouch`; node k writes its own block of PAGES_PER_NODE pages (default 8)
//! first, so every page of block k gets node k as its home. After a barrier every node checks
//! the homes of all pages (`svm::home_of`), then reads every other node's block and checks its
//! contents. Rank 0 prints `firsttouch OK pages=<n> nodes=<n>` (exit 1 and a message naming
//! the first wrong page otherwise). Works under every protocol.

#[path = "common/mod.rs"]
mod common;

use std::process::ExitCode;

use svm::Home;

const USAGE: &str =
    "usage: firsttouch [PAGES_PER_NODE]    (first-touch homes; default 8 pages per node)";
const WORDS_PER_PAGE: usize = 4096 / std::mem::size_of::<u64>();

type BoxError = Box<dyn std::error::Error>;

fn parse_args() -> Result<Option<usize>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [h] if h == "-h" || h == "--help" => Ok(None),
        [] => Ok(Some(8)),
        [p] => match p.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Some(n)),
            _ => Err(format!(
                "PAGES_PER_NODE must be a positive integer, got {p:?}"
            )),
        },
        _ => Err(format!("expected at most one argument, got {}", args.len())),
    }
}

fn value(page: usize, word: usize) -> u64 {
    (page as u64) << 32 | word as u64
}

fn run(per_node: usize) -> Result<bool, BoxError> {
    let svm = svm::init()?;
    let (me, nodes) = (svm::node_id(), svm::nodes());
    let pages = per_node * nodes;
    let data = svm::alloc_collective_with::<u64>(pages * WORDS_PER_PAGE, Home::FirstTouch)?;
    // Pages start at page boundaries: collective allocations are page aligned.
    for p in me * per_node..(me + 1) * per_node {
        for w in (0..WORDS_PER_PAGE).step_by(64) {
            data.set(p * WORDS_PER_PAGE + w, value(p, w));
        }
    }
    svm::barrier()?;
    let mut ok = true;
    for p in 0..pages {
        let owner = p / per_node;
        // Touch the page (read), then ask who its home is.
        let w = (p % 8) * 64;
        let got = data.get(p * WORDS_PER_PAGE + w);
        let home = svm::home_of(data.addr() + p * WORDS_PER_PAGE * 8);
        if got != value(p, w) {
            eprintln!(
                "firsttouch: node {me}: page {p} word {w} holds {got:#x}, node {owner} wrote {:#x}",
                value(p, w)
            );
            ok = false;
            break;
        }
        if home != Some(owner) {
            eprintln!("firsttouch: node {me}: page {p} has home {home:?}, its first toucher was node {owner}");
            ok = false;
            break;
        }
    }
    svm::barrier()?;
    if me == 0 && ok {
        println!("firsttouch OK pages={pages} nodes={nodes}");
    }
    svm.finish()?;
    Ok(ok)
}

fn main() -> ExitCode {
    common::main("firsttouch", USAGE, parse_args(), run)
}
