//! Unit tests of sc-sw's producer–consumer push at barrier arrivals (`SVM_PUSH`).

use super::push::PUSH_BUDGET;
use super::*;
use svm_core::protocol::StaticContext;

const P: PageId = 3;

/// Node 0 of 3, home of every page.
fn home_ctx() -> StaticContext<impl Fn(PageId) -> NodeId> {
    StaticContext {
        me: 0,
        nodes: 3,
        homes: |_| 0,
    }
}

fn on_msg(h: &mut ScSingleWriter, from: NodeId, m: ProtoMsg) -> Vec<Action> {
    let mut out = Vec::new();
    h.on_message(&home_ctx(), from, &m, 0, &mut out);
    out
}

fn on_fault(h: &mut ScSingleWriter, page: PageId, a: Access) -> Vec<Action> {
    let mut out = Vec::new();
    h.on_fault(&home_ctx(), page, a, &mut out);
    out
}

fn arrive(h: &mut ScSingleWriter, token: u64) -> Vec<Action> {
    let mut out = Vec::new();
    h.on_barrier_arrive(&home_ctx(), token, &mut out);
    out
}

fn pushed_to(out: &[Action], to: NodeId) -> bool {
    out.contains(&Action::Send {
        to,
        msg: ProtoMsg::Grant {
            page: P,
            access: Access::Read,
            with_data: true,
        },
        attach: Some(P),
    })
}

/// The home writes P again: node 1's copy is invalidated first.
fn home_writes(h: &mut ScSingleWriter) {
    let out = on_fault(h, P, Access::Write);
    assert!(
        out.contains(&Action::Send {
            to: 1,
            msg: ProtoMsg::Inval { page: P },
            attach: None
        }),
        "{out:?}"
    );
    let out = on_msg(h, 1, ProtoMsg::InvalAck { page: P });
    assert!(out.contains(&Action::SetAccess {
        page: P,
        access: Access::Write
    }));
}

#[test]
fn a_home_pushes_the_page_it_wrote_to_its_reader_at_the_barrier_until_the_budget_runs_out() {
    let mut h = ScSingleWriter::with_prefetch(0).with_push();
    on_fault(&mut h, P, Access::Write);
    assert!(h.quiescent(), "no reader yet: nothing to push");
    assert!(pushed_to(
        &on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P }),
        1
    ));
    for round in 0..PUSH_BUDGET {
        home_writes(&mut h);
        assert!(!h.quiescent(), "a barrier arrival must run to push");
        let out = arrive(&mut h, 10 + round as u64);
        assert!(pushed_to(&out, 1), "round {round}: {out:?}");
        let lower = out
            .iter()
            .position(|a| {
                *a == Action::SetAccess {
                    page: P,
                    access: Access::Read,
                }
            })
            .expect("the home stops writing before the copy is read");
        let send = out
            .iter()
            .position(|a| matches!(a, Action::Send { .. }))
            .unwrap();
        assert!(lower < send, "{out:?}");
        assert!(matches!(out.last(), Some(Action::ReleaseDone { .. })));
        assert!(h.describe(P).contains("copyset [1]"), "{}", h.describe(P));
    }
    assert_eq!(h.stats().pages_pushed, PUSH_BUDGET as u64);
    // The reader never asked again: it is no consumer any more.
    home_writes(&mut h);
    assert!(h.quiescent());
    assert!(!pushed_to(&arrive(&mut h, 99), 1));
}

#[test]
fn pages_another_node_wrote_and_lock_releases_push_nothing() {
    let mut h = ScSingleWriter::with_prefetch(0).with_push();
    on_fault(&mut h, P, Access::Write);
    on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P });
    home_writes(&mut h);
    let mut out = Vec::new();
    h.on_release(&home_ctx(), 5, &mut out);
    assert_eq!(
        out,
        vec![Action::ReleaseDone {
            token: 5,
            notices: vec![]
        }],
        "a lock release does not push"
    );
    // Node 2 writes the page: it is shared by writers, not produced here.
    let out = on_msg(&mut h, 2, ProtoMsg::WriteReq { page: P });
    assert!(out.iter().any(|a| matches!(a, Action::Send { to: 2, .. })));
    on_fault(&mut h, P, Access::Write);
    on_msg(
        &mut h,
        2,
        ProtoMsg::Grant {
            page: P,
            access: Access::Write,
            with_data: true,
        },
    );
    assert!(!pushed_to(&arrive(&mut h, 6), 1));
}

#[test]
fn without_push_a_barrier_arrival_only_completes() {
    let mut h = ScSingleWriter::with_prefetch(0);
    on_fault(&mut h, P, Access::Write);
    on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P });
    home_writes(&mut h);
    assert!(h.quiescent());
    assert_eq!(
        arrive(&mut h, 7),
        vec![Action::ReleaseDone {
            token: 7,
            notices: vec![]
        }]
    );
}
