//! Unit tests of sc-sw's producer–consumer push at barrier arrivals (`SVM_PUSH`).

use super::push::{PUSH_BUDGET, PUSH_BUDGET_MAX, UNCHANGED_REGAINS};
use super::*;
use svm_core::protocol::StaticContext;

const P: PageId = 3;

thread_local! {
    /// The digest of the home's contents of P (`Context::page_digest`); none by default.
    static CONTENTS: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Node 0 of 3, home of every page; its contents of P have the digest in `CONTENTS`.
struct HomeCtx;

impl Context for HomeCtx {
    fn me(&self) -> NodeId {
        0
    }
    fn nodes(&self) -> NodeId {
        3
    }
    fn home(&self, _page: PageId) -> NodeId {
        0
    }
    fn page_digest(&self, page: PageId) -> Option<u64> {
        CONTENTS.with(|c| c.get()).filter(|_| page == P)
    }
}

fn home_ctx() -> HomeCtx {
    HomeCtx
}

/// The home's contents of P change (a write where P is writable, or a grant installed).
fn contents_change() {
    CONTENTS.with(|c| c.set(Some(c.get().unwrap_or(0) + 1)));
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

fn depart(h: &mut ScSingleWriter, token: u64) -> Vec<Action> {
    let mut out = Vec::new();
    h.on_barrier_depart(&home_ctx(), token, &[], &mut out);
    out
}

const WRITABLE: Action = Action::SetAccess {
    page: P,
    access: Access::Write,
};

/// The home wrote P, node 1 read it, and the home wrote it again and pushed it at its
/// arrival: P is read-only at the home, node 1 holds the pushed copy.
fn pushed_once(h: &mut ScSingleWriter) {
    contents_change();
    on_fault(h, P, Access::Write);
    arrive(h, 1);
    depart(h, 1);
    on_msg(h, 1, ProtoMsg::ReadReq { page: P });
    // A steady consumer: its pushes last (`a_consumer_that_asks_again_after_…` tests their
    // budget).
    let m = h.managed.get_mut(&P).unwrap();
    m.push = Default::default();
    m.push.earn(PUSH_BUDGET_MAX, PUSH_BUDGET_MAX);
    home_writes(h);
    contents_change();
    assert!(pushed_to(&arrive(h, 2), 1));
    depart(h, 2);
}

/// After `pushed_once`: node 1 drops its copy, the home departs (without taking P back: no
/// two pushes two arrivals apart yet), write-faults on P in the phase after (no
/// invalidation: the copy is gone) and pushes it at its arrival: two pushes after writes,
/// two arrivals apart.
fn written_after_a_drop(h: &mut ScSingleWriter) {
    on_msg(h, 1, ProtoMsg::Dropped { page: P });
    arrive(h, 3);
    assert!(!depart(h, 3).contains(&WRITABLE), "no rhythm yet");
    assert_eq!(on_fault(h, P, Access::Write), vec![WRITABLE]);
    contents_change();
    assert!(pushed_to(&arrive(h, 4), 1));
    depart(h, 4);
}

/// A home that took P back writable at its departure 5 (after `written_after_a_drop`, node
/// 1 dropped P again).
fn taken_back() -> ScSingleWriter {
    let mut h = ScSingleWriter::with_prefetch(0).with_push();
    pushed_once(&mut h);
    written_after_a_drop(&mut h);
    on_msg(&mut h, 1, ProtoMsg::Dropped { page: P });
    arrive(&mut h, 5);
    assert!(depart(&mut h, 5).contains(&WRITABLE));
    h
}

#[test]
fn a_home_takes_write_access_back_at_its_departure_once_every_pushed_copy_is_dropped() {
    let mut h = ScSingleWriter::with_prefetch(0).with_push();
    pushed_once(&mut h);
    written_after_a_drop(&mut h);
    // The consumer drops its copy at its next arrival; the home is still computing.
    let out = on_msg(&mut h, 1, ProtoMsg::Dropped { page: P });
    assert!(
        !out.contains(&WRITABLE),
        "not before the departure: {out:?}"
    );
    arrive(&mut h, 5);
    let out = depart(&mut h, 5);
    let writable = out.iter().position(|a| *a == WRITABLE).expect("{out:?}");
    assert!(
        writable < out.len() - 1 && matches!(out.last(), Some(Action::AcquireDone { .. })),
        "{out:?}"
    );
    assert_eq!(h.stats().pages_written_ahead, 1);
    // The phase's write costs no fault, and the page is pushed at the next arrival.
    assert_eq!(on_fault(&mut h, P, Access::Write), Vec::<Action>::new());
    contents_change();
    let out = arrive(&mut h, 6);
    assert!(pushed_to(&out, 1), "{out:?}");
    assert!(out.contains(&Action::SetAccess {
        page: P,
        access: Access::Read
    }));
    // It changed: dropped after the next phase, taken back again.
    depart(&mut h, 6);
    arrive(&mut h, 7);
    on_msg(&mut h, 1, ProtoMsg::Dropped { page: P });
    assert!(depart(&mut h, 7).contains(&WRITABLE));
    assert_eq!(h.stats().pages_written_ahead, 2);
}

/// Two phases of a stencil alternating two grids, from a departure after node 1 dropped P:
/// the home writes P (a fault unless it took P back, a change of its contents if `change`)
/// and pushes it at its arrival; node 1 reads it in the next phase (the home writes the
/// other grid) and drops it at its arrival; the home departs. Whether that departure took
/// P back.
fn two_phases(h: &mut ScSingleWriter, token: &mut u64, change: bool) -> bool {
    if h.pages[&P].access != Access::Write {
        assert_eq!(on_fault(h, P, Access::Write), vec![WRITABLE]);
    }
    if change {
        contents_change();
    }
    *token += 1;
    assert!(pushed_to(&arrive(h, *token), 1));
    depart(h, *token);
    *token += 1;
    arrive(h, *token);
    on_msg(h, 1, ProtoMsg::Dropped { page: P });
    depart(h, *token).contains(&WRITABLE)
}

#[test]
fn a_page_that_keeps_changing_is_taken_back_at_every_drop() {
    let mut h = taken_back();
    let mut token = 5;
    for round in 0..20 {
        assert!(two_phases(&mut h, &mut token, true), "round {round}");
    }
    assert_eq!(h.stats().pages_written_ahead, 21);
}

#[test]
fn a_page_taken_back_and_left_unchanged_is_taken_back_until_its_allowance_runs_out() {
    let mut h = taken_back();
    let mut token = 5;
    // Not changed in the phase (not written, or written with the values it had, as Jacobi's
    // rows the heat has not reached): pushed as written — the home cannot tell — and the
    // push counts for the rhythm while the allowance earned by the pushes after writes lasts.
    for round in 0..UNCHANGED_REGAINS {
        assert!(two_phases(&mut h, &mut token, false), "round {round}");
    }
    assert!(!two_phases(&mut h, &mut token, false), "allowance spent");
    // Two pushes after write faults, two phases apart, show the rhythm again and earn twice
    // the allowance.
    assert!(!two_phases(&mut h, &mut token, true));
    assert!(two_phases(&mut h, &mut token, true));
    for round in 0..2 * UNCHANGED_REGAINS {
        assert!(two_phases(&mut h, &mut token, false), "round {round}");
    }
    assert!(!two_phases(&mut h, &mut token, false));
}

#[test]
fn a_write_fault_in_a_later_phase_than_the_one_after_the_drop_earns_nothing() {
    let mut h = ScSingleWriter::with_prefetch(0).with_push();
    pushed_once(&mut h);
    on_msg(&mut h, 1, ProtoMsg::Dropped { page: P });
    arrive(&mut h, 3);
    assert!(!depart(&mut h, 3).contains(&WRITABLE));
    arrive(&mut h, 4);
    depart(&mut h, 4);
    // Written two phases after the drop (another array of a multigrid step, say).
    assert_eq!(on_fault(&mut h, P, Access::Write), vec![WRITABLE]);
    contents_change();
    assert!(pushed_to(&arrive(&mut h, 5), 1));
    depart(&mut h, 5);
    on_msg(&mut h, 1, ProtoMsg::Dropped { page: P });
    arrive(&mut h, 6);
    assert!(!depart(&mut h, 6).contains(&WRITABLE));
    assert_eq!(h.stats().pages_written_ahead, 0);
}

#[test]
fn without_page_contents_a_dropped_page_is_left_to_its_next_write_fault() {
    let mut h = ScSingleWriter::with_prefetch(0).with_push();
    pushed_once(&mut h);
    written_after_a_drop(&mut h);
    CONTENTS.with(|c| c.set(None));
    on_msg(&mut h, 1, ProtoMsg::Dropped { page: P });
    arrive(&mut h, 5);
    assert!(!depart(&mut h, 5).contains(&WRITABLE));
    assert_eq!(on_fault(&mut h, P, Access::Write), vec![WRITABLE]);
    assert_eq!(h.stats().pages_written_ahead, 0);
}

#[test]
fn a_drop_that_arrives_after_the_departure_leaves_the_page_to_the_next_one() {
    let mut h = ScSingleWriter::with_prefetch(0).with_push();
    pushed_once(&mut h);
    written_after_a_drop(&mut h);
    arrive(&mut h, 5);
    assert!(!depart(&mut h, 5).contains(&WRITABLE));
    on_msg(&mut h, 1, ProtoMsg::Dropped { page: P });
    // This phase's write faults as before (no invalidation: the copy is gone).
    assert_eq!(on_fault(&mut h, P, Access::Write), vec![WRITABLE]);
    contents_change();
    assert!(pushed_to(&arrive(&mut h, 6), 1));
    assert!(
        !depart(&mut h, 6).contains(&WRITABLE),
        "pushed again: not idle"
    );
    assert_eq!(h.stats().pages_written_ahead, 0);
}

#[test]
fn a_consumer_that_reads_a_page_taken_back_and_written_within_the_phase_stops_its_pushes() {
    let mut h = taken_back();
    contents_change();
    // Read while the home writes it (a grid updated in place): the home lowers its access
    // before the copy leaves, as for any read, and the page is not pushed any more.
    let out = on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P });
    let lower = Action::SetAccess {
        page: P,
        access: Access::Read,
    };
    let lowered = out.iter().position(|a| *a == lower).expect("{out:?}");
    let granted = out
        .iter()
        .position(|a| {
            matches!(
                a,
                Action::Send {
                    msg: ProtoMsg::Grant { .. },
                    ..
                }
            )
        })
        .expect("{out:?}");
    assert!(lowered < granted, "{out:?}");
    home_writes(&mut h);
    contents_change();
    assert!(!pushed_to(&arrive(&mut h, 6), 1));
    on_msg(&mut h, 1, ProtoMsg::Dropped { page: P });
    assert!(!depart(&mut h, 6).contains(&WRITABLE));
}

#[test]
fn a_consumer_that_reads_a_page_taken_back_but_unchanged_keeps_its_pushes() {
    let mut h = taken_back();
    // Read before the home wrote it in this phase: an ordinary consumer's read.
    on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P });
    home_writes(&mut h);
    contents_change();
    assert!(pushed_to(&arrive(&mut h, 6), 1));
}

#[test]
fn a_page_read_again_after_its_drop_is_not_taken_back() {
    let mut h = ScSingleWriter::with_prefetch(0).with_push();
    pushed_once(&mut h);
    written_after_a_drop(&mut h);
    on_msg(&mut h, 1, ProtoMsg::Dropped { page: P });
    // The consumer needs the page again before the home departs: it holds a copy now.
    on_msg(&mut h, 1, ProtoMsg::ReadReq { page: P });
    arrive(&mut h, 5);
    assert!(!depart(&mut h, 5).contains(&WRITABLE));
    assert!(h.describe(P).contains("copyset [1]"), "{}", h.describe(P));
}
