//! sc-sw's manager side: the page's home serializes every operation on it (a FIFO queue per
//! page), grants read copies itself or through the owner, moves ownership for writes once every
//! other copy is invalidated, and detects migratory pages (see the module docs of
//! `sc_single_writer.rs`).

use svm_core::protocol::{Access, Action, Context, NodeId, PageId, ProtoMsg};

use super::{hold, Busy, ScSingleWriter, Transfer, MIGRATORY_CONFIDENCE};

impl ScSingleWriter {
    pub(super) fn mgr_request(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        from: NodeId,
        kind: Access,
        out: &mut Vec<Action>,
    ) {
        if from != ctx.me() {
            self.regained_seen(ctx, page);
        }
        let m = self.managed_page(ctx, page);
        m.queue.push_back((from, kind));
        if m.owner == ctx.me() && from != ctx.me() {
            if let Some(keep) = self.holds.keep_reason(ctx, page, Some(from)) {
                self.count_kept(keep);
                if keep == hold::Keep::Hold {
                    self.probe_hold(ctx, page, out);
                }
            }
        }
        self.mgr_advance(ctx, page, out);
        if kind == Access::Write && from != ctx.me() {
            self.grant_around(ctx, page, from, out);
        }
    }

    /// Counts a request that waits for `keep`.
    pub(super) fn count_kept(&mut self, keep: hold::Keep) {
        match keep {
            hold::Keep::Hold => self.stats.requests_held += 1,
            hold::Keep::ForThread => self.stats.requests_kept_unused += 1,
            hold::Keep::ForLock => self.stats.requests_kept_for_lock += 1,
        }
    }

    /// Starts queued operations until one is in progress or the queue is empty.
    pub(super) fn mgr_advance(&mut self, ctx: &dyn Context, page: PageId, out: &mut Vec<Action>) {
        loop {
            // The operation that just completed may have left messages to this node (a grant
            // to itself, say): they take effect before the next operation looks at this node's
            // access or contents, as they would in per-pair FIFO order.
            self.drain_local(ctx, out);
            let me = ctx.me();
            let m = self.managed_page(ctx, page);
            if m.busy.is_some() {
                return;
            }
            let other_waits = m.owner == me && m.queue.front().is_some_and(|&(req, _)| req != me);
            let front = m.queue.front().map(|&(r, _)| r);
            if other_waits && self.holds.keeps(ctx, page, front).is_some() {
                // This node holds the page, or its thread has not used it yet: the request
                // waits for the hold's end or the re-check.
                return;
            }
            let m = self.managed_page(ctx, page);
            let Some((req, kind)) = m.queue.pop_front() else {
                return;
            };
            let migrates = m.migratory >= MIGRATORY_CONFIDENCE && req != m.owner;
            match kind {
                Access::Write => self.mgr_start_write(ctx, page, req, false, out),
                _ if migrates => self.mgr_start_write(ctx, page, req, true, out),
                _ => self.mgr_start_read(ctx, page, req, out),
            }
        }
    }

    pub(super) fn mgr_start_read(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        reader: NodeId,
        out: &mut Vec<Action>,
    ) {
        let me = ctx.me();
        self.note_consumer(ctx, page, reader);
        let owner = self.managed_page(ctx, page).owner;
        let grant_read = |with_data| ProtoMsg::Grant {
            page,
            access: Access::Read,
            with_data,
        };
        if reader == owner {
            // The owner itself (the home before its first access): its contents are valid.
            self.send(ctx, reader, grant_read(false), None, out);
        } else if owner == me {
            self.exclusive_given_up(ctx, page, out);
            if self.node_page(ctx, page).access == Access::Write {
                self.set_access(ctx, page, Access::Read, out);
                self.access_taken(ctx, page);
            }
            self.send(ctx, reader, grant_read(true), Some(page), out);
            self.managed_page(ctx, page).copyset.insert(reader);
            self.read_ahead(ctx, page, reader, out);
        } else {
            self.managed_page(ctx, page).busy = Some(Busy::AwaitDone {
                requester: reader,
                kind: Access::Read,
            });
            self.send(
                ctx,
                owner,
                ProtoMsg::FwdRead { page, to: reader },
                None,
                out,
            );
            if reader == me {
                self.ask_owner_ahead(ctx, page, owner, out);
            }
        }
    }

    /// Moves ownership of `page` to `writer` once every other copy is invalidated: write
    /// access, or with `exclusive` the only copy read-only (a read of a migratory page).
    pub(super) fn mgr_start_write(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        writer: NodeId,
        exclusive: bool,
        out: &mut Vec<Action>,
    ) {
        let me = ctx.me();
        let m = self.managed_page(ctx, page);
        m.written_remotely |= writer != me;
        let owner = m.owner;
        if owner != writer {
            // Ownership moves for a write: a second node taking it so makes the page
            // write-shared (the home's first ownership does not count: `main` initialising
            // what the workers then write is not sharing).
            match m.first_taker {
                None => m.first_taker = Some(writer),
                Some(w) => m.owner_ahead_off |= w != writer,
            }
        }
        if !exclusive && owner != writer {
            if m.copyset.len() == 1 && m.copyset.contains(writer) {
                // Read by `writer`, then written by it, while it held the only copy besides
                // the last writer's: the page migrates from node to node.
                m.migratory = m.migratory.saturating_add(1).min(MIGRATORY_CONFIDENCE + 1);
            } else if !m.copyset.is_empty() {
                // Read by others too: shared, not migrating.
                m.migratory = 0;
            }
        }
        let transfer = Transfer {
            with_data: !(m.copyset.contains(writer) || owner == writer),
            exclusive,
        };
        let targets: Vec<NodeId> = m
            .copyset
            .iter()
            .filter(|&n| n != writer && n != owner)
            .collect();
        for &t in &targets {
            m.copyset.remove(t);
        }
        let acks = targets.len() as u32;
        if acks > 0 {
            m.busy = Some(Busy::Invalidating {
                writer,
                transfer,
                acks,
            });
        }
        for &t in &targets {
            self.ahead_invalidated(page, t, me);
        }
        for t in targets {
            self.send(ctx, t, ProtoMsg::Inval { page }, None, out);
        }
        if acks == 0 {
            self.mgr_finish_write(ctx, page, writer, transfer, out);
        }
    }

    /// Every other copy is gone: move ownership (and the contents) to `writer`.
    pub(super) fn mgr_finish_write(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        writer: NodeId,
        transfer: Transfer,
        out: &mut Vec<Action>,
    ) {
        let me = ctx.me();
        let m = self.managed_page(ctx, page);
        let owner = m.owner;
        if owner == writer {
            // Only a write comes here (an exclusive read is never started for the owner).
            m.copyset.clear();
            m.busy = None;
            self.send(
                ctx,
                writer,
                ProtoMsg::Grant {
                    page,
                    access: Access::Write,
                    with_data: false,
                },
                None,
                out,
            );
        } else if owner == me {
            m.owner = writer;
            m.copyset.clear();
            m.busy = None;
            if transfer.exclusive {
                self.exclusive_given_up(ctx, page, out);
            } else {
                self.forget_unused_pair(ctx, page);
                self.node_page(ctx, page).exclusive = false;
            }
            self.give_up_ownership(ctx, page, writer, transfer, out);
        } else {
            // Ownership moves either way: the manager records it at the requester's `Done`.
            m.busy = Some(Busy::AwaitDone {
                requester: writer,
                kind: Access::Write,
            });
            let (to, with_data) = (writer, transfer.with_data);
            let fwd = if transfer.exclusive {
                ProtoMsg::FwdExclusive {
                    page,
                    to,
                    with_data,
                }
            } else {
                ProtoMsg::FwdWrite {
                    page,
                    to,
                    with_data,
                }
            };
            self.send(ctx, owner, fwd, None, out);
        }
    }

    pub(super) fn mgr_inval_ack(&mut self, ctx: &dyn Context, page: PageId, out: &mut Vec<Action>) {
        let m = self.managed_page(ctx, page);
        let Some(Busy::Invalidating {
            writer,
            transfer,
            acks,
        }) = m.busy
        else {
            return; // stray acknowledgement: nothing waits for it
        };
        if acks > 1 {
            m.busy = Some(Busy::Invalidating {
                writer,
                transfer,
                acks: acks - 1,
            });
            return;
        }
        m.busy = None;
        self.mgr_finish_write(ctx, page, writer, transfer, out);
        self.mgr_advance(ctx, page, out);
    }

    pub(super) fn mgr_done(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        from: NodeId,
        out: &mut Vec<Action>,
    ) {
        let m = self.managed_page(ctx, page);
        match m.busy {
            Some(Busy::AwaitDone { requester, kind }) if requester == from => {
                self.around_written(page);
                let m = self.managed_page(ctx, page);
                if kind == Access::Write {
                    m.owner = from;
                    m.copyset.clear();
                } else {
                    m.copyset.insert(from);
                }
                m.busy = None;
                self.mgr_advance(ctx, page, out);
            }
            _ => {} // stray Done: nothing waits for it
        }
    }
}
