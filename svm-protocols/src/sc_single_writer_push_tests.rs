//! Unit tests of sc-sw's producer–consumer push at barrier arrivals (`SVM_PUSH`).

use super::push::{PUSH_BUDGET, PUSH_BUDGET_MAX};
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
        msg: ProtoMsg::Push { page: P },
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
    arrive(&mut h, 1);
    let out = on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P });
    assert!(out.contains(&Action::Send {
        to: 1,
        msg: ProtoMsg::Grant {
            page: P,
            access: Access::Read,
            with_data: true
        },
        attach: Some(P)
    }));
    for round in 0..PUSH_BUDGET {
        home_writes(&mut h);
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

/// Pushes of P the home makes at its barrier arrivals, each after writing P, until one
/// arrival pushes nothing.
fn pushes_until_the_budget_runs_out(h: &mut ScSingleWriter, token: &mut u64) -> u32 {
    let mut pushes = 0;
    loop {
        home_writes(h);
        *token += 1;
        if !pushed_to(&arrive(h, *token), 1) {
            return pushes;
        }
        pushes += 1;
    }
}

#[test]
fn a_consumer_that_asks_again_after_its_pushes_ran_out_earns_twice_as_many() {
    let mut h = ScSingleWriter::with_prefetch(0).with_push();
    on_fault(&mut h, P, Access::Write);
    arrive(&mut h, 1);
    let mut token = 1;
    let mut budget = PUSH_BUDGET as u32;
    for _ in 0..6 {
        on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P });
        assert_eq!(pushes_until_the_budget_runs_out(&mut h, &mut token), budget);
        budget = (budget * 2).min(PUSH_BUDGET_MAX as u32);
    }
    assert_eq!(budget, PUSH_BUDGET_MAX as u32, "capped");
    // A request while pushes are left only refills the budget at its current size.
    on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P });
    home_writes(&mut h);
    token += 1;
    assert!(pushed_to(&arrive(&mut h, token), 1));
    on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P });
    assert_eq!(
        pushes_until_the_budget_runs_out(&mut h, &mut token),
        PUSH_BUDGET_MAX as u32
    );
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

/// Node 1 of 3, a consumer of pages homed at node 0.
fn consumer_ctx() -> StaticContext<impl Fn(PageId) -> NodeId> {
    StaticContext {
        me: 1,
        nodes: 3,
        homes: |_| 0,
    }
}

#[test]
fn a_consumer_drops_a_pushed_copy_after_a_phase_and_discards_pushes_its_home_sent_before_the_drop_was_done(
) {
    let c = consumer_ctx();
    let mut n = ScSingleWriter::with_prefetch(0).with_push();
    let mut out = Vec::new();
    let mut step = |n: &mut ScSingleWriter, f: &dyn Fn(&mut ScSingleWriter, &mut Vec<Action>)| {
        out.clear();
        f(n, &mut out);
        out.clone()
    };
    let push = |n: &mut ScSingleWriter, out: &mut Vec<Action>| {
        n.on_message(&c, 0, &ProtoMsg::Push { page: P }, 64, out)
    };
    let installed = vec![Action::InstallIncoming {
        page: P,
        access: Access::Read,
    }];
    let arrive = |n: &mut ScSingleWriter, out: &mut Vec<Action>| n.on_barrier_arrive(&c, 1, out);
    let depart =
        |n: &mut ScSingleWriter, out: &mut Vec<Action>| n.on_barrier_depart(&c, 2, &[], out);
    let inval = |n: &mut ScSingleWriter, out: &mut Vec<Action>| {
        n.on_message(&c, 0, &ProtoMsg::Inval { page: P }, 0, out)
    };
    // A first pushed copy is kept: nothing says the home writes the page again soon.
    assert_eq!(step(&mut n, &push), installed);
    for _ in 0..2 {
        assert_eq!(step(&mut n, &arrive).len(), 1, "only ReleaseDone");
        step(&mut n, &depart);
    }
    // The home's next write takes it: the next pushed copy is dropped after a phase of use.
    step(&mut n, &inval);
    assert_eq!(step(&mut n, &push), installed);
    assert_eq!(
        step(&mut n, &arrive).len(),
        1,
        "kept through the phase it came for"
    );
    step(&mut n, &depart);
    // The next arrival drops it and tells the home.
    let out = step(&mut n, &arrive);
    assert_eq!(
        &out[..2],
        &[
            Action::SetAccess {
                page: P,
                access: Access::None
            },
            Action::Send {
                to: 0,
                msg: ProtoMsg::Dropped { page: P },
                attach: None
            }
        ]
    );
    assert_eq!(n.stats().copies_dropped, 1);
    // A push the home sent before it saw the drop is discarded; one after its answer is not.
    assert!(step(&mut n, &push).is_empty());
    assert!(n.describe(P).contains("access None"));
    let ack = |n: &mut ScSingleWriter, out: &mut Vec<Action>| {
        n.on_message(&c, 0, &ProtoMsg::DropAck { page: P }, 0, out)
    };
    step(&mut n, &ack);
    assert_eq!(step(&mut n, &push), installed);
    // Still needed after a drop (a fault on it): pushed copies are kept again.
    step(&mut n, &inval);
    let fault =
        |n: &mut ScSingleWriter, out: &mut Vec<Action>| n.on_fault(&c, P, Access::Read, out);
    assert_eq!(step(&mut n, &arrive).len(), 1);
    step(&mut n, &depart);
    step(&mut n, &push);
    step(&mut n, &depart);
    let out = step(&mut n, &arrive);
    assert!(out.iter().any(|a| matches!(
        a,
        Action::Send {
            msg: ProtoMsg::Dropped { .. },
            ..
        }
    )));
    step(&mut n, &ack);
    assert!(!step(&mut n, &fault).is_empty(), "asks the home again");
    n.on_message(&c, 0, &grant_read(), 64, &mut Vec::new());
    step(&mut n, &inval);
    assert_eq!(step(&mut n, &push), installed);
    step(&mut n, &depart);
    assert_eq!(
        step(&mut n, &arrive).len(),
        1,
        "kept: dropping it was wrong once"
    );
}

fn grant_read() -> ProtoMsg {
    ProtoMsg::Grant {
        page: P,
        access: Access::Read,
        with_data: true,
    }
}

#[test]
fn a_home_takes_a_dropped_copy_out_of_the_copyset_so_its_next_write_needs_no_invalidation() {
    let mut h = ScSingleWriter::with_prefetch(0).with_push();
    on_fault(&mut h, P, Access::Write);
    on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P });
    let out = on_msg(&mut h, 1, ProtoMsg::Dropped { page: P });
    assert_eq!(
        out,
        vec![Action::Send {
            to: 1,
            msg: ProtoMsg::DropAck { page: P },
            attach: None
        }]
    );
    let out = on_fault(&mut h, P, Access::Write);
    assert_eq!(
        out,
        vec![Action::SetAccess {
            page: P,
            access: Access::Write
        }],
        "no invalidation: {out:?}"
    );
}

#[test]
fn a_page_read_after_its_home_wrote_it_in_the_same_phase_is_never_pushed() {
    // Red-black Laplace: the reader needs the page while the home updates it in place.
    let mut h = ScSingleWriter::with_prefetch(0).with_push();
    on_fault(&mut h, P, Access::Write);
    arrive(&mut h, 1);
    on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P });
    arrive(&mut h, 2);
    home_writes(&mut h);
    // ... but node 1 asks again after the home's write of this phase.
    let out = on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P });
    assert!(out.iter().any(|a| matches!(a, Action::Send { to: 1, .. })));
    assert!(!pushed_to(&arrive(&mut h, 3), 1), "already there: no push");
    for token in 4..8 {
        on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P });
        home_writes(&mut h);
        assert!(!pushed_to(&arrive(&mut h, token), 1));
    }
    assert_eq!(h.stats().pages_pushed, 0);
}

#[test]
fn a_consumer_that_learned_to_drop_drops_the_copies_it_fetches_itself_too() {
    let c = consumer_ctx();
    let mut n = ScSingleWriter::with_prefetch(0).with_push();
    let mut out = Vec::new();
    let mut msg = |n: &mut ScSingleWriter, m: ProtoMsg| {
        out.clear();
        n.on_message(&c, 0, &m, 64, &mut out);
        out.clone()
    };
    let arrive = |n: &mut ScSingleWriter| {
        let mut out = Vec::new();
        n.on_barrier_arrive(&c, 1, &mut out);
        out
    };
    let depart = |n: &mut ScSingleWriter| n.on_barrier_depart(&c, 2, &[], &mut Vec::new());
    let drops = |out: &[Action]| {
        out.iter().any(|a| {
            *a == Action::Send {
                to: 0,
                msg: ProtoMsg::Dropped { page: P },
                attach: None,
            }
        })
    };
    let fault_and_fetch =
        |n: &mut ScSingleWriter,
         msg: &mut dyn FnMut(&mut ScSingleWriter, ProtoMsg) -> Vec<Action>| {
            let mut out = Vec::new();
            n.on_fault(&c, P, Access::Read, &mut out);
            assert!(!out.is_empty(), "asks the home");
            msg(n, grant_read());
        };
    // Learn: a pushed copy taken by the home's next write.
    msg(&mut n, ProtoMsg::Push { page: P });
    msg(&mut n, ProtoMsg::Inval { page: P });
    // The pushes ran out: the node fetches the page itself, and drops that copy at the
    // arrival that ends the phase, as it would a pushed one.
    fault_and_fetch(&mut n, &mut msg);
    assert!(drops(&arrive(&mut n)));
    msg(&mut n, ProtoMsg::DropAck { page: P });
    depart(&mut n);
    // A phase without the page, then a fault: it reads what the home wrote since the drop,
    // so the drop was right and the node keeps dropping.
    assert!(!drops(&arrive(&mut n)));
    depart(&mut n);
    fault_and_fetch(&mut n, &mut msg);
    assert!(drops(&arrive(&mut n)), "still learned");
    msg(&mut n, ProtoMsg::DropAck { page: P });
    depart(&mut n);
    // A fault in the phase right after a drop: the copy was still needed; keep it now.
    fault_and_fetch(&mut n, &mut msg);
    assert!(!drops(&arrive(&mut n)), "unlearned");
    depart(&mut n);
    msg(&mut n, ProtoMsg::Inval { page: P });
    fault_and_fetch(&mut n, &mut msg);
    assert!(
        !drops(&arrive(&mut n)),
        "a fetched copy is not dropped before learning"
    );
}
