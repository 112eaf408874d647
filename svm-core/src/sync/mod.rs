//! Locks and barriers as sans-IO state machines, shared by the engine and the simulator.
//!
//! Each object has a manager node (`id % nodes`). Locks use **tokens that stay where they are
//! used** (see `docs/sync.md`): the node that holds a lock's token keeps it after its threads
//! release the lock, so re-acquiring a lock nobody else wants sends nothing. The manager only
//! orders requests: it remembers the *tail* (the node that holds the token or will be the last
//! to get it) and forwards each request to the tail (`LockForward`), which passes the token to
//! the requester directly when it is done (`LockGrant`, carrying the lock's write notices).
//! Threads of one node queue locally first, so only one request per node crosses the network
//! (cohort locking); a node whose token a remote node waits for hands it to its own waiting
//! threads at most [`MAX_LOCAL_HANDOFFS`] more times before passing it on (the fairness bound).
//!
//! The protocol hooks are not called here: the engine runs `Protocol::on_release` before calling
//! [`SyncState::lock_release`] / [`SyncState::barrier_arrive`] (passing the notices the protocol
//! produced), and runs `Protocol::on_acquire` with the notices of a [`SyncEvent::Granted`] or
//! [`SyncEvent::BarrierDone`] before waking the threads.

use std::collections::{BTreeMap, HashMap, VecDeque};

mod barrier;
mod dissemination;
pub mod fast;
pub mod sem;

use barrier::{ManagedBarrier, NodeBarrier};
use dissemination::AllNodesBarrier;

use svm_comm::wire::{LockNotice, NodeId, PageId, SyncMsg};

/// Identifies one waiting thread (chosen by the engine).
pub type Waiter = u64;

/// Local hand-offs of a lock's token, after a remote node asked for it, that are always
/// allowed before it moves there. 16 rather than 8: each move takes the critical section's
/// pages along (measured in docs/sync.md); 2 made the lock-bound SPLASH-2 programs slower.
pub const MIN_LOCAL_HANDOFFS: u32 = 16;

/// The most local hand-offs of a token after a remote node asked for it (the fairness
/// bound): beyond [`MIN_LOCAL_HANDOFFS`] the local threads keep the token only while the
/// remote request is younger than [`LOCK_QUANTUM`]. A lock taken again every microsecond or
/// two (SPLASH-2 raytrace's ray-id counter) would otherwise spend more time travelling than
/// held: 16 hand-offs are ~20 µs of its work against ~100–300 µs per move. Large enough that
/// the quantum, not the count, ends such a lock's stay (docs/sync.md).
pub const MAX_LOCAL_HANDOFFS: u32 = 4096;

/// How long after a remote node asked for a token the local threads may go on taking it
/// beyond [`MIN_LOCAL_HANDOFFS`] ([`SyncEvent::Quantum`]): several moves of a token (a move,
/// with the critical section's pages after it, takes ~150–300 µs on a loaded 2-CPU host),
/// so a lock that is taken again at once stays where it is used for a while, and one taken
/// rarely (16 hand-offs outlast the quantum) moves as before. 3 ms rather than 300 µs:
/// measured in docs/sync.md (SPLASH-2 radiosity and raytrace at p = 2).
pub const LOCK_QUANTUM: std::time::Duration = std::time::Duration::from_micros(3000);

/// How long a released token waits for a local thread to take it again before it moves to
/// the remote node that asked for it ([`SyncEvent::Linger`]); the engine waits longer while
/// a thread of its node waits for a page, up to the quantum
/// ([`SyncState::linger_may_go_on`]). 1 ms rather than 100 µs: a critical section taken
/// again after a page fault of ~50–300 µs should find the token still here (docs/sync.md).
pub const LOCK_LINGER: std::time::Duration = std::time::Duration::from_micros(1000);

/// What the sync layer asks the engine to do.
#[derive(Debug, Clone, PartialEq)]
pub enum SyncEvent {
    /// Send a sync message to a node (possibly this node).
    Send { to: NodeId, msg: SyncMsg },
    /// `waiter` now holds `lock`; run the protocol's acquire with `notices`, then wake it.
    Granted {
        lock: u64,
        waiter: Waiter,
        notices: Vec<PageId>,
    },
    /// A try-lock by `waiter` failed: the lock is held elsewhere.
    TryFailed { lock: u64, waiter: Waiter },
    /// A local thread released `lock` while a remote node waits for it and no local thread
    /// does: the token stays for a short while in case a local thread takes the lock again
    /// (within the fairness bound). Call [`SyncState::linger_expired`] after
    /// [`LOCK_LINGER`] (earlier or later is safe).
    Linger { lock: u64 },
    /// A remote node asked for `lock`'s token: call [`SyncState::quantum_expired`] after
    /// [`LOCK_QUANTUM`] (earlier or later is safe: earlier only shortens the local share
    /// towards [`MIN_LOCAL_HANDOFFS`], later only lengthens it up to [`MAX_LOCAL_HANDOFFS`]).
    Quantum { lock: u64 },
    /// Barrier complete for these waiters of this node; run the acquire with `notices` once,
    /// then wake them. `all_nodes`: a barrier of every node, one thread each
    /// ([`SyncState::barrier_all_arrive`]), which every node departs as it arrived. `nodes`:
    /// how many nodes had threads at this episode (the job's size when every node took part).
    BarrierDone {
        barrier: u64,
        waiters: Vec<Waiter>,
        notices: Vec<PageId>,
        all_nodes: bool,
        nodes: u32,
    },
    /// The manager refused `waiter`'s arrival: its count differs from the round's.
    BarrierMismatch {
        barrier: u64,
        waiter: Waiter,
        expected: u32,
        got: u32,
    },
}

/// A barrier as a user knows it: the id, or "the global barrier (svm::barrier)" for the one
/// behind `svm::barrier()`, whose id is an internal number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierName(pub u64);

impl std::fmt::Display for BarrierName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 == crate::node::GLOBAL_BARRIER {
            f.write_str("the global barrier (svm::barrier)")
        } else {
            write!(f, "barrier {}", self.0)
        }
    }
}

/// Misuse of a lock or barrier by the application.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    #[error("unlock of lock {lock} by a thread that does not hold it")]
    NotHolder { lock: u64 },
    #[error("{} called with a participant count of 0", BarrierName(*barrier))]
    ZeroCount { barrier: u64 },
    #[error("{} called by a second thread of this node while the first waits in it; it takes one calling thread per node (threads of a node: a barrier with an explicit participant count)", BarrierName(*barrier))]
    BarrierBusy { barrier: u64 },
}

#[derive(Default, Debug)]
struct NodeLock {
    /// This node holds the lock's token.
    token: bool,
    /// The local thread inside the critical section.
    owner: Option<Waiter>,
    /// Local threads waiting, with whether each is a try-lock.
    queue: VecDeque<(Waiter, bool)>,
    /// A LockAcquire or LockTry is outstanding at the manager (the token has not come yet).
    requested: bool,
    /// The node to pass the token to when done (set by the manager's `LockForward`).
    next: Option<NodeId>,
    /// Local grants since `next` was set (or since the token came, whichever is later).
    handoffs: u32,
    /// Released while `next` waits: kept for a local re-acquire until `linger_expired`.
    lingering: bool,
    /// [`LOCK_QUANTUM`] has passed since `next` was set: the local share ends at
    /// [`MIN_LOCAL_HANDOFFS`].
    quantum_over: bool,
    /// The write notices travelling with the token (page → the newest global-barrier epoch
    /// and release number of a release that named it); empty while the token is elsewhere.
    notices: BTreeMap<PageId, NoticeAge>,
    /// The lock's releases so far (travels with the token; see `seen`).
    releases: u64,
    /// `releases` when the token last left this node: every notice of a release up to that
    /// one this node has acted on already (it invalidated the page at a grant, or the
    /// release was its own, made while it held the token), so a later grant names only the
    /// newer ones. Without it a node would invalidate, at every acquire, every page any
    /// release of the lock ever named since the last global barrier — its own writes too.
    seen: u64,
}

impl NodeLock {
    /// How many more times the local threads may take the token while `next` waits: up to
    /// [`MAX_LOCAL_HANDOFFS`] hand-offs within the quantum, [`MIN_LOCAL_HANDOFFS`] after it.
    fn local_share(&self) -> u32 {
        let bound = if self.quantum_over {
            MIN_LOCAL_HANDOFFS
        } else {
            MAX_LOCAL_HANDOFFS
        };
        bound.saturating_sub(self.handoffs)
    }

    /// Whether the local threads may take the token once more while `next` waits.
    fn local_share_left(&self) -> bool {
        self.local_share() > 0
    }
}

/// When a lock notice's page was last named: see [`LockNotice`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NoticeAge {
    epoch: u64,
    release: u64,
}

#[derive(Debug)]
struct ManagedLock {
    /// The node that holds the token or is the last in line for it.
    tail: NodeId,
    /// The tail before the last forwarded request (it had, or was to get, the token then).
    prev_tail: Option<NodeId>,
    /// A try-lock forwarded to the tail whose outcome is not known yet: requests wait for it.
    try_pending: Option<NodeId>,
    /// Requests that came while a try-lock was pending, with whether each is a try.
    held: VecDeque<(NodeId, bool)>,
}

/// All lock and barrier state of one node: its local side of every object and the manager
/// side of the objects it manages.
#[derive(Debug)]
pub struct SyncState {
    me: NodeId,
    nodes: NodeId,
    locks: HashMap<u64, NodeLock>,
    managed_locks: HashMap<u64, ManagedLock>,
    /// Largest number of local grants a node made while a remote node waited for the token
    /// (see [`SyncState::max_overtakes`]).
    max_overtakes: u32,
    barriers: HashMap<u64, NodeBarrier>,
    managed_barriers: HashMap<u64, ManagedBarrier>,
    /// Barriers of every node, one thread each ([`SyncState::barrier_all_arrive`]).
    all_nodes: HashMap<u64, AllNodesBarrier>,
    /// Global barriers completed on this node ([`SyncState::clear_lock_notices`] calls).
    epoch: u64,
}

impl SyncState {
    pub fn new(me: NodeId, nodes: NodeId) -> Self {
        SyncState {
            me,
            nodes,
            locks: HashMap::new(),
            managed_locks: HashMap::new(),
            barriers: HashMap::new(),
            managed_barriers: HashMap::new(),
            all_nodes: HashMap::new(),
            max_overtakes: 0,
            epoch: 0,
        }
    }

    /// Manager node of a lock or barrier id.
    pub fn manager(&self, id: u64) -> NodeId {
        (id % self.nodes as u64) as NodeId
    }

    /// This node's side of `lock`. A lock seen for the first time has its token at its manager.
    fn node_lock(&mut self, lock: u64) -> &mut NodeLock {
        let at_manager = self.manager(lock) == self.me;
        self.locks.entry(lock).or_insert_with(|| NodeLock {
            token: at_manager,
            ..NodeLock::default()
        })
    }

    /// A local thread wants `lock` (`try_only`: give up instead of waiting if it is held).
    pub fn lock_acquire(
        &mut self,
        lock: u64,
        waiter: Waiter,
        try_only: bool,
        out: &mut Vec<SyncEvent>,
    ) {
        let mgr = self.manager(lock);
        let l = self.node_lock(lock);
        if l.token && l.owner.is_none() && l.queue.is_empty() {
            // The token is here and free: no message. (If a remote node waits, the token is
            // lingering after a local release, within the fairness bound.)
            if l.next.is_some() {
                l.handoffs += 1;
            }
            l.lingering = false;
            l.owner = Some(waiter);
            out.push(SyncEvent::Granted {
                lock,
                waiter,
                notices: Vec::new(),
            });
            return;
        }
        if try_only && (l.token || l.requested) {
            out.push(SyncEvent::TryFailed { lock, waiter });
            return;
        }
        l.queue.push_back((waiter, try_only));
        if !l.token && !l.requested {
            l.requested = true;
            let msg = if try_only {
                SyncMsg::LockTry { lock }
            } else {
                SyncMsg::LockAcquire { lock }
            };
            out.push(SyncEvent::Send { to: mgr, msg });
        }
    }

    /// Whether `lock` was never used on this node and its token starts here (this node
    /// manages it), so it is idle from the start; records the lock's state, so that
    /// [`SyncState::token_idle`] then holds.
    pub fn first_use_here(&mut self, lock: u64) -> bool {
        if self.manager(lock) != self.me || self.locks.contains_key(&lock) {
            return false;
        }
        self.node_lock(lock);
        true
    }

    /// Whether the token of `lock` is here, free, and wanted by nobody (local or remote): a
    /// thread may take it without the engine ([`SyncState::lock_acquire`] would grant it with
    /// no message).
    pub fn token_idle(&self, lock: u64) -> bool {
        self.locks
            .get(&lock)
            .is_some_and(|l| l.token && l.owner.is_none() && l.queue.is_empty() && l.next.is_none())
    }

    /// While a remote node waits for `lock` and its token lingers here after a local release:
    /// how many more times the local threads may take it under the fairness bound (at least
    /// 1), so that they may take it without the engine ([`fast`], a limited word). None
    /// otherwise.
    pub fn fast_share(&self, lock: u64) -> Option<u32> {
        let l = self.locks.get(&lock)?;
        if !(l.token && l.lingering && l.owner.is_none() && l.queue.is_empty() && l.next.is_some())
        {
            return None;
        }
        Some(l.local_share()).filter(|&n| n > 0)
    }

    /// Local threads took `lock` `takes` times through a limited fast-path word the engine
    /// has just taken back ([`SyncState::fast_share`]): local hand-offs while a remote node
    /// waited, counted against the fairness bound like those granted here.
    pub fn count_fast_handoffs(&mut self, lock: u64, takes: u32) {
        if let Some(l) = self.locks.get_mut(&lock) {
            if l.next.is_some() {
                l.handoffs = l.handoffs.saturating_add(takes);
            }
        }
    }

    /// Records local thread `waiter` as the holder of `lock`, whose token is here and free: it
    /// took the lock through the application-thread fast path ([`fast`]), and the engine now
    /// takes the lock's state back. Returns false if the token is not here and free.
    pub fn adopt_holder(&mut self, lock: u64, waiter: Waiter) -> bool {
        match self.locks.get_mut(&lock) {
            Some(l) if l.token && l.owner.is_none() => {
                l.owner = Some(waiter);
                l.lingering = false;
                true
            }
            _ => false,
        }
    }

    /// The remote node whose request for `lock` joined the lock's queue behind this node
    /// (it gets the token from this node next), if any.
    pub fn lock_successor(&self, lock: u64) -> Option<NodeId> {
        self.locks.get(&lock).and_then(|l| l.next)
    }

    /// Whether a local thread or a remote node waits for `lock`.
    pub fn lock_wanted(&self, lock: u64) -> bool {
        self.locks
            .get(&lock)
            .is_some_and(|l| !l.queue.is_empty() || l.next.is_some())
    }

    /// Whether `lock`'s token is here.
    pub fn token_here(&self, lock: u64) -> bool {
        self.locks.get(&lock).is_some_and(|l| l.token)
    }

    /// Whether local thread `waiter` holds `lock`.
    pub fn is_holder(&self, lock: u64, waiter: Waiter) -> bool {
        self.locks
            .get(&lock)
            .is_some_and(|l| l.token && l.owner == Some(waiter))
    }

    /// Gives the token of `lock` (here and free) to node `to`, with its notices.
    fn pass_token(&mut self, lock: u64, to: NodeId, out: &mut Vec<SyncEvent>) {
        let mgr = self.manager(lock);
        let l = self.locks.get_mut(&lock).expect("the token is here");
        debug_assert!(l.token && l.owner.is_none());
        self.max_overtakes = self.max_overtakes.max(l.handoffs);
        l.token = false;
        l.lingering = false;
        l.next = None;
        l.handoffs = 0;
        l.quantum_over = false;
        let notices = std::mem::take(&mut l.notices)
            .into_iter()
            .map(|(page, a)| LockNotice {
                page,
                epoch: a.epoch,
                release: a.release,
            })
            .collect();
        l.seen = l.releases;
        out.push(SyncEvent::Send {
            to,
            msg: SyncMsg::LockGrant {
                lock,
                releases: l.releases,
                notices,
            },
        });
        if !l.queue.is_empty() && !l.requested {
            l.requested = true;
            out.push(SyncEvent::Send {
                to: mgr,
                msg: SyncMsg::LockAcquire { lock },
            });
        }
    }

    /// The token of `lock` is here and free: the next local waiter gets it, unless a remote
    /// node waits and the local threads have had their share.
    fn token_freed(&mut self, lock: u64, out: &mut Vec<SyncEvent>) {
        let l = self.locks.get_mut(&lock).expect("the token is here");
        let remote = l.next;
        if remote.is_none() || l.local_share_left() {
            if let Some((next, _)) = l.queue.pop_front() {
                if remote.is_some() {
                    l.handoffs += 1;
                }
                l.owner = Some(next);
                out.push(SyncEvent::Granted {
                    lock,
                    waiter: next,
                    notices: Vec::new(),
                });
                return;
            }
        }
        if let Some(to) = remote {
            self.pass_token(lock, to, out);
        }
    }

    /// The local thread `waiter` releases `lock`; `notices` come from the protocol's release.
    pub fn lock_release(
        &mut self,
        lock: u64,
        waiter: Waiter,
        notices: Vec<PageId>,
        out: &mut Vec<SyncEvent>,
    ) -> Result<(), SyncError> {
        let epoch = self.epoch;
        let l = match self.locks.get_mut(&lock) {
            Some(l) if l.token && l.owner == Some(waiter) => l,
            _ => return Err(SyncError::NotHolder { lock }),
        };
        l.releases += 1;
        let release = l.releases;
        for p in notices {
            let a = l.notices.entry(p).or_insert(NoticeAge { epoch, release });
            a.epoch = a.epoch.max(epoch);
            a.release = release;
        }
        l.owner = None;
        if l.next.is_some() && l.queue.is_empty() && l.local_share_left() {
            l.lingering = true;
            out.push(SyncEvent::Linger { lock });
            return Ok(());
        }
        self.token_freed(lock, out);
        Ok(())
    }

    /// The linger time of a token released while a remote node waits has passed (see
    /// [`SyncEvent::Linger`]): if no local thread took it meanwhile, it moves on now.
    pub fn linger_expired(&mut self, lock: u64, out: &mut Vec<SyncEvent>) {
        let Some(l) = self.locks.get_mut(&lock) else {
            return;
        };
        if !l.lingering {
            return;
        }
        l.lingering = false;
        if l.token && l.owner.is_none() {
            self.token_freed(lock, out);
        }
    }

    /// [`LOCK_QUANTUM`] has passed since a remote node asked for `lock` (see
    /// [`SyncEvent::Quantum`]): the local threads' share ends at [`MIN_LOCAL_HANDOFFS`]; a
    /// token lingering past that share moves on now.
    pub fn quantum_expired(&mut self, lock: u64, out: &mut Vec<SyncEvent>) {
        let Some(l) = self.locks.get_mut(&lock) else {
            return;
        };
        if l.next.is_none() {
            return;
        }
        l.quantum_over = true;
        if !l.local_share_left() {
            // Its linger cannot end in a local re-acquire any more: end it now.
            self.linger_expired(lock, out);
        }
    }

    /// A local thread arrives at a barrier: every token lingering here moves on now. The
    /// barrier completes only once the other nodes arrive, and the node waiting for a
    /// lingering token may have to take the lock first (SPLASH-2 ocean adds its share of a
    /// global sum under a lock right before a barrier): waiting out the linger would only
    /// delay them.
    fn end_lingers(&mut self, out: &mut Vec<SyncEvent>) {
        let lingering: Vec<u64> = self
            .locks
            .iter()
            .filter(|(_, l)| l.lingering)
            .map(|(id, _)| *id)
            .collect();
        for lock in lingering {
            self.linger_expired(lock, out);
        }
    }

    /// Whether `lock`'s token, lingering here, may linger once more instead of moving on
    /// when its linger ends: the remote request's quantum has not ended and the local share
    /// is not used up, so the wait stays within the fairness bound. The engine asks while a
    /// thread of its node waits for a page: a thread that released the lock and then faulted
    /// usually takes it again once its page comes, and a token gone meanwhile costs it a
    /// move back (two messages and the critical section's pages) on top of the fault.
    pub fn linger_may_go_on(&self, lock: u64) -> bool {
        self.locks
            .get(&lock)
            .is_some_and(|l| l.lingering && !l.quantum_over && l.local_share_left())
    }

    /// Whether `lock`'s token, lingering here, lingers once more instead of moving on when its
    /// linger ends. Within the remote request's quantum and the local share
    /// ([`SyncState::linger_may_go_on`]) it stays if `local_use` (the local threads took it
    /// during that linger through the fast path, or a thread of the node waits for a page —
    /// usually the one that released it, which takes it again once its page comes), and also
    /// if they took it [`MIN_LOCAL_HANDOFFS`] times or more since the request (a lock used all
    /// the time, taken again after gaps longer than a linger: its stays last the quantum). A
    /// token used less waits one linger for its threads, as before.
    pub fn linger_stays(&self, lock: u64, local_use: bool) -> bool {
        self.linger_may_go_on(lock)
            && (local_use
                || self
                    .locks
                    .get(&lock)
                    .is_some_and(|l| l.handoffs >= MIN_LOCAL_HANDOFFS))
    }

    /// Whether a token of this node lingers (see [`SyncEvent::Linger`]).
    pub fn lingering(&self, lock: u64) -> bool {
        self.locks.get(&lock).is_some_and(|l| l.lingering)
    }

    /// Garbage-collects the write notices kept at managed locks. The engine calls it on every
    /// node when a *global* barrier completes there (one in which every thread of the job that
    /// may use locks takes part), while handling [`SyncEvent::BarrierDone`] and before any of
    /// this node's threads can run again (before the protocol's departure hook, so before the
    /// threads wake).
    ///
    /// Why this is safe: the barrier's own notices name every page written anywhere before
    /// the barrier, and every node invalidates them at departure, so a lock notice from before
    /// the barrier is redundant afterwards. A notice from *after* the barrier must survive,
    /// though, and may reach this manager before this node has left the barrier itself (the
    /// barrier's release messages race with the lock traffic of nodes that already left). So
    /// each node counts its global barriers (its *epoch*), `LockRelease` carries the sender's
    /// epoch, and a call here advances this node's epoch and drops only the notices that came
    /// with an older epoch than the new one: those were released before their sender left
    /// this barrier.
    pub fn clear_lock_notices(&mut self) {
        self.epoch += 1;
        let epoch = self.epoch;
        for l in self.locks.values_mut() {
            l.notices.retain(|_, a| a.epoch >= epoch);
        }
    }

    /// Global barriers completed on this node (see [`SyncState::clear_lock_notices`]).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Total notices held with the lock tokens on this node (for the memory-bound tests).
    pub fn lock_notice_count(&self) -> usize {
        self.locks.values().map(|l| l.notices.len()).sum()
    }

    /// Largest number of local grants this node made to its own threads while a remote node
    /// waited for the token (the fairness bound: at most [`MAX_LOCAL_HANDOFFS`]).
    pub fn max_overtakes(&self) -> u32 {
        self.max_overtakes
    }

    /// A sync message arrived from `from`.
    pub fn on_message(&mut self, from: NodeId, msg: &SyncMsg, out: &mut Vec<SyncEvent>) {
        match msg {
            SyncMsg::LockAcquire { lock } => self.manager_acquire(*lock, from, false, out),
            SyncMsg::LockTry { lock } => self.manager_acquire(*lock, from, true, out),
            SyncMsg::LockForward { lock, to, try_only } => {
                let (lock, to) = (*lock, *to);
                let mgr = self.manager(lock);
                let l = self.node_lock(lock);
                if *try_only {
                    let granted = l.token && l.owner.is_none() && l.next.is_none();
                    if granted {
                        self.pass_token(lock, to, out);
                    }
                    out.push(SyncEvent::Send {
                        to: mgr,
                        msg: SyncMsg::LockTryDone { lock, to, granted },
                    });
                    return;
                }
                if l.next.is_some() {
                    tracing::warn!(lock, to, "a second successor for a lock token; ignored");
                    return;
                }
                l.next = Some(to);
                l.handoffs = 0;
                l.quantum_over = false;
                if l.token && l.owner.is_none() {
                    self.token_freed(lock, out);
                }
                // A token that moved on at once needs no quantum (nor a timer in the engine).
                if self.locks.get(&lock).is_some_and(|l| l.next == Some(to)) {
                    out.push(SyncEvent::Quantum { lock });
                }
            }
            SyncMsg::LockTryDone { lock, to, granted } => {
                let lock = *lock;
                let Some(m) = self.managed_locks.get_mut(&lock) else {
                    return;
                };
                if m.try_pending != Some(*to) {
                    tracing::warn!(lock, to, "an unexpected try-lock outcome; ignored");
                    return;
                }
                m.try_pending = None;
                if *granted {
                    m.prev_tail = Some(m.tail);
                    m.tail = *to;
                } else {
                    out.push(SyncEvent::Send {
                        to: *to,
                        msg: SyncMsg::LockBusy { lock },
                    });
                }
                while let Some(m) = self.managed_locks.get_mut(&lock) {
                    if m.try_pending.is_some() {
                        break;
                    }
                    let Some((node, try_only)) = m.held.pop_front() else {
                        break;
                    };
                    self.manager_acquire(lock, node, try_only, out);
                }
            }
            SyncMsg::LockGrant {
                lock,
                releases,
                notices,
            } => {
                let lock = *lock;
                let l = self.node_lock(lock);
                l.requested = false;
                l.token = true;
                l.handoffs = 0;
                l.releases = *releases;
                l.notices = notices
                    .iter()
                    .map(|n| {
                        let age = NoticeAge {
                            epoch: n.epoch,
                            release: n.release,
                        };
                        (n.page, age)
                    })
                    .collect();
                match l.queue.pop_front() {
                    Some((waiter, _)) => {
                        l.owner = Some(waiter);
                        let seen = l.seen;
                        let notices = l
                            .notices
                            .iter()
                            .filter(|(_, a)| a.release > seen)
                            .map(|(p, _)| *p)
                            .collect();
                        out.push(SyncEvent::Granted {
                            lock,
                            waiter,
                            notices,
                        });
                    }
                    // Nobody waits any more (cannot happen with the current API, kept total):
                    // the token stays, or moves on if a node waits for it.
                    None => self.token_freed(lock, out),
                }
            }
            SyncMsg::LockBusy { lock } => {
                let to = self.manager(*lock);
                let l = self.node_lock(*lock);
                l.requested = false;
                if let Some(pos) = l.queue.iter().position(|(_, t)| *t) {
                    let (waiter, _) = l.queue.remove(pos).expect("position is in range");
                    out.push(SyncEvent::TryFailed {
                        lock: *lock,
                        waiter,
                    });
                }
                if !l.queue.is_empty() && !l.token {
                    l.requested = true;
                    out.push(SyncEvent::Send {
                        to,
                        msg: SyncMsg::LockAcquire { lock: *lock },
                    });
                }
            }
            SyncMsg::BarrierArrive { .. }
            | SyncMsg::BarrierRelease { .. }
            | SyncMsg::BarrierRound { .. }
            | SyncMsg::BarrierMismatch { .. } => self.on_barrier_message(from, msg, out),
            // Semaphores have their own state machine (`sem.rs`); the engine routes them there.
            SyncMsg::SemWait { .. } | SyncMsg::SemPost { .. } | SyncMsg::SemGrant { .. } => {}
        }
    }

    fn manager_acquire(
        &mut self,
        lock: u64,
        from: NodeId,
        try_only: bool,
        out: &mut Vec<SyncEvent>,
    ) {
        let me = self.me;
        let m = self.managed_locks.entry(lock).or_insert(ManagedLock {
            tail: me,
            prev_tail: None,
            try_pending: None,
            held: VecDeque::new(),
        });
        if m.try_pending.is_some() {
            m.held.push_back((from, try_only));
            return;
        }
        if m.tail == from {
            tracing::warn!(
                lock,
                from,
                "a lock request from the node at the tail; ignored"
            );
            return;
        }
        out.push(SyncEvent::Send {
            to: m.tail,
            msg: SyncMsg::LockForward {
                lock,
                to: from,
                try_only,
            },
        });
        if try_only {
            m.try_pending = Some(from);
        } else {
            m.prev_tail = Some(m.tail);
            m.tail = from;
        }
    }

    /// Diagnostic text for a lock: where its token is, who waits (for deadline messages).
    pub fn describe_lock(&self, lock: u64) -> String {
        let local = self.locks.get(&lock);
        let managed = self.managed_locks.get(&lock);
        let mut s = format!("lock {lock} (manager node {}): ", self.manager(lock));
        match local {
            Some(l) => s.push_str(&format!(
                "token here: {}, held by a local thread: {}, local waiters: {}, requested: {}, \
                 next node: {:?}",
                l.token,
                l.owner.is_some(),
                l.queue.len(),
                l.requested,
                l.next
            )),
            None => s.push_str("never used here"),
        }
        if let Some(m) = managed {
            s.push_str(&format!(
                "; managed here: the token is at or goes last to node {}{}",
                m.tail,
                m.try_pending
                    .map(|t| format!(", try-lock of node {t} pending"))
                    .unwrap_or_default()
            ));
        }
        s
    }

    /// The node the token of `lock` was last sent towards, as this node knows it (the
    /// manager's tail): for diagnostics when a node is lost.
    pub fn lock_tail(&self, lock: u64) -> Option<NodeId> {
        self.managed_locks.get(&lock).map(|m| m.tail)
    }

    /// Locks whose token is on this node.
    pub fn tokens_held(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .locks
            .iter()
            .filter(|(_, l)| l.token)
            .map(|(id, _)| *id)
            .collect();
        v.sort_unstable();
        v
    }

    /// Locks managed here whose token is at, goes last to, or was last forwarded from `node`
    /// (so it may hold the token now): for the message naming a lost node.
    pub fn locks_towards(&self, node: NodeId) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .managed_locks
            .iter()
            .filter(|(_, m)| (m.tail == node || m.prev_tail == Some(node)) && node != self.me)
            .map(|(l, _)| *l)
            .collect();
        v.sort_unstable();
        v
    }

    pub fn me(&self) -> NodeId {
        self.me
    }
}

#[cfg(test)]
mod tests;
