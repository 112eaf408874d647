//! sc-mw's home migration at barriers (`SVM_HOME_MIGRATION`, jobs of two nodes,
//! `home_mw_migrate.rs`), on both simulators: pages written by the node that is not their
//! home move to it, move back when the old home becomes their only writer, and every read
//! still sees the last write — also writes made right after the barrier at which the page
//! moved, whose diffs may reach the old home before the new home has heard of the move.

use svm_core::protocol::{NodeId, Protocol};
use svm_protocols::engine_sim::EngineCluster;
use svm_protocols::sim::{Cluster, Op, SimConfig, SimError};

mod common;
use common::{addr, locked_increment, sc_mw, sc_sw, scope, PAGE_WORDS};

const PHASES: u64 = 12;
/// Phases in which node 0, not node 1, writes page 2 (its home moves back).
const SWAPPED: std::ops::Range<u64> = 4..8;

fn migrating(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScMultiWriter::new().with_home_migration(true))
}

/// Two nodes, every page homed on node 0.
fn config(seed: u64) -> SimConfig {
    SimConfig::new(2, seed)
        .page_size(8 * PAGE_WORDS)
        .home(|_| 0)
}

fn first(p: u64) -> u64 {
    1_000 + p
}
fn late(p: u64) -> u64 {
    2_000 + p
}
fn second(p: u64) -> u64 {
    3_000 + p
}

/// The programs of the two nodes and the values node 0's reads must see, in order (node 1's
/// reads are those of its increments, which it does not check, and page 2 in the swapped
/// phases, which it does: `want1`).
///
/// Per phase: node 1 writes word 0 of page 1 and (outside `SWAPPED`) word 0 of page 2, both
/// nodes increment the counter, barrier 7; then node 1 writes word 2 of page 1 and releases a
/// lock at once (the release that may race with the move), node 0 reads what node 1 wrote,
/// barrier 8; node 0 reads word 2 of page 1 in the next phase. In `SWAPPED` node 0 writes
/// page 2 and node 1 reads it.
fn programs() -> (Vec<Op>, Vec<Op>, Vec<u64>, Vec<u64>) {
    let (t1w0, t1w2, t2w0) = (addr(1, 0), addr(1, 2), addr(2, 0));
    let (mut t0, mut t1, mut want0, mut want1) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for p in 0..PHASES {
        let swapped = SWAPPED.contains(&p);
        if swapped {
            t0.push(Op::Store {
                addr: t2w0,
                value: second(p),
            });
        } else {
            t1.push(Op::Store {
                addr: t2w0,
                value: second(p),
            });
        }
        t1.push(Op::Store {
            addr: t1w0,
            value: first(p),
        });
        if p > 0 {
            // Written by node 1 after the last phase's barrier 7.
            t0.push(Op::Load { addr: t1w2, reg: 1 });
            want0.push(late(p - 1));
        }
        t0.extend(locked_increment(9, addr(3, 0)));
        t1.extend(locked_increment(9, addr(3, 0)));
        t0.push(Op::BarrierAll(7));
        t1.push(Op::BarrierAll(7));
        t1.push(Op::Store {
            addr: t1w2,
            value: late(p),
        });
        t1.extend(locked_increment(9, addr(3, 0)));
        t0.push(Op::Load { addr: t1w0, reg: 1 });
        want0.push(first(p));
        if swapped {
            t1.push(Op::Load { addr: t2w0, reg: 1 });
            want1.push(second(p));
        } else {
            t0.push(Op::Load { addr: t2w0, reg: 1 });
            want0.push(second(p));
        }
        t0.push(Op::BarrierAll(8));
        t1.push(Op::BarrierAll(8));
    }
    t0.push(Op::BarrierAll(9));
    t1.push(Op::BarrierAll(9));
    for (a, v) in [(t1w2, late(PHASES - 1)), (addr(3, 0), 3 * PHASES)] {
        t0.push(Op::Load { addr: a, reg: 1 });
        want0.push(v);
    }
    (t0, t1, want0, want1)
}

/// Node 0's checked reads, node 1's (without the counter's loads of its increments) and the
/// pages node 0 and node 1 handed on.
type Outcome = (Vec<u64>, Vec<u64>, u64, u64);

/// The loads of a thread's increments (one per increment) left out of its log.
fn without_increments(log: &[u64], checked_after: impl Fn(usize) -> bool) -> Vec<u64> {
    log.iter()
        .enumerate()
        .filter(|&(i, _)| checked_after(i))
        .map(|(_, &v)| v)
        .collect()
}

/// Positions of node 1's checked loads in its log: per phase its two increments' loads come
/// first, then (swapped phases) the load of page 2.
fn node1_checked(log: &[u64]) -> Vec<u64> {
    let mut i = 0;
    let mut keep = Vec::new();
    for p in 0..PHASES {
        i += 2;
        if SWAPPED.contains(&p) {
            keep.push(i);
            i += 1;
        }
    }
    without_increments(log, |j| keep.contains(&j))
}

/// Node 0's log: per phase the load of word 2 (after the first), its increment's load, the
/// loads after barrier 7.
fn node0_checked(log: &[u64]) -> Vec<u64> {
    let mut i = 0;
    let mut skip = Vec::new();
    for p in 0..PHASES {
        i += usize::from(p > 0);
        skip.push(i);
        i += 1 + 1 + usize::from(!SWAPPED.contains(&p));
    }
    without_increments(log, |j| !skip.contains(&j))
}

fn protocol_sim(seed: u64, factory: fn(NodeId) -> Box<dyn Protocol>) -> Result<Outcome, SimError> {
    let mut c = Cluster::new(config(seed), factory);
    let (p0, p1, _, _) = programs();
    let (a, b) = (c.spawn(0, p0), c.spawn(1, p1));
    c.run()?;
    let moved = |n| c.protocol_stats(n).homes_moved;
    Ok((
        node0_checked(c.log(a)),
        node1_checked(c.log(b)),
        moved(0),
        moved(1),
    ))
}

fn engine_sim(seed: u64, factory: fn(NodeId) -> Box<dyn Protocol>) -> Result<Outcome, SimError> {
    let mut c = EngineCluster::new(config(seed), factory).expect("engine simulator");
    let (p0, p1, _, _) = programs();
    let (a, b) = (c.spawn(0, p0), c.spawn(1, p1));
    c.run()?;
    let moved = |n| c.stats(n).homes_moved;
    Ok((
        node0_checked(c.log(a)),
        node1_checked(c.log(b)),
        moved(0),
        moved(1),
    ))
}

/// Runs every seed on both simulators; returns the pages moved by node 0 and by node 1 over
/// all runs, after checking every read.
fn check(name: &str, factory: fn(NodeId) -> Box<dyn Protocol>, seeds: u64) -> (u64, u64) {
    let (_, _, want0, want1) = programs();
    let mut moved = (0, 0);
    for seed in 0..seeds {
        for (kind, got) in [
            ("protocol", protocol_sim(seed, factory)),
            ("engine", engine_sim(seed, factory)),
        ] {
            let (log0, log1, m0, m1) =
                got.unwrap_or_else(|e| panic!("{name}, {kind} simulator, seed {seed}: {e}"));
            assert_eq!(
                (&log0, &log1),
                (&want0, &want1),
                "{name}, {kind} simulator, seed {seed}: a read missed a write"
            );
            moved.0 += m0;
            moved.1 += m1;
        }
    }
    moved
}

#[test]
fn pages_move_to_their_only_writer_and_back_and_every_read_sees_the_last_write() {
    let seeds = 200;
    let (by0, by1) = check("sc-mw", migrating, seeds);
    // Pages 1 and 2 move to node 1 at the first barrier of every run, page 2 back to node 0
    // when node 0 alone writes it and to node 1 again after; the counter's page never moves.
    assert!(
        by0 >= 2 * 2 * seeds,
        "node 0 handed on {by0} pages in {seeds} runs on two simulators"
    );
    assert!(
        by1 >= 2 * seeds,
        "node 1 handed on {by1} pages in {seeds} runs on two simulators"
    );
}

#[test]
fn no_page_moves_when_told_not_to_or_under_other_protocols() {
    for (name, factory) in [
        (
            "sc-mw, SVM_HOME_MIGRATION=0",
            sc_mw as fn(NodeId) -> Box<dyn Protocol>,
        ),
        ("scope", scope),
        ("sc-sw", sc_sw),
    ] {
        assert_eq!(check(name, factory, 50), (0, 0), "{name}");
    }
}
