//! The coherence protocol interface: a sans-IO state machine.
//!
//! A protocol receives events as method calls (a local fault, a message, a release, an
//! acquire) and appends [`Action`]s to an output vector. It reads no clock, opens no socket and
//! maps no memory, so the same code runs inside the deterministic simulator
//! (`svm-protocols/src/sim.rs`) and inside the real engine (`node.rs`).
//!
//! Contract between engine and protocol:
//! - Actions are executed **in order**. `SetAccess` before a `Send` that attaches the page means
//!   the page's protection is lowered before its contents are read, so no write can slip in
//!   between.
//! - `on_fault` is called for every fault the engine cannot resolve from its own page table
//!   (the engine wakes threads whose needed access is already granted, without the protocol).
//!   The protocol coalesces: a second fault on a page with a request outstanding must not send a
//!   second request of the same strength.
//! - When an `Install` or `SetAccess` action grants access ≥ what a waiting thread needs, the
//!   engine wakes that thread. No explicit wake action exists.
//! - Messages between two nodes are delivered in the order they were sent (per-pair FIFO).
//! - The engine delivers messages a node sends to itself through the same path as any other.
//! - A page never installed on a node reads as zeros: the protocol may `SetAccess` a page that
//!   was never installed (the engine materializes a zero page) and may attach such a page.
//! - Multiple-writer protocols use twins and diffs ([`Action::MakeTwin`],
//!   [`Action::SendDiffs`], [`Action::ApplyIncomingDiffs`], encoding in [`crate::diff`]). A
//!   twin lives beside the page, outside the shared window: lowering a page's protection does
//!   not touch its twin. A protocol never lowers a page that has a twin to `None` before its
//!   diff was sent (`SendDiffs` drops the twin); the simulator reports that as a protocol bug.
//! - Lock grants and barrier departures carry the write notices the protocol returned from
//!   its releases (`ReleaseDone { notices }`), see `crate::sync`.

pub use svm_comm::wire::{Access, NodeId, PageId, ProtoMsg};

/// What the engine must do for a protocol, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send `msg` to node `to` (possibly this node). With `attach = Some(p)` the engine reads
    /// the current local contents of page `p` and sends them as the frame's raw data.
    Send {
        to: NodeId,
        msg: ProtoMsg,
        attach: Option<PageId>,
    },
    /// Set the local protection of `page` (None = inaccessible, Read = read-only, Write = RW).
    /// Lowering to `None` on a node that is not the page's owner may discard the contents.
    SetAccess { page: PageId, access: Access },
    /// Install the raw data that came with the message being handled as the contents of
    /// `page`, then set `access`. Only valid inside `on_message`.
    InstallIncoming { page: PageId, access: Access },
    /// A release started by `on_release(token)` has completed; `notices` are the write notices
    /// to attach to the lock or barrier (empty for protocols that do not use them).
    ReleaseDone { token: u64, notices: Vec<PageId> },
    /// An acquire started by `on_acquire(token)` has completed.
    AcquireDone { token: u64 },
    /// Copy the current local contents of `page` into a *twin* kept by the engine (a page never
    /// installed twins as zeros). The protocol emits it while the page is not writable, before
    /// the `SetAccess Write` that lets threads write it, so the twin holds exactly the
    /// contents before the first write. Emitting it for a page that already has a twin is a
    /// protocol bug (the simulator reports it; the engine may fail the job).
    MakeTwin { page: PageId },
    /// Forget the twin of `page` without a diff: the writes since the twin was made stay in
    /// the local contents, which the protocol now treats as the master copy (the node became
    /// the page's home). Dropping a twin the page does not have is a protocol bug.
    DropTwin { page: PageId },
    /// For each page of `pages`, in order: encode the word-granular diff of the page's current
    /// local contents against its twin (`crate::diff::encode`), then drop the twin; send `msg`
    /// to `to` with all those diffs concatenated as the frame's raw data (one message per
    /// destination: the protocol batches). Every page must have a twin (a protocol bug
    /// otherwise). The diffs are computed when the action executes, so the protocol lowers
    /// the pages to `Read` first (an earlier `SetAccess`) to keep writes from slipping in
    /// between the diff and the twin's removal. An empty `pages` sends `msg` with no data.
    SendDiffs {
        to: NodeId,
        msg: ProtoMsg,
        pages: Vec<PageId>,
    },
    /// Apply the diffs carried as raw data by the message being handled (`crate::diff::apply`)
    /// to the local contents of the pages they name (materializing a zero page for a page not
    /// present here), without changing any protection and without waking anyone. Only valid
    /// inside `on_message`; with no data it does nothing. Malformed diff data is a fatal
    /// error (nothing is applied).
    ApplyIncomingDiffs,
}

/// What the protocol may ask the engine about (pure queries, no side effects).
pub trait Context {
    /// This node's rank.
    fn me(&self) -> NodeId;
    /// Number of nodes in the job.
    fn nodes(&self) -> NodeId;
    /// Home (manager) node of `page`, from the region's home policy.
    fn home(&self, page: PageId) -> NodeId;
    /// Whether `next` lies in the same allocated region as `page` (so it may be sent ahead to
    /// a node reading `page`: every node knows that region). Default: yes.
    fn same_region(&self, _page: PageId, _next: PageId) -> bool {
        true
    }
    /// The time of the step, in ns on the engine's clock (the monotonic clock, or a driver's
    /// virtual time: the engine reads no clock itself). Default 0: a context without a clock,
    /// under which a protocol must not arm timers ([`ProtocolOptions::hold_ns`] stays 0).
    fn now(&self) -> u64 {
        0
    }
    /// Whether a thread of this node faulted on `page`, was woken by its installation a
    /// moment ago (a bounded time) and has not run since the engine looked, right after the
    /// wake-up: given away now, the page would usually make that thread fault again without
    /// having used it (`svm-core/src/node/installs.rs` says when it has). Default: no (a
    /// context without threads).
    fn install_unused(&self, _page: PageId) -> bool {
        false
    }
    /// Whether `page` is one of the pages a lock's critical sections on this node used, and
    /// that lock's token is here while another node has asked for it: given away now, the
    /// page would leave the critical section under way and come back at once, and the node
    /// that asked for it usually takes the lock next and gets both together when the token
    /// leaves (`svm-core/src/node/lock_pages.rs`; bounded in time by the engine). Default:
    /// no (a context without locks).
    fn kept_for_lock(&self, _page: PageId) -> bool {
        false
    }
    /// A digest of this node's contents of `page`, where it holds them: two equal digests of
    /// the page mean it was (up to a 64-bit hash collision) not changed in between, which
    /// tells a protocol whether a page it left writable without write tracking was written
    /// ([`page_digest`] of the contents). Default: none (a context without page contents),
    /// and a protocol then keeps tracking writes by faults.
    fn page_digest(&self, _page: PageId) -> Option<u64> {
        None
    }
    /// Whether this node finds the writes to `page` by scanning its page tables
    /// ([`Context::take_scanned_writes`]) rather than by write faults: a write to the page
    /// made read-only then raises no fault. Default: no (every write to a read-only page
    /// faults).
    fn writes_scanned(&self, _page: PageId) -> bool {
        false
    }
    /// Those of `pages` (sorted; their writes scanned, [`Context::writes_scanned`]) written
    /// since they were last made read-only, made read-only again in the same step, so the
    /// next call reports the writes after this one. A page left writable counts as written.
    /// Default: none.
    fn take_scanned_writes(&self, _pages: &[PageId]) -> Vec<PageId> {
        Vec::new()
    }
}

/// The digest [`Context::page_digest`] gives of a page's contents: FxHash over its 8-byte
/// words (a page is read at memory speed: ~0.3 µs for 4 KiB).
pub fn page_digest(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        h.write_u64(u64::from_ne_bytes(w.try_into().unwrap_or_default()));
    }
    h.write(words.remainder());
    h.write_usize(bytes.len());
    h.finish()
}

/// A simple [`Context`] for tests and the simulator: the home of page `p` is `homes(p)`.
pub struct StaticContext<F: Fn(PageId) -> NodeId> {
    pub me: NodeId,
    pub nodes: NodeId,
    pub homes: F,
}

impl<F: Fn(PageId) -> NodeId> Context for StaticContext<F> {
    fn me(&self) -> NodeId {
        self.me
    }
    fn nodes(&self) -> NodeId {
        self.nodes
    }
    fn home(&self, page: PageId) -> NodeId {
        (self.homes)(page)
    }
}

/// Protocol counters the engine folds into the node's statistics.
///
/// Byte counts of diffs are not here: the protocol never sees page contents. The engine (and
/// the simulator's `RunStats`) count diff bytes when executing `SendDiffs` and
/// `ApplyIncomingDiffs`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtocolStats {
    /// Invalidations this node performed on its own copies (for any reason).
    pub invalidations: u64,
    /// Ownership transfers this node received.
    pub ownership_received: u64,
    /// Twins made (`MakeTwin` actions).
    pub twins_made: u64,
    /// Page diffs this node created (pages named by its `SendDiffs` actions).
    pub diffs_created: u64,
    /// Page diffs this node applied as a home (pages whose diffs came with messages it
    /// applied with `ApplyIncomingDiffs`).
    pub diffs_applied: u64,
    /// Write notices this node handed to the sync layer (`ReleaseDone { notices }`).
    pub notices_sent: u64,
    /// Invalidations of this node's copies caused by write notices received at an acquire or
    /// a barrier departure (included in `invalidations`).
    pub notice_invalidations: u64,
    /// Pages this node requested unasked behind a sequential scan (read-ahead of its own
    /// fetches, home-based protocols).
    pub pages_read_ahead: u64,
    /// Home pages made writable unasked: behind a sequential run of write faults (home-based
    /// write-ahead), or at a barrier departure once every copy the home pushed was dropped
    /// (sc-sw).
    pub pages_written_ahead: u64,
    /// Write faults served without a message because the page was held exclusively after
    /// a read (sc-sw's migratory pages).
    pub migratory_upgrades: u64,
    /// Pages asked for along with the page before them, because the two were asked for one
    /// after the other before (sc-sw's remembered pairs).
    pub pages_paired: u64,
    /// Pages this manager granted a node around its write request while this node waited at
    /// a barrier (sc-sw, `SVM_GRANT_AROUND`).
    pub pages_granted_around: u64,
    /// Of those, pages given back unwritten (sc-sw, `SVM_GRANT_AROUND`).
    pub granted_around_unwritten: u64,
    /// Remembered pairs forgotten because the page asked for along with the one before was
    /// taken by another node before this node wrote it.
    pub pairs_dropped: u64,
    /// Requests for a page this node kept a while before giving it up (sc-sw's minimum hold,
    /// `SVM_HOLD_US`).
    pub requests_held: u64,
    /// Write faults on a held page whose write probe had lowered it, raised again without a
    /// message (sc-sw; the page is still in use, its hold goes on).
    pub hold_probe_rewrites: u64,
    /// Holds ended early because their page went unwritten for a probe interval while a
    /// request waited for it (sc-sw).
    pub holds_ended_unwritten: u64,
    /// Requests for a page this node kept waiting because the thread it had fetched the
    /// page for had not run since (sc-sw; [`Context::install_unused`]).
    pub requests_kept_unused: u64,
    /// Requests for a page this node kept waiting while the token of a lock whose critical
    /// sections use the page was here and wanted by another node (sc-sw;
    /// [`Context::kept_for_lock`]).
    pub requests_kept_for_lock: u64,
    /// Read copies this node pushed, as a home, to the readers of pages it wrote, at its
    /// barrier arrivals (sc-sw's producer–consumer push, `SVM_PUSH`).
    pub pages_pushed: u64,
    /// Pushed copies this node dropped at its barrier arrival after a phase of use, so their
    /// homes could write them again without an invalidation (sc-sw, `SVM_PUSH`).
    pub copies_dropped: u64,
    /// Flushes of writes no release had flushed after `SVM_FLUSH_AFTER_US` (sc-mw's bounded
    /// visibility).
    pub timed_flushes: u64,
    /// Pages this node was home of and handed to the node that alone wrote them between two
    /// barriers (sc-mw, two nodes, `SVM_HOME_MIGRATION`).
    pub homes_moved: u64,
    /// Home pages a release found written by scanning the page tables instead of by a write
    /// fault (`scope`, `SVM_WRITE_SCAN`).
    pub writes_scanned: u64,
}

/// Which hook a barrier's departure runs on a node. The engine and the protocol simulators
/// choose it alike, from the departure's `SyncEvent::BarrierDone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarrierDeparture {
    /// The barrier of every node, one thread each ([`Protocol::on_all_nodes_barrier_depart`]).
    AllNodes,
    /// A barrier of a count of threads that every node took part in
    /// ([`Protocol::on_barrier_depart`]).
    EveryNode,
    /// A barrier of a count of threads that some node took no part in
    /// ([`Protocol::on_partial_barrier_depart`]); `others`: another node than this one did.
    Partial { others: bool },
}

impl BarrierDeparture {
    /// The departure of a barrier of every node, one thread each (`all_nodes`), or of one that
    /// `took_part` nodes of a job of `nodes` had threads at.
    pub fn of(all_nodes: bool, took_part: u32, nodes: usize) -> Self {
        match all_nodes {
            true => BarrierDeparture::AllNodes,
            false if took_part as usize >= nodes => BarrierDeparture::EveryNode,
            false => BarrierDeparture::Partial {
                others: took_part > 1,
            },
        }
    }

    /// Runs this departure's hook of `p`.
    pub fn run(
        self,
        p: &mut dyn Protocol,
        ctx: &dyn Context,
        token: u64,
        notices: &[PageId],
        out: &mut Vec<Action>,
    ) {
        match self {
            BarrierDeparture::AllNodes => p.on_all_nodes_barrier_depart(ctx, token, notices, out),
            BarrierDeparture::EveryNode => p.on_barrier_depart(ctx, token, notices, out),
            BarrierDeparture::Partial { others } => {
                p.on_partial_barrier_depart(ctx, token, notices, others, out)
            }
        }
    }
}

/// A page coherence protocol (one instance per node per protocol in use).
pub trait Protocol: Send {
    /// The `--protocol` name (`sc-sw`, `sc-mw`, `scope`).
    fn name(&self) -> &'static str;

    /// A local thread touched `page` and needs `access` it does not have.
    fn on_fault(&mut self, ctx: &dyn Context, page: PageId, access: Access, out: &mut Vec<Action>);

    /// A protocol message arrived from `from` (raw data, if any, is available to
    /// [`Action::InstallIncoming`]; `data_len` says how much came).
    fn on_message(
        &mut self,
        ctx: &dyn Context,
        from: NodeId,
        msg: &ProtoMsg,
        data_len: usize,
        out: &mut Vec<Action>,
    );

    /// A local thread is about to release a lock. The protocol must eventually emit
    /// `ReleaseDone { token }` (immediately if it has nothing to do); the sync layer passes the
    /// lock on only after it. (Barrier arrivals go to [`Protocol::on_barrier_arrive`].)
    fn on_release(&mut self, ctx: &dyn Context, token: u64, out: &mut Vec<Action>);

    /// A local thread has been granted a lock carrying `notices` (for a grant handed over
    /// locally, without the manager, `notices` is empty). The protocol must eventually emit
    /// `AcquireDone { token }`. (Barrier departures go to [`Protocol::on_barrier_depart`].)
    fn on_acquire(
        &mut self,
        ctx: &dyn Context,
        token: u64,
        notices: &[PageId],
        out: &mut Vec<Action>,
    );

    /// A local thread arrives at a barrier: a release of everything this node wrote (the
    /// *global scope*). Same contract as [`Protocol::on_release`]; the notices returned go to
    /// the barrier's manager, which hands their union to every node at departure. The engine
    /// calls this (not `on_release`) at barrier arrivals. Default: `on_release`.
    fn on_barrier_arrive(&mut self, ctx: &dyn Context, token: u64, out: &mut Vec<Action>) {
        self.on_release(ctx, token, out)
    }

    /// This node's threads leave a barrier; `notices` is the union of the notices of every
    /// arrival. Same contract as [`Protocol::on_acquire`]. The engine calls this (not
    /// `on_acquire`) at barrier departures. Default: `on_acquire`.
    fn on_barrier_depart(
        &mut self,
        ctx: &dyn Context,
        token: u64,
        notices: &[PageId],
        out: &mut Vec<Action>,
    ) {
        self.on_acquire(ctx, token, notices, out)
    }

    /// This node's threads leave a barrier of a count of threads that some node of the job
    /// took no part in (a barrier of a subset of the nodes); `others`: whether another node
    /// took part. Such a node did not hear this episode's notices, and a participant may know
    /// of writes (from an earlier such episode) that the others of this one did not hear of.
    /// Same contract as [`Protocol::on_barrier_depart`], which the engine calls when every
    /// node took part. Default: `on_barrier_depart`.
    fn on_partial_barrier_depart(
        &mut self,
        ctx: &dyn Context,
        token: u64,
        notices: &[PageId],
        others: bool,
        out: &mut Vec<Action>,
    ) {
        let _ = others;
        self.on_barrier_depart(ctx, token, notices, out)
    }

    /// A local thread arrives at a barrier of every node of the job, one thread each, that
    /// passes by messages (the global barrier; `SyncState::barrier_all_arrive`): every node
    /// arrives at it and departs it ([`Protocol::on_all_nodes_barrier_depart`]), in the same
    /// order. Same contract as [`Protocol::on_barrier_arrive`]. Default: that.
    fn on_all_nodes_barrier_arrive(
        &mut self,
        ctx: &dyn Context,
        token: u64,
        out: &mut Vec<Action>,
    ) {
        self.on_barrier_arrive(ctx, token, out)
    }

    /// This node's thread leaves a barrier of every node (see
    /// [`Protocol::on_all_nodes_barrier_arrive`]). Same contract as
    /// [`Protocol::on_barrier_depart`]. Default: that.
    fn on_all_nodes_barrier_depart(
        &mut self,
        ctx: &dyn Context,
        token: u64,
        notices: &[PageId],
        out: &mut Vec<Action>,
    ) {
        self.on_barrier_depart(ctx, token, notices, out)
    }

    /// Whether a barrier that passes through shared memory without messages (DECK-SCI on one
    /// host, `SVM_HOST_BARRIER`) should still run [`Protocol::on_barrier_arrive`] and
    /// [`Protocol::on_barrier_depart`] while every protocol is quiescent, because they do
    /// work there that needs no barrier message (sc-sw's push and drop of copies). Then each
    /// thread that arrives runs this protocol's arrival hook (the other protocols' are not
    /// run) before it enters the shared-memory barrier, and its departure hook (with no
    /// notices) after it leaves, one per thread; the arrival must return no notices. Default:
    /// false (such a barrier skips both hooks).
    fn barrier_hooks_without_messages(&self) -> bool {
        false
    }

    /// Whether a lock release whose token stays on this node may leave its flush to this
    /// node's next release that can tell another node anything: the token leaving (the flush
    /// runs just before the grant), a barrier arrival, a semaphore post, a user message — or
    /// the protocol's own timer. The engine asks only in a job of two nodes, where such a
    /// flush goes out on the one link ahead of whatever tells the other node of the release.
    /// Default: false.
    fn release_can_wait(&self) -> bool {
        false
    }

    /// Whether every write to a page ends up at its home (home-based protocols: diffs go to
    /// the home at each release), so that where pages are homed decides what each release
    /// costs. Personalities whose master allocates the data of all nodes then home it by first
    /// touch ([`crate::api::alloc_local_first_touch`]). Default: false (the home is only the
    /// page's manager, as under sc-sw, whose pages move to their writers).
    fn home_based(&self) -> bool {
        false
    }

    /// Whether this node's protocol state is *quiescent*: a release now would complete with no
    /// notices and nothing any guarantee depends on, and an acquire with no notices would
    /// emit nothing but `AcquireDone` (it may count an open critical section that the matching
    /// release uncounts). Then the engine may skip both hooks for a lock taken and released on
    /// this node while nothing else happens (the application-thread fast path); if the state
    /// stops being quiescent while such a lock is held, the engine runs `on_acquire` (no
    /// notices) late and the release normally. What a skipped release would only have done
    /// early (sc-sw ending its holds) waits for [`Protocol::on_token_leaves`] or the next
    /// barrier. Default: false (the hooks always run).
    fn quiescent(&self) -> bool {
        false
    }

    /// Whether a barrier arrival now would also complete at once with no notices: quiescent,
    /// and no write notices kept for the next barrier (scope keeps the pages written since the
    /// last barrier after a lock release has flushed them). The shared-memory barrier passes
    /// without messages only while every node's protocols are. Default: `quiescent`.
    fn barrier_quiescent(&self) -> bool {
        self.quiescent()
    }

    /// When this protocol next wants [`Protocol::on_timer`] called, in ns on the clock of
    /// [`Context::now`]; None without a timer. The engine asks after every hook.
    fn next_timer(&self) -> Option<u64> {
        None
    }

    /// The time (`ctx.now()`) reached [`Protocol::next_timer`]: do what waited for it.
    fn on_timer(&mut self, _ctx: &dyn Context, _out: &mut Vec<Action>) {}

    /// Counters for statistics.
    fn stats(&self) -> ProtocolStats {
        ProtocolStats::default()
    }

    /// A human-readable account of what the protocol knows about `page` (for deadline
    /// diagnostics: who owns it, what is pending).
    fn describe(&self, page: PageId) -> String;

    /// Forgets everything about the pages in `pages` (a destroyed region), so a region later
    /// allocated there starts as if never touched. The engine calls it on every node at a
    /// point where no thread uses those pages and no message about them is in flight. Returns
    /// false if the protocol cannot (the default): destroying regions is then not supported.
    fn forget(&mut self, _pages: std::ops::Range<PageId>) -> bool {
        false
    }

    /// Applies the user's tuning (`SVM_PREFETCH`, ...); protocols ignore what they lack.
    fn configure(&mut self, _opts: &ProtocolOptions) {}

    /// Whether the engine should ask for a lock's pages along with the lock and keep them
    /// here while the lock's token is wanted elsewhere (`SVM_LOCK_PAGES`,
    /// [`Context::kept_for_lock`]): true for a protocol whose page requests may wait at the
    /// owner and whose copies stay valid across an acquire (sc-sw). A protocol whose acquire
    /// invalidates copies would only fetch them twice. Default: false.
    fn keeps_pages_for_locks(&self) -> bool {
        false
    }

    /// A reason to keep pages ended (a lock's token left this node, [`Context::kept_for_lock`]):
    /// requests waiting for it go on now. Default: nothing waits for it.
    fn recheck_kept(&mut self, _ctx: &dyn Context, _out: &mut Vec<Action>) {}

    /// A lock's token is about to leave this node for another: the one moment at which data
    /// this node published by releasing a lock can be wanted elsewhere. The engine runs the
    /// actions before the grant leaves, on the same links. A protocol that keeps pages back
    /// until a release (sc-sw's holds) may keep them across the releases its threads make
    /// through the fast path, and let them go here instead. Default: nothing to do.
    fn on_token_leaves(&mut self, _ctx: &dyn Context, _out: &mut Vec<Action>) {}
}

/// Tuning the engine passes to every protocol instance at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtocolOptions {
    /// Read-ahead: pages granted unasked behind a sequential read stream (0 = off).
    pub read_ahead: usize,
    /// Fault-around (`SVM_FAULT_AROUND`): a node's first fault on a page it is home of and
    /// that no node has dealt with yet also makes the untouched home pages around it (an
    /// aligned block of this many pages) writable in the same breath; 0 or 1 = off.
    pub fault_around: usize,
    /// Minimum hold (`SVM_HOLD_US`, in ns here): a node that gets write access back to a page
    /// another node took from it since the node's last release keeps it at least this long
    /// before giving it up to a node of higher rank (unless it releases first); 0 = off. See
    /// docs/protocols.md.
    pub hold_ns: u64,
    /// Producer–consumer push (`SVM_PUSH`): at its barrier arrivals a home sends read copies
    /// of the pages it wrote to the nodes that asked to read them before. See
    /// docs/protocols.md.
    pub push: bool,
    /// Bounded visibility (`SVM_FLUSH_AFTER_US`, in ns here; sc-mw): writes not yet flushed
    /// reach their homes, and the other copies are invalidated, at the latest this long after
    /// the first of them, release or not; 0 = only at releases. See docs/protocols.md.
    pub flush_after_ns: u64,
    /// Home migration (`SVM_HOME_MIGRATION`, off by default; sc-mw in a job of two nodes): at
    /// a barrier, a home hands each page only the other node wrote since the last barrier to
    /// that node. See docs/protocols.md.
    pub home_migration: bool,
    /// Grants around a request at a barrier (`SVM_GRANT_AROUND`; sc-sw): a manager whose node
    /// waits at a barrier grants a node that keeps asking it for write access the idle pages
    /// of the aligned block of this many pages around each page asked for; 0 or 1 = off. See
    /// docs/protocols.md.
    pub grant_around: usize,
}

/// Fault-around sizing for one protocol instance: a walk's window starts at
/// [`FaultAround::START`] pages and doubles, up to the configured maximum, while each fault
/// lands right after that walk's previous run (a sequential first touch); a fault that
/// continues no walk starts a new one. Several walks are followed at once, so a loop that
/// fills two arrays side by side (Jacobi's first sweep reads one grid and writes the other)
/// grows both windows instead of starting over at every other fault. So a program that
/// touches a large allocation sparsely maps few pages it does not use, and one that fills
/// it in order pays one fault per `max` pages.
#[derive(Debug, Clone, Default)]
pub struct FaultAround {
    /// Largest window in pages (0 or 1 = off).
    pub max: usize,
    /// The walks followed: the page right after each one's last run, and its window (0: a
    /// free slot).
    walks: [(PageId, usize); FaultAround::WALKS],
    /// The slot a new walk takes (round robin).
    next_slot: usize,
}

impl FaultAround {
    pub const START: usize = 8;

    /// Walks followed at once: arrays filled side by side, or threads of a node filling
    /// their own parts (as `fault::SequentialFill` tracks the backend's runs).
    pub const WALKS: usize = 8;

    pub fn new(max: usize) -> Self {
        FaultAround {
            max,
            ..Default::default()
        }
    }

    pub fn enabled(&self) -> bool {
        self.max > 1
    }

    /// The pages a fault-around for `page` covers: the pages of the aligned block of the
    /// window of the walk `page` continues (or a new walk's) that are contiguous with it,
    /// homed on this node, in `page`'s region and `fresh` (no node has dealt with them).
    /// Includes `page` itself (the caller checked it).
    pub fn run(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        fresh: impl Fn(PageId) -> bool,
    ) -> std::ops::Range<PageId> {
        if !self.enabled() {
            return page..page + 1;
        }
        let first = Self::START.min(self.max);
        let slot = match self
            .walks
            .iter()
            .position(|&(next, cur)| cur != 0 && next == page)
        {
            Some(i) => {
                self.walks[i].1 = (self.walks[i].1 * 2).clamp(first, self.max);
                i
            }
            None => {
                let i = self.next_slot;
                self.next_slot = (i + 1) % Self::WALKS;
                self.walks[i].1 = first;
                i
            }
        };
        let w = self.walks[slot].1 as PageId;
        let (lo, hi) = (page - page % w, page - page % w + w);
        let ok = |q: PageId| ctx.home(q) == ctx.me() && ctx.same_region(page, q) && fresh(q);
        let mut start = page;
        while start > lo && ok(start - 1) {
            start -= 1;
        }
        let mut end = page + 1;
        while end < hi && ok(end) {
            end += 1;
        }
        self.walks[slot].0 = end;
        start..end
    }
}

/// Protocol names by wire id (`Msg::Proto { proto }`): the index in this list.
pub const PROTOCOL_NAMES: &[&str] = &["sc-sw", "sc-mw", "scope"];

/// Wire id of a protocol name.
pub fn protocol_id(name: &str) -> Option<u8> {
    PROTOCOL_NAMES
        .iter()
        .position(|n| *n == name)
        .map(|i| i as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_around_grows_on_sequential_faults_and_stops_at_other_homes() {
        // Pages 0..100 are node 0's, 100.. node 1's.
        let ctx = StaticContext {
            me: 0,
            nodes: 2,
            homes: |p| if p < 100 { 0 } else { 1 },
        };
        let mut fa = FaultAround::new(32);
        // Pages below `from` were taken by earlier runs.
        let after = |from: PageId| move |p: PageId| p >= from;
        // First fault: the aligned block of 8 around it.
        assert_eq!(fa.run(&ctx, 3, after(0)), 0..8);
        // Right after the run: the window doubles.
        assert_eq!(fa.run(&ctx, 8, after(8)), 8..16);
        assert_eq!(fa.run(&ctx, 16, after(16)), 16..32);
        // Capped at the maximum.
        assert_eq!(fa.run(&ctx, 32, after(32)), 32..64);
        assert_eq!(fa.run(&ctx, 64, after(64)), 64..96);
        // The next block crosses into node 1's pages: the run stops there.
        assert_eq!(fa.run(&ctx, 96, after(96)), 96..100);
        // A fault elsewhere starts over at 8; pages some node dealt with are left out.
        assert_eq!(fa.run(&ctx, 41, |p| p != 40), 41..48);
        assert_eq!(fa.run(&ctx, 83, |p| p != 85), 80..85);
        // Off: just the page.
        assert_eq!(FaultAround::new(0).run(&ctx, 5, after(0)), 5..6);
    }

    #[test]
    fn fault_around_follows_walks_interleaved_with_each_other() {
        // Two arrays filled side by side, as Jacobi's first sweep reads one grid and writes
        // the other: each walk's window grows as if it were alone.
        let ctx = StaticContext {
            me: 0,
            nodes: 1,
            homes: |_| 0,
        };
        let mut fa = FaultAround::new(64);
        let fresh = |_| true;
        let (a, b) = (0, 10_000);
        let mut runs = Vec::new();
        let (mut pa, mut pb) = (a, b);
        for _ in 0..5 {
            let ra = fa.run(&ctx, pa, fresh);
            let rb = fa.run(&ctx, pb, fresh);
            (pa, pb) = (ra.end, rb.end);
            runs.push((ra.end - ra.start, rb.end - rb.start));
        }
        assert_eq!(runs, [(8, 8), (16, 16), (32, 32), (64, 64), (64, 64)]);
        // As many walks as slots are followed at once; one more walk takes the oldest slot.
        let mut fa = FaultAround::new(64);
        let starts: Vec<PageId> = (0..=FaultAround::WALKS as PageId)
            .map(|k| k * 1_000)
            .collect();
        let ends: Vec<PageId> = starts.iter().map(|&p| fa.run(&ctx, p, fresh).end).collect();
        // Walk 0's slot went to the last walk: walk 1 still grows, walk 0 starts over.
        let len = |r: std::ops::Range<PageId>| r.end - r.start;
        assert_eq!(len(fa.run(&ctx, ends[1], fresh)), 16);
        assert_eq!(len(fa.run(&ctx, ends[0], fresh)), 8);
    }
}
