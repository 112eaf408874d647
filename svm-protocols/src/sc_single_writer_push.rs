//! sc-sw's producer–consumer push: at its barrier arrival, a home sends a read copy of each
//! page it wrote since its last barrier to the nodes that asked to read that page before
//! (its *consumers*), so their reads after the barrier find the page (a stencil's boundary
//! rows: one read fault per page and iteration saved).
//!
//! Each push is exactly a read grant the manager could have made on request at that moment:
//! the home lowers its own access to read before it reads the page into the grants, adds the
//! consumers to the copyset, and the next write anywhere invalidates them as usual — so
//! sequential consistency holds as for any read grant (the consumer installs it like a
//! read-ahead grant, see `install_grant`). Only pages homed and owned by the writer, with no
//! operation under way or queued, never written by another node and never read by another
//! node between two synchronisations of the home in which the home wrote it (a grid updated
//! in place, red-black Laplace: its readers need the page within the phase anyway, and a push
//! would only be invalidated by the home's next write), are pushed.
//!
//! A consumer gets [`PUSH_BUDGET`] pushes per read request at first. When it asks again after
//! its budget ran out (it still reads the page: the budget cost it a fault, and the home's
//! next write an invalidation of the copy it kept), its next budget is twice the last, up to
//! [`PUSH_BUDGET_MAX`]. A consumer that stopped reading the page costs at most one budget of
//! needless copies, and a steady one a fault per budget: each budget is as large as the
//! pushes that were used before it, so at most half the pushes are needless.

use svm_core::protocol::{Access, Action, Context, NodeId, PageId, ProtoMsg};

use super::ScSingleWriter;

/// Pushes to a page's consumers per read request of theirs, at first.
pub(super) const PUSH_BUDGET: u8 = 8;

/// The most pushes a read request earns (see the module docs).
pub(super) const PUSH_BUDGET_MAX: u8 = 128;

impl ScSingleWriter {
    /// The manager granted `reader` a read copy it asked for: it consumes the page.
    pub(super) fn note_consumer(&mut self, ctx: &dyn Context, page: PageId, reader: NodeId) {
        if !self.push || reader == ctx.me() {
            return;
        }
        let epoch = self.epoch;
        let m = self.managed_page(ctx, page);
        // Read after the home wrote it in the same epoch (only this order: a read request
        // that reaches the home late, after its next barrier arrival, comes before the home's
        // write of that epoch in a stencil that alternates two grids).
        m.no_push |= m.written_epoch == Some(epoch);
        if m.no_push {
            m.consumers.clear();
            return;
        }
        m.consumers.insert(reader);
        m.push.earn(PUSH_BUDGET, PUSH_BUDGET_MAX);
    }

    /// This node got write access to `page`: if it is the page's home and the page has
    /// consumers, push it at the next barrier arrival.
    pub(super) fn note_written(&mut self, ctx: &dyn Context, page: PageId) {
        if !self.push || ctx.home(page) != ctx.me() {
            return;
        }
        let epoch = self.epoch;
        let Some(m) = self.managed.get_mut(&page) else {
            return;
        };
        m.written_epoch = Some(epoch);
        if !m.no_push && !m.consumers.is_empty() && !m.written_remotely {
            self.to_push.insert(page);
        }
    }

    /// At this node's barrier arrival: sends read copies of the pages it wrote to their
    /// consumers (see the module docs).
    pub(super) fn push_written(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        let me = ctx.me();
        for page in std::mem::take(&mut self.to_push) {
            let Some(m) = self.managed.get_mut(&page) else {
                continue;
            };
            // Held exclusively (a migratory page, a paired write not yet used): a write here
            // takes write access without a message, so no other copy may exist.
            let exclusive = self.pages.get(&page).is_some_and(|np| np.exclusive);
            if m.owner != me
                || m.busy.is_some()
                || !m.queue.is_empty()
                || m.written_remotely
                || exclusive
            {
                continue;
            }
            let targets: Vec<NodeId> = m
                .consumers
                .iter()
                .filter(|&r| r != me && !m.copyset.contains(r))
                .collect();
            if targets.is_empty() {
                continue;
            }
            m.push.take();
            if m.push.left() == 0 {
                m.consumers.clear();
            }
            for &r in &targets {
                m.copyset.insert(r);
            }
            // Stop local writes before the contents are read into the grants.
            if self.node_page(ctx, page).access == Access::Write {
                self.set_access(ctx, page, Access::Read, out);
            }
            for r in targets {
                self.send(ctx, r, ProtoMsg::Push { page }, Some(page), out);
                self.stats.pages_pushed += 1;
            }
        }
    }

    /// A push from `page`'s home: installed as an unasked read grant (which `install_grant`
    /// discards while this node's drop of an earlier copy is unanswered: the home sent it
    /// before it took the node out of the copyset).
    pub(super) fn install_push(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        from: NodeId,
        out: &mut Vec<Action>,
    ) {
        let had = self.node_page(ctx, page).access;
        self.install_grant(ctx, page, Access::Read, true, false, from, out);
        let np = self.node_page(ctx, page);
        if had == Access::None && np.access == Access::Read {
            np.pushed_copy = true;
            if np.drop_after_use {
                self.drop_after_next.insert(page);
            }
        }
    }

    /// A read copy granted to this node (asked for, or read ahead) of a page whose copies it
    /// drops after use: dropped at the barrier arrival that ends this phase, like a pushed
    /// copy after its phase (a consumer whose pushes ran out fetches the page itself, and
    /// that copy would otherwise cost the home's next write an invalidation).
    pub(super) fn note_fetched_copy(&mut self, ctx: &dyn Context, page: PageId) {
        let np = self.node_page(ctx, page);
        if np.drop_after_use && np.access == Access::Read && !np.is_owner && !np.exclusive {
            self.drop_at_arrival.insert(page);
        }
    }

    /// At this node's barrier arrival: drops the copies it has had through their phase of
    /// use (`drop_at_arrival`), telling their homes, so the homes' next writes need no
    /// invalidation. A copy the node owns or holds with a request under way is kept.
    pub(super) fn drop_consumed(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        for page in std::mem::take(&mut self.drop_at_arrival) {
            let Some(np) = self.pages.get_mut(&page) else {
                continue;
            };
            let droppable = np.access == Access::Read
                && !np.is_owner
                && !np.exclusive
                && np.outstanding.is_none()
                && !np.drop_pending;
            if !droppable {
                continue;
            }
            np.drop_pending = true;
            np.pushed_copy = false;
            np.dropped_at = Some(self.arrivals);
            self.set_access(ctx, page, Access::None, out);
            self.stats.copies_dropped += 1;
            self.send(ctx, ctx.home(page), ProtoMsg::Dropped { page }, None, out);
        }
    }

    /// Manager: `from` dropped its copy of `page`.
    pub(super) fn mgr_dropped(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        from: NodeId,
        out: &mut Vec<Action>,
    ) {
        let m = self.managed_page(ctx, page);
        if m.owner != from {
            m.copyset.remove(from);
        }
        self.send(ctx, from, ProtoMsg::DropAck { page }, None, out);
    }
}
