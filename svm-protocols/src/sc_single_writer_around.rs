//! sc-sw's grants around a write request while the manager waits at a barrier
//! (`SVM_GRANT_AROUND`, docs/protocols.md "Grants around a request at a barrier").
//!
//! SPLASH-2 radix at 2 nodes: in each permutation both nodes write every page of the key
//! array (each bucket's keys from both nodes share its pages); node 0, home and owner of the
//! array, finishes first and waits at the barrier while node 1 takes the pages it still
//! needs one write fault and one round trip at a time (~450 per pass, ~18 ms of a ~75 ms
//! run). A manager whose node has arrived at a barrier runs no thread that could write its
//! pages until the departure, so when a node keeps asking it for write access then, it
//! grants that node, with each request, the idle pages of the aligned block around the
//! page asked for — exactly the grants of the write requests the node could have sent at
//! that moment, so sequential consistency holds for the reasons it holds for any request.
//!
//! Such a page is installed read-only and exclusive (as a migratory page's read is): a
//! write upgrades it without waiting and tells the manager (`ProtoMsg::ExclusiveWritten`),
//! and a page given up unwritten says so (`ProtoMsg::ExclusiveUnused`). The manager keeps a
//! tally per node: it grants a node only so many pages it has not heard of yet, more as the
//! node writes them, and none to a node that gives them back unwritten (fft's and ocean's
//! blocks hold rows of both nodes; barnes's cells: pages taken back by their writers after
//! the barrier).

use rustc_hash::FxHashMap;
use svm_core::protocol::{Access, Action, Context, NodeId, PageId};

use super::ScSingleWriter;

/// Write requests a node makes to this manager after its barrier arrival before the manager
/// grants it pages around them: a node that asks for one page or two is not walking an array.
pub(super) const AROUND_AFTER_REQUESTS: u32 = 4;

/// Write requests a node makes for pages of one block after this node's barrier arrival
/// before the manager grants it the rest of the block: a node that asked for one or two of
/// its pages is not walking it.
const AROUND_IN_BLOCK: u32 = 3;

/// Pages granted around to one node whose fate (written or given back unwritten) the
/// manager has not heard of yet, at first. fft's first grants around (a whole block of 64)
/// went 55 of 60 back unwritten, lu-contiguous's 29 of 84: a wrong guess costs each page a
/// fault of its writer later, so the first guesses stay few.
const AROUND_FIRST: u32 = 32;

/// More pages the manager may have granted a node around and not heard of yet, for each page
/// the node wrote: radix's node 1 writes what it gets within a millisecond and soon gets
/// whole blocks (~400 pages a pass).
const AROUND_GROWTH: u32 = 4;

/// The most pages granted around to one node and not heard of yet.
const AROUND_UNRESOLVED_MAX: u32 = 1024;

/// Pages given back unwritten after which a node's tally decides: below, too few to judge.
const AROUND_UNUSED_TO_JUDGE: u32 = 16;

/// Of the pages whose fate the manager saw, the share given back unwritten (1 in this many)
/// above which it grants a node nothing around anymore. Radix gives back 1 of ~1,000.
const AROUND_UNUSED_SHARE: u32 = 8;

/// What became of the pages one node was granted around.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct AroundTally {
    /// Granted and not seen again yet.
    pub(super) unresolved: u32,
    /// Taken back after the node wrote them.
    pub(super) written: u32,
    /// Given back unwritten.
    pub(super) unwritten: u32,
}

impl AroundTally {
    /// Whether pages granted around to this node have been worth it so far.
    fn worth_it(&self) -> bool {
        self.unwritten < AROUND_UNUSED_TO_JUDGE
            || self.unwritten * AROUND_UNUSED_SHARE <= self.unwritten + self.written
    }
}

/// The manager's state for grants around requests (see the module docs).
#[derive(Debug)]
pub(super) struct GrantAround {
    /// Block size in pages (0 or 1 = off).
    pub(super) block: u64,
    /// Write requests a node makes after the arrival before pages are granted around them.
    pub(super) after_requests: u32,
    /// This node has arrived at a barrier and not departed yet.
    pub(super) at_barrier: bool,
    /// Write requests per node since this node's barrier arrival.
    requests: FxHashMap<NodeId, u32>,
    /// Write requests per node and block since this node's barrier arrival.
    block_requests: FxHashMap<(NodeId, PageId), u32>,
    /// Pages granted around and not seen again, with the node they went to.
    pending: FxHashMap<PageId, NodeId>,
    /// Per node, what became of the pages granted to it.
    tally: FxHashMap<NodeId, AroundTally>,
}

impl Default for GrantAround {
    /// Off (block 0), granting from [`AROUND_AFTER_REQUESTS`] requests once a block is set.
    fn default() -> Self {
        GrantAround {
            block: 0,
            after_requests: AROUND_AFTER_REQUESTS,
            at_barrier: false,
            requests: FxHashMap::default(),
            block_requests: FxHashMap::default(),
            pending: FxHashMap::default(),
            tally: FxHashMap::default(),
        }
    }
}

impl GrantAround {
    /// This node arrived at a barrier: its threads write nothing until the departure.
    pub(super) fn arrived(&mut self) {
        self.at_barrier = true;
        self.requests.clear();
        self.block_requests.clear();
    }

    pub(super) fn departed(&mut self) {
        self.at_barrier = false;
    }

    /// The pages of a destroyed region: those granted around and not heard of yet no longer
    /// count against their nodes.
    pub(super) fn forget(&mut self, pages: &std::ops::Range<PageId>) {
        let tally = &mut self.tally;
        self.pending.retain(|p, to| {
            let keep = !pages.contains(p);
            if !keep {
                let t = tally.entry(*to).or_default();
                t.unresolved = t.unresolved.saturating_sub(1);
            }
            keep
        });
        self.block_requests
            .retain(|(_, first), _| !pages.contains(first));
    }

    /// The manager heard what became of `page`, if it was granted around and not heard of
    /// yet: counts it for its node, written or not. Whether it was such a page.
    fn resolve(&mut self, page: PageId, written: bool) -> bool {
        let Some(to) = self.pending.remove(&page) else {
            return false;
        };
        let t = self.tally.entry(to).or_default();
        t.unresolved = t.unresolved.saturating_sub(1);
        if written {
            t.written += 1;
        } else {
            t.unwritten += 1;
        }
        true
    }
}

impl ScSingleWriter {
    /// The manager took a write request for `page` from `from`, another node: with this node
    /// at a barrier and `from` walking its pages, grant `from` the idle pages of the block
    /// around `page` too.
    pub(super) fn grant_around(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        from: NodeId,
        out: &mut Vec<Action>,
    ) {
        let ga = &mut self.around;
        if ga.block < 2 || !ga.at_barrier {
            return;
        }
        let asked = ga.requests.entry(from).or_insert(0);
        *asked += 1;
        let asked = *asked;
        let first = page - page % ga.block;
        let in_block = ga.block_requests.entry((from, first)).or_insert(0);
        *in_block += 1;
        let tally = ga.tally.get(&from).copied().unwrap_or_default();
        if asked < ga.after_requests || *in_block < AROUND_IN_BLOCK || !tally.worth_it() {
            return;
        }
        let limit = (AROUND_FIRST + AROUND_GROWTH * tally.written).min(AROUND_UNRESOLVED_MAX);
        let mut room = limit.saturating_sub(tally.unresolved);
        let mut grants = Vec::new();
        let me = ctx.me();
        for q in first..first.saturating_add(ga.block) {
            if room == 0 {
                break;
            }
            if q == page || !ctx.same_region(page, q) || ctx.home(q) != me {
                continue;
            }
            // Idle here: this node holds the page (so it has the contents), asks for nothing,
            // and its manager state shows no other copy and nothing under way or waiting.
            // (Not a page it holds exclusively itself: giving that up tells the manager it went
            // unwritten, which would be counted against `from`.)
            if self.pages.get(&q).is_none_or(|np| {
                np.access == Access::None || np.outstanding.is_some() || np.exclusive
            }) {
                continue;
            }
            // No manager entry: no request for it ever came here, so this node (its home,
            // holding it) owns it with no other copy. Entries are made only for pages granted.
            let idle = self.managed.get(&q).is_none_or(|m| {
                m.owner == me
                    && m.busy.is_none()
                    && m.queue.is_empty()
                    && m.copyset.iter().all(|n| n == me)
            });
            if !idle || self.holds.keeps(ctx, q, Some(from)).is_some() {
                continue;
            }
            room -= 1;
            self.around.pending.insert(q, from);
            self.around.tally.entry(from).or_default().unresolved += 1;
            self.stats.pages_granted_around += 1;
            self.mgr_start_write(ctx, q, from, true, &mut grants);
        }
        // Each page's grant lowers it to read-only, reads it into the grant and drops it.
        // Grouped step by step (each page's steps keep their order), the engine lowers and
        // drops each run of pages with one call: page by page, the drops alone cost a TLB
        // shoot-down each.
        grants.sort_by_key(|a| match a {
            Action::SetAccess {
                access: Access::Read,
                ..
            } => 0,
            Action::SetAccess {
                access: Access::None,
                ..
            } => 2,
            _ => 1,
        });
        out.extend(grants);
    }

    /// The holder of `page` gave it up unwritten (`ProtoMsg::ExclusiveUnused`).
    pub(super) fn around_unwritten(&mut self, page: PageId) {
        if self.around.resolve(page, false) {
            self.stats.granted_around_unwritten += 1;
        }
    }

    /// What became of the pages granted around to `node` (for tests).
    #[cfg(test)]
    pub(super) fn around_tally(&self, node: NodeId) -> AroundTally {
        self.around.tally.get(&node).copied().unwrap_or_default()
    }

    /// The holder of `page` wrote it (`ProtoMsg::ExclusiveWritten`), or ownership of `page`
    /// moved on (`ProtoMsg::Done`) before the manager heard either way: a page its holder
    /// gives up unwritten says so before it hands it on, so one that moves on unheard of was
    /// installed writable (a migratory page's trusted install) and counts as written.
    pub(super) fn around_written(&mut self, page: PageId) {
        self.around.resolve(page, true);
    }
}
