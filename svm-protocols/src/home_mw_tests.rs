//! Unit tests of the home-based machinery: read-ahead of a node's fetches and write-ahead on a
//! home's own pages (`SVM_PREFETCH`), driven without a cluster.

use super::*;
use svm_core::protocol::StaticContext;

/// Pages below 100 are homed on node 1, the others on node 2.
fn ctx(me: NodeId) -> StaticContext<impl Fn(PageId) -> NodeId> {
    StaticContext {
        me,
        nodes: 3,
        homes: |p| if p < 100 { 1 } else { 2 },
    }
}

fn with_prefetch(mode: Mode, pages: usize) -> HomeMw {
    let mut p = HomeMw::new(mode);
    p.fetch_ahead = ScanAhead::new(pages);
    p.write_ahead = ScanAhead::new(pages);
    p
}

fn fault(p: &mut HomeMw, me: NodeId, page: PageId, a: Access) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_fault(&ctx(me), page, a, &mut out);
    out
}

fn msg(p: &mut HomeMw, me: NodeId, from: NodeId, m: ProtoMsg) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_message(&ctx(me), from, &m, 0, &mut out);
    out
}

/// The pages of the `ReadReq`s in `out`, in order.
fn requested(out: &[Action]) -> Vec<PageId> {
    out.iter()
        .filter_map(|a| match a {
            Action::Send {
                msg: ProtoMsg::ReadReq { page },
                ..
            } => Some(*page),
            _ => None,
        })
        .collect()
}

/// The pages `out` makes writable, in order.
fn made_writable(out: &[Action]) -> Vec<PageId> {
    out.iter()
        .filter_map(|a| match a {
            Action::SetAccess {
                page,
                access: Access::Write,
            } => Some(*page),
            _ => None,
        })
        .collect()
}

fn grant(p: &mut HomeMw, me: NodeId, from: NodeId, page: PageId) {
    let g = ProtoMsg::Grant {
        page,
        access: Access::Read,
        with_data: true,
    };
    msg(p, me, from, g);
}

#[test]
fn fetching_faults_in_order_request_the_following_pages_too() {
    let mut p = with_prefetch(Mode::Notices, 8);
    assert_eq!(requested(&fault(&mut p, 0, 10, Access::Read)), [10]);
    grant(&mut p, 0, 1, 10);
    assert_eq!(requested(&fault(&mut p, 0, 11, Access::Read)), [11, 12, 13]);
    for q in 11..14 {
        grant(&mut p, 0, 1, q);
    }
    // The program went through 12 and 13: the window doubles.
    assert_eq!(
        requested(&fault(&mut p, 0, 14, Access::Read)),
        [14, 15, 16, 17, 18]
    );
    assert_eq!(p.stats.pages_read_ahead, 6);
}

#[test]
fn a_fault_out_of_order_reads_nothing_ahead() {
    let mut p = with_prefetch(Mode::Eager, 8);
    fault(&mut p, 0, 10, Access::Read);
    grant(&mut p, 0, 1, 10);
    fault(&mut p, 0, 11, Access::Read);
    assert_eq!(requested(&fault(&mut p, 0, 40, Access::Read)), [40]);
    assert_eq!(requested(&fault(&mut p, 0, 20, Access::Write)), [20]);
}

#[test]
fn read_ahead_stops_at_pages_held_or_fetched_and_at_another_home() {
    let mut p = with_prefetch(Mode::Notices, 8);
    // Page 13 is held already: the run ahead of 11 stops before it.
    fault(&mut p, 0, 13, Access::Read);
    grant(&mut p, 0, 1, 13);
    fault(&mut p, 0, 10, Access::Read);
    grant(&mut p, 0, 1, 10);
    assert_eq!(requested(&fault(&mut p, 0, 11, Access::Read)), [11, 12]);
    // Pages 98, 99 are node 1's, 100 is node 2's.
    fault(&mut p, 0, 97, Access::Read);
    grant(&mut p, 0, 1, 97);
    assert_eq!(requested(&fault(&mut p, 0, 98, Access::Read)), [98, 99]);
    // Off: never.
    let mut off = with_prefetch(Mode::Notices, 0);
    fault(&mut off, 0, 10, Access::Read);
    grant(&mut off, 0, 1, 10);
    assert_eq!(requested(&fault(&mut off, 0, 11, Access::Read)), [11]);
}

/// Node 1, home of pages 10..30, writes them, node 0 fetches them (so the home's writes are
/// tracked from then on), and a release lowers them to read-only.
fn home_with_served_pages(mode: Mode) -> HomeMw {
    let mut p = with_prefetch(mode, 8);
    for q in 10..30 {
        fault(&mut p, 1, q, Access::Write);
        msg(&mut p, 1, 0, ProtoMsg::ReadReq { page: q });
        assert_eq!(
            p.pages[&q].access,
            Access::Read,
            "page {q} lowered when served"
        );
    }
    // As after a release: nothing written since.
    p.dirty_home.clear();
    p.since_release.clear();
    p.since_barrier.clear();
    p.write_ahead = ScanAhead::new(8);
    p
}

#[test]
fn a_homes_write_faults_in_order_make_the_following_tracked_pages_writable_and_written() {
    for mode in [Mode::Eager, Mode::Notices] {
        let mut p = home_with_served_pages(mode);
        assert_eq!(made_writable(&fault(&mut p, 1, 10, Access::Write)), [10]);
        assert_eq!(
            made_writable(&fault(&mut p, 1, 11, Access::Write)),
            [11, 12, 13]
        );
        assert_eq!(
            made_writable(&fault(&mut p, 1, 14, Access::Write)),
            [14, 15, 16, 17, 18]
        );
        for q in 10..19 {
            assert!(
                p.dirty_home.contains(&q),
                "{mode:?}: page {q} counted as written"
            );
            if mode == Mode::Notices {
                assert!(p.since_release.contains(&q), "page {q} in the next notices");
            }
        }
        assert!(!p.dirty_home.contains(&19));
        assert_eq!(p.stats.pages_written_ahead, 6);
        // Out of order: only the faulting page.
        assert_eq!(made_writable(&fault(&mut p, 1, 25, Access::Write)), [25]);
    }
}

#[test]
fn a_homes_first_touch_makes_the_untouched_home_pages_around_it_writable() {
    let range = |r: std::ops::Range<PageId>| r.collect::<Vec<_>>();
    for mode in [Mode::Eager, Mode::Notices] {
        let mut p = HomeMw::new(mode);
        p.fault_around = svm_core::protocol::FaultAround::new(64);
        assert_eq!(
            made_writable(&fault(&mut p, 1, 13, Access::Read)),
            range(8..16)
        );
        assert!(
            !p.dirty_home.contains(&13),
            "{mode:?}: a read is not a write"
        );
        // Sequential: the window doubles.
        assert_eq!(
            made_writable(&fault(&mut p, 1, 16, Access::Write)),
            range(16..32)
        );
        assert!(
            p.dirty_home.contains(&16),
            "{mode:?}: the faulting write is tracked"
        );
        // Out of order: the window starts over; a page another node fetched is not fresh,
        // and the run ends in front of it.
        msg(&mut p, 1, 0, ProtoMsg::ReadReq { page: 45 });
        assert_eq!(
            made_writable(&fault(&mut p, 1, 42, Access::Write)),
            range(40..45)
        );
        // The run ends at the last page homed here (99).
        assert_eq!(
            made_writable(&fault(&mut p, 1, 97, Access::Write)),
            range(96..100)
        );
        // A page made writable by a run faults no more.
        assert!(fault(&mut p, 1, 20, Access::Write).is_empty());
    }
}

fn depart(p: &mut HomeMw, me: NodeId, notices: &[PageId]) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_barrier_depart(&ctx(me), 7, notices, false, &mut out);
    out
}

/// sc-mw: a copy the home invalidates is fetched again at the barrier departure, as many times
/// as a fault's budget allows; a fault after the budget ran out earns twice as many.
#[test]
fn a_copy_invalidated_before_a_barrier_is_fetched_again_at_the_departure() {
    use refetch::{REFETCH_BUDGET, REFETCH_BUDGET_MAX};
    let mut p = HomeMw::new(Mode::Eager);
    assert_eq!(requested(&fault(&mut p, 0, 5, Access::Read)), vec![5]);
    grant(&mut p, 0, 1, 5);
    // Without an invalidation a departure fetches nothing.
    assert!(requested(&depart(&mut p, 0, &[])).is_empty());
    let mut budget = REFETCH_BUDGET as usize;
    for round in 0..3 {
        for i in 0..budget {
            msg(&mut p, 0, 1, ProtoMsg::Inval { page: 5 });
            assert_eq!(
                requested(&depart(&mut p, 0, &[])),
                vec![5],
                "round {round}, refetch {i}"
            );
            grant(&mut p, 0, 1, 5);
        }
        // Out of budget: the copy stays lost until the node faults on it again.
        msg(&mut p, 0, 1, ProtoMsg::Inval { page: 5 });
        assert!(
            requested(&depart(&mut p, 0, &[])).is_empty(),
            "round {round}"
        );
        assert_eq!(requested(&fault(&mut p, 0, 5, Access::Read)), vec![5]);
        grant(&mut p, 0, 1, 5);
        budget = (budget * 2).min(REFETCH_BUDGET_MAX as usize);
    }
    // A page never faulted on is never fetched at a departure.
    msg(&mut p, 0, 1, ProtoMsg::Inval { page: 6 });
    assert!(requested(&depart(&mut p, 0, &[])).is_empty());
}

/// scope: the write notices of a barrier invalidate the copy at the departure, which fetches
/// it again at once; a copy whose fetch is still outstanding is not asked for twice, and pages
/// this node is home of are never fetched.
#[test]
fn scope_fetches_again_what_the_departures_notices_invalidate() {
    let mut p = HomeMw::new(Mode::Notices);
    for page in [5, 6] {
        assert_eq!(requested(&fault(&mut p, 0, page, Access::Read)), vec![page]);
        grant(&mut p, 0, 1, page);
    }
    assert_eq!(requested(&depart(&mut p, 0, &[5, 6])), vec![5, 6]);
    // 5's refetch is granted, 6's is still on its way at the next departure.
    grant(&mut p, 0, 1, 5);
    assert_eq!(requested(&depart(&mut p, 0, &[5, 6])), vec![5]);
    // Node 1's own pages (it is their home) hold the master copy: no fetch.
    let mut home = HomeMw::new(Mode::Notices);
    fault(&mut home, 1, 5, Access::Write);
    assert!(requested(&depart(&mut home, 1, &[5])).is_empty());
}

/// A context of node 1 (home of pages below 100) whose writes to its home pages are found by
/// scanning: `written` is what the page tables would report.
struct Scanning {
    written: std::cell::RefCell<Vec<PageId>>,
}

impl Context for Scanning {
    fn me(&self) -> NodeId {
        1
    }
    fn nodes(&self) -> NodeId {
        3
    }
    fn home(&self, page: PageId) -> NodeId {
        if page < 100 {
            1
        } else {
            2
        }
    }
    fn writes_scanned(&self, page: PageId) -> bool {
        page < 100
    }
    fn take_scanned_writes(&self, pages: &[PageId]) -> Vec<PageId> {
        let mut w = self.written.borrow_mut();
        let (asked, rest): (Vec<PageId>, Vec<PageId>) =
            w.drain(..).partition(|p| pages.binary_search(p).is_ok());
        *w = rest;
        asked
    }
}

/// The notices of the `ReleaseDone` in `out`.
fn released_notices(out: &[Action]) -> Vec<PageId> {
    out.iter()
        .find_map(|a| match a {
            Action::ReleaseDone { notices, .. } => Some(notices.clone()),
            _ => None,
        })
        .expect("the release completes")
}

/// scope with writes found by scanning: a served home page is named by a release exactly when
/// the page tables report it written in that interval — no write fault is needed, and none
/// goes unannounced — and the node is never quiescent while it has such a page (a lock could
/// otherwise be released through the fast path with a write nobody has seen yet).
#[test]
fn scope_names_the_served_home_pages_a_scan_finds_written() {
    let ctx = Scanning {
        written: std::cell::RefCell::new(Vec::new()),
    };
    let mut p = HomeMw::new(Mode::Notices);
    let mut out = Vec::new();
    p.on_fault(&ctx, 5, Access::Write, &mut out);
    p.on_fault(&ctx, 6, Access::Write, &mut out);
    // Node 2 fetches page 5: it is read-only from now on, and its writes are scanned.
    out.clear();
    p.on_message(&ctx, 2, &ProtoMsg::ReadReq { page: 5 }, 0, &mut out);
    assert!(
        out.iter().any(|a| matches!(
            a,
            Action::SetAccess {
                page: 5,
                access: Access::Read
            }
        )),
        "the served page is made read-only: {out:?}"
    );
    assert!(
        !p.quiescent(),
        "a served page whose writes only a scan sees"
    );
    // The first release names it: it was writable when served, so its writes so far are
    // counted as unseen.
    out.clear();
    p.on_release(&ctx, 1, &mut out);
    assert!(released_notices(&out).contains(&5));
    // An interval without a write: not named.
    out.clear();
    p.on_release(&ctx, 2, &mut out);
    assert!(!released_notices(&out).contains(&5), "{out:?}");
    // Written (no fault: the page tables tell), then released: named, and counted.
    ctx.written.borrow_mut().extend([5, 6, 7]);
    out.clear();
    p.on_release(&ctx, 3, &mut out);
    let notices = released_notices(&out);
    assert!(notices.contains(&5), "{notices:?}");
    assert!(
        !notices.contains(&7),
        "page 7 was never served: its scan is not asked for"
    );
    assert_eq!(p.stats().writes_scanned, 1);
    assert!(!p.quiescent());
    // The region destroyed: nothing of it is left to scan.
    assert!(p.forget(0..100));
    assert!(p.scan_served.is_empty());
}
