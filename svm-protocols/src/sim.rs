//! A deterministic simulated cluster: N nodes, each running a coherence protocol
//! (`Box<dyn Protocol>`) and a [`SyncState`], with simulated page memory and access tables and
//! one FIFO channel per ordered pair of nodes, driven by simulated threads running small
//! programs of [`Op`]s.
//!
//! The cluster executes protocol [`Action`]s and sync [`SyncEvent`]s exactly as the engine does
//! (see `svm_core::protocol`): in order; `SetAccess` to `None` may drop a node's copy (see
//! [`Discard`]); a page never installed reads as zeros; `attach` reads the sender's page when
//! the action executes; a thread blocked on a fault is woken when an action raises the page's
//! access to what it needs, and then retries its access (faulting again if it lost the race).
//! Twins and diffs: `MakeTwin` copies the node's current contents of the page (zeros if never
//! installed); `SendDiffs` encodes each page against its twin with `svm_core::diff::encode`
//! when it executes, drops the twins and sends the concatenation as the message's data;
//! `ApplyIncomingDiffs` decodes the incoming data with `svm_core::diff::apply` into the
//! node's contents (materializing zero pages), leaving access untouched. Contract violations
//! (twin made twice, `SendDiffs` of a page without a twin, lowering a twinned page to `None`,
//! malformed diffs) fail the run with [`SimErrorKind::Protocol`].
//!
//! Barriers: arrivals call `Protocol::on_barrier_arrive`, departures
//! `Protocol::on_barrier_depart`. When a barrier in which every simulated thread takes part
//! completes on a node, the cluster calls `SyncState::clear_lock_notices` on that node before
//! the departure hook, as the engine does after a global barrier.
//!
//! At every step a seeded RNG picks one enabled step: deliver the head of any non-empty channel,
//! or run one instruction of any runnable thread. Message delays and interleavings are therefore
//! random while per-pair FIFO holds, and a seed replays the same run exactly.
//!
//! ```
//! use svm_protocols::sim::{Cluster, Op, SimConfig};
//! use svm_protocols::ScSingleWriter;
//!
//! let mut c = Cluster::new(SimConfig::new(2, 42), |_| Box::new(ScSingleWriter::new()));
//! let x = c.addr(1, 0);
//! c.spawn(0, vec![Op::Store { addr: x, value: 7 }, Op::Barrier { id: 0, count: 2 }]);
//! let t = c.spawn(1, vec![Op::Barrier { id: 0, count: 2 }, Op::Load { addr: x, reg: 0 }]);
//! c.run().unwrap();
//! assert_eq!(c.log(t), &[7]);
//! ```

use std::collections::{HashMap, VecDeque};
use std::fmt::{self, Write as _};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use svm_comm::wire::SyncMsg;
use svm_core::protocol::{
    Access, Action, BarrierDeparture, Context, NodeId, PageId, ProtoMsg, Protocol, ProtocolStats,
};
use svm_core::sync::{SyncEvent, SyncState};

/// Maps a page to its home node.
pub type HomeFn = Arc<dyn Fn(PageId) -> NodeId + Send + Sync>;

/// Index of a simulated thread (returned by [`Cluster::spawn`]).
pub type ThreadId = usize;

/// What `SetAccess { access: None }` does to a node's copy of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discard {
    /// Drop the contents on every node but the page's home (the strictest reading of the
    /// contract for home-based protocols: the home keeps its master copy).
    NotHome,
    /// Keep the contents (only the protection changes).
    Never,
    /// Drop the contents on every node, the home included: what the real userfaultfd engine
    /// does (it `MADV_DONTNEED`s the page on every `SetAccess None`).
    Always,
}

/// How a simulated cluster is built.
#[derive(Clone)]
pub struct SimConfig {
    pub nodes: NodeId,
    /// Bytes per page (a multiple of 8; small pages give contention).
    pub page_size: usize,
    /// Seed of the scheduler's RNG.
    pub seed: u64,
    /// A run that takes more steps fails with [`SimErrorKind::StepLimit`].
    pub max_steps: u64,
    /// Home (manager) of each page.
    pub home: HomeFn,
    pub discard: Discard,
    /// After every step check the single-writer/multiple-reader invariant on the pages the
    /// step touched: one writer and no reader, or readers whose copies are identical. Holds for
    /// `sc-sw`, not for multiple-writer protocols.
    pub check_single_writer: bool,
    /// How many recent events an error dump shows.
    pub trace_len: usize,
    /// Model the engine's lock fast path: a lock whose token is idle on the node is taken
    /// and released without the protocol's hooks while the protocol is quiescent
    /// (`Protocol::quiescent`); if it stops being quiescent meanwhile, `on_acquire` (no
    /// notices) runs late and the release runs normally. Default: on.
    pub fast_locks: bool,
    /// Model the engine's `Context::install_unused`: a page whose installation woke a thread
    /// counts as unused until that thread takes a step, for at most this much virtual time
    /// (ns; 0 = never unused). Default: 200 µs.
    pub unused_install_ns: u64,
}

impl SimConfig {
    /// `nodes` nodes, 64-byte pages, home of page p = p mod nodes, at most 1,000,000 steps.
    pub fn new(nodes: NodeId, seed: u64) -> Self {
        assert!(nodes > 0, "a cluster needs at least one node");
        SimConfig {
            nodes,
            page_size: 64,
            seed,
            max_steps: 1_000_000,
            home: Arc::new(move |p| (p % nodes as u64) as NodeId),
            discard: Discard::NotHome,
            check_single_writer: false,
            fast_locks: true,
            unused_install_ns: 200_000,
            trace_len: 48,
        }
    }

    pub fn page_size(mut self, bytes: usize) -> Self {
        self.page_size = bytes;
        self
    }

    /// How many recent events an error dump shows.
    pub fn trace(mut self, events: usize) -> Self {
        self.trace_len = events;
        self
    }

    pub fn max_steps(mut self, steps: u64) -> Self {
        self.max_steps = steps;
        self
    }

    pub fn home(mut self, f: impl Fn(PageId) -> NodeId + Send + Sync + 'static) -> Self {
        self.home = Arc::new(f);
        self
    }

    pub fn discard(mut self, d: Discard) -> Self {
        self.discard = d;
        self
    }

    pub fn check_single_writer(mut self, on: bool) -> Self {
        self.check_single_writer = on;
        self
    }
    pub fn fast_locks(mut self, on: bool) -> Self {
        self.fast_locks = on;
        self
    }
}

/// One instruction of a simulated thread. Addresses are byte addresses of 8-byte words
/// (`page * page_size + 8 * word`, see [`Cluster::addr`]); values are `u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `regs[reg] = mem[addr]`; the value is also appended to the thread's log.
    Load { addr: u64, reg: usize },
    /// `mem[addr] = value`.
    Store { addr: u64, value: u64 },
    /// `mem[addr] = regs[reg]`.
    StoreReg { addr: u64, reg: usize },
    /// `regs[reg] += imm` (wrapping; no memory access).
    AddImm { reg: usize, imm: u64 },
    /// Acquire a lock (waits).
    Lock(u64),
    /// Try to acquire a lock: `regs[reg] = 1` if acquired, `0` if it was held.
    TryLock { lock: u64, reg: usize },
    /// Release a lock.
    Unlock(u64),
    /// Wait until `count` threads in total arrived at barrier `id`.
    Barrier { id: u64, count: u32 },
    /// Barrier `id` of every node, one thread each (`SyncState::barrier_all_arrive`: the
    /// dissemination barrier the engine uses for the global barrier).
    BarrierAll(u64),
    /// Re-load `addr` until it equals `value`; more than `max_loads` loads is an error.
    SpinUntilEq {
        addr: u64,
        value: u64,
        max_loads: u32,
    },
    /// The thread's node dies: its threads stop and messages to it are lost. What it sent
    /// before is still delivered (as TCP does); once that is drained every peer sees the
    /// connection close, and the run ends with [`SimErrorKind::NodeLost`] naming it — the
    /// engine ends the job the same way.
    Crash,
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimErrorKind {
    /// No step is enabled but some thread has not finished.
    Deadlock,
    /// The run exceeded `max_steps`.
    StepLimit(u64),
    /// A `SpinUntilEq` exceeded its load bound.
    SpinBound { thread: ThreadId, addr: u64 },
    /// The protocol broke the engine contract (unknown token, install without data, ...).
    Protocol(String),
    /// The sync layer refused an operation (unlock without holding, barrier mismatch, ...).
    Sync(String),
    /// The single-writer/multiple-reader invariant was violated.
    Invariant(String),
    /// The program is malformed (misaligned or unaligned address, ...).
    BadProgram(String),
    /// A node died ([`Op::Crash`]); `tokens` are the locks whose token it held.
    NodeLost { node: NodeId, tokens: Vec<u64> },
}

/// A failed run: what went wrong and a dump of the cluster's state at that moment.
#[derive(Debug, Clone)]
pub struct SimError {
    pub kind: SimErrorKind,
    pub dump: String,
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "simulation failed: {:?}\n{}", self.kind, self.dump)
    }
}

impl std::error::Error for SimError {}

/// Counters of a completed run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    pub steps: u64,
    /// Protocol messages sent (including messages to self).
    pub proto_messages: u64,
    /// Protocol messages that carried a page.
    pub pages_sent: u64,
    pub sync_messages: u64,
    /// Protocol messages sent by `SendDiffs`.
    pub diff_messages: u64,
    /// Bytes of diff data sent (headers included).
    pub diff_bytes_sent: u64,
    /// Payload bytes written into pages by `ApplyIncomingDiffs`.
    pub diff_bytes_applied: u64,
    /// Twins made.
    pub twins: u64,
    /// Largest number of write notices held at lock managers over the whole cluster, sampled
    /// after every sync message delivery.
    pub peak_lock_notices: u64,
    /// Fairness: the largest number of grants of a lock to other nodes' threads between a
    /// node's request reaching the end of the lock's queue (the manager's `LockForward`
    /// delivered) and the token reaching that node.
    pub max_lock_overtakes: u64,
    /// Lock acquires and releases that took the fast path ([`SimConfig::fast_locks`]).
    pub fast_lock_ops: u64,
    /// Bytes of every message (protocol and sync, to other nodes) as the wire would carry them:
    /// frame header, control payload and data. Messages to self cost nothing on a wire.
    pub wire_bytes: u64,
    /// Messages (protocol and sync) to other nodes.
    pub wire_messages: u64,
}

/// Bytes of `msg` with `data` bytes of data on the wire (header + control payload + data).
fn wire_len(msg: &svm_comm::wire::Msg, data: usize) -> u64 {
    let frame = svm_comm::wire::encode(msg, 0, 0, &[]).map_or(0, |f| f.len());
    (frame + data) as u64
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ThreadState {
    Runnable,
    /// Waiting for `need` access to `page`.
    Fault {
        page: PageId,
        need: Access,
    },
    /// Waiting for the lock to be granted.
    Lock(u64),
    /// Waiting for the protocol's `ReleaseDone`.
    Release(u64),
    /// Arrived, waiting for the barrier to complete.
    Barrier(u64),
    /// Waiting for the protocol's `AcquireDone`.
    Acquire(u64),
    Finished,
}

struct Thread {
    node: NodeId,
    prog: Vec<Op>,
    pc: usize,
    regs: Vec<u64>,
    log: Vec<u64>,
    spins: u32,
    state: ThreadState,
}

/// What a protocol token stands for.
#[derive(Debug)]
enum Pending {
    Unlock {
        tid: ThreadId,
        lock: u64,
    },
    Arrive {
        tid: ThreadId,
        barrier: u64,
        /// None: an all-nodes barrier.
        count: Option<u32>,
    },
    Acquire {
        tids: Vec<ThreadId>,
    },
}

enum Payload {
    Proto {
        msg: ProtoMsg,
        data: Option<Vec<u8>>,
    },
    Sync(SyncMsg),
}

enum TraceEv {
    Proto {
        from: NodeId,
        to: NodeId,
        msg: ProtoMsg,
        data: bool,
    },
    Sync {
        from: NodeId,
        to: NodeId,
        msg: SyncMsg,
    },
    Thread {
        tid: ThreadId,
        node: NodeId,
        pc: usize,
        op: Op,
    },
}

impl fmt::Display for TraceEv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceEv::Proto {
                from,
                to,
                msg,
                data,
            } => {
                write!(
                    f,
                    "deliver {from} -> {to}: {msg:?}{}",
                    if *data { " + data" } else { "" }
                )
            }
            TraceEv::Sync { from, to, msg } => write!(f, "deliver {from} -> {to}: {msg:?}"),
            TraceEv::Thread { tid, node, pc, op } => {
                write!(f, "thread {tid} (node {node}) pc {pc}: {op:?}")
            }
        }
    }
}

struct SimCtx {
    me: NodeId,
    nodes: NodeId,
    home: HomeFn,
    /// Virtual time: it moves only when a protocol timer runs (`Choice::Timer`), to that
    /// timer's time, so any step may come between arming a timer and its end.
    now: u64,
    /// Pages whose installation woke a thread that has not taken a step since: (page,
    /// thread, when); unused while younger than `unused_ns`.
    unused: Vec<(PageId, ThreadId, u64)>,
    unused_ns: u64,
    /// The node's local memory (pages absent: zeros).
    mem: HashMap<PageId, Vec<u8>>,
    page_size: usize,
}

impl Context for SimCtx {
    fn me(&self) -> NodeId {
        self.me
    }
    fn nodes(&self) -> NodeId {
        self.nodes
    }
    fn home(&self, page: PageId) -> NodeId {
        (self.home)(page)
    }
    fn now(&self) -> u64 {
        self.now
    }
    fn install_unused(&self, page: PageId) -> bool {
        self.unused
            .iter()
            .any(|&(p, _, at)| p == page && self.now.saturating_sub(at) < self.unused_ns)
    }
    fn page_digest(&self, page: PageId) -> Option<u64> {
        Some(match self.mem.get(&page) {
            Some(m) => svm_core::protocol::page_digest(m),
            None => svm_core::protocol::page_digest(&vec![0; self.page_size]),
        })
    }
}

struct SimNode {
    ctx: SimCtx,
    proto: Box<dyn Protocol>,
    sync: SyncState,
    access: HashMap<PageId, Access>,
    twins: HashMap<PageId, Vec<u8>>,
    pending: HashMap<u64, Pending>,
    next_token: u64,
}

impl SimNode {
    fn token(&mut self, p: Pending) -> u64 {
        let t = self.next_token;
        self.next_token += 1;
        self.pending.insert(t, p);
        t
    }
}

#[derive(Clone, Copy)]
enum Choice {
    Channel(usize),
    Thread(ThreadId),
    /// The linger time of a released lock token on a node passes (`SyncEvent::Linger`).
    Linger(NodeId, u64),
    /// A node's protocol timer comes due (`Protocol::next_timer`, sc-sw's minimum hold).
    Timer(NodeId),
}

type SimResult<T = ()> = Result<T, SimErrorKind>;

/// A deterministic simulated cluster; see the module docs.
pub struct Cluster {
    cfg: SimConfig,
    n: usize,
    nodes: Vec<SimNode>,
    threads: Vec<Thread>,
    /// `chans[from * n + to]`.
    chans: Vec<VecDeque<Payload>>,
    rng: StdRng,
    stats: RunStats,
    trace: VecDeque<TraceEv>,
    /// Pages whose access or contents changed during the current step.
    touched: Vec<(NodeId, PageId)>,
    zero_page: Vec<u8>,
    choices: Vec<Choice>,
    /// The thread inside each lock's critical section (mutual exclusion check).
    lock_holders: HashMap<u64, ThreadId>,
    /// (lock, node) → grants to other nodes since the node's request joined the lock's queue.
    lock_waits: HashMap<(u64, NodeId), u64>,
    /// The node that crashed ([`Op::Crash`]).
    crashed: Option<NodeId>,
    /// Lingering lock tokens (node, lock): their timers fire at random steps.
    lingers: Vec<(NodeId, u64)>,
    /// Threads holding a lock taken through the fast path: thread → (lock, acquire hooks ran).
    fast_holders: HashMap<ThreadId, (u64, bool)>,
}

impl Cluster {
    /// Builds a cluster; `factory(node)` makes each node's protocol instance.
    pub fn new(cfg: SimConfig, factory: impl Fn(NodeId) -> Box<dyn Protocol>) -> Self {
        assert!(
            cfg.page_size >= 8 && cfg.page_size & 7 == 0,
            "page size must be a positive multiple of 8"
        );
        let n = cfg.nodes as usize;
        let nodes = (0..cfg.nodes)
            .map(|me| SimNode {
                ctx: SimCtx {
                    me,
                    nodes: cfg.nodes,
                    home: cfg.home.clone(),
                    now: 0,
                    unused: Vec::new(),
                    unused_ns: cfg.unused_install_ns,
                    mem: HashMap::new(),
                    page_size: cfg.page_size,
                },
                proto: factory(me),
                sync: SyncState::new(me, cfg.nodes),
                access: HashMap::new(),
                twins: HashMap::new(),
                pending: HashMap::new(),
                next_token: 1,
            })
            .collect();
        Cluster {
            rng: StdRng::seed_from_u64(cfg.seed),
            zero_page: vec![0; cfg.page_size],
            n,
            nodes,
            threads: Vec::new(),
            chans: (0..n * n).map(|_| VecDeque::new()).collect(),
            stats: RunStats::default(),
            trace: VecDeque::new(),
            touched: Vec::new(),
            choices: Vec::new(),
            lock_holders: HashMap::new(),
            lock_waits: HashMap::new(),
            crashed: None,
            lingers: Vec::new(),
            fast_holders: HashMap::new(),
            cfg,
        }
    }

    /// Byte address of word `word` of page `page`.
    pub fn addr(&self, page: PageId, word: usize) -> u64 {
        page * self.cfg.page_size as u64 + 8 * word as u64
    }

    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Adds a thread running `prog` on `node`; threads start when [`Cluster::run`] is called.
    pub fn spawn(&mut self, node: NodeId, prog: Vec<Op>) -> ThreadId {
        assert!((node as usize) < self.n, "node {node} out of range");
        let state = if prog.is_empty() {
            ThreadState::Finished
        } else {
            ThreadState::Runnable
        };
        self.threads.push(Thread {
            node,
            prog,
            pc: 0,
            regs: Vec::new(),
            log: Vec::new(),
            spins: 0,
            state,
        });
        self.threads.len() - 1
    }

    /// Runs until every thread has finished. On failure the error carries a dump.
    pub fn run(&mut self) -> Result<RunStats, SimError> {
        match self.run_inner() {
            Ok(()) => Ok(self.stats),
            Err(kind) => Err(SimError {
                dump: self.dump(&kind),
                kind,
            }),
        }
    }

    /// Registers of a thread (grown on demand; unwritten registers are 0).
    pub fn regs(&self, t: ThreadId) -> &[u64] {
        &self.threads[t].regs
    }

    /// Every value a thread loaded with [`Op::Load`], in program order.
    pub fn log(&self, t: ThreadId) -> &[u64] {
        &self.threads[t].log
    }

    /// The word at `addr` in `node`'s local memory, whatever its access (0 if absent).
    pub fn peek(&self, node: NodeId, addr: u64) -> u64 {
        let ps = self.cfg.page_size as u64;
        let (page, off) = (addr / ps, (addr % ps) as usize);
        self.nodes[node as usize]
            .ctx
            .mem
            .get(&page)
            .map(|m| u64::from_le_bytes(m[off..off + 8].try_into().expect("8 bytes")))
            .unwrap_or(0)
    }

    /// `node`'s current access to `page`.
    pub fn access(&self, node: NodeId, page: PageId) -> Access {
        self.nodes[node as usize]
            .access
            .get(&page)
            .copied()
            .unwrap_or(Access::None)
    }

    pub fn protocol(&self, node: NodeId) -> &dyn Protocol {
        &*self.nodes[node as usize].proto
    }

    /// The dump an error would carry (threads, pages in play, recent events), on demand: for
    /// a test that finds a wrong result in a run that did not fail.
    pub fn dump_now(&self, why: &str) -> String {
        self.dump(&SimErrorKind::BadProgram(why.to_string()))
    }

    /// A node's synchronization state (lock notices kept at managers, ...).
    pub fn sync_state(&self, node: NodeId) -> &SyncState {
        &self.nodes[node as usize].sync
    }

    /// Whether `node` holds a twin of `page`.
    pub fn has_twin(&self, node: NodeId, page: PageId) -> bool {
        self.nodes[node as usize].twins.contains_key(&page)
    }

    pub fn protocol_stats(&self, node: NodeId) -> ProtocolStats {
        self.nodes[node as usize].proto.stats()
    }

    pub fn stats(&self) -> RunStats {
        self.stats
    }

    /// Every node's access and protocol account of `page`.
    pub fn describe(&self, page: PageId) -> String {
        let mut s = format!("page {page} (home node {}):\n", (self.cfg.home)(page));
        for (i, nd) in self.nodes.iter().enumerate() {
            let _ = writeln!(
                s,
                "  node {i}: access {:?}; {}",
                self.access(i as NodeId, page),
                nd.proto.describe(page)
            );
        }
        s
    }

    // ---------------- scheduler ----------------

    fn run_inner(&mut self) -> SimResult {
        loop {
            self.choices.clear();
            for (i, c) in self.chans.iter().enumerate() {
                if !c.is_empty() {
                    self.choices.push(Choice::Channel(i));
                }
            }
            for &(node, lock) in &self.lingers {
                if self.crashed != Some(node) {
                    self.choices.push(Choice::Linger(node, lock));
                }
            }
            for (i, nd) in self.nodes.iter().enumerate() {
                if self.crashed != Some(i as NodeId) && nd.proto.next_timer().is_some() {
                    self.choices.push(Choice::Timer(i as NodeId));
                }
            }
            let mut unfinished = false;
            for (i, t) in self.threads.iter().enumerate() {
                match t.state {
                    ThreadState::Runnable => self.choices.push(Choice::Thread(i)),
                    ThreadState::Finished => {}
                    _ => unfinished = true,
                }
            }
            if let Some(dead) = self.crashed {
                let pending =
                    (0..self.n).any(|to| !self.chans[dead as usize * self.n + to].is_empty());
                if !pending {
                    return Err(SimErrorKind::NodeLost {
                        node: dead,
                        tokens: self.nodes[dead as usize].sync.tokens_held(),
                    });
                }
            }
            if self.choices.is_empty() {
                return if unfinished {
                    Err(SimErrorKind::Deadlock)
                } else {
                    Ok(())
                };
            }
            if self.stats.steps >= self.cfg.max_steps {
                return Err(SimErrorKind::StepLimit(self.stats.steps));
            }
            self.stats.steps += 1;
            let pick = self.choices[self.rng.gen_range(0..self.choices.len())];
            self.touched.clear();
            match pick {
                Choice::Channel(c) => self.deliver(c)?,
                Choice::Thread(t) => self.step_thread(t)?,
                Choice::Linger(node, lock) => {
                    self.lingers.retain(|&x| x != (node, lock));
                    let mut ev = Vec::new();
                    self.nodes[node as usize].sync.linger_expired(lock, &mut ev);
                    self.sync_events(node, ev)?;
                }
                Choice::Timer(node) => {
                    let nd = &mut self.nodes[node as usize];
                    if let Some(due) = nd.proto.next_timer() {
                        nd.ctx.now = nd.ctx.now.max(due);
                    }
                    let mut out = Vec::new();
                    nd.proto.on_timer(&nd.ctx, &mut out);
                    self.exec(node, out, None)?;
                }
            }
            if self.cfg.check_single_writer {
                self.check_single_writer()?;
            }
        }
    }

    fn record(&mut self, ev: TraceEv) {
        if self.cfg.trace_len == 0 {
            return;
        }
        if self.trace.len() >= self.cfg.trace_len {
            self.trace.pop_front();
        }
        self.trace.push_back(ev);
    }

    fn deliver(&mut self, c: usize) -> SimResult {
        let (from, to) = ((c / self.n) as NodeId, (c % self.n) as NodeId);
        let payload = self.chans[c]
            .pop_front()
            .expect("chosen channel is non-empty");
        if self.crashed == Some(to) {
            return Ok(());
        }
        match payload {
            Payload::Proto { msg, data } => {
                self.record(TraceEv::Proto {
                    from,
                    to,
                    msg: msg.clone(),
                    data: data.is_some(),
                });
                let mut out = Vec::new();
                let nd = &mut self.nodes[to as usize];
                nd.proto.on_message(
                    &nd.ctx,
                    from,
                    &msg,
                    data.as_ref().map_or(0, Vec::len),
                    &mut out,
                );
                self.exec(to, out, data.as_deref())
            }
            Payload::Sync(msg) => {
                self.record(TraceEv::Sync {
                    from,
                    to,
                    msg: msg.clone(),
                });
                if let SyncMsg::LockForward {
                    lock,
                    to: waiting,
                    try_only: false,
                } = msg
                {
                    self.lock_waits.insert((lock, waiting), 0);
                }
                let mut ev = Vec::new();
                self.nodes[to as usize].sync.on_message(from, &msg, &mut ev);
                let held: usize = self
                    .nodes
                    .iter()
                    .map(|nd| nd.sync.lock_notice_count())
                    .sum();
                self.stats.peak_lock_notices = self.stats.peak_lock_notices.max(held as u64);
                self.sync_events(to, ev)
            }
        }
    }

    fn step_thread(&mut self, tid: ThreadId) -> SimResult {
        let t = &self.threads[tid];
        let (node, pc, op) = (t.node, t.pc, t.prog[t.pc]);
        self.record(TraceEv::Thread { tid, node, pc, op });
        self.nodes[node as usize]
            .ctx
            .unused
            .retain(|&(_, t, _)| t != tid);
        match op {
            Op::Load { addr, reg } => {
                if let Some(v) = self.access_word(tid, addr, None)? {
                    let t = &mut self.threads[tid];
                    set_reg(&mut t.regs, reg, v);
                    t.log.push(v);
                    self.advance(tid);
                }
            }
            Op::Store { addr, value } => {
                if self.access_word(tid, addr, Some(value))?.is_some() {
                    self.advance(tid);
                }
            }
            Op::StoreReg { addr, reg } => {
                let value = reg_of(&self.threads[tid].regs, reg);
                if self.access_word(tid, addr, Some(value))?.is_some() {
                    self.advance(tid);
                }
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
                if let Some(v) = self.access_word(tid, addr, None)? {
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
            Op::Lock(lock) | Op::TryLock { lock, .. }
                if self.cfg.fast_locks
                    && self.nodes[node as usize].sync.token_idle(lock)
                    && self.nodes[node as usize].proto.quiescent() =>
            {
                let try_only = matches!(op, Op::TryLock { .. });
                let mut ev = Vec::new();
                self.nodes[node as usize]
                    .sync
                    .lock_acquire(lock, tid as u64, try_only, &mut ev);
                if !matches!(ev.as_slice(), [SyncEvent::Granted { .. }]) {
                    return Err(SimErrorKind::Sync(format!(
                        "node {node}: an idle token of lock {lock} gave {ev:?}"
                    )));
                }
                if let Some(h) = self.lock_holders.insert(lock, tid) {
                    return Err(SimErrorKind::Invariant(format!(
                        "mutual exclusion: lock {lock} taken by thread {tid} (fast path) while thread {h} holds it"
                    )));
                }
                self.stats.fast_lock_ops += 1;
                self.fast_holders.insert(tid, (lock, false));
                let t = &mut self.threads[tid];
                if let Op::TryLock { reg, .. } = op {
                    set_reg(&mut t.regs, reg, 1);
                }
                self.advance(tid);
            }
            Op::Lock(lock) | Op::TryLock { lock, .. } => {
                let try_only = matches!(op, Op::TryLock { .. });
                self.threads[tid].state = ThreadState::Lock(lock);
                let mut ev = Vec::new();
                self.nodes[node as usize]
                    .sync
                    .lock_acquire(lock, tid as u64, try_only, &mut ev);
                self.sync_events(node, ev)?;
            }
            Op::Unlock(lock) => {
                if let Some((held, hooks_ran)) = self.fast_holders.remove(&tid) {
                    if held != lock {
                        self.fast_holders.insert(tid, (held, hooks_ran));
                    } else {
                        let nd = &self.nodes[node as usize];
                        if !hooks_ran && nd.proto.quiescent() && !nd.sync.lock_wanted(lock) {
                            self.lock_holders.remove(&lock);
                            let mut ev = Vec::new();
                            self.nodes[node as usize]
                                .sync
                                .lock_release(lock, tid as u64, Vec::new(), &mut ev)
                                .map_err(|e| SimErrorKind::Sync(format!("node {node}: {e}")))?;
                            self.stats.fast_lock_ops += 1;
                            self.advance(tid);
                            return self.sync_events(node, ev);
                        }
                        if !hooks_ran {
                            self.late_acquire(node)?;
                        }
                    }
                }
                self.start_release(tid, Pending::Unlock { tid, lock })?
            }
            Op::Crash => {
                self.crashed = Some(node);
                for t in self.threads.iter_mut().filter(|t| t.node == node) {
                    t.state = ThreadState::Finished;
                }
            }
            Op::Barrier { id, count } => self.start_release(
                tid,
                Pending::Arrive {
                    tid,
                    barrier: id,
                    count: Some(count),
                },
            )?,
            Op::BarrierAll(id) => self.start_release(
                tid,
                Pending::Arrive {
                    tid,
                    barrier: id,
                    count: None,
                },
            )?,
        }
        Ok(())
    }

    fn advance(&mut self, tid: ThreadId) {
        let t = &mut self.threads[tid];
        t.pc += 1;
        t.state = if t.pc >= t.prog.len() {
            ThreadState::Finished
        } else {
            ThreadState::Runnable
        };
    }

    fn start_release(&mut self, tid: ThreadId, p: Pending) -> SimResult {
        let node = self.threads[tid].node;
        let nd = &mut self.nodes[node as usize];
        let barrier = match p {
            Pending::Arrive { count, .. } => Some(count.is_none()),
            _ => None,
        };
        let token = nd.token(p);
        self.threads[tid].state = ThreadState::Release(token);
        let mut out = Vec::new();
        match barrier {
            Some(true) => nd
                .proto
                .on_all_nodes_barrier_arrive(&nd.ctx, token, &mut out),
            Some(false) => nd.proto.on_barrier_arrive(&nd.ctx, token, &mut out),
            None => nd.proto.on_release(&nd.ctx, token, &mut out),
        }
        self.exec(node, out, None)
    }

    /// Loads (`store = None`) or stores a word for thread `tid`. Returns `None` if the access
    /// faulted: the thread is then blocked and the protocol has been told.
    fn access_word(
        &mut self,
        tid: ThreadId,
        addr: u64,
        store: Option<u64>,
    ) -> SimResult<Option<u64>> {
        let ps = self.cfg.page_size as u64;
        if addr & 7 != 0 {
            return Err(SimErrorKind::BadProgram(format!(
                "thread {tid}: address {addr:#x} is not 8-byte aligned"
            )));
        }
        let (page, off) = (addr / ps, (addr % ps) as usize);
        let node = self.threads[tid].node;
        let need = if store.is_some() {
            Access::Write
        } else {
            Access::Read
        };
        if self.access(node, page) < need {
            self.threads[tid].state = ThreadState::Fault { page, need };
            let mut out = Vec::new();
            let nd = &mut self.nodes[node as usize];
            nd.proto.on_fault(&nd.ctx, page, need, &mut out);
            self.exec(node, out, None)?;
            return Ok(None);
        }
        let mem = self.nodes[node as usize]
            .ctx
            .mem
            .entry(page)
            .or_insert_with(|| vec![0; ps as usize]);
        let word = &mut mem[off..off + 8];
        match store {
            Some(v) => {
                word.copy_from_slice(&v.to_le_bytes());
                self.touched.push((node, page));
                Ok(Some(v))
            }
            None => Ok(Some(u64::from_le_bytes(
                (&*word).try_into().expect("8 bytes"),
            ))),
        }
    }

    // ---------------- engine: actions and sync events ----------------

    fn exec(&mut self, node: NodeId, actions: Vec<Action>, incoming: Option<&[u8]>) -> SimResult {
        self.convert_fast(node)?;
        for a in actions {
            match a {
                Action::Send { to, msg, attach } => {
                    if to as usize >= self.n {
                        return Err(SimErrorKind::Protocol(format!("node {node} sent {msg:?} to unknown node {to}")));
                    }
                    let data = attach.map(|p| {
                        self.nodes[node as usize].ctx.mem.get(&p).cloned().unwrap_or_else(|| self.zero_page.clone())
                    });
                    self.stats.proto_messages += 1;
                    self.stats.pages_sent += data.is_some() as u64;
                    if to != node {
                        let m = svm_comm::wire::Msg::Proto { proto: 0, msg: msg.clone() };
                        self.stats.wire_bytes += wire_len(&m, data.as_ref().map_or(0, |d| d.len()));
                        self.stats.wire_messages += 1;
                    }
                    self.chans[node as usize * self.n + to as usize].push_back(Payload::Proto { msg, data });
                }
                Action::SetAccess { page, access } => {
                    if access == Access::None && self.nodes[node as usize].twins.contains_key(&page) {
                        return Err(SimErrorKind::Protocol(format!(
                            "node {node}: SetAccess None on page {page}, which has a twin (its writes would be lost)"
                        )));
                    }
                    self.set_access(node, page, access)
                }
                Action::MakeTwin { page } => {
                    let nd = &mut self.nodes[node as usize];
                    let cur = nd.ctx.mem.get(&page).cloned().unwrap_or_else(|| self.zero_page.clone());
                    if nd.twins.insert(page, cur).is_some() {
                        return Err(SimErrorKind::Protocol(format!("node {node}: MakeTwin of page {page}, which already has a twin")));
                    }
                    self.stats.twins += 1;
                }
                Action::DropTwin { page } => {
                    if self.nodes[node as usize].twins.remove(&page).is_none() {
                        return Err(SimErrorKind::Protocol(format!("node {node}: DropTwin of page {page}, which has no twin")));
                    }
                }
                Action::SendDiffs { to, msg, pages } => {
                    if to as usize >= self.n {
                        return Err(SimErrorKind::Protocol(format!("node {node} sent {msg:?} to unknown node {to}")));
                    }
                    let nd = &mut self.nodes[node as usize];
                    let mut data = Vec::new();
                    for &p in &pages {
                        let Some(twin) = nd.twins.remove(&p) else {
                            return Err(SimErrorKind::Protocol(format!(
                                "node {node}: SendDiffs {msg:?} names page {p}, which has no twin"
                            )));
                        };
                        let cur = nd.ctx.mem.get(&p).unwrap_or(&self.zero_page);
                        svm_core::diff::encode(p, &twin, cur, &mut data);
                    }
                    self.stats.proto_messages += 1;
                    self.stats.diff_messages += 1;
                    self.stats.diff_bytes_sent += data.len() as u64;
                    if to != node {
                        let m = svm_comm::wire::Msg::Proto { proto: 0, msg: msg.clone() };
                        self.stats.wire_bytes += wire_len(&m, data.len());
                        self.stats.wire_messages += 1;
                    }
                    let data = if pages.is_empty() { None } else { Some(data) };
                    self.chans[node as usize * self.n + to as usize].push_back(Payload::Proto { msg, data });
                }
                Action::ApplyIncomingDiffs => {
                    let Some(d) = incoming else {
                        // No data came with the message: nothing to apply.
                        continue;
                    };
                    let ps = self.cfg.page_size;
                    let nd = &mut self.nodes[node as usize];
                    let mut touched = Vec::new();
                    let r = svm_core::diff::apply(d, ps, |p, off, bytes| {
                        let m = nd.ctx.mem.entry(p).or_insert_with(|| vec![0; ps]);
                        m[off..off + bytes.len()].copy_from_slice(bytes);
                        touched.push((node, p));
                    });
                    match r {
                        Ok(sum) => self.stats.diff_bytes_applied += sum.bytes as u64,
                        Err(e) => return Err(SimErrorKind::Protocol(format!("node {node}: bad incoming diffs: {e}"))),
                    }
                    self.touched.extend(touched);
                }
                Action::InstallIncoming { page, access } => match incoming {
                    Some(d) if d.len() == self.cfg.page_size => {
                        self.nodes[node as usize].ctx.mem.insert(page, d.to_vec());
                        self.set_access(node, page, access);
                    }
                    Some(d) => {
                        return Err(SimErrorKind::Protocol(format!(
                            "node {node}: InstallIncoming of page {page} with {} bytes of data (page size {})",
                            d.len(),
                            self.cfg.page_size
                        )))
                    }
                    None => {
                        return Err(SimErrorKind::Protocol(format!(
                            "node {node}: InstallIncoming of page {page} without incoming data"
                        )))
                    }
                },
                Action::ReleaseDone { token, notices } => {
                    let mut ev = Vec::new();
                    let sync = |e| SimErrorKind::Sync(format!("node {node}: {e}"));
                    match self.nodes[node as usize].pending.remove(&token) {
                        Some(Pending::Unlock { tid, lock }) => {
                            self.lock_holders.remove(&lock);
                            self.nodes[node as usize].sync.lock_release(lock, tid as u64, notices, &mut ev).map_err(sync)?;
                            self.advance(tid);
                        }
                        Some(Pending::Arrive { tid, barrier, count }) => {
                            let sync_state = &mut self.nodes[node as usize].sync;
                            match count {
                                Some(count) => sync_state.barrier_arrive(barrier, count, tid as u64, notices, &mut ev),
                                None => sync_state.barrier_all_arrive(barrier, tid as u64, notices, &mut ev),
                            }
                            .map_err(sync)?;
                            self.threads[tid].state = ThreadState::Barrier(barrier);
                        }
                        other => {
                            return Err(SimErrorKind::Protocol(format!(
                                "node {node}: ReleaseDone for token {token}, which is {other:?}"
                            )))
                        }
                    }
                    self.sync_events(node, ev)?;
                }
                Action::AcquireDone { token } => match self.nodes[node as usize].pending.remove(&token) {
                    Some(Pending::Acquire { tids }) => {
                        for tid in tids {
                            let t = &mut self.threads[tid];
                            if let Op::TryLock { reg, .. } = t.prog[t.pc] {
                                set_reg(&mut t.regs, reg, 1);
                            }
                            self.advance(tid);
                        }
                    }
                    other => {
                        return Err(SimErrorKind::Protocol(format!(
                            "node {node}: AcquireDone for token {token}, which is {other:?}"
                        )))
                    }
                },
            }
        }
        Ok(())
    }

    fn set_access(&mut self, node: NodeId, page: PageId, access: Access) {
        let nd = &mut self.nodes[node as usize];
        let discard = match self.cfg.discard {
            Discard::Never => false,
            Discard::NotHome => nd.ctx.home(page) != node,
            Discard::Always => true,
        };
        if access == Access::None && discard {
            nd.ctx.mem.remove(&page);
        }
        nd.access.insert(page, access);
        self.touched.push((node, page));
        if access == Access::None {
            return;
        }
        let ctx = &mut self.nodes[node as usize].ctx;
        for (tid, t) in self.threads.iter_mut().enumerate() {
            if t.node != node {
                continue;
            }
            if let ThreadState::Fault { page: p, need } = t.state {
                if p == page && need <= access {
                    t.state = ThreadState::Runnable;
                    ctx.unused.retain(|&(_, u, _)| u != tid);
                    ctx.unused.push((page, tid, ctx.now));
                }
            }
        }
    }

    fn check_waiter(&self, node: NodeId, waiter: u64) -> SimResult<ThreadId> {
        match self.threads.get(waiter as usize) {
            Some(t) if t.node == node => Ok(waiter as usize),
            _ => Err(SimErrorKind::Sync(format!(
                "node {node}: sync event for unknown waiter {waiter}"
            ))),
        }
    }

    fn sync_events(&mut self, node: NodeId, events: Vec<SyncEvent>) -> SimResult {
        for ev in events {
            match ev {
                SyncEvent::Send { to, msg } => {
                    self.stats.sync_messages += 1;
                    if to != node {
                        self.stats.wire_bytes +=
                            wire_len(&svm_comm::wire::Msg::Sync(msg.clone()), 0);
                        self.stats.wire_messages += 1;
                    }
                    self.chans[node as usize * self.n + to as usize].push_back(Payload::Sync(msg));
                }
                SyncEvent::Granted {
                    waiter,
                    notices,
                    lock,
                } => {
                    let tid = self.check_waiter(node, waiter)?;
                    if let Some(h) = self.lock_holders.insert(lock, tid) {
                        return Err(SimErrorKind::Invariant(format!(
                            "mutual exclusion: lock {lock} granted to thread {tid} (node {node}) while thread {h} holds it"
                        )));
                    }
                    self.lock_waits.remove(&(lock, node));
                    for (_, n) in self.lock_waits.iter_mut().filter(|((l, _), _)| *l == lock) {
                        *n += 1;
                        self.stats.max_lock_overtakes = self.stats.max_lock_overtakes.max(*n);
                    }
                    self.start_acquire(node, vec![tid], &notices)?;
                }
                SyncEvent::BarrierDone {
                    waiters,
                    notices,
                    all_nodes,
                    nodes: took_part,
                    ..
                } => {
                    let tids = waiters
                        .iter()
                        .map(|&w| self.check_waiter(node, w))
                        .collect::<SimResult<Vec<_>>>()?;
                    let all = self.threads.len();
                    let global = tids.first().is_some_and(|&t| {
                        let t = &self.threads[t];
                        match t.prog[t.pc] {
                            Op::Barrier { count, .. } => count as usize == all,
                            Op::BarrierAll(_) => self.nodes.len() == all,
                            _ => false,
                        }
                    });
                    if global {
                        self.nodes[node as usize].sync.clear_lock_notices();
                    }
                    let departure = BarrierDeparture::of(all_nodes, took_part, self.nodes.len());
                    self.start_barrier_depart(node, tids, &notices, departure)?;
                }
                SyncEvent::Linger { lock } => {
                    if !self.lingers.contains(&(node, lock)) {
                        self.lingers.push((node, lock));
                    }
                }
                SyncEvent::TryFailed { waiter, .. } => {
                    let tid = self.check_waiter(node, waiter)?;
                    let t = &mut self.threads[tid];
                    if let Op::TryLock { reg, .. } = t.prog[t.pc] {
                        set_reg(&mut t.regs, reg, 0);
                    }
                    self.advance(tid);
                }
                SyncEvent::BarrierMismatch {
                    barrier,
                    waiter,
                    expected,
                    got,
                } => {
                    return Err(SimErrorKind::Sync(format!(
                        "node {node}: thread {waiter} arrived at barrier {barrier} with count {got}, the round's count is {expected}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The engine's fast-path conversion: a protocol hook just ran on `node`; if the protocol
    /// is no longer quiescent, the acquire hooks run late for every fast-path holder there.
    fn convert_fast(&mut self, node: NodeId) -> SimResult {
        if self.fast_holders.is_empty() || self.nodes[node as usize].proto.quiescent() {
            return Ok(());
        }
        let mut late = 0;
        for (tid, (_, hooks_ran)) in self.fast_holders.iter_mut() {
            if self.threads[*tid].node == node && !*hooks_ran {
                *hooks_ran = true;
                late += 1;
            }
        }
        for _ in 0..late {
            self.late_acquire(node)?;
        }
        Ok(())
    }

    /// `on_acquire` with no notices for a critical section entered through the fast path.
    fn late_acquire(&mut self, node: NodeId) -> SimResult {
        let nd = &mut self.nodes[node as usize];
        let token = nd.token(Pending::Acquire { tids: Vec::new() });
        let mut out = Vec::new();
        nd.proto.on_acquire(&nd.ctx, token, &[], &mut out);
        self.exec(node, out, None)
    }

    fn start_acquire(
        &mut self,
        node: NodeId,
        tids: Vec<ThreadId>,
        notices: &[PageId],
    ) -> SimResult {
        let nd = &mut self.nodes[node as usize];
        let token = nd.token(Pending::Acquire { tids: tids.clone() });
        for tid in tids {
            self.threads[tid].state = ThreadState::Acquire(token);
        }
        let mut out = Vec::new();
        nd.proto.on_acquire(&nd.ctx, token, notices, &mut out);
        self.exec(node, out, None)
    }

    fn start_barrier_depart(
        &mut self,
        node: NodeId,
        tids: Vec<ThreadId>,
        notices: &[PageId],
        departure: BarrierDeparture,
    ) -> SimResult {
        let nd = &mut self.nodes[node as usize];
        let token = nd.token(Pending::Acquire { tids: tids.clone() });
        for tid in tids {
            self.threads[tid].state = ThreadState::Acquire(token);
        }
        let mut out = Vec::new();
        departure.run(nd.proto.as_mut(), &nd.ctx, token, notices, &mut out);
        self.exec(node, out, None)
    }

    // ---------------- invariant and diagnostics ----------------

    fn page_bytes(&self, node: NodeId, page: PageId) -> &[u8] {
        self.nodes[node as usize]
            .ctx
            .mem
            .get(&page)
            .map_or(&self.zero_page[..], |m| &m[..])
    }

    fn check_single_writer(&mut self) -> SimResult {
        let mut pages: Vec<PageId> = self.touched.iter().map(|&(_, p)| p).collect();
        pages.sort_unstable();
        pages.dedup();
        for page in pages {
            let mut writers = Vec::new();
            let mut readers = Vec::new();
            for n in 0..self.cfg.nodes {
                match self.access(n, page) {
                    Access::Write => writers.push(n),
                    Access::Read => readers.push(n),
                    Access::None => {}
                }
            }
            if writers.len() > 1 || (!writers.is_empty() && !readers.is_empty()) {
                return Err(SimErrorKind::Invariant(format!(
                    "page {page}: writers {writers:?} and readers {readers:?} at once"
                )));
            }
            if let Some((&first, rest)) = readers.split_first() {
                for &r in rest {
                    if self.page_bytes(first, page) != self.page_bytes(r, page) {
                        return Err(SimErrorKind::Invariant(format!(
                            "page {page}: read copies of nodes {first} and {r} differ"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    fn dump(&self, kind: &SimErrorKind) -> String {
        let mut s = format!(
            "seed {}, {} nodes, step {}\nthreads:\n",
            self.cfg.seed, self.n, self.stats.steps
        );
        let mut pages: Vec<PageId> = Vec::new();
        let mut locks = Vec::new();
        let mut barriers = Vec::new();
        for (i, t) in self.threads.iter().enumerate() {
            let op = t
                .prog
                .get(t.pc)
                .map_or("-".to_string(), |o| format!("{o:?}"));
            let _ = writeln!(
                s,
                "  thread {i} on node {}: pc {}/{} {op}, state {:?}",
                t.node,
                t.pc,
                t.prog.len(),
                t.state
            );
            match t.state {
                ThreadState::Fault { page, .. } => pages.push(page),
                ThreadState::Lock(l) => locks.push(l),
                ThreadState::Barrier(b) => barriers.push(b),
                _ => {}
            }
            if let Some(
                Op::Load { addr, .. }
                | Op::Store { addr, .. }
                | Op::StoreReg { addr, .. }
                | Op::SpinUntilEq { addr, .. },
            ) = t.prog.get(t.pc)
            {
                pages.push(addr / self.cfg.page_size as u64);
            }
        }
        if let SimErrorKind::SpinBound { addr, .. } = kind {
            pages.push(addr / self.cfg.page_size as u64);
        }
        for ev in &self.trace {
            if let TraceEv::Proto { msg, .. } = ev {
                pages.push(msg.page());
            }
        }
        pages.sort_unstable();
        pages.dedup();
        locks.sort_unstable();
        locks.dedup();
        barriers.sort_unstable();
        barriers.dedup();
        for p in pages {
            s += &self.describe(p);
        }
        for l in locks {
            for nd in &self.nodes {
                let _ = writeln!(s, "node {}: {}", nd.ctx.me, nd.sync.describe_lock(l));
            }
        }
        for b in barriers {
            for nd in &self.nodes {
                let _ = writeln!(s, "node {}: {}", nd.ctx.me, nd.sync.describe_barrier(b));
            }
        }
        for (i, c) in self.chans.iter().enumerate() {
            if !c.is_empty() {
                let _ = writeln!(
                    s,
                    "channel {} -> {}: {} queued",
                    i / self.n,
                    i % self.n,
                    c.len()
                );
            }
        }
        s += "recent events (oldest first):\n";
        for ev in &self.trace {
            let _ = writeln!(s, "  {ev}");
        }
        s
    }
}

/// Register `reg` of a thread (unwritten registers are 0).
pub(crate) fn reg_of(regs: &[u64], reg: usize) -> u64 {
    regs.get(reg).copied().unwrap_or(0)
}

/// Writes register `reg`, growing the register file as needed.
pub(crate) fn set_reg(regs: &mut Vec<u64>, reg: usize, v: u64) {
    if regs.len() <= reg {
        regs.resize(reg + 1, 0);
    }
    regs[reg] = v;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ScSingleWriter;

    fn sc_sw(_: NodeId) -> Box<dyn Protocol> {
        Box::new(ScSingleWriter::new())
    }

    /// A protocol that never answers anything (to exercise deadlock detection).
    struct Mute;
    impl Protocol for Mute {
        fn name(&self) -> &'static str {
            "mute"
        }
        fn on_fault(&mut self, _: &dyn Context, _: PageId, _: Access, _: &mut Vec<Action>) {}
        fn on_message(
            &mut self,
            _: &dyn Context,
            _: NodeId,
            _: &ProtoMsg,
            _: usize,
            _: &mut Vec<Action>,
        ) {
        }
        fn on_release(&mut self, _: &dyn Context, token: u64, out: &mut Vec<Action>) {
            out.push(Action::ReleaseDone {
                token,
                notices: vec![],
            });
        }
        fn on_acquire(&mut self, _: &dyn Context, token: u64, _: &[PageId], out: &mut Vec<Action>) {
            out.push(Action::AcquireDone { token });
        }
        fn describe(&self, page: PageId) -> String {
            format!("mute knows nothing about page {page}")
        }
    }

    /// Grants read access and takes it back in the same batch on the first fault, for good on
    /// the second.
    struct Flicker {
        faults: u32,
    }
    impl Protocol for Flicker {
        fn name(&self) -> &'static str {
            "flicker"
        }
        fn on_fault(&mut self, _: &dyn Context, page: PageId, _: Access, out: &mut Vec<Action>) {
            self.faults += 1;
            out.push(Action::SetAccess {
                page,
                access: Access::Read,
            });
            if self.faults == 1 {
                out.push(Action::SetAccess {
                    page,
                    access: Access::None,
                });
            }
        }
        fn on_message(
            &mut self,
            _: &dyn Context,
            _: NodeId,
            _: &ProtoMsg,
            _: usize,
            _: &mut Vec<Action>,
        ) {
        }
        fn on_release(&mut self, _: &dyn Context, token: u64, out: &mut Vec<Action>) {
            out.push(Action::ReleaseDone {
                token,
                notices: vec![],
            });
        }
        fn on_acquire(&mut self, _: &dyn Context, token: u64, _: &[PageId], out: &mut Vec<Action>) {
            out.push(Action::AcquireDone { token });
        }
        fn stats(&self) -> ProtocolStats {
            ProtocolStats {
                invalidations: self.faults as u64,
                ..ProtocolStats::default()
            }
        }
        fn describe(&self, page: PageId) -> String {
            format!("flicker page {page}")
        }
    }

    #[test]
    fn a_woken_thread_retries_and_faults_again_if_access_was_lost() {
        let mut c = Cluster::new(SimConfig::new(1, 1), |_| Box::new(Flicker { faults: 0 }));
        let t = c.spawn(0, vec![Op::Load { addr: 0, reg: 0 }]);
        c.run().unwrap();
        assert_eq!(c.log(t), &[0]);
        assert_eq!(
            c.protocol_stats(0).invalidations,
            2,
            "the retry must fault a second time"
        );
    }

    #[test]
    fn same_seed_same_run() {
        let run = |seed| {
            let mut c = Cluster::new(SimConfig::new(3, seed), sc_sw);
            let ts: Vec<_> = (0..3)
                .map(|n| {
                    c.spawn(
                        n,
                        vec![
                            Op::Store {
                                addr: 8 * n as u64,
                                value: n as u64 + 1,
                            },
                            Op::Load { addr: 0, reg: 0 },
                            Op::Load { addr: 8, reg: 1 },
                            Op::Load { addr: 16, reg: 2 },
                        ],
                    )
                })
                .collect();
            let stats = c.run().unwrap();
            (
                stats,
                ts.iter().map(|&t| c.log(t).to_vec()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(run(5), run(5));
        let distinct: std::collections::HashSet<_> = (0..50).map(|s| run(s).1).collect();
        assert!(
            distinct.len() > 1,
            "different seeds should interleave differently"
        );
    }

    #[test]
    fn deadlock_is_reported_with_a_dump() {
        let mut c = Cluster::new(SimConfig::new(2, 1), |_| Box::new(Mute));
        c.spawn(1, vec![Op::Load { addr: 0, reg: 0 }]);
        let e = c.run().unwrap_err();
        assert_eq!(e.kind, SimErrorKind::Deadlock);
        assert!(e.dump.contains("mute knows nothing about page 0"), "{e}");
        assert!(e.dump.contains("Fault"), "{e}");
    }

    #[test]
    fn step_limit_and_spin_bound() {
        let mut c = Cluster::new(SimConfig::new(1, 1).max_steps(10), sc_sw);
        c.spawn(
            0,
            vec![Op::SpinUntilEq {
                addr: 0,
                value: 1,
                max_loads: 1000,
            }],
        );
        assert_eq!(c.run().unwrap_err().kind, SimErrorKind::StepLimit(10));
        let mut c = Cluster::new(SimConfig::new(1, 1), sc_sw);
        c.spawn(
            0,
            vec![Op::SpinUntilEq {
                addr: 8,
                value: 1,
                max_loads: 5,
            }],
        );
        assert_eq!(
            c.run().unwrap_err().kind,
            SimErrorKind::SpinBound { thread: 0, addr: 8 }
        );
    }

    #[test]
    fn misuse_is_reported() {
        let mut c = Cluster::new(SimConfig::new(2, 1), sc_sw);
        c.spawn(0, vec![Op::Unlock(3)]);
        assert!(matches!(c.run().unwrap_err().kind, SimErrorKind::Sync(_)));
        let mut c = Cluster::new(SimConfig::new(2, 1), sc_sw);
        c.spawn(0, vec![Op::Barrier { id: 0, count: 2 }]);
        c.spawn(1, vec![Op::Barrier { id: 0, count: 3 }]);
        let e = c.run().unwrap_err();
        // Either arrival may reach the manager first; the other is refused.
        assert!(
            matches!(e.kind, SimErrorKind::Sync(ref m) if m.contains("count")),
            "{e}"
        );
        let mut c = Cluster::new(SimConfig::new(1, 1), sc_sw);
        c.spawn(0, vec![Op::Load { addr: 3, reg: 0 }]);
        assert!(matches!(
            c.run().unwrap_err().kind,
            SimErrorKind::BadProgram(_)
        ));
    }

    #[test]
    fn try_lock_and_registers() {
        let mut c = Cluster::new(SimConfig::new(2, 9), sc_sw);
        let t = c.spawn(
            0,
            vec![
                Op::TryLock { lock: 1, reg: 0 },
                Op::Load { addr: 8, reg: 1 },
                Op::AddImm { reg: 1, imm: 5 },
                Op::StoreReg { addr: 8, reg: 1 },
                Op::Unlock(1),
                Op::Load { addr: 8, reg: 2 },
            ],
        );
        c.run().unwrap();
        assert_eq!(c.regs(t), &[1, 5, 5]);
        assert_eq!(c.peek(0, 8), 5);
        assert_eq!(c.access(0, 0), Access::Write);
        assert!(c.describe(0).contains("sc-sw page 0"));
    }

    #[test]
    fn dropped_copies_read_zero_on_the_next_install_only_if_unwritten() {
        // Node 1 writes page 0 (home 0): ownership moves, the home's copy becomes stale but is
        // kept; node 1's copy is dropped when ownership returns to node 0.
        let mut c = Cluster::new(SimConfig::new(2, 3).check_single_writer(true), sc_sw);
        c.spawn(
            1,
            vec![
                Op::Store { addr: 0, value: 9 },
                Op::Barrier { id: 0, count: 2 },
            ],
        );
        let t = c.spawn(
            0,
            vec![
                Op::Barrier { id: 0, count: 2 },
                Op::Store { addr: 8, value: 1 },
                Op::Load { addr: 0, reg: 0 },
            ],
        );
        c.run().unwrap();
        assert_eq!(c.log(t), &[9]);
        assert_eq!(c.access(1, 0), Access::None);
        assert_eq!(
            c.peek(1, 0),
            0,
            "a non-home node's copy is dropped at SetAccess None"
        );
        assert!(c.stats().pages_sent >= 2);
    }
}
