//! Pages that travel with their lock (`SVM_LOCK_PAGES=1`, off by default; protocols that ask
//! for it: `Protocol::keeps_pages_for_locks`, sc-sw). Why off: docs/protocols.md.
//!
//! A lock-bound program moves a lock and the data it guards from node to node together: the
//! new holder gets the token, then faults on the page its critical section reads and writes
//! (a task queue's head, a counter), one round trip after the other. SPLASH-2 radiosity at
//! p = 2: its task lock moved 5,196 times and the page of the queue it guards was fetched
//! 5,307 times; raytrace: 2,554 moves of its ray-id lock, 3,279 fetches of that counter's page.
//!
//! So a node learns which pages each lock's critical sections had to ask another node for
//! (up to [`PAGES_PER_LOCK`], the most recent), and
//! - when one of its threads asks for the lock and the token is elsewhere, it asks for those
//!   pages too, for write access, with no thread waiting for them (`Node::ask_early`, as a
//!   bulk copy does):
//!   the pages that critical sections of the lock both faulted on twice and wrote (the data
//!   the lock guards; pages only read there are shared data the section looks at, and a
//!   page faulted on once is a task or a record that happened to pass through), and that
//!   were not asked for in vain lately (gone again when the section ended: another node uses
//!   them outside the lock — [`LockPages::judge`]);
//! - while the lock's token is here and another node has asked for it, it keeps those pages
//!   ([`crate::protocol::Context::kept_for_lock`]): a request for one waits, so the critical
//!   section under way does not lose its page, and goes on when the token leaves — in the
//!   same step, just before the token on the same link, so the acquirer's thread finds the
//!   page installed when the grant wakes it — or after [`KEEP_MAX_NS`] at most.
//!
//! Sequential consistency is untouched: a page asked for early is what the thread would have
//! asked for a moment later, and a request that waits only moves later, never out of order
//! (as for sc-sw's minimum hold). A wrong guess costs a page moved for nothing, or a request
//! kept waiting for at most [`KEEP_MAX_NS`] — which is also what bounds the wait where the
//! holder of the lock itself waits for something else (a barrier, a page the asker keeps).

use std::sync::atomic::Ordering;

use rustc_hash::FxHashMap;

use super::{EngineError, EngineState, Node, NO_LOCK};
use crate::protocol::Access;
use crate::PageId;

/// Pages remembered per lock: a critical section that touches more than this is not the
/// short, lock-bound kind this is for.
pub(super) const PAGES_PER_LOCK: usize = 4;

/// The longest a request waits because of a lock (ns): a few local hand-offs of a short
/// critical section; beyond it the page goes anyway.
pub(super) const KEEP_MAX_NS: u64 = 500_000;

/// How sure a node is that a page asked for along with a lock is used: a fault on it in a
/// critical section of the lock, or finding it here at the lock's release after asking for
/// it, adds one (up to this); asking for it in vain (gone again by the release) takes
/// [`SCORE_MISS`]. Pages are asked for while the score is not negative.
const SCORE_MAX: i8 = 3;
const SCORE_MISS: i8 = 2;
const SCORE_MIN: i8 = -8;

/// One page of a lock (see [`LockPages::learned`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LockPage {
    page: PageId,
    /// The most access a fault in a critical section asked for.
    access: Access,
    /// See [`SCORE_MAX`].
    score: i8,
}

impl LockPage {
    /// Whether the page goes with its lock: asked for along with it, kept while its token is
    /// wanted elsewhere (faulted on in two critical sections, written there, and not asked
    /// for in vain lately; see the module docs).
    fn travels(&self) -> bool {
        self.score >= 1 && self.access == Access::Write
    }
}

/// What this node knows of its locks' pages (see the module docs).
#[derive(Debug, Default)]
pub(super) struct LockPages {
    /// Per lock: the pages this node's threads had to ask another node for while holding
    /// it, oldest first.
    learned: FxHashMap<u64, Vec<LockPage>>,
    /// Per lock: the pages asked for along with this node's last request for it, judged at
    /// the release that ends the critical section ([`LockPages::judge`]).
    asked: FxHashMap<u64, Vec<PageId>>,
    /// Pages kept for a lock whose token is here and wanted elsewhere: page → (lock, since
    /// when, ns as `EngineState::now`).
    kept: FxHashMap<PageId, (u64, u64)>,
}

impl LockPages {
    /// A thread of this node holding `lock` had to ask another node for `access` to `page`.
    pub(super) fn learn(&mut self, lock: u64, page: PageId, access: Access) {
        let pages = self.learned.entry(lock).or_default();
        let known = match pages.iter().position(|p| p.page == page) {
            Some(i) => {
                let p = pages.remove(i);
                LockPage {
                    page,
                    access: p.access.max(access),
                    score: (p.score + 1).min(SCORE_MAX),
                }
            }
            None => LockPage {
                page,
                access,
                score: 0,
            },
        };
        if pages.len() == PAGES_PER_LOCK {
            pages.remove(0);
        }
        pages.push(known);
    }

    /// A thread of this node holding `lock` wrote `page`, which it had already (a page
    /// granted exclusively after a read, sc-sw's migratory pages): a page of the lock that is
    /// read is also written in its critical sections.
    pub(super) fn wrote(&mut self, lock: u64, page: PageId) {
        if let Some(p) = self
            .learned
            .get_mut(&lock)
            .and_then(|pages| pages.iter_mut().find(|p| p.page == page))
        {
            p.access = Access::Write;
        }
    }

    /// The pages to ask for along with a request for `lock`, with the access to ask for:
    /// remembered as asked, to be judged at the release ([`LockPages::judge`]).
    pub(super) fn pages_to_ask(&mut self, lock: u64) -> Vec<(PageId, Access)> {
        let pages: Vec<(PageId, Access)> = self
            .learned
            .get(&lock)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter(|p| p.travels())
            .map(|p| (p.page, p.access))
            .collect();
        if !pages.is_empty() {
            self.asked
                .insert(lock, pages.iter().map(|&(p, _)| p).collect());
        }
        pages
    }

    /// A critical section of `lock` ends here: each page asked for along with the lock is
    /// judged by `here(page)`, whether this node still has it (it came and stayed for the
    /// section) or not (it came for nothing, or never: another node kept using it).
    pub(super) fn judge(&mut self, lock: u64, here: impl Fn(PageId) -> bool) {
        let Some(asked) = self.asked.remove(&lock) else {
            return;
        };
        let Some(pages) = self.learned.get_mut(&lock) else {
            return;
        };
        for page in asked {
            if let Some(p) = pages.iter_mut().find(|p| p.page == page) {
                p.score = if here(page) {
                    (p.score + 1).min(SCORE_MAX)
                } else {
                    (p.score - SCORE_MISS).max(SCORE_MIN)
                };
            }
        }
    }

    /// `lock`'s token is here and another node asked for it: keep its pages from `now` on
    /// (a page kept already stays kept from when it was first).
    pub(super) fn keep(&mut self, lock: u64, now: u64) {
        for p in self.learned.get(&lock).map_or(&[][..], Vec::as_slice) {
            if p.travels() {
                self.kept.entry(p.page).or_insert((lock, now));
            }
        }
    }

    /// `lock`'s token left: its pages are kept no more. Returns whether any were.
    pub(super) fn let_go(&mut self, lock: u64) -> bool {
        let before = self.kept.len();
        self.kept.retain(|_, &mut (l, _)| l != lock);
        self.kept.len() != before
    }

    /// Whether a request for `page` waits at `now` (see [`LockPages::keep`], [`KEEP_MAX_NS`]).
    pub(super) fn kept(&self, page: PageId, now: u64) -> bool {
        self.kept
            .get(&page)
            .is_some_and(|&(_, since)| now.saturating_sub(since) < KEEP_MAX_NS)
    }

    /// Forgets the pages of a destroyed region.
    pub(super) fn forget(&mut self, pages: &std::ops::Range<PageId>) {
        for v in self.learned.values_mut() {
            v.retain(|p| !pages.contains(&p.page));
        }
        self.learned.retain(|_, v| !v.is_empty());
        for v in self.asked.values_mut() {
            v.retain(|p| !pages.contains(p));
        }
        self.kept.retain(|p, _| !pages.contains(p));
    }
}

impl Node {
    /// Whether `proto`'s pages travel with locks here (`SVM_LOCK_PAGES` and the protocol).
    fn lock_pages_for(&self, st: &EngineState, proto: u8) -> bool {
        self.cfg.lock_pages
            && st
                .protocols
                .get(proto as usize)
                .and_then(Option::as_ref)
                .is_some_and(|p| p.keeps_pages_for_locks())
    }

    /// A thread of this node took lock `lock` (after the fast path or the engine granted it).
    pub(super) fn lock_taken(&self, lock: u64) {
        if self.cfg.lock_pages {
            self.lock_in_use.store(lock, Ordering::Relaxed);
        }
    }

    /// A thread of this node is releasing lock `lock`.
    pub(super) fn lock_given_back(&self, lock: u64) {
        if self.cfg.lock_pages {
            let _ = self.lock_in_use.compare_exchange(
                lock,
                NO_LOCK,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// A fault on `page` for `need` just went to protocol `proto`: if it must wait for another
    /// node while a thread of this node holds a lock, the page is one of that lock's; a write
    /// this node could grant itself marks a page of the lock as written.
    pub(super) fn learn_lock_page(
        &self,
        st: &mut EngineState,
        page: PageId,
        proto: u8,
        need: Access,
    ) {
        let lock = self.lock_in_use.load(Ordering::Relaxed);
        if lock == NO_LOCK || !self.lock_pages_for(st, proto) {
            return;
        }
        if st.pages.access(page) < need {
            st.lock_pages.learn(lock, page, need);
        } else if need == Access::Write {
            st.lock_pages.wrote(lock, page);
        }
    }

    /// A thread of this node asked for lock `lock`, whose token is elsewhere: asks for the
    /// lock's pages too, as faults would, with no thread waiting for them (`Node::ask_early`).
    pub(super) fn ask_for_lock_pages(
        &self,
        st: &mut EngineState,
        lock: u64,
    ) -> Result<(), EngineError> {
        if !self.cfg.lock_pages || st.sync.token_here(lock) {
            return Ok(());
        }
        let pages = st.lock_pages.pages_to_ask(lock);
        if pages.is_empty() {
            return Ok(());
        }
        // The lock request first, also where this node manages the lock (a message to
        // itself): the node holding the token then learns that the lock is wanted before the
        // page requests reach it on the same link, and keeps the pages for the critical
        // section under way instead of giving them up.
        self.drain_loopback(st)?;
        for (page, need) in pages {
            if self.ask_early(st, page, need, |st, proto| self.lock_pages_for(st, proto))? {
                st.counters.lock_pages_asked += 1;
            }
        }
        Ok(())
    }

    /// A thread of this node releases `lock` through the engine: the pages asked for along
    /// with the lock are judged by whether they are still here.
    pub(super) fn judge_lock_pages(&self, st: &mut EngineState, lock: u64) {
        let pages = &st.pages;
        st.lock_pages
            .judge(lock, |p| pages.access(p) > Access::None);
    }

    /// A message about `lock` arrived: if its token is here and another node asked for it,
    /// keep the lock's pages until the token leaves.
    pub(super) fn keep_lock_pages(&self, st: &mut EngineState, lock: u64) {
        if self.cfg.lock_pages && st.sync.token_here(lock) && st.sync.lock_successor(lock).is_some()
        {
            st.lock_pages.keep(lock, st.now);
        }
    }

    /// `lock`'s token is about to leave this node: requests kept for its pages go on now,
    /// before the token on the same link, so the acquirer installs them before its thread
    /// wakes up with the lock.
    pub(super) fn lock_pages_let_go(
        &self,
        st: &mut EngineState,
        lock: u64,
    ) -> Result<(), EngineError> {
        if !st.lock_pages.let_go(lock) {
            return Ok(());
        }
        for proto in 0..st.protocols.len() {
            if !self.lock_pages_for(st, proto as u8) {
                continue;
            }
            let mut acts = Vec::new();
            let ctx = node_ctx!(self, st);
            if let Some(p) = st.protocols[proto].as_mut() {
                p.recheck_kept(&ctx, &mut acts);
            }
            self.run_actions(st, proto as u8, acts, &[])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a request for `lock` would ask for now (forgetting that it asked).
    fn asks(lp: &mut LockPages, lock: u64) -> Vec<(PageId, Access)> {
        let asked = lp.pages_to_ask(lock);
        lp.asked.remove(&lock);
        asked
    }

    /// `page` faulted on for `access` in two critical sections of `lock`.
    fn learn_twice(lp: &mut LockPages, lock: u64, page: PageId, access: Access) {
        lp.learn(lock, page, access);
        lp.learn(lock, page, access);
    }

    #[test]
    fn a_lock_asks_for_the_latest_pages_written_in_two_of_its_critical_sections() {
        let mut lp = LockPages::default();
        lp.learn(7, 10, Access::Write);
        assert!(asks(&mut lp, 7).is_empty(), "one fault is no pattern yet");
        lp.learn(7, 10, Access::Read);
        assert_eq!(
            asks(&mut lp, 7),
            [(10, Access::Write)],
            "the most access asked for"
        );
        // Read only: shared data the critical section looks at, not what the lock guards.
        learn_twice(&mut lp, 7, 11, Access::Read);
        assert_eq!(asks(&mut lp, 7), [(10, Access::Write)]);
        // Read, then written without a fault (granted exclusively with the read).
        lp.wrote(7, 11);
        lp.wrote(7, 99);
        assert_eq!(asks(&mut lp, 7), [(10, Access::Write), (11, Access::Write)]);
        for p in 12..12 + PAGES_PER_LOCK as u64 {
            learn_twice(&mut lp, 7, p, Access::Write);
        }
        let got: Vec<PageId> = asks(&mut lp, 7).iter().map(|&(p, _)| p).collect();
        assert_eq!(
            got,
            (12..12 + PAGES_PER_LOCK as u64).collect::<Vec<_>>(),
            "the latest"
        );
        assert!(asks(&mut lp, 8).is_empty());
    }

    #[test]
    fn a_page_asked_for_in_vain_is_asked_for_no_more_until_faults_show_it_is_used() {
        let mut lp = LockPages::default();
        learn_twice(&mut lp, 1, 5, Access::Write);
        learn_twice(&mut lp, 1, 6, Access::Write);
        assert_eq!(lp.pages_to_ask(1).len(), 2);
        // Page 5 was here at the release, page 6 was not.
        lp.judge(1, |p| p == 5);
        assert_eq!(lp.pages_to_ask(1), [(5, Access::Write)]);
        lp.judge(1, |_| true);
        lp.keep(1, 0);
        assert!(
            lp.kept(5, 0) && !lp.kept(6, 0),
            "only pages asked for are kept"
        );
        // Faults in critical sections of the lock show page 6 is used after all.
        learn_twice(&mut lp, 1, 6, Access::Write);
        assert_eq!(lp.pages_to_ask(1).len(), 2);
        // A judgement without a request before it changes nothing.
        lp.judge(1, |_| true);
        lp.judge(1, |_| false);
        assert_eq!(lp.pages_to_ask(1).len(), 2);
    }

    #[test]
    fn pages_are_kept_while_the_token_is_here_and_no_longer_than_the_bound() {
        let mut lp = LockPages::default();
        learn_twice(&mut lp, 1, 5, Access::Write);
        learn_twice(&mut lp, 2, 6, Access::Write);
        assert!(!lp.kept(5, 0), "nothing is kept before the lock is wanted");
        lp.keep(1, 1_000);
        assert!(lp.kept(5, 1_000) && !lp.kept(6, 1_000));
        assert!(lp.kept(5, 1_000 + KEEP_MAX_NS - 1));
        assert!(!lp.kept(5, 1_000 + KEEP_MAX_NS), "bounded in time");
        // Kept again later: the first keep's time counts.
        lp.keep(1, 5_000);
        assert!(!lp.kept(5, 1_000 + KEEP_MAX_NS));
        assert!(!lp.let_go(2), "lock 2 kept nothing");
        assert!(lp.let_go(1));
        assert!(!lp.kept(5, 1_000));
        lp.keep(1, 0);
        lp.forget(&(0..6));
        assert!(!lp.kept(5, 0));
        assert!(asks(&mut lp, 1).is_empty() && asks(&mut lp, 2) == [(6, Access::Write)]);
    }
}
