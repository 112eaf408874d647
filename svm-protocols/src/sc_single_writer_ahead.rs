//! sc-sw's read-ahead: when a node's read requests walk a region's pages in order, it gets
//! read copies of the following pages in the same breath, without a request of its own.
//!
//! Two senders, one window:
//! - **The manager sends** the pages it owns itself (`read_ahead`): exactly the read grants
//!   it could have made on request, the reader entered in their copysets as it sends them.
//! - **The owner sends, to the manager** (`ask_owner_ahead`, `send_ahead_copies`,
//!   `take_ahead_copy`): when the reader is the pages' manager but another node owns them —
//!   what every node but the allocating one wrote last, e.g. the rows another process of a
//!   SPLASH-2 program wrote in a block allocated by `main` — the manager forwards the read of
//!   the faulting page to the owner as usual and asks it, right behind, for copies of the
//!   following pages (`ProtoMsg::AheadAsk`) — never of pages a second node took from their
//!   first writer for a write, nor of one whose copy taken ahead was invalidated before this
//!   node read it: a copy would take write access from a node about to write the page
//!   again. The owner sends each that it owns and can share
//!   (`ProtoMsg::AheadCopy`), lowered to read-only first, as for a forwarded read. The
//!   manager takes a copy only if nothing happened to the page since it asked: the sender is
//!   still the owner, no operation is under way or queued, and this node neither holds nor
//!   asked for the page; then it enters itself in the copyset, exactly the state a forwarded
//!   read would have left. Per-pair FIFO makes the check sufficient: anything that moved the
//!   page away from the owner went through this manager, and any later request of the owner
//!   itself for the page comes behind the copy on the same link. A copy refused changes
//!   nothing but the owner's access (read-only: its next write asks the manager, who finds
//!   no copy to invalidate). Only the manager can be such a reader: another reader could
//!   install the copy after the manager's invalidation for a write had reached it.
//!
//! How many pages: a window per reader at the manager that starts at 2, doubles on every
//! request that continues a stream (the reader went past the pages sent ahead: they were
//! used), up to `SVM_PREFETCH`, and halves whenever a page sent ahead is invalidated before the
//! reader went past it; such a page is not sent ahead again until the reader asks for it
//! itself.

use svm_core::protocol::{Access, Action, Context, NodeId, PageId, ProtoMsg};

use super::ScSingleWriter;

/// The manager's read-ahead state for one reader.
#[derive(Debug, Clone, Default)]
pub(super) struct Stream {
    /// The page after the last one the reader was granted: a read request for exactly that
    /// page continues a sequential stream (the reader went through the pages sent ahead).
    pub(super) next: PageId,
    /// Pages to send ahead at the next sequential request: doubles on every sequential
    /// request (up to the configured maximum), halves whenever a page sent ahead is
    /// invalidated before the stream went past it (it was sent for nothing).
    pub(super) window: usize,
    /// Pages sent ahead the stream has not gone past yet.
    pub(super) unconfirmed: Vec<PageId>,
}

impl ScSingleWriter {
    /// Manager: `reader` asked to read `page`. How many pages after it to send ahead: the
    /// reader's window if the request continues its stream, else none.
    fn ahead_window(&mut self, page: PageId, reader: NodeId) -> usize {
        if let Some(m) = self.managed.get_mut(&page) {
            m.ahead_wasted = false; // asked for: send it ahead again when it fits
        }
        let max = self.prefetch;
        let st = self.streams.entry(reader).or_insert_with(|| Stream {
            next: PageId::MAX,
            window: max.min(2),
            unconfirmed: Vec::new(),
        });
        if st.next != page {
            return 0;
        }
        // The reader went past what was sent ahead on this stream (the pages just before
        // this one): it was used. Pages sent ahead on other streams stay unconfirmed.
        st.unconfirmed
            .retain(|&q| !(q < page && page - q <= max as PageId));
        st.window = (st.window * 2).clamp(1, max);
        st.window
    }

    /// Manager: the pages `page + 1 .. next` go ahead to `reader` (none if `next` is
    /// `page + 1`); its stream continues at `next`.
    fn ahead_sent(&mut self, page: PageId, next: PageId, reader: NodeId) {
        if let Some(st) = self.streams.get_mut(&reader) {
            st.unconfirmed.extend(page + 1..next);
            st.next = next;
        }
    }

    /// The end of the run of pages after `page`, at most `window` of them, that this node
    /// manages, in `page`'s region, and that `eligible` takes: the page after the run's last.
    fn ahead_run(
        &self,
        ctx: &dyn Context,
        page: PageId,
        window: usize,
        eligible: impl Fn(&Self, PageId) -> bool,
    ) -> PageId {
        let me = ctx.me();
        let mut next = page + 1;
        for q in page + 1..=page + window as PageId {
            if ctx.home(q) != me || !ctx.same_region(page, q) || !eligible(self, q) {
                break;
            }
            next = q + 1;
        }
        next
    }

    /// Grants `reader` read copies of the pages after `page` while its requests form a
    /// sequential stream: pages homed and owned here, with no operation under way or queued,
    /// that `reader` does not hold yet and that are not write-shared. Each is exactly a read
    /// grant the manager could have made on request, so the protocol's invariants hold; the
    /// node takes an unasked grant like any other (see `install_grant`). How many: the
    /// reader's window (see [`Stream`]).
    pub(super) fn read_ahead(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        reader: NodeId,
        out: &mut Vec<Action>,
    ) {
        if self.prefetch == 0 {
            return;
        }
        let me = ctx.me();
        let window = self.ahead_window(page, reader);
        let next = self.ahead_run(ctx, page, window, |s, q| {
            let idle = s.managed.get(&q).is_none_or(|m| {
                m.owner == me
                    && m.busy.is_none()
                    && m.queue.is_empty()
                    && !m.copyset.contains(reader)
                    && !m.written_remotely
                    && !m.ahead_wasted
            });
            idle && !s.pages.get(&q).is_some_and(|np| np.exclusive)
        });
        for q in page + 1..next {
            if self.node_page(ctx, q).access == Access::Write {
                self.set_access(ctx, q, Access::Read, out);
            }
            let grant = ProtoMsg::Grant {
                page: q,
                access: Access::Read,
                with_data: true,
            };
            self.send(ctx, reader, grant, Some(q), out);
            self.managed_page(ctx, q).copyset.insert(reader);
        }
        self.ahead_sent(page, next, reader);
    }

    /// Manager (`me`): whether a read copy of `page` from `owner` is exactly what a read of
    /// this node forwarded to `owner` now would bring — by this node's view `owner` owns the
    /// page, no operation on it is under way or queued, and this node neither counts itself a
    /// reader nor holds the page nor has asked for it. Checked when asking ahead and again
    /// when the copy arrives (see the module docs).
    fn owner_copy_fits(&self, page: PageId, owner: NodeId, me: NodeId) -> bool {
        let unchanged = self.managed.get(&page).is_some_and(|m| {
            m.owner == owner && m.busy.is_none() && m.queue.is_empty() && !m.copyset.contains(me)
        });
        unchanged
            && self.pages.get(&page).is_some_and(|np| {
                !np.is_owner
                    && np.access == Access::None
                    && np.outstanding.is_none()
                    && !np.drop_pending
            })
    }

    /// Manager and reader: this node's read of `page` was just forwarded to its `owner`. If
    /// the read continues this node's stream, asks the owner for copies of the following
    /// pages it owns too (see the module docs): as many as the window allows of those this
    /// node's view says the owner holds, idle, that this node neither holds nor asked for.
    pub(super) fn ask_owner_ahead(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        owner: NodeId,
        out: &mut Vec<Action>,
    ) {
        if self.prefetch == 0 {
            return;
        }
        let me = ctx.me();
        let window = self.ahead_window(page, me);
        let next = self.ahead_run(ctx, page, window, |s, q| {
            s.owner_copy_fits(q, owner, me)
                && s.managed
                    .get(&q)
                    .is_some_and(|m| !m.ahead_wasted && !m.owner_ahead_off)
        });
        if next > page + 1 {
            let count = (next - page - 1) as u32;
            let ask = ProtoMsg::AheadAsk {
                page: page + 1,
                count,
            };
            self.send(ctx, owner, ask, None, out);
        }
        self.ahead_sent(page, next, me);
    }

    /// Owner: `manager` asks for read copies of up to `count` pages from `first` on (see the
    /// module docs). Sends those this node owns and may share, in order, up to the first it
    /// may not: a page it holds exclusively (its write would take write access without a
    /// message), asked for or held for a thread, a lock or a hold.
    pub(super) fn send_ahead_copies(
        &mut self,
        ctx: &dyn Context,
        first: PageId,
        count: u32,
        manager: NodeId,
        out: &mut Vec<Action>,
    ) {
        let count = (count as usize).min(self.prefetch) as PageId;
        for q in first..first.saturating_add(count) {
            if ctx.home(q) != manager || !ctx.same_region(first, q) {
                break;
            }
            let shareable = self.pages.get(&q).is_some_and(|np| {
                np.is_owner
                    && np.access != Access::None
                    && !np.exclusive
                    && !np.paired
                    && np.outstanding.is_none()
            });
            if !shareable || self.holds.keep_reason(ctx, q, None).is_some() {
                break;
            }
            // Stop local writes before the contents are read into the copy.
            if self.node_page(ctx, q).access == Access::Write {
                self.set_access(ctx, q, Access::Read, out);
            }
            self.send(ctx, manager, ProtoMsg::AheadCopy { page: q }, Some(q), out);
        }
    }

    /// Manager: `owner` sent a read copy of `page` this node asked for ahead. Taken only if
    /// nothing happened to the page since (see the module docs); else dropped.
    pub(super) fn take_ahead_copy(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        owner: NodeId,
        out: &mut Vec<Action>,
    ) {
        let me = ctx.me();
        if ctx.home(page) != me {
            return; // stray: only a manager asks
        }
        if !self.owner_copy_fits(page, owner, me) {
            return;
        }
        out.push(Action::InstallIncoming {
            page,
            access: Access::Read,
        });
        let np = self.node_page(ctx, page);
        np.access = Access::Read;
        np.pushed_copy = false;
        np.dropped_at = None;
        self.managed_page(ctx, page).copyset.insert(me);
        self.stats.pages_read_ahead += 1;
    }

    /// The manager (`me`) removes `reader`'s copy of `page` for a write: if the copy was sent
    /// ahead and the reader's stream never went past it, it was sent for nothing. A copy this
    /// node took ahead from the owner (it is the reader) is not asked for ahead again at all.
    pub(super) fn ahead_invalidated(&mut self, page: PageId, reader: NodeId, me: NodeId) {
        let Some(st) = self.streams.get_mut(&reader) else {
            return;
        };
        if let Some(i) = st.unconfirmed.iter().position(|&p| p == page) {
            st.unconfirmed.swap_remove(i);
            st.window /= 2;
            if let Some(m) = self.managed.get_mut(&page) {
                m.ahead_wasted = true;
                m.owner_ahead_off |= reader == me;
            }
        }
    }
}
