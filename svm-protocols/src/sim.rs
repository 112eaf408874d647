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
    /// A lock timer of a node comes due.
    LockTimer(LockTimer),
    /// A node's protocol timer comes due (`Protocol::next_timer`, sc-sw's minimum hold).
    Timer(NodeId),
}

/// A node's timer of a lock: it fires at a random step.
#[derive(Clone, Copy, PartialEq, Eq)]
struct LockTimer {
    kind: LockTimerKind,
    node: NodeId,
    lock: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LockTimerKind {
    /// The linger time of a released lock token passes (`SyncEvent::Linger`).
    Linger,
    /// The quantum of a remote request for a lock token ends (`SyncEvent::Quantum`).
    Quantum,
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
    /// The lock timers armed: lingering tokens and quanta of remote requests.
    lock_timers: Vec<LockTimer>,
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
            lock_timers: Vec::new(),
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

#[path = "sim_exec.rs"]
mod exec;
#[path = "sim_scheduler.rs"]
mod scheduler;

#[cfg(test)]
#[path = "sim_tests.rs"]
mod tests;
