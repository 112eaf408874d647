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
    pub max: usize,
    window: usize,
    /// The page a fault must land on to continue the scan.
    pub next: Option<PageId>,
}

impl ScanAhead {
    pub fn new(max: usize) -> Self {
        ScanAhead {
            max,
            window: 0,
            next: None,
        }
    }

    /// A fault fetches `page`: how many following pages to request with it.
    pub fn window_for(&mut self, page: PageId) -> usize {
        if self.max == 0 {
            return 0;
        }
        self.window = if self.next == Some(page) {
            (self.window * 2).clamp(2.min(self.max), self.max)
        } else {
            0
        };
        self.window
    }
}

#[cfg(test)]
mod tests {
    use super::ScanAhead;

    #[test]
    fn off_takes_nothing_ahead() {
        let mut a = ScanAhead::new(0);
        a.next = Some(5);
        assert_eq!(a.window_for(5), 0);
    }

    #[test]
    fn the_window_doubles_while_faults_land_after_it_and_starts_over_elsewhere() {
        let mut a = ScanAhead::new(8);
        assert_eq!(a.window_for(10), 0, "a first fault takes nothing ahead");
        a.next = Some(11);
        assert_eq!(a.window_for(11), 2, "second fault in a row");
        a.next = Some(14);
        assert_eq!(a.window_for(14), 4);
        a.next = Some(19);
        assert_eq!(a.window_for(19), 8);
        a.next = Some(28);
        assert_eq!(a.window_for(28), 8, "capped at max");
        a.next = Some(37);
        assert_eq!(a.window_for(100), 0, "a fault elsewhere starts over");
    }
}
