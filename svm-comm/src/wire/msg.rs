//! Control messages (the `Repr` side of the wire): everything nodes say to each other.

use serde::{Deserialize, Serialize};

/// A node's rank in the job (0-based).
pub type NodeId = u16;
/// Index of a coherence unit (page) inside the shared window.
pub type PageId = u64;

/// Access a node has (or wants) to a page.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum Access {
    #[default]
    None,
    Read,
    Write,
}

/// Job key length (random per run, from `svmrun` or `SVM_JOB_KEY`).
pub const KEY_LEN: usize = 32;

/// Every message nodes exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Msg {
    /// Connection handshake: the first frame on every connection. `listen` is where the sender
    /// accepts mesh connections (only meaningful towards the coordinator).
    Hello {
        rank: NodeId,
        size: NodeId,
        key: [u8; KEY_LEN],
        listen: String,
    },
    /// Coordinator → node: the mesh address of every rank.
    PeerTable { addrs: Vec<String> },
    /// Coherence protocol traffic. `proto` names the protocol instance (region class).
    Proto { proto: u8, msg: ProtoMsg },
    /// Synchronization traffic (locks, barriers).
    Sync(SyncMsg),
    /// Orderly shutdown: the sender has finished and will send nothing but replies.
    Goodbye,
    /// A message of the application or a personality (SMI send/receive, signals): `tag`
    /// selects the receiver's queue; the frame's data is the payload.
    User { tag: u64 },
    /// Node → directory of a first-touch page (`page % nodes`): who is its home? The first
    /// node to ask becomes it.
    HomeQuery { page: PageId },
    /// Directory → node: `home` is the home of first-touch page `page`.
    HomeIs { page: PageId, home: NodeId },
    /// The sender is ending the job; every receiver exits with status `code` (non-zero unless a
    /// program ended the job on purpose with `exit(0)`), printing `reason`.
    Abort { reason: String, code: i32 },
}

/// Messages of the page coherence protocols. Raw page contents travel as the frame's data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ProtoMsg {
    /// Requester → manager: wants a read copy.
    ReadReq { page: PageId },
    /// Requester → manager: wants write access (ownership).
    WriteReq { page: PageId },
    /// Manager → owner: send a read copy to `to` (owner keeps ownership, drops to read-only).
    FwdRead { page: PageId, to: NodeId },
    /// Manager → owner: give ownership to `to`; attach the contents if `with_data`.
    FwdWrite {
        page: PageId,
        to: NodeId,
        with_data: bool,
    },
    /// Manager → copy holder: drop your copy and acknowledge.
    Inval { page: PageId },
    /// Copy holder → manager.
    InvalAck { page: PageId },
    /// → requester: access granted; the frame's data holds the page if `with_data`.
    Grant {
        page: PageId,
        access: Access,
        with_data: bool,
    },
    /// Requester → manager: a grant sent by a third node has been installed.
    Done { page: PageId },
    /// Writer → home (multiple-writer protocols): the frame's data holds the diffs of the
    /// pages `diffed`, in that order (`svm_core::diff` encoding); `pushed` names further pages
    /// this writer changed whose diffs already reached the home in earlier messages (the home
    /// treats both as written by the sender at this release). The home answers
    /// `DiffAck { token }` once the diffs are applied and whatever the protocol requires is
    /// done (sc-mw: every other copy invalidated).
    Diffs {
        token: u64,
        diffed: Vec<PageId>,
        pushed: Vec<PageId>,
    },
    /// Home → writer: the `Diffs` with this `token` is done; `page` is that message's first
    /// page (see [`ProtoMsg::page`]).
    DiffAck { token: u64, page: PageId },
    /// Manager → owner (sc-sw, a migratory page): give ownership to the reader `to` as an
    /// exclusive copy ([`ProtoMsg::GrantExclusive`]); attach the contents if `with_data`.
    FwdExclusive {
        page: PageId,
        to: NodeId,
        with_data: bool,
    },
    /// → reader (sc-sw, a migratory page): you own the page and hold its only copy; read
    /// access now, and a write fault takes write access without a message. The frame's data
    /// holds the page if `with_data`.
    GrantExclusive { page: PageId, with_data: bool },
    /// Owner → manager (sc-sw): a page granted exclusive was given up without having been
    /// written here: its readers are not migrating it, grant plain read copies again.
    ExclusiveUnused { page: PageId },
    /// Home → consumer (sc-sw, at the home's barrier arrival): a read copy of a page the home
    /// wrote, unasked; the frame's data holds the page. The home counts the consumer a reader.
    Push { page: PageId },
    /// Consumer → home (sc-sw, at the consumer's barrier arrival): the pushed copy of `page`
    /// it read through the last phase is dropped; take it out of the copyset, and answer
    /// [`ProtoMsg::DropAck`].
    Dropped { page: PageId },
    /// Home → consumer: the [`ProtoMsg::Dropped`] for `page` is done; a push sent before it
    /// (which the consumer discarded) is not counted.
    DropAck { page: PageId },
    /// Manager → owner (sc-sw read-ahead, right behind a `FwdRead` of the manager's own
    /// read): send the manager read copies ([`ProtoMsg::AheadCopy`]) of the pages from `page`
    /// on, up to `count`, that you own and may share.
    AheadAsk { page: PageId, count: u32 },
    /// Owner → manager: an unasked read copy of `page` (the owner lowered itself to
    /// read-only); the frame's data holds the page. The manager takes it only if the page's
    /// state is unchanged since it asked.
    AheadCopy { page: PageId },
    /// Old home → new home (sc-mw in a job of two nodes, at the old home's barrier
    /// departure): only the receiver wrote `page` between the last two barriers and the old
    /// home did not, so the receiver, whose copy holds every write, is its home from now on.
    /// `copy_kept`: the sender keeps a read-only copy (the new home counts it in its copyset).
    /// Answered by [`ProtoMsg::HomeTaken`].
    HomeMoved { page: PageId, copy_kept: bool },
    /// New home → old home: the [`ProtoMsg::HomeMoved`] of `page` is done; no diff of the
    /// page comes to the old home after this message.
    HomeTaken { page: PageId },
    /// Owner → manager (sc-sw): a page the manager granted around a request (an exclusive
    /// copy nobody here asked for, at the manager's barrier) was written here.
    ExclusiveWritten { page: PageId },
}

/// A write notice travelling with a lock's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockNotice {
    pub page: PageId,
    /// The newest count of completed global barriers (epoch, see
    /// `SyncState::clear_lock_notices`) of a release that named the page.
    pub epoch: u64,
    /// The number of the newest release of the lock that named the page (1 = the first).
    pub release: u64,
}

/// Messages of the synchronization objects. Each object's manager is `id % nodes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SyncMsg {
    /// Node → lock manager: queue this node for the lock.
    LockAcquire { lock: u64 },
    /// Node → lock manager: take the lock only if free.
    LockTry { lock: u64 },
    /// Lock manager → the node at the tail of the lock's queue (the node that holds the token
    /// or will be the last to get it): pass the token to `to` when done with it. With
    /// `try_only`: pass it now if it is here and free, and answer the manager either way
    /// with `LockTryDone`.
    LockForward {
        lock: u64,
        to: NodeId,
        try_only: bool,
    },
    /// Token holder → next node (the lock's token moves): the lock is yours. `releases`
    /// counts the lock's releases so far (a node remembers the count when the token leaves
    /// it, so it can tell the notices it has not seen); `notices` are the write notices
    /// attached to the lock.
    LockGrant {
        lock: u64,
        releases: u64,
        notices: Vec<LockNotice>,
    },
    /// Lock manager → node: answer to `LockTry` when the lock is held.
    LockBusy { lock: u64 },
    /// Tail node → lock manager: the outcome of a `LockForward { try_only: true }` for `to`.
    LockTryDone {
        lock: u64,
        to: NodeId,
        granted: bool,
    },
    /// Node → barrier manager: one thread arrived; `count` is the caller's participant count.
    BarrierArrive {
        barrier: u64,
        count: u32,
        notices: Vec<PageId>,
    },
    /// Barrier manager → node: the barrier is complete; wake `arrivals` threads of this node.
    /// `nodes`: how many nodes had threads at this episode (a protocol must know whether some
    /// node took no part: it did not hear the notices).
    BarrierRelease {
        barrier: u64,
        arrivals: u32,
        notices: Vec<PageId>,
        nodes: u32,
    },
    /// Barrier manager → node: an arrival named a count that differs from the round's.
    BarrierMismatch {
        barrier: u64,
        expected: u32,
        got: u32,
    },
    /// Node → semaphore manager: one local thread waits.
    SemWait { sem: u64 },
    /// Node → semaphore manager: a post, with the poster's write notices.
    SemPost { sem: u64, notices: Vec<PageId> },
    /// Semaphore manager → node: one of the node's waits is granted.
    SemGrant { sem: u64, notices: Vec<PageId> },
    /// A barrier of every node, one thread each (dissemination, no manager): in round `round`
    /// of the sender's `episode`-th use of `barrier`, node i tells node (i + 2^round) mod N
    /// the write notices it knows of.
    BarrierRound {
        barrier: u64,
        episode: u64,
        round: u32,
        notices: Vec<PageId>,
    },
}

impl ProtoMsg {
    /// The page a protocol message is about. A batch message (`Diffs`) names several pages:
    /// this returns the first of `diffed`, else the first of `pushed`, else 0; a `DiffAck`
    /// returns the first page of the `Diffs` it answers. (The engine uses this only to defer
    /// messages about collective pages this node has not allocated yet: the pages of one
    /// batch belong to regions the sender had allocated when it wrote them, and the first
    /// one stands for the batch.)
    pub fn page(&self) -> PageId {
        match self {
            ProtoMsg::Diffs { diffed, pushed, .. } => {
                diffed.first().or(pushed.first()).copied().unwrap_or(0)
            }
            ProtoMsg::DiffAck { page, .. } => *page,
            ProtoMsg::ReadReq { page }
            | ProtoMsg::WriteReq { page }
            | ProtoMsg::FwdRead { page, .. }
            | ProtoMsg::FwdWrite { page, .. }
            | ProtoMsg::Inval { page }
            | ProtoMsg::InvalAck { page }
            | ProtoMsg::Grant { page, .. }
            | ProtoMsg::Done { page }
            | ProtoMsg::FwdExclusive { page, .. }
            | ProtoMsg::GrantExclusive { page, .. }
            | ProtoMsg::ExclusiveUnused { page }
            | ProtoMsg::Push { page }
            | ProtoMsg::Dropped { page }
            | ProtoMsg::DropAck { page }
            | ProtoMsg::AheadAsk { page, .. }
            | ProtoMsg::AheadCopy { page }
            | ProtoMsg::HomeMoved { page, .. }
            | ProtoMsg::HomeTaken { page }
            | ProtoMsg::ExclusiveWritten { page } => *page,
        }
    }

    /// A page's grant (read, write or exclusive copy): what ends a faulting thread's wait.
    pub fn is_page_grant(&self) -> bool {
        matches!(
            self,
            ProtoMsg::Grant { .. } | ProtoMsg::GrantExclusive { .. }
        )
    }

    /// A request for a page (read or write, to its manager, or forwarded by the manager to
    /// the owner): its answer is what a faulting thread waits for.
    pub fn is_page_request(&self) -> bool {
        matches!(
            self,
            ProtoMsg::ReadReq { .. }
                | ProtoMsg::WriteReq { .. }
                | ProtoMsg::FwdRead { .. }
                | ProtoMsg::FwdWrite { .. }
                | ProtoMsg::FwdExclusive { .. }
        )
    }
}

/// The names ([`Msg::stat_name`]) of the messages [`ProtoMsg::is_page_request`] picks: for
/// tools that read them back from a trace, not from messages (the profiler's split of remote
/// faults into steps). A unit test keeps the two in step.
pub const PAGE_REQUEST_NAMES: &[&str] = &[
    "read_req",
    "write_req",
    "fwd_read",
    "fwd_write",
    "fwd_exclusive",
];

/// The names of the messages [`ProtoMsg::is_page_grant`] picks (see [`PAGE_REQUEST_NAMES`]).
pub const PAGE_GRANT_NAMES: &[&str] = &["grant", "grant_exclusive"];

impl Msg {
    /// Small stable code per message kind, carried in the frame header.
    pub fn kind(&self) -> u8 {
        match self {
            Msg::Hello { .. } => 1,
            Msg::PeerTable { .. } => 2,
            Msg::Proto { .. } => 3,
            Msg::Sync(_) => 4,
            Msg::Goodbye => 5,
            Msg::Abort { .. } => 6,
            Msg::User { .. } => 7,
            Msg::HomeQuery { .. } => 8,
            Msg::HomeIs { .. } => 9,
        }
    }

    /// Name used in statistics (messages and bytes per kind).
    pub fn stat_name(&self) -> &'static str {
        match self {
            Msg::Hello { .. } => "hello",
            Msg::PeerTable { .. } => "peer_table",
            Msg::Proto { msg, .. } => match msg {
                ProtoMsg::ReadReq { .. } => "read_req",
                ProtoMsg::WriteReq { .. } => "write_req",
                ProtoMsg::FwdRead { .. } => "fwd_read",
                ProtoMsg::FwdWrite { .. } => "fwd_write",
                ProtoMsg::Inval { .. } => "inval",
                ProtoMsg::InvalAck { .. } => "inval_ack",
                ProtoMsg::Grant { .. } => "grant",
                ProtoMsg::Done { .. } => "done",
                ProtoMsg::Diffs { .. } => "diffs",
                ProtoMsg::DiffAck { .. } => "diff_ack",
                ProtoMsg::FwdExclusive { .. } => "fwd_exclusive",
                ProtoMsg::GrantExclusive { .. } => "grant_exclusive",
                ProtoMsg::ExclusiveUnused { .. } => "exclusive_unused",
                ProtoMsg::Push { .. } => "push",
                ProtoMsg::Dropped { .. } => "dropped",
                ProtoMsg::DropAck { .. } => "drop_ack",
                ProtoMsg::AheadAsk { .. } => "ahead_ask",
                ProtoMsg::AheadCopy { .. } => "ahead_copy",
                ProtoMsg::HomeMoved { .. } => "home_moved",
                ProtoMsg::HomeTaken { .. } => "home_taken",
                ProtoMsg::ExclusiveWritten { .. } => "exclusive_written",
            },
            Msg::Sync(s) => match s {
                SyncMsg::LockAcquire { .. } => "lock_acquire",
                SyncMsg::LockTry { .. } => "lock_try",
                SyncMsg::LockGrant { .. } => "lock_grant",
                SyncMsg::LockBusy { .. } => "lock_busy",
                SyncMsg::LockForward { .. } => "lock_forward",
                SyncMsg::LockTryDone { .. } => "lock_try_done",
                SyncMsg::BarrierArrive { .. } => "barrier_arrive",
                SyncMsg::BarrierRelease { .. } => "barrier_release",
                SyncMsg::BarrierRound { .. } => "barrier_round",
                SyncMsg::BarrierMismatch { .. } => "barrier_mismatch",
                SyncMsg::SemWait { .. } => "sem_wait",
                SyncMsg::SemPost { .. } => "sem_post",
                SyncMsg::SemGrant { .. } => "sem_grant",
            },
            Msg::Goodbye => "goodbye",
            Msg::Abort { .. } => "abort",
            Msg::User { .. } => "user",
            Msg::HomeQuery { .. } => "home_query",
            Msg::HomeIs { .. } => "home_is",
        }
    }
}
