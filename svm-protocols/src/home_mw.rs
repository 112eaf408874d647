//! The machinery shared by the two home-based multiple-writer protocols, `sc-mw`
//! ([`crate::ScMultiWriter`]) and `scope` ([`crate::Scope`]); they differ only in *when* stale
//! copies are invalidated ([`Mode`]). See those modules for the protocols themselves.
//!
//! Node side, for a page whose home is another node:
//! - read fault → `ReadReq` to the home, which answers `Grant` with the master copy
//!   (installed read-only);
//! - write fault → fetch first if there is no valid copy, then `MakeTwin` and `SetAccess Write`
//!   (no ownership: any number of nodes may write a page at once);
//! - release (lock or barrier) → every dirty page is lowered to read-only and its diff against
//!   the twin goes to the home, batched: one `Diffs` message per home. The release completes
//!   when every home has acknowledged (and every earlier flush of this node has completed);
//!   in a job of two nodes without waiting for the home (`home_mw_sync.rs`).
//!
//! For a page whose home is this node, the node reads and writes the master copy directly (no
//! twin, no fetch); a write marks it dirty, and the release lowers it to read-only again so the
//! next write is seen (a page written after every release stays writable: `home_mw_sticky.rs`).
//!
//! Home side: `Diffs` are applied to the master copy (`ApplyIncomingDiffs`) and acknowledged
//! with `DiffAck` (in sc-mw only after invalidating every other copy).

use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use svm_core::protocol::{Access, Action, Context, NodeId, PageId, ProtoMsg, ProtocolStats};

use crate::sc_single_writer::NodeSet;
use crate::scan_ahead::ScanAhead;

#[path = "home_mw_migrate.rs"]
mod migrate;
#[path = "home_mw_protocol.rs"]
mod protocol;
#[path = "home_mw_push.rs"]
mod push;
#[path = "home_mw_refetch.rs"]
mod refetch;
#[path = "home_mw_sticky.rs"]
mod sticky;
#[path = "home_mw_sync.rs"]
mod sync;
#[path = "home_mw_visible.rs"]
mod visible;

use sync::Flush;

pub(crate) use protocol::home_mw_protocol;

/// When stale copies are invalidated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// sc-mw: eagerly, by the home, before the writer's release completes.
    Eager,
    /// scope: lazily, by the acquirer, from the write notices of the lock or barrier.
    Notices,
}

/// This node's view of one page.
#[derive(Debug, Clone, Default)]
struct NodePage {
    /// Access as last set by this protocol.
    access: Access,
    /// A `ReadReq` is outstanding.
    fetching: bool,
    /// A write fault waits for the outstanding fetch: twin and make writable on arrival.
    want_write: bool,
    /// scope: a write notice invalidated the page while the fetch was outstanding, so the
    /// reply may predate the writes the notice stands for: it is dropped and the page fetched
    /// again.
    stale_fetch: bool,
    /// Fetches of the page at barrier departures after it was invalidated (`refetch`).
    refetch: crate::budget::Budget,
}

/// Who waits for the invalidations a home started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    /// A remote writer's `Diffs { token }`: answer `DiffAck { token, page }`.
    Remote {
        to: NodeId,
        token: u64,
        page: PageId,
    },
    /// This node's own flush `id` (the home's writes to its own pages).
    Local { id: u64 },
}

/// Invalidations a home started for one flush, not yet acknowledged.
#[derive(Debug, Clone)]
struct HomeFlush {
    reply: Reply,
    acks: u32,
}

/// One home-based multiple-writer protocol instance (one per node).
#[derive(Debug)]
pub(crate) struct HomeMw {
    mode: Mode,
    pages: FxHashMap<PageId, NodePage>,
    /// Remote pages with a twin (written since their last flush).
    dirty: BTreeSet<PageId>,
    /// Own (home) pages written since the last release (and the sticky ones: `sticky`).
    dirty_home: BTreeSet<PageId>,
    /// Served home pages kept writable across releases and counted as written at each.
    sticky: sticky::Sticky,
    /// sc-mw: remote pages whose diffs went to their home early (with an `InvalAck`); the next
    /// release names them in its `Diffs` so the home invalidates the other copies then.
    pushed: BTreeSet<PageId>,
    /// This node's flushes in the order they started; releases complete in this order.
    flushes: VecDeque<Flush>,
    next_flush: u64,
    /// sc-mw: the bounded visibility timer (`SVM_FLUSH_AFTER_US`, `home_mw_visible.rs`).
    pub(crate) visible: visible::Visibility,
    // ---- home side ----
    /// sc-mw: nodes holding a copy of each page this node is home of (never this node).
    copysets: FxHashMap<PageId, NodeSet>,
    /// sc-mw: outstanding invalidations (at most one per page and node: a node leaves the
    /// copyset when invalidated and only re-enters it with a request sent after its ack):
    /// (page, node) → the flushes waiting for that ack.
    inval_pending: BTreeMap<(PageId, NodeId), Vec<u64>>,
    home_flushes: FxHashMap<u64, HomeFlush>,
    next_home_flush: u64,
    /// Pages this node is home of whose copy some node has fetched at least once. A home page
    /// nobody ever fetched needs no write tracking: no stale copy of it exists anywhere and
    /// the next fetch gets the master copy as it is. So the home leaves such pages writable
    /// across releases (no fault per iteration on data only the home uses), and lowers a page
    /// to read-only at its first fetch, after which its writes are tracked again.
    served: FxHashSet<PageId>,
    /// The served home pages whose writes this node finds by scanning its page tables at
    /// each release (`Context::writes_scanned`; scope, `SVM_WRITE_SCAN`): a write to them
    /// raises no fault, so until a release's scan this node cannot tell whether it wrote
    /// them, and it is never quiescent while it has any.
    scan_served: BTreeSet<PageId>,
    /// Fault-around (off by default): see `ProtocolOptions::fault_around`.
    pub(crate) fault_around: svm_core::protocol::FaultAround,
    /// Read-ahead of this node's fetches (off by default): see [`ScanAhead`].
    pub(crate) fetch_ahead: ScanAhead,
    /// Write-ahead on this node's own write-tracked pages (off by default): see [`ScanAhead`].
    pub(crate) write_ahead: ScanAhead,
    // ---- scope ----
    /// Pages written since the last release that left no critical section open here.
    since_release: BTreeSet<PageId>,
    /// Pages written since the last barrier arrival.
    since_barrier: BTreeSet<PageId>,
    /// Pages written since the last barrier that every node took part in. A barrier of some
    /// of the nodes hands its notices to its participants only: a node that took no part in
    /// it must still hear of the writes at the next barrier it shares with this node, so such
    /// a barrier does not clear this set (see `partial_since`).
    since_all_nodes: BTreeSet<PageId>,
    /// This node passed a barrier some node took no part in since the last barrier every node
    /// passed: its barrier arrivals name `since_all_nodes` too, until such a barrier.
    partial_since: bool,
    /// Lock acquires minus lock releases on this node: critical sections open.
    open: u32,
    /// Pages to fetch again at the next barrier departure (`refetch`).
    refetch: BTreeSet<PageId>,
    /// sc-mw, two nodes: home migration at barriers (`migrate`).
    migration: migrate::Migration,
    /// scope, two nodes (`push`): whether to push (`SVM_PUSH`; on by default).
    pub(crate) push: bool,
    /// scope, two nodes (`push`): the other node's push budgets of this node's home pages.
    push_budgets: push::PushBudgets,
    /// scope, two nodes (`push`): pages whose copy the home pushed since this node's last
    /// barrier departure, and which it has neither written nor dropped since.
    fresh: BTreeSet<PageId>,
    stats: ProtocolStats,
}

impl HomeMw {
    pub(crate) fn new(mode: Mode) -> Self {
        HomeMw {
            mode,
            pages: FxHashMap::default(),
            dirty: BTreeSet::new(),
            dirty_home: BTreeSet::new(),
            sticky: Default::default(),
            pushed: BTreeSet::new(),
            flushes: VecDeque::new(),
            next_flush: 1,
            visible: Default::default(),
            copysets: FxHashMap::default(),
            inval_pending: BTreeMap::new(),
            home_flushes: FxHashMap::default(),
            next_home_flush: 1,
            served: FxHashSet::default(),
            scan_served: BTreeSet::new(),
            fault_around: Default::default(),
            fetch_ahead: ScanAhead::default(),
            write_ahead: ScanAhead::default(),
            since_release: BTreeSet::new(),
            since_barrier: BTreeSet::new(),
            since_all_nodes: BTreeSet::new(),
            partial_since: false,
            open: 0,
            refetch: BTreeSet::new(),
            migration: Default::default(),
            push: true,
            push_budgets: Default::default(),
            fresh: BTreeSet::new(),
            stats: ProtocolStats::default(),
        }
    }

    /// A page this node is home of that it never touched and nobody fetched (and that never
    /// moved: a page moved away may hold writes this node never saw).
    fn untouched_home(&self, page: PageId) -> bool {
        !self.pages.contains_key(&page)
            && !self.served.contains(&page)
            && !self.migration.moved(page)
    }

    fn page(&mut self, page: PageId) -> &mut NodePage {
        self.pages.entry(page).or_default()
    }

    fn set_access(&mut self, page: PageId, access: Access, out: &mut Vec<Action>) {
        if access != Access::Read {
            self.fresh.remove(&page);
        }
        self.page(page).access = access;
        out.push(Action::SetAccess { page, access });
    }

    /// Remembers a write for the write notices (scope).
    fn note_write(&mut self, page: PageId) {
        if self.mode == Mode::Notices {
            self.since_release.insert(page);
            self.since_barrier.insert(page);
            self.since_all_nodes.insert(page);
        }
    }

    /// A write fault (or write-ahead) made home page `page` writable.
    fn home_written(&mut self, page: PageId) {
        if self.served.contains(&page) {
            self.visible.wrote();
        }
        self.count_home_written(page);
        self.sticky.wrote(page);
    }

    /// The served home pages written since the last scan, as the page tables tell
    /// (`Context::take_scanned_writes`), count as written in this interval; called where a
    /// release or barrier arrival gathers what it announces.
    pub(super) fn take_scanned_writes(&mut self, ctx: &dyn Context) {
        if self.scan_served.is_empty() {
            return;
        }
        // Only the served pages: the others need no tracking (see `served`), and a scan
        // would protect them again, each next write then a fault of the kernel's own.
        let pages: Vec<PageId> = self.scan_served.iter().copied().collect();
        for p in ctx.take_scanned_writes(&pages) {
            self.stats.writes_scanned += 1;
            self.count_home_written(p);
        }
    }

    /// Home page `page` counts as written in this interval: the next release announces it.
    pub(super) fn count_home_written(&mut self, page: PageId) {
        self.dirty_home.insert(page);
        self.note_write(page);
    }

    /// A remote page with a valid read-only copy becomes writable: twin first.
    fn make_writable(&mut self, page: PageId, out: &mut Vec<Action>) {
        out.push(Action::MakeTwin { page });
        self.stats.twins_made += 1;
        self.visible.wrote();
        self.dirty.insert(page);
        self.note_write(page);
        self.set_access(page, Access::Write, out);
    }

    fn fetch(&mut self, ctx: &dyn Context, page: PageId, out: &mut Vec<Action>) {
        self.page(page).fetching = true;
        out.push(Action::Send {
            to: self.home_of(ctx, page),
            msg: ProtoMsg::ReadReq { page },
            attach: None,
        });
    }

    /// A write fault on home page `page`: the following read-only (write-tracked) home pages
    /// of its region become writable and written too when the faults walk them in order.
    fn write_ahead_home(&mut self, ctx: &dyn Context, page: PageId, out: &mut Vec<Action>) {
        let pages = &self.pages;
        let migration = &self.migration;
        let run = self.write_ahead.take(page, |q| {
            migration.home(ctx, q) == ctx.me()
                && ctx.same_region(page, q)
                && pages.get(&q).is_some_and(|np| np.access == Access::Read)
        });
        for q in run {
            self.home_written(q);
            self.set_access(q, Access::Write, out);
            self.stats.pages_written_ahead += 1;
        }
    }

    /// A fault fetches `page`: the fetch, plus the read-ahead of the pages after it (same
    /// home, same region, no copy here, no fetch outstanding) when the faults scan in order.
    fn fetch_for_fault(&mut self, ctx: &dyn Context, page: PageId, out: &mut Vec<Action>) {
        self.note_demand_fetch(page);
        self.fetch(ctx, page, out);
        let pages = &self.pages;
        let migration = &self.migration;
        let home = migration.home(ctx, page);
        let run = self.fetch_ahead.take(page, |q| {
            migration.home(ctx, q) == home
                && ctx.same_region(page, q)
                && pages
                    .get(&q)
                    .is_none_or(|np| np.access == Access::None && !np.fetching)
        });
        for q in run {
            self.fetch(ctx, q, out);
            self.stats.pages_read_ahead += 1;
        }
    }

    // ---------------------------------------------------------------- faults

    pub(crate) fn on_fault(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        access: Access,
        out: &mut Vec<Action>,
    ) {
        if access == Access::None {
            return;
        }
        let home_here = self.home_of(ctx, page) == ctx.me();
        // Asked before `self.page` below records the page (which makes it touched), and only
        // where fault-around could use the answer.
        let around = home_here && self.fault_around.enabled() && self.untouched_home(page);
        // A copy kept through its home's move takes no write until the new home has taken
        // the page (`home_mw_migrate.rs`): it is fetched again, after the new home's last
        // diffs of it, and the write waits for that grant even if the move is done first.
        let kept = self.migration.unconfirmed(page);
        let np = self.page(page);
        if np.access >= access {
            return; // already granted; the engine wakes the thread itself
        }
        if home_here {
            if around {
                // Fault-around: the untouched home pages around this one become writable
                // too. Nobody has fetched them, so their writes need no tracking (see
                // `served`); the faulting page's own write is noted as before.
                let mut fa = std::mem::take(&mut self.fault_around);
                let run = fa.run(ctx, page, |q| self.untouched_home(q));
                self.fault_around = fa;
                for q in run {
                    self.set_access(q, Access::Write, out);
                }
                if access == Access::Write {
                    self.home_written(page);
                }
                return;
            }
            // The master copy is here: no fetch, no twin.
            if access == Access::Write {
                self.home_written(page);
            }
            self.set_access(page, access, out);
            if access == Access::Write {
                self.write_ahead_home(ctx, page, out);
            }
            return;
        }
        match access {
            Access::Write if np.access == Access::Read && !kept && !np.fetching => {
                self.make_writable(page, out)
            }
            Access::Write => {
                np.want_write = true;
                if !np.fetching {
                    self.fetch_for_fault(ctx, page, out);
                }
            }
            _ => {
                if !np.fetching {
                    self.fetch_for_fault(ctx, page, out);
                }
            }
        }
    }

    // ---------------------------------------------------------------- messages

    pub(crate) fn on_message(
        &mut self,
        ctx: &dyn Context,
        from: NodeId,
        msg: &ProtoMsg,
        data_len: usize,
        out: &mut Vec<Action>,
    ) {
        match msg {
            // ---- home side ----
            &ProtoMsg::ReadReq { page } => {
                if self.home_of(ctx, page) != ctx.me() {
                    // Only the node a page moved to could ask, and it holds the page
                    // (`home_mw_migrate.rs`): a stray request.
                    debug_assert!(false, "ReadReq of page {page} from {from}, moved away");
                    return;
                }
                self.note_fetched(ctx, page);
                let first_serve = self.served.insert(page);
                // Asked once per page (the backend looks the address up): whether a page's
                // writes are scanned is fixed when its region is allocated.
                if first_serve && ctx.writes_scanned(page) {
                    self.scan_served.insert(page);
                }
                if first_serve && self.page(page).access == Access::Write {
                    // From now on the home's writes must be seen (see `served`). Lowered
                    // before the copy is read, so the copy holds every write so far.
                    self.set_access(page, Access::Read, out);
                    self.dirty_home.insert(page);
                }
                if self.mode == Mode::Eager {
                    self.copysets.entry(page).or_default().insert(from);
                }
                out.push(Action::Send {
                    to: from,
                    msg: ProtoMsg::Grant {
                        page,
                        access: Access::Read,
                        with_data: true,
                    },
                    attach: Some(page),
                });
            }
            ProtoMsg::Diffs {
                token,
                diffed,
                pushed,
            } => {
                if data_len > 0 {
                    out.push(Action::ApplyIncomingDiffs);
                }
                self.stats.diffs_applied += diffed.len() as u64;
                let first = msg.page();
                let reply = Reply::Remote {
                    to: from,
                    token: *token,
                    page: first,
                };
                // Diffs of a page this node handed on, sent before the writer heard of it: its
                // copy is the master copy now, and this node's copy (which takes no write
                // until the move is done) gets them too; nothing is invalidated
                // (`home_mw_migrate.rs`).
                let me = ctx.me();
                let written: Vec<PageId> = diffed
                    .iter()
                    .chain(pushed)
                    .copied()
                    .filter(|&p| self.home_of(ctx, p) == me)
                    .collect();
                self.note_written_there(ctx, &written);
                self.invalidate_others(ctx, &written, from, reply, out);
            }
            &ProtoMsg::InvalAck { page } => {
                if data_len > 0 {
                    // A writer's diff pushed before it dropped its copy.
                    out.push(Action::ApplyIncomingDiffs);
                    self.stats.diffs_applied += 1;
                }
                self.inval_acked(ctx, page, from, out);
            }
            // ---- node side ----
            &ProtoMsg::Grant { page, .. } => self.granted(ctx, page, out),
            &ProtoMsg::Inval { page } => self.invalidated(ctx, page, from, out),
            &ProtoMsg::Push { page } => self.pushed_copy(ctx, page, out),
            &ProtoMsg::HomeMoved { page, copy_kept } => {
                self.home_received(ctx, page, from, copy_kept, out)
            }
            &ProtoMsg::HomeTaken { page } => self.home_taken(page),
            &ProtoMsg::DiffAck { token, .. } => {
                if let Some(f) = self.flushes.iter_mut().find(|f| f.id == token) {
                    f.acked();
                }
                self.complete_flushes(out);
            }
            // sc-sw traffic never reaches this protocol; a stray message is ignored.
            ProtoMsg::WriteReq { .. }
            | ProtoMsg::FwdRead { .. }
            | ProtoMsg::FwdWrite { .. }
            | ProtoMsg::Done { .. }
            | ProtoMsg::FwdExclusive { .. }
            | ProtoMsg::GrantExclusive { .. }
            | ProtoMsg::ExclusiveUnused { .. }
            | ProtoMsg::ExclusiveWritten { .. }
            | ProtoMsg::Dropped { .. }
            | ProtoMsg::DropAck { .. }
            | ProtoMsg::AheadAsk { .. }
            | ProtoMsg::AheadCopy { .. } => {}
        }
    }

    /// Home side: `writer` changed `pages` (diffs applied already). sc-mw invalidates every
    /// other copy and answers once all are acknowledged; scope answers at once.
    fn invalidate_others(
        &mut self,
        ctx: &dyn Context,
        pages: &[PageId],
        writer: NodeId,
        reply: Reply,
        out: &mut Vec<Action>,
    ) {
        let key = self.next_home_flush;
        self.next_home_flush += 1;
        let mut acks = 0u32;
        if self.mode == Mode::Eager {
            for &page in pages {
                // Invalidations another flush started and that are not acknowledged yet: the
                // copies they target predate these diffs too (one may still be in flight as a
                // grant), so this flush waits for them as well.
                for (_, keys) in self
                    .inval_pending
                    .range_mut((page, 0)..=(page, NodeId::MAX))
                {
                    keys.push(key);
                    acks += 1;
                }
                let Some(cs) = self.copysets.get_mut(&page) else {
                    continue;
                };
                let targets: Vec<NodeId> = cs.iter().filter(|&n| n != writer).collect();
                for t in targets {
                    cs.remove(t);
                    self.inval_pending.entry((page, t)).or_default().push(key);
                    acks += 1;
                    out.push(Action::Send {
                        to: t,
                        msg: ProtoMsg::Inval { page },
                        attach: None,
                    });
                }
            }
            debug_assert!(
                !pages.iter().any(|&p| self.home_of(ctx, p) != ctx.me()),
                "diffs for a page homed elsewhere"
            );
        }
        if acks == 0 {
            self.home_flush_done(reply, out);
        } else {
            self.home_flushes.insert(key, HomeFlush { reply, acks });
        }
    }

    fn inval_acked(
        &mut self,
        _ctx: &dyn Context,
        page: PageId,
        from: NodeId,
        out: &mut Vec<Action>,
    ) {
        let Some(keys) = self.inval_pending.remove(&(page, from)) else {
            return; // stray acknowledgement: nothing waits for it
        };
        for key in keys {
            let Some(hf) = self.home_flushes.get_mut(&key) else {
                continue;
            };
            hf.acks -= 1;
            if hf.acks == 0 {
                let reply = hf.reply;
                self.home_flushes.remove(&key);
                self.home_flush_done(reply, out);
            }
        }
    }

    fn home_flush_done(&mut self, reply: Reply, out: &mut Vec<Action>) {
        match reply {
            Reply::Remote { to, token, page } => {
                out.push(Action::Send {
                    to,
                    msg: ProtoMsg::DiffAck { token, page },
                    attach: None,
                });
            }
            Reply::Local { id } => {
                if let Some(f) = self.flushes.iter_mut().find(|f| f.id == id) {
                    f.acked();
                }
                self.complete_flushes(out);
            }
        }
    }

    /// Node side: the home's copy arrived.
    fn granted(&mut self, ctx: &dyn Context, page: PageId, out: &mut Vec<Action>) {
        let np = self.page(page);
        if !np.fetching {
            return; // stray grant: nothing asked for it
        }
        if std::mem::take(&mut np.stale_fetch) {
            // scope: the copy may predate writes a notice told us about; ask again (the home
            // serves the new request after the writer's diffs, which were acknowledged before
            // the notice was handed out).
            self.fetch(ctx, page, out);
            return;
        }
        np.fetching = false;
        let want_write = std::mem::take(&mut np.want_write);
        out.push(Action::InstallIncoming {
            page,
            access: Access::Read,
        });
        self.page(page).access = Access::Read;
        if want_write {
            self.make_writable(page, out);
        }
    }

    /// Node side (sc-mw): the home invalidates this node's copy. A dirty copy's diff goes back
    /// with the acknowledgement so its writes survive; the page is then named at the next
    /// release.
    fn invalidated(
        &mut self,
        _ctx: &dyn Context,
        page: PageId,
        from: NodeId,
        out: &mut Vec<Action>,
    ) {
        if self.page(page).access != Access::None {
            self.stats.invalidations += 1;
            self.note_copy_lost(page);
        }
        let ack = ProtoMsg::InvalAck { page };
        if self.dirty.remove(&page) {
            self.set_access(page, Access::Read, out);
            out.push(Action::SendDiffs {
                to: from,
                msg: ack,
                pages: vec![page],
            });
            self.stats.diffs_created += 1;
            self.pushed.insert(page);
            self.set_access(page, Access::None, out);
        } else {
            if self.page(page).access != Access::None {
                self.set_access(page, Access::None, out);
            }
            out.push(Action::Send {
                to: from,
                msg: ack,
                attach: None,
            });
        }
    }

    /// Forgets the pages of a destroyed region (see `Protocol::forget`): no flush or
    /// invalidation about them is under way then, so only per-page state remains.
    pub(crate) fn forget(&mut self, pages: std::ops::Range<PageId>) -> bool {
        let gone = |p: &PageId| pages.contains(p);
        self.pages.retain(|p, _| !gone(p));
        self.dirty.retain(|p| !gone(p));
        self.dirty_home.retain(|p| !gone(p));
        self.sticky.forget(&pages);
        self.pushed.retain(|p| !gone(p));
        self.copysets.retain(|p, _| !gone(p));
        self.inval_pending.retain(|(p, _), _| !gone(p));
        self.served.retain(|p| !gone(p));
        self.scan_served.retain(|p| !gone(p));
        self.since_release.retain(|p| !gone(p));
        self.since_barrier.retain(|p| !gone(p));
        self.since_all_nodes.retain(|p| !gone(p));
        self.refetch.retain(|p| !gone(p));
        self.fresh.retain(|p| !gone(p));
        self.push_budgets.forget(&pages);
        self.migration.forget(&pages);
        true
    }

    // ---------------------------------------------------------------- diagnostics

    pub(crate) fn stats(&self) -> ProtocolStats {
        self.stats.clone()
    }

    /// Write notices this node is holding for its next release / barrier (scope).
    pub(crate) fn pending_notices(&self) -> (usize, usize) {
        (self.since_release.len(), self.since_barrier.len())
    }

    pub(crate) fn describe(&self, name: &str, page: PageId) -> String {
        let local = match self.pages.get(&page) {
            Some(np) => format!(
                "access {:?}, fetching: {}, want write: {}, stale fetch: {}, twin: {}, dirty home page: {}, sticky: {}, pushed: {}, writes scanned: {}",
                np.access,
                np.fetching,
                np.want_write,
                np.stale_fetch,
                self.dirty.contains(&page),
                self.dirty_home.contains(&page),
                self.sticky.contains(page),
                self.pushed.contains(&page),
                self.scan_served.contains(&page)
            ),
            None => "untouched here".to_string(),
        };
        let mut home = match self.copysets.get(&page) {
            Some(cs) => format!("; home: copyset {:?}", cs.iter().collect::<Vec<_>>()),
            None => String::new(),
        };
        let pushes = self.push_budgets.left(page);
        if pushes > 0 {
            home += &format!("; pushes left {pushes}");
        }
        if self.fresh.contains(&page) {
            home += "; pushed copy, fresh";
        }
        home += &self.describe_move(page);
        let waits: Vec<NodeId> = self
            .inval_pending
            .range((page, 0)..=(page, NodeId::MAX))
            .map(|(&(_, n), _)| n)
            .collect();
        let waits = if waits.is_empty() {
            String::new()
        } else {
            format!(", awaiting inval acks from {waits:?}")
        };
        let flushes = if self.flushes.is_empty() {
            String::new()
        } else {
            format!(
                "; node flushes waiting: {:?}",
                self.flushes
                    .iter()
                    .map(|f| (f.id, f.waiting, f.release.as_ref().map(|r| r.0)))
                    .collect::<Vec<_>>()
            )
        };
        format!(
            "{name} page {page}: {local}{home}{waits}{flushes}; open critical sections {}",
            self.open
        )
    }
}

#[cfg(test)]
#[path = "home_mw_push_tests.rs"]
mod push_tests;
#[cfg(test)]
#[path = "home_mw_tests.rs"]
mod tests;
