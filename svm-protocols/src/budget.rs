//! A per-page budget of things a node does unasked for another (a home's pushes of a page to
//! its readers, a reader's fetches of a page at barrier departures), shared by sc-sw
//! (`sc_single_writer_push.rs`) and the home-based protocols (`home_mw_push.rs`,
//! `home_mw_refetch.rs`): each use of the page earns a budget, and a use after the budget ran
//! out earns twice the last, so at most half of what is done unasked goes unused.

/// One page's budget: a use of the page earns `first` things done unasked; a use after the
/// budget ran out (it was all used, and the page still is) earns twice the last, up to `max`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Budget {
    /// Left to do.
    left: u8,
    /// What the next use earns (0: never used).
    refill: u8,
}

impl Budget {
    /// The page was used: a fresh budget.
    pub(crate) fn earn(&mut self, first: u8, max: u8) {
        self.refill = match self.refill {
            0 => first,
            n if self.left == 0 => n.saturating_mul(2).min(max),
            n => n,
        };
        self.left = self.refill;
    }

    /// Takes one from the budget; false when none is left.
    pub(crate) fn take(&mut self) -> bool {
        let had = self.left > 0;
        self.left = self.left.saturating_sub(1);
        had
    }

    pub(crate) fn left(&self) -> u8 {
        self.left
    }
}
