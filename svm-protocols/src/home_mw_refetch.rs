//! sc-mw and scope: copies a node keeps reading are fetched again at the barrier departure
//! after which they were invalidated, instead of at the first read of the next phase.
//!
//! A stencil's reader loses its copy of the neighbour's boundary row at every barrier (sc-mw:
//! the home invalidates it before its release completes; scope: the write notices of the
//! barrier) and faults on it in the middle of the next phase, where the home's engine has to
//! wake up beside a computing thread to answer (Laplace at 2 nodes: ~450 such faults per
//! boundary page and run, ~120 µs each). Asking at the departure overlaps the fetch with the
//! phase's first rows. The fetch is an ordinary read request: the copy it brings is as valid as
//! one a fault would have fetched at that moment, for either protocol's guarantees.
//!
//! Which pages: a demand fault (the node reads the page) gives the page a budget of
//! [`REFETCH_BUDGET`] fetches at departures after invalidations; each one uses one. A read
//! fault on a page whose budget ran out (still read, so each refetch was used) doubles the
//! next budget, up to [`REFETCH_BUDGET_MAX`]. A page the node stopped reading costs at most
//! one budget of needless fetches; a steady one a fault per budget.

use svm_core::protocol::{Access, Action, Context, PageId};

use super::HomeMw;

/// Fetches at departures a demand fault earns, at first.
pub(super) const REFETCH_BUDGET: u8 = 8;

/// The most a demand fault earns (see the module docs).
pub(super) const REFETCH_BUDGET_MAX: u8 = 128;

impl HomeMw {
    /// A fault makes this node fetch `page`: it reads the page, so refetches of it are used.
    pub(super) fn note_demand_fetch(&mut self, page: PageId) {
        let r = &mut self.page(page).refetch;
        r.earn(REFETCH_BUDGET, REFETCH_BUDGET_MAX);
    }

    /// This node's read copy of `page` was just invalidated.
    pub(super) fn note_copy_lost(&mut self, page: PageId) {
        if self.page(page).refetch.left() > 0 {
            self.refetch.insert(page);
        }
    }

    /// At a barrier departure: fetches the pages invalidated since the last one that still
    /// have budget, unless a copy is here or on its way already.
    pub(super) fn refetch_lost(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        for page in std::mem::take(&mut self.refetch) {
            let np = self.page(page);
            if np.access != Access::None || np.fetching || !np.refetch.take() {
                continue;
            }
            self.fetch(ctx, page, out);
            self.stats.pages_read_ahead += 1;
        }
    }
}
