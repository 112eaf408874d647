//! `subsets ROUNDS`: barriers of some of the nodes (`svm::Barrier` with a count below the job's
//! size) must make the writes before them visible to their participants, also writes that
//! reached a participant through an earlier such barrier, and a later barrier of every node
//! must make them visible to the nodes that took part in neither. Needs at least 3 nodes (with
//! fewer it prints a note and exits 0); ranks from 3 on take part in the barriers of every node
//! only.
//!
//! Three words, each alone on a page, none homed on rank 2 (the reader: a home's master copy
//! is always current): the first on node 1, the other two on node 0. Each round:
//! 1. every node reads the words (so it holds copies), barrier of every node; rank 0 writes
//!    the first two words and meets rank 1 alone (barrier A); then rank 0 meets rank 2 alone
//!    (barrier B), after which rank 2 must read the first word (**direct**); and rank 1 meets
//!    rank 2 alone (barrier C), after which rank 2 must read the second word (**through** rank
//!    1: rank 0 never met rank 2 after writing it);
//! 2. every node reads the third word, barrier of every node; rank 0 writes it and meets rank
//!    1 alone (barrier A); barrier of every node, after which rank 2 — which took part in no
//!    barrier of some nodes in this phase — must read it (**every** node).
//!
//! Rank 2 prints `subsets direct=OK through=OK every=OK rounds=<n>`; a stale read prints `FAIL`
//! in place of that case's `OK`, is described on stderr with its round, and makes the exit
//! status 1.
//!
//! ```text
//! svmrun -n 3 --protocol scope target/release/examples/subsets 100
//! ```

mod common;

use std::process::ExitCode;

use svm::{Barrier, Home, SharedSlice};

const USAGE: &str = "usage: subsets ROUNDS    (barriers of some of the nodes make earlier writes visible; needs >= 3 nodes)";
const PAGE: usize = 4096;
const WORDS_PER_PAGE: usize = PAGE / std::mem::size_of::<u64>();
/// Barrier ids: of every node, and of the pairs of ranks (0, 1), (0, 2), (1, 2).
const EVERY: u64 = 1;
const PAIR_01: u64 = 2;
const PAIR_02: u64 = 3;
const PAIR_12: u64 = 4;
/// The words (index of their page in the region).
const DIRECT: usize = 0;
const THROUGH: usize = 1;
const EVERY_NODE: usize = 2;

type BoxError = Box<dyn std::error::Error>;

fn parse_args() -> Result<Option<u64>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [h] if h == "-h" || h == "--help" => Ok(None),
        [r] => match r.parse::<u64>() {
            Ok(rounds) if rounds >= 1 => Ok(Some(rounds)),
            _ => Err(format!("ROUNDS must be a positive integer, got {r:?}")),
        },
        [] => Err("missing ROUNDS".to_string()),
        _ => Err(format!(
            "expected exactly one argument (ROUNDS), got {}",
            args.len()
        )),
    }
}

/// The value rank 0 writes into `word` in `round` (never 0, different for every word and
/// round, so a stale read cannot pass).
fn value(round: u64, word: usize) -> u64 {
    round * 4 + word as u64 + 1
}

/// Rank 2's check of one read: true if `got` is the round's value; else says so on stderr.
fn check(case: &str, round: u64, got: u64, want: u64) -> bool {
    if got != want {
        eprintln!("subsets: round {round}, {case}: rank 2 read {got}, expected {want}");
    }
    got == want
}

/// Runs the job; `Ok(true)` if every check passed on this node.
fn run(rounds: u64) -> Result<bool, BoxError> {
    let svm = svm::init()?;
    let me = svm::node_id();
    let n = svm::nodes();
    if n < 3 {
        println!("subsets: needs at least 3 nodes, this job has {n}: nothing to test");
        svm.finish()?;
        return Ok(true);
    }
    let homes = Home::Custom(vec![1, 0, 0]);
    let words: SharedSlice<u64> = svm::alloc_collective_with(3 * WORDS_PER_PAGE, homes)?;
    if !words.addr().is_multiple_of(PAGE) {
        return Err(format!("the region at {:#x} is not page aligned", words.addr()).into());
    }
    let at = |w: usize| w * WORDS_PER_PAGE;
    let every = Barrier::new(EVERY, n as u32);
    let pair = |id| Barrier::new(id, 2);

    let mut ok = [true; 3];
    for round in 0..rounds {
        // Phase 1: direct and through rank 1.
        let _ = (words.get(at(DIRECT)), words.get(at(THROUGH)));
        every.wait()?;
        match me {
            0 => {
                words.set(at(DIRECT), value(round, DIRECT));
                words.set(at(THROUGH), value(round, THROUGH));
                pair(PAIR_01).wait()?;
                pair(PAIR_02).wait()?;
            }
            1 => {
                pair(PAIR_01).wait()?;
                pair(PAIR_12).wait()?;
            }
            2 => {
                pair(PAIR_02).wait()?;
                let got = words.get(at(DIRECT));
                ok[0] &= check("direct", round, got, value(round, DIRECT));
                pair(PAIR_12).wait()?;
                let got = words.get(at(THROUGH));
                ok[1] &= check("through rank 1", round, got, value(round, THROUGH));
            }
            _ => {}
        }
        // Phase 2: a barrier of every node after one of some nodes.
        let _ = words.get(at(EVERY_NODE));
        every.wait()?;
        match me {
            0 => {
                words.set(at(EVERY_NODE), value(round, EVERY_NODE));
                pair(PAIR_01).wait()?;
            }
            1 => pair(PAIR_01).wait()?,
            _ => {}
        }
        every.wait()?;
        if me == 2 {
            let got = words.get(at(EVERY_NODE));
            ok[2] &= check("every node", round, got, value(round, EVERY_NODE));
        }
        every.wait()?;
    }
    if me == 2 {
        let word = |b: bool| if b { "OK" } else { "FAIL" };
        println!(
            "subsets direct={} through={} every={} rounds={rounds}",
            word(ok[0]),
            word(ok[1]),
            word(ok[2])
        );
    }
    svm.finish()?;
    Ok(ok.iter().all(|&b| b))
}

fn main() -> ExitCode {
    common::main("subsets", USAGE, parse_args(), run)
}
