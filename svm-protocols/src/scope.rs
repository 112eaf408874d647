//! `scope`: scope consistency (Iftode, Singh and Li), home-based, as JIAJIA does it.
//!
//! Pages, fetches, twins, diffs and homes work as in `sc-mw` (see `crate::home_mw`): the home
//! holds the master copy, writers twin their copy and send diffs, batched one message per
//! home, at every release and barrier arrival, and a release completes only when every home
//! has applied and acknowledged them. The difference is **when stale copies go**: homes keep
//! no copyset and invalidate nothing; instead
//!
//! - **Lock release** returns *write notices* in `ReleaseDone { notices }`: the pages written
//!   on this node since the last release that left no critical section open here (with one
//!   thread per node: since the last release). The sync layer attaches them to the lock at
//!   its manager; every later grant of the lock carries the lock's notices.
//! - **Lock acquire** (`on_acquire(notices)`) invalidates this node's copy of every page named
//!   (except pages this node is home of: the master already holds every acknowledged diff), so
//!   the next access refetches a copy that includes the writes of earlier critical sections.
//!   A dirty copy first pushes its diff to its home; a fetch in flight is marked stale and
//!   redone.
//! - **Barrier** = global scope: arrival flushes and returns every page written on this node
//!   since its last barrier arrival (`on_barrier_arrive`); departure invalidates every page
//!   named by any node's arrival (`on_barrier_depart`).
//!
//! Why "since the last release that left no critical section open": the protocol does not
//! know which thread wrote a page, so a release hands over every page written on the node
//! since the set was last emptied, and the set is only emptied when no other local thread is
//! inside a critical section (`open` counts acquires minus releases) — otherwise that thread's
//! writes so far would be announced to the wrong lock only. Writes made outside any critical
//! section may ride along with a lock's notices (harmless over-invalidation); scope consistency
//! only promises them after a barrier.
//!
//! Notices kept at lock managers are bounded by the garbage collection at global barriers
//! (`SyncState::clear_lock_notices`, epoch-tagged); this protocol keeps only the two sets
//! above, emptied at releases and barrier arrivals.
//!
//! Guarantees: after acquiring lock L a node sees every write made inside earlier critical
//! sections of L (by any node); after a barrier it sees every write made before the barrier.
//! Nothing else: a write made outside L's critical sections need not be seen by L's next
//! acquirer before a barrier, and racy programs (spinning on a flag) may never see a write.
//! See `docs/protocols.md`.

use crate::home_mw::{home_mw_protocol, Mode};

home_mw_protocol!(
    /// Home-based scope consistency with write notices (JIAJIA-style).
    Scope,
    "scope",
    Mode::Notices
);

impl Scope {
    /// Write notices held for the next lock release and the next barrier arrival.
    pub fn pending_notices(&self) -> (usize, usize) {
        self.0.pending_notices()
    }
}
