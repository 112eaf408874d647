//! The protocol conformance suite: every protocol runs the same programs in the simulated
//! cluster over many seeds (random message delays and interleavings).
//!
//! A protocol joins the suite with one line at the bottom of this file:
//! `conformance_suite!(module_name, Subject { .. })`. Litmus tests that race (message passing
//! by spinning on a flag, store buffering, IRIW) only run for protocols that promise sequential
//! consistency to racy programs (`sc_for_racy`); the lock, barrier, data-race-free, lock-scope,
//! false-sharing and notice-bound tests run for every protocol (their programs are
//! data-race-free and use locks only for what scope consistency promises).
//!
//! `SVM_SIM_SEEDS=n` changes the number of seeds per test (default 1000).
//! `SVM_DEBUG_SEED=n` makes the random DRF test print seed n's program and, on a wrong result,
//! the cluster's state with a long event trace.

use std::collections::{BTreeMap, HashMap, HashSet};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use svm_core::protocol::ProtocolStats;
use svm_core::protocol::{NodeId, Protocol};
use svm_core::sync::SyncState;
use svm_protocols::engine_sim::EngineCluster;
use svm_protocols::sim::{Cluster, Discard, Op, SimConfig, SimError, ThreadId};

mod common;
use common::{addr, locked_increment, publish, sc_mw, sc_sw, scope, spin, PAGE_WORDS};

/// A protocol under test.
pub struct Subject {
    pub name: &'static str,
    pub factory: fn(NodeId) -> Box<dyn Protocol>,
    /// Sequential consistency for every program, racy ones included.
    pub sc_for_racy: bool,
    /// Check the single-writer/multiple-reader invariant after every simulated step.
    pub single_writer: bool,
    /// What `SetAccess None` does to a node's copy.
    pub discard: Discard,
    /// Flushes writes at any step, not only at releases (sc-mw's bounded visibility timer,
    /// which the protocol simulator fires at any step): no bound on page transfers holds.
    pub flushes_any_time: bool,
}

fn seeds() -> u64 {
    std::env::var("SVM_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000)
}

/// What the suite's programs run on: the protocol-level cluster (`sim`, which also checks
/// what only a model can see: notices kept, lock overtakes, a crashed node) or the real engine
/// of every node (`engine_sim`). Tests that need only programs and their results run on both.
pub trait Sim: Sized {
    const KIND: &'static str;
    fn build(s: &Subject, cfg: SimConfig) -> Self;
    fn spawn(&mut self, node: NodeId, prog: Vec<Op>) -> ThreadId;
    fn run_programs(&mut self) -> Result<(), SimError>;
    fn log(&self, t: ThreadId) -> &[u64];
    fn regs(&self, t: ThreadId) -> &[u64];
    /// The same cluster recording a long event trace (`SVM_DEBUG_SEED`), where it keeps one.
    fn traced(self, s: &Subject) -> Self;
    fn dump_state(&self) -> String;
    /// Messages that carried a page, over the whole run.
    fn pages_sent(&self) -> u64;
    fn with_sync<R>(&self, node: NodeId, f: impl FnOnce(&SyncState) -> R) -> R;
    /// The most write notices held at lock managers at once.
    fn peak_lock_notices(&self) -> u64;
    /// The most grants of a lock to other nodes while a node waited for it.
    fn max_lock_overtakes(&self) -> u64;
    fn fast_lock_ops(&self) -> u64;
    fn protocol_stats(&self, node: NodeId) -> ProtocolStats;
    fn describe(&self, page: u64) -> String;
}

impl Sim for Cluster {
    const KIND: &'static str = "model";
    fn build(s: &Subject, cfg: SimConfig) -> Self {
        let c = Cluster::new(cfg, s.factory);
        assert_eq!(c.protocol(0).name(), s.name);
        c
    }
    fn spawn(&mut self, node: NodeId, prog: Vec<Op>) -> ThreadId {
        Cluster::spawn(self, node, prog)
    }
    fn run_programs(&mut self) -> Result<(), SimError> {
        self.run().map(|_| ())
    }
    fn log(&self, t: ThreadId) -> &[u64] {
        Cluster::log(self, t)
    }
    fn regs(&self, t: ThreadId) -> &[u64] {
        Cluster::regs(self, t)
    }
    fn traced(self, s: &Subject) -> Self {
        Cluster::new(self.config().clone().trace(100_000), s.factory)
    }
    fn dump_state(&self) -> String {
        self.dump_now("debug")
    }
    fn pages_sent(&self) -> u64 {
        self.stats().pages_sent
    }
    fn with_sync<R>(&self, node: NodeId, f: impl FnOnce(&SyncState) -> R) -> R {
        f(self.sync_state(node))
    }
    fn peak_lock_notices(&self) -> u64 {
        self.stats().peak_lock_notices
    }
    fn max_lock_overtakes(&self) -> u64 {
        self.stats().max_lock_overtakes
    }
    fn fast_lock_ops(&self) -> u64 {
        self.stats().fast_lock_ops
    }
    fn protocol_stats(&self, node: NodeId) -> ProtocolStats {
        Cluster::protocol_stats(self, node)
    }
    fn describe(&self, page: u64) -> String {
        Cluster::describe(self, page)
    }
}

impl Sim for EngineCluster {
    const KIND: &'static str = "engine";
    fn build(s: &Subject, cfg: SimConfig) -> Self {
        match EngineCluster::new(cfg, s.factory) {
            Ok(c) => c,
            Err(e) => panic!("{} / engine simulator: {e}", s.name),
        }
    }
    fn spawn(&mut self, node: NodeId, prog: Vec<Op>) -> ThreadId {
        EngineCluster::spawn(self, node, prog)
    }
    fn run_programs(&mut self) -> Result<(), SimError> {
        self.run().map(|_| ())
    }
    fn log(&self, t: ThreadId) -> &[u64] {
        EngineCluster::log(self, t)
    }
    fn regs(&self, t: ThreadId) -> &[u64] {
        EngineCluster::regs(self, t)
    }
    fn traced(self, _: &Subject) -> Self {
        self
    }
    fn dump_state(&self) -> String {
        self.dump_now()
    }
    fn pages_sent(&self) -> u64 {
        (0..self.nodes()).map(|n| self.stats(n).pages_served).sum()
    }
    fn with_sync<R>(&self, node: NodeId, f: impl FnOnce(&SyncState) -> R) -> R {
        EngineCluster::with_sync(self, node, f)
    }
    fn peak_lock_notices(&self) -> u64 {
        EngineCluster::peak_lock_notices(self)
    }
    fn max_lock_overtakes(&self) -> u64 {
        EngineCluster::max_lock_overtakes(self)
    }
    fn fast_lock_ops(&self) -> u64 {
        EngineCluster::fast_lock_ops(self)
    }
    fn protocol_stats(&self, node: NodeId) -> ProtocolStats {
        let st = self.stats(node);
        ProtocolStats {
            pages_paired: st.pages_paired,
            migratory_upgrades: st.migratory_upgrades,
            requests_held: st.requests_held,
            requests_kept_unused: st.requests_kept_unused,
            pages_written_ahead: st.pages_written_ahead,
            pages_pushed: st.pages_pushed,
            copies_dropped: st.copies_dropped,
            ..ProtocolStats::default()
        }
    }
    fn describe(&self, page: u64) -> String {
        EngineCluster::describe(self, page)
    }
}

/// A cluster of `nodes` nodes whose pages get random homes drawn from `seed`.
fn cluster<C: Sim>(s: &Subject, nodes: NodeId, seed: u64) -> C {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x005e_ed0f_4053);
    let homes: Vec<NodeId> = (0..16).map(|_| rng.gen_range(0..nodes)).collect();
    let cfg = SimConfig::new(nodes, seed)
        .page_size(8 * PAGE_WORDS)
        .home(move |p| homes[p as usize % homes.len()])
        .check_single_writer(s.single_writer)
        .discard(s.discard);
    C::build(s, cfg)
}

fn run<C: Sim>(s: &Subject, c: &mut C, test: &str) {
    if let Err(e) = c.run_programs() {
        panic!("{} / {test} ({} simulator): {e}", s.name, C::KIND);
    }
}

/// The reader's half: spin until the flag is 1, then load the datum into `reg`.
fn consume(data: u64, flag: u64, reg: usize) -> [Op; 2] {
    [spin(flag, 1), Op::Load { addr: data, reg }]
}

/// Fails unless the racy litmus outcomes were actually explored.
fn assert_explored<T: std::fmt::Debug>(
    s: &Subject,
    test: &str,
    outcomes: &BTreeMap<T, u64>,
    at_least: usize,
) {
    assert!(
        outcomes.len() >= at_least,
        "{} / {test}: only {} outcome(s) over all seeds ({outcomes:?}); the simulator is not interleaving",
        s.name,
        outcomes.len()
    );
}

// ---------------------------------------------------------------- litmus tests

/// Message passing: data then flag; a reader that saw the flag must see the data.
pub fn message_passing<C: Sim>(s: &Subject) {
    if !s.sc_for_racy {
        return;
    }
    let mut first_reads = BTreeMap::new();
    let mut observer = BTreeMap::new();
    for seed in 0..seeds() {
        let same_page = seed % 2 == 0;
        let (data, flag) = if same_page {
            (addr(1, 0), addr(1, 5))
        } else {
            (addr(1, 0), addr(2, 0))
        };
        let mut c = cluster::<C>(s, 3, seed);
        c.spawn(0, publish(data, flag).to_vec());
        // A possibly stale early copy first, which must be invalidated in time.
        let mut r = vec![Op::Load { addr: data, reg: 0 }];
        r.extend(consume(data, flag, 1));
        let reader = c.spawn(1, r);
        let obs = c.spawn(
            2,
            vec![
                Op::Load { addr: flag, reg: 0 },
                Op::Load { addr: data, reg: 1 },
            ],
        );
        run(s, &mut c, "message passing");
        let r = c.log(reader);
        assert_eq!(
            r[1], 42,
            "{} / message passing, seed {seed}: reader saw the flag but not the data",
            s.name
        );
        let o = c.log(obs);
        assert!(
            o[0] == 0 || o[1] == 42,
            "{} / message passing, seed {seed}: observer saw flag, data {o:?}",
            s.name
        );
        *first_reads.entry(r[0]).or_insert(0) += 1;
        *observer.entry(o.to_vec()).or_insert(0) += 1;
    }
    assert_explored(s, "message passing (early read)", &first_reads, 2);
    assert_explored(s, "message passing (observer)", &observer, 2);
}

/// Store buffering (Dekker): x=1; r1=y ‖ y=1; r2=x never gives r1 = r2 = 0.
pub fn store_buffering<C: Sim>(s: &Subject) {
    if !s.sc_for_racy {
        return;
    }
    for same_page in [false, true] {
        let mut outcomes = BTreeMap::new();
        for seed in 0..seeds() {
            let (x, y) = if same_page {
                (addr(1, 1), addr(1, 6))
            } else {
                (addr(1, 1), addr(2, 6))
            };
            let mut c = cluster::<C>(s, 3, seed);
            let warm = seed % 3 == 0;
            let prog = |mine: u64, other: u64| {
                let mut p = Vec::new();
                if warm {
                    p.push(Op::Load {
                        addr: other,
                        reg: 1,
                    });
                    p.push(Op::Load { addr: mine, reg: 1 });
                }
                p.push(Op::Store {
                    addr: mine,
                    value: 1,
                });
                p.push(Op::Load {
                    addr: other,
                    reg: 0,
                });
                p
            };
            let t0 = c.spawn(0, prog(x, y));
            let t1 = c.spawn(1, prog(y, x));
            run(s, &mut c, "store buffering");
            let (r1, r2) = (*c.log(t0).last().unwrap(), *c.log(t1).last().unwrap());
            assert!(
                r1 == 1 || r2 == 1,
                "{} / store buffering (same page: {same_page}), seed {seed}: r1 = r2 = 0",
                s.name
            );
            *outcomes.entry((r1, r2)).or_insert(0) += 1;
        }
        assert_explored(
            s,
            &format!("store buffering (same page: {same_page})"),
            &outcomes,
            2,
        );
    }
}

/// Independent reads of independent writes: two readers never see the writes in opposite
/// orders.
pub fn iriw<C: Sim>(s: &Subject) {
    if !s.sc_for_racy {
        return;
    }
    let mut outcomes = BTreeMap::new();
    for seed in 0..seeds() {
        let (x, y) = (addr(1, 2), addr(2, 3));
        let mut c = cluster::<C>(s, 4, seed);
        c.spawn(0, vec![Op::Store { addr: x, value: 1 }]);
        c.spawn(1, vec![Op::Store { addr: y, value: 1 }]);
        let a = c.spawn(
            2,
            vec![Op::Load { addr: x, reg: 0 }, Op::Load { addr: y, reg: 1 }],
        );
        let b = c.spawn(
            3,
            vec![Op::Load { addr: y, reg: 0 }, Op::Load { addr: x, reg: 1 }],
        );
        run(s, &mut c, "IRIW");
        let (ra, rb) = (c.log(a).to_vec(), c.log(b).to_vec());
        assert!(
            !(ra == [1, 0] && rb == [1, 0]),
            "{} / IRIW, seed {seed}: reader 2 saw x before y, reader 3 saw y before x",
            s.name
        );
        *outcomes.entry((ra, rb)).or_insert(0) += 1;
    }
    assert_explored(s, "IRIW", &outcomes, 3);
}

// ---------------------------------------------------------------- synchronization

/// Lock-protected counters, several threads per node (cohort hand-offs), counters sharing pages.
pub fn lock_counters<C: Sim>(s: &Subject) {
    // (page, word, lock) of each counter: two share a page under different locks.
    const COUNTERS: [(u64, usize, u64); 3] = [(1, 0, 10), (1, 3, 11), (2, 7, 12)];
    const ROUNDS: usize = 4;
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 3) as NodeId;
        let per_node = 1 + (seed % 2) as usize * 2;
        // One lock for every counter: long runs of local hand-offs (the cohort bound).
        let big_lock = seed % 4 < 2;
        let total = nodes as usize * per_node;
        let mut c = cluster::<C>(s, nodes, seed);
        let mut expected = [0u64; 3];
        let mut reader = None;
        for j in 0..total {
            let mut p = Vec::new();
            for round in 0..ROUNDS {
                let k = (j + round) % COUNTERS.len();
                let (page, word, own_lock) = COUNTERS[k];
                let lock = if big_lock { 10 } else { own_lock };
                let inc = 1 + j as u64;
                expected[k] += inc;
                p.extend([
                    Op::Lock(lock),
                    Op::Load {
                        addr: addr(page, word),
                        reg: 0,
                    },
                    Op::AddImm { reg: 0, imm: inc },
                    Op::StoreReg {
                        addr: addr(page, word),
                        reg: 0,
                    },
                    Op::Unlock(lock),
                ]);
            }
            p.push(Op::Barrier {
                id: 3,
                count: total as u32,
            });
            if j == total - 1 {
                p.extend(COUNTERS.iter().map(|&(page, word, _)| Op::Load {
                    addr: addr(page, word),
                    reg: 1,
                }));
            }
            let t = c.spawn((j % nodes as usize) as NodeId, p);
            if j == total - 1 {
                reader = Some(t);
            }
        }
        run(s, &mut c, "lock counters");
        let log = c.log(reader.unwrap());
        assert_eq!(
            &log[log.len() - 3..],
            &expected,
            "{} / lock counters, seed {seed} ({nodes} nodes x {per_node} threads): lost increments",
            s.name
        );
    }
}

/// Pages homed on one node, written by the others, read in order by the home: the manager
/// reads pages another node owns, which sc-sw's read-ahead brings from the owner
/// (`AheadAsk`/`AheadCopy`). 2 to 4 nodes; all pages homed at node 0; each other node owns a
/// run of pages, which it rewrites (word 0) in every round; after a barrier node 0 reads word
/// 0 of every page in order while the writers store into word 1 of their pages (the same
/// pages, other words: data-race-free, but the owners take their pages back while copies are
/// on their way to the home) and into word 2 of the next writer's pages (a third node takes a
/// page from its owner meanwhile). Node 0 must read the round's values; words 1 and 2 are
/// checked at the end.
pub fn home_reads_pages_others_wrote<C: Sim>(s: &Subject) {
    const ROUNDS: u64 = 3;
    const PER_WRITER: u64 = 4;
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 3) as NodeId;
        let writers = nodes as u64 - 1;
        let pages = writers * PER_WRITER;
        let page_of = |w: u64, k: u64| 1 + (w - 1) * PER_WRITER + k;
        let value = |round: u64, page: u64| 100 * (round + 1) + page;
        let cfg = SimConfig::new(nodes, seed)
            .page_size(8 * PAGE_WORDS)
            .home(|_| 0)
            .check_single_writer(s.single_writer)
            .discard(s.discard);
        let mut c = C::build(s, cfg);
        let barrier = Op::Barrier {
            id: 1,
            count: nodes as u32,
        };
        let mut reader = Vec::new();
        for _ in 0..ROUNDS {
            reader.push(barrier);
            reader.extend((1..=pages).map(|p| Op::Load {
                addr: addr(p, 0),
                reg: 0,
            }));
            reader.push(barrier);
        }
        reader.extend((1..=pages).flat_map(|p| {
            [1, 2].map(|word| Op::Load {
                addr: addr(p, word),
                reg: 0,
            })
        }));
        let home = c.spawn(0, reader);
        for w in 1..=writers {
            let mut prog = Vec::new();
            for round in 0..ROUNDS {
                prog.extend((0..PER_WRITER).map(|k| Op::Store {
                    addr: addr(page_of(w, k), 0),
                    value: value(round, page_of(w, k)),
                }));
                prog.push(barrier);
                // Taken back while the home reads word 0 (order varies with the seed), and
                // the next writer's pages taken from it (word 2).
                let next = w % writers + 1;
                for k in (0..PER_WRITER).rev() {
                    let (mine, theirs) = (
                        page_of(w, (k + seed) % PER_WRITER),
                        page_of(next, (k + seed + 1) % PER_WRITER),
                    );
                    prog.push(Op::Store {
                        addr: addr(mine, 1),
                        value: value(round, mine) + 1,
                    });
                    prog.push(Op::Store {
                        addr: addr(theirs, 2),
                        value: value(round, theirs) + 2,
                    });
                }
                prog.push(barrier);
            }
            c.spawn(w as NodeId, prog);
        }
        run(s, &mut c, "home reads pages others wrote");
        let want: Vec<u64> = (0..ROUNDS)
            .flat_map(|round| (1..=pages).map(move |p| value(round, p)))
            .chain((1..=pages).flat_map(|p| [1, 2].map(|word| value(ROUNDS - 1, p) + word)))
            .collect();
        assert_eq!(
            c.log(home),
            &want[..],
            "{} / home reads pages others wrote, seed {seed}",
            s.name
        );
    }
}

/// Barrier phases: every thread writes its slot, barrier, reads every slot, barrier.
pub fn barrier_phases<C: Sim>(s: &Subject) {
    const PHASES: u64 = 3;
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 2) as NodeId;
        let total = nodes as usize * 2;
        let slot = |j: usize| addr(1 + (j % 2) as u64, j / 2);
        let value = |p: u64, j: usize| p * 100 + j as u64 + 1;
        let mut c = cluster::<C>(s, nodes, seed);
        let threads: Vec<ThreadId> = (0..total)
            .map(|j| {
                let mut prog = Vec::new();
                for p in 0..PHASES {
                    prog.push(Op::Store {
                        addr: slot(j),
                        value: value(p, j),
                    });
                    prog.push(Op::Barrier {
                        id: 7,
                        count: total as u32,
                    });
                    prog.extend((0..total).map(|i| Op::Load {
                        addr: slot((i + j) % total),
                        reg: 0,
                    }));
                    prog.push(Op::Barrier {
                        id: 8,
                        count: total as u32,
                    });
                }
                c.spawn((j % nodes as usize) as NodeId, prog)
            })
            .collect();
        run(s, &mut c, "barrier phases");
        for (j, &t) in threads.iter().enumerate() {
            let want: Vec<u64> = (0..PHASES)
                .flat_map(|p| (0..total).map(move |i| value(p, (i + j) % total)))
                .collect();
            assert_eq!(
                c.log(t),
                &want[..],
                "{} / barrier phases, seed {seed}, thread {j}",
                s.name
            );
        }
    }
}

/// Barrier phases through the all-nodes (dissemination) barrier, as the engine runs the
/// global barrier: one thread per node, 2 to 5 nodes (odd counts: rounds wrap around), every
/// thread writes its slot, barrier, reads every slot, barrier; the same two barrier ids are
/// used again in every phase, so a node that left an episode early sends the next one's round
/// messages while others are still in the last.
pub fn all_nodes_barrier_phases<C: Sim>(s: &Subject) {
    const PHASES: u64 = 4;
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 4) as NodeId;
        let total = nodes as usize;
        // Slots on two pages: several nodes write the same page (false sharing).
        let slot = |j: usize| addr(1 + (j % 2) as u64, j / 2);
        let value = |p: u64, j: usize| p * 100 + j as u64 + 1;
        let mut c = cluster::<C>(s, nodes, seed);
        let threads: Vec<ThreadId> = (0..total)
            .map(|j| {
                let mut prog = Vec::new();
                for p in 0..PHASES {
                    prog.push(Op::Store {
                        addr: slot(j),
                        value: value(p, j),
                    });
                    prog.push(Op::BarrierAll(7));
                    prog.extend((0..total).map(|i| Op::Load {
                        addr: slot((i + j) % total),
                        reg: 0,
                    }));
                    prog.push(Op::BarrierAll(8));
                }
                c.spawn(j as NodeId, prog)
            })
            .collect();
        run(s, &mut c, "all-nodes barrier phases");
        for (j, &t) in threads.iter().enumerate() {
            let want: Vec<u64> = (0..PHASES)
                .flat_map(|p| (0..total).map(move |i| value(p, (i + j) % total)))
                .collect();
            assert_eq!(
                c.log(t),
                &want[..],
                "{} / all-nodes barrier phases, {nodes} nodes, seed {seed}, thread {j}",
                s.name
            );
        }
    }
}

/// Counted barriers of different subsets of the nodes, 3 nodes, one thread each. Every node
/// first reads a word (so each holds a copy of its page), then all three meet (barrier 10),
/// then node 0 writes the word and meets node 1 alone (barrier 11). Node 2, which was not
/// there, must read node 0's value when it
/// - meets node 0 (barrier 12): the write precedes a barrier they share;
/// - meets node 1 only (barrier 13): the write reached node 1 through barrier 11, and scope
///   consistency makes every write that precedes a barrier visible to its participants;
/// - meets both at a barrier of every node (barrier 14).
///
/// The homes are random (per seed), so the word's page may be homed on any of the three.
pub fn subset_barriers<C: Sim>(s: &Subject) {
    let word = addr(1, 0);
    let all = |id| Op::Barrier { id, count: 3 };
    let pair = |id| Op::Barrier { id, count: 2 };
    let read = Op::Load { addr: word, reg: 0 };
    let write = Op::Store {
        addr: word,
        value: 5,
    };
    let cases: [(&str, Op, [Vec<Op>; 2]); 3] = [
        ("direct", pair(12), [vec![pair(12)], vec![]]),
        ("through node 1", pair(13), [vec![], vec![pair(13)]]),
        ("every node", all(14), [vec![all(14)], vec![all(14)]]),
    ];
    for seed in 0..seeds() {
        for (case, meet, [then0, then1]) in &cases {
            let mut c = cluster::<C>(s, 3, seed);
            let mut p0 = vec![read, all(10), write, pair(11)];
            p0.extend(then0.iter().copied());
            let mut p1 = vec![read, all(10), pair(11)];
            p1.extend(then1.iter().copied());
            c.spawn(0, p0);
            c.spawn(1, p1);
            let reader = c.spawn(2, vec![read, all(10), *meet, read]);
            run(s, &mut c, "subset barriers");
            assert_eq!(
                c.log(reader),
                &[0, 5],
                "{} / subset barriers ({case}), seed {seed}: node 2 read [before, after]",
                s.name
            );
        }
    }
}

// ---------------------------------------------------------------- random DRF programs

/// A random data-race-free program: per thread, the ops and which of its loads are
/// deterministic (a counter read inside a critical section is not: it depends on the order in
/// which threads took the lock).
struct DrfProgram {
    nodes: NodeId,
    /// Per thread: node, ops.
    threads: Vec<(NodeId, Vec<Op>)>,
    /// Per thread: for each load, whether its value is deterministic.
    care: Vec<Vec<bool>>,
    /// Per thread: the ops of each phase (for the sequential run).
    phases: Vec<Vec<Vec<Op>>>,
}

const DRF_WORDS: usize = 2 * PAGE_WORDS;
const DRF_COUNTERS: usize = 4;
const DRF_PHASES: usize = 3;

fn drf_program(seed: u64) -> DrfProgram {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1f);
    let nodes: NodeId = rng.gen_range(2..=4);
    let per_node = rng.gen_range(1..=2);
    let total = nodes as usize * per_node;
    // Word roles: a few lock-protected counters among plain data words, on the same pages.
    let mut words: Vec<usize> = (0..DRF_WORDS).collect();
    for i in (1..words.len()).rev() {
        words.swap(i, rng.gen_range(0..=i));
    }
    let counters: Vec<usize> = words[..DRF_COUNTERS].to_vec();
    let data: Vec<usize> = words[DRF_COUNTERS..].to_vec();
    let waddr = |w: usize| addr(1 + (w / PAGE_WORDS) as u64, w % PAGE_WORDS);
    let barrier = Op::Barrier {
        id: 50,
        count: total as u32,
    };

    let mut phases = vec![Vec::new(); total];
    let mut care = vec![Vec::new(); total];
    for _ in 0..DRF_PHASES {
        // Each data word is written by one thread this phase, or read-only.
        let writer: Vec<Option<usize>> = data
            .iter()
            .map(|_| {
                if rng.gen_bool(0.5) {
                    Some(rng.gen_range(0..total))
                } else {
                    None
                }
            })
            .collect();
        let read_only: Vec<usize> = data
            .iter()
            .zip(&writer)
            .filter(|(_, w)| w.is_none())
            .map(|(&d, _)| d)
            .collect();
        for t in 0..total {
            let own: Vec<usize> = data
                .iter()
                .zip(&writer)
                .filter(|(_, w)| **w == Some(t))
                .map(|(&d, _)| d)
                .collect();
            let readable: Vec<usize> = read_only.iter().chain(&own).copied().collect();
            let mut ops = Vec::new();
            for _ in 0..rng.gen_range(2..=5) {
                match rng.gen_range(0..4) {
                    0 => {
                        let k = rng.gen_range(0..DRF_COUNTERS);
                        let lock = 200 + k as u64;
                        ops.extend([
                            Op::Lock(lock),
                            Op::Load {
                                addr: waddr(counters[k]),
                                reg: 0,
                            },
                            Op::AddImm {
                                reg: 0,
                                imm: rng.gen_range(1..100),
                            },
                            Op::StoreReg {
                                addr: waddr(counters[k]),
                                reg: 0,
                            },
                            Op::Unlock(lock),
                        ]);
                        care[t].push(false);
                    }
                    1 if !own.is_empty() => {
                        let w = own[rng.gen_range(0..own.len())];
                        ops.push(Op::Store {
                            addr: waddr(w),
                            value: rng.gen_range(1..1_000_000),
                        });
                    }
                    2 if !own.is_empty() && !readable.is_empty() => {
                        let src = readable[rng.gen_range(0..readable.len())];
                        let dst = own[rng.gen_range(0..own.len())];
                        ops.extend([
                            Op::Load {
                                addr: waddr(src),
                                reg: 1,
                            },
                            Op::AddImm {
                                reg: 1,
                                imm: rng.gen_range(1..1000),
                            },
                            Op::StoreReg {
                                addr: waddr(dst),
                                reg: 1,
                            },
                        ]);
                        care[t].push(true);
                    }
                    _ if !readable.is_empty() => {
                        let src = readable[rng.gen_range(0..readable.len())];
                        ops.push(Op::Load {
                            addr: waddr(src),
                            reg: 2,
                        });
                        care[t].push(true);
                    }
                    _ => {}
                }
            }
            ops.push(barrier);
            phases[t].push(ops);
        }
    }
    // Finally the last thread reads every word.
    let last = total - 1;
    let dump: Vec<Op> = (0..DRF_WORDS)
        .map(|w| Op::Load {
            addr: waddr(w),
            reg: 3,
        })
        .collect();
    care[last].extend(vec![true; DRF_WORDS]);
    phases[last].push(dump);
    let threads = phases
        .iter()
        .enumerate()
        .map(|(t, ph)| ((t % nodes as usize) as NodeId, ph.concat()))
        .collect();
    DrfProgram {
        nodes,
        threads,
        care,
        phases,
    }
}

/// Runs the program sequentially: phase by phase, thread after thread. Returns every thread's
/// load log.
fn sequential_run(p: &DrfProgram) -> Vec<Vec<u64>> {
    let mut mem: HashMap<u64, u64> = HashMap::new();
    let mut regs = vec![[0u64; 4]; p.threads.len()];
    let mut logs = vec![Vec::new(); p.threads.len()];
    let phases = p.phases.iter().map(Vec::len).max().unwrap_or(0);
    for ph in 0..phases {
        for (t, tp) in p.phases.iter().enumerate() {
            for op in tp.get(ph).into_iter().flatten() {
                match *op {
                    Op::Load { addr, reg } => {
                        let v = mem.get(&addr).copied().unwrap_or(0);
                        regs[t][reg] = v;
                        logs[t].push(v);
                    }
                    Op::Store { addr, value } => {
                        mem.insert(addr, value);
                    }
                    Op::StoreReg { addr, reg } => {
                        mem.insert(addr, regs[t][reg]);
                    }
                    Op::AddImm { reg, imm } => regs[t][reg] = regs[t][reg].wrapping_add(imm),
                    Op::Lock(_)
                    | Op::TryLock { .. }
                    | Op::Unlock(_)
                    | Op::Barrier { .. }
                    | Op::BarrierAll(_) => {}
                    Op::SpinUntilEq { .. } | Op::Crash => {
                        unreachable!("DRF programs do not spin or crash")
                    }
                }
            }
        }
    }
    logs
}

/// Random data-race-free programs (lock-protected read-modify-writes, barrier-separated
/// phases of exclusive writes and shared reads) must end exactly as their sequential run.
pub fn random_drf<C: Sim>(s: &Subject) {
    for seed in 0..seeds() {
        let p = drf_program(seed);
        let want = sequential_run(&p);
        let mut c = cluster::<C>(s, p.nodes, seed);
        if std::env::var("SVM_DEBUG_SEED").ok() == Some(seed.to_string()) {
            c = c.traced(s);
            for (t, (node, ops)) in p.threads.iter().enumerate() {
                eprintln!("thread {t} node {node}: {ops:?}");
            }
        }
        let tids: Vec<ThreadId> = p
            .threads
            .iter()
            .map(|(node, ops)| c.spawn(*node, ops.clone()))
            .collect();
        run(s, &mut c, "random DRF");
        for (t, &tid) in tids.iter().enumerate() {
            let got = c.log(tid);
            assert_eq!(
                got.len(),
                want[t].len(),
                "{} / random DRF, seed {seed}, thread {t}: load count",
                s.name
            );
            for (i, ((g, w), care)) in got.iter().zip(&want[t]).zip(&p.care[t]).enumerate() {
                if *care && g != w && std::env::var("SVM_DEBUG_SEED").is_ok() {
                    eprintln!("{}", c.dump_state());
                }
                assert!(
                    !care || g == w,
                    "{} / random DRF, seed {seed}, thread {t}, load {i}: got {g}, the sequential run gives {w}",
                    s.name
                );
            }
        }
    }
}

/// The random programs are not trivial: they use every kind of step.
#[test]
fn random_drf_programs_cover_every_op_kind() {
    let mut kinds = HashSet::new();
    for seed in 0..50 {
        for (_, ops) in drf_program(seed).threads {
            for op in ops {
                kinds.insert(std::mem::discriminant(&op));
            }
        }
    }
    // Load, Store, StoreReg, AddImm, Lock, Unlock, Barrier.
    assert_eq!(kinds.len(), 7);
}

// ---------------------------------------------------------------- lock scopes

/// Data written inside a critical section of L is seen by the next acquirer of L. Two locks
/// protect a counter and two data words each, all on pages shared with the other lock's words
/// and with words each thread writes outside any critical section (false sharing everywhere);
/// every thread warms stale copies first. In every critical section the data must match the
/// counter (it is written after the counter, on other pages), and each thread must read back
/// its own private writes.
pub fn lock_scope<C: Sim>(s: &Subject) {
    const ROUNDS: u64 = 4;
    // Lock k: counter at word k of page 1, data at word k of pages 2 and 3.
    let counter = |k: u64| addr(1, k as usize);
    let data = |k: u64, j: u64| addr(2 + j, k as usize);
    // Thread t's private word: pages 2 and 3, words 4..8.
    let private = |t: usize| addr(2 + (t / 4) as u64, 4 + t % 4);
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 3) as NodeId;
        let per_node = 1 + (seed / 3 % 2) as usize;
        let total = nodes as usize * per_node;
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5c0e);
        let mut c = cluster::<C>(s, nodes, seed);
        let mut count = [0u64; 2];
        let mut tids = Vec::new();
        for t in 0..total {
            let mut p: Vec<Op> = (1..4)
                .flat_map(|pg| {
                    [
                        Op::Load {
                            addr: addr(pg, 0),
                            reg: 3,
                        },
                        Op::Load {
                            addr: addr(pg, 5),
                            reg: 3,
                        },
                    ]
                })
                .collect();
            p.push(Op::Barrier {
                id: 1,
                count: total as u32,
            });
            for r in 0..ROUNDS {
                let k = rng.gen_range(0..2u64);
                count[k as usize] += 1;
                p.extend([
                    Op::Store {
                        addr: private(t),
                        value: (t as u64 + 1) * 1000 + r,
                    },
                    Op::Lock(20 + k),
                    Op::Load {
                        addr: counter(k),
                        reg: 0,
                    },
                    Op::Load {
                        addr: data(k, 0),
                        reg: 1,
                    },
                    Op::Load {
                        addr: data(k, 1),
                        reg: 2,
                    },
                    Op::AddImm { reg: 0, imm: 1 },
                    Op::StoreReg {
                        addr: counter(k),
                        reg: 0,
                    },
                    Op::StoreReg {
                        addr: data(k, 0),
                        reg: 0,
                    },
                    Op::AddImm { reg: 0, imm: 1000 },
                    Op::StoreReg {
                        addr: data(k, 1),
                        reg: 0,
                    },
                    Op::Unlock(20 + k),
                    Op::Load {
                        addr: private(t),
                        reg: 3,
                    },
                ]);
            }
            p.push(Op::Barrier {
                id: 2,
                count: total as u32,
            });
            p.extend((0..2).flat_map(|k| {
                [
                    Op::Load {
                        addr: counter(k),
                        reg: 0,
                    },
                    Op::Load {
                        addr: data(k, 0),
                        reg: 0,
                    },
                    Op::Load {
                        addr: data(k, 1),
                        reg: 0,
                    },
                ]
            }));
            p.extend((0..total).map(|u| Op::Load {
                addr: private(u),
                reg: 0,
            }));
            tids.push(c.spawn((t % nodes as usize) as NodeId, p));
        }
        run(s, &mut c, "lock scope");
        for (t, &tid) in tids.iter().enumerate() {
            let log = &c.log(tid)[6..];
            for r in 0..ROUNDS as usize {
                let (cnt, d0, d1, own) =
                    (log[4 * r], log[4 * r + 1], log[4 * r + 2], log[4 * r + 3]);
                let want = if cnt == 0 { (0, 0) } else { (cnt, cnt + 1000) };
                assert_eq!(
                    (d0, d1),
                    want,
                    "{} / lock scope, seed {seed}, thread {t}, round {r}: the data does not match counter {cnt}",
                    s.name
                );
                assert_eq!(
                    own,
                    (t as u64 + 1) * 1000 + r as u64,
                    "{} / lock scope, seed {seed}, thread {t}: own write lost",
                    s.name
                );
            }
            let fin = &log[4 * ROUNDS as usize..];
            let want: Vec<u64> = (0..2)
                .flat_map(|k| {
                    let n = count[k];
                    [n, n, if n == 0 { 0 } else { n + 1000 }]
                })
                .chain((0..total).map(|u| (u as u64 + 1) * 1000 + ROUNDS - 1))
                .collect();
            assert_eq!(
                fin,
                &want[..],
                "{} / lock scope, seed {seed}, thread {t}: final state after the barrier",
                s.name
            );
        }
    }
}

/// False sharing: every thread writes its own words of the same two pages, many times per
/// phase, between barriers; after each barrier everyone reads every word. All writes
/// survive; multiple-writer protocols must not move the pages back and forth per write.
pub fn false_sharing<C: Sim>(s: &Subject) {
    const PHASES: u64 = 3;
    const WRITES: u64 = 4;
    let word = |t: usize, pg: u64| addr(1 + pg, t);
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 3) as NodeId;
        let per_node = 1 + (seed / 3 % 2) as usize;
        let total = nodes as usize * per_node;
        let value = |p: u64, t: usize, w: u64| (p + 1) * 10_000 + (t as u64 + 1) * 100 + w;
        let mut c = cluster::<C>(s, nodes, seed);
        let mut tids = Vec::new();
        for t in 0..total {
            let mut p = Vec::new();
            for ph in 0..PHASES {
                for w in 0..WRITES {
                    for pg in 0..2 {
                        p.push(Op::Store {
                            addr: word(t, pg),
                            value: value(ph, t, w),
                        });
                    }
                    p.push(Op::Load {
                        addr: word(t, w % 2),
                        reg: 0,
                    });
                }
                p.push(Op::Barrier {
                    id: 4,
                    count: total as u32,
                });
                p.extend((0..total).flat_map(|u| {
                    (0..2).map(move |pg| Op::Load {
                        addr: word(u, pg),
                        reg: 1,
                    })
                }));
                p.push(Op::Barrier {
                    id: 5,
                    count: total as u32,
                });
            }
            tids.push(c.spawn((t % nodes as usize) as NodeId, p));
        }
        run(s, &mut c, "false sharing");
        let pages_sent = c.pages_sent();
        for (t, &tid) in tids.iter().enumerate() {
            let want: Vec<u64> = (0..PHASES)
                .flat_map(|ph| {
                    (0..WRITES)
                        .map(move |w| value(ph, t, w))
                        .chain((0..total).flat_map(move |u| [value(ph, u, WRITES - 1); 2]))
                })
                .collect();
            assert_eq!(
                c.log(tid),
                &want[..],
                "{} / false sharing, seed {seed}, thread {t}",
                s.name
            );
        }
        if !s.sc_for_racy && !s.flushes_any_time {
            // No ping-pong: per phase a node fetches each page for its writes and for its reads
            // (plus a refetch when another node's flush invalidates a copy it still writes).
            let bound = nodes as u64 * 2 * PHASES * 4;
            assert!(
                pages_sent <= bound,
                "{} / false sharing ({} simulator), seed {seed}: {pages_sent} page transfers for {} nodes (bound {bound})",
                s.name,
                C::KIND,
                nodes
            );
        }
    }
}

/// A long run with many lock operations and periodic global barriers keeps the write notices
/// at lock managers bounded: each phase writes a new window of pages under three locks, so
/// without garbage collection the notices would grow with the number of phases.
pub fn notices_stay_bounded<C: Sim>(s: &Subject) {
    const PHASES: u64 = 12;
    const WINDOW: u64 = 5;
    const LOCKS: u64 = 3;
    for seed in 0..seeds() / 4 {
        let nodes = 3;
        let mut c = cluster::<C>(s, nodes, seed);
        let mut rng = StdRng::seed_from_u64(seed ^ 0xb0b);
        let mut sums = vec![0u64; (PHASES * WINDOW) as usize];
        let mut tids = Vec::new();
        for n in 0..nodes {
            let mut p = Vec::new();
            for ph in 0..PHASES {
                for _ in 0..4 {
                    let pg = 1 + ph * WINDOW + rng.gen_range(0..WINDOW);
                    let lock = 30 + pg % LOCKS;
                    let inc = rng.gen_range(1..50);
                    sums[(pg - 1) as usize] += inc;
                    p.extend([
                        Op::Lock(lock),
                        Op::Load {
                            addr: addr(pg, n as usize),
                            reg: 0,
                        },
                        Op::Load {
                            addr: addr(pg, 7),
                            reg: 0,
                        },
                        Op::AddImm { reg: 0, imm: inc },
                        Op::StoreReg {
                            addr: addr(pg, 7),
                            reg: 0,
                        },
                        Op::Unlock(lock),
                    ]);
                }
                // The global barrier (`svm::barrier()`): the engine drops the lock notices it
                // makes redundant only there, as it cannot tell whether a barrier of some
                // other id has every thread of the job.
                p.push(Op::BarrierAll(svm_core::node::GLOBAL_BARRIER));
            }
            if n == 0 {
                p.extend((0..PHASES * WINDOW).map(|i| Op::Load {
                    addr: addr(1 + i, 7),
                    reg: 1,
                }));
            }
            tids.push(c.spawn(n, p));
        }
        run(s, &mut c, "notices stay bounded");
        let peak = c.peak_lock_notices();
        let log = c.log(tids[0]);
        assert_eq!(
            &log[log.len() - sums.len()..],
            &sums[..],
            "{} / notices stay bounded, seed {seed}",
            s.name
        );
        // At most the notices of the current and the previous phase (a manager may not have
        // left the barrier yet when post-barrier releases reach it).
        let bound = 2 * WINDOW * LOCKS;
        assert!(
            peak <= bound,
            "{} / notices stay bounded ({} simulator), seed {seed}: {peak} notices at lock managers (bound {bound})",
            s.name,
            C::KIND
        );
        let held: usize = (0..nodes)
            .map(|n| c.with_sync(n, |st| st.lock_notice_count()))
            .sum();
        assert!(
            held as u64 <= WINDOW * LOCKS,
            "{} / notices stay bounded, seed {seed}: {held} left",
            s.name
        );
    }
}

/// Lock notices released right after a global barrier survive the garbage collection of that
/// barrier, even when they reach the lock's manager before the manager has left the barrier
/// itself: nodes 1 and 2 increment a counter under lock 0 (managed by node 0) right after each
/// barrier, while node 0 only takes part in the barriers.
pub fn notices_survive_barrier_races<C: Sim>(s: &Subject) {
    const PHASES: u64 = 6;
    const INCS: u64 = 3;
    for seed in 0..seeds() {
        let mut c = cluster::<C>(s, 3, seed);
        let ctr = addr(1 + seed % 3, (seed % 8) as usize);
        let barrier = Op::Barrier {
            id: 1 + seed % 3,
            count: 3,
        };
        c.spawn(0, vec![barrier; PHASES as usize + 1]);
        let mut last = 0;
        for n in 1..3 {
            let mut p = Vec::new();
            for _ in 0..PHASES {
                p.push(barrier);
                for _ in 0..INCS {
                    p.extend([
                        Op::Lock(0),
                        Op::Load { addr: ctr, reg: 0 },
                        Op::AddImm { reg: 0, imm: 1 },
                        Op::StoreReg { addr: ctr, reg: 0 },
                        Op::Unlock(0),
                    ]);
                }
            }
            p.extend([
                barrier,
                Op::Lock(0),
                Op::Load { addr: ctr, reg: 1 },
                Op::Unlock(0),
            ]);
            last = c.spawn(n, p);
        }
        run(s, &mut c, "notices survive barrier races");
        let log = c.log(last);
        assert_eq!(
            log.last().copied(),
            Some(2 * PHASES * INCS),
            "{} / notices survive barrier races, seed {seed}: lost increments",
            s.name
        );
    }
}

/// Fairness: three threads of node 0 take one lock again and again while one thread on each
/// other node wants it a few times. A node whose request joined the lock's queue gets the
/// token within `MAX_LOCAL_HANDOFFS + 1` grants per node ahead of it; mutual exclusion is
/// checked by the simulator at every grant, including those of the fast path (which every
/// test of the suite models: `SimConfig::fast_locks`).
pub fn lock_fairness<C: Sim>(s: &Subject) {
    const LOCK: u64 = 5;
    const HOT_ROUNDS: usize = 30;
    const COLD_ROUNDS: usize = 3;
    let mut fast_ops = 0;
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 2) as NodeId;
        let mut c = cluster::<C>(s, nodes, seed);
        let counter = addr(3, 1);
        let round = |p: &mut Vec<Op>| p.extend(locked_increment(LOCK, counter));
        let threads = 3 + nodes as usize - 1;
        let barrier = Op::Barrier {
            id: 1,
            count: threads as u32,
        };
        for _ in 0..3 {
            let mut p = Vec::new();
            for _ in 0..HOT_ROUNDS {
                round(&mut p);
            }
            p.push(barrier);
            c.spawn(0, p);
        }
        let mut last = 0;
        for n in 1..nodes {
            let mut p = Vec::new();
            for _ in 0..COLD_ROUNDS {
                round(&mut p);
            }
            p.push(barrier);
            p.push(Op::Load {
                addr: counter,
                reg: 1,
            });
            last = c.spawn(n, p);
        }
        run(s, &mut c, "lock fairness");
        let overtakes = c.max_lock_overtakes();
        let expected = (3 * HOT_ROUNDS + (nodes as usize - 1) * COLD_ROUNDS) as u64;
        assert_eq!(
            c.log(last).last().copied(),
            Some(expected),
            "{} / lock fairness, seed {seed}: lost increments",
            s.name
        );
        let bound = (nodes as u64 - 1) * (svm_core::sync::MAX_LOCAL_HANDOFFS as u64 + 1);
        assert!(
            overtakes <= bound,
            "{} / lock fairness, seed {seed} ({nodes} nodes): a waiting node saw {} grants to others (bound {bound})",
            s.name,
            overtakes
        );
        for n in 0..nodes {
            assert!(c.with_sync(n, |st| st.max_overtakes()) <= svm_core::sync::MAX_LOCAL_HANDOFFS);
        }
        fast_ops += c.fast_lock_ops();
    }
    // The fast path was taken. Only asserted for the model, whose fast path is its own
    // modelling of the engine's: on the real engine the hot threads here queue for the token
    // faster than it becomes idle under scope (its release waits for the home's DiffAck), and
    // the real fast path is covered by `engine_sim`'s own test for every protocol.
    assert!(
        fast_ops > 0 || C::KIND == "engine",
        "{} / lock fairness: no fast-path lock operation",
        s.name
    );
}

/// A node that dies holding a lock's token ends the run naming it and the token (the engine
/// ends the job the same way), whether or not another node waits for the token.
pub fn lost_token_holder<C: Sim>(s: &Subject) {
    const LOCK: u64 = 4; // managed by node 0
    for seed in 0..seeds() {
        let mut c = cluster::<C>(s, 2, seed);
        let x = addr(2, 0);
        c.spawn(
            1,
            vec![Op::Lock(LOCK), Op::Store { addr: x, value: 1 }, Op::Crash],
        );
        c.spawn(
            0,
            vec![
                Op::Lock(LOCK),
                Op::Store { addr: x, value: 2 },
                Op::Unlock(LOCK),
                Op::Lock(LOCK),
                Op::Unlock(LOCK),
            ],
        );
        let e = c
            .run_programs()
            .expect_err("a run whose node crashed must fail");
        assert_eq!(
            e.kind,
            svm_protocols::sim::SimErrorKind::NodeLost {
                node: 1,
                tokens: vec![LOCK]
            },
            "{} / lost token holder, seed {seed}: {e}",
            s.name
        );
        assert!(
            c.with_sync(0, |st| st.tokens_held().is_empty()),
            "{} / lost token holder ({} simulator), seed {seed}: {}",
            s.name,
            C::KIND,
            c.with_sync(0, |st| st.describe_lock(LOCK))
        );
    }
}

/// Rows of two pages, each node writing its own row and reading its neighbours' between
/// barriers (a stencil's boundary exchange), then a racy flag and datum on the two pages of
/// one row. Under sc-sw the row pages are asked for in pairs after the first rounds
/// (remembered pairs); every read must still see the last round's values, and a reader that
/// sees the flag must see the datum, whether the datum's page came along with the flag's.
/// Two nodes, stencil-like phases under the global barrier, with what can go wrong when a home
/// sends pages unasked (the push of sc-mw and scope in a job of two nodes, `home_mw_push.rs`): node 1 writes
/// a word of a page node 0 writes and pushes (its own writes must survive a pushed copy, also
/// while its diffs are in flight), node 0's threads pass barriers of their own in between
/// (their writes must not be covered by an older push), the phases outlast a push budget, and
/// a lock-protected counter on a pushed page is incremented from both nodes.
pub fn pushed_pages_two_nodes<C: Sim>(s: &Subject) {
    const PHASES: u64 = 16;
    // Page 1 (node 0's row), page 3 (the counter): homed on node 0; page 2: node 1's row.
    let (row0, row1, counter) = (1, 2, addr(3, 0));
    let own = |p: u64, w: u64| 1_000 * (p + 1) + w;
    let second = |p: u64| 500_000 + p;
    let theirs = |p: u64| 2_000_000 + p;
    let mine = |p: u64| 3_000_000 + p;
    let inc = |p: u64| Op::AddImm { reg: 0, imm: p + 1 };
    let locked_inc = |p: u64| {
        [
            Op::Lock(9),
            Op::Load {
                addr: counter,
                reg: 0,
            },
            inc(p),
            Op::StoreReg {
                addr: counter,
                reg: 0,
            },
            Op::Unlock(9),
        ]
    };
    let mut pushed = 0;
    for seed in 0..seeds() {
        let cfg = SimConfig::new(2, seed)
            .page_size(8 * PAGE_WORDS)
            .home(|p| if p == 2 { 1 } else { 0 })
            .check_single_writer(s.single_writer)
            .discard(s.discard);
        let mut c = C::build(s, cfg);
        let (mut t0, mut t0b, mut t1) = (Vec::new(), Vec::new(), Vec::new());
        let mut want0 = Vec::new();
        let mut want1 = Vec::new();
        let mut total = 0;
        for p in 0..PHASES {
            let extra = p % 2 == 1;
            // Node 0: its row, a barrier of its own threads, a second write to its row.
            t0.extend([
                Op::Store {
                    addr: addr(row0, 0),
                    value: own(p, 0),
                },
                Op::Store {
                    addr: addr(row0, 1),
                    value: own(p, 1),
                },
            ]);
            if extra {
                t0.push(Op::Barrier { id: 5, count: 2 });
                t0.push(Op::Store {
                    addr: addr(row0, 0),
                    value: second(p),
                });
                t0b.push(Op::Barrier { id: 5, count: 2 });
            }
            t0.push(Op::BarrierAll(7));
            t0.extend([
                Op::Load {
                    addr: addr(row1, 0),
                    reg: 1,
                },
                Op::Load {
                    addr: addr(row0, 4),
                    reg: 1,
                },
            ]);
            want0.extend([theirs(p), mine(p)]);
            t0.push(Op::BarrierAll(8));
            // Node 0's second thread: the counter, at any time.
            t0b.extend(locked_inc(p));
            total += p + 1;
            // Node 1: its row, and its word of node 0's row; loads that widen the window
            // in which its copy of node 0's row is being written.
            t1.extend([
                Op::Store {
                    addr: addr(row0, 4),
                    value: mine(p),
                },
                Op::Store {
                    addr: addr(row1, 0),
                    value: theirs(p),
                },
                Op::Load {
                    addr: addr(row1, 0),
                    reg: 1,
                },
                Op::BarrierAll(7),
            ]);
            want1.push(theirs(p));
            let first = if extra { second(p) } else { own(p, 0) };
            t1.extend([0, 1, 4].map(|w| Op::Load {
                addr: addr(row0, w),
                reg: 1,
            }));
            want1.extend([first, own(p, 1), mine(p)]);
            t1.extend(locked_inc(p));
            total += p + 1;
            t1.push(Op::BarrierAll(8));
        }
        for t in [&mut t0, &mut t0b, &mut t1] {
            t.push(Op::Barrier { id: 11, count: 3 });
        }
        t0.push(Op::Load {
            addr: counter,
            reg: 1,
        });
        want0.push(total);
        if std::env::var("SVM_DEBUG_SEED").ok() == Some(seed.to_string()) {
            c = c.traced(s);
        }
        let (a, _, b) = (c.spawn(0, t0), c.spawn(0, t0b), c.spawn(1, t1));
        run(s, &mut c, "pushed pages, two nodes");
        if std::env::var("SVM_DEBUG_SEED").ok() == Some(seed.to_string()) {
            eprintln!("{}", c.dump_state());
        }
        let rd = |t: ThreadId| -> Vec<u64> { c.log(t).to_vec() };
        // Node 1's lock section loads the counter too: leave those out.
        let log1: Vec<u64> = rd(b).chunks(5).flat_map(|ch| ch[..4].to_vec()).collect();
        assert_eq!(
            (rd(a), log1),
            (want0, want1),
            "{} / pushed pages, two nodes, seed {seed}",
            s.name
        );
        pushed += c.protocol_stats(0).pages_pushed + c.protocol_stats(1).pages_pushed;
    }
    if s.name != "sc-sw" {
        assert!(
            pushed > 0,
            "{} / pushed pages, two nodes: no page was pushed",
            s.name
        );
    }
}

pub fn paired_rows<C: Sim>(s: &Subject) {
    const ROUNDS: u64 = 4;
    // Row of node n: pages 4n+1 and 4n+2, both homed at n (homes in blocks of 4 pages).
    let row = |n: u64| [addr(4 * n + 1, 0), addr(4 * n + 2, 0)];
    let value = |round: u64, n: u64, half: u64| 1_000 * (round + 1) + 10 * n + half;
    let mut paired = 0;
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 3) as NodeId;
        let cfg = SimConfig::new(nodes, seed)
            .page_size(8 * PAGE_WORDS)
            .home(move |p| ((p / 4) % nodes as u64) as NodeId)
            .check_single_writer(s.single_writer)
            .discard(s.discard);
        let mut c = C::build(s, cfg);
        let mut tids = Vec::new();
        for n in 0..nodes as u64 {
            let neighbours: Vec<u64> = [n.wrapping_sub(1), n + 1]
                .into_iter()
                .filter(|&m| m < nodes as u64)
                .collect();
            let mut p = Vec::new();
            for round in 0..ROUNDS {
                for &m in &neighbours {
                    for a in row(m) {
                        p.push(Op::Load { addr: a, reg: 0 });
                    }
                }
                p.push(Op::Barrier {
                    id: 1,
                    count: nodes as u32,
                });
                for (half, a) in row(n).into_iter().enumerate() {
                    p.push(Op::Store {
                        addr: a,
                        value: value(round, n, half as u64),
                    });
                }
                p.push(Op::Barrier {
                    id: 2,
                    count: nodes as u32,
                });
            }
            if s.sc_for_racy {
                // Node 1's row: the flag on its first page, the datum on its second.
                let [flag, datum] = row(1);
                if n == 1 {
                    p.extend(publish(datum, flag));
                } else {
                    p.extend(consume(datum, flag, 1));
                }
            }
            tids.push((n, neighbours, c.spawn(n as NodeId, p)));
        }
        run(s, &mut c, "paired rows");
        for (n, neighbours, t) in &tids {
            let want: Vec<u64> = (0..ROUNDS)
                .flat_map(|round| {
                    neighbours.iter().flat_map(move |&m| {
                        (0..2).map(move |half| {
                            if round == 0 {
                                0
                            } else {
                                value(round - 1, m, half)
                            }
                        })
                    })
                })
                .collect();
            let log = c.log(*t);
            assert_eq!(
                &log[..want.len()],
                &want[..],
                "{} / paired rows, seed {seed}, node {n}: a read missed the last round's row",
                s.name
            );
            if s.sc_for_racy && *n != 1 {
                assert_eq!(
                    log[log.len() - 1],
                    42,
                    "{} / paired rows, seed {seed}: node {n} saw the flag, not the datum; {}",
                    s.name,
                    c.describe(6)
                );
            }
        }
        paired += (0..nodes)
            .map(|n| c.protocol_stats(n).pages_paired)
            .sum::<u64>();
    }
    if s.name == "sc-sw" {
        assert!(
            paired > 0,
            "sc-sw / paired rows: no page was ever asked for with its pair"
        );
    }
}

/// A page that migrates (every node in turn reads then writes it under a lock), then is
/// read by everyone, then carries racy data next to a flag on another page. Under sc-sw the
/// first phase takes the migratory path (exclusive read grants, writes without a request);
/// the reads that follow must end it; no increment or store is lost, and racy readers stay
/// sequentially consistent.
pub fn migratory_then_shared<C: Sim>(s: &Subject) {
    const ROUNDS: u64 = 3;
    let x = addr(1, 0);
    let data = addr(1, 5);
    let flag = addr(2, 0);
    let mut upgrades = 0;
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 3) as NodeId;
        let mut c = cluster::<C>(s, nodes, seed);
        let mut tids = Vec::new();
        for n in 0..nodes {
            let mut p = Vec::new();
            for _ in 0..ROUNDS {
                p.extend([
                    Op::Lock(7),
                    Op::Load { addr: x, reg: 0 },
                    Op::AddImm { reg: 0, imm: 1 },
                    Op::StoreReg { addr: x, reg: 0 },
                    Op::Unlock(7),
                ]);
            }
            p.push(Op::Barrier {
                id: 1,
                count: nodes as u32,
            });
            p.extend([Op::Load { addr: x, reg: 1 }, Op::Load { addr: x, reg: 1 }]);
            p.push(Op::Barrier {
                id: 2,
                count: nodes as u32,
            });
            if s.sc_for_racy {
                if n == 0 {
                    p.extend(publish(data, flag));
                } else {
                    p.extend(consume(data, flag, 2));
                }
            }
            tids.push(c.spawn(n, p));
        }
        run(s, &mut c, "migratory then shared");
        let total = ROUNDS * nodes as u64;
        for (n, &t) in tids.iter().enumerate() {
            let log = c.log(t);
            assert_eq!(
                log[log.len() - if n > 0 && s.sc_for_racy { 3 } else { 2 }..][..2],
                [total, total],
                "{} / migratory then shared, seed {seed}, node {n}: lost increments; {}",
                s.name,
                c.describe(1)
            );
            if n > 0 && s.sc_for_racy {
                assert_eq!(
                    log[log.len() - 1],
                    42,
                    "{} / migratory then shared, seed {seed}: node {n} saw the flag, not the data; {}",
                    s.name,
                    c.describe(1)
                );
            }
        }
        upgrades += (0..nodes)
            .map(|n| c.protocol_stats(n).migratory_upgrades)
            .sum::<u64>();
    }
    if s.name == "sc-sw" {
        assert!(
            upgrades > 0,
            "sc-sw / migratory then shared: no write took the migratory path over all seeds"
        );
    }
}

// ---------------------------------------------------------------- the protocols

macro_rules! conformance_suite {
    ($module:ident, $subject:expr) => {
        mod $module {
            use super::*;
            const SUBJECT: Subject = $subject;
            #[test]
            fn message_passing() {
                super::message_passing::<Cluster>(&SUBJECT)
            }
            #[test]
            fn store_buffering() {
                super::store_buffering::<Cluster>(&SUBJECT)
            }
            #[test]
            fn iriw() {
                super::iriw::<Cluster>(&SUBJECT)
            }
            #[test]
            fn lock_counters() {
                super::lock_counters::<Cluster>(&SUBJECT)
            }
            #[test]
            fn barrier_phases() {
                super::barrier_phases::<Cluster>(&SUBJECT)
            }
            #[test]
            fn all_nodes_barrier_phases() {
                super::all_nodes_barrier_phases::<Cluster>(&SUBJECT)
            }
            #[test]
            fn subset_barriers() {
                super::subset_barriers::<Cluster>(&SUBJECT)
            }
            #[test]
            fn pushed_pages_two_nodes() {
                super::pushed_pages_two_nodes::<Cluster>(&SUBJECT)
            }
            #[test]
            fn random_drf() {
                super::random_drf::<Cluster>(&SUBJECT)
            }
            #[test]
            fn lock_scope() {
                super::lock_scope::<Cluster>(&SUBJECT)
            }
            #[test]
            fn false_sharing() {
                super::false_sharing::<Cluster>(&SUBJECT)
            }
            #[test]
            fn notices_survive_barrier_races() {
                super::notices_survive_barrier_races::<Cluster>(&SUBJECT)
            }
            #[test]
            fn notices_stay_bounded() {
                super::notices_stay_bounded::<Cluster>(&SUBJECT)
            }
            #[test]
            fn lock_fairness() {
                super::lock_fairness::<Cluster>(&SUBJECT)
            }
            #[test]
            fn lost_token_holder() {
                super::lost_token_holder::<Cluster>(&SUBJECT)
            }
            #[test]
            fn migratory_then_shared() {
                super::migratory_then_shared::<Cluster>(&SUBJECT)
            }
            #[test]
            fn paired_rows() {
                super::paired_rows::<Cluster>(&SUBJECT)
            }
            #[test]
            fn home_reads_pages_others_wrote() {
                super::home_reads_pages_others_wrote::<Cluster>(&SUBJECT)
            }
            /// The same programs on the real engine of every node (`engine_sim`).
            mod engine {
                use super::*;
                #[test]
                fn message_passing() {
                    super::super::message_passing::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn store_buffering() {
                    super::super::store_buffering::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn iriw() {
                    super::super::iriw::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn lock_counters() {
                    super::super::lock_counters::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn barrier_phases() {
                    super::super::barrier_phases::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn all_nodes_barrier_phases() {
                    super::super::all_nodes_barrier_phases::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn subset_barriers() {
                    super::super::subset_barriers::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn random_drf() {
                    super::super::random_drf::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn lock_scope() {
                    super::super::lock_scope::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn false_sharing() {
                    super::super::false_sharing::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn notices_survive_barrier_races() {
                    super::super::notices_survive_barrier_races::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn notices_stay_bounded() {
                    super::super::notices_stay_bounded::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn lock_fairness() {
                    super::super::lock_fairness::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn lost_token_holder() {
                    super::super::lost_token_holder::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn migratory_then_shared() {
                    super::super::migratory_then_shared::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn paired_rows() {
                    super::super::paired_rows::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn home_reads_pages_others_wrote() {
                    super::super::home_reads_pages_others_wrote::<EngineCluster>(&SUBJECT)
                }
            }
        }
    };
}

conformance_suite!(
    sc_sw,
    Subject {
        name: "sc-sw",
        factory: sc_sw,
        sc_for_racy: true,
        single_writer: true,
        discard: Discard::NotHome,
        flushes_any_time: false,
    }
);

// As the userfaultfd engine runs it: every node, the home included, drops its contents at
// `SetAccess None`.
conformance_suite!(
    sc_sw_discard_always,
    Subject {
        name: "sc-sw",
        factory: sc_sw,
        sc_for_racy: true,
        single_writer: true,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

fn sc_sw_read_ahead(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScSingleWriter::with_prefetch(3))
}

// With read-ahead (`SVM_PREFETCH`): unasked read grants behind sequential read streams.
conformance_suite!(
    sc_sw_read_ahead,
    Subject {
        name: "sc-sw",
        factory: sc_sw_read_ahead,
        sc_for_racy: true,
        single_writer: true,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

conformance_suite!(
    sc_mw,
    Subject {
        name: "sc-mw",
        factory: sc_mw,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

conformance_suite!(
    scope,
    Subject {
        name: "scope",
        factory: scope,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

/// The multiple-writer protocols are not sequentially consistent for racy programs: store
/// buffering (x=1; r1=y ‖ y=1; r2=x) gives r1 = r2 = 0, which sc-sw never does (the example
/// of `docs/protocols.md`).
#[test]
fn racy_store_buffering_is_weak_under_multiple_writers() {
    for (name, factory) in [
        ("sc-mw", sc_mw as fn(NodeId) -> Box<dyn Protocol>),
        ("scope", scope),
    ] {
        let mut weak = 0;
        for seed in 0..50 {
            let cfg = SimConfig::new(3, seed)
                .page_size(8 * PAGE_WORDS)
                .home(|_| 2);
            let mut c = Cluster::new(cfg, factory);
            let (x, y) = (addr(1, 0), addr(1, 1));
            let t0 = c.spawn(
                0,
                vec![
                    Op::Store { addr: x, value: 1 },
                    Op::Load { addr: y, reg: 0 },
                ],
            );
            let t1 = c.spawn(
                1,
                vec![
                    Op::Store { addr: y, value: 1 },
                    Op::Load { addr: x, reg: 0 },
                ],
            );
            c.run().unwrap();
            if c.log(t0) == [0] && c.log(t1) == [0] {
                weak += 1;
            }
        }
        assert_eq!(
            weak, 50,
            "{name}: unflushed writes are invisible to other nodes"
        );
    }
}

fn sc_sw_fault_around(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScSingleWriter::with_prefetch(3).with_fault_around(4))
}

fn sc_sw_all_options(_: NodeId) -> Box<dyn Protocol> {
    Box::new(
        svm_protocols::ScSingleWriter::with_prefetch(3)
            .with_fault_around(4)
            .with_hold(HOLD_NS)
            .with_push(),
    )
}

/// The minimum hold of the sc-sw suite with every option: 40 steps of the engine simulator
/// (each step is 1 µs of its virtual time); the protocol simulator ends a hold at any step.
const HOLD_NS: u64 = 40_000;

// sc-sw with every option on, as `svmrun` runs it: read-ahead, fault-around, the minimum
// hold (`SVM_HOLD_US`: a page written again after another node took it since the last
// release is kept a while; requests for it wait for the hold's end, the holder's release, or
// the holder's own wait for another node) and the producer–consumer push at barrier
// arrivals (`SVM_PUSH`).
conformance_suite!(sc_sw_all_options, SC_SW_ALL_OPTIONS);

const SC_SW_ALL_OPTIONS: Subject = Subject {
    name: "sc-sw",
    factory: sc_sw_all_options,
    sc_for_racy: true,
    single_writer: true,
    discard: Discard::Always,
    flushes_any_time: false,
};

/// Two nodes write their own word of one page in turns, with no synchronisation between the
/// writes (false sharing), then meet at a barrier and read both words: under the minimum hold
/// requests for the page wait for holds in some runs, and every write survives. Returns the
/// requests kept for a thread that had not run since its page came (the protocol
/// simulator models those threads; the engine simulator's threads have no clock).
fn falsely_shared_writes_under_holds<C: Sim>() -> u64 {
    const WRITES: u64 = 12;
    let s = SC_SW_ALL_OPTIONS;
    let mut held = 0;
    let mut kept_unused = 0;
    for seed in 0..seeds().min(200) {
        let mut c = cluster::<C>(&s, 2, seed);
        let mut tids = Vec::new();
        for t in 0..2 {
            let mut p: Vec<Op> = (1..=WRITES)
                .flat_map(|v| {
                    [
                        Op::Store {
                            addr: addr(1, t),
                            value: v,
                        },
                        Op::Load {
                            addr: addr(1, 1 - t),
                            reg: 0,
                        },
                    ]
                })
                .collect();
            p.push(Op::Barrier { id: 1, count: 2 });
            p.extend((0..2).map(|u| Op::Load {
                addr: addr(1, u),
                reg: 1,
            }));
            tids.push(c.spawn(t as NodeId, p));
        }
        run(&s, &mut c, "falsely shared writes under holds");
        for &tid in &tids {
            assert_eq!(
                c.log(tid)[WRITES as usize..],
                [WRITES, WRITES],
                "seed {seed} ({} simulator): a write was lost",
                C::KIND
            );
        }
        for n in 0..2 {
            let st = c.protocol_stats(n);
            held += st.requests_held;
            kept_unused += st.requests_kept_unused;
        }
    }
    assert!(
        held > 0,
        "{} simulator: no request ever waited for a hold",
        C::KIND
    );
    kept_unused
}

#[test]
fn falsely_shared_writes_under_holds_model() {
    let kept_unused = falsely_shared_writes_under_holds::<Cluster>();
    assert!(
        kept_unused > 0,
        "no request ever waited for a thread that had not run since its page came"
    );
}

#[test]
fn falsely_shared_writes_under_holds_engine() {
    falsely_shared_writes_under_holds::<EngineCluster>();
}

fn sc_mw_fault_around(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScMultiWriter::new().with_fault_around(4))
}

fn scope_fault_around(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::Scope::new().with_fault_around(4))
}

// With fault-around (`SVM_FAULT_AROUND`): a home's first fault on an untouched page makes the
// untouched home pages of its aligned block writable at once (read-ahead on as well for sc-sw).
conformance_suite!(
    sc_sw_fault_around,
    Subject {
        name: "sc-sw",
        factory: sc_sw_fault_around,
        sc_for_racy: true,
        single_writer: true,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

conformance_suite!(
    sc_mw_fault_around,
    Subject {
        name: "sc-mw",
        factory: sc_mw_fault_around,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

conformance_suite!(
    scope_fault_around,
    Subject {
        name: "scope",
        factory: scope_fault_around,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

fn sc_mw_read_ahead(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScMultiWriter::new().with_prefetch(3))
}

fn scope_read_ahead(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::Scope::new().with_prefetch(3))
}

// With `SVM_PREFETCH` on the home-based protocols: a node's fetching faults in order request
// the following pages too (several requests outstanding), and a home's write faults in order
// on its write-tracked pages make the following ones writable and written.
conformance_suite!(
    sc_mw_read_ahead,
    Subject {
        name: "sc-mw",
        factory: sc_mw_read_ahead,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

conformance_suite!(
    scope_read_ahead,
    Subject {
        name: "scope",
        factory: scope_read_ahead,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

fn sc_mw_bounded(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScMultiWriter::new().with_flush_after(FLUSH_AFTER_NS))
}

/// sc-mw's bounded visibility timer (`SVM_FLUSH_AFTER_US`): 30 steps of the engine simulator;
/// the protocol simulator fires it at any step.
const FLUSH_AFTER_NS: u64 = 30_000;

// sc-mw with bounded visibility: flushes without a release between any two steps, on top of
// the lock releases that wait in jobs of two nodes (the engine simulator's default). The
// programs only it makes work are in `bounded_visibility.rs`.
conformance_suite!(
    sc_mw_bounded,
    Subject {
        name: "sc-mw",
        factory: sc_mw_bounded,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: true,
    }
);

fn sc_mw_migrating(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScMultiWriter::new().with_home_migration(true))
}

// With home migration at barriers (`SVM_HOME_MIGRATION=1`; jobs of two nodes): pages only the
// other node wrote move to it (`home_mw_migrate.rs`); the programs of two nodes exercise it.
conformance_suite!(
    sc_mw_migrating,
    Subject {
        name: "sc-mw",
        factory: sc_mw_migrating,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

/// Two nodes run a stencil alternating two grids, each node's row of a grid on a page it is
/// home of: in phase p a node writes its row of grid p % 2 and, after the barrier, reads its
/// neighbour's. Under sc-sw with the push the homes push their rows, the readers drop them
/// after a phase of use, and a home then takes its row back writable at its departure
/// without a fault (`regain_dropped`), pushed after the phase whether its contents changed
/// or not (the first phases write the values the rows already hold). Every read must see the
/// phase's values. Returns the pages taken back over all seeds.
fn alternating_grids_two_nodes<C: Sim>() -> u64 {
    const PHASES: u64 = 24;
    let s = SC_SW_ALL_OPTIONS;
    // Grid g's row of node n: page 2 + 2g + n, homed on n.
    let row = |g: u64, n: u64| 2 + 2 * g + n;
    let value = |p: u64, n: u64, w: u64| if p < 8 { 7 } else { 1_000 * p + 10 * n + w };
    let mut regained = 0;
    for seed in 0..seeds().min(300) {
        let cfg = SimConfig::new(2, seed)
            .page_size(8 * PAGE_WORDS)
            .home(|p| (p % 2) as NodeId)
            .check_single_writer(s.single_writer)
            .discard(s.discard);
        let mut c = C::build(&s, cfg);
        let mut tids = Vec::new();
        for n in 0..2u64 {
            let mut prog = Vec::new();
            for p in 0..PHASES {
                let g = p % 2;
                prog.extend((0..2).map(|w| Op::Store {
                    addr: addr(row(g, n), w as usize),
                    value: value(p, n, w),
                }));
                prog.push(Op::BarrierAll(1));
                prog.extend((0..2).map(|w| Op::Load {
                    addr: addr(row(g, 1 - n), w),
                    reg: 0,
                }));
            }
            tids.push(c.spawn(n as NodeId, prog));
        }
        run(&s, &mut c, "alternating grids");
        for (n, &tid) in tids.iter().enumerate() {
            let want: Vec<u64> = (0..PHASES)
                .flat_map(|p| (0..2).map(move |w| value(p, 1 - n as u64, w)))
                .collect();
            assert_eq!(
                c.log(tid),
                want,
                "seed {seed} ({} simulator): node {n} read a stale row",
                C::KIND
            );
        }
        regained += (0..2)
            .map(|n| c.protocol_stats(n).pages_written_ahead)
            .sum::<u64>();
    }
    regained
}

#[test]
fn alternating_grids_two_nodes_model() {
    assert!(
        alternating_grids_two_nodes::<Cluster>() > 0,
        "no home took its row back"
    );
}

#[test]
fn alternating_grids_two_nodes_engine() {
    assert!(
        alternating_grids_two_nodes::<EngineCluster>() > 0,
        "no home took its row back"
    );
}
