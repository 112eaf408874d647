//! `flags [ROUNDS]`: ranks 0 and 1 hand a turn back and forth ROUNDS times (default 100)
//! through shared memory alone — plain loads and stores, no lock, no barrier between them, as
//! racy C programs spin on a flag (SPLASH-2 barnes's `hackcofm`, fmm's `interaction_synch`).
//! Before each hand-over the rank whose turn it is writes the round into a datum on a page of
//! its own (homed on it) and then the turn flag (a page homed on the other rank); the other
//! rank spins until it sees the flag, then must read that datum.
//!
//! Under `sc-sw` every store is seen at once. Under `sc-mw` a store no release follows reaches
//! the other node through the bounded visibility timer (`SVM_FLUSH_AFTER_US`; with 0 the turn
//! never arrives). `scope` makes writes visible only through its acquires: this program never
//! ends there (each wait gives up after 20 s with a message).
//!
//! Rank 0 prints `flags rounds=<n> OK`, or `FAIL` and a description of the first wait that
//! saw no turn or a stale datum (exit status 1). Ranks beyond 1 only meet the others at the
//! start and the end. Needs at least two nodes.
//!
//! ```text
//! svmrun -n 2 --protocol sc-mw target/release/examples/flags 100
//! ```

mod common;
#[path = "common/lone_word.rs"]
mod lone_word;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use lone_word::{parse_rounds, LoneWord};
use svm::Home;

const USAGE: &str = "usage: flags [ROUNDS]    (ranks 0 and 1 hand a turn back and forth ROUNDS times through plain loads and stores, default 100; needs >= 2 nodes)";
const DEFAULT_ROUNDS: u64 = 100;
/// How long a rank spins for its turn before declaring it lost.
const SPIN_LIMIT: Duration = Duration::from_secs(20);

type BoxError = Box<dyn std::error::Error>;

/// Spins until `flag` holds `v`, yielding now and then so that an oversubscribed machine runs
/// the writer. Returns the last value seen.
fn wait_for(flag: &LoneWord, v: u64) -> u64 {
    let start = Instant::now();
    let mut spins = 0u32;
    let mut seen = flag.get();
    while seen != v && start.elapsed() < SPIN_LIMIT {
        spins += 1;
        if spins.is_multiple_of(64) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
        seen = flag.get();
    }
    seen
}

/// Rank `me` waits for turn `round` on `turn`, then reads the other rank's `datum`; returns
/// what went wrong, if anything.
fn take_turn(me: usize, turn: &LoneWord, datum: &LoneWord, round: u64) -> Option<String> {
    let seen = wait_for(turn, round);
    if seen != round {
        return Some(format!(
            "rank {me} waited {} s for turn {round} and saw {seen}",
            SPIN_LIMIT.as_secs()
        ));
    }
    let d = datum.get();
    (d != round).then(|| {
        format!(
            "rank {me} saw turn {round} but then read datum {d} (rank {} wrote {round} before the turn)",
            1 - me
        )
    })
}

/// Rank `me` (0 or 1) plays ROUNDS rounds; returns a description of the first failed wait.
fn play(me: usize, rounds: u64) -> Result<Option<String>, BoxError> {
    // turn[r]: set by rank 1 - r, spun on by rank r; data[r]: written by rank r.
    let turn = [
        LoneWord::alloc(Home::Node(0))?,
        LoneWord::alloc(Home::Node(1))?,
    ];
    let data = [
        LoneWord::alloc(Home::Node(0))?,
        LoneWord::alloc(Home::Node(1))?,
    ];
    svm::barrier()?;
    if me > 1 {
        return Ok(None);
    }
    let other = 1 - me;
    for round in 1..=rounds {
        // Rank 0 moves first in every round.
        if me == 1 {
            if let Some(why) = take_turn(me, &turn[me], &data[other], round) {
                return Ok(Some(why));
            }
        }
        data[me].set(round);
        turn[other].set(round);
        if me == 0 {
            if let Some(why) = take_turn(me, &turn[me], &data[other], round) {
                return Ok(Some(why));
            }
        }
    }
    Ok(None)
}

/// `Ok(true)` if every turn came with its datum.
fn run(rounds: u64) -> Result<bool, BoxError> {
    let svm = svm::init()?;
    let me = svm::node_id();
    if svm::nodes() < 2 {
        println!(
            "flags: needs at least 2 nodes (e.g. svmrun -n 2 flags); nothing to do with 1 node"
        );
        svm.finish()?;
        return Ok(true);
    }
    let failures = svm::alloc_collective::<u64>(2)?;
    let failure = play(me, rounds)?;
    if let Some(why) = &failure {
        eprintln!("flags: {why}");
        failures.set(me, 1);
    }
    svm::barrier()?;
    let ok = (0..2).all(|r| failures.get(r) == 0);
    if me == 0 {
        println!("flags rounds={rounds} {}", if ok { "OK" } else { "FAIL" });
    }
    svm.finish()?;
    Ok(ok)
}

fn main() -> ExitCode {
    common::main("flags", USAGE, parse_rounds(DEFAULT_ROUNDS), run)
}
