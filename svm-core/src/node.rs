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
//! with a diagnostic naming what was waited for.

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
use crate::protocol::{Action, Context, Protocol};
use crate::space::Space;
use crate::stats::{Counters, Stats};
use crate::sync::fast::FastLock;
use crate::sync::sem::SemState;
use crate::sync::{SyncError, SyncEvent, SyncState, Waiter};
use crate::sys::segv::now_ns;
use crate::sys::{futex, EventFd, Poller};
use crate::{Access, NodeId, PageId};

mod lockfast;

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
const TOKEN_FAULTS: u64 = u64::MAX;
const TOKEN_WAKE: u64 = u64::MAX - 1;
/// Set by [`Node::probe_fault_detection`] just before it touches a page: the next fault's
/// detection time is measured from it.
static PROBE_T0: AtomicU64 = AtomicU64::new(0);

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
    releases: FxHashMap<u64, ReleaseCont>,
    acquires: FxHashMap<u64, AcquireCont>,
    cells: FxHashMap<Waiter, Arc<WaitCell>>,
    blocked: FxHashMap<Waiter, (Blocked, Instant)>,
    goodbye_from: Vec<bool>,
    goodbye_sent: bool,
    /// A send to this peer failed because its connection is closed, at that time, with that
    /// error: fatal unless the peer's Goodbye (which may still be unread, queued before the
    /// close) turns up within [`SEND_LOST_GRACE`].
    send_lost: Vec<Option<(Instant, String)>>,
    finish_waiter: Option<Waiter>,
    /// True while handling a message from another node (fault accounting: remote vs local).
    handling_remote: bool,
    /// Lock tokens lingering after a local release while a remote node waits: (when the
    /// linger ends, lock).
    lingers: Vec<(Instant, u64)>,
    /// The fast-path words of the locks whose token has been idle here (also in `Node::fast`).
    fast_locks: FxHashMap<u64, Arc<FastLock>>,
}

struct Ctx<'a> {
    me: NodeId,
    nodes: NodeId,
    space: &'a Space,
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
    state: Mutex<EngineState>,
    stop: AtomicBool,
    engine: Mutex<Option<JoinHandle<()>>>,
    protocol_name: &'static str,
    next_waiter: AtomicU64,
    user_box: Mutex<VecDeque<UserMessage>>,
    user_cv: std::sync::Condvar,
    /// Some lock token lingers (`EngineState::lingers` is not empty): the engine polls
    /// without sleeping until the lingers end.
    lingering: AtomicBool,
    /// Fast-path words by lock id, for application threads (written under the state lock).
    fast: RwLock<FxHashMap<u64, Arc<FastLock>>>,
    /// Some protocol is not quiescent (`Protocol::quiescent`): no fast-path lock operation.
    proto_dirty: AtomicBool,
    /// Locks held through the fast path right now.
    fast_held: AtomicU32,
    /// Lock acquires through the fast path (statistics).
    fast_count: AtomicU64,
}

thread_local! {
    static THREAD_WAITER: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Node {
    /// Assembles a node from its parts and starts the engine thread.
    pub fn start(parts: NodeParts) -> Result<Arc<Node>, crate::sys::SysError> {
        let NodeParts {
            cfg,
            me,
            nodes,
            space,
            backend,
            links,
            protocols,
            default_proto,
        } = parts;
        let page_size = space.page_size();
        let protocol_name = crate::protocol::PROTOCOL_NAMES[default_proto as usize];
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
            releases: FxHashMap::default(),
            acquires: FxHashMap::default(),
            cells: FxHashMap::default(),
            blocked: FxHashMap::default(),
            goodbye_from: (0..nodes).map(|n| n == me).collect(),
            goodbye_sent: false,
            send_lost: vec![None; nodes as usize],
            finish_waiter: None,
            handling_remote: false,
            lingers: Vec::new(),
            fast_locks: FxHashMap::default(),
        };
        let node = Arc::new(Node {
            me,
            nodes,
            cfg,
            space,
            backend,
            links,
            wake: EventFd::new()?,
            state: Mutex::new(state),
            stop: AtomicBool::new(false),
            engine: Mutex::new(None),
            protocol_name,
            next_waiter: AtomicU64::new(1),
            user_box: Mutex::new(VecDeque::new()),
            user_cv: std::sync::Condvar::new(),
            lingering: AtomicBool::new(false),
            fast: RwLock::new(FxHashMap::default()),
            proto_dirty: AtomicBool::new(true),
            fast_held: AtomicU32::new(0),
            fast_count: AtomicU64::new(0),
        });
        crate::profile::start(crate::profile::Setup {
            profile: node.cfg.profile.as_deref(),
            trace: node.cfg.trace.as_deref(),
            me,
            nodes,
            page_size,
        });
        {
            let mut st = node.lock_state();
            node.note_protocols(&mut st);
        }
        let poller = Poller::new()?;
        poller.add(node.backend.poll_fd(), TOKEN_FAULTS)?;
        poller.add(node.wake.raw(), TOKEN_WAKE)?;
        for (peer, l) in node.links.iter().enumerate() {
            if let Some(l) = l {
                poller.add(l.poll_fd(), peer as u64)?;
            }
        }
        let n2 = node.clone();
        let h = std::thread::Builder::new()
            .name(format!("svm-engine-{me}"))
            .spawn(move || {
                let n3 = n2.clone();
                // A dead engine thread would leave faulting threads parked forever: abort instead.
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                    n3.engine_loop(poller)
                }))
                .is_err()
                {
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

    fn lock_state(&self) -> MutexGuard<'_, EngineState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            me: self.me,
            nodes: self.nodes,
            space: &self.space,
        }
    }

    pub fn fault_backend_name(&self) -> &'static str {
        self.backend.name()
    }

    pub fn protocol_name(&self) -> &'static str {
        self.protocol_name
    }

    // ----------------------------------------------------------------------------------------
    // Failure

    /// Ends this node with a diagnostic. Tells the peers why (best effort) so that their own
    /// messages name the cause.
    fn fatal(&self, st: Option<&EngineState>, why: &str) -> ! {
        // This node is already ending the job on purpose (exit(status) in a personality): the
        // failures that follow (peers vanishing as they obey) must not replace its status.
        let ending = ENDING_CODE.load(Ordering::Acquire);
        if ending != NOT_ENDING {
            crate::sys::exit_now(ending);
        }
        let mut msg = format!("svm: node {}: {why}", self.me);
        if let Some(st) = st {
            msg.push_str(&self.describe_waits(st));
        }
        eprintln!("{msg}");
        self.end_job(EXIT_FAILURE, why)
    }

    /// Tells every peer to end with `code` (best effort) and ends this process with it.
    pub fn end_job(&self, code: i32, why: &str) -> ! {
        let _ = ENDING_CODE.compare_exchange(NOT_ENDING, code, Ordering::AcqRel, Ordering::Acquire);
        let abort = Msg::Abort {
            reason: format!("node {}: {why}", self.me),
            code,
        };
        if let Ok(frame) = wire::encode(&abort, self.me, 0, &[]) {
            for l in self.links.iter().flatten() {
                if l.send(&[&frame]).is_ok() {
                    l.finish_sending();
                }
            }
        }
        // Exiting with unread data in a socket makes the kernel reset the connection, and a
        // reset can destroy the Abort the peer has not read yet. So read (and drop) what
        // arrives until every peer has closed — they exit on the Abort — or a short deadline.
        let deadline = Instant::now() + Duration::from_millis(500);
        let mut open: Vec<usize> = (0..self.links.len())
            .filter(|i| self.links[*i].is_some())
            .collect();
        let mut buf = RecvBuf::new();
        while !open.is_empty() && Instant::now() < deadline {
            open.retain(|&i| {
                matches!(
                    self.links[i].as_ref().map(|l| l.recv_available(&mut buf)),
                    Some(Ok(true))
                )
            });
            buf = RecvBuf::new();
            std::thread::sleep(Duration::from_millis(2));
        }
        crate::sys::exit_now(code)
    }

    fn describe_waits(&self, st: &EngineState) -> String {
        let mut s = String::new();
        for (b, since) in st.blocked.values() {
            let what = match b {
                Blocked::Lock(l) | Blocked::Unlock(l) => st.sync.describe_lock(*l),
                Blocked::Barrier(b) => st.sync.describe_barrier(*b),
                Blocked::SemWait(s) | Blocked::SemPost(s) => st.sems.describe(*s),
                Blocked::Finish => {
                    let missing: Vec<usize> = st
                        .goodbye_from
                        .iter()
                        .enumerate()
                        .filter(|(_, g)| !**g)
                        .map(|(i, _)| i)
                        .collect();
                    format!("the end of the job (nodes {missing:?} have not finished)")
                }
            };
            s.push_str(&format!(
                "\n  a thread has waited {:.1} s for {what}",
                since.elapsed().as_secs_f64()
            ));
        }
        if let Some((page, w)) = st.pages.oldest_waiter() {
            s.push_str(&format!(
                "\n  a thread has waited {:.1} s for {:?} access to page {page} (address {:#x}, home node {}): {}",
                (now_ns().saturating_sub(w.since_ns)) as f64 / 1e9,
                w.need,
                self.space.page_addr(page),
                self.space.home(page),
                self.protocol_of(st, page).map(|p| p.describe(page)).unwrap_or_default()
            ));
            let others = st.pages.pages_waited_on();
            if others > 1 {
                s.push_str(&format!(" ({} pages have waiting threads)", others));
            }
        }
        s
    }

    // ----------------------------------------------------------------------------------------
    // Sending

    fn send(&self, st: &mut EngineState, to: NodeId, msg: Msg, data: &[u8]) {
        let name = msg.stat_name();
        if to == self.me {
            st.loopback.push_back((msg, data.to_vec()));
            return;
        }
        let seq = st.seq[to as usize];
        st.seq[to as usize] = seq.wrapping_add(1);
        if let Err(e) = wire::encode_head(&msg, self.me, seq, data.len(), &mut st.frame) {
            self.fatal(Some(st), &format!("cannot encode a {name} message: {e}"));
        }
        let bytes = (st.frame.len() + data.len()) as u64;
        let m = st.counters.msgs.entry(name).or_default();
        m.sent += 1;
        m.sent_bytes += bytes;
        if crate::profile::on() {
            crate::profile::message(name, to, bytes, true);
        }
        let Some(link) = self.links.get(to as usize).and_then(|l| l.as_ref()) else {
            self.fatal(Some(st), &format!("no connection to node {to}"));
        };
        if st.send_lost[to as usize].is_some() {
            return;
        }
        if let Err(e) = link.send(&[&st.frame, data]) {
            // A peer closes its links only once every node has said Goodbye, and its own
            // Goodbye may still be unread here: then nothing sent to it matters any more. The
            // receive path reads that Goodbye, or reports the peer lost; the engine's periodic
            // check ends the job if neither happens in time.
            if !st.goodbye_from[to as usize] {
                st.send_lost[to as usize] = Some((Instant::now(), e.to_string()));
                self.wake.signal();
            }
        }
    }

    // ----------------------------------------------------------------------------------------
    // Protocol actions

    /// Runs the actions protocol `proto` emitted, in order.
    fn run_actions(&self, st: &mut EngineState, proto: u8, actions: Vec<Action>, incoming: &[u8]) {
        // A protocol hook just ran: before any action can wake a thread, tell the lock fast
        // path whether the protocols are still quiescent.
        self.note_protocols(st);
        let ps = self.space.page_size();
        let mut actions = actions.into_iter().peekable();
        while let Some(a) = actions.next() {
            match a {
                Action::Send { to, msg, attach } => match attach {
                    None => self.send(st, to, Msg::Proto { proto, msg }, &[]),
                    Some(page) => {
                        let mut buf = std::mem::take(&mut st.page_buf);
                        self.read_local(st, page, &mut buf);
                        st.counters.pages_served += 1;
                        self.send(st, to, Msg::Proto { proto, msg }, &buf);
                        st.page_buf = buf;
                    }
                },
                Action::SetAccess { page, access } if self.blank(st, page, access) => {
                    // A run of blank pages raised together (fault-around): one backend call.
                    let mut n = 1;
                    while let Some(Action::SetAccess { page: q, access: a }) = actions.peek() {
                        if *q != page + n || *a != access || !self.blank(st, *q, access) {
                            break;
                        }
                        n += 1;
                        actions.next();
                    }
                    let addr = self.space.page_addr(page);
                    let present = match self.backend.set_access(
                        addr,
                        n as usize * ps,
                        Access::None,
                        access,
                        false,
                        None,
                    ) {
                        Ok(p) => p,
                        Err(e) => self.fatal(
                            Some(st),
                            &format!("setting pages {page}..{} to {access:?}: {e}", page + n),
                        ),
                    };
                    st.counters.pages_faulted_around += n;
                    for q in page..page + n {
                        if crate::profile::on() {
                            crate::profile::access_change(q, Access::None, access, &mut |b| {
                                b.fill(0)
                            });
                        }
                        self.apply_access(st, q, access, present);
                    }
                }
                Action::SetAccess { page, access } => {
                    let addr = self.space.page_addr(page);
                    let old = st.pages.access(page);
                    if crate::profile::on() {
                        crate::profile::access_change(page, old, access, &mut |b| {
                            self.read_local(st, page, b)
                        });
                    }
                    let (present, initial) = self.materialize_source(st, page);
                    let present = match self
                        .backend
                        .set_access(addr, ps, old, access, present, initial)
                    {
                        Ok(p) => p,
                        Err(e) => {
                            self.fatal(Some(st), &format!("setting page {page} to {access:?}: {e}"))
                        }
                    };
                    if present {
                        st.shadows.remove(&page);
                    }
                    self.apply_access(st, page, access, present);
                }
                Action::InstallIncoming { page, access } => {
                    if incoming.len() != ps {
                        self.fatal(
                            Some(st),
                            &format!(
                                "a page grant for page {page} carried {} bytes, expected {ps}",
                                incoming.len()
                            ),
                        );
                    }
                    let addr = self.space.page_addr(page);
                    if crate::profile::on() {
                        let old = st.pages.access(page);
                        crate::profile::install(page, old, access, incoming, &mut |b| {
                            self.read_local(st, page, b)
                        });
                    }
                    let present = st.pages.get(page).is_some_and(|e| e.present);
                    let present = match self.backend.install(addr, incoming, access, present) {
                        Ok(p) => p,
                        Err(e) => self.fatal(Some(st), &format!("installing page {page}: {e}")),
                    };
                    st.shadows.remove(&page);
                    st.counters.pages_fetched += 1;
                    st.counters.bytes_fetched += ps as u64;
                    self.apply_access(st, page, access, present);
                }
                Action::ReleaseDone { token, notices } => {
                    if let Some(notices) = Self::fan_in(st, token, notices) {
                        self.release_done(st, token, notices);
                    }
                }
                Action::AcquireDone { token } => {
                    if Self::fan_in(st, token, Vec::new()).is_some() {
                        if let Some(c) = st.acquires.remove(&token) {
                            for w in c.waiters {
                                self.complete(st, w, c.result.clone());
                            }
                        }
                    }
                }
                Action::MakeTwin { page } => {
                    if st.twins.contains_key(&page) {
                        self.fatal(
                            Some(st),
                            &format!("protocol error: page {page} already has a twin"),
                        );
                    }
                    let mut twin = vec![0u8; ps];
                    self.read_local(st, page, &mut twin);
                    st.twins.insert(page, twin);
                    st.counters.twins_made += 1;
                }
                Action::SendDiffs { to, msg, pages } => {
                    let mut data = Vec::new();
                    let mut cur = std::mem::take(&mut st.page_buf);
                    for page in pages {
                        let Some(twin) = st.twins.remove(&page) else {
                            self.fatal(
                                Some(st),
                                &format!("protocol error: diff of page {page}, which has no twin"),
                            );
                        };
                        self.read_local(st, page, &mut cur);
                        let before = data.len();
                        crate::diff::encode(page, &twin, &cur, &mut data);
                        if crate::profile::on() {
                            crate::profile::diff_sent(page, data.len() - before);
                        }
                        st.counters.diffs_created += 1;
                    }
                    st.page_buf = cur;
                    st.counters.diff_bytes_sent += data.len() as u64;
                    self.send(st, to, Msg::Proto { proto, msg }, &data);
                }
                Action::ApplyIncomingDiffs => {
                    if !incoming.is_empty() {
                        self.apply_diffs(st, incoming);
                    }
                }
            }
        }
    }

    /// Whether raising `page` to `access` only materializes a zero page nobody waits for (it
    /// may then join a run of such pages raised with one backend call). A page a thread waits
    /// on is left to the one-page path, which gives it its own frame at once.
    fn blank(&self, st: &EngineState, page: PageId, access: Access) -> bool {
        access != Access::None
            && !st.shadows.contains_key(&page)
            && match st.pages.get(page) {
                Some(e) => e.access == Access::None && !e.present && e.waiters.is_empty(),
                None => true,
            }
            && match self.materialize_source(st, page) {
                (false, None) => true,
                (false, Some(init)) => init.iter().all(|&b| b == 0),
                (true, _) => false,
            }
    }

    /// Copies the local contents of `page` (present, held by the engine, or initial/zeros).
    fn read_local(&self, st: &EngineState, page: PageId, dst: &mut [u8]) {
        if let Some(sh) = st.shadows.get(&page) {
            dst.copy_from_slice(sh);
            return;
        }
        let (present, initial) = self.materialize_source(st, page);
        self.backend
            .read(self.space.page_addr(page), dst, present, initial);
    }

    /// Applies a diff message to local contents without changing protections: in place where
    /// the backend can, otherwise to the engine-held copy the page will be materialized from.
    fn apply_diffs(&self, st: &mut EngineState, data: &[u8]) {
        let ps = self.space.page_size();
        let mut patches: Vec<(PageId, usize, Vec<u8>)> = Vec::new();
        if let Err(e) = crate::diff::apply(data, ps, |page, off, bytes| {
            patches.push((page, off, bytes.to_vec()))
        }) {
            self.fatal(Some(st), &format!("malformed diff message: {e}"));
        }
        st.counters.diff_bytes_applied += data.len() as u64;
        let mut i = 0;
        while i < patches.len() {
            let page = patches[i].0;
            let mut j = i;
            while j < patches.len() && patches[j].0 == page {
                j += 1;
            }
            st.counters.diffs_applied += 1;
            let runs: Vec<(usize, &[u8])> =
                patches[i..j].iter().map(|(_, o, b)| (*o, &b[..])).collect();
            if crate::profile::on() {
                crate::profile::diff_applied(page, &runs);
            }
            let addr = self.space.page_addr(page);
            let (access, present) = st
                .pages
                .get(page)
                .map(|e| (e.access, e.present))
                .unwrap_or_default();
            let in_place = !st.shadows.contains_key(&page)
                && match self.backend.patch(addr, ps, access, present, &runs) {
                    Ok(done) => done,
                    Err(e) => self.fatal(Some(st), &format!("applying a diff to page {page}: {e}")),
                };
            if !in_place {
                if !st.shadows.contains_key(&page) {
                    let mut sh = vec![0u8; ps];
                    self.read_local(st, page, &mut sh);
                    st.shadows.insert(page, sh);
                }
                let sh = st.shadows.get_mut(&page).expect("inserted above");
                for (off, b) in runs {
                    sh[off..off + b.len()].copy_from_slice(b);
                }
            }
            i = j;
        }
    }

    /// Whether `page` has local contents, and if not, what materializing it must install: a
    /// static page's take-over contents (only until the page first had local contents; after
    /// that its contents come from the protocol), else nothing (zeros).
    fn materialize_source<'a>(
        &'a self,
        st: &'a EngineState,
        page: PageId,
    ) -> (bool, Option<&'a [u8]>) {
        if let Some(sh) = st.shadows.get(&page) {
            return (false, Some(sh));
        }
        match st.pages.get(page) {
            Some(e) if e.present => (true, None),
            Some(e) if e.was_present => (false, None),
            _ => (false, self.space.initial_contents(page)),
        }
    }

    fn apply_access(&self, st: &mut EngineState, page: PageId, access: Access, present: bool) {
        let mut woken: Vec<PageWaiter> = Vec::new();
        st.pages.set_access(page, access, present, &mut woken);
        if woken.is_empty() {
            return;
        }
        let now = now_ns();
        let addr = self.space.page_addr(page);
        for w in woken {
            if let WaiterRef::Slot(_) = w.waiter {
                if let Err(e) = self.backend.wake(addr, self.space.page_size(), w.waiter) {
                    self.fatal(Some(st), &format!("waking a thread on page {page}: {e}"));
                }
            }
            let dt = now.saturating_sub(w.since_ns);
            if w.need == Access::Write {
                st.counters.write_fault_ns.record(dt);
            } else {
                st.counters.read_fault_ns.record(dt);
            }
            if st.handling_remote {
                st.counters.remote_faults += 1;
            } else {
                st.counters.local_faults += 1;
            }
            if crate::profile::on() {
                let write = w.need == Access::Write;
                crate::profile::fault_served(page, write, w.since_ns, w.tid, st.handling_remote);
            }
        }
    }

    fn on_fault(&self, st: &mut EngineState, f: Fault) {
        if !self.space.contains(f.addr) {
            return;
        }
        // A plain load first: the swap (a locked RMW) only when a probe is under way.
        let probe = match PROBE_T0.load(Ordering::Acquire) {
            0 => 0,
            _ => PROBE_T0.swap(0, Ordering::AcqRel),
        };
        if probe != 0 {
            st.counters
                .fault_detect_ns
                .record(f.since_ns.saturating_sub(probe));
        }
        let page = self.space.page_of(f.addr);
        let need = if f.write { Access::Write } else { Access::Read };
        if f.write {
            st.counters.write_faults += 1;
        } else {
            st.counters.read_faults += 1;
        }
        if crate::profile::on() {
            crate::profile::fault(page, f.write, st.pages.access(page));
        }
        let e = st.pages.entry(page);
        if e.access >= need {
            // Raced with a resolution that happened after the kernel queued this fault.
            if let Err(err) = self.backend.wake(f.addr, self.space.page_size(), f.waiter) {
                self.fatal(Some(st), &format!("waking a thread on page {page}: {err}"));
            }
            st.counters.local_faults += 1;
            return;
        }
        e.waiters.push(PageWaiter {
            waiter: f.waiter,
            need,
            since_ns: f.since_ns,
            tid: f.tid,
        });
        let (proto, unresolved) = self.space.fault_route(page);
        if unresolved {
            // A first-touch page this node has never dealt with: learn (or become) its home
            // first; the fault goes to the protocol when the directory answers.
            if st.home_queries.insert(page) {
                self.send(st, self.space.directory(page), Msg::HomeQuery { page }, &[]);
            }
            return;
        }
        self.fault_to_protocol(st, page, proto, need);
    }

    /// Hands a fault the page table could not satisfy to the page's protocol `proto`.
    fn fault_to_protocol(&self, st: &mut EngineState, page: PageId, proto: u8, need: Access) {
        let mut acts = Vec::new();
        match st
            .protocols
            .get_mut(proto as usize)
            .and_then(|p| p.as_mut())
        {
            Some(p) => p.on_fault(&self.ctx(), page, need, &mut acts),
            None => self.fatal(
                Some(st),
                &format!("page {page} uses protocol {proto}, which this build lacks"),
            ),
        }
        self.run_actions(st, proto, acts, &[]);
    }

    // ----------------------------------------------------------------------------------------
    // Messages

    fn handle_msg(&self, st: &mut EngineState, from: NodeId, msg: Msg, data: &[u8]) {
        if from != self.me {
            if !st.deferred[from as usize].is_empty() {
                st.deferred[from as usize].push_back((msg, data.to_vec()));
                return;
            }
            if let Msg::Proto { msg: pm, .. } = &msg {
                if self.space.is_unknown_collective(pm.page()) {
                    st.deferred[from as usize].push_back((msg, data.to_vec()));
                    return;
                }
            }
        }
        self.dispatch(st, from, msg, data);
    }

    fn dispatch(&self, st: &mut EngineState, from: NodeId, msg: Msg, data: &[u8]) {
        st.handling_remote = from != self.me;
        match msg {
            Msg::Proto { proto, msg } => {
                let mut acts = Vec::new();
                match st
                    .protocols
                    .get_mut(proto as usize)
                    .and_then(|p| p.as_mut())
                {
                    Some(p) => p.on_message(&self.ctx(), from, &msg, data.len(), &mut acts),
                    None => self.fatal(
                        Some(st),
                        &format!("node {from} sent a message of unknown protocol {proto}"),
                    ),
                }
                self.run_actions(st, proto, acts, data);
            }
            Msg::Sync(m) => {
                if let wire::SyncMsg::LockForward { lock, .. } = m {
                    self.reclaim_fast(st, lock);
                }
                let mut evs = Vec::new();
                if !st.sems.on_message(from, &m, &mut evs) {
                    st.sync.on_message(from, &m, &mut evs);
                }
                self.run_sync_events(st, evs);
            }
            Msg::Goodbye => {
                st.goodbye_from[from as usize] = true;
                if st.goodbye_from.iter().all(|g| *g) {
                    if let Some(w) = st.finish_waiter.take() {
                        self.complete(st, w, WaitResult::Finished);
                    }
                }
            }
            Msg::Abort { reason, code } => {
                if code != 0 {
                    eprintln!(
                        "svm: node {}: the job was ended by {reason} (status {code})",
                        self.me
                    );
                }
                crate::sys::exit_now(code);
            }
            Msg::HomeQuery { page } => {
                let home = self.space.assign_first_touch(page, from);
                self.send(st, from, Msg::HomeIs { page, home }, &[]);
            }
            Msg::HomeIs { page, home } => {
                self.space.learn_first_touch(page, home);
                st.home_queries.remove(&page);
                let e = st.pages.entry(page);
                let need = e.waiters.iter().map(|w| w.need).max();
                if let Some(need) = need.filter(|n| *n > e.access) {
                    let proto = self.space.proto_of(page);
                    self.fault_to_protocol(st, page, proto, need);
                }
            }
            Msg::User { tag } => {
                let mut b = self.user_box.lock().unwrap_or_else(|p| p.into_inner());
                b.push_back(UserMessage {
                    from,
                    tag,
                    data: data.to_vec(),
                });
                self.user_cv.notify_all();
            }
            Msg::Hello { .. } | Msg::PeerTable { .. } => {
                self.fatal(
                    Some(st),
                    &format!("node {from} sent a handshake message after setup (protocol error)"),
                );
            }
        }
        st.handling_remote = false;
    }

    fn drain_loopback(&self, st: &mut EngineState) {
        while let Some((msg, data)) = st.loopback.pop_front() {
            self.dispatch(st, self.me, msg, &data);
        }
    }

    /// Re-examines messages held back for collective pages (after a collective allocation).
    pub fn retry_deferred(&self) {
        let mut st = self.lock_state();
        for from in 0..self.nodes as usize {
            while let Some((msg, _)) = st.deferred[from].front() {
                if let Msg::Proto { msg: pm, .. } = msg {
                    if self.space.is_unknown_collective(pm.page()) {
                        break;
                    }
                }
                let (msg, data) = st.deferred[from].pop_front().expect("front exists");
                self.dispatch(&mut st, from as NodeId, msg, &data);
            }
        }
        self.drain_loopback(&mut st);
    }

    // ----------------------------------------------------------------------------------------
    // Synchronization

    fn new_token(st: &mut EngineState) -> u64 {
        let t = st.next_token;
        st.next_token += 1;
        t
    }

    fn complete(&self, st: &mut EngineState, w: Waiter, r: WaitResult) {
        st.blocked.remove(&w);
        if let Some(c) = st.cells.get(&w) {
            c.complete(r);
        }
    }

    fn run_sync_events(&self, st: &mut EngineState, evs: Vec<SyncEvent>) {
        for ev in evs {
            match ev {
                SyncEvent::Send { to, msg } => self.send(st, to, Msg::Sync(msg), &[]),
                SyncEvent::Granted {
                    waiter, notices, ..
                } => self.start_acquire(st, vec![waiter], WaitResult::Granted, &notices),
                SyncEvent::TryFailed { waiter, .. } => {
                    self.complete(st, waiter, WaitResult::TryFailed)
                }
                SyncEvent::Linger { lock } => {
                    st.lingers
                        .push((Instant::now() + crate::sync::LOCK_LINGER, lock));
                    if !self.lingering.swap(true, Ordering::AcqRel) {
                        // The engine may be asleep: it must end the linger in time.
                        self.wake.signal();
                    }
                }
                SyncEvent::BarrierDone {
                    barrier,
                    waiters,
                    notices,
                } => {
                    if barrier == GLOBAL_BARRIER {
                        // Every node takes part in the global barrier: notices kept for locks
                        // and semaphores from before it are now redundant (see SyncState).
                        st.sync.clear_lock_notices();
                        st.sems.clear_notices();
                    }
                    let token = Self::new_token(st);
                    st.acquires.insert(
                        token,
                        AcquireCont {
                            waiters,
                            result: WaitResult::BarrierDone,
                        },
                    );
                    self.acquire_all(st, token, &notices, true);
                }
                SyncEvent::BarrierMismatch {
                    waiter,
                    expected,
                    got,
                    ..
                } => self.complete(st, waiter, WaitResult::BarrierMismatch { expected, got }),
            }
        }
    }

    /// The protocol instance of `page`.
    fn protocol_of<'a>(&self, st: &'a EngineState, page: PageId) -> Option<&'a dyn Protocol> {
        st.protocols
            .get(self.space.proto_of(page) as usize)
            .and_then(|p| p.as_deref())
    }

    /// Records one protocol's answer for `token`; returns the gathered notices once every
    /// protocol has answered.
    fn fan_in(st: &mut EngineState, token: u64, notices: Vec<PageId>) -> Option<Vec<PageId>> {
        let e = st.fanin.get_mut(&token)?;
        e.0 -= 1;
        e.1.extend(notices);
        if e.0 > 0 {
            return None;
        }
        st.fanin.remove(&token).map(|(_, n)| n)
    }

    /// Runs a release (lock release, semaphore post, barrier arrival with `barrier`) in every
    /// protocol; it completes when all have answered.
    fn release_all(&self, st: &mut EngineState, token: u64, barrier: bool) {
        self.in_every_protocol(st, token, |p, ctx, acts| {
            if barrier {
                p.on_barrier_arrive(ctx, token, acts)
            } else {
                p.on_release(ctx, token, acts)
            }
        });
    }

    /// Runs an acquire (lock grant, semaphore grant, barrier departure with `barrier`) in
    /// every protocol; the waiters wake when all have answered.
    fn acquire_all(&self, st: &mut EngineState, token: u64, notices: &[PageId], barrier: bool) {
        self.in_every_protocol(st, token, |p, ctx, acts| {
            if barrier {
                p.on_barrier_depart(ctx, token, notices, acts)
            } else {
                p.on_acquire(ctx, token, notices, acts)
            }
        });
    }

    /// Calls `hook` on every protocol instance for the fanned-in operation `token`, running
    /// each one's actions as it returns.
    fn in_every_protocol(
        &self,
        st: &mut EngineState,
        token: u64,
        mut hook: impl FnMut(&mut dyn Protocol, &dyn Context, &mut Vec<Action>),
    ) {
        let ids: Vec<u8> = (0..st.protocols.len() as u8)
            .filter(|i| st.protocols[*i as usize].is_some())
            .collect();
        st.fanin.insert(token, (ids.len(), Vec::new()));
        for id in ids {
            let mut acts = Vec::new();
            if let Some(p) = st.protocols[id as usize].as_mut() {
                hook(p.as_mut(), &self.ctx(), &mut acts);
            }
            self.run_actions(st, id, acts, &[]);
        }
    }

    fn start_acquire(
        &self,
        st: &mut EngineState,
        waiters: Vec<Waiter>,
        result: WaitResult,
        notices: &[PageId],
    ) {
        let token = Self::new_token(st);
        st.acquires.insert(token, AcquireCont { waiters, result });
        self.acquire_all(st, token, notices, false);
    }

    fn release_done(&self, st: &mut EngineState, token: u64, notices: Vec<PageId>) {
        let Some(c) = st.releases.remove(&token) else {
            return;
        };
        let mut evs = Vec::new();
        match c {
            ReleaseCont::Unlock { lock, waiter } => {
                match st.sync.lock_release(lock, waiter, notices, &mut evs) {
                    Ok(()) => {
                        self.run_sync_events(st, evs);
                        self.publish_fast(st, lock);
                        self.complete(st, waiter, WaitResult::Released);
                    }
                    Err(_) => self.complete(st, waiter, WaitResult::NotHolder),
                }
            }
            ReleaseCont::SemPost { sem, waiter } => {
                st.sems.post(sem, notices, &mut evs);
                self.run_sync_events(st, evs);
                self.complete(st, waiter, WaitResult::Released);
            }
            ReleaseCont::Barrier {
                barrier,
                count,
                waiter,
            } => {
                let arrived = match count {
                    Some(count) => st
                        .sync
                        .barrier_arrive(barrier, count, waiter, notices, &mut evs),
                    None => st
                        .sync
                        .barrier_all_arrive(barrier, waiter, notices, &mut evs),
                };
                match arrived {
                    Ok(()) => self.run_sync_events(st, evs),
                    Err(SyncError::BarrierBusy { .. }) => {
                        self.complete(st, waiter, WaitResult::BarrierBusy)
                    }
                    Err(_) => self.complete(st, waiter, WaitResult::ZeroCount),
                }
            }
        }
    }

    /// The calling thread's waiter id and cell (created on first use).
    fn thread_waiter(&self, st: &mut EngineState) -> (Waiter, Arc<WaitCell>) {
        let mut w = THREAD_WAITER.with(|c| c.get());
        if w == 0 {
            w = self.next_waiter.fetch_add(1, Ordering::Relaxed);
            THREAD_WAITER.with(|c| c.set(w));
        }
        let cell = st
            .cells
            .entry(w)
            .or_insert_with(|| Arc::new(WaitCell::new()))
            .clone();
        (w, cell)
    }

    /// Runs `op` under the state lock for the calling thread, then sleeps until the engine
    /// completes the thread's wait (or the deadline ends the node).
    fn wait_op(
        &self,
        what: Blocked,
        op: impl FnOnce(&Node, &mut EngineState, Waiter),
    ) -> WaitResult {
        let cell = {
            let mut st = self.lock_state();
            let (w, cell) = self.thread_waiter(&mut st);
            cell.state.store(0, Ordering::Release);
            *cell.result.lock().unwrap_or_else(|p| p.into_inner()) = None;
            st.blocked.insert(w, (what.clone(), Instant::now()));
            op(self, &mut st, w);
            self.drain_loopback(&mut st);
            cell
        };
        let deadline = Instant::now() + self.cfg.timeout;
        if !futex::wait_until(&cell.state, |v| v == 1, Some(deadline)) {
            let st = self.lock_state();
            self.fatal(
                Some(&st),
                &format!(
                    "timed out after {:?} (SVM_TIMEOUT) waiting for {what:?}",
                    self.cfg.timeout
                ),
            );
        }
        let r = cell.result.lock().unwrap_or_else(|p| p.into_inner()).take();
        r.unwrap_or(WaitResult::Finished)
    }

    /// Acquires lock `id`; with `try_only`, returns false instead of waiting when it is held.
    pub fn lock(&self, id: u64, try_only: bool) -> bool {
        let p0 = if crate::profile::on() { now_ns() } else { 0 };
        if self.fast_lock(id) {
            if p0 != 0 {
                crate::profile::lock_acquired(id, p0);
            }
            return true;
        }
        let t0 = Instant::now();
        let r = self.wait_op(Blocked::Lock(id), |n, st, w| {
            n.reclaim_fast(st, id);
            let mut evs = Vec::new();
            st.sync.lock_acquire(id, w, try_only, &mut evs);
            n.run_sync_events(st, evs);
        });
        let ok = r == WaitResult::Granted;
        if ok && p0 != 0 {
            crate::profile::lock_acquired(id, p0);
        }
        if ok {
            self.lock_state()
                .counters
                .lock_acquire_ns
                .record(t0.elapsed().as_nanos() as u64);
        }
        ok
    }

    /// Releases lock `id`. Returns false if the calling thread does not hold it.
    pub fn unlock(&self, id: u64) -> bool {
        if self.fast_unlock(id) {
            if crate::profile::on() {
                crate::profile::lock_released();
            }
            return true;
        }
        let r = self.wait_op(Blocked::Unlock(id), |n, st, w| {
            n.take_back_fast(st, id, w);
            if !st.sync.is_holder(id, w) {
                n.complete(st, w, WaitResult::NotHolder);
                return;
            }
            let token = Self::new_token(st);
            st.releases.insert(
                token,
                ReleaseCont::Unlock {
                    lock: id,
                    waiter: w,
                },
            );
            n.release_all(st, token, false);
        });
        if r == WaitResult::Released && crate::profile::on() {
            crate::profile::lock_released();
        }
        r == WaitResult::Released
    }

    /// Measures fault detection — from a thread touching a page it has no access to, to the
    /// runtime seeing the fault (SIGSEGV handler entry, or the engine reading the userfaultfd
    /// event) — over `pages` untouched local pages starting at `addr`. Returns the histogram.
    pub fn probe_fault_detection(&self, addr: usize, pages: usize) -> crate::stats::Histogram {
        let ps = self.space.page_size();
        self.lock_state().counters.fault_detect_ns = crate::stats::Histogram::default();
        for i in 0..pages {
            PROBE_T0.store(crate::sys::segv::now_ns(), Ordering::Release);
            let _: u8 = crate::sys::app_load((addr, pages * ps), addr + i * ps);
        }
        PROBE_T0.store(0, Ordering::Release);
        self.lock_state().counters.fault_detect_ns.clone()
    }

    /// Forgets every local trace of the pages `pages` of a destroyed region — protocol state,
    /// protections, twins, engine-held copies, and the memory itself — so the range can be
    /// allocated again and start as zeros. Called on every node while no thread uses the pages
    /// and no message about them is in flight (`api::free_collective` makes sure).
    pub fn forget_pages(&self, pages: std::ops::Range<PageId>) -> Result<(), String> {
        let mut st = self.lock_state();
        if let Some(p) = st.pages.forget(pages.clone()) {
            return Err(format!(
                "a thread still waits for page {p} of the region being destroyed"
            ));
        }
        for p in st.protocols.iter_mut().flatten() {
            if !p.forget(pages.clone()) {
                return Err(format!(
                    "protocol {} cannot forget pages: destroying regions is not supported with it",
                    p.name()
                ));
            }
        }
        let gone = |p: &PageId| pages.contains(p);
        st.twins.retain(|p, _| !gone(p));
        st.shadows.retain(|p, _| !gone(p));
        st.home_queries.retain(|p| !gone(p));
        let ps = self.space.page_size();
        let addr = self.space.page_addr(pages.start);
        let len = (pages.end - pages.start) as usize * ps;
        self.backend
            .drop_range(addr, len)
            .map_err(|e| format!("dropping the memory of {addr:#x}+{len:#x}: {e}"))
    }

    /// Sends a user message to node `to` (this node included). Messages from one sender to one
    /// receiver arrive in order.
    pub fn send_user(&self, to: NodeId, tag: u64, data: &[u8]) {
        if to == self.me {
            let mut b = self.user_box.lock().unwrap_or_else(|p| p.into_inner());
            b.push_back(UserMessage {
                from: to,
                tag,
                data: data.to_vec(),
            });
            self.user_cv.notify_all();
            return;
        }
        let mut st = self.lock_state();
        self.send(&mut st, to, Msg::User { tag }, data);
    }

    /// Takes the first queued user message accepted by `filter`, waiting up to `timeout`
    /// (None: until `SVM_TIMEOUT` ends the node with a diagnostic). Returns None on timeout.
    pub fn recv_user(
        &self,
        mut filter: impl FnMut(&UserMessage) -> bool,
        timeout: Option<Duration>,
    ) -> Option<UserMessage> {
        let deadline = Instant::now() + timeout.unwrap_or(self.cfg.timeout);
        let mut b = self.user_box.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(i) = b.iter().position(&mut filter) {
                return b.remove(i);
            }
            let now = Instant::now();
            if now >= deadline {
                if timeout.is_some() {
                    return None;
                }
                drop(b);
                let st = self.lock_state();
                self.fatal(
                    Some(&st),
                    &format!(
                        "timed out after {:?} (SVM_TIMEOUT) waiting for a message",
                        self.cfg.timeout
                    ),
                );
            }
            b = self
                .user_cv
                .wait_timeout(b, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Posts semaphore `id` (a release).
    pub fn sem_post(&self, id: u64) {
        self.wait_op(Blocked::SemPost(id), |n, st, w| {
            let token = Self::new_token(st);
            st.releases
                .insert(token, ReleaseCont::SemPost { sem: id, waiter: w });
            n.release_all(st, token, false);
        });
    }

    /// Waits on semaphore `id` (an acquire once granted).
    pub fn sem_wait(&self, id: u64) {
        self.wait_op(Blocked::SemWait(id), |n, st, w| {
            let mut evs = Vec::new();
            st.sems.wait(id, w, &mut evs);
            n.run_sync_events(st, evs);
        });
    }

    /// Waits at barrier `id` until `count` threads (over all nodes) have arrived.
    pub fn barrier(&self, id: u64, count: u32) -> WaitResult {
        self.barrier_of(id, Some(count))
    }

    /// Barrier `id` of every node of the job, exactly one thread of each (the global barrier,
    /// and personalities' barriers known to have one participant per node). Every node must
    /// call this form for `id`, never [`Node::barrier`].
    ///
    /// Up to [`DISSEMINATION_MAX_NODES`] nodes it is a dissemination barrier without a manager
    /// (`sync/dissemination.rs`: at 2 nodes each node sends one message and leaves when the
    /// other's arrives — one message delay instead of the manager's two); beyond, the counting
    /// barrier with its manager. The choice depends on the job's node count only, so every
    /// node makes the same one.
    pub fn barrier_all_nodes(&self, id: u64) -> WaitResult {
        if self.nodes as usize <= DISSEMINATION_MAX_NODES {
            self.barrier_of(id, None)
        } else {
            self.barrier_of(id, Some(self.nodes as u32))
        }
    }

    fn barrier_of(&self, id: u64, count: Option<u32>) -> WaitResult {
        let t0 = Instant::now();
        let p0 = if crate::profile::on() { now_ns() } else { 0 };
        let r = self.wait_op(Blocked::Barrier(id), |n, st, w| {
            if count == Some(0) {
                n.complete(st, w, WaitResult::ZeroCount);
                return;
            }
            let token = Self::new_token(st);
            st.releases.insert(
                token,
                ReleaseCont::Barrier {
                    barrier: id,
                    count,
                    waiter: w,
                },
            );
            n.release_all(st, token, true);
        });
        self.lock_state()
            .counters
            .barrier_wait_ns
            .record(t0.elapsed().as_nanos() as u64);
        if p0 != 0 {
            crate::profile::barrier_passed(id, p0);
        }
        r
    }

    /// Orderly end: tells every node this one is done and waits until all are, serving
    /// requests meanwhile; then stops the engine and prints statistics if asked.
    pub fn finish(&self) {
        {
            let st = self.lock_state();
            if st.goodbye_sent {
                return;
            }
        }
        self.wait_op(Blocked::Finish, |n, st, w| {
            st.goodbye_sent = true;
            for peer in 0..n.nodes {
                if peer != n.me {
                    n.send(st, peer, Msg::Goodbye, &[]);
                }
            }
            if st.goodbye_from.iter().all(|g| *g) {
                n.complete(st, w, WaitResult::Finished);
            } else {
                st.finish_waiter = Some(w);
            }
        });
        self.stop.store(true, Ordering::Release);
        self.wake.signal();
        if let Some(h) = self.engine.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = h.join();
        }
        if crate::profile::on() {
            let st = self.lock_state();
            crate::profile::flush_writes(&mut |page, b| self.read_local(&st, page, b));
        }
        self.backend.shutdown();
        match self.cfg.stats {
            StatsMode::Off => {}
            StatsMode::Text => eprint!("{}", self.stats()),
            StatsMode::Json => eprintln!("{}", self.stats().to_json()),
        }
        for l in self.links.iter().flatten() {
            l.close();
        }
        if crate::profile::on() {
            crate::profile::finish(&self.stats(), &self.space);
        }
    }

    /// Sends an abort to every peer and ends this node (used when the application panics).
    pub fn abort(&self, why: &str) -> ! {
        let st = self.state.try_lock().ok();
        self.fatal(st.as_deref(), why)
    }

    pub fn stats(&self) -> Stats {
        let st = self.lock_state();
        let mut c = st.counters.clone();
        c.fast_locks = self.fast_count.load(Ordering::Relaxed);
        for p in st.protocols.iter().flatten() {
            let ps = p.stats();
            c.invalidations += ps.invalidations;
            c.notices_sent += ps.notices_sent;
            c.notice_invalidations += ps.notice_invalidations;
            c.pages_read_ahead += ps.pages_read_ahead;
            c.pages_written_ahead += ps.pages_written_ahead;
        }
        Stats::from_counters(
            &c,
            self.me,
            self.nodes,
            self.protocol_name,
            self.backend.name(),
        )
    }

    // ----------------------------------------------------------------------------------------
    // The engine thread

    fn engine_loop(&self, poller: Poller) {
        let mut tokens = Vec::new();
        let mut faults: Vec<Fault> = Vec::new();
        let mut bufs: Vec<RecvBuf> = (0..self.nodes).map(|_| RecvBuf::new()).collect();
        let mut closed = vec![false; self.nodes as usize];
        let mut idle_polls = 0u32;
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let spin_polls = self
            .cfg
            .spin_polls
            .unwrap_or(if self.nodes as usize <= cpus { 64 } else { 0 });
        let mut last_check = Instant::now();
        loop {
            // Spin on a non-blocking poll for a short while after activity (a reply usually
            // follows within tens of microseconds), then sleep in epoll.
            let lingering = self.lingering.load(Ordering::Acquire);
            let timeout = if idle_polls < spin_polls || lingering {
                0
            } else {
                100
            };
            if let Err(e) = poller.wait(&mut tokens, timeout) {
                let st = self.lock_state();
                self.fatal(Some(&st), &format!("engine poll failed: {e}"));
            }
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            if tokens.is_empty() {
                idle_polls = idle_polls.saturating_add(1);
                if idle_polls < spin_polls || lingering {
                    std::thread::yield_now();
                } else if timeout > 0 {
                    // A whole sleep passed without a wake-up: look at every link anyway, so a
                    // wake-up a transport lost costs one sleep period, never a stuck job.
                    tokens.extend(
                        (0..self.nodes as u64).filter(|&p| self.links[p as usize].is_some()),
                    );
                }
            } else {
                idle_polls = 0;
            }
            let mut st = self.lock_state();
            for &t in &tokens {
                match t {
                    TOKEN_FAULTS => {
                        if let Err(e) = self.backend.take_faults(&mut faults) {
                            self.fatal(Some(&st), &format!("reading faults: {e}"));
                        }
                        for f in faults.drain(..) {
                            self.on_fault(&mut st, f);
                        }
                    }
                    TOKEN_WAKE => self.wake.drain(),
                    peer => {
                        let peer = peer as usize;
                        if closed[peer] {
                            continue;
                        }
                        let Some(link) = self.links[peer].as_ref() else {
                            continue;
                        };
                        let alive = match link.recv_available(&mut bufs[peer]) {
                            Ok(a) => a,
                            Err(e) => {
                                if st.goodbye_from[peer] {
                                    false
                                } else {
                                    let why = match e {
                                        svm_comm::transport::CommError::Lost { why, .. } => why,
                                        other => other.to_string(),
                                    };
                                    self.lost(&st, peer as NodeId, &why)
                                }
                            }
                        };
                        loop {
                            let frame = match bufs[peer].next_frame() {
                                Ok(Some(f)) => f,
                                Ok(None) => break,
                                Err(e) => {
                                    link.close();
                                    self.fatal(Some(&st), &format!("malformed frame from node {peer}: {e}; connection closed"));
                                }
                            };
                            match wire::decode(frame) {
                                Ok(f) => {
                                    let m = st.counters.msgs.entry(f.msg.stat_name()).or_default();
                                    m.received += 1;
                                    m.received_bytes += frame.len() as u64;
                                    if crate::profile::on() {
                                        let (k, b) = (f.msg.stat_name(), frame.len() as u64);
                                        crate::profile::message(k, peer as NodeId, b, false);
                                    }
                                    self.handle_msg(&mut st, peer as NodeId, f.msg, f.data);
                                }
                                Err(e) => {
                                    link.close();
                                    self.fatal(Some(&st), &format!("malformed frame from node {peer}: {e}; connection closed"));
                                }
                            }
                        }
                        if !alive {
                            if st.goodbye_from[peer] && bufs[peer].pending() == 0 {
                                closed[peer] = true;
                                poller.remove(link.poll_fd());
                            } else {
                                self.lost(&st, peer as NodeId, "connection closed");
                            }
                        }
                    }
                }
                self.drain_loopback(&mut st);
            }
            if lingering {
                self.end_lingers(&mut st);
            }
            if last_check.elapsed() >= Duration::from_millis(100) {
                last_check = Instant::now();
                let lost_send = st
                    .send_lost
                    .iter()
                    .enumerate()
                    .find_map(|(peer, l)| match l {
                        Some((at, why))
                            if !st.goodbye_from[peer] && at.elapsed() > SEND_LOST_GRACE =>
                        {
                            Some(why.clone())
                        }
                        _ => None,
                    });
                if let Some(why) = lost_send {
                    self.fatal(Some(&st), &why);
                }
                if let Some((_, w)) = st.pages.oldest_waiter() {
                    let waited = Duration::from_nanos(now_ns().saturating_sub(w.since_ns));
                    if waited > self.cfg.timeout {
                        self.fatal(
                            Some(&st),
                            &format!(
                                "a page fault was not served within {:?} (SVM_TIMEOUT)",
                                self.cfg.timeout
                            ),
                        );
                    }
                }
            }
        }
    }

    /// Moves on the lock tokens whose linger time has passed.
    fn end_lingers(&self, st: &mut EngineState) {
        let now = Instant::now();
        let mut ended = Vec::new();
        st.lingers.retain(|&(t, lock)| {
            if t <= now {
                ended.push(lock);
                false
            } else {
                true
            }
        });
        for lock in ended {
            let mut evs = Vec::new();
            st.sync.linger_expired(lock, &mut evs);
            self.run_sync_events(st, evs);
        }
        self.drain_loopback(st);
        if st.lingers.is_empty() {
            self.lingering.store(false, Ordering::Release);
        }
    }

    fn lost(&self, st: &EngineState, peer: NodeId, why: &str) -> ! {
        // A node that ends the job on purpose (exit(status) in a personality) tells everyone
        // with an Abort carrying its status, but its connection may close here before that
        // Abort travels through another node. Wait a moment, reading only Aborts, so the job's
        // status is the one its program chose rather than this node's failure.
        let deadline = Instant::now() + Duration::from_millis(300);
        let mut bufs: Vec<RecvBuf> = (0..self.nodes).map(|_| RecvBuf::new()).collect();
        while Instant::now() < deadline {
            for (i, l) in self.links.iter().enumerate() {
                let Some(l) = l else { continue };
                if i == peer as usize || l.recv_available(&mut bufs[i]).is_err() {
                    continue;
                }
                while let Ok(Some(frame)) = bufs[i].next_frame() {
                    if let Ok(wire::Frame {
                        msg: Msg::Abort { code, .. },
                        ..
                    }) = wire::decode(frame)
                    {
                        crate::sys::exit_now(code);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let tokens = st.sync.locks_towards(peer);
        let tokens = if tokens.is_empty() {
            String::new()
        } else {
            format!("; it may hold the token of locks {tokens:?} (it held or was in line for them)")
        };
        self.fatal(
            Some(st),
            &format!("lost node {peer} ({why}); it died or its connection broke{tokens}"),
        )
    }
}
