//! sc-mw and scope in a job of two nodes: at its barrier arrival (scope: at the global
//! barrier) a home sends the other node, unasked, the pages it wrote in the phase that the
//! other node keeps fetching (a stencil's boundary rows), and the other node keeps such a copy
//! (scope: through the barrier's write notices) instead of fetching it again at the departure.
//!
//! Why: the reader's fetch after the barrier (`refetch`, or a fault) asks a home that is
//! computing again by then, whose engine must be woken beside the computing thread to answer
//! (Laplace at 2 nodes: 55 µs per boundary-row fault after the first barrier of an iteration,
//! nearly a round trip, on the critical path of the row the reader computes first). At the
//! home's arrival its engine is awake and the page final for the phase.
//!
//! scope, why only two nodes: then every write notice the reader gets names a write of the home
//! itself or of the reader, and everything the home tells the reader travels on one link
//! (per-pair FIFO). The push leaves after the home's writes of the phase and before its
//! barrier arrival, so at the departure the pushed copy holds every write the barrier's
//! notices for the page stand for. The reader's own writes: a copy it is writing (a twin) or
//! whose diffs are not acknowledged yet is never replaced; once they are acknowledged the
//! home has applied them, before it sent anything that arrives after the acknowledgement.
//! A notice that arrives after the push (a lock the home's threads released later) drops the
//! copy as usual. With a third node, a notice could stand for its writes, which the pushed
//! copy may lack.
//!
//! sc-mw (at every barrier, a job of two nodes): the home's flush has just invalidated the
//! other node's copy (`Inval`), and the push follows on the same link, so the other node drops
//! its old copy first and then installs the new one; the home counts it in the copyset again,
//! so its next write invalidates it as usual. No notices to survive. A copy being written
//! when invalidated sends its diff back with the acknowledgement (`pushed`): until a release
//! has named that diff and the home has acknowledged it, no push replaces the copy.
//!
//! Which pages: a fetch by the reader gives the page a budget of [`PUSH_BUDGET`] pushes; each
//! push uses one. A fetch after the budget ran out (the reader kept reading the page, and had
//! to fetch it) doubles the next one, up to [`PUSH_BUDGET_MAX`]. A page the reader stopped
//! reading costs at most one budget of needless pushes.

use rustc_hash::FxHashMap;

use svm_core::protocol::{Access, Action, Context, NodeId, PageId, ProtoMsg};

use super::{HomeMw, Mode};
use crate::budget::Budget;

/// Pushes a fetch earns, at first.
pub(super) const PUSH_BUDGET: u8 = 8;

/// The most a fetch earns (see the module docs).
pub(super) const PUSH_BUDGET_MAX: u8 = 128;

/// Home side: the other node's push budget of each page this node is home of.
#[derive(Debug, Default)]
pub(super) struct PushBudgets {
    pages: FxHashMap<PageId, Budget>,
}

impl PushBudgets {
    pub(super) fn forget(&mut self, pages: &std::ops::Range<PageId>) {
        self.pages.retain(|p, _| !pages.contains(p));
    }

    pub(super) fn left(&self, page: PageId) -> u8 {
        self.pages.get(&page).map_or(0, Budget::left)
    }
}

impl HomeMw {
    /// Whether this node pushes and accepts pushes: in a job of two nodes, unless
    /// `SVM_PUSH=0`.
    pub(super) fn pushing(&self, ctx: &dyn Context) -> bool {
        self.push && ctx.nodes() == 2
    }

    /// Home side: the other node fetched `page`.
    pub(super) fn note_fetched(&mut self, ctx: &dyn Context, page: PageId) {
        if !self.pushing(ctx) {
            return;
        }
        let b = self.push_budgets.pages.entry(page).or_default();
        b.earn(PUSH_BUDGET, PUSH_BUDGET_MAX);
    }

    /// Home side, at this node's barrier arrival (after its writes were stopped, before the
    /// arrival leaves): pushes the pages of `written` it is home of that have budget.
    pub(super) fn push_written(
        &mut self,
        ctx: &dyn Context,
        written: &[PageId],
        out: &mut Vec<Action>,
    ) {
        if !self.pushing(ctx) {
            return;
        }
        let me = ctx.me();
        let other: NodeId = 1 - me;
        for &page in written {
            if self.home_of(ctx, page) != me {
                continue;
            }
            if !self
                .push_budgets
                .pages
                .get_mut(&page)
                .is_some_and(Budget::take)
            {
                continue;
            }
            self.stats.pages_pushed += 1;
            if self.mode == Mode::Eager {
                // The other node holds a copy again: the next write here invalidates it.
                self.copysets.entry(page).or_default().insert(other);
            }
            out.push(Action::Send {
                to: other,
                msg: ProtoMsg::Push { page },
                attach: Some(page),
            });
        }
    }

    /// Reader side: the home pushed `page`. Installed as a read copy unless this node asked
    /// for the page (the grant is on its way), is writing it, or has diffs of it that the home
    /// has not acknowledged (the pushed copy may lack them; sc-mw: also diffs that went back
    /// with an invalidation's acknowledgement, `pushed`).
    pub(super) fn pushed_copy(&mut self, ctx: &dyn Context, page: PageId, out: &mut Vec<Action>) {
        if !self.pushing(ctx) || self.home_of(ctx, page) == ctx.me() {
            return;
        }
        let unacked = self.pushed.contains(&page)
            || self
                .flushes
                .iter()
                .any(|f| f.waiting > 0 && f.diffed.binary_search(&page).is_ok());
        let np = self.page(page);
        if np.fetching || np.access == Access::Write || unacked {
            return;
        }
        out.push(Action::InstallIncoming {
            page,
            access: Access::Read,
        });
        self.page(page).access = Access::Read;
        if self.mode == Mode::Notices {
            self.fresh.insert(page);
        }
    }
}
