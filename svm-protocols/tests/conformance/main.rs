//! The protocol conformance suite: every protocol runs the same programs in the simulated
//! cluster over many seeds (random message delays and interleavings).
//!
//! A protocol joins the suite with one line in `protocols.rs`:
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

#[path = "../common/mod.rs"]
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
            pages_granted_around: st.pages_granted_around,
            granted_around_unwritten: st.granted_around_unwritten,
            migratory_upgrades: st.migratory_upgrades,
            requests_held: st.requests_held,
            hold_probe_rewrites: st.hold_probe_rewrites,
            holds_ended_unwritten: st.holds_ended_unwritten,
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

mod drf;
mod litmus;
mod locks;
mod page_patterns;
mod protocols;
mod scopes;
mod synchronization;

use drf::*;
use litmus::*;
use locks::*;
use page_patterns::*;
use scopes::*;
use synchronization::*;
