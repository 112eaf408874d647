//! sc-mw in a job of two nodes: home migration at barriers (`SVM_HOME_MIGRATION`, JIAJIA's).
//!
//! A page homed on one node and written, between two barriers, by the other node only, costs
//! that writer a twin, a diff and an acknowledged flush at every release, and the home applies
//! the diff — for every phase, although the writer's copy already holds every write. SPLASH-2
//! FFT is such a program: its master initialises the data, so first touch homes it on node 0,
//! and node 1 writes its own rows in every transpose (2.9 MB of diffs per run at p = 2).
//!
//! So at its barrier departure a home hands each page to the other node when, since its last
//! departure, the other node's diffs of it arrived and this node counted no write of it (at a
//! release or since the arrival), the other node is the only holder of a copy it knows of (its
//! copyset) and no invalidation of it is outstanding. The home sends `HomeMoved` (no data); its
//! own copy stays a read-only copy if it had one (the new home counts it in its copyset), else
//! it fetches the page from the new home like any other node.
//!
//! Why the decision is sound at the departure: every diff the other node made before its
//! arrival reached this node first (per-pair FIFO: the diffs precede the arrival, or the
//! departure when the other node is the barrier's manager; a shared-memory barrier waits for
//! the flushes' acknowledgements). The other node's copy holds every write of the page: it is
//! in the copyset, so no invalidation has taken it since it was fetched — and a fetch in
//! flight (the grant) arrives before `HomeMoved`, on the same link.
//!
//! After the departure, until `HomeMoved` arrives, the new home still acts as a writer: a
//! release may send diffs of the page to the old home, which applies them to its kept copy and
//! acknowledges them without invalidating anything (the two copies are the only ones). Such
//! diffs must not land in a copy the old home is writing: they would go back with its own
//! diff, over newer writes of the new home (the conformance suite's random programs lost
//! writes that way in a first version). So the new home answers `HomeMoved` with `HomeTaken`,
//! after which no such diff comes, and until then a write fault on the kept copy fetches the
//! page again instead of writing it: the grant follows `HomeTaken` (and the diffs) on the same
//! link. On `HomeMoved` a copy being written (a twin) keeps its writes as the master copy
//! (`DropTwin`) and counts as a written home page, so the next release invalidates the old
//! home's copy. Anything the old home writes later goes as diffs to the new home, after
//! `HomeMoved` on the same link. A page moves back when the old home becomes its only writer.
//!
//! Why only two nodes: a third node may hold a stale belief of the page's home and ask the old
//! one, which would have to forward; and with two nodes every release's diffs go to the other
//! node without waiting for its acknowledgement (`home_mw_sync.rs`), so the writer's flushes
//! are what migration saves.
//!
//! Why off by default: it homes more pages at their writers, and sc-mw can show a racy flag
//! on a page its writer is home of before a datum still in the writer's twin (SPLASH-2 fmm
//! crashed in 2 of ~80 runs with it; docs/protocols.md, "A racy program").

use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

use svm_core::protocol::{Access, Action, Context, NodeId, PageId, ProtoMsg};

use super::{HomeMw, Mode};

/// Where this node's pages moved, and what decides the next moves.
#[derive(Debug, Default)]
pub(super) struct Migration {
    /// Whether homes move (`SVM_HOME_MIGRATION`, off by default; sc-mw in a job of two nodes
    /// only).
    pub(super) on: bool,
    /// Pages whose home is not the region's (`Context::home`): the node this node knows as
    /// their home now.
    moved: FxHashMap<PageId, NodeId>,
    /// Home side: pages of this node whose diffs the other node sent since the last departure.
    written_there: BTreeSet<PageId>,
    /// Home side: pages of this node counted as written at its releases since the last
    /// departure.
    written_here: BTreeSet<PageId>,
    /// Pages this node handed on whose new home has not answered `HomeTaken` yet.
    unconfirmed: BTreeSet<PageId>,
}

impl Migration {
    /// The home of `page` as this node knows it: where it moved, else the region's.
    pub(super) fn home(&self, ctx: &dyn Context, page: PageId) -> NodeId {
        // On the fault path: no lookup while nothing moved (always, with migration off).
        if self.moved.is_empty() {
            return ctx.home(page);
        }
        match self.moved.get(&page) {
            Some(&n) => n,
            None => ctx.home(page),
        }
    }

    /// Whether `page` moved away from this node and its new home has not taken it yet.
    pub(super) fn unconfirmed(&self, page: PageId) -> bool {
        self.unconfirmed.contains(&page)
    }

    /// Whether `page` moved to or from this node.
    pub(super) fn moved(&self, page: PageId) -> bool {
        !self.moved.is_empty() && self.moved.contains_key(&page)
    }

    pub(super) fn forget(&mut self, pages: &std::ops::Range<PageId>) {
        self.moved.retain(|p, _| !pages.contains(p));
        self.written_there.retain(|p| !pages.contains(p));
        self.written_here.retain(|p| !pages.contains(p));
        self.unconfirmed.retain(|p| !pages.contains(p));
    }
}

impl HomeMw {
    pub(crate) fn set_home_migration(&mut self, on: bool) {
        self.migration.on = on;
    }

    /// The home of `page` as this node knows it: where it moved, else the region's.
    pub(super) fn home_of(&self, ctx: &dyn Context, page: PageId) -> NodeId {
        self.migration.home(ctx, page)
    }

    /// Whether homes move in this job: sc-mw, two nodes, `SVM_HOME_MIGRATION` on.
    fn migrating(&self, ctx: &dyn Context) -> bool {
        self.migration.on && self.mode == Mode::Eager && ctx.nodes() == 2
    }

    /// Home side: the other node's diffs of these pages of this node arrived.
    pub(super) fn note_written_there(&mut self, ctx: &dyn Context, pages: &[PageId]) {
        if self.migrating(ctx) {
            self.migration.written_there.extend(pages.iter().copied());
        }
    }

    /// Home side: a release counted these pages of this node as written here.
    pub(super) fn note_written_here(&mut self, ctx: &dyn Context, pages: &[PageId]) {
        if self.migrating(ctx) {
            self.migration.written_here.extend(pages.iter().copied());
        }
    }

    /// Home side, at a departure of a barrier both nodes took part in: hands the other node
    /// the pages only it wrote since the last one (see the module docs).
    pub(super) fn move_homes(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        let there = std::mem::take(&mut self.migration.written_there);
        let here = std::mem::take(&mut self.migration.written_here);
        if !self.migrating(ctx) {
            return;
        }
        let me = ctx.me();
        let other: NodeId = 1 - me;
        for page in there {
            if here.contains(&page)
                || self.dirty_home.contains(&page)
                || self.home_of(ctx, page) != me
                || !self
                    .copysets
                    .get(&page)
                    .is_some_and(|cs| cs.iter().eq([other]))
                || self
                    .inval_pending
                    .range((page, 0)..=(page, NodeId::MAX))
                    .next()
                    .is_some()
            {
                continue;
            }
            let access = self.pages.get(&page).map_or(Access::None, |np| np.access);
            if access == Access::Write {
                // Writable here means written here (or never lowered): not only the other's.
                continue;
            }
            self.copysets.remove(&page);
            self.served.remove(&page);
            self.sticky.forget(&(page..page + 1));
            self.push_budgets.forget(&(page..page + 1));
            self.migration.moved.insert(page, other);
            self.migration.unconfirmed.insert(page);
            self.stats.homes_moved += 1;
            out.push(Action::Send {
                to: other,
                msg: ProtoMsg::HomeMoved {
                    page,
                    copy_kept: access == Access::Read,
                },
                attach: None,
            });
        }
    }

    /// Node side: `from`, the home of `page` until now, handed it to this node.
    pub(super) fn home_received(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        from: NodeId,
        copy_kept: bool,
        out: &mut Vec<Action>,
    ) {
        let holds = self
            .pages
            .get(&page)
            .is_some_and(|np| np.access != Access::None && !np.fetching);
        if self.mode != Mode::Eager || self.home_of(ctx, page) != from || !holds {
            // Not from the home, or no copy to be the master: the old home only moves a page
            // whose copy it knows is here, so this is a stray message; it is ignored.
            debug_assert!(false, "HomeMoved of page {page} from {from} not expected");
            return;
        }
        self.migration.moved.insert(page, ctx.me());
        // The old home holds or may fetch a copy: its writes must be seen from now on.
        self.served.insert(page);
        if copy_kept {
            self.copysets.entry(page).or_default().insert(from);
        }
        if self.dirty.remove(&page) {
            // Written since the departure: those writes are the master copy's now, and the
            // next release invalidates the old home's copy.
            out.push(Action::DropTwin { page });
            self.count_home_written(page);
        }
        if self.pushed.remove(&page) {
            self.count_home_written(page);
        }
        out.push(Action::Send {
            to: from,
            msg: ProtoMsg::HomeTaken { page },
            attach: None,
        });
    }

    /// Old home: the new home took `page`; no diff of it comes here any more.
    pub(super) fn home_taken(&mut self, page: PageId) {
        self.migration.unconfirmed.remove(&page);
    }

    /// A page moved to or from this node, for `describe`.
    pub(super) fn describe_move(&self, page: PageId) -> String {
        match self.migration.moved.get(&page) {
            Some(n) => format!("; home moved, now node {n}"),
            None => String::new(),
        }
    }
}
