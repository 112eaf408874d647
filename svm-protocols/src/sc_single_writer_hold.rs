//! sc-sw's minimum hold (`SVM_HOLD_US`): see [`Holds`].

use std::collections::VecDeque;

use svm_core::protocol::{Access, Action, Context, NodeId, PageId, ProtoMsg};

use super::{NodePage, ScSingleWriter};

/// The minimum hold (after Mirage's time window Δ, Fleisch & Popek, SOSP 1989): a node that
/// regains write access to a page another node took from it since its last release keeps the
/// page for `hold_ns` before it gives it up to a node of higher rank, so pages that two nodes
/// write between two synchronisations (radix's key arrays, the blocks of a non-contiguous LU)
/// move in batches of writes instead of once per write. Requests for a held page wait: a
/// forwarded request at the owner (`deferred`), a request at a manager that owns the page
/// itself in its queue. A request from a node of lower rank than the holder's never waits for
/// a hold, so every wait for a hold is of a higher rank for a lower one: no two nodes can
/// wait for each other's holds, and a holder whose own thread waits for another node keeps
/// its holds (the lowest rank among the nodes writing the same pages works through them
/// first, the others after it, instead of all of them taking the pages from each other write
/// by write). A barrier arrival of the holder, a release through the engine, or a lock's token
/// leaving it ends every hold at once, so data published by a synchronisation is never kept
/// back from the node that synchronises with it. Releases of locks through the fast path (the
/// token stays) leave the holds alone. No hold outlives `hold_ns`: sequential consistency
/// only depends on the order in which copies move, never on when.
///
/// A hold lasts only while its page is written (the *write probe*): once a request waits for
/// it, the holder lowers its own write access to read; a write to the page within a tenth of
/// the hold ([`PROBE_SHARE`]) raises it again here, without a message (the holder owns the
/// only copy and none has left since), and the probe starts over; a page not written for that
/// long is given up at once. A page written all through a phase (a block of a non-contiguous
/// LU) stays for the whole hold, a flag written once and then read is handed over after one
/// probe. The probe costs one local write fault per probe interval of a page in use.
#[derive(Debug, Default)]
pub(super) struct Holds {
    /// How long a hold lasts (ns on the clock of `Context::now`); 0 = holds off.
    pub(super) hold_ns: u64,
    /// Held pages and when each hold ends, in the order the holds began (so also in the
    /// order they end: every hold lasts `hold_ns`).
    pub(super) until: VecDeque<(u64, PageId)>,
    /// Write probes of held pages and when each is due, in the order they began (each lasts
    /// `hold_ns / PROBE_SHARE`).
    pub(super) probes: VecDeque<(u64, PageId)>,
    /// Forwarded requests for held pages, with their sender, in arrival order.
    pub(super) deferred: Vec<(NodeId, ProtoMsg)>,
    /// When to look again at requests kept back because the page was just installed for a
    /// thread that has not run since ([`Holds::keeps`]).
    pub(super) recheck_at: Option<u64>,
    /// The pages of those requests this node manages (their queue waits, not `deferred`).
    pub(super) rechecks: Vec<PageId>,
}

/// How often requests kept back for a thread that has not yet used its page are looked at
/// again (ns).
pub(super) const RECHECK_NS: u64 = 50_000;

/// A held page that a request waits for may go unwritten for this share of the hold
/// (`hold_ns / PROBE_SHARE`) before it is given up (the write probe, see [`Holds`]). Measured
/// (`svm-bench splash --quick`, 10,000 µs holds): a tenth (1,000 µs) made fewer remote faults
/// than 300 µs in barnes (29,800 against 35,000), raytrace and lu-noncontiguous, the same
/// times.
pub(super) const PROBE_SHARE: u64 = 10;

/// Where a page stands in the write probe of its hold (see [`Holds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Probe {
    /// No probe: the page's access is what the protocol last granted.
    #[default]
    Off,
    /// This node, the owner, lowered its own write access to read while a request waits for
    /// the hold, and no copy of the page has left since (any copy sent, any access set by
    /// the protocol ends the state): a write fault raises it again here.
    Lowered,
    /// Written again since the probe lowered it: in use.
    Rewritten,
}

/// Why a request for a page waits ([`Holds::keeps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    /// The page is held (the minimum hold).
    Hold,
    /// The page was just installed for a thread of this node that has not run since.
    ForThread,
    /// A lock whose critical sections use the page has its token here, and another node
    /// asked for that lock (`Context::kept_for_lock`).
    ForLock,
}

impl Holds {
    pub(super) fn is_held(&self, page: PageId, now: u64) -> bool {
        self.until.iter().any(|&(t, p)| p == page && t > now)
    }

    /// Why a request for `page` from `requester` waits now, if it does: the page is held and
    /// the requester's rank is higher than this node's (None: this node's own sending of the
    /// page, read-ahead, which a hold stops for everyone), or it was just
    /// installed for a thread of this node that has not run since the engine looked after its
    /// wake-up (`Context::install_unused`, bounded in time by the engine). Taking the page
    /// from such a thread would only make it fault again: on CPUs shared by several nodes,
    /// pages that several nodes write could move on and on with few writes made (MP-MPICH's
    /// `strided` at 4 nodes on 2 CPUs). No side effect.
    pub(super) fn keep_reason(
        &self,
        ctx: &dyn Context,
        page: PageId,
        requester: Option<NodeId>,
    ) -> Option<Keep> {
        let held_from = |r: NodeId| r > ctx.me();
        if self.is_held(page, ctx.now()) && requester.is_none_or(held_from) {
            Some(Keep::Hold)
        } else if ctx.install_unused(page) {
            Some(Keep::ForThread)
        } else if ctx.kept_for_lock(page) {
            Some(Keep::ForLock)
        } else {
            None
        }
    }

    /// [`Holds::keep_reason`], arming a re-check for a page kept for its thread. Sequential
    /// consistency is unaffected: the page moves later, never out of order.
    pub(super) fn keeps(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        requester: Option<NodeId>,
    ) -> Option<Keep> {
        let keep = self.keep_reason(ctx, page, requester);
        // Both end by the engine's reckoning, not a hold of this protocol's: look again.
        if matches!(keep, Some(Keep::ForThread | Keep::ForLock)) {
            self.recheck_at
                .get_or_insert(ctx.now().saturating_add(RECHECK_NS));
            if !self.rechecks.contains(&page) {
                self.rechecks.push(page);
            }
        }
        keep
    }

    /// The earliest of the holds', the probes' and the re-check's timers.
    pub(super) fn next_timer(&self) -> Option<u64> {
        let hold = self.until.front().map(|&(t, _)| t);
        let probe = self.probes.front().map(|&(t, _)| t);
        [hold, probe, self.recheck_at].into_iter().flatten().min()
    }
}

impl NodePage {
    /// A write fault on the page: if its write probe lowered it, write access comes back here
    /// without a message (the only copy is this node's); the caller sets the page's access.
    /// Whether it did.
    pub(super) fn raise_probed(&mut self) -> bool {
        if self.probe != Probe::Lowered
            || !self.is_owner
            || self.access != Access::Read
            || self.outstanding.is_some()
        {
            return false;
        }
        self.probe = Probe::Rewritten;
        self.access = Access::Write;
        true
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

    /// A request waits for the hold of `page`: unless a probe runs, lower this node's write
    /// access to read and see whether the page is written again within a probe interval
    /// (see [`Holds`]).
    pub(super) fn probe_hold(&mut self, ctx: &dyn Context, page: PageId, out: &mut Vec<Action>) {
        let wait = self.holds.hold_ns / PROBE_SHARE;
        let np = self.node_page(ctx, page);
        if np.probe == Probe::Lowered || !np.is_owner || np.access != Access::Write {
            return;
        }
        np.probe = Probe::Lowered;
        np.access = Access::Read;
        out.push(Action::SetAccess {
            page,
            access: Access::Read,
        });
        self.holds
            .probes
            .push_back((ctx.now().saturating_add(wait), page));
    }

    /// The probes due by `now`: a held page written since its probe began is probed again;
    /// one not written is given up (its hold ends, appended to `ended`).
    fn end_due_probes(
        &mut self,
        ctx: &dyn Context,
        now: u64,
        ended: &mut Vec<PageId>,
        out: &mut Vec<Action>,
    ) {
        while let Some(&(t, page)) = self.holds.probes.front() {
            if t > now {
                break;
            }
            self.holds.probes.pop_front();
            if !self.holds.is_held(page, now) {
                continue;
            }
            match self.pages.get(&page).map(|np| np.probe) {
                Some(Probe::Lowered) => {
                    self.holds.until.retain(|&(_, p)| p != page);
                    self.stats.holds_ended_unwritten += 1;
                    ended.push(page);
                }
                Some(Probe::Rewritten) => self.probe_hold(ctx, page, out),
                _ => {}
            }
        }
    }

    /// The holds of `ended` are over: the requests that waited for them go on, in the order
    /// they came (requests for pages still held wait on).
    pub(super) fn resume_held(
        &mut self,
        ctx: &dyn Context,
        ended: &[PageId],
        out: &mut Vec<Action>,
    ) {
        let mut go = Vec::new();
        for (from, msg) in std::mem::take(&mut self.holds.deferred) {
            if self
                .holds
                .keeps(ctx, msg.page(), fwd_requester(&msg))
                .is_some()
            {
                self.holds.deferred.push((from, msg));
            } else {
                go.push((from, msg));
            }
        }
        for (from, msg) in go {
            self.handle(ctx, from, &msg, out);
        }
        for &page in ended {
            if ctx.home(page) != ctx.me() {
                continue;
            }
            let front = self
                .managed
                .get(&page)
                .and_then(|m| m.queue.front())
                .map(|&(r, _)| r);
            if self.holds.keeps(ctx, page, front).is_none() {
                self.mgr_advance(ctx, page, out);
            }
        }
        self.drain_local(ctx, out);
    }

    /// A reason the engine kept requests for ended (a lock's token left): the requests that
    /// waited for it go on now instead of at the next re-check.
    pub(super) fn recheck_kept_now(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        self.holds.recheck_at = Some(ctx.now());
        self.end_due_holds(ctx, out);
    }

    /// A release or barrier arrival of this node, or a lock's token leaving it: a new release
    /// epoch, and every hold ends.
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
        self.holds.probes.clear();
        self.resume_held(ctx, &ended, out);
    }

    /// The holds due by `ctx.now()` end, and requests kept for threads that had not run are
    /// looked at again when the re-check is due (the engine's timer,
    /// [`ScSingleWriter::next_timer`]).
    pub(super) fn end_due_holds(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        let now = ctx.now();
        let mut ended = Vec::new();
        self.end_due_probes(ctx, now, &mut ended, out);
        if self.holds.recheck_at.is_some_and(|t| t <= now) {
            self.holds.recheck_at = None;
            ended.append(&mut self.holds.rechecks);
        }
        while let Some(&(t, page)) = self.holds.until.front() {
            if t > now {
                break;
            }
            self.holds.until.pop_front();
            ended.push(page);
        }
        if !ended.is_empty() && !self.holds.probes.is_empty() {
            // Probes of holds that just ended are over too.
            let until = &self.holds.until;
            self.holds
                .probes
                .retain(|&(_, p)| until.iter().any(|&(t, q)| q == p && t > now));
        }
        self.resume_held(ctx, &ended, out);
    }
}

/// The node a forwarded request is for (None: not a forwarded request).
pub(super) fn fwd_requester(msg: &ProtoMsg) -> Option<NodeId> {
    match *msg {
        ProtoMsg::FwdRead { to, .. }
        | ProtoMsg::FwdWrite { to, .. }
        | ProtoMsg::FwdExclusive { to, .. } => Some(to),
        _ => None,
    }
}
