//! sc-mw's bounded visibility (`SVM_FLUSH_AFTER_US`) and its lock releases that wait (the
//! engine's `SVM_RELEASE_DELAY_US`, jobs of two nodes), on both simulators.
//!
//! The whole conformance suite also runs under sc-mw with the timer on
//! (`conformance/protocols.rs`, `sc_mw_bounded`); these are the programs only it makes work.

use svm_core::protocol::{NodeId, Protocol};
use svm_protocols::engine_sim::EngineCluster;
use svm_protocols::sim::{Cluster, Op, SimConfig, SimError, SimErrorKind};

mod common;
use common::{addr, publish, spin, PAGE_WORDS};

/// The timer's first wait: 30 steps of the engine simulator (1 µs each).
const FLUSH_AFTER_NS: u64 = 30_000;

fn bounded(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScMultiWriter::new().with_flush_after(FLUSH_AFTER_NS))
}

fn plain(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScMultiWriter::new())
}

/// Two nodes; page p is homed on node p % 2.
fn config(seed: u64) -> SimConfig {
    SimConfig::new(2, seed)
        .page_size(8 * PAGE_WORDS)
        .home(|p| (p % 2) as NodeId)
}

/// The programs: node 0 writes a datum on its own page (homed on node 0), then a flag on a
/// page homed on node 1, then waits for node 1's answer; node 1 waits for the flag, reads the
/// datum (after reading it once before: its copy must be invalidated in time), answers. Plain
/// stores and spins: no lock, no barrier, so no release ever flushes a write. Returns node 1's
/// thread, whose log holds the datum as read before and after the flag.
fn flags_without_releases(spawn: &mut dyn FnMut(NodeId, Vec<Op>) -> usize) -> usize {
    let (data, flag, answer) = (addr(2, 0), addr(3, 0), addr(4, 1));
    let [datum, raise] = publish(data, flag);
    spawn(0, vec![datum, raise, spin(answer, 1)]);
    spawn(
        1,
        vec![
            // A copy of the datum's page from before the write, which must be gone in time.
            Op::Load { addr: data, reg: 0 },
            spin(flag, 1),
            Op::Load { addr: data, reg: 0 },
            Op::Store {
                addr: answer,
                value: 1,
            },
        ],
    )
}

fn protocol_sim(seed: u64, factory: fn(NodeId) -> Box<dyn Protocol>) -> Result<Vec<u64>, SimError> {
    let mut c = Cluster::new(config(seed), factory);
    let reader = flags_without_releases(&mut |n, p| c.spawn(n, p));
    c.run()?;
    Ok(c.log(reader).to_vec())
}

fn engine_sim(seed: u64, factory: fn(NodeId) -> Box<dyn Protocol>) -> Result<Vec<u64>, SimError> {
    let mut c = EngineCluster::new(config(seed), factory).expect("engine simulator");
    let reader = flags_without_releases(&mut |n, p| c.spawn(n, p));
    c.run()?;
    Ok(c.log(reader).to_vec())
}

/// With the timer the flag arrives, and the datum with it: the flush sends the diff of the
/// flag's page after the invalidation of node 1's stale copy of the datum's page (before that
/// order, ~0.5 % of the seeds read the flag and then the stale datum on both simulators).
#[test]
fn flags_set_without_a_release_are_seen_and_so_is_what_was_written_before() {
    let mut stale_copies = 0;
    for seed in 0..1000 {
        for (kind, got) in [
            ("protocol", protocol_sim(seed, bounded)),
            ("engine", engine_sim(seed, bounded)),
        ] {
            match got {
                Ok(log) => {
                    assert_eq!(
                        log.last(),
                        Some(&42),
                        "{kind} simulator, seed {seed}: the flag came before the datum ({log:?})"
                    );
                    stale_copies += u32::from(log[0] == 0);
                }
                Err(e) => panic!("{kind} simulator, seed {seed}: {e}"),
            }
        }
    }
    assert!(
        stale_copies > 100,
        "node 1 rarely held a copy from before the write ({stale_copies} runs): the test does not test"
    );
}

#[test]
fn without_the_timer_such_flags_are_never_seen() {
    for seed in 0..3 {
        for (kind, got) in [
            ("protocol", protocol_sim(seed, plain)),
            ("engine", engine_sim(seed, plain)),
        ] {
            match got {
                Err(SimError {
                    kind: SimErrorKind::SpinBound { .. },
                    ..
                }) => {}
                other => panic!(
                    "{kind} simulator, seed {seed}: plain sc-mw let a flag through without a \
                     release: {other:?}"
                ),
            }
        }
    }
}

/// Node 0 raises a flag on a page it is home of, round after round, and node 1 answers on
/// another of node 0's pages. Written in two flush intervals in a row, the flag's page stays
/// writable across flushes (sticky home pages) and takes no write fault any more: the timer
/// must run for it all the same, or node 1 never sees the later rounds.
#[test]
fn a_flag_on_a_home_page_that_stays_writable_still_arrives() {
    const ROUNDS: u64 = 6;
    let (flag, answer) = (addr(2, 0), addr(4, 3));
    for seed in 0..100 {
        for kind in ["protocol", "engine"] {
            let mut writer = Vec::new();
            let mut reader = Vec::new();
            for k in 1..=ROUNDS {
                writer.extend([
                    Op::Store {
                        addr: flag,
                        value: k,
                    },
                    spin(answer, k),
                ]);
                reader.extend([
                    spin(flag, k),
                    Op::Store {
                        addr: answer,
                        value: k,
                    },
                ]);
            }
            let got = if kind == "protocol" {
                let mut c = Cluster::new(config(seed), bounded);
                c.spawn(0, writer);
                c.spawn(1, reader);
                c.run().map(|_| ())
            } else {
                let mut c = EngineCluster::new(config(seed), bounded).expect("engine simulator");
                c.spawn(0, writer);
                c.spawn(1, reader);
                c.run().map(|_| ())
            };
            if let Err(e) = got {
                panic!("{kind} simulator, seed {seed}: {e}");
            }
        }
    }
}

/// Node 0 takes and releases one lock 40 times, writing a page homed on node 1 each time, while
/// node 1 waits at a barrier; then node 1 reads the page. In a job of two nodes the lock's
/// token stays on node 0, so its releases leave their flush to later — the barrier arrival or
/// the engine's release delay, which the simulator lets run out at any step — and node 1 reads
/// the last datum written. (That fewer diffs go out is counted with real processes,
/// `tests/tests/protocols.rs`.)
#[test]
fn lock_releases_whose_token_stays_are_flushed_later() {
    const ROUNDS: u64 = 40;
    for seed in 0..50 {
        let mut c = EngineCluster::new(config(seed), plain).expect("engine simulator");
        let page = addr(3, 2);
        let mut prog = Vec::new();
        for i in 1..=ROUNDS {
            prog.extend([
                Op::Lock(1),
                Op::Store {
                    addr: page,
                    value: i,
                },
                Op::Unlock(1),
            ]);
        }
        prog.push(Op::Barrier { id: 9, count: 2 });
        c.spawn(0, prog);
        let reader = c.spawn(
            1,
            vec![
                Op::Barrier { id: 9, count: 2 },
                Op::Load { addr: page, reg: 0 },
            ],
        );
        if let Err(e) = c.run() {
            panic!("seed {seed}: {e}");
        }
        assert_eq!(c.log(reader), [ROUNDS], "seed {seed}");
        let st = c.stats(0);
        // A release right after a flush the delay ran out for has nothing to flush, and
        // runs at once.
        assert!(
            st.releases_deferred >= ROUNDS / 2,
            "seed {seed}: {} of {ROUNDS} releases deferred",
            st.releases_deferred
        );
    }
}
