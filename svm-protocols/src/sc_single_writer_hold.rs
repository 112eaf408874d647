//! sc-sw's minimum hold (`SVM_HOLD_US`): see [`Holds`].

use std::collections::VecDeque;

use svm_core::protocol::{Action, Context, NodeId, PageId, ProtoMsg};

use super::ScSingleWriter;

/// The minimum hold (after Mirage's time window Δ, Fleisch & Popek, SOSP 1989): a node that
/// regains write access to a page another node took from it since its last release keeps the
/// page for `hold_ns` before it gives it up again, so pages that two nodes write between two
/// synchronisations (radix's key arrays, the blocks of a non-contiguous LU) move in batches
/// of writes instead of once per write. Requests for a held page wait: a forwarded request at
/// the owner (`deferred`), a request at a manager that owns the page itself in its queue.
/// A release or barrier arrival of the holder ends every hold at once, so data published by
/// a synchronisation is never kept back; so does a fault of the holder that must wait for
/// another node (holding pages while its thread cannot use them would only keep the nodes
/// waiting for each other). No hold outlives `hold_ns`: sequential consistency only depends
/// on the order in which copies move, never on when.
#[derive(Debug, Default)]
pub(super) struct Holds {
    /// How long a hold lasts (ns on the clock of `Context::now`); 0 = holds off.
    pub(super) hold_ns: u64,
    /// Held pages and when each hold ends, in the order the holds began (so also in the
    /// order they end: every hold lasts `hold_ns`).
    pub(super) until: VecDeque<(u64, PageId)>,
    /// Forwarded requests for held pages, with their sender, in arrival order.
    pub(super) deferred: Vec<(NodeId, ProtoMsg)>,
}

impl Holds {
    pub(super) fn is_held(&self, page: PageId, now: u64) -> bool {
        self.until.iter().any(|&(t, p)| p == page && t > now)
    }
}

impl ScSingleWriter {
    /// Another node took this node's access to `page` (see `NodePage::lost_in`).
    pub(super) fn access_taken(&mut self, ctx: &dyn Context, page: PageId) {
        let epoch = self.epoch;
        self.node_page(ctx, page).lost_in = Some(epoch);
    }

    /// This node just got write access to `page`: if another node took the page from it
    /// since its last release, hold it (see [`Holds`]).
    pub(super) fn maybe_hold(&mut self, ctx: &dyn Context, page: PageId) {
        let epoch = self.epoch;
        if self.holds.hold_ns == 0 || self.node_page(ctx, page).lost_in != Some(epoch) {
            return;
        }
        let until = ctx.now().saturating_add(self.holds.hold_ns);
        self.holds.until.push_back((until, page));
    }

    /// The holds of `ended` are over: the requests that waited for them go on, in the order
    /// they came (requests for pages still held wait on).
    pub(super) fn resume_held(
        &mut self,
        ctx: &dyn Context,
        ended: &[PageId],
        out: &mut Vec<Action>,
    ) {
        let now = ctx.now();
        let (go, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.holds.deferred)
            .into_iter()
            .partition(|(_, msg)| !self.holds.is_held(msg.page(), now));
        self.holds.deferred = wait;
        for (from, msg) in go {
            self.handle(ctx, from, &msg, out);
        }
        for &page in ended {
            if ctx.home(page) == ctx.me() && !self.holds.is_held(page, now) {
                self.mgr_advance(ctx, page, out);
            }
        }
        self.drain_local(ctx, out);
    }

    /// A release or barrier arrival of this node: a new release epoch, and every hold ends.
    pub(super) fn end_holds(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        // The pages that waited leave before the epoch turns: taken before the release.
        self.end_holds_now(ctx, out);
        self.epoch += 1;
    }

    /// Every hold ends now (the release epoch stays).
    pub(super) fn end_holds_now(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        if self.holds.until.is_empty() {
            return;
        }
        let ended: Vec<PageId> = self.holds.until.drain(..).map(|(_, p)| p).collect();
        self.resume_held(ctx, &ended, out);
    }

    /// The holds due by `ctx.now()` end (the engine's timer, [`ScSingleWriter::next_timer`]).
    pub(super) fn end_due_holds(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        let now = ctx.now();
        let mut ended = Vec::new();
        while let Some(&(t, page)) = self.holds.until.front() {
            if t > now {
                break;
            }
            self.holds.until.pop_front();
            ended.push(page);
        }
        self.resume_held(ctx, &ended, out);
    }
}
