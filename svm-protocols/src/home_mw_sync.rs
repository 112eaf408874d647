//! sc-mw and scope: releases (lock releases, barrier arrivals) flush this node's writes to
//! their homes; acquires (lock grants, barrier departures) apply the write notices (scope).

use std::collections::{BTreeMap, BTreeSet};

use svm_core::protocol::{Access, Action, Context, NodeId, PageId, ProtoMsg};

use super::{HomeMw, Mode, Reply};

/// A flush of this node (a release, a barrier arrival, or a push of dirty pages before an
/// invalidation) waiting for acknowledgements.
#[derive(Debug, Clone)]
pub(super) struct Flush {
    pub(super) id: u64,
    /// Acknowledgements still missing (one per home messaged, one for local invalidations).
    pub(super) waiting: u32,
    /// Whether this flush's release and every later one wait for them: yes, except in a job
    /// of two nodes (see [`HomeMw::flush`]).
    release_waits_for_acks: bool,
    /// The pages whose diffs it sent, sorted (`push`: a pushed copy may lack them).
    pub(super) diffed: Vec<PageId>,
    /// The release this flush completes, until it is completed: its token and notices (None
    /// for a push, and once `ReleaseDone` is out).
    pub(super) release: Option<(u64, Vec<PageId>)>,
}

/// What a flush pushes to the other node of a job of two nodes, once its writes are stopped
/// (`push`).
pub(super) enum PushAfter {
    Nothing,
    /// scope, at the global barrier: the pages among the arrival's notices this node is home
    /// of.
    Notices(Vec<PageId>),
    /// sc-mw, at a barrier: the home pages this flush invalidated elsewhere.
    WrittenHomePages,
}

impl Flush {
    /// A flush waiting for `waiting` acknowledgements, of the pages `diffed` (sorted).
    fn new(
        ctx: &dyn Context,
        id: u64,
        waiting: u32,
        diffed: Vec<PageId>,
        release: Option<(u64, Vec<PageId>)>,
    ) -> Self {
        Flush {
            id,
            waiting,
            release_waits_for_acks: ctx.nodes() > 2,
            diffed,
            release,
        }
    }

    /// One acknowledgement arrived: from a home (`DiffAck`) or for the local invalidations.
    pub(super) fn acked(&mut self) {
        self.waiting = self.waiting.saturating_sub(1);
    }

    /// Whether this flush holds back its release and every later one.
    fn holds_releases(&self) -> bool {
        self.release_waits_for_acks && self.waiting > 0
    }
}

impl HomeMw {
    // ---------------------------------------------------------------- releases

    /// Flushes every dirty page; `release` is completed (ReleaseDone) once every home has
    /// acknowledged and every earlier release is complete.
    ///
    /// In a job of two nodes the release does not wait for the home's acknowledgement: the
    /// other node is the home of every page this node diffs, and whatever tells it of the
    /// release (the barrier arrival, the lock's grant or release, a semaphore post) is a later
    /// message on the same link, so it applies the diffs first (per-pair FIFO); no third node
    /// could learn of the release and ask the home for the page before the diffs are there.
    /// This node's own later requests to the home follow the diffs on that link too. Likewise
    /// sc-mw's invalidations of the other node's copies of this node's own pages: the other
    /// node handles them before whatever tells it of the release (and a copy it was writing
    /// comes back with its acknowledgement, before its own barrier arrival or lock message).
    /// The flush still counts the acknowledgements (the protocol is not quiescent until they are in, so
    /// the shared-memory barrier, which sends no message, goes through the message barrier).
    /// Laplace at 2 nodes: a round trip less at every barrier after which a node wrote the
    /// shared error array (scope), or wrote its boundary rows (sc-mw).
    pub(super) fn flush(
        &mut self,
        ctx: &dyn Context,
        release: Option<(u64, Vec<PageId>)>,
        push: PushAfter,
        out: &mut Vec<Action>,
    ) {
        let id = self.next_flush;
        self.next_flush += 1;
        let dirty = std::mem::take(&mut self.dirty);
        let pushed = std::mem::take(&mut self.pushed);
        // Home pages nobody has fetched stay writable and untracked (see `served`).
        let dirty_home: BTreeSet<PageId> = std::mem::take(&mut self.dirty_home)
            .into_iter()
            .filter(|p| self.served.contains(p))
            .collect();
        // Home pages written after every release stay writable and count as written at the
        // next release too (`home_mw_sticky.rs`).
        let sticky = self.sticky.at_release(&dirty_home);
        self.visible.flushed(dirty.len() + dirty_home.len());
        // Stop writers first: the diffs and the home's invalidations must see final contents.
        for &p in dirty.iter().chain(&dirty_home) {
            if sticky.binary_search(&p).is_err() {
                self.set_access(p, Access::Read, out);
            }
        }
        let mut batches: BTreeMap<NodeId, (Vec<PageId>, Vec<PageId>)> = BTreeMap::new();
        for &p in &dirty {
            batches.entry(self.home_of(ctx, p)).or_default().0.push(p);
        }
        for &p in pushed.difference(&dirty) {
            batches.entry(self.home_of(ctx, p)).or_default().1.push(p);
        }
        let homes = batches.len() as u32;
        // `pushed` pages went to their homes earlier, with an `InvalAck`: named here, they
        // count as sent until this flush is acknowledged.
        let diffed: Vec<PageId> = dirty.union(&pushed).copied().collect();
        let local = u32::from(self.mode == Mode::Eager && !dirty_home.is_empty());
        // Counted before `invalidate_others`, which may complete (and decrement) at once; with
        // one more acknowledgement, and without its release, until every message of the flush
        // is out: the release must not complete (and the barrier arrival or the lock's grant
        // leave) ahead of the diffs or the pushes.
        let flush = Flush::new(ctx, id, homes + local + 1, diffed, None);
        self.flushes.push_back(flush);
        let written_home: Vec<PageId> = dirty_home.into_iter().collect();
        self.note_written_here(ctx, &written_home);
        self.note_written_here(ctx, &sticky);
        if local == 1 {
            self.invalidate_others(ctx, &written_home, ctx.me(), Reply::Local { id }, out);
        }
        // The diffs after the invalidations of this home's own pages: in a job of two nodes the
        // other node, which is the home of every diffed page, drops its stale copies of this
        // node's pages before it applies the diffs (per-pair FIFO). Only a racy program can
        // tell — a flag written after a datum with no release between them, flushed together
        // by the bounded visibility timer (`home_mw_visible.rs`) — but it then reads the datum.
        for (home, (diffed, pushed)) in batches {
            self.stats.diffs_created += diffed.len() as u64;
            out.push(Action::SendDiffs {
                to: home,
                msg: ProtoMsg::Diffs {
                    token: id,
                    diffed: diffed.clone(),
                    pushed,
                },
                pages: diffed,
            });
        }
        // After the writes were stopped and the other copies invalidated, before the release
        // leaves (`push`).
        match push {
            PushAfter::Nothing => {}
            PushAfter::Notices(pages) => self.push_written(ctx, &pages, out),
            PushAfter::WrittenHomePages => self.push_written(ctx, &written_home, out),
        }
        // Sticky pages take no write fault: the timer must run for what is written to them
        // until they are lowered again.
        if !sticky.is_empty() {
            self.visible.wrote();
        }
        for p in sticky {
            self.count_home_written(p);
        }
        self.arm_flush_timer(ctx);
        if let Some(f) = self.flushes.iter_mut().find(|f| f.id == id) {
            f.release = release;
            f.acked();
        }
        self.complete_flushes(out);
    }

    /// Completes releases in order, as soon as neither they nor an earlier flush wait for an
    /// acknowledgement a release needs, and forgets the flushes that wait for none at all.
    pub(super) fn complete_flushes(&mut self, out: &mut Vec<Action>) {
        for f in self.flushes.iter_mut() {
            if f.holds_releases() {
                break;
            }
            if let Some((token, notices)) = f.release.take() {
                self.stats.notices_sent += notices.len() as u64;
                out.push(Action::ReleaseDone { token, notices });
            }
        }
        while self
            .flushes
            .front()
            .is_some_and(|f| f.waiting == 0 && f.release.is_none())
        {
            self.flushes.pop_front();
        }
    }

    pub(crate) fn on_release(&mut self, ctx: &dyn Context, token: u64, out: &mut Vec<Action>) {
        self.take_scanned_writes(ctx);
        let notices = match self.mode {
            Mode::Eager => Vec::new(),
            Mode::Notices => {
                self.open = self.open.saturating_sub(1);
                let n: Vec<PageId> = self.since_release.iter().copied().collect();
                if self.open == 0 {
                    self.since_release.clear();
                }
                n
            }
        };
        self.flush(ctx, Some((token, notices)), PushAfter::Nothing, out);
    }

    /// Nothing a barrier arrival would flush, wait for or hand over as notices, and no barrier
    /// of some nodes passed since the last of every node: the next departure must tell this
    /// node how many nodes took part (a barrier through shared memory does not), because this
    /// node may have heard of writes the others of its next barrier must drop their copies for.
    pub(crate) fn barrier_quiescent(&self) -> bool {
        self.quiescent()
            && self.since_barrier.is_empty()
            && self.since_all_nodes.is_empty()
            && !self.partial_since
    }

    /// Nothing a release would flush, wait for or hand over as notices.
    pub(crate) fn quiescent(&self) -> bool {
        self.scan_served.is_empty()
            && self.dirty.is_empty()
            && self.dirty_home.is_empty()
            && self.pushed.is_empty()
            && self.flushes.is_empty()
            && self.since_release.is_empty()
    }

    /// A barrier arrival; `all_nodes`: of the barrier of every node (`push`).
    pub(crate) fn on_barrier_arrive(
        &mut self,
        ctx: &dyn Context,
        token: u64,
        all_nodes: bool,
        out: &mut Vec<Action>,
    ) {
        self.take_scanned_writes(ctx);
        let notices = match self.mode {
            Mode::Eager => Vec::new(),
            Mode::Notices => {
                let mut all = std::mem::take(&mut self.since_barrier);
                all.extend(self.since_release.iter().copied());
                if all_nodes {
                    all.append(&mut self.since_all_nodes);
                } else if self.partial_since {
                    // Nodes outside an earlier barrier of some nodes have not heard of these.
                    all.extend(self.since_all_nodes.iter().copied());
                }
                if self.open == 0 {
                    self.since_release.clear();
                }
                all.into_iter().collect()
            }
        };
        let push = match self.mode {
            Mode::Notices if all_nodes => PushAfter::Notices(notices.clone()),
            Mode::Notices => PushAfter::Nothing,
            Mode::Eager => PushAfter::WrittenHomePages,
        };
        self.flush(ctx, Some((token, notices)), push, out);
    }

    // ---------------------------------------------------------------- acquires

    pub(crate) fn on_acquire(
        &mut self,
        ctx: &dyn Context,
        token: u64,
        notices: &[PageId],
        out: &mut Vec<Action>,
    ) {
        if self.mode == Mode::Notices {
            self.open += 1;
            self.apply_notices(ctx, notices, false, out);
        }
        out.push(Action::AcquireDone { token });
    }

    /// The departure of a barrier every node took part in; `all_nodes`: of the barrier of
    /// every node (one thread each), whose notices the pages pushed since the last departure
    /// already hold (`push`).
    pub(crate) fn on_barrier_depart(
        &mut self,
        ctx: &dyn Context,
        token: u64,
        notices: &[PageId],
        all_nodes: bool,
        out: &mut Vec<Action>,
    ) {
        if self.mode == Mode::Notices {
            // Every node heard of the writes this node's arrival named (all of
            // `since_all_nodes` after a barrier of some nodes, else what it had not named at
            // an earlier barrier of every node); what was written since the arrival is in
            // `since_barrier`.
            let since_arrival = &self.since_barrier;
            self.since_all_nodes.retain(|p| since_arrival.contains(p));
            self.partial_since = false;
        }
        self.move_homes(ctx, out);
        self.depart(ctx, token, notices, all_nodes, out)
    }

    /// The departure of a barrier some node took no part in (`others`: another node did).
    /// Scope consistency makes every write that precedes the barrier visible to its
    /// participants, also the writes of a node outside it that reached a participant through
    /// an earlier barrier of some nodes (a participant names its own writes, not what it
    /// heard). Their homes hold them (a release waits for its diffs to be acknowledged beyond
    /// two nodes, and this needs three), so with another node at the barrier every copy of a
    /// page homed elsewhere is dropped. Barriers of some nodes are rare (the personalities'
    /// barriers take every node); a barrier of every node costs nothing of this.
    pub(crate) fn on_partial_barrier_depart(
        &mut self,
        ctx: &dyn Context,
        token: u64,
        notices: &[PageId],
        others: bool,
        out: &mut Vec<Action>,
    ) {
        if self.mode != Mode::Notices {
            return self.depart(ctx, token, notices, false, out);
        }
        self.partial_since = true;
        if !others {
            return self.depart(ctx, token, notices, false, out);
        }
        let me = ctx.me();
        let mut all: BTreeSet<PageId> = notices.iter().copied().collect();
        all.extend(
            self.pages
                .iter()
                .filter(|(&p, np)| {
                    self.home_of(ctx, p) != me && (np.access != Access::None || np.fetching)
                })
                .map(|(&p, _)| p),
        );
        let all: Vec<PageId> = all.into_iter().collect();
        self.depart(ctx, token, &all, false, out)
    }

    fn depart(
        &mut self,
        ctx: &dyn Context,
        token: u64,
        notices: &[PageId],
        all_nodes: bool,
        out: &mut Vec<Action>,
    ) {
        if self.mode == Mode::Notices {
            self.apply_notices(ctx, notices, all_nodes, out);
        }
        self.fresh.clear();
        self.refetch_lost(ctx, out);
        out.push(Action::AcquireDone { token });
    }

    /// scope: invalidates this node's copies of the pages named by write notices (except the
    /// pages it is home of, whose master copy already holds every acknowledged diff, and with
    /// `keep_fresh` the copies the home pushed since the last departure: `push`). Dirty
    /// copies first push their diffs to their homes, batched; the next release waits for
    /// those pushes to be acknowledged.
    fn apply_notices(
        &mut self,
        ctx: &dyn Context,
        notices: &[PageId],
        keep_fresh: bool,
        out: &mut Vec<Action>,
    ) {
        let me = ctx.me();
        let mut push: BTreeMap<NodeId, Vec<PageId>> = BTreeMap::new();
        let mut drop = Vec::new();
        for &p in notices {
            if self.home_of(ctx, p) == me || (keep_fresh && self.fresh.contains(&p)) {
                continue;
            }
            let np = self.page(p);
            if np.fetching {
                np.stale_fetch = true;
                self.stats.notice_invalidations += 1;
                self.stats.invalidations += 1;
                continue;
            }
            if np.access == Access::None {
                continue;
            }
            self.stats.notice_invalidations += 1;
            self.stats.invalidations += 1;
            if self.dirty.remove(&p) {
                self.set_access(p, Access::Read, out);
                push.entry(self.home_of(ctx, p)).or_default().push(p);
            }
            drop.push(p);
        }
        for &p in &drop {
            self.note_copy_lost(p);
        }
        if !push.is_empty() {
            let id = self.next_flush;
            self.next_flush += 1;
            // The next release waits for these acknowledgements (its notices name the pages),
            // except in a job of two nodes (see `flush`).
            let mut diffed: Vec<PageId> = push.values().flatten().copied().collect();
            diffed.sort_unstable();
            let flush = Flush::new(ctx, id, push.len() as u32, diffed, None);
            self.flushes.push_back(flush);
            for (home, pages) in push {
                self.stats.diffs_created += pages.len() as u64;
                out.push(Action::SendDiffs {
                    to: home,
                    msg: ProtoMsg::Diffs {
                        token: id,
                        diffed: pages.clone(),
                        pushed: Vec::new(),
                    },
                    pages,
                });
            }
        }
        for p in drop {
            self.set_access(p, Access::None, out);
        }
    }
}
