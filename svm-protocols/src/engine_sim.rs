//! The deterministic simulator over the **real engine**: N nodes built as a job builds them
//! (`svm_core::node::Node` with the protocol under test), each driven step by step instead of
//! by its engine thread, over loopback links (`svm_comm::loopback`) and the in-memory fault
//! backend (`svm_core::fault::mem`). The same [`Op`] programs as the protocol-level
//! [`Cluster`](crate::sim::Cluster) run on it; what executes them is the engine's own fault
//! service, message dispatch, protocol actions, release/acquire fan-in and synchronisation —
//! not a copy of them.
//!
//! At every step a seeded RNG picks one enabled step: deliver the oldest frame in flight from
//! one node to another (per-pair FIFO, as TCP and DECK-SCI keep), let a node's engine serve the
//! faults its threads queued, move time on to a node's next timer (its lock lingers end), or
//! run one instruction of a runnable thread. Time is the simulator's: each step takes
//! `STEP_NS` (1 µs), and the engines read no clock of their own, so a seed replays the same run,
//! timers included.
//!
//! Threads take and release locks as application threads do: through the lock fast path
//! when it applies, else through the engine.
//!
//! Checks, after every step: mutual exclusion of every lock over the simulated threads, and,
//! with [`SimConfig::check_single_writer`], that a page writable on one node is accessible on
//! no other and that the copies of a page readable on several nodes are the same. Counted: grants of a lock to other nodes while a node waits for it
//! ([`EngineCluster::max_lock_overtakes`]).
//!
//! Memory: with [`Discard::Always`] a node's copy is dropped when its access is revoked (the
//! userfaultfd backend), otherwise kept (the segv backend); `Discard::NotHome` keeps it too.
//!
//! [`Op::Crash`]: the node stops (its threads, deliveries to it); what it sent is still
//! delivered, then every peer sees the connection close and the run ends with
//! [`SimErrorKind::NodeLost`] from the first engine that notices, naming the tokens it
//! reports.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use svm_comm::loopback::{self, LoopbackTap};
use svm_comm::transport::RecvBuf;
use svm_core::config::Config;
use svm_core::fault::mem::{Attempt, FaultTicket, MemBackend};
use svm_core::node::{FailureMode, Node, NodeParts, Pending, SyncOp, WaitResult};
use svm_core::protocol::{protocol_id, Access, NodeId, PageId, Protocol, PROTOCOL_NAMES};
use svm_core::space::{Home, Space};

use crate::sim::{reg_of, set_reg, Discard, Op, SimConfig, SimError, SimErrorKind, ThreadId};

/// Pages of the simulated shared region (program addresses `0..PAGES * page_size`).
pub const PAGES: u64 = 64;

/// A link as its receiving node sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LinkState {
    Open,
    /// Closed, not yet reported to the node.
    Closed,
    Reported,
}

/// What a simulated thread waits for.
enum Wait {
    /// Runnable: its next instruction may run.
    No,
    /// Its access faulted; it retries once the engine served the fault.
    Fault(FaultTicket),
    /// Its synchronisation operation is under way in the engine.
    Sync(Pending),
    Finished,
}

struct SimThread {
    node: NodeId,
    prog: Vec<Op>,
    pc: usize,
    regs: Vec<u64>,
    log: Vec<u64>,
    spins: u32,
    waiter: u64,
    wait: Wait,
}

#[derive(Debug, Clone, Copy)]
enum Choice {
    Deliver {
        from: NodeId,
        to: NodeId,
    },
    /// `to` notices that its connection from `from` closed (everything sent was delivered).
    Closed {
        from: NodeId,
        to: NodeId,
    },
    Faults(NodeId),
    Linger(NodeId),
    Thread(ThreadId),
}

/// A simulated cluster of real engines; see the module docs.
pub struct EngineCluster {
    cfg: SimConfig,
    nodes: Vec<Arc<Node>>,
    mems: Vec<MemBackend>,
    /// `taps[to][from]`: node `to`'s end of its link from `from` (the simulator reads what
    /// arrived there, as `to`'s engine thread would).
    taps: Vec<Vec<Option<LoopbackTap>>>,
    /// `bufs[to][from]`: bytes read from that link, not yet cut into frames.
    bufs: Vec<Vec<RecvBuf>>,
    /// `chans[to][from]`: whole frames in flight, oldest first.
    chans: Vec<Vec<VecDeque<Vec<u8>>>>,
    /// Window address of program address 0.
    base: usize,
    threads: Vec<SimThread>,
    rng: StdRng,
    steps: u64,
    /// The thread inside each lock's critical section.
    lock_holders: HashMap<u64, ThreadId>,
    /// (lock, node) → (threads of the node waiting in the engine for the lock, grants to
    /// other nodes since the node last got it while some of them waited and the node's
    /// request had joined the lock's queue).
    lock_waits: HashMap<(u64, NodeId), (u32, u64)>,
    max_overtakes: u64,
    /// Most write notices held at lock managers over the cluster, after any delivery.
    peak_lock_notices: u64,
    /// `links[to][from]`: the state of the link from `from` as `to` reads it.
    links: Vec<Vec<LinkState>>,
    /// The node that crashed ([`Op::Crash`]).
    crashed: Option<NodeId>,
    choices: Vec<Choice>,
    /// The simulated time (ns): `STEP_NS` per step, and a jump to a node's next timer when
    /// its lingers end. The engines read no clock, so a seed replays timers too.
    now: u64,
}

/// Simulated time at the start of a run (ns; any origin works, the engines only subtract).
const START_NS: u64 = 1_000_000_000;
/// Simulated time one step takes (ns).
const STEP_NS: u64 = 1_000;

fn engine_error(e: svm_core::node::EngineError) -> SimErrorKind {
    match e {
        svm_core::node::EngineError::Lost { peer, locks, .. } => SimErrorKind::NodeLost {
            node: peer,
            tokens: locks,
        },
        e => SimErrorKind::Protocol(e.to_string()),
    }
}

impl EngineCluster {
    /// Builds the nodes; `factory(node)` makes each node's protocol instance (the nodes' only
    /// protocol, and the protocol of the simulated region).
    pub fn new(
        cfg: SimConfig,
        factory: impl Fn(NodeId) -> Box<dyn Protocol>,
    ) -> Result<Self, SimError> {
        let fail = |what: String| SimError {
            kind: SimErrorKind::Protocol(what),
            dump: String::new(),
        };
        let ps = cfg.page_size;
        if !ps.is_power_of_two() || ps < 8 {
            return Err(fail(format!(
                "the engine simulator needs a power-of-two page size of at least 8 bytes, not {ps}"
            )));
        }
        let n = cfg.nodes;
        // The engine's optional paths run in every simulation: pages that travel with their
        // lock (`SVM_LOCK_PAGES`) whatever its default.
        let node_cfg = Config::from_lookup(&|k| (k == "SVM_LOCK_PAGES").then(|| "1".to_string()))
            .map_err(|e| fail(e.to_string()))?;
        let (links, taps) = loopback::mesh(n).map_err(|e| fail(e.to_string()))?;
        let homes: Vec<NodeId> = (0..PAGES).map(|p| (cfg.home)(p)).collect();
        let mut nodes = Vec::new();
        let mut mems = Vec::new();
        let mut base = None;
        for (me, links) in links.into_iter().enumerate() {
            let me = me as NodeId;
            let proto = factory(me);
            let id = protocol_id(proto.name()).ok_or_else(|| {
                fail(format!(
                    "protocol {} is not one of this build's",
                    proto.name()
                ))
            })?;
            let mut protocols: Vec<Option<Box<dyn Protocol>>> =
                PROTOCOL_NAMES.iter().map(|_| None).collect();
            protocols[id as usize] = Some(proto);
            let mut space = Space::new(node_cfg.space_base, node_cfg.space_size, ps, me, n);
            space.set_default_protocol(id);
            let region = space
                .alloc_collective(PAGES as usize * ps, Home::Custom(homes.clone()))
                .map_err(|e| fail(e.to_string()))?;
            if *base.get_or_insert(region) != region {
                return Err(fail(
                    "nodes placed the region at different addresses".into(),
                ));
            }
            let mem = match cfg.discard {
                Discard::Always => MemBackend::dropping(ps),
                Discard::Never | Discard::NotHome => MemBackend::new(ps),
            }
            .map_err(|e| fail(e.to_string()))?;
            let mut ncfg = node_cfg.clone();
            ncfg.page_size = ps;
            let node = Node::start_driven(NodeParts {
                cfg: ncfg,
                me,
                nodes: n,
                space: Arc::new(space),
                backend: Box::new(mem.clone()),
                links,
                protocols,
                default_proto: id,
                failure_mode: FailureMode::Keep,
            })
            .map_err(|e| fail(e.to_string()))?;
            nodes.push(node);
            mems.push(mem);
        }
        let mut cluster = EngineCluster {
            rng: StdRng::seed_from_u64(cfg.seed),
            bufs: (0..n)
                .map(|_| (0..n).map(|_| RecvBuf::new()).collect())
                .collect(),
            chans: (0..n)
                .map(|_| (0..n).map(|_| VecDeque::new()).collect())
                .collect(),
            base: base.unwrap_or(0),
            nodes,
            mems,
            taps,
            threads: Vec::new(),
            steps: 0,
            lock_holders: HashMap::new(),
            lock_waits: HashMap::new(),
            max_overtakes: 0,
            peak_lock_notices: 0,
            links: (0..n).map(|_| vec![LinkState::Open; n as usize]).collect(),
            crashed: None,
            now: 0,
            choices: Vec::new(),
            cfg,
        };
        cluster.set_time(START_NS);
        Ok(cluster)
    }

    /// Program address of word `word` of page `page`.
    pub fn addr(&self, page: PageId, word: usize) -> u64 {
        page * self.cfg.page_size as u64 + 8 * word as u64
    }

    /// Adds a thread running `prog` on `node`.
    pub fn spawn(&mut self, node: NodeId, prog: Vec<Op>) -> ThreadId {
        assert!(node < self.cfg.nodes, "node {node} out of range");
        let waiter = self.nodes[node as usize].new_waiter();
        self.threads.push(SimThread {
            node,
            wait: if prog.is_empty() {
                Wait::Finished
            } else {
                Wait::No
            },
            prog,
            pc: 0,
            regs: Vec::new(),
            log: Vec::new(),
            spins: 0,
            waiter,
        });
        self.threads.len() - 1
    }

    /// Registers of a thread (unwritten registers are 0).
    pub fn regs(&self, t: ThreadId) -> &[u64] {
        &self.threads[t].regs
    }

    /// Values a thread loaded, in order.
    pub fn log(&self, t: ThreadId) -> &[u64] {
        &self.threads[t].log
    }

    /// Nodes of the cluster.
    pub fn nodes(&self) -> NodeId {
        self.cfg.nodes
    }

    /// A description of the run's state (threads, frames in flight).
    pub fn dump_now(&self) -> String {
        self.dump()
    }

    /// The most grants of a lock to other nodes while a node waited for it.
    pub fn max_lock_overtakes(&self) -> u64 {
        self.max_overtakes
    }

    /// The most write notices held at lock managers over the cluster at once (sampled after
    /// every delivery).
    pub fn peak_lock_notices(&self) -> u64 {
        self.peak_lock_notices
    }

    /// Lock operations done through the fast path, over every node.
    pub fn fast_lock_ops(&self) -> u64 {
        self.nodes.iter().map(|n| n.stats().fast_locks).sum()
    }

    /// Runs `f` on `node`'s synchronisation state.
    pub fn with_sync<R>(&self, node: NodeId, f: impl FnOnce(&svm_core::sync::SyncState) -> R) -> R {
        self.nodes[node as usize].inspect_sync(f)
    }

    /// The protocol's description of program page `page` on every node.
    pub fn describe(&self, page: PageId) -> String {
        let addr = self.base + page as usize * self.cfg.page_size;
        self.nodes
            .iter()
            .map(|n| {
                let p = n.space.page_of(addr);
                format!("node {}: {}", n.me, n.describe_page(p))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The protocol's statistics on `node` (through the node's counters).
    pub fn stats(&self, node: NodeId) -> svm_core::stats::Stats {
        self.nodes[node as usize].stats()
    }

    /// Moves the simulated time on to `now` (never back); faults queued from now on carry it.
    fn set_time(&mut self, now: u64) {
        self.now = self.now.max(now);
        for m in &self.mems {
            m.set_time(self.now);
        }
    }

    /// Runs until every thread has finished.
    pub fn run(&mut self) -> Result<u64, SimError> {
        match self.run_inner() {
            Ok(()) => Ok(self.steps),
            Err(kind) => Err(SimError {
                dump: self.dump(),
                kind,
            }),
        }
    }

    fn run_inner(&mut self) -> Result<(), SimErrorKind> {
        loop {
            self.pull_frames();
            self.enabled();
            if self.choices.is_empty() {
                if self
                    .threads
                    .iter()
                    .all(|t| matches!(t.wait, Wait::Finished))
                {
                    return Ok(());
                }
                return Err(SimErrorKind::Deadlock);
            }
            self.steps += 1;
            self.set_time(self.now + STEP_NS);
            if self.steps > self.cfg.max_steps {
                return Err(SimErrorKind::StepLimit(self.cfg.max_steps));
            }
            let c = self.choices[self.rng.gen_range(0..self.choices.len())];
            match c {
                Choice::Deliver { from, to } => {
                    let Some(frame) = self.chans[to as usize][from as usize].pop_front() else {
                        return Err(SimErrorKind::Protocol(format!(
                            "simulator: no frame in flight from {from} to {to}"
                        )));
                    };
                    self.nodes[to as usize]
                        .deliver(self.now, from, &frame)
                        .map_err(engine_error)?;
                    let held: usize = self
                        .nodes
                        .iter()
                        .map(|n| n.inspect_sync(|s| s.lock_notice_count()))
                        .sum();
                    self.peak_lock_notices = self.peak_lock_notices.max(held as u64);
                }
                Choice::Closed { from, to } => {
                    self.links[to as usize][from as usize] = LinkState::Reported;
                    self.nodes[to as usize]
                        .link_closed(from)
                        .map_err(engine_error)?;
                }
                Choice::Faults(n) => self.nodes[n as usize]
                    .serve_faults(self.now)
                    .map_err(engine_error)?,
                Choice::Linger(n) => {
                    // Time passes until the node's first timer is due (a lock linger, a
                    // protocol timer: sc-sw's minimum hold).
                    if let Some(due) = self.nodes[n as usize].poll_at() {
                        self.set_time(due);
                    }
                    self.nodes[n as usize]
                        .poll_timers(self.now)
                        .map_err(engine_error)?
                }
                Choice::Thread(t) => self.step_thread(t)?,
            }
            if self.cfg.check_single_writer {
                self.check_single_writer()?;
            }
        }
    }

    /// Cuts what arrived on every link into whole frames.
    fn pull_frames(&mut self) {
        let n = self.cfg.nodes as usize;
        for to in 0..n {
            for from in 0..n {
                if Some(to as NodeId) == self.crashed {
                    continue;
                }
                let Some(tap) = self.taps[to][from].as_ref().filter(|t| t.pending()) else {
                    continue;
                };
                let buf = &mut self.bufs[to][from];
                if !tap.receive(buf) && self.links[to][from] == LinkState::Open {
                    self.links[to][from] = LinkState::Closed;
                }
                while let Ok(Some(frame)) = buf.next_frame() {
                    self.chans[to][from].push_back(frame.to_vec());
                }
            }
        }
    }

    fn enabled(&mut self) {
        self.choices.clear();
        let n = self.cfg.nodes;
        for to in 0..n {
            if Some(to) == self.crashed {
                continue;
            }
            for from in 0..n {
                if !self.chans[to as usize][from as usize].is_empty() {
                    self.choices.push(Choice::Deliver { from, to });
                } else if self.links[to as usize][from as usize] == LinkState::Closed {
                    self.choices.push(Choice::Closed { from, to });
                }
            }
            if self.mems[to as usize].has_faults() {
                self.choices.push(Choice::Faults(to));
            }
            if self.nodes[to as usize].poll_at().is_some() {
                self.choices.push(Choice::Linger(to));
            }
        }
        for (i, t) in self.threads.iter().enumerate() {
            let runnable = match &t.wait {
                Wait::No => true,
                Wait::Fault(ticket) => self.mems[t.node as usize].is_served(ticket),
                Wait::Sync(p) => p.result().is_some(),
                Wait::Finished => false,
            };
            if runnable {
                self.choices.push(Choice::Thread(i));
            }
        }
    }

    fn window(&self, addr: u64) -> Result<usize, SimErrorKind> {
        let end = PAGES * self.cfg.page_size as u64;
        if !addr.is_multiple_of(8) || addr + 8 > end {
            return Err(SimErrorKind::BadProgram(format!(
                "address {addr} is not an aligned word below {end}"
            )));
        }
        Ok(self.base + addr as usize)
    }

    /// Runs (or finishes) thread `tid`'s current instruction.
    fn step_thread(&mut self, tid: ThreadId) -> Result<(), SimErrorKind> {
        let t = &mut self.threads[tid];
        let node = t.node as usize;
        // A finished wait: take its outcome.
        match std::mem::replace(&mut t.wait, Wait::No) {
            Wait::Fault(ticket) => self.mems[node].retire(&ticket),
            Wait::Sync(p) => {
                let Some(r) = p.result() else {
                    return Err(SimErrorKind::Sync(format!(
                        "simulator: thread {tid} ran before its operation completed"
                    )));
                };
                return self.sync_done(tid, r, true);
            }
            Wait::No | Wait::Finished => {}
        }
        let op = self.threads[tid].prog[self.threads[tid].pc];
        match op {
            Op::Load { addr, reg } => {
                if let Some(v) = self.load(tid, node, addr)? {
                    let t = &mut self.threads[tid];
                    set_reg(&mut t.regs, reg, v);
                    t.log.push(v);
                    self.advance(tid);
                }
            }
            Op::Store { addr, value } => self.store(tid, addr, value)?,
            Op::StoreReg { addr, reg } => {
                let v = reg_of(&self.threads[tid].regs, reg);
                self.store(tid, addr, v)?
            }
            Op::AddImm { reg, imm } => {
                let t = &mut self.threads[tid];
                let v = reg_of(&t.regs, reg).wrapping_add(imm);
                set_reg(&mut t.regs, reg, v);
                self.advance(tid);
            }
            Op::SpinUntilEq {
                addr,
                value,
                max_loads,
            } => {
                if let Some(v) = self.load(tid, node, addr)? {
                    let t = &mut self.threads[tid];
                    if v == value {
                        t.spins = 0;
                        self.advance(tid);
                    } else {
                        t.spins += 1;
                        if t.spins > max_loads {
                            return Err(SimErrorKind::SpinBound { thread: tid, addr });
                        }
                    }
                }
            }
            Op::Lock(id) => self.begin(
                tid,
                SyncOp::Lock {
                    id,
                    try_only: false,
                },
            )?,
            Op::TryLock { lock, .. } => self.begin(
                tid,
                SyncOp::Lock {
                    id: lock,
                    try_only: true,
                },
            )?,
            Op::Unlock(id) => {
                if self.lock_holders.get(&id) == Some(&tid) {
                    self.lock_holders.remove(&id);
                }
                self.begin(tid, SyncOp::Unlock(id))?
            }
            Op::Barrier { id, count } => self.begin(
                tid,
                SyncOp::Barrier {
                    id,
                    count: Some(count),
                },
            )?,
            Op::BarrierAll(id) => self.begin(tid, SyncOp::Barrier { id, count: None })?,
            Op::Crash => {
                let node = self.threads[tid].node;
                self.crash(node)
            }
        }
        Ok(())
    }

    /// Thread `tid` on `node` loads the word at `addr`: its value, or None when the access
    /// faulted (the thread then waits for the fault).
    fn load(&mut self, tid: ThreadId, node: usize, addr: u64) -> Result<Option<u64>, SimErrorKind> {
        let w = self.window(addr)?;
        match self.mems[node]
            .try_load(w, 8)
            .map_err(|e| SimErrorKind::BadProgram(e.to_string()))?
        {
            Attempt::Done(b) => {
                let word: [u8; 8] = b.try_into().map_err(|b: Vec<u8>| {
                    SimErrorKind::Protocol(format!("a load of 8 bytes returned {}", b.len()))
                })?;
                Ok(Some(u64::from_le_bytes(word)))
            }
            Attempt::Faulted(f) => {
                self.threads[tid].wait = Wait::Fault(f);
                Ok(None)
            }
        }
    }

    fn store(&mut self, tid: ThreadId, addr: u64, v: u64) -> Result<(), SimErrorKind> {
        let w = self.window(addr)?;
        let node = self.threads[tid].node as usize;
        match self.mems[node]
            .try_store(w, &v.to_le_bytes())
            .map_err(|e| SimErrorKind::BadProgram(e.to_string()))?
        {
            Attempt::Done(()) => self.advance(tid),
            Attempt::Faulted(f) => self.threads[tid].wait = Wait::Fault(f),
        }
        Ok(())
    }

    /// Starts a synchronisation operation as an application thread's call does (fast path
    /// first for locks).
    fn begin(&mut self, tid: ThreadId, op: SyncOp) -> Result<(), SimErrorKind> {
        let t = &self.threads[tid];
        let node = t.node;
        match self.nodes[node as usize]
            .begin(self.now, t.waiter, op)
            .map_err(engine_error)?
        {
            None => {
                let r = match op {
                    SyncOp::Lock { .. } => WaitResult::Granted,
                    _ => WaitResult::Released,
                };
                self.sync_done(tid, r, false)
            }
            Some(p) => {
                if let SyncOp::Lock { id, .. } = op {
                    self.lock_waits.entry((id, node)).or_default().0 += 1;
                }
                self.threads[tid].wait = Wait::Sync(p);
                Ok(())
            }
        }
    }

    /// Node `node` dies: its threads stop, nothing more reaches it, and its connections close
    /// once what it sent is read.
    fn crash(&mut self, node: NodeId) {
        self.crashed = Some(node);
        for t in self.threads.iter_mut().filter(|t| t.node == node) {
            t.wait = Wait::Finished;
        }
        for row in &self.taps {
            if let Some(tap) = &row[node as usize] {
                tap.cut();
            }
        }
        for q in &mut self.chans[node as usize] {
            q.clear();
        }
    }

    /// Thread `tid`'s synchronisation operation completed with `r`, in the engine (`slow`)
    /// or through the fast path.
    fn sync_done(&mut self, tid: ThreadId, r: WaitResult, slow: bool) -> Result<(), SimErrorKind> {
        let op = self.threads[tid].prog[self.threads[tid].pc];
        match (op, r) {
            (Op::Lock(id), WaitResult::Granted) => self.enter(tid, id, slow)?,
            (Op::TryLock { lock, reg }, WaitResult::Granted) => {
                self.enter(tid, lock, slow)?;
                set_reg(&mut self.threads[tid].regs, reg, 1);
            }
            (Op::TryLock { lock, reg }, WaitResult::TryFailed) => {
                self.stop_waiting(tid, lock);
                set_reg(&mut self.threads[tid].regs, reg, 0);
            }
            (Op::Unlock(_), WaitResult::Released)
            | (Op::Barrier { .. } | Op::BarrierAll(_), WaitResult::BarrierDone) => {}
            (op, r) => {
                return Err(SimErrorKind::Sync(format!(
                    "thread {tid}: {op:?} ended with {r:?}"
                )))
            }
        }
        self.advance(tid);
        Ok(())
    }

    /// A thread of `tid`'s node no longer waits in the engine for `lock`.
    fn stop_waiting(&mut self, tid: ThreadId, lock: u64) {
        let node = self.threads[tid].node;
        if let Some(w) = self.lock_waits.get_mut(&(lock, node)) {
            w.0 = w.0.saturating_sub(1);
        }
    }

    /// Thread `tid` entered lock `id`'s critical section (after waiting in the engine if
    /// `slow`): nobody else may be inside. Counts the grant against the nodes still waiting
    /// whose request joined the lock's queue (some node has it as its successor), as the
    /// protocol-level simulator does from the `LockForward`'s delivery: the fairness bound
    /// holds from there, while grants made before the request reached the queue depend only
    /// on how long the simulator keeps it in flight.
    fn enter(&mut self, tid: ThreadId, id: u64, slow: bool) -> Result<(), SimErrorKind> {
        if slow {
            self.stop_waiting(tid, id);
        }
        let node = self.threads[tid].node;
        let others_wait = self
            .lock_waits
            .iter()
            .any(|(&(lock, n), w)| lock == id && n != node && w.0 > 0);
        let queued: Vec<NodeId> = if others_wait {
            self.nodes
                .iter()
                .filter_map(|n| n.inspect_sync(|st| st.lock_successor(id)))
                .collect()
        } else {
            Vec::new()
        };
        for (&(lock, n), w) in self.lock_waits.iter_mut() {
            if lock != id {
                continue;
            }
            if n == node {
                // The node holds the token: its wait starts over.
                w.1 = 0;
            } else if w.0 > 0 && queued.contains(&n) {
                w.1 += 1;
                self.max_overtakes = self.max_overtakes.max(w.1);
            }
        }
        if let Some(other) = self.lock_holders.insert(id, tid) {
            return Err(SimErrorKind::Invariant(format!(
                "threads {other} and {tid} hold lock {id} at once"
            )));
        }
        Ok(())
    }

    fn advance(&mut self, tid: ThreadId) {
        let t = &mut self.threads[tid];
        t.pc += 1;
        if t.pc == t.prog.len() {
            t.wait = Wait::Finished;
        }
    }

    /// A page writable on one node is accessible on no other.
    fn check_single_writer(&self) -> Result<(), SimErrorKind> {
        let ps = self.cfg.page_size;
        for page in 0..PAGES as usize {
            let addr = self.base + page * ps;
            let access: Vec<Access> = self.mems.iter().map(|m| m.access_of(addr)).collect();
            let writers = access.iter().filter(|a| **a == Access::Write).count();
            let others = access.iter().filter(|a| **a != Access::None).count();
            if writers > 1 || (writers == 1 && others > 1) {
                return Err(SimErrorKind::Invariant(format!(
                    "page {page}: access per node {access:?} (a writer must be alone)"
                )));
            }
            if writers == 0 && others > 1 {
                // Readers only: their copies must be the same.
                let mut copies = (0..self.mems.len())
                    .filter(|&n| access[n] == Access::Read && Some(n as NodeId) != self.crashed)
                    .map(|n| (n, self.mems[n].contents(addr)));
                let Some((first, want)) = copies.next() else {
                    continue;
                };
                if let Some((n, _)) = copies.find(|(_, c)| *c != want) {
                    return Err(SimErrorKind::Invariant(format!(
                        "page {page}: readable on nodes {first} and {n} with different contents"
                    )));
                }
            }
        }
        Ok(())
    }

    fn dump(&self) -> String {
        let mut s = format!("after {} steps (seed {}):\n", self.steps, self.cfg.seed);
        for (i, t) in self.threads.iter().enumerate() {
            let state = match &t.wait {
                Wait::No => "runnable",
                Wait::Fault(_) => "waiting for a fault",
                Wait::Sync(_) => "waiting in the engine",
                Wait::Finished => "finished",
            };
            s.push_str(&format!(
                "  thread {i} on node {}: pc {} of {} ({:?}), {state}\n",
                t.node,
                t.pc,
                t.prog.len(),
                t.prog.get(t.pc)
            ));
        }
        for (to, row) in self.chans.iter().enumerate() {
            for (from, q) in row.iter().enumerate() {
                if !q.is_empty() {
                    s.push_str(&format!(
                        "  {} frame(s) in flight {from} -> {to}\n",
                        q.len()
                    ));
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(proto: &'static str, nodes: NodeId, seed: u64) -> EngineCluster {
        let cfg = SimConfig::new(nodes, seed).page_size(64);
        EngineCluster::new(cfg, move |_| crate::by_name(proto).expect("protocol")).expect("cluster")
    }

    #[test]
    fn the_first_use_of_a_lock_at_its_manager_takes_the_fast_path() {
        for proto in ["sc-sw", "sc-mw", "scope"] {
            let mut c = cluster(proto, 2, 1);
            // Lock 4 is managed by node 0 (4 % 2): its token is idle there from the start.
            c.spawn(0, vec![Op::Lock(4), Op::Unlock(4)]);
            c.run().expect("runs");
            assert_eq!(
                c.fast_lock_ops(),
                1,
                "{proto}: the acquisition took the fast path"
            );
        }
    }

    #[test]
    fn a_lock_taken_again_on_its_node_takes_the_fast_path() {
        for proto in ["sc-sw", "sc-mw", "scope"] {
            let mut c = cluster(proto, 2, 1);
            let x = c.addr(2, 0);
            let mut prog = Vec::new();
            for v in 1..=4 {
                prog.extend([Op::Lock(5), Op::Store { addr: x, value: v }, Op::Unlock(5)]);
            }
            c.spawn(0, prog);
            c.run().expect("runs");
            assert!(
                c.fast_lock_ops() > 0,
                "{proto}: no fast-path lock operation"
            );
        }
    }
}
