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

use std::collections::BTreeSet;

use svm_core::protocol::{Access, Action, Context, NodeId, PageId, ProtoMsg};

use super::ScSingleWriter;

/// Pushes to a page's consumers per read request of theirs, at first.
pub(super) const PUSH_BUDGET: u8 = 8;

/// The most pushes a read request earns (see the module docs).
pub(super) const PUSH_BUDGET_MAX: u8 = 128;

/// Pushes of pages taken back and found unchanged that still count for the rhythm, per push
/// after a write that kept it, at first (`ScSingleWriter::regain_dropped`).
pub(super) const UNCHANGED_REGAINS: u8 = 8;

/// The most such pushes one earns.
pub(super) const UNCHANGED_REGAINS_MAX: u8 = 128;

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
        self.note_written_in(ctx, page, self.epoch);
    }

    /// [`ScSingleWriter::note_written`] for a write made in release epoch `epoch`.
    fn note_written_in(&mut self, ctx: &dyn Context, page: PageId, epoch: u64) {
        if !self.push || ctx.home(page) != ctx.me() {
            return;
        }
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
        // Pages taken back writable at the last departure (`regain_dropped`): counted written
        // in the phase that just ended (the epoch before the arrival's); the push of one that
        // did not change does not count for the rhythm that takes it back.
        let mut unchanged = BTreeSet::new();
        for (page, digest) in std::mem::take(&mut self.regained) {
            if !self.regained_changed(ctx, page, digest) {
                unchanged.insert(page);
            }
            self.note_written_in(ctx, page, self.epoch.saturating_sub(1));
        }
        for page in std::mem::take(&mut self.to_push) {
            let Some(m) = self.managed.get_mut(&page) else {
                continue;
            };
            // Held exclusively (a migratory page, a paired write not yet used): a write here
            // takes write access without a message, so no other copy may exist.
            let exclusive = self.pages.get(&page).is_some_and(|np| np.exclusive);
            if !m.pushable_by(me) || exclusive {
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
            let now = self.arrivals;
            if !unchanged.contains(&page) {
                m.pushed_at = [m.pushed_at[1], Some(now)];
                if m.pushed_at == [now.checked_sub(2), Some(now)] {
                    m.unchanged_regains
                        .earn(UNCHANGED_REGAINS, UNCHANGED_REGAINS_MAX);
                }
            } else if m.unchanged_regains.take() {
                m.pushed_at = [m.pushed_at[1], Some(now)];
            }
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
        if self.regain_candidate(ctx, page) {
            self.regain_at_depart.insert(page);
        }
        self.send(ctx, from, ProtoMsg::DropAck { page }, None, out);
    }

    /// Whether this node could take write access to `page` without a fault: it is the
    /// page's home and owner, holds it read-only only because it pushed copies that are all
    /// dropped now (no other copy, nothing under way or queued), and still pushes it.
    fn regain_candidate(&self, ctx: &dyn Context, page: PageId) -> bool {
        let me = ctx.me();
        if !self.push || ctx.home(page) != me {
            return false;
        }
        let Some(m) = self.managed.get(&page) else {
            return false;
        };
        let idle_pushed =
            m.pushable_by(me) && m.copyset.is_empty() && !m.no_push && !m.consumers.is_empty();
        idle_pushed
            && self.pages.get(&page).is_some_and(|np| {
                np.access == Access::Read
                    && np.is_owner
                    && !np.exclusive
                    && !np.paired
                    && np.outstanding.is_none()
            })
    }

    /// At this node's barrier departure: takes write access to the pushed pages whose copies
    /// were all dropped since (`mgr_dropped`) and that the home writes every other phase — a
    /// stencil's boundary row of the grid written in the phase beginning now — as the write
    /// fault it expects would: the write costs no fault, nor the engine's wake-up for it (on
    /// a CPU shared with another node's computation that wake-up waited 100–150 µs: Jacobi at
    /// 4 nodes on 2 CPUs). Which pages: the last two pushes were two arrivals apart, the last
    /// at the arrival before this departure. Such a page counts as written in the phase and is
    /// pushed at the next arrival. Whether the home wrote it is not seen without the fault;
    /// its contents tell a change (`Context::page_digest`). The push of a page that did not
    /// change (not written, or written with the values it had, as Jacobi's rows that the heat
    /// has not reached yet) counts for the rhythm only while the page's allowance lasts:
    /// [`UNCHANGED_REGAINS`] such pushes, earned by a push after a write (a fault or a change)
    /// that is two arrivals after the one before, twice the last when earned after it ran
    /// out, up to [`UNCHANGED_REGAINS_MAX`]. A page the home stopped writing costs at most one
    /// allowance of needless pushes; then its drops leave it to write faults until two pushes
    /// after writes show the rhythm again. A drop that arrives after the departure leaves its
    /// page to the next departure (a write fault meanwhile takes it as before); without
    /// digests (a context without page contents) nothing is taken back.
    pub(super) fn regain_dropped(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        let now = self.arrivals;
        for page in std::mem::take(&mut self.regain_at_depart) {
            if !self.regain_candidate(ctx, page) {
                continue;
            }
            let every_other_phase = self.managed.get(&page).is_some_and(|m| {
                m.pushed_at == [now.checked_sub(3), now.checked_sub(1)] && now >= 3
            });
            if !every_other_phase {
                continue;
            }
            // Read-only here until the action below runs: the digest is of the contents pushed.
            let Some(digest) = ctx.page_digest(page) else {
                continue;
            };
            self.set_access(ctx, page, Access::Write, out);
            self.regained.insert(page, digest);
            self.stats.pages_written_ahead += 1;
        }
    }

    /// Whether the page taken back writable with contents of `digest` changed since (a page
    /// that lost write access or ownership meanwhile counts as unchanged).
    fn regained_changed(&self, ctx: &dyn Context, page: PageId, digest: u64) -> bool {
        let writable = self
            .pages
            .get(&page)
            .is_some_and(|np| np.access == Access::Write && np.is_owner);
        writable && ctx.page_digest(page) != Some(digest)
    }

    /// Manager: another node asks for `page`, which this node took back writable: a change
    /// so far counts as a write in this epoch (a read request then learns the page is read
    /// while written, `note_consumer`), and write tracking is back to faults.
    pub(super) fn regained_seen(&mut self, ctx: &dyn Context, page: PageId) {
        let Some(digest) = self.regained.remove(&page) else {
            return;
        };
        if self.regained_changed(ctx, page, digest) {
            self.note_written(ctx, page);
        }
    }
}
