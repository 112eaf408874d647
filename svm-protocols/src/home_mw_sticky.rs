//! sc-mw and scope: home pages written between every two releases stay writable across
//! releases for a while (*sticky*), instead of taking a write fault after each release.
//!
//! A home lowers a page other nodes have fetched (`served`) to read-only at every release, so
//! that its next write is seen: that write is what makes the next release name the page (scope:
//! a write notice; sc-mw: the invalidation of the other copies). A page the home writes after
//! every release — a stencil's boundary rows, a shared reduction slot — takes one write fault
//! per release for that alone (Laplace at 2 nodes: 5 per iteration and node, ~10 µs each with
//! the fault's detection, on a sweep of ~200 µs).
//!
//! So a served home page whose writes the home saw (by a write fault) both in the interval
//! that a release ends and in the one before is kept writable at that release and for the
//! next [`STICKY_RELEASES`] releases, and each of them treats it as written: it names it
//! (scope) or invalidates the other copies (sc-mw) as after a real write, so no write can go
//! unannounced. What this costs is the announcements of intervals in which the home did not
//! write it: at most [`STICKY_RELEASES`] after the home stopped writing it, after which the
//! page is lowered to read-only again as before. If the home still writes it, two write faults
//! in the next two intervals make it sticky again (two faults per [`STICKY_RELEASES`] + 2
//! releases); a page written in every second interval only, or once in a while, never stays
//! writable.

use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

use svm_core::protocol::PageId;

/// Releases a sticky page stays writable without a write being seen (see the module docs).
pub(super) const STICKY_RELEASES: u8 = 16;

/// The sticky home pages of one node.
#[derive(Debug, Default)]
pub(super) struct Sticky {
    /// Each sticky page and the releases it stays writable for.
    left: FxHashMap<PageId, u8>,
    /// Home pages whose write this node saw (a fault, or write-ahead) since the last release.
    seen_now: BTreeSet<PageId>,
    /// The served ones among them at the last release.
    seen_last: BTreeSet<PageId>,
}

impl Sticky {
    /// This node saw a write to its home page `page`: a write fault made it writable. (Not a
    /// page counted as written for another reason: a sticky one, or one a first fetch found
    /// writable, whose writes no fault saw.)
    pub(super) fn wrote(&mut self, page: PageId) {
        self.seen_now.insert(page);
    }

    /// At a release: `written` are the served home pages written since the last one (sticky
    /// pages included). Returns those that stay writable, sorted; the caller lowers the others
    /// to read-only and counts the returned ones as written again in the next interval.
    pub(super) fn at_release(&mut self, written: &BTreeSet<PageId>) -> Vec<PageId> {
        // A sticky page is written at every release (the caller counts it so); one that is
        // not was lowered some other way and is not kept.
        self.left.retain(|p, _| written.contains(p));
        let mut keep = Vec::new();
        for &p in written {
            match self.left.get_mut(&p) {
                Some(left) if *left > 1 => {
                    *left -= 1;
                    keep.push(p);
                }
                Some(_) => {
                    self.left.remove(&p);
                }
                None if self.seen_now.contains(&p) && self.seen_last.contains(&p) => {
                    self.left.insert(p, STICKY_RELEASES);
                    keep.push(p);
                }
                None => {}
            }
        }
        // A page that just ran out is lowered now: its next two intervals must each see a
        // write (a fault) for it to be kept again.
        let seen = std::mem::take(&mut self.seen_now);
        self.seen_last = seen.intersection(written).copied().collect();
        keep
    }

    /// Whether `page` is sticky now.
    pub(super) fn contains(&self, page: PageId) -> bool {
        self.left.contains_key(&page)
    }

    pub(super) fn forget(&mut self, pages: &std::ops::Range<PageId>) {
        self.left.retain(|p, _| !pages.contains(p));
        self.seen_now.retain(|p| !pages.contains(p));
        self.seen_last.retain(|p| !pages.contains(p));
    }
}
