//! sc-mw: bounded visibility, and lock releases that may wait.
//!
//! A flush at any time is a release without a lock, which every data-race-free program
//! allows; the bounded visibility timer makes one when writes stayed unflushed for
//! `after_ns` (`SVM_FLUSH_AFTER_US`). A racy program that spins on a flag another node sets
//! without a release after it (SPLASH-2 barnes's `hackcofm`, fmm's `interaction_synch` read
//! outside the lock that guards its increments) would otherwise wait for a release that may
//! never come.
//!
//! A flush lowers every page written since the last one, and a page the program goes on
//! writing takes a write fault again (and, where the home invalidated the other node's copy
//! while that node wrote it too, a fetch). A phase that writes many pages and releases nothing
//! (SPLASH-2 radix's permutation, every page of its key array written by both nodes) would
//! pay that every period, and the faults slow it down so much that it writes few pages per
//! period — a measure of "pages written again" stays low, and a 300 µs timer made 21,000
//! timed flushes per node and took radix from 0.13 s to 8 s. So the wait grows with the size
//! of the last flush instead: `after_ns` up to 16 pages, doubled for every doubling of the
//! pages beyond, at most 64 times. A flag written once per hand-over keeps the shortest wait.

use svm_core::protocol::{Action, Context};

use super::sync::PushAfter;
use super::{HomeMw, Mode};

/// The wait doubles at most this many times (`after_ns` × 64).
const MAX_DOUBLINGS: u32 = 6;

/// A flush of up to this many pages keeps the shortest wait.
const PAGES_AT_SHORTEST_WAIT: usize = 16;

/// The bounded visibility timer of one node.
#[derive(Debug, Default)]
pub(crate) struct Visibility {
    /// The shortest wait (ns); 0 = off.
    pub(crate) after_ns: u64,
    /// A write since the last flush that another node may have to see (a twin made, a served
    /// home page written).
    writes: bool,
    /// When the writes since the last flush are flushed if no release flushes them first.
    due: Option<u64>,
    /// How often the wait is doubled: from the size of the last flush.
    doublings: u32,
}

impl Visibility {
    /// A write fault made a page writable.
    pub(crate) fn wrote(&mut self) {
        self.writes = true;
    }

    /// A flush (timed or a release's) sent every write so far; it lowered `pages` pages.
    pub(crate) fn flushed(&mut self, pages: usize) {
        self.writes = false;
        self.due = None;
        let mut doublings = 0;
        while doublings < MAX_DOUBLINGS && pages > PAGES_AT_SHORTEST_WAIT << doublings {
            doublings += 1;
        }
        self.doublings = doublings;
    }
}

impl HomeMw {
    /// sc-mw, after every event: the first write since the last flush starts the timer.
    pub(crate) fn arm_flush_timer(&mut self, ctx: &dyn Context) {
        let v = &mut self.visible;
        if self.mode == Mode::Eager && v.after_ns > 0 && v.writes && v.due.is_none() {
            v.due = Some(ctx.now() + (v.after_ns << v.doublings));
        }
    }

    pub(crate) fn next_timer(&self) -> Option<u64> {
        self.visible.due
    }

    /// The bounded visibility timer: flushes the writes no release has flushed.
    pub(crate) fn on_timer(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        if self.visible.due.is_none_or(|t| t > ctx.now()) {
            return;
        }
        self.stats.timed_flushes += 1;
        // Releases and barrier arrivals scan before they gather their notices; this flush
        // has none to gather, but must see the writes too.
        self.take_scanned_writes(ctx);
        self.flush(ctx, None, PushAfter::Nothing, out);
    }

    /// sc-mw: a lock release may wait for this node's next release that can tell another node
    /// anything (`Protocol::release_can_wait`; the engine bounds the wait with
    /// `SVM_RELEASE_DELAY_US`). sc-mw's releases return no notices: the flush that runs
    /// later invalidates every other copy of what the critical section wrote, as it would
    /// have at once. Not scope, whose releases hand the lock the notices of its own critical
    /// sections.
    pub(crate) fn release_can_wait(&self) -> bool {
        self.mode == Mode::Eager
    }
}

#[cfg(test)]
#[path = "home_mw_visible_tests.rs"]
mod tests;
