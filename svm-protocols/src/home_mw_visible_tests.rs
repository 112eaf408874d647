//! Unit tests of sc-mw's bounded visibility (`SVM_FLUSH_AFTER_US`), driven without a cluster
//! on a clock the test sets.

use super::*;
use svm_core::protocol::{Access, NodeId, PageId, ProtoMsg, Protocol};

use crate::test_actions::diffs_sent;
use crate::{ScMultiWriter, Scope};

const AFTER: u64 = 1_000;
/// Homed on node 1 (this node, 0, writes it through a twin).
const REMOTE: PageId = 3;

/// Node 0 of 2, every page homed on node 1, at a time the test sets.
struct Timed {
    now: u64,
}

impl Context for Timed {
    fn me(&self) -> NodeId {
        0
    }
    fn nodes(&self) -> NodeId {
        2
    }
    fn home(&self, _page: PageId) -> NodeId {
        1
    }
    fn now(&self) -> u64 {
        self.now
    }
}

/// Node 0 writes pages `pages` (homed on node 1) at time `now`: each a fetch and a twin, or a
/// twin again on the copy a flush lowered.
fn write_pages(p: &mut dyn Protocol, pages: std::ops::Range<PageId>, now: u64) {
    let ctx = Timed { now };
    for page in pages {
        let mut out = Vec::new();
        p.on_fault(&ctx, page, Access::Write, &mut out);
        let grant = ProtoMsg::Grant {
            page,
            access: Access::Read,
            with_data: true,
        };
        p.on_message(&ctx, 1, &grant, 0, &mut out);
    }
}

fn timer(p: &mut dyn Protocol, now: u64) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_timer(&Timed { now }, &mut out);
    out
}

#[test]
fn unreleased_writes_are_flushed_when_the_timer_runs_out() {
    let mut p = ScMultiWriter::new().with_flush_after(AFTER);
    assert_eq!(p.next_timer(), None, "nothing written, no timer");
    write_pages(&mut p, REMOTE..REMOTE + 1, 100);
    assert_eq!(p.next_timer(), Some(100 + AFTER));
    assert!(!p.quiescent());
    assert!(timer(&mut p, 100 + AFTER - 1).is_empty(), "not due yet");
    let out = timer(&mut p, 100 + AFTER);
    assert_eq!(diffs_sent(&out), 1, "{out:?}");
    assert!(
        out.contains(&Action::SetAccess {
            page: REMOTE,
            access: Access::Read
        }),
        "the writer's copy is lowered as at a release: {out:?}"
    );
    assert_eq!(p.next_timer(), None);
    assert_eq!(p.stats().timed_flushes, 1);
}

#[test]
fn the_wait_grows_with_the_size_of_the_last_flush() {
    let mut p = ScMultiWriter::new().with_flush_after(AFTER);
    let mut now = 0;
    // (pages written, then flushed, wait before the next timed flush)
    let small = PAGES_AT_SHORTEST_WAIT as u64;
    for (pages, doublings) in [
        (1, 0),
        (small, 0),
        (small + 1, 1),
        (2 * small, 1),
        (2 * small + 1, 2),
        (64 * small + 1, MAX_DOUBLINGS),
        (3, 0),
    ] {
        write_pages(&mut p, 10..10 + pages, now);
        let due = p.next_timer().expect("armed");
        now = due;
        assert_eq!(diffs_sent(&timer(&mut p, now)), 1);
        write_pages(&mut p, 10..11, now);
        assert_eq!(
            p.next_timer(),
            Some(now + (AFTER << doublings)),
            "after a flush of {pages} pages"
        );
        now = p.next_timer().unwrap();
        timer(&mut p, now);
    }
    // A release's flush counts too: a barrier after a phase that wrote many pages.
    write_pages(&mut p, 10..10 + 4 * small, now);
    let mut out = Vec::new();
    p.on_release(&Timed { now }, 7, &mut out);
    assert!(out.contains(&Action::ReleaseDone {
        token: 7,
        notices: Vec::new()
    }));
    write_pages(&mut p, 10..11, now);
    assert_eq!(p.next_timer(), Some(now + (AFTER << 2)));
}

#[test]
fn off_by_default_and_never_under_scope() {
    let mut plain = ScMultiWriter::new();
    write_pages(&mut plain, REMOTE..REMOTE + 1, 5);
    assert_eq!(plain.next_timer(), None);
    let mut scope = Scope::new().with_flush_after(AFTER);
    write_pages(&mut scope, REMOTE..REMOTE + 1, 5);
    assert_eq!(
        scope.next_timer(),
        None,
        "scope's readers see writes through notices at acquires, not by invalidation"
    );
    assert!(ScMultiWriter::new().release_can_wait());
    assert!(!Scope::new().release_can_wait());
}
