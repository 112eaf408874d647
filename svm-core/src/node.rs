//! The engine: connects the fault backend, the coherence protocol, the communicator and the
//! synchronization objects of one node.
//!
//! Threads:
//! - the **engine thread** waits (epoll) on the fault backend, every peer link and a wake-up
//!   eventfd; it serves faults and messages under the state lock and never blocks on the network
//!   for a reply (every multi-step operation is a state machine continuation);
//! - **application threads** run lock/unlock/barrier/finish themselves under the state lock
//!   (sending their own requests), then sleep on their own wait cell until the engine completes
//!   them;
//! - page faults park the faulting thread (kernel for uffd, fault slot futex for segv) until the
//!   engine raises the page's access.
//!
//! Every wait has a deadline (`SVM_TIMEOUT`); a lost peer or an expired deadline ends the node
//! with a diagnostic naming what was waited for. Failures are returned as [`EngineError`] to one
//! exit point (`failure.rs`). The same engine can be driven step by step instead of by its
//! thread (`driven.rs`: deterministic simulation, tests).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use svm_comm::transport::{Link, RecvBuf};
use svm_comm::wire::{self, Msg};

use crate::config::{Config, StatsMode};
use crate::fault::{Fault, FaultBackend, WaiterRef};
use crate::page_table::{PageTable, PageWaiter};
use crate::protocol::{Action, BarrierDeparture, Context, Protocol};
use crate::space::Space;
use crate::stats::{Counters, Stats};
use crate::sync::fast::FastLock;
use crate::sync::sem::SemState;
use crate::sync::{SyncError, SyncEvent, SyncState, Waiter};
use crate::sys::segv::now_ns;
use crate::sys::{futex, EventFd, Poller};
use crate::{Access, NodeId, PageId};

/// The protocols' [`Ctx`] for a step of node `$node` on its state `$st` (a macro, not a
/// method: it borrows the state's fields one by one, so its protocols stay free to be
/// borrowed mutably beside it).
macro_rules! node_ctx {
    ($node:expr, $st:expr) => {
        $crate::node::Ctx {
            me: $node.me,
            nodes: $node.nodes,
            space: &$node.space,
            now: $st.now,
            installs: &$st.installs,
            lock_pages: &$st.lock_pages,
            contents: $node.page_contents(&$st.pages, &$st.shadows),
        }
    };
}

mod driven;
pub(crate) mod engine;
mod failure;
mod installs;
mod lock_pages;
mod lockfast;
mod messages;
mod ops;
mod outbox;
mod pages;
mod step;
mod sync_ops;

pub use driven::Pending;
pub use failure::{EngineError, FailureMode};

/// `Node::lock_in_use` when no thread of the node holds a lock.
const NO_LOCK: u64 = u64::MAX;

/// How long a send that found its peer's connection closed waits for that peer's Goodbye
/// before the job ends (`EngineState::send_lost`).
const SEND_LOST_GRACE: Duration = Duration::from_millis(500);

/// Id of the barrier of all nodes (`svm::barrier()`); ids from 2^63 up are the runtime's.
pub const GLOBAL_BARRIER: u64 = u64::MAX;

/// Largest job whose all-nodes barriers use dissemination ([`Node::barrier_all_nodes`]).
/// Measured with `svm-bench sync` on a 2-core host (µs per barrier, TCP / DECK-SCI, central →
/// dissemination): 2 nodes 31 → 17 / 17 → 12; 4 nodes 86 → 94–140 / 82 → 76–87; 8 nodes
/// 198 → 236–332 / 120 → 168–235. With more nodes than cores each round waits for its
/// partner's engine to be scheduled, so ⌈log2 N⌉ rounds lose to the manager's two delays.
pub const DISSEMINATION_MAX_NODES: usize = 2;
/// What a readiness event of the engine's poller stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PollToken {
    /// The fault backend has faults to read.
    Faults,
    /// Another thread of this node woke the engine (`Node::wake`).
    Wake,
    /// The link to this peer has data (or closed).
    Peer(NodeId),
}

impl PollToken {
    /// The poller's key of this token.
    fn key(self) -> u64 {
        match self {
            PollToken::Faults => 0,
            PollToken::Wake => 1,
            PollToken::Peer(p) => 2 + p as u64,
        }
    }

    /// The token of a poller key (None for a key no token makes).
    fn of_key(key: u64) -> Option<PollToken> {
        match key {
            0 => Some(PollToken::Faults),
            1 => Some(PollToken::Wake),
            k => NodeId::try_from(k - 2).ok().map(PollToken::Peer),
        }
    }
}
/// Set by [`Node::probe_fault_detection`] just before it touches a page: the next fault's
/// detection time is measured from it.
static PROBE_T0: AtomicU64 = AtomicU64::new(0);

/// Nodes built in this process so far (`Node::instance`); starts at 1 so that 0 never names a
/// node.
static NODE_INSTANCES: AtomicU64 = AtomicU64::new(1);

const NOT_ENDING: i32 = i32::MIN;
/// The status this process is ending the job with, once it started doing so on purpose.
static ENDING_CODE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(NOT_ENDING);

/// Exit status of a node that fails the job (lost peer, deadline, protocol error).
pub const EXIT_FAILURE: i32 = 70;

/// How an application thread's wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitResult {
    Granted,
    TryFailed,
    Released,
    BarrierDone,
    NotHolder,
    BarrierMismatch {
        expected: u32,
        got: u32,
    },
    ZeroCount,
    /// A second thread of a node arrived at an all-nodes barrier while the first waits.
    BarrierBusy,
    Finished,
}

/// One application thread's wait slot.
pub struct WaitCell {
    state: AtomicU32,
    result: Mutex<Option<WaitResult>>,
}

impl WaitCell {
    fn new() -> Self {
        WaitCell {
            state: AtomicU32::new(0),
            result: Mutex::new(None),
        }
    }
    fn complete(&self, r: WaitResult) {
        *self.result.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        self.state.store(1, Ordering::Release);
        futex::wake(&self.state, 1);
    }
}

enum ReleaseCont {
    Unlock {
        lock: u64,
        waiter: Waiter,
    },
    SemPost {
        sem: u64,
        waiter: Waiter,
    },
    Barrier {
        barrier: u64,
        /// Participants in total; None: every node, one thread each (dissemination).
        count: Option<u32>,
        waiter: Waiter,
    },
    /// The arrival hooks a thread runs before it enters a barrier through shared memory.
    HostBarrierArrive {
        waiter: Waiter,
    },
}

/// Which protocol hooks a release or an acquire runs (`Node::release_all`, `acquire_all`).
#[derive(Debug, Clone, Copy)]
enum SyncKind {
    /// `on_release`: a lock or a semaphore.
    LockOrSem,
    /// `on_barrier_arrive`: a barrier of a count of threads.
    Barrier,
    /// `on_all_nodes_barrier_arrive`: a barrier of every node, one thread each.
    AllNodesBarrier,
}

struct AcquireCont {
    waiters: Vec<Waiter>,
    result: WaitResult,
}

/// What an application thread is blocked on (for diagnostics).
#[derive(Debug, Clone)]
enum Blocked {
    Lock(u64),
    Unlock(u64),
    Barrier(u64),
    SemWait(u64),
    SemPost(u64),
    Finish,
}

/// A synchronisation operation of an application thread (the engine's slow path; see
/// `Node::run_sync_op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncOp {
    /// Acquire lock `id`; with `try_only`, complete with `TryFailed` instead of waiting.
    Lock {
        id: u64,
        try_only: bool,
    },
    Unlock(u64),
    /// Barrier `id` of `count` threads over all nodes; None: every node, one thread each.
    Barrier {
        id: u64,
        count: Option<u32>,
    },
    SemPost(u64),
    SemWait(u64),
}

impl SyncOp {
    fn blocked(self) -> Blocked {
        match self {
            SyncOp::Lock { id, .. } => Blocked::Lock(id),
            SyncOp::Unlock(id) => Blocked::Unlock(id),
            SyncOp::Barrier { id, .. } => Blocked::Barrier(id),
            SyncOp::SemPost(id) => Blocked::SemPost(id),
            SyncOp::SemWait(id) => Blocked::SemWait(id),
        }
    }
}

/// What a lock timer of the engine ends (`EngineState::lock_timers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LockTimer {
    /// The linger of a released token (`SyncState::linger_expired`).
    Linger,
    /// The quantum of a remote request (`SyncState::quantum_expired`).
    Quantum,
}

struct EngineState {
    /// Protocol instances by wire id (`PROTOCOL_NAMES`); None where unavailable.
    protocols: Vec<Option<Box<dyn Protocol>>>,
    /// Releases and acquires under way in several protocols: token → (protocols still to
    /// answer, notices gathered).
    fanin: FxHashMap<u64, (usize, Vec<PageId>)>,
    sync: SyncState,
    sems: SemState,
    pages: PageTable,
    counters: Counters,
    seq: Vec<u32>,
    frame: Vec<u8>,
    page_buf: Vec<u8>,
    loopback: VecDeque<(Msg, Vec<u8>)>,
    /// Twins of pages being written under a multiple-writer protocol.
    twins: FxHashMap<PageId, Vec<u8>>,
    /// First-touch pages whose home this node asked the directory for.
    home_queries: rustc_hash::FxHashSet<PageId>,
    /// Contents the engine holds for pages that are not present in the application mapping
    /// (a diff applied to a page the backend cannot patch in place).
    shadows: FxHashMap<PageId, Vec<u8>>,
    /// Per sender: messages held back because they name collective pages this node has not
    /// allocated yet (it is behind in the collective call sequence).
    deferred: Vec<VecDeque<(Msg, Vec<u8>)>>,
    next_token: u64,
    /// A lock release left its flush to the protocols' next release that can tell the other
    /// node anything (`Protocol::release_can_wait`, a job of two nodes): the time (ns, as
    /// `now`) by which it runs at the latest (`SVM_RELEASE_DELAY_US`). It runs before the
    /// token leaves, before a user message, or with any release of every protocol.
    release_deferred: Option<u64>,
    releases: FxHashMap<u64, ReleaseCont>,
    acquires: FxHashMap<u64, AcquireCont>,
    cells: FxHashMap<Waiter, Arc<WaitCell>>,
    /// What each blocked waiter waits for, and since when (ns, as `now`).
    blocked: FxHashMap<Waiter, (Blocked, u64)>,
    goodbye_from: Vec<bool>,
    goodbye_sent: bool,
    /// A send to this peer failed because its connection is closed, at that time, with that
    /// error: fatal unless the peer's Goodbye (which may still be unread, queued before the
    /// close) turns up within [`SEND_LOST_GRACE`]. Times are ns, as `now`.
    send_lost: Vec<Option<(u64, String)>>,
    finish_waiter: Option<Waiter>,
    /// True while handling a message from another node (fault accounting: remote vs local).
    handling_remote: bool,
    /// Lock timers: tokens lingering after a local release while a remote node waits, and
    /// the quanta of remote requests (`SyncEvent::Quantum`): (when it ends, in ns as `now`,
    /// lock, which).
    lock_timers: Vec<(u64, u64, LockTimer)>,
    /// The page each application thread was last woken for (`Context::install_unused`).
    installs: installs::Installs,
    /// The time of the step the engine is running, in ns of the monotonic clock (the clock of
    /// `Fault::since_ns`). The engine's code reads no clock: the thread that takes the state
    /// sets this (`Node::lock_state`), or the driver of a driven node passes it in
    /// (`driven.rs`: a simulator's virtual time).
    now: u64,
    /// The fast-path words of the locks whose token has been idle here (also in `Node::fast`).
    fast_locks: FxHashMap<u64, Arc<FastLock>>,
    /// The pages each lock's critical sections asked other nodes for, and those kept here
    /// while a lock's token is wanted elsewhere (`lock_pages.rs`, `SVM_LOCK_PAGES`).
    lock_pages: lock_pages::LockPages,
}

struct Ctx<'a> {
    me: NodeId,
    nodes: NodeId,
    space: &'a Space,
    /// The step's time (`EngineState::now`).
    now: u64,
    installs: &'a installs::Installs,
    lock_pages: &'a lock_pages::LockPages,
    /// Where page contents are read for `Context::page_digest`.
    contents: PageContents<'a>,
}

/// What reading a page's local contents takes: the parts of the node and its state that
/// `Node::read_local` and `Ctx::page_digest` read (a `Ctx` cannot hold the whole state: its
/// protocols are borrowed beside it).
struct PageContents<'a> {
    backend: &'a dyn FaultBackend,
    space: &'a Space,
    pages: &'a PageTable,
    shadows: &'a FxHashMap<PageId, Vec<u8>>,
}

impl<'a> PageContents<'a> {
    /// Whether `page` has local contents, and if not, what materializing it must install: a
    /// static page's take-over contents (only until the page first had local contents; after
    /// that its contents come from the protocol), else nothing (zeros).
    fn source(&self, page: PageId) -> (bool, Option<&'a [u8]>) {
        if let Some(sh) = self.shadows.get(&page) {
            return (false, Some(sh));
        }
        match self.pages.get(page) {
            Some(e) if e.present => (true, None),
            Some(e) if e.was_present => (false, None),
            _ => (false, self.space.initial_contents(page)),
        }
    }

    /// Copies the local contents of `page` (present, held by the engine, or initial/zeros).
    fn read(&self, page: PageId, dst: &mut [u8]) -> Result<(), crate::sys::SysError> {
        if let Some(sh) = self.shadows.get(&page) {
            dst.copy_from_slice(sh);
            return Ok(());
        }
        let (present, initial) = self.source(page);
        self.backend
            .read(self.space.page_addr(page), dst, present, initial)
    }
}

impl Context for Ctx<'_> {
    fn me(&self) -> NodeId {
        self.me
    }
    fn nodes(&self) -> NodeId {
        self.nodes
    }
    fn home(&self, page: PageId) -> NodeId {
        self.space.home(page)
    }
    fn same_region(&self, page: PageId, next: PageId) -> bool {
        self.space.same_region(page, next)
    }
    fn now(&self) -> u64 {
        self.now
    }
    fn install_unused(&self, page: PageId) -> bool {
        self.installs.unused(page, self.now)
    }
    fn kept_for_lock(&self, page: PageId) -> bool {
        self.lock_pages.kept(page, self.now)
    }
    /// The page's local contents as `Node::read_local` reads them; a read that fails gives
    /// `None` (the protocol then treats the page as it would without digests).
    fn page_digest(&self, page: PageId) -> Option<u64> {
        let mut buf = vec![0u8; self.space.page_size()];
        self.contents.read(page, &mut buf).ok()?;
        Some(crate::protocol::page_digest(&buf))
    }
    fn writes_scanned(&self, page: PageId) -> bool {
        self.contents
            .backend
            .writes_scanned(self.space.page_addr(page))
    }
    fn take_scanned_writes(&self, pages: &[PageId]) -> Vec<PageId> {
        let ps = self.space.page_size();
        // Consecutive pages in one run: one walk of the page tables each.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &p in pages {
            let a = self.space.page_addr(p);
            match runs.last_mut() {
                Some((s, l)) if *s + *l == a => *l += ps,
                _ => runs.push((a, ps)),
            }
        }
        let mut addrs = Vec::new();
        // The backend reports every page of a range it could not scan (a write never goes
        // unreported); an error here is a failed write-protect of such a range as well.
        if let Err(e) = self.contents.backend.take_written(&runs, &mut addrs) {
            tracing::error!(node = self.me, "scanning for written pages: {e}");
        }
        addrs.into_iter().map(|a| self.space.page_of(a)).collect()
    }
}

/// A message of the application or a personality, waiting to be received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserMessage {
    pub from: NodeId,
    pub tag: u64,
    pub data: Vec<u8>,
}

/// What a node is made of (see [`Node::start`]).
pub struct NodeParts {
    pub cfg: Config,
    pub me: NodeId,
    pub nodes: NodeId,
    pub space: Arc<Space>,
    pub backend: Box<dyn FaultBackend>,
    /// One link per peer (None for this node).
    pub links: Vec<Option<Box<dyn Link>>>,
    /// Protocol instances by wire id (`PROTOCOL_NAMES`).
    pub protocols: Vec<Option<Box<dyn Protocol>>>,
    /// Protocol of pages outside regions with their own.
    pub default_proto: u8,
    /// What the engine does when it fails (every real node: end the job).
    pub failure_mode: FailureMode,
}

/// One node's runtime.
pub struct Node {
    pub me: NodeId,
    pub nodes: NodeId,
    pub cfg: Config,
    pub space: Arc<Space>,
    backend: Box<dyn FaultBackend>,
    links: Vec<Option<Box<dyn Link>>>,
    wake: EventFd,
    /// The engine's epoll set: faults, wake-ups and every link (watched for writability too
    /// while the link has a backlog, see `outbox.rs`).
    poller: Poller,
    /// Per peer: the frames the engine produced, until the shell writes them (`outbox.rs`).
    outboxes: Vec<outbox::Outbox>,
    /// Bytes read from each peer's link and not yet cut into frames: the engine's, but an
    /// application thread leaving a barrier through shared memory reads and handles what is
    /// there itself (`Node::read_inbound_now`); a frame is handled under its peer's lock.
    recv_bufs: Vec<Mutex<RecvBuf>>,
    /// Some outbox has frames queued.
    out_pending: AtomicBool,
    /// Some write to a link failed and the engine has not recorded it yet.
    out_failed: AtomicBool,
    /// Synchronisation operations application threads posted while another thread held the
    /// state (`step.rs`).
    posted: Mutex<Vec<step::PostedOp>>,
    /// `posted` may have operations.
    posted_any: AtomicBool,
    /// Wait times the application threads measure themselves (merged into `Node::stats`), kept
    /// apart from the engine state so recording one never waits for fault service.
    wait_times: Mutex<WaitTimes>,
    state: Mutex<EngineState>,
    stop: AtomicBool,
    engine: Mutex<Option<JoinHandle<()>>>,
    protocol_name: &'static str,
    /// The default protocol is home-based (`Protocol::home_based`).
    home_based: bool,
    next_waiter: AtomicU64,
    user_box: Mutex<VecDeque<UserMessage>>,
    user_cv: std::sync::Condvar,
    /// When the earliest armed timer is due (ns, as `EngineState::now`; `u64::MAX`: none) — a
    /// lock token lingers or a remote request's quantum ends (`EngineState::lock_timers`) or a protocol has a `next_timer` (sc-sw's
    /// minimum hold). Written under the state lock; the engine sleeps in epoll until then
    /// (`Node::run_timers`).
    timer_due: AtomicU64,
    /// Fast-path words by lock id, for application threads (written under the state lock).
    fast: RwLock<FxHashMap<u64, Arc<FastLock>>>,
    /// Some protocol is not quiescent (`Protocol::quiescent`): no fast-path lock operation.
    proto_dirty: AtomicBool,
    /// Some protocol is not barrier-quiescent (`Protocol::barrier_quiescent`): the
    /// shared-memory barrier goes through the message barrier.
    barrier_dirty: AtomicBool,
    /// Locks held through the fast path right now.
    fast_held: AtomicU32,
    /// The shared-memory barrier of a job whose nodes all run on this host over DECK-SCI
    /// ([`Node::use_host_barrier`]; `sync_ops.rs`).
    host_barrier: std::sync::OnceLock<svm_comm::deck::sci::HostBarrier>,
    /// Ids of the all-nodes barriers a thread of this node waits in through the
    /// shared-memory barrier (a second thread is refused, as on the message path).
    host_barrier_busy: Mutex<rustc_hash::FxHashSet<u64>>,
    /// Some protocol runs its barrier hooks at barriers through shared memory too
    /// (`Protocol::barrier_hooks_without_messages`; set by [`Node::use_host_barrier`]).
    host_barrier_hooks: AtomicBool,
    /// Application threads asleep outside the engine's view: in a barrier through shared
    /// memory, or waiting for a user message (the engine spins while some thread waits,
    /// `engine.rs`).
    asleep: AtomicU32,
    /// Application threads that waited for the engine (a page, a synchronisation operation)
    /// when the last step let go of the state (`step.rs`).
    waiting_in_engine: AtomicU32,
    /// The engine thread is in (or about to enter) a blocking epoll wait: a thread that starts
    /// waiting wakes it so it spins instead (`Node::engine_watch`).
    engine_sleeps: AtomicBool,
    /// Times a thread that started waiting woke the engine from its sleep (`SVM_STATS`:
    /// `spin_wakes=`).
    spin_wakes: AtomicU64,
    /// The engine's empty polls while spinning (`SVM_STATS`: `spin_polls=`).
    spin_polls: AtomicU64,
    /// The lock an application thread of this node took last and has not released yet
    /// ([`NO_LOCK`]: none): the critical section its faults belong to (`lock_pages.rs`; with
    /// several threads a guess, which costs at most a page asked for in vain).
    lock_in_use: AtomicU64,
    failure_mode: FailureMode,
    /// A number no other node of this process has (thread-local caches key on it).
    instance: u64,
    /// The error the engine stopped with, under [`FailureMode::Keep`].
    failure: Mutex<Option<EngineError>>,
    /// Where the engine's time comes from.
    clock: Clock,
}

/// Wait times of application threads (see `Node::wait_times`).
#[derive(Default)]
struct WaitTimes {
    lock_acquire_ns: crate::stats::Histogram,
    barrier_wait_ns: crate::stats::Histogram,
}

/// `m`'s guard, poisoned or not (a thread that panicked holding it left nothing half-done
/// that the node's other threads could not go on with).
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where a node's engine gets the time of a step (`EngineState::now`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clock {
    /// The monotonic clock, read whenever a thread takes the state (a running node).
    Monotonic,
    /// Given by the driver with every step (`Node::start_driven`).
    Driven,
}

impl Node {
    /// Assembles a node from its parts and starts the engine thread.
    pub fn start(parts: NodeParts) -> Result<Arc<Node>, crate::sys::SysError> {
        let node = Self::assemble(parts, Clock::Monotonic)?;
        let n2 = node.clone();
        let h = std::thread::Builder::new()
            .name(format!("svm-engine-{}", node.me))
            .spawn(move || {
                let n3 = n2.clone();
                n3.ask_for_engine_priority();
                // A dead engine thread would leave faulting threads parked forever: abort instead.
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                    if let Err(e) = n3.engine_loop() {
                        n3.engine_failed(e);
                    }
                }));
                if run.is_err() {
                    eprintln!(
                        "svm: node {}: the engine thread panicked; aborting the node",
                        n2.me
                    );
                    std::process::abort();
                }
            })
            .map_err(|e| crate::sys::SysError::Call {
                call: "spawn(engine thread)",
                errno: nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EAGAIN)),
            })?;
        *node.engine.lock().unwrap_or_else(|p| p.into_inner()) = Some(h);
        Ok(node)
    }

    /// A node made of `parts`, its engine not running yet (`start` runs it in a thread,
    /// `start_driven` leaves it to a driver, which also gives it the time).
    fn assemble(parts: NodeParts, clock: Clock) -> Result<Arc<Node>, crate::sys::SysError> {
        let NodeParts {
            cfg,
            me,
            nodes,
            space,
            backend,
            links,
            protocols,
            default_proto,
            failure_mode,
        } = parts;
        let page_size = space.page_size();
        let protocol_name = crate::protocol::PROTOCOL_NAMES[default_proto as usize];
        let home_based = protocols
            .get(default_proto as usize)
            .and_then(|p| p.as_ref())
            .is_some_and(|p| p.home_based());
        let state = EngineState {
            protocols,
            fanin: FxHashMap::default(),
            sync: SyncState::new(me, nodes),
            sems: SemState::new(nodes),
            pages: PageTable::default(),
            counters: Counters::default(),
            seq: vec![0; nodes as usize],
            frame: Vec::with_capacity(256),
            page_buf: vec![0u8; page_size],
            loopback: VecDeque::new(),
            twins: FxHashMap::default(),
            shadows: FxHashMap::default(),
            home_queries: Default::default(),
            deferred: (0..nodes).map(|_| VecDeque::new()).collect(),
            next_token: 1,
            release_deferred: None,
            releases: FxHashMap::default(),
            acquires: FxHashMap::default(),
            cells: FxHashMap::default(),
            blocked: FxHashMap::default(),
            goodbye_from: (0..nodes).map(|n| n == me).collect(),
            goodbye_sent: false,
            send_lost: vec![None; nodes as usize],
            finish_waiter: None,
            handling_remote: false,
            lock_timers: Vec::new(),
            installs: installs::Installs::default(),
            // A driven node's time starts where its driver's does.
            now: match clock {
                Clock::Monotonic => now_ns(),
                Clock::Driven => 0,
            },
            fast_locks: FxHashMap::default(),
            lock_pages: Default::default(),
        };
        let node = Arc::new(Node {
            me,
            nodes,
            cfg,
            space,
            backend,
            links,
            wake: EventFd::new()?,
            poller: Poller::new()?,
            outboxes: (0..nodes).map(|_| outbox::Outbox::new()).collect(),
            recv_bufs: (0..nodes).map(|_| Mutex::new(RecvBuf::new())).collect(),
            out_pending: AtomicBool::new(false),
            out_failed: AtomicBool::new(false),
            posted: Mutex::new(Vec::new()),
            posted_any: AtomicBool::new(false),
            wait_times: Mutex::new(WaitTimes::default()),
            state: Mutex::new(state),
            stop: AtomicBool::new(false),
            engine: Mutex::new(None),
            protocol_name,
            home_based,
            next_waiter: AtomicU64::new(1),
            user_box: Mutex::new(VecDeque::new()),
            user_cv: std::sync::Condvar::new(),
            timer_due: AtomicU64::new(u64::MAX),
            fast: RwLock::new(FxHashMap::default()),
            proto_dirty: AtomicBool::new(true),
            barrier_dirty: AtomicBool::new(true),
            fast_held: AtomicU32::new(0),
            host_barrier: std::sync::OnceLock::new(),
            host_barrier_busy: Mutex::new(Default::default()),
            host_barrier_hooks: AtomicBool::new(false),
            asleep: AtomicU32::new(0),
            waiting_in_engine: AtomicU32::new(0),
            engine_sleeps: AtomicBool::new(false),
            spin_wakes: AtomicU64::new(0),
            spin_polls: AtomicU64::new(0),
            lock_in_use: AtomicU64::new(NO_LOCK),
            failure_mode,
            instance: NODE_INSTANCES.fetch_add(1, Ordering::Relaxed),
            failure: Mutex::new(None),
            clock,
        });
        crate::profile::start(crate::profile::Setup {
            profile: node.cfg.profile.as_deref(),
            trace: node.cfg.trace.as_deref(),
            me,
            nodes,
            page_size,
        });
        node.record_quiescence(&node.lock_state());
        let poller = &node.poller;
        poller.add(node.backend.poll_fd(), PollToken::Faults.key())?;
        poller.add(node.wake.raw(), PollToken::Wake.key())?;
        for (peer, l) in node.links.iter().enumerate() {
            if let Some(l) = l {
                poller.add(l.poll_fd(), PollToken::Peer(peer as NodeId).key())?;
            }
        }
        Ok(node)
    }

    /// Takes the engine's state for a step; on a running node also sets the step's time
    /// (`EngineState::now`) from the clock, so that whatever the engine does under this guard
    /// sees one time that no code of the engine had to read. Letting go of the guard runs the
    /// operations other threads posted meanwhile and writes the frames the step queued
    /// (`step.rs`, `outbox.rs`).
    fn lock_state(&self) -> step::StateGuard<'_> {
        step::StateGuard::new(self, self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Where the local contents of pages are read, with the state's page table and shadow
    /// copies (`Node::read_local`, `Context::page_digest`).
    fn page_contents<'a>(
        &'a self,
        pages: &'a PageTable,
        shadows: &'a FxHashMap<PageId, Vec<u8>>,
    ) -> PageContents<'a> {
        PageContents {
            backend: &*self.backend,
            space: &self.space,
            pages,
            shadows,
        }
    }

    pub fn fault_backend_name(&self) -> &'static str {
        self.backend.name()
    }

    pub fn protocol_name(&self) -> &'static str {
        self.protocol_name
    }

    /// Whether the default protocol is home-based (`Protocol::home_based`).
    pub fn home_based(&self) -> bool {
        self.home_based
    }
}

#[cfg(test)]
mod tests {
    use super::PollToken;

    #[test]
    fn poll_tokens_round_trip_through_their_keys() {
        let all = [
            PollToken::Faults,
            PollToken::Wake,
            PollToken::Peer(0),
            PollToken::Peer(1),
            PollToken::Peer(1023),
        ];
        let keys: Vec<u64> = all.iter().map(|t| t.key()).collect();
        let mut distinct = keys.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), all.len(), "keys are distinct: {keys:?}");
        for t in all {
            assert_eq!(PollToken::of_key(t.key()), Some(t));
        }
        assert_eq!(PollToken::of_key(u64::MAX), None, "no token makes this key");
    }
}
