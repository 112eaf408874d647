//! The window of a sequential scan by faults, for the read-ahead and write-ahead of the
//! home-based protocols (see [`ScanAhead`]). Pure data, unit-tested.

use svm_core::protocol::PageId;

/// The window of a sequential scan by faults (`SVM_PREFETCH` pages at most), for two uses:
///
/// - **read-ahead of a node's own fetches**: when its fetching faults walk the pages of one
///   home in order, the node also requests the following pages it has no copy of, so several
///   requests are outstanding at once and a scan of N remote pages takes about log2(N) faults
///   instead of N. A page read ahead is a copy of the master like any fetched one (sc-mw: the
///   home puts the node in its copyset; scope: write notices invalidate it), so every
///   guarantee of the protocol holds.
/// - **write-ahead on a home's own pages**: when a home's write faults on its read-only
///   (fetched-by-others, so write-tracked) pages walk them in order, the following such pages
///   become writable and count as written with the faulting one. A page counted as written
///   that the program then leaves alone costs only an unneeded invalidation elsewhere (its
///   notice or sc-mw invalidation), never a lost write: every write until the next release is
///   covered, as after a real write fault.
///
/// The window starts at 2 pages on the second fault in a row and doubles (up to `max`) each
/// time the next fault lands right after the pages taken ahead — the program went through all
/// of them; any other fault starts over with none, so nothing is taken ahead except behind an
/// ongoing sequential scan.
#[derive(Debug, Clone, Default)]
pub struct ScanAhead {
    /// Largest window in pages (0 = off).
    max: usize,
    window: usize,
    /// The page a fault must land on to continue the scan.
    next: Option<PageId>,
}

impl ScanAhead {
    pub fn new(max: usize) -> Self {
        ScanAhead {
            max,
            window: 0,
            next: None,
        }
    }

    /// A fault on `page`: the pages to take ahead with it — those of the window after `page`
    /// for which `eligible` holds, up to the first that does not. The next fault continues the
    /// scan if it lands right after them.
    pub fn take(
        &mut self,
        page: PageId,
        mut eligible: impl FnMut(PageId) -> bool,
    ) -> std::ops::Range<PageId> {
        self.window = match self.next {
            Some(n) if n == page && self.max > 0 => {
                (self.window * 2).clamp(2.min(self.max), self.max)
            }
            _ => 0,
        };
        let mut end = page + 1;
        while end <= page + self.window as PageId && eligible(end) {
            end += 1;
        }
        self.next = Some(end);
        page + 1..end
    }
}

#[cfg(test)]
mod tests {
    use super::ScanAhead;

    /// Pages in a run taken ahead.
    fn n(r: std::ops::Range<u64>) -> u64 {
        r.end - r.start
    }

    #[test]
    fn off_takes_nothing_ahead() {
        let mut a = ScanAhead::new(0);
        assert_eq!(n(a.take(4, |_| true)), 0);
        assert_eq!(n(a.take(5, |_| true)), 0);
    }

    #[test]
    fn the_window_doubles_while_faults_land_after_it_and_starts_over_elsewhere() {
        let mut a = ScanAhead::new(8);
        let all = |_| true;
        assert_eq!(n(a.take(10, all)), 0, "a first fault takes nothing ahead");
        assert_eq!(a.take(11, all), 12..14, "second fault in a row");
        assert_eq!(n(a.take(14, all)), 4);
        assert_eq!(n(a.take(19, all)), 8);
        assert_eq!(n(a.take(28, all)), 8, "capped at max");
        assert_eq!(n(a.take(100, all)), 0, "a fault elsewhere starts over");
    }

    #[test]
    fn the_run_stops_at_the_first_page_not_eligible() {
        let mut a = ScanAhead::new(8);
        a.take(10, |_| true);
        assert_eq!(a.take(11, |q| q != 13), 12..13);
        // The scan continues right after what was taken.
        assert_eq!(n(a.take(13, |_| true)), 4);
    }
}
