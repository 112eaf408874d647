//! Unit tests of what the home-based protocols do differently in a job of two nodes: releases
//! that do not wait for the home's acknowledgement, and scope's pushes at the global barrier
//! (`home_mw_push.rs`); and of the home pages that stay writable across releases
//! (`home_mw_sticky.rs`); driven without a cluster.

use super::push::{PUSH_BUDGET, PUSH_BUDGET_MAX};
use super::sticky::STICKY_RELEASES;
use super::*;
use crate::test_actions::installs;
use svm_core::protocol::StaticContext;

/// `nodes` nodes; pages below 100 are homed on node 0, the others on node 1.
fn ctx(me: NodeId, nodes: NodeId) -> StaticContext<impl Fn(PageId) -> NodeId> {
    StaticContext {
        me,
        nodes,
        homes: |p| if p < 100 { 0 } else { 1 },
    }
}

fn msg(p: &mut HomeMw, me: NodeId, nodes: NodeId, from: NodeId, m: ProtoMsg) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_message(&ctx(me, nodes), from, &m, 0, &mut out);
    out
}

fn fault(p: &mut HomeMw, me: NodeId, nodes: NodeId, page: PageId, a: Access) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_fault(&ctx(me, nodes), page, a, &mut out);
    out
}

fn grant(p: &mut HomeMw, me: NodeId, nodes: NodeId, page: PageId) -> Vec<Action> {
    let g = ProtoMsg::Grant {
        page,
        access: Access::Read,
        with_data: true,
    };
    msg(p, me, nodes, 0, g)
}

fn arrive(p: &mut HomeMw, me: NodeId, nodes: NodeId, all_nodes: bool) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_barrier_arrive(&ctx(me, nodes), 3, all_nodes, &mut out);
    out
}

fn depart(p: &mut HomeMw, me: NodeId, notices: &[PageId], all_nodes: bool) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_barrier_depart(&ctx(me, 2), 4, notices, all_nodes, &mut out);
    out
}

/// Where the first action of `out` that `what` picks is (it must be there).
fn position(out: &[Action], what: impl Fn(&Action) -> bool) -> usize {
    out.iter()
        .position(what)
        .unwrap_or_else(|| panic!("not in {out:?}"))
}

fn released(out: &[Action]) -> bool {
    out.iter().any(|a| matches!(a, Action::ReleaseDone { .. }))
}

fn pushes(out: &[Action]) -> Vec<PageId> {
    out.iter()
        .filter_map(|a| match a {
            Action::Send {
                msg: ProtoMsg::Push { page },
                attach: Some(data),
                ..
            } if data == page => Some(*page),
            _ => None,
        })
        .collect()
}

fn dropped(out: &[Action]) -> Vec<PageId> {
    out.iter()
        .filter_map(|a| match a {
            Action::SetAccess {
                page,
                access: Access::None,
            } => Some(*page),
            _ => None,
        })
        .collect()
}

/// Node 1 writes page 5 (homed on node 0) and releases; the home's grants come from node 0.
fn write_and_release(p: &mut HomeMw, nodes: NodeId) -> Vec<Action> {
    fault(p, 1, nodes, 5, Access::Write);
    grant(p, 1, nodes, 5);
    let mut out = Vec::new();
    p.on_release(&ctx(1, nodes), 9, &mut out);
    assert!(
        out.iter()
            .any(|a| matches!(a, Action::SendDiffs { to: 0, .. })),
        "{out:?}"
    );
    out
}

/// Two nodes: the release completes with its diffs sent, before the home acknowledges them
/// (whatever tells the home of the release follows the diffs on the same link); the protocol
/// stays busy until the acknowledgement. Three nodes: the release waits for it.
#[test]
fn a_release_waits_for_the_homes_acknowledgement_only_with_more_than_two_nodes() {
    for mode in [Mode::Notices, Mode::Eager] {
        let mut p = HomeMw::new(mode);
        assert!(released(&write_and_release(&mut p, 2)), "{mode:?}");
        assert!(
            !p.quiescent(),
            "{mode:?}: the diffs are not acknowledged yet"
        );
        msg(&mut p, 1, 2, 0, ProtoMsg::DiffAck { token: 1, page: 5 });
        assert!(p.quiescent(), "{mode:?}");

        let mut p = HomeMw::new(mode);
        assert!(!released(&write_and_release(&mut p, 3)), "{mode:?}");
        let out = msg(&mut p, 1, 3, 0, ProtoMsg::DiffAck { token: 1, page: 5 });
        assert!(released(&out), "{mode:?}");
    }
}

/// sc-mw, a home writes a page the other node has a copy of: with two nodes its release does
/// not wait for the invalidation's acknowledgement (the invalidation precedes whatever tells
/// the other node of the release); with three it does.
#[test]
fn a_homes_release_waits_for_its_invalidations_only_with_more_than_two_nodes() {
    for nodes in [2, 3] {
        let mut h = HomeMw::new(Mode::Eager);
        msg(&mut h, 0, nodes, 1, ProtoMsg::ReadReq { page: 5 });
        fault(&mut h, 0, nodes, 5, Access::Write);
        let mut out = Vec::new();
        h.on_release(&ctx(0, nodes), 9, &mut out);
        assert!(
            out.iter().any(|a| matches!(
                a,
                Action::Send {
                    to: 1,
                    msg: ProtoMsg::Inval { page: 5 },
                    ..
                }
            )),
            "{out:?}"
        );
        assert_eq!(released(&out), nodes == 2, "{nodes} nodes");
        assert!(
            !h.quiescent(),
            "{nodes} nodes: the invalidation is not acknowledged"
        );
        let out = msg(&mut h, 0, nodes, 1, ProtoMsg::InvalAck { page: 5 });
        assert_eq!(released(&out), nodes == 3, "{nodes} nodes");
        assert!(h.quiescent(), "{nodes} nodes");
    }
}

/// scope, two nodes, home side: at the global barrier the home pushes the pages it wrote that
/// the other node fetched, after stopping its writes and before the arrival leaves, within the
/// budget a fetch earns; not at a barrier of some threads, not with three nodes, not under
/// sc-mw.
#[test]
fn the_home_pushes_what_the_other_node_fetched_at_the_global_barrier() {
    let mut h = HomeMw::new(Mode::Notices);
    // Written, but never fetched: no push.
    fault(&mut h, 0, 2, 5, Access::Write);
    assert!(pushes(&arrive(&mut h, 0, 2, true)).is_empty());
    let mut budget = PUSH_BUDGET as usize;
    for round in 0..3 {
        msg(&mut h, 0, 2, 1, ProtoMsg::ReadReq { page: 5 });
        for i in 0..budget {
            fault(&mut h, 0, 2, 5, Access::Write);
            let out = arrive(&mut h, 0, 2, true);
            assert_eq!(pushes(&out), [5], "round {round}, push {i}");
            let stop = position(&out, |a| {
                matches!(
                    a,
                    Action::SetAccess {
                        page: 5,
                        access: Access::Read
                    }
                )
            });
            let push = position(&out, |a| matches!(a, Action::Send { .. }));
            let done = position(&out, |a| matches!(a, Action::ReleaseDone { .. }));
            assert!(stop < push && push < done, "{out:?}");
            // Not written in a phase: not pushed.
            assert!(pushes(&arrive(&mut h, 0, 2, true)).is_empty());
        }
        fault(&mut h, 0, 2, 5, Access::Write);
        assert!(
            pushes(&arrive(&mut h, 0, 2, true)).is_empty(),
            "round {round}"
        );
        // A phase without a write, so the next one's write is seen again (a page written in
        // two phases in a row stays writable: `home_mw_sticky.rs`).
        assert!(pushes(&arrive(&mut h, 0, 2, true)).is_empty());
        // The other node had to fetch it again: twice the budget.
        budget = (budget * 2).min(PUSH_BUDGET_MAX as usize);
    }
    assert_eq!(h.stats().pages_pushed, (8 + 16 + 32) as u64);
    // A barrier of some threads: no push.
    msg(&mut h, 0, 2, 1, ProtoMsg::ReadReq { page: 5 });
    fault(&mut h, 0, 2, 5, Access::Write);
    assert!(pushes(&arrive(&mut h, 0, 2, false)).is_empty());
    // Three nodes, or `SVM_PUSH=0`: no push.
    for (mode, nodes, on) in [
        (Mode::Notices, 3, true),
        (Mode::Eager, 3, true),
        (Mode::Notices, 2, false),
        (Mode::Eager, 2, false),
    ] {
        let mut h = HomeMw::new(mode);
        h.push = on;
        msg(&mut h, 0, nodes, 1, ProtoMsg::ReadReq { page: 5 });
        fault(&mut h, 0, nodes, 5, Access::Write);
        assert!(
            pushes(&arrive(&mut h, 0, nodes, true)).is_empty(),
            "{mode:?}"
        );
    }
}

/// scope, two nodes, reader side: a pushed copy is installed and kept through the next
/// global barrier's notices, once; never over a copy being written, one whose diffs the home
/// has not acknowledged, or while a fetch is on its way; a lock's notices or a barrier of
/// some threads drop it as usual.
#[test]
fn a_pushed_copy_survives_the_next_global_barriers_notices_only() {
    let push = ProtoMsg::Push { page: 5 };
    let mut r = HomeMw::new(Mode::Notices);
    fault(&mut r, 1, 2, 5, Access::Read);
    grant(&mut r, 1, 2, 5);
    assert_eq!(installs(&msg(&mut r, 1, 2, 0, push.clone())), [5]);
    assert!(dropped(&depart(&mut r, 1, &[5], true)).is_empty());
    // The next departure without a push drops it (and fetches it again: `refetch`); a push
    // while that fetch is on its way is not installed, the grant is.
    let out = depart(&mut r, 1, &[5], true);
    assert_eq!(dropped(&out), [5]);
    assert!(out.iter().any(|a| matches!(
        a,
        Action::Send {
            msg: ProtoMsg::ReadReq { page: 5 },
            ..
        }
    )));
    assert!(installs(&msg(&mut r, 1, 2, 0, push.clone())).is_empty());
    assert_eq!(installs(&grant(&mut r, 1, 2, 5)), [5]);
    assert_eq!(installs(&msg(&mut r, 1, 2, 0, push.clone())), [5]);
    // A lock's notices drop a pushed copy (they may stand for later writes).
    let mut out = Vec::new();
    r.on_acquire(&ctx(1, 2), 5, &[5], &mut out);
    assert_eq!(dropped(&out), [5]);
    // Pushed while no copy is here: installed as well. A barrier of some threads drops it.
    assert_eq!(installs(&msg(&mut r, 1, 2, 0, push.clone())), [5]);
    assert_eq!(dropped(&depart(&mut r, 1, &[5], false)), [5]);

    // Being written (a twin): not replaced.
    let mut r = HomeMw::new(Mode::Notices);
    fault(&mut r, 1, 2, 5, Access::Write);
    grant(&mut r, 1, 2, 5);
    assert!(installs(&msg(&mut r, 1, 2, 0, push.clone())).is_empty());
    // Released, diffs not acknowledged: not replaced either; once acknowledged, it is.
    let mut out = Vec::new();
    r.on_release(&ctx(1, 2), 9, &mut out);
    assert!(installs(&msg(&mut r, 1, 2, 0, push.clone())).is_empty());
    msg(&mut r, 1, 2, 0, ProtoMsg::DiffAck { token: 1, page: 5 });
    assert_eq!(installs(&msg(&mut r, 1, 2, 0, push.clone())), [5]);

    // Its own home pages and other job sizes: ignored.
    let mut r = HomeMw::new(Mode::Notices);
    assert!(installs(&msg(&mut r, 1, 2, 0, ProtoMsg::Push { page: 105 })).is_empty());
    assert!(installs(&msg(&mut r, 1, 3, 0, push)).is_empty());
}

/// sc-mw, two nodes: at a barrier the home pushes the page it wrote after invalidating the
/// other node's copy (same link, so the copy is dropped first) and counts the other node in
/// the copyset again; the other node installs it, unless its own diff of the page went back
/// with the invalidation's acknowledgement and the home may not have applied it yet.
#[test]
fn sc_mw_pushes_after_invalidating_and_the_reader_keeps_its_own_writes() {
    let mut h = HomeMw::new(Mode::Eager);
    msg(&mut h, 0, 2, 1, ProtoMsg::ReadReq { page: 5 });
    fault(&mut h, 0, 2, 5, Access::Write);
    let out = arrive(&mut h, 0, 2, false);
    let sent = |m: ProtoMsg| move |a: &Action| matches!(a, Action::Send { msg, .. } if *msg == m);
    let inval = position(&out, sent(ProtoMsg::Inval { page: 5 }));
    let push = position(&out, sent(ProtoMsg::Push { page: 5 }));
    let done = position(&out, |a| matches!(a, Action::ReleaseDone { .. }));
    assert!(inval < push && push < done, "{out:?}");
    // The other node is in the copyset again: the next write there invalidates it.
    msg(&mut h, 0, 2, 1, ProtoMsg::InvalAck { page: 5 });
    fault(&mut h, 0, 2, 5, Access::Write);
    let out = arrive(&mut h, 0, 2, false);
    assert!(out.iter().any(|a| matches!(
        a,
        Action::Send {
            msg: ProtoMsg::Inval { page: 5 },
            ..
        }
    )));

    // Reader: a clean copy invalidated, then pushed: installed.
    let mut r = HomeMw::new(Mode::Eager);
    fault(&mut r, 1, 2, 5, Access::Read);
    grant(&mut r, 1, 2, 5);
    msg(&mut r, 1, 2, 0, ProtoMsg::Inval { page: 5 });
    assert_eq!(
        installs(&msg(&mut r, 1, 2, 0, ProtoMsg::Push { page: 5 })),
        [5]
    );
    // A copy being written when invalidated: its diff goes back with the acknowledgement;
    // until a release has named it and the home acknowledged that, no push replaces it.
    fault(&mut r, 1, 2, 5, Access::Write);
    msg(&mut r, 1, 2, 0, ProtoMsg::Inval { page: 5 });
    assert!(installs(&msg(&mut r, 1, 2, 0, ProtoMsg::Push { page: 5 })).is_empty());
    let mut out = Vec::new();
    r.on_release(&ctx(1, 2), 9, &mut out);
    assert!(installs(&msg(&mut r, 1, 2, 0, ProtoMsg::Push { page: 5 })).is_empty());
    msg(&mut r, 1, 2, 0, ProtoMsg::DiffAck { token: 1, page: 5 });
    assert_eq!(
        installs(&msg(&mut r, 1, 2, 0, ProtoMsg::Push { page: 5 })),
        [5]
    );
}

fn lowered(out: &[Action], page: PageId) -> bool {
    out.iter()
        .any(|a| matches!(a, Action::SetAccess { page: p, access: Access::Read } if *p == page))
}

fn notices(out: &[Action]) -> Vec<PageId> {
    out.iter()
        .find_map(|a| match a {
            Action::ReleaseDone { notices, .. } => Some(notices.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn invalidated(out: &[Action]) -> Vec<PageId> {
    out.iter()
        .filter_map(|a| match a {
            Action::Send {
                msg: ProtoMsg::Inval { page },
                ..
            } => Some(*page),
            _ => None,
        })
        .collect()
}

/// A home page another node fetched, written in two intervals in a row, stays writable at
/// the releases that follow, each of which announces it as written (scope: its notices; sc-mw:
/// the invalidation of the other copies), for `STICKY_RELEASES` releases; then it is lowered
/// again, and a release after an interval without a write names nothing. A page written in
/// every second interval only is lowered at every release.
#[test]
fn a_home_page_written_after_every_release_stays_writable_and_announced() {
    for (mode, nodes) in [
        (Mode::Notices, 2),
        (Mode::Notices, 3),
        (Mode::Eager, 2),
        (Mode::Eager, 3),
    ] {
        let case = format!("{mode:?}, {nodes} nodes");
        let mut h = HomeMw::new(mode);
        h.push = false;
        let fetch = |h: &mut HomeMw| msg(h, 0, nodes, 1, ProtoMsg::ReadReq { page: 5 });
        // Announced at a release: named (scope), the other copy invalidated (sc-mw).
        let announced = |out: &[Action]| match mode {
            Mode::Notices => notices(out) == [5],
            Mode::Eager => invalidated(out) == [5],
        };
        fetch(&mut h);
        assert!(!fault(&mut h, 0, nodes, 5, Access::Write).is_empty());
        let out = arrive(&mut h, 0, nodes, true);
        assert!(lowered(&out, 5) && announced(&out), "{case}: {out:?}");
        // Written again in the next interval: kept writable from this release on.
        fetch(&mut h);
        assert!(!fault(&mut h, 0, nodes, 5, Access::Write).is_empty());
        let out = arrive(&mut h, 0, nodes, true);
        assert!(!lowered(&out, 5) && announced(&out), "{case}: {out:?}");
        assert!(
            !h.quiescent(),
            "{case}: a sticky page is a write to announce"
        );
        for i in 1..STICKY_RELEASES {
            // No write fault can be seen; every release announces the page all the same.
            fetch(&mut h);
            let out = arrive(&mut h, 0, nodes, true);
            assert!(
                !lowered(&out, 5) && announced(&out),
                "{case}, release {i}: {out:?}"
            );
        }
        fetch(&mut h);
        let out = arrive(&mut h, 0, nodes, true);
        assert!(
            lowered(&out, 5) && announced(&out),
            "{case}: ran out: {out:?}"
        );
        // Not written since: nothing to announce.
        fetch(&mut h);
        let out = arrive(&mut h, 0, nodes, true);
        assert!(!announced(&out) && !lowered(&out, 5), "{case}: {out:?}");
        // Written in every second interval: lowered at every release.
        for round in 0..3 {
            fetch(&mut h);
            assert!(!fault(&mut h, 0, nodes, 5, Access::Write).is_empty());
            let out = arrive(&mut h, 0, nodes, true);
            assert!(
                lowered(&out, 5) && announced(&out),
                "{case}, {round}: {out:?}"
            );
            let out = arrive(&mut h, 0, nodes, true);
            assert!(!announced(&out), "{case}, {round}: {out:?}");
        }
    }
}
