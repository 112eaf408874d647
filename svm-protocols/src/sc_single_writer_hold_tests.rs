//! Unit tests of sc-sw's minimum hold (`SVM_HOLD_US`), driven without a cluster on a clock
//! the test sets.

use super::*;

const P: PageId = 7;
const Q: PageId = 9;
const HOLD: u64 = 1_000;

/// A context with a clock: node `me` of 3, every page homed at `home`; a thread of the node
/// was woken for page `unused` and has not run since.
struct Timed {
    me: NodeId,
    home: NodeId,
    now: u64,
    unused: Option<PageId>,
}

impl Context for Timed {
    fn me(&self) -> NodeId {
        self.me
    }
    fn nodes(&self) -> NodeId {
        3
    }
    fn home(&self, _page: PageId) -> NodeId {
        self.home
    }
    fn now(&self) -> u64 {
        self.now
    }
    fn install_unused(&self, page: PageId) -> bool {
        self.unused == Some(page)
    }
}

/// Protocol `p` of node `me` (pages homed at `home`) at time `now`.
struct At {
    p: ScSingleWriter,
    ctx: Timed,
}

impl At {
    fn at(&mut self, now: u64) -> &mut Self {
        self.ctx.now = now;
        self
    }
    fn fault(&mut self, page: PageId, a: Access) -> Vec<Action> {
        let mut out = Vec::new();
        self.p.on_fault(&self.ctx, page, a, &mut out);
        out
    }
    fn msg(&mut self, from: NodeId, m: ProtoMsg) -> Vec<Action> {
        let mut out = Vec::new();
        self.p.on_message(&self.ctx, from, &m, 0, &mut out);
        out
    }
    fn timer(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        self.p.on_timer(&self.ctx, &mut out);
        out
    }
    fn release(&mut self, token: u64) -> Vec<Action> {
        let mut out = Vec::new();
        self.p.on_release(&self.ctx, token, &mut out);
        out
    }
    fn token_leaves(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        self.p.on_token_leaves(&self.ctx, &mut out);
        out
    }
}

fn node(p: ScSingleWriter, me: NodeId, home: NodeId) -> At {
    At {
        p,
        ctx: Timed {
            me,
            home,
            now: 0,
            unused: None,
        },
    }
}

fn write_grant(page: PageId) -> ProtoMsg {
    ProtoMsg::Grant {
        page,
        access: Access::Write,
        with_data: true,
    }
}

fn fwd_write(page: PageId, to: NodeId) -> ProtoMsg {
    ProtoMsg::FwdWrite {
        page,
        to,
        with_data: true,
    }
}

/// The grant of `page` with its contents to `to`, as the owner sends it on giving it up.
fn gives(out: &[Action], page: PageId, to: NodeId) -> bool {
    out.iter().any(|a| {
        matches!(a, Action::Send { to: t, msg: ProtoMsg::Grant { page: p, access: Access::Write, .. }, attach: Some(_) }
            if *t == to && *p == page)
    })
}

/// A home's `out` forwards node 2's read of P, queued behind node 1's write, to node 1.
fn assert_read_forwarded_to_new_owner(out: &[Action]) {
    assert!(
        out.contains(&Action::Send {
            to: 1,
            msg: ProtoMsg::FwdRead { page: P, to: 2 },
            attach: None
        }),
        "the read queued behind goes on to the new owner: {out:?}"
    );
}

/// Node 1 (pages homed at node 0) writes P, loses it to node 2, and writes it again: the
/// second write access is held from `t`.
fn regain_after_loss(n: &mut At, t: u64) {
    n.at(0).fault(P, Access::Write);
    n.msg(0, write_grant(P));
    assert!(n.p.next_timer().is_none(), "first write access: no hold");
    let out = n.at(10).msg(0, fwd_write(P, 2));
    assert!(gives(&out, P, 2), "not held: given at once: {out:?}");
    n.at(20).fault(P, Access::Write);
    n.at(t).msg(0, write_grant(P));
}

/// Only the write probe's lowering of `page` to read: the request waits.
fn probe_lowers(out: &[Action], page: PageId) -> bool {
    out == [Action::SetAccess {
        page,
        access: Access::Read,
    }]
}

/// Node 1 holds P from 100 on (for `hold`), and node 2's request for it waits (forwarded at
/// 150): the write probe lowers P to read.
fn held_for_with_a_waiting_request(hold: u64) -> At {
    let mut n = node(ScSingleWriter::new().with_hold(hold), 1, 0);
    regain_after_loss(&mut n, 100);
    let out = n.at(150).msg(0, fwd_write(P, 2));
    assert!(probe_lowers(&out, P), "the request waits: {out:?}");
    n
}

fn held_with_a_waiting_request() -> At {
    held_for_with_a_waiting_request(HOLD)
}

/// The thread of `n` writes `page` (lowered by its write probe) just before each probe is
/// due, up to `end`: write access comes back without a message each time, and each probe
/// lowers the page again.
fn keep_writing_until(n: &mut At, page: PageId, end: u64) {
    while let Some(t) = n.p.next_timer().filter(|&t| t < end) {
        let out = n.at(t - 1).fault(page, Access::Write);
        assert_eq!(
            out,
            [Action::SetAccess {
                page,
                access: Access::Write
            }],
            "raised here at {}",
            t - 1
        );
        let out = n.at(t).timer();
        assert!(probe_lowers(&out, page), "probed again at {t}: {out:?}");
    }
}

#[test]
fn a_page_written_again_after_another_node_took_it_is_kept_while_written_until_the_hold_ends() {
    let mut n = node(ScSingleWriter::new().with_hold(HOLD), 1, 0);
    regain_after_loss(&mut n, 100);
    assert_eq!(n.p.next_timer(), Some(100 + HOLD));
    assert!(
        n.p.quiescent(),
        "a lock released through the fast path keeps the holds until its token leaves"
    );
    assert!(
        !n.p.barrier_quiescent(),
        "a barrier arrival must run while a page is held: it ends the holds"
    );
    let out = n.at(150).msg(0, fwd_write(P, 2));
    assert!(probe_lowers(&out, P), "the request waits: {out:?}");
    assert_eq!(n.p.stats().requests_held, 1);
    keep_writing_until(&mut n, P, 100 + HOLD);
    assert!(
        n.at(100 + HOLD - 1).timer().is_empty(),
        "not before the hold ends"
    );
    let out = n.at(100 + HOLD).timer();
    assert!(gives(&out, P, 2), "{out:?}");
    assert!(n.p.next_timer().is_none() && n.p.quiescent());
    assert!(
        n.p.describe(P).contains("access None"),
        "{}",
        n.p.describe(P)
    );
}

#[test]
fn a_release_ends_every_hold_before_it_completes_and_starts_a_new_epoch() {
    let mut n = held_with_a_waiting_request();
    let out = n.at(160).release(5);
    assert!(gives(&out, P, 2), "{out:?}");
    assert_eq!(
        out.last(),
        Some(&Action::ReleaseDone {
            token: 5,
            notices: vec![]
        }),
        "the page goes before the release completes"
    );
    assert!(n.p.next_timer().is_none());
    // Lost before the release, written again after it: synchronised sharing, not held.
    n.at(200).fault(P, Access::Write);
    n.at(210).msg(0, write_grant(P));
    assert!(n.p.next_timer().is_none());
    assert!(gives(&n.at(220).msg(0, fwd_write(P, 2)), P, 2));
}

#[test]
fn a_token_that_leaves_ends_every_hold_before_the_grant_and_starts_a_new_epoch() {
    let mut n = held_with_a_waiting_request();
    // Releases through the fast path ran no hook: the request still waits until the token
    // of a lock leaves.
    let out = n.at(160).token_leaves();
    assert!(gives(&out, P, 2), "the page goes before the token: {out:?}");
    assert!(n.p.next_timer().is_none() && n.p.barrier_quiescent());
    // Lost before the token left, written again after: synchronised sharing, not held.
    n.at(200).fault(P, Access::Write);
    n.at(210).msg(0, write_grant(P));
    assert!(n.p.next_timer().is_none());
    assert!(gives(&n.at(220).msg(0, fwd_write(P, 2)), P, 2));
    // Nothing held: a token leaving does nothing.
    assert!(n.at(230).token_leaves().is_empty());
}

#[test]
fn a_holder_whose_thread_waits_for_another_node_keeps_its_holds() {
    let mut n = held_with_a_waiting_request();
    // The thread now needs Q from node 0: node 2's request for P still waits (it waits for a
    // lower rank; node 1 can never wait for a hold of node 2's), as long as P is written
    // (by another thread of node 1, or by this one once Q is in).
    let out = n.at(160).fault(Q, Access::Read);
    assert!(!gives(&out, P, 2), "{out:?}");
    assert!(out.contains(&Action::Send {
        to: 0,
        msg: ProtoMsg::ReadReq { page: Q },
        attach: None
    }));
    keep_writing_until(&mut n, P, 100 + HOLD);
    assert_eq!(n.p.next_timer(), Some(100 + HOLD));
    assert!(gives(&n.at(100 + HOLD).timer(), P, 2));
}

#[test]
fn a_hold_keeps_a_page_from_higher_ranks_only() {
    // Node 1 holds P from 100 on (it took it back from node 2): node 0, a lower rank, gets it
    // at once.
    let mut n = node(ScSingleWriter::new().with_hold(HOLD), 1, 0);
    regain_after_loss(&mut n, 100);
    assert_eq!(n.p.next_timer(), Some(100 + HOLD), "held");
    let out = n.at(150).msg(0, fwd_write(P, 0));
    assert!(gives(&out, P, 0), "a lower rank is never held up: {out:?}");
    assert_eq!(n.p.stats().requests_held, 0);
}

#[test]
fn a_home_that_owns_a_held_page_keeps_requests_in_its_queue_until_the_hold_ends() {
    // Node 0 is the home: it writes P, node 1 takes it, node 0 takes it back.
    let mut h = node(ScSingleWriter::with_prefetch(0).with_hold(HOLD), 0, 0);
    assert!(h
        .at(0)
        .fault(P, Access::Write)
        .contains(&Action::SetAccess {
            page: P,
            access: Access::Write
        }));
    let out = h.at(10).msg(1, ProtoMsg::WriteReq { page: P });
    assert!(gives(&out, P, 1), "{out:?}");
    let out = h.at(20).fault(P, Access::Write);
    assert!(out.contains(&Action::Send {
        to: 1,
        msg: fwd_write(P, 0),
        attach: None
    }));
    h.at(30).msg(1, write_grant(P));
    assert_eq!(h.p.next_timer(), Some(30 + HOLD));
    // Node 1 asks again, and node 2 reads: both wait in the manager's queue, in order.
    let out = h.at(40).msg(1, ProtoMsg::WriteReq { page: P });
    assert!(probe_lowers(&out, P), "{out:?}");
    assert!(h.at(50).msg(2, ProtoMsg::ReadReq { page: P }).is_empty());
    assert_eq!(h.p.stats().requests_held, 2);
    let out = h.at(30 + HOLD).timer();
    assert!(gives(&out, P, 1), "{out:?}");
    assert_read_forwarded_to_new_owner(&out);
}

#[test]
fn without_a_hold_a_page_written_again_is_given_up_at_once() {
    let mut n = node(ScSingleWriter::new(), 1, 0);
    regain_after_loss(&mut n, 100);
    assert!(n.p.next_timer().is_none() && n.p.quiescent());
    assert!(gives(&n.at(150).msg(0, fwd_write(P, 2)), P, 2));
}

#[test]
fn a_page_its_thread_has_not_used_yet_waits_for_that_thread_at_the_owner() {
    // No minimum hold: only the thread that has not run keeps the page.
    let mut n = node(ScSingleWriter::new(), 1, 0);
    n.at(0).fault(P, Access::Write);
    n.msg(0, write_grant(P));
    n.ctx.unused = Some(P);
    let out = n.at(100).msg(0, fwd_write(P, 2));
    assert!(out.is_empty(), "the request waits: {out:?}");
    assert_eq!(n.p.stats().requests_held, 0);
    assert_eq!(n.p.stats().requests_kept_unused, 1);
    assert_eq!(n.p.next_timer(), Some(100 + hold::RECHECK_NS));
    assert!(n.p.quiescent(), "no hold: releases keep their fast path");
    // Looked at again while the thread still has not run: waits on, re-armed.
    let t = 100 + hold::RECHECK_NS;
    assert!(n.at(t).timer().is_empty());
    assert_eq!(n.p.next_timer(), Some(t + hold::RECHECK_NS));
    // The thread has run (or the engine's bound has passed): the page goes.
    n.ctx.unused = None;
    let out = n.at(t + hold::RECHECK_NS).timer();
    assert!(gives(&out, P, 2), "{out:?}");
    assert!(n.p.next_timer().is_none());
    // Other pages never waited.
    n.ctx.unused = Some(P);
    n.at(500).fault(Q, Access::Write);
    n.msg(0, write_grant(Q));
    assert!(gives(&n.at(600).msg(0, fwd_write(Q, 2)), Q, 2));
}

#[test]
fn a_home_that_owns_a_page_its_thread_has_not_used_keeps_requests_in_its_queue() {
    let mut h = node(ScSingleWriter::with_prefetch(0), 0, 0);
    h.at(0).fault(P, Access::Write);
    h.ctx.unused = Some(P);
    assert!(h.at(10).msg(1, ProtoMsg::WriteReq { page: P }).is_empty());
    assert!(h.at(20).msg(2, ProtoMsg::ReadReq { page: P }).is_empty());
    assert_eq!(h.p.stats().requests_kept_unused, 2);
    assert_eq!(h.p.next_timer(), Some(10 + hold::RECHECK_NS));
    h.ctx.unused = None;
    let out = h.at(10 + hold::RECHECK_NS).timer();
    assert!(gives(&out, P, 1), "{out:?}");
    assert_read_forwarded_to_new_owner(&out);
    assert!(h.p.next_timer().is_none());
}

/// A hold of several write probes, and a probe's interval.
const LONG_HOLD: u64 = 10_000;
const PROBE: u64 = LONG_HOLD / hold::PROBE_SHARE;

#[test]
fn a_held_page_left_unwritten_for_a_probe_interval_is_given_up_early() {
    let mut n = held_for_with_a_waiting_request(LONG_HOLD);
    assert_eq!(n.p.next_timer(), Some(150 + PROBE), "the probe's end");
    assert!(n.at(150 + PROBE - 1).timer().is_empty());
    let out = n.at(150 + PROBE).timer();
    assert!(gives(&out, P, 2), "not written: given up: {out:?}");
    assert_eq!(n.p.stats().holds_ended_unwritten, 1);
    assert!(n.p.next_timer().is_none() && n.p.quiescent());
}

#[test]
fn a_held_page_written_in_every_probe_interval_stays_until_the_hold_ends() {
    let mut n = held_for_with_a_waiting_request(LONG_HOLD);
    let mut t = 150;
    for round in 1..=3 {
        // The thread writes P again: write access comes back without a message.
        let out = n.at(t + 10).fault(P, Access::Write);
        assert_eq!(
            out,
            [Action::SetAccess {
                page: P,
                access: Access::Write
            }],
            "round {round}"
        );
        t += PROBE;
        let out = n.at(t).timer();
        assert!(probe_lowers(&out, P), "written: probed again: {out:?}");
    }
    assert_eq!(n.p.stats().hold_probe_rewrites, 3);
    assert_eq!(n.p.stats().holds_ended_unwritten, 0);
    // Written in every interval up to the hold's end: given up then.
    n.at(t + 10).fault(P, Access::Write);
    let out = n.at(100 + LONG_HOLD).timer();
    assert!(gives(&out, P, 2), "{out:?}");
}

#[test]
fn a_copy_sent_ends_the_probe_so_the_next_write_asks_the_manager() {
    let mut n = held_for_with_a_waiting_request(LONG_HOLD);
    // Node 0 (a lower rank, never held up) reads P: it gets a copy from the lowered page.
    let out = n.at(160).msg(0, ProtoMsg::FwdRead { page: P, to: 0 });
    assert!(
        out.iter().any(|a| matches!(
            a,
            Action::Send {
                to: 0,
                attach: Some(_),
                ..
            }
        )),
        "{out:?}"
    );
    // Another copy exists now: the write must go through the manager.
    let out = n.at(170).fault(P, Access::Write);
    assert!(
        out.contains(&Action::Send {
            to: 0,
            msg: ProtoMsg::WriteReq { page: P },
            attach: None
        }),
        "{out:?}"
    );
    assert_eq!(n.p.stats().hold_probe_rewrites, 0);
}
