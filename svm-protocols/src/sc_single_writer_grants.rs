//! sc-sw's hand-overs: the owner giving a page up (ownership and, where needed, the contents)
//! and a node installing what it was granted.

use svm_core::protocol::{Access, Action, Context, NodeId, PageId, ProtoMsg};

use super::hold::Probe;
use super::{ScSingleWriter, Transfer, TRUSTED_INSTALLS, WRITTEN_TO_TRUST};

impl ScSingleWriter {
    /// This node (the owner) hands ownership and, if `transfer.with_data`, the contents to
    /// `to`: write access, or the only copy read-only (`transfer.exclusive`).
    pub(super) fn give_up_ownership(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        to: NodeId,
        transfer: Transfer,
        out: &mut Vec<Action>,
    ) {
        // Another node writes the page too: asking for write access to it early, along with
        // the page before, would only move it back and forth (radix's interleaved writes:
        // 20,000-64,000 faults instead of 5,000-41,000 while such pairs were kept).
        self.forget_pair_ending_at(page, |p| p.access == Access::Write);
        let with_data = transfer.with_data;
        let grant = if transfer.exclusive {
            ProtoMsg::GrantExclusive { page, with_data }
        } else {
            ProtoMsg::Grant {
                page,
                access: Access::Write,
                with_data,
            }
        };
        if with_data {
            // Stop local writes first, read the contents into the grant, then drop the copy.
            if self.node_page(ctx, page).access == Access::Write {
                self.set_access(ctx, page, Access::Read, out);
            }
            self.send(ctx, to, grant, Some(page), out);
            self.set_access(ctx, page, Access::None, out);
        } else {
            self.set_access(ctx, page, Access::None, out);
            self.send(ctx, to, grant, None, out);
        }
        self.node_page(ctx, page).is_owner = false;
        self.access_taken(ctx, page);
    }

    /// Installs a grant of `access` (with ownership if `exclusive`: the only copy, read-only
    /// until this node writes it).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn install_grant(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        access: Access,
        with_data: bool,
        exclusive: bool,
        from: NodeId,
        out: &mut Vec<Action>,
    ) {
        let home = ctx.home(page);
        let np = self.node_page(ctx, page);
        if np.drop_pending && from == home && access == Access::Read && !exclusive {
            // Sent unasked (read-ahead, a push) before the home took this node out of the
            // copyset for its dropped copy: the home does not count this copy. (An answer to
            // a request of this node comes after the home's `DropAck`.)
            return;
        }
        let granted = access;
        let (access, exclusive) = if access == Access::Write && np.paired && !exclusive {
            // Asked for through a pair and not faulted on yet: hold it as the only copy,
            // read-only, until a write shows it is used (`NodePage::paired`).
            (Access::Read, true)
        } else {
            (access, exclusive)
        };
        if access == Access::Read && np.access >= Access::Read && !exclusive {
            // An unasked read grant (read-ahead, a push) crossed this node's own request for
            // the page: the copy held is the same, and the manager counts this node a reader.
            // The answer to the request may come from a third node (the owner), whose grant
            // the manager waits to see confirmed.
            if np.outstanding == Some(Access::Read) {
                np.outstanding = None;
            }
            if from != home {
                self.send(ctx, home, ProtoMsg::Done { page }, None, out);
            }
            return;
        }
        // A migratory page this node wrote the last exclusive copies of: the write follows
        // the read, so the copy is installed writable and the write takes no fault. The
        // exclusive copy is the only one and the manager counts this node its owner, the
        // state a granted write leaves. Every few grants one is installed read-only again to
        // see whether it is still written.
        let np = self.node_page(ctx, page);
        let trusted = exclusive
            && access == Access::Read
            && np.exclusive_written >= WRITTEN_TO_TRUST
            && np.trusted_installs < TRUSTED_INSTALLS;
        if exclusive && access == Access::Read {
            np.trusted_installs = if trusted { np.trusted_installs + 1 } else { 0 };
        }
        let (access, exclusive) = if trusted {
            self.stats.migratory_upgrades += 1;
            (Access::Write, false)
        } else {
            (access, exclusive)
        };
        if with_data {
            out.push(Action::InstallIncoming { page, access });
        } else {
            out.push(Action::SetAccess { page, access });
        }
        let np = self.node_page(ctx, page);
        np.access = access;
        np.probe = Probe::Off;
        np.pushed_copy = false;
        np.dropped_at = None;
        // A read grant does not answer an outstanding write request (read-ahead can bring one
        // while the node waits for write access).
        if np.outstanding.is_some_and(|o| granted >= o) {
            np.outstanding = None;
        }
        let mut became_owner = false;
        if access == Access::Write || exclusive {
            became_owner = !np.is_owner;
            np.is_owner = true;
        }
        np.exclusive = exclusive;
        let upgrade = np.outstanding.is_none()
            && std::mem::take(&mut np.upgrade_wanted)
            && access < Access::Write;
        if became_owner {
            self.stats.ownership_received += 1;
        }
        if access == Access::Write {
            self.maybe_hold(ctx, page);
            self.note_written(ctx, page);
        }
        if from != home {
            self.send(ctx, home, ProtoMsg::Done { page }, None, out);
        }
        if upgrade && exclusive {
            // The write that faulted while the read was under way: the only copy is here.
            self.exclusive_upgrade(ctx, page, out);
        } else if upgrade {
            self.node_page(ctx, page).outstanding = Some(Access::Write);
            self.send(ctx, home, ProtoMsg::WriteReq { page }, None, out);
        }
    }

    /// A write fault on a page this node holds exclusively (see [`NodePage::exclusive`]): no
    /// other copy exists and the manager counts this node the owner with an empty copyset,
    /// exactly the state a granted write request leaves, so write access is taken here.
    pub(super) fn exclusive_upgrade(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        out: &mut Vec<Action>,
    ) {
        let np = self.node_page(ctx, page);
        np.exclusive = false;
        np.exclusive_written = np.exclusive_written.saturating_add(1);
        if std::mem::take(&mut np.around) {
            let home = ctx.home(page);
            self.send(ctx, home, ProtoMsg::ExclusiveWritten { page }, None, out);
        }
        self.stats.migratory_upgrades += 1;
        self.set_access(ctx, page, Access::Write, out);
        self.maybe_hold(ctx, page);
        self.note_written(ctx, page);
    }
}
