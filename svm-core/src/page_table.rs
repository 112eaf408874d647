//! Per-page local state kept by the engine beside the protocol: what protection the fault
//! backend currently gives the page, whether it is materialized, and which threads wait on it.
//! Pure data, unit-tested without processes.

use rustc_hash::FxHashMap;

use crate::fault::WaiterRef;
use crate::{Access, PageId};

/// A thread waiting for a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageWaiter {
    pub waiter: WaiterRef,
    pub need: Access,
    /// Monotonic ns when the fault was taken (service latency, deadline).
    pub since_ns: u64,
    /// Linux thread id of the faulting thread (0 = unknown), for the trace.
    pub tid: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageEntry {
    /// Protection currently set in the fault backend.
    pub access: Access,
    /// The page has local contents (userfaultfd: the PTE is populated).
    pub present: bool,
    /// The page has had local contents at some point (a static page's take-over contents no
    /// longer apply).
    pub was_present: bool,
    /// Threads waiting for more access (added through [`PageTable::add_waiter`] only, which
    /// keeps the table's count).
    waiters: Vec<PageWaiter>,
}

impl PageEntry {
    /// The threads waiting for more access to the page.
    pub fn waiters(&self) -> &[PageWaiter] {
        &self.waiters
    }
}

#[derive(Debug, Default)]
pub struct PageTable {
    pages: FxHashMap<PageId, PageEntry>,
    /// Waiters over all pages (added by [`PageTable::add_waiter`], removed as protections
    /// satisfy them).
    waiting: usize,
}

impl PageTable {
    pub fn get(&self, page: PageId) -> Option<&PageEntry> {
        self.pages.get(&page)
    }

    pub fn entry(&mut self, page: PageId) -> &mut PageEntry {
        self.pages.entry(page).or_default()
    }

    pub fn access(&self, page: PageId) -> Access {
        self.pages
            .get(&page)
            .map(|e| e.access)
            .unwrap_or(Access::None)
    }

    /// Records that a thread waits for `page` until its protection allows `w.need`.
    pub fn add_waiter(&mut self, page: PageId, w: PageWaiter) {
        self.entry(page).waiters.push(w);
        self.waiting += 1;
    }

    /// How many waits for pages there are (one per faulting thread).
    pub fn waiter_count(&self) -> usize {
        self.waiting
    }

    /// Records a new protection and returns the waiters it satisfies (removed from the page).
    pub fn set_access(
        &mut self,
        page: PageId,
        access: Access,
        present: bool,
        woken: &mut Vec<PageWaiter>,
    ) {
        let e = self.pages.entry(page).or_default();
        e.access = access;
        e.present = present;
        e.was_present |= present;
        let mut i = 0;
        while i < e.waiters.len() {
            if e.waiters[i].need <= access {
                woken.push(e.waiters.swap_remove(i));
                self.waiting = self.waiting.saturating_sub(1);
            } else {
                i += 1;
            }
        }
    }

    /// Forgets the pages of `pages` (a destroyed region). Returns a page a thread still waits
    /// for (then nothing is forgotten).
    pub fn forget(&mut self, pages: std::ops::Range<PageId>) -> Option<PageId> {
        if let Some((p, _)) = self
            .pages
            .iter()
            .find(|(p, e)| pages.contains(p) && !e.waiters.is_empty())
        {
            return Some(*p);
        }
        self.pages.retain(|p, _| !pages.contains(p));
        None
    }

    /// The waiter that has waited longest, over all pages: (page, waiter). The engine asks
    /// every few milliseconds; with nobody waiting it does not walk the table (tens of
    /// thousands of pages after a first-touch fill).
    pub fn oldest_waiter(&self) -> Option<(PageId, PageWaiter)> {
        if self.waiting == 0 {
            return None;
        }
        self.pages
            .iter()
            .flat_map(|(p, e)| e.waiters.iter().map(move |w| (*p, *w)))
            .min_by_key(|(_, w)| w.since_ns)
    }

    /// Number of pages with waiters (diagnostics).
    pub fn pages_waited_on(&self) -> usize {
        self.pages
            .values()
            .filter(|e| !e.waiters.is_empty())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_access_wakes_exactly_the_satisfied_waiters() {
        let mut t = PageTable::default();
        let w = |n, need| PageWaiter {
            waiter: WaiterRef::Slot(n),
            need,
            since_ns: n as u64,
            tid: 0,
        };
        assert_eq!(t.waiter_count(), 0);
        for x in [w(1, Access::Read), w(2, Access::Write), w(3, Access::Read)] {
            t.add_waiter(7, x);
        }
        assert!(t.waiter_count() > 0);
        let mut woken = Vec::new();
        t.set_access(7, Access::Read, true, &mut woken);
        assert!(t.waiter_count() > 0, "one still waits for write access");
        let mut ids: Vec<_> = woken.iter().map(|w| w.waiter).collect();
        ids.sort_by_key(|w| format!("{w:?}"));
        assert_eq!(ids, vec![WaiterRef::Slot(1), WaiterRef::Slot(3)]);
        assert_eq!(t.oldest_waiter().unwrap().1.waiter, WaiterRef::Slot(2));
        woken.clear();
        t.set_access(7, Access::Write, true, &mut woken);
        assert_eq!(woken.len(), 1);
        assert_eq!(t.oldest_waiter(), None);
        assert_eq!(t.waiter_count(), 0);
        assert_eq!(t.access(7), Access::Write);
        assert_eq!(t.access(8), Access::None);
    }

    #[test]
    fn forgetting_refuses_pages_with_waiters() {
        let mut t = PageTable::default();
        let mut woken = Vec::new();
        t.set_access(3, Access::Write, true, &mut woken);
        t.set_access(9, Access::Read, true, &mut woken);
        t.add_waiter(
            5,
            PageWaiter {
                waiter: WaiterRef::Uffd,
                need: Access::Read,
                since_ns: 0,
                tid: 0,
            },
        );
        assert_eq!(t.forget(0..8), Some(5));
        assert_eq!(t.access(3), Access::Write, "nothing forgotten");
        assert_eq!(t.forget(0..4), None);
        assert!(t.get(3).is_none());
        assert_eq!(t.access(9), Access::Read);
    }
}
