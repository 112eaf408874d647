//! Unit tests of sc-sw's node and manager sides (migratory pages, read-ahead, remembered
//! pairs), driven without a cluster.

use super::pairs::PAIR_BUDGET;
use super::*;
use svm_core::protocol::StaticContext;

fn ctx(me: NodeId, nodes: NodeId, home: NodeId) -> StaticContext<impl Fn(PageId) -> NodeId> {
    StaticContext {
        me,
        nodes,
        homes: move |_| home,
    }
}

fn fault(p: &mut ScSingleWriter, me: NodeId, home: NodeId, page: PageId, a: Access) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_fault(&ctx(me, 4, home), page, a, &mut out);
    out
}

fn msg(p: &mut ScSingleWriter, me: NodeId, home: NodeId, from: NodeId, m: ProtoMsg) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_message(&ctx(me, 4, home), from, &m, 0, &mut out);
    out
}

fn send(to: NodeId, msg: ProtoMsg, attach: Option<PageId>) -> Action {
    Action::Send { to, msg, attach }
}

fn grant(page: PageId, access: Access, with_data: bool) -> ProtoMsg {
    ProtoMsg::Grant {
        page,
        access,
        with_data,
    }
}

const P: PageId = 7;

#[test]
fn forgotten_pages_start_over() {
    // Node 1 asks the home (node 0) for write access; node 0 manages page P and P+1.
    let mut home = ScSingleWriter::new();
    let mut other = ScSingleWriter::new();
    assert!(!fault(&mut other, 1, 0, P, Access::Write).is_empty());
    let req = ProtoMsg::WriteReq { page: P };
    assert!(!msg(&mut home, 0, 0, 1, req).is_empty());
    fault(&mut home, 0, 0, P + 1, Access::Read);
    assert!(home.describe(P).contains("manager"));
    assert!(other.describe(P).contains("outstanding Some(Write)"));
    assert!(home.forget(P..P + 1) && other.forget(P..P + 1));
    assert_eq!(home.describe(P), format!("sc-sw page {P}: untouched here"));
    assert_eq!(other.describe(P), format!("sc-sw page {P}: untouched here"));
    assert!(
        home.describe(P + 1).contains("access Read"),
        "pages outside the range are kept"
    );
}

#[test]
fn reads_are_granted_exclusively_after_two_migrations_and_plainly_after_a_miss() {
    // The home (node 0) manages P; nodes 1 and 2 take turns reading then writing it.
    let mut h = ScSingleWriter::with_prefetch(0);
    let req = |h: &mut ScSingleWriter, from: NodeId, m: ProtoMsg| {
        let out = msg(h, 0, 0, from, m);
        let fwd = out.iter().find_map(|a| match a {
            Action::Send { to, msg, .. } if *to != from => Some(msg.clone()),
            _ => None,
        });
        msg(h, 0, 0, from, ProtoMsg::Done { page: P });
        fwd
    };
    assert!(
        req(&mut h, 1, ProtoMsg::WriteReq { page: P }).is_none(),
        "the home grants itself"
    );
    let fwd_read = |to| ProtoMsg::FwdRead { page: P, to };
    let fwd_write = |to| ProtoMsg::FwdWrite {
        page: P,
        to,
        with_data: false,
    };
    // First migration (2 reads, then writes): not yet trusted.
    assert_eq!(
        req(&mut h, 2, ProtoMsg::ReadReq { page: P }),
        Some(fwd_read(2))
    );
    assert_eq!(
        req(&mut h, 2, ProtoMsg::WriteReq { page: P }),
        Some(fwd_write(2))
    );
    assert_eq!(
        req(&mut h, 1, ProtoMsg::ReadReq { page: P }),
        Some(fwd_read(1))
    );
    // Second migration: reads now move ownership with the only copy.
    assert_eq!(
        req(&mut h, 1, ProtoMsg::WriteReq { page: P }),
        Some(fwd_write(1))
    );
    let exclusive_to = |to| ProtoMsg::FwdExclusive {
        page: P,
        to,
        with_data: true,
    };
    assert_eq!(
        req(&mut h, 2, ProtoMsg::ReadReq { page: P }),
        Some(exclusive_to(2))
    );
    assert!(h.describe(P).contains("owner node 2"), "{}", h.describe(P));
    // Node 2 gives its exclusive copy up unwritten: plain read copies again, and one
    // migration is not enough to trust the page again.
    let _ = msg(&mut h, 0, 0, 2, ProtoMsg::ExclusiveUnused { page: P });
    assert_eq!(
        req(&mut h, 1, ProtoMsg::ReadReq { page: P }),
        Some(fwd_read(1))
    );
    assert_eq!(
        req(&mut h, 1, ProtoMsg::WriteReq { page: P }),
        Some(fwd_write(1))
    );
    assert_eq!(
        req(&mut h, 2, ProtoMsg::ReadReq { page: P }),
        Some(fwd_read(2))
    );
}

#[test]
fn read_ahead_window_grows_on_sequential_requests_and_shrinks_on_waste() {
    let mut h = ScSingleWriter::with_prefetch(8);
    let read = |h: &mut ScSingleWriter, page| msg(h, 0, 0, 1, ProtoMsg::ReadReq { page });
    let granted = |out: &[Action]| {
        out.iter()
            .filter_map(|a| match a {
                Action::Send {
                    msg: ProtoMsg::Grant { page, .. },
                    ..
                } => Some(*page),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(granted(&read(&mut h, 10)), vec![10]);
    // Sequential: the window doubles from 2 to 4.
    assert_eq!(granted(&read(&mut h, 11)), vec![11, 12, 13, 14, 15]);
    // The stream goes past them: confirmed, and the window doubles to 8.
    assert_eq!(
        granted(&read(&mut h, 16)),
        vec![16, 17, 18, 19, 20, 21, 22, 23, 24]
    );
    // Node 2 writes pages sent ahead that node 1 never went past: each invalidation
    // halves the window (8 → 0) and the pages are not sent ahead again.
    for p in 17..21 {
        let out = msg(&mut h, 0, 0, 2, ProtoMsg::WriteReq { page: p });
        assert_eq!(out[0], send(1, ProtoMsg::Inval { page: p }, None));
        let _ = msg(&mut h, 0, 0, 1, ProtoMsg::InvalAck { page: p });
    }
    assert_eq!(granted(&read(&mut h, 40)), vec![40]);
    assert_eq!(granted(&read(&mut h, 41)), vec![41, 42]);
}

#[test]
fn fault_around_takes_only_untouched_home_pages_of_the_block() {
    let mut h = ScSingleWriter::new().with_fault_around(4);
    let set = |page| Action::SetAccess {
        page,
        access: Access::Write,
    };
    // Node 1 asked for page 9 first: the manager knows it, so it is not untouched.
    let out = msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: 9 });
    assert_eq!(out, vec![send(1, grant(9, Access::Read, true), Some(9))]);
    // A read fault on page 10 (block 8..12): 10 and 11, not 9 (and so not 8 either).
    assert_eq!(
        fault(&mut h, 0, 0, 10, Access::Read),
        vec![set(10), set(11)]
    );
    // Page 11 is now the home's, writable: a later fault on it needs nothing.
    assert!(fault(&mut h, 0, 0, 11, Access::Write).is_empty());
    // A remote read of page 11 lowers the home to read-only before the copy leaves.
    let out = msg(&mut h, 0, 0, 2, ProtoMsg::ReadReq { page: 11 });
    assert_eq!(
        out,
        vec![
            Action::SetAccess {
                page: 11,
                access: Access::Read
            },
            send(2, grant(11, Access::Read, true), Some(11)),
        ]
    );
    // Pages homed elsewhere never take part: node 1's fault asks the home.
    let mut n = ScSingleWriter::new().with_fault_around(4);
    assert_eq!(
        fault(&mut n, 1, 0, 20, Access::Write),
        vec![send(0, ProtoMsg::WriteReq { page: 20 }, None)]
    );
}

#[test]
fn requests_one_after_the_other_are_remembered_as_pairs_for_a_bounded_number_of_uses() {
    // Node 1, pages 20 and 21 homed at node 0: a read of 20 then a write of 21 (the halves of
    // a row node 2 reads and node 1 writes, say).
    let mut n = ScSingleWriter::new();
    let read = |p| send(0, ProtoMsg::ReadReq { page: p }, None);
    let write = |p| send(0, ProtoMsg::WriteReq { page: p }, None);
    // Another node writes 20 (node 1's copy goes) and reads 21 (node 1, its owner, keeps a
    // read-only copy).
    let others = |n: &mut ScSingleWriter| {
        let _ = msg(n, 1, 0, 0, ProtoMsg::Inval { page: 20 });
        let _ = msg(n, 1, 0, 0, ProtoMsg::FwdRead { page: 21, to: 2 });
    };
    let taken_by_writer = |n: &mut ScSingleWriter| {
        let fwd = ProtoMsg::FwdWrite {
            page: 21,
            to: 2,
            with_data: true,
        };
        let _ = msg(n, 1, 0, 0, fwd);
    };
    assert_eq!(fault(&mut n, 1, 0, 20, Access::Read), vec![read(20)]);
    assert_eq!(fault(&mut n, 1, 0, 21, Access::Write), vec![write(21)]);
    let _ = msg(&mut n, 1, 0, 0, grant(20, Access::Read, true));
    let out = msg(&mut n, 1, 0, 0, grant(21, Access::Write, true));
    assert_eq!(
        out,
        vec![Action::InstallIncoming {
            page: 21,
            access: Access::Write
        }],
        "asked for on a fault: writable at once"
    );
    others(&mut n);
    // From now on a read of 20 asks for write access to 21 along with it. The first time 21
    // comes read-only and exclusive, and the thread's write takes write access without a
    // message; that write shows the pair is used, so later grants come writable.
    let mut uses = 0;
    loop {
        let out = fault(&mut n, 1, 0, 20, Access::Read);
        if out == vec![read(20), write(21)] {
            uses += 1;
            assert_eq!(n.stats.pages_paired, uses);
        } else {
            assert_eq!(out, vec![read(20)], "use {uses}");
            break;
        }
        let _ = msg(&mut n, 1, 0, 0, grant(20, Access::Read, true));
        let out = msg(&mut n, 1, 0, 0, grant(21, Access::Write, false));
        let first = uses == 1;
        let access = if first { Access::Read } else { Access::Write };
        assert_eq!(out, vec![Action::SetAccess { page: 21, access }]);
        let out = fault(&mut n, 1, 0, 21, Access::Write);
        if first {
            assert_eq!(
                out,
                vec![Action::SetAccess {
                    page: 21,
                    access: Access::Write
                }]
            );
        } else {
            assert!(out.is_empty());
        }
        others(&mut n);
        assert!(uses <= PAIR_BUDGET as u64, "the pair outlived its budget");
    }
    assert_eq!(uses, PAIR_BUDGET as u64);
    assert_eq!(n.stats.pairs_dropped, 0);
    let relearn = |n: &mut ScSingleWriter| {
        assert_eq!(fault(n, 1, 0, 21, Access::Write), vec![write(21)]);
        let _ = msg(n, 1, 0, 0, grant(20, Access::Read, true));
        let _ = msg(n, 1, 0, 0, grant(21, Access::Write, false));
        others(n);
        assert_eq!(fault(n, 1, 0, 20, Access::Read), vec![read(20), write(21)]);
        let _ = msg(n, 1, 0, 0, grant(20, Access::Read, true));
        let _ = msg(n, 1, 0, 0, grant(21, Access::Write, false));
    };
    // Seen again (21 asked for right after 20): remembered again. This time another node
    // takes 21 before the thread wrote it: the pair is forgotten.
    relearn(&mut n);
    others(&mut n);
    assert_eq!(n.stats.pairs_dropped, 1);
    assert_eq!(fault(&mut n, 1, 0, 20, Access::Read), vec![read(20)]);
    // Remembered again and used, but another node writes 21 too: forgotten as well.
    relearn(&mut n);
    let _ = fault(&mut n, 1, 0, 21, Access::Write);
    let _ = msg(&mut n, 1, 0, 0, ProtoMsg::Inval { page: 20 });
    taken_by_writer(&mut n);
    assert_eq!(n.stats.pairs_dropped, 2);
    assert_eq!(fault(&mut n, 1, 0, 20, Access::Read), vec![read(20)]);

    // Pages of other managers never pair: 30 (home 0) then 31 (home 2).
    let split = StaticContext {
        me: 1,
        nodes: 4,
        homes: |p: PageId| if p == 31 { 2 } else { 0 },
    };
    let mut m = ScSingleWriter::new();
    let mut out = Vec::new();
    for (page, from) in [(30, 0), (31, 2)] {
        m.on_fault(&split, page, Access::Read, &mut out);
        m.on_message(&split, from, &grant(page, Access::Read, true), 0, &mut out);
        m.on_message(&split, from, &ProtoMsg::Inval { page }, 0, &mut out);
    }
    out.clear();
    m.on_fault(&split, 30, Access::Read, &mut out);
    assert_eq!(out, vec![read(30)]);
    assert_eq!(m.stats.pages_paired, 0);
}

#[test]
fn read_ahead_follows_sequential_streams_and_crossing_grants_are_harmless() {
    let mut h = ScSingleWriter::with_prefetch(2);
    // First request of a stream: only the page asked for.
    let out = msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: 10 });
    assert_eq!(out, vec![send(1, grant(10, Access::Read, true), Some(10))]);
    // The next page continues the stream: two more pages come unasked.
    let out = msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: 11 });
    assert_eq!(
        out,
        vec![
            send(1, grant(11, Access::Read, true), Some(11)),
            send(1, grant(12, Access::Read, true), Some(12)),
            send(1, grant(13, Access::Read, true), Some(13)),
        ]
    );
    // Page 12 is now in node 1's copyset: a write by node 2 invalidates it there.
    let out = msg(&mut h, 0, 0, 2, ProtoMsg::WriteReq { page: 12 });
    assert_eq!(out, vec![send(1, ProtoMsg::Inval { page: 12 }, None)]);
    // A random (non-sequential) request starts a new stream without read-ahead.
    let out = msg(&mut h, 0, 0, 3, ProtoMsg::ReadReq { page: 40 });
    assert_eq!(out.len(), 1);

    // Node side: an unasked grant is installed; the answer to the node's own request for
    // the same page, arriving later, changes nothing.
    let mut n = ScSingleWriter::with_prefetch(2);
    let out = fault(&mut n, 1, 0, 13, Access::Read);
    assert_eq!(out, vec![send(0, ProtoMsg::ReadReq { page: 13 }, None)]);
    let out = msg(&mut n, 1, 0, 0, grant(13, Access::Read, true));
    assert_eq!(
        out,
        vec![Action::InstallIncoming {
            page: 13,
            access: Access::Read
        }]
    );
    assert!(msg(&mut n, 1, 0, 0, grant(13, Access::Read, true)).is_empty());
    // An unasked read grant while a write request is outstanding does not answer it.
    let _ = fault(&mut n, 1, 0, 20, Access::Write);
    let out = msg(&mut n, 1, 0, 0, grant(20, Access::Read, true));
    assert_eq!(
        out,
        vec![Action::InstallIncoming {
            page: 20,
            access: Access::Read
        }]
    );
    assert!(
        fault(&mut n, 1, 0, 20, Access::Write).is_empty(),
        "the write request is still outstanding"
    );
    let out = msg(&mut n, 1, 0, 0, grant(20, Access::Write, false));
    assert_eq!(
        out,
        vec![Action::SetAccess {
            page: 20,
            access: Access::Write
        }]
    );
}

#[test]
fn nodeset_basics() {
    let mut s = NodeSet::new();
    assert!(s.is_empty());
    s.insert(3);
    s.insert(70);
    s.insert(3);
    assert!(s.contains(3) && s.contains(70) && !s.contains(4));
    assert_eq!(s.len(), 2);
    assert_eq!(s.iter().collect::<Vec<_>>(), vec![3, 70]);
    s.remove(3);
    s.remove(200);
    assert_eq!(s.iter().collect::<Vec<_>>(), vec![70]);
    s.clear();
    assert!(s.is_empty());
}

#[test]
fn home_local_faults_need_no_messages() {
    let mut h = ScSingleWriter::new();
    assert_eq!(h.name(), "sc-sw");
    assert_eq!(
        fault(&mut h, 0, 0, P, Access::Read),
        vec![Action::SetAccess {
            page: P,
            access: Access::Read
        }]
    );
    assert_eq!(
        fault(&mut h, 0, 0, P, Access::Write),
        vec![Action::SetAccess {
            page: P,
            access: Access::Write
        }]
    );
    // Already granted: nothing.
    assert!(fault(&mut h, 0, 0, P, Access::Write).is_empty());
    assert_eq!(h.stats(), ProtocolStats::default());
}

#[test]
fn home_read_by_remote_node() {
    // Node 0 is home and owner with write access; node 1 reads.
    let mut h = ScSingleWriter::new();
    fault(&mut h, 0, 0, P, Access::Write);
    let mut r = ScSingleWriter::new();
    assert_eq!(
        fault(&mut r, 1, 0, P, Access::Read),
        vec![send(0, ProtoMsg::ReadReq { page: P }, None)]
    );
    // Coalesced: a second read fault sends nothing.
    assert!(fault(&mut r, 1, 0, P, Access::Read).is_empty());
    let out = msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: P });
    assert_eq!(
        out,
        vec![
            Action::SetAccess {
                page: P,
                access: Access::Read
            },
            send(1, grant(P, Access::Read, true), Some(P)),
        ]
    );
    assert!(h.describe(P).contains("copyset [1]"), "{}", h.describe(P));
    assert!(h.describe(P).contains("busy None"));
    // Grant from the manager: no Done.
    let out = msg(&mut r, 1, 0, 0, grant(P, Access::Read, true));
    assert_eq!(
        out,
        vec![Action::InstallIncoming {
            page: P,
            access: Access::Read
        }]
    );
    assert!(r.describe(P).contains("access Read"));
}

#[test]
fn third_party_read_needs_done() {
    // Home 0, owner 2 (after a write), reader 1.
    let mut h = ScSingleWriter::new();
    let mut o = ScSingleWriter::new();
    let mut r = ScSingleWriter::new();
    fault(&mut o, 2, 0, P, Access::Write);
    let out = msg(&mut h, 0, 0, 2, ProtoMsg::WriteReq { page: P });
    // The home never touched the page: nothing to lower before attaching.
    assert_eq!(
        out,
        vec![
            send(2, grant(P, Access::Write, true), Some(P)),
            Action::SetAccess {
                page: P,
                access: Access::None
            }
        ]
    );
    assert_eq!(
        msg(&mut o, 2, 0, 0, grant(P, Access::Write, true)),
        vec![Action::InstallIncoming {
            page: P,
            access: Access::Write
        }]
    );
    assert_eq!(o.stats().ownership_received, 1);

    fault(&mut r, 1, 0, P, Access::Read);
    let out = msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: P });
    assert_eq!(
        out,
        vec![send(2, ProtoMsg::FwdRead { page: P, to: 1 }, None)]
    );
    // While busy, another request queues.
    assert!(msg(&mut h, 0, 0, 3, ProtoMsg::ReadReq { page: P }).is_empty());
    assert!(h.describe(P).contains("queued 1"), "{}", h.describe(P));
    let out = msg(&mut o, 2, 0, 0, ProtoMsg::FwdRead { page: P, to: 1 });
    assert_eq!(
        out,
        vec![
            Action::SetAccess {
                page: P,
                access: Access::Read
            },
            send(1, grant(P, Access::Read, true), Some(P))
        ]
    );
    let out = msg(&mut r, 1, 0, 2, grant(P, Access::Read, true));
    assert_eq!(
        out,
        vec![
            Action::InstallIncoming {
                page: P,
                access: Access::Read
            },
            send(0, ProtoMsg::Done { page: P }, None)
        ]
    );
    // Done completes the read and starts the queued one.
    let out = msg(&mut h, 0, 0, 1, ProtoMsg::Done { page: P });
    assert_eq!(
        out,
        vec![send(2, ProtoMsg::FwdRead { page: P, to: 3 }, None)]
    );
    assert!(h.describe(P).contains("copyset [1]"), "{}", h.describe(P));
}

#[test]
fn write_invalidates_copies_and_moves_ownership() {
    // Home 0 owns; readers 1 and 2 hold copies; node 3 writes.
    let mut h = ScSingleWriter::new();
    msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: P });
    msg(&mut h, 0, 0, 2, ProtoMsg::ReadReq { page: P });
    let out = msg(&mut h, 0, 0, 3, ProtoMsg::WriteReq { page: P });
    assert_eq!(
        out,
        vec![
            send(1, ProtoMsg::Inval { page: P }, None),
            send(2, ProtoMsg::Inval { page: P }, None)
        ]
    );
    assert!(msg(&mut h, 0, 0, 1, ProtoMsg::InvalAck { page: P }).is_empty());
    // A request arriving meanwhile waits.
    assert!(msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: P }).is_empty());
    let out = msg(&mut h, 0, 0, 2, ProtoMsg::InvalAck { page: P });
    assert_eq!(
        out,
        vec![
            send(3, grant(P, Access::Write, true), Some(P)),
            Action::SetAccess {
                page: P,
                access: Access::None
            },
            // The queued read now goes to the new owner.
            send(3, ProtoMsg::FwdRead { page: P, to: 1 }, None),
        ]
    );
    // A copy holder acknowledges an invalidation after dropping its copy.
    let mut r = ScSingleWriter::new();
    fault(&mut r, 1, 0, P, Access::Read);
    msg(&mut r, 1, 0, 0, grant(P, Access::Read, true));
    let out = msg(&mut r, 1, 0, 0, ProtoMsg::Inval { page: P });
    assert_eq!(
        out,
        vec![
            Action::SetAccess {
                page: P,
                access: Access::None
            },
            send(0, ProtoMsg::InvalAck { page: P }, None)
        ]
    );
    assert_eq!(r.stats().invalidations, 1);
}

#[test]
fn write_from_copy_holder_via_third_owner_skips_data() {
    // Home 0, owner 2, copy holder 1 upgrades: FwdWrite without data.
    let mut h = ScSingleWriter::new();
    msg(&mut h, 0, 0, 2, ProtoMsg::WriteReq { page: P });
    msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: P });
    msg(&mut h, 0, 0, 1, ProtoMsg::Done { page: P });
    let out = msg(&mut h, 0, 0, 1, ProtoMsg::WriteReq { page: P });
    assert_eq!(
        out,
        vec![send(
            2,
            ProtoMsg::FwdWrite {
                page: P,
                to: 1,
                with_data: false
            },
            None
        )]
    );
    let mut o = ScSingleWriter::new();
    fault(&mut o, 2, 0, P, Access::Write);
    msg(&mut o, 2, 0, 0, grant(P, Access::Write, true));
    let out = msg(
        &mut o,
        2,
        0,
        0,
        ProtoMsg::FwdWrite {
            page: P,
            to: 1,
            with_data: false,
        },
    );
    assert_eq!(
        out,
        vec![
            Action::SetAccess {
                page: P,
                access: Access::None
            },
            send(1, grant(P, Access::Write, false), None)
        ]
    );
    assert!(o.describe(P).contains("owner here: false"));
    // With data: lower, attach, drop.
    let mut o2 = ScSingleWriter::new();
    fault(&mut o2, 2, 0, P, Access::Write);
    msg(&mut o2, 2, 0, 0, grant(P, Access::Write, true));
    let out = msg(
        &mut o2,
        2,
        0,
        0,
        ProtoMsg::FwdWrite {
            page: P,
            to: 3,
            with_data: true,
        },
    );
    assert_eq!(
        out,
        vec![
            Action::SetAccess {
                page: P,
                access: Access::Read
            },
            send(3, grant(P, Access::Write, true), Some(P)),
            Action::SetAccess {
                page: P,
                access: Access::None
            },
        ]
    );
    // Done moves ownership at the manager.
    msg(&mut h, 0, 0, 1, ProtoMsg::Done { page: P });
    assert!(
        h.describe(P)
            .contains("owner node 1, copyset [], busy None"),
        "{}",
        h.describe(P)
    );
}

#[test]
fn owner_upgrade_invalidates_copyset_first() {
    // Node 1 becomes owner, node 2 and home 0 read, then node 1 (owner, read-only) writes.
    let mut h = ScSingleWriter::new();
    msg(&mut h, 0, 0, 1, ProtoMsg::WriteReq { page: P });
    // Home's own read goes to the owner.
    let out = fault(&mut h, 0, 0, P, Access::Read);
    assert_eq!(
        out,
        vec![send(1, ProtoMsg::FwdRead { page: P, to: 0 }, None)]
    );
    // The grant from the owner completes the operation locally (Done to self).
    let out = msg(&mut h, 0, 0, 1, grant(P, Access::Read, true));
    assert_eq!(
        out,
        vec![Action::InstallIncoming {
            page: P,
            access: Access::Read
        }]
    );
    msg(&mut h, 0, 0, 2, ProtoMsg::ReadReq { page: P });
    msg(&mut h, 0, 0, 2, ProtoMsg::Done { page: P });
    assert!(
        h.describe(P).contains("copyset [0, 2]"),
        "{}",
        h.describe(P)
    );
    // Owner upgrade: home invalidates itself in place, node 2 by message.
    let out = msg(&mut h, 0, 0, 1, ProtoMsg::WriteReq { page: P });
    assert_eq!(
        out,
        vec![
            send(2, ProtoMsg::Inval { page: P }, None),
            Action::SetAccess {
                page: P,
                access: Access::None
            }
        ]
    );
    assert_eq!(h.stats().invalidations, 1);
    let out = msg(&mut h, 0, 0, 2, ProtoMsg::InvalAck { page: P });
    assert_eq!(out, vec![send(1, grant(P, Access::Write, false), None)]);
    // The owner installs without data, sends no Done, gains no new ownership.
    let mut o = ScSingleWriter::new();
    fault(&mut o, 1, 0, P, Access::Write);
    msg(&mut o, 1, 0, 0, grant(P, Access::Write, true));
    let out = msg(&mut o, 1, 0, 0, ProtoMsg::FwdRead { page: P, to: 2 });
    assert_eq!(
        out[0],
        Action::SetAccess {
            page: P,
            access: Access::Read
        }
    );
    assert_eq!(
        fault(&mut o, 1, 0, P, Access::Write),
        vec![send(0, ProtoMsg::WriteReq { page: P }, None)]
    );
    let out = msg(&mut o, 1, 0, 0, grant(P, Access::Write, false));
    assert_eq!(
        out,
        vec![Action::SetAccess {
            page: P,
            access: Access::Write
        }]
    );
    assert_eq!(o.stats().ownership_received, 1);
}

#[test]
fn home_owner_with_readers_upgrades_after_invalidation() {
    let mut h = ScSingleWriter::new();
    fault(&mut h, 0, 0, P, Access::Read);
    msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: P });
    let out = fault(&mut h, 0, 0, P, Access::Write);
    assert_eq!(out, vec![send(1, ProtoMsg::Inval { page: P }, None)]);
    let out = msg(&mut h, 0, 0, 1, ProtoMsg::InvalAck { page: P });
    assert_eq!(
        out,
        vec![Action::SetAccess {
            page: P,
            access: Access::Write
        }]
    );
}

#[test]
fn read_then_write_fault_coalesces_into_upgrade() {
    let mut r = ScSingleWriter::new();
    assert_eq!(
        fault(&mut r, 1, 0, P, Access::Read),
        vec![send(0, ProtoMsg::ReadReq { page: P }, None)]
    );
    // Write wanted while the read is outstanding: remembered, nothing sent.
    assert!(fault(&mut r, 1, 0, P, Access::Write).is_empty());
    assert!(fault(&mut r, 1, 0, P, Access::Write).is_empty());
    // A third-party read grant: Done, then the write request, in that order.
    let out = msg(&mut r, 1, 0, 2, grant(P, Access::Read, true));
    assert_eq!(
        out,
        vec![
            Action::InstallIncoming {
                page: P,
                access: Access::Read
            },
            send(0, ProtoMsg::Done { page: P }, None),
            send(0, ProtoMsg::WriteReq { page: P }, None),
        ]
    );
    // Write outstanding covers later faults.
    assert!(fault(&mut r, 1, 0, P, Access::Read).is_empty());
    assert!(fault(&mut r, 1, 0, P, Access::Write).is_empty());
    let out = msg(&mut r, 1, 0, 0, grant(P, Access::Write, false));
    assert_eq!(
        out,
        vec![Action::SetAccess {
            page: P,
            access: Access::Write
        }]
    );
}

#[test]
fn release_and_acquire_complete_at_once() {
    let mut p = ScSingleWriter::new();
    let c = ctx(0, 2, 0);
    let mut out = Vec::new();
    p.on_release(&c, 5, &mut out);
    p.on_acquire(&c, 6, &[1, 2], &mut out);
    assert_eq!(
        out,
        vec![
            Action::ReleaseDone {
                token: 5,
                notices: vec![]
            },
            Action::AcquireDone { token: 6 }
        ]
    );
}

#[test]
fn exclusive_grants_of_a_page_written_each_time_are_installed_writable_and_checked_again() {
    // Node 1 reads then writes P (homed on node 0) each time it gets it; node 0 takes it
    // back in between (a migratory page under a lock).
    let mut n1 = ScSingleWriter::with_prefetch(0);
    let exclusive = ProtoMsg::GrantExclusive {
        page: P,
        with_data: true,
    };
    let installed = |out: &[Action]| {
        out.iter().find_map(|a| match a {
            Action::InstallIncoming { page, access } if *page == P => Some(*access),
            _ => None,
        })
    };
    let give_back = |n1: &mut ScSingleWriter| {
        let fwd = ProtoMsg::FwdExclusive {
            page: P,
            to: 0,
            with_data: true,
        };
        msg(n1, 1, 0, 0, fwd)
    };
    // One turn: a read fault, the exclusive grant, then the thread's write. Returns the
    // access the grant was installed with and whether the write faulted.
    let turn = |n1: &mut ScSingleWriter| {
        assert_eq!(
            fault(n1, 1, 0, P, Access::Read),
            vec![send(0, ProtoMsg::ReadReq { page: P }, None)]
        );
        let access = installed(&msg(n1, 1, 0, 0, exclusive.clone())).expect("installed");
        let write = if access == Access::Write {
            None
        } else {
            let out = fault(n1, 1, 0, P, Access::Write);
            assert_eq!(
                out,
                vec![Action::SetAccess {
                    page: P,
                    access: Access::Write
                }],
                "an exclusive copy is written without a message"
            );
            Some(())
        };
        (access, write.is_some())
    };
    for _ in 0..WRITTEN_TO_TRUST {
        assert_eq!(turn(&mut n1), (Access::Read, true), "not trusted yet");
        give_back(&mut n1);
    }
    for round in 0..3 {
        for _ in 0..TRUSTED_INSTALLS {
            assert_eq!(turn(&mut n1), (Access::Write, false), "round {round}");
            assert!(
                n1.describe(P).contains("access Write"),
                "{}",
                n1.describe(P)
            );
            let out = give_back(&mut n1);
            assert!(
                !out.iter().any(|a| matches!(
                    a,
                    Action::Send {
                        msg: ProtoMsg::ExclusiveUnused { .. },
                        ..
                    }
                )),
                "a copy installed writable is not reported unused"
            );
        }
        // The next one is installed read-only, to see whether it is still written: it is.
        assert_eq!(turn(&mut n1), (Access::Read, true), "round {round}");
        give_back(&mut n1);
    }
    // Read-only again after the trusted ones; given up unwritten this time: the manager
    // hears so, and trust starts over.
    for _ in 0..TRUSTED_INSTALLS {
        turn(&mut n1);
        give_back(&mut n1);
    }
    fault(&mut n1, 1, 0, P, Access::Read);
    let out = msg(&mut n1, 1, 0, 0, exclusive.clone());
    assert_eq!(installed(&out), Some(Access::Read));
    let out = give_back(&mut n1);
    assert!(
        out.contains(&send(0, ProtoMsg::ExclusiveUnused { page: P }, None)),
        "{out:?}"
    );
    assert_eq!(turn(&mut n1), (Access::Read, true), "trust starts over");
}
