//! `litmus [ROUNDS]`: sequential-consistency litmus tests across real processes (needs at least
//! two nodes; with one node it prints a note and exits 0). Every shared variable lives alone on
//! its own page.
//!
//! - **mp** (message passing), ROUNDS rounds: rank 0 writes `data` then `flag` (different pages,
//!   homed on nodes 0 and 1); rank 1 spins on `flag` with plain reads until it sees the round's
//!   value (it must, within 20 s) and then must read the round's `data`.
//! - **sb** (store buffering / Dekker), ROUNDS rounds: rank 0 does `x = 1; r0 = y`, rank 1 does
//!   `y = 1; r1 = x` (x homed on node 0, y on node 1); `r0 == r1 == 0` is forbidden. Barriers
//!   start each round and reset the variables.
//! - **iriw** (independent reads of independent writes), with at least 4 nodes, ROUNDS rounds:
//!   rank 0 writes x, rank 1 writes y, rank 2 reads x then y, rank 3 reads y then x; the two
//!   readers must not see the writes in opposite orders.
//!
//! Rank 0 prints `litmus mp=OK sb=OK rounds=<n>` (plus ` iriw=OK` with 4 or more nodes). A
//! violation prints `FAIL` in place of that test's `OK`, is described on stderr with its round,
//! and makes the exit status 1.
//!
//! ```text
//! svmrun -n 4 target/release/examples/litmus 1000
//! ```

mod common;
#[path = "common/lone_word.rs"]
mod lone_word;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use lone_word::{parse_rounds, LoneWord as Var};
use svm::{Home, SharedSlice};

const USAGE: &str = "usage: litmus [ROUNDS]    (sequential-consistency litmus tests, default 200 rounds; needs >= 2 nodes)";
const DEFAULT_ROUNDS: u64 = 200;
/// How long rank 1 spins on the message-passing flag before declaring it lost.
const SPIN_LIMIT: Duration = Duration::from_secs(20);
/// Upper bound of the random delay before each rank's racing operations (a remote fault costs
/// tens of µs here).
const MAX_JITTER_US: u64 = 1000;

/// Words of the result array owned by each rank.
const SLOT: usize = 8;
const RES_SB: usize = 0;
const RES_IRIW_FIRST: usize = 1;
const RES_IRIW_SECOND: usize = 2;
/// Round + 1 of the first message-passing failure seen by rank 1 (0 = none).
const RES_MP_ROUND: usize = 3;
/// Value of `data` (or of `flag`, on a timeout) rank 1 saw then.
const RES_MP_SEEN: usize = 4;
/// 1 = stale data after the flag, 2 = the flag never arrived.
const RES_MP_KIND: usize = 5;

type BoxError = Box<dyn std::error::Error>;

struct Results {
    slots: SharedSlice<u64>,
}

impl Results {
    fn get(&self, rank: usize, what: usize) -> u64 {
        self.slots.get(rank * SLOT + what)
    }

    fn set(&self, rank: usize, what: usize, v: u64) {
        self.slots.set(rank * SLOT + what, v)
    }
}

/// Sleeps a pseudo-random 0..=MAX_JITTER_US µs, different per rank and round, so that the
/// racing operations of the ranks start in varying orders and every allowed outcome shows up.
fn jitter(rank: usize, round: u64) {
    let mut z = (rank as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ round.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z ^= z >> 31;
    z = z.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z ^= z >> 29;
    // Sleeping, not spinning: a spinning rank would keep the CPU from its own node's message
    // handling on a machine with few cores, which serialises the ranks instead of mixing them.
    std::thread::sleep(Duration::from_micros(z % (MAX_JITTER_US + 1)));
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "OK"
    } else {
        "FAIL"
    }
}

/// Message passing. Returns (on rank 0) whether it held.
fn message_passing(me: usize, rounds: u64, res: &Results) -> Result<bool, BoxError> {
    let data = Var::alloc(Home::Node(0))?;
    let flag = Var::alloc(Home::Node(1))?;
    let mut failed = false;
    for round in 0..rounds {
        let v = round + 1;
        svm::barrier()?;
        match me {
            0 => {
                jitter(0, round);
                data.set(v);
                flag.set(v);
            }
            1 if !failed => {
                let start = Instant::now();
                let mut spins: u64 = 0;
                let mut seen = flag.get();
                while seen != v && start.elapsed() < SPIN_LIMIT {
                    spins += 1;
                    if spins == 64 {
                        spins = 0;
                        // Let the writer run on an oversubscribed machine.
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                    seen = flag.get();
                }
                if seen != v {
                    res.set(1, RES_MP_ROUND, v);
                    res.set(1, RES_MP_SEEN, seen);
                    res.set(1, RES_MP_KIND, 2);
                    failed = true;
                } else {
                    let d = data.get();
                    if d != v {
                        res.set(1, RES_MP_ROUND, v);
                        res.set(1, RES_MP_SEEN, d);
                        res.set(1, RES_MP_KIND, 1);
                        failed = true;
                    }
                }
            }
            _ => {}
        }
    }
    svm::barrier()?;
    if me != 0 {
        return Ok(true);
    }
    let failed_round = res.get(1, RES_MP_ROUND);
    if failed_round == 0 {
        return Ok(true);
    }
    let round = failed_round - 1;
    let seen = res.get(1, RES_MP_SEEN);
    match res.get(1, RES_MP_KIND) {
        2 => eprintln!(
            "litmus: mp violated in round {round}: rank 1 spun {} s on the flag and never saw {failed_round} (last read {seen})",
            SPIN_LIMIT.as_secs()
        ),
        _ => eprintln!(
            "litmus: mp violated in round {round}: rank 1 saw flag={failed_round} but then read data={seen} (rank 0 wrote data={failed_round} before the flag)"
        ),
    }
    Ok(false)
}

/// Store buffering (Dekker). Returns (on rank 0) whether it held.
fn store_buffering(me: usize, rounds: u64, res: &Results) -> Result<bool, BoxError> {
    let x = Var::alloc(Home::Node(0))?;
    let y = Var::alloc(Home::Node(1))?;
    let mut first_violation = None;
    let mut violations = 0u64;
    // Outcome counts (r0, r1) = 00, 01, 10, 11, to show the test exercised interleavings.
    let mut outcomes = [0u64; 4];
    for round in 0..rounds {
        svm::barrier()?;
        match me {
            0 => {
                jitter(0, round);
                x.set(1);
                let r0 = y.get();
                res.set(0, RES_SB, r0);
            }
            1 => {
                jitter(1, round);
                y.set(1);
                let r1 = x.get();
                res.set(1, RES_SB, r1);
            }
            _ => {}
        }
        svm::barrier()?;
        match me {
            0 => {
                let (r0, r1) = (res.get(0, RES_SB), res.get(1, RES_SB));
                outcomes[(r0.min(1) * 2 + r1.min(1)) as usize] += 1;
                if r0 == 0 && r1 == 0 {
                    violations += 1;
                    first_violation.get_or_insert(round);
                }
                x.set(0);
            }
            1 => y.set(0),
            _ => {}
        }
    }
    svm::barrier()?;
    if me != 0 {
        return Ok(true);
    }
    eprintln!(
        "litmus: sb outcomes over {rounds} rounds: (r0,r1)=(0,1) {} times, (1,0) {} times, (1,1) {} times, (0,0) {} times",
        outcomes[1], outcomes[2], outcomes[3], outcomes[0]
    );
    if let Some(round) = first_violation {
        eprintln!(
            "litmus: sb violated in round {round} ({violations} of {rounds} rounds): rank 0 read y=0 after x=1 and rank 1 read x=0 after y=1"
        );
        return Ok(false);
    }
    Ok(true)
}

/// IRIW. Returns (on rank 0) whether it held.
fn iriw(me: usize, rounds: u64, res: &Results) -> Result<bool, BoxError> {
    let x = Var::alloc(Home::Node(0))?;
    let y = Var::alloc(Home::Node(1))?;
    let mut first_violation = None;
    let mut violations = 0u64;
    // Rounds in which a reader saw exactly one of the two writes.
    let mut partial = 0u64;
    for round in 0..rounds {
        svm::barrier()?;
        if me < 4 {
            jitter(me, round);
        }
        match me {
            0 => x.set(1),
            1 => y.set(1),
            2 => {
                let a = x.get();
                let b = y.get();
                res.set(2, RES_IRIW_FIRST, a);
                res.set(2, RES_IRIW_SECOND, b);
            }
            3 => {
                let c = y.get();
                let d = x.get();
                res.set(3, RES_IRIW_FIRST, c);
                res.set(3, RES_IRIW_SECOND, d);
            }
            _ => {}
        }
        svm::barrier()?;
        match me {
            0 => {
                let (x2, y2) = (res.get(2, RES_IRIW_FIRST), res.get(2, RES_IRIW_SECOND));
                let (y3, x3) = (res.get(3, RES_IRIW_FIRST), res.get(3, RES_IRIW_SECOND));
                if (x2 + y2 == 1) || (y3 + x3 == 1) {
                    partial += 1;
                }
                // Rank 2 saw x's write but not y's; rank 3 saw y's write but not x's.
                if x2 == 1 && y2 == 0 && y3 == 1 && x3 == 0 {
                    violations += 1;
                    first_violation.get_or_insert(round);
                }
                x.set(0);
            }
            1 => y.set(0),
            _ => {}
        }
    }
    svm::barrier()?;
    if me != 0 {
        return Ok(true);
    }
    eprintln!(
        "litmus: iriw: in {partial} of {rounds} rounds a reader saw only one of the two writes"
    );
    if let Some(round) = first_violation {
        eprintln!(
            "litmus: iriw violated in round {round} ({violations} of {rounds} rounds): rank 2 saw x=1 then y=0 while rank 3 saw y=1 then x=0"
        );
        return Ok(false);
    }
    Ok(true)
}

/// `Ok(true)` if nothing was violated (as far as this node knows).
fn run(rounds: u64) -> Result<bool, BoxError> {
    let svm = svm::init()?;
    let me = svm::node_id();
    let nodes = svm::nodes();
    if nodes < 2 {
        println!(
            "litmus: needs at least 2 nodes (e.g. svmrun -n 2 litmus); nothing to test with 1 node"
        );
        svm.finish()?;
        return Ok(true);
    }
    let res = Results {
        slots: svm::alloc_collective::<u64>(nodes * SLOT)?,
    };

    let mp = message_passing(me, rounds, &res)?;
    let sb = store_buffering(me, rounds, &res)?;
    let iriw_ok = if nodes >= 4 {
        Some(iriw(me, rounds, &res)?)
    } else {
        None
    };

    let mut ok = true;
    if me == 0 {
        let mut line = format!(
            "litmus mp={} sb={} rounds={rounds}",
            verdict(mp),
            verdict(sb)
        );
        if let Some(i) = iriw_ok {
            line.push_str(&format!(" iriw={}", verdict(i)));
        }
        println!("{line}");
        ok = mp && sb && iriw_ok.unwrap_or(true);
    }
    svm.finish()?;
    Ok(ok)
}

fn main() -> ExitCode {
    common::main("litmus", USAGE, parse_rounds(DEFAULT_ROUNDS), run)
}
