//! Unit tests of sc-sw's grants around a request at a barrier (`SVM_GRANT_AROUND`), driven
//! without a cluster.

use super::*;
use crate::test_actions::{fault_at, homed_on_0, message_at};

fn fault(p: &mut ScSingleWriter, me: NodeId, page: PageId, a: Access) -> Vec<Action> {
    fault_at(p, (me, 2), page, a)
}

fn msg(p: &mut ScSingleWriter, me: NodeId, from: NodeId, m: ProtoMsg) -> Vec<Action> {
    message_at(p, (me, 2), from, m)
}

fn arrive(p: &mut ScSingleWriter) {
    let mut out = Vec::new();
    p.on_barrier_arrive(&homed_on_0(0, 2), 1, &mut out);
}

fn depart(p: &mut ScSingleWriter) {
    let mut out = Vec::new();
    p.on_barrier_depart(&homed_on_0(0, 2), 2, &[], &mut out);
}

fn write_req(p: &mut ScSingleWriter, page: PageId) -> Vec<Action> {
    msg(p, 0, 1, ProtoMsg::WriteReq { page })
}

/// The pages `out` grants around (exclusive grants with the contents).
fn around(out: &[Action]) -> Vec<PageId> {
    out.iter()
        .filter_map(|a| match a {
            Action::Send {
                to: 1,
                msg:
                    ProtoMsg::GrantExclusive {
                        page,
                        with_data: true,
                    },
                attach: Some(q),
            } if page == q => Some(*page),
            _ => None,
        })
        .collect()
}

/// The home (node 0) with grants around in blocks of 8, having written pages 0..24 itself.
fn home_that_wrote_24_pages() -> ScSingleWriter {
    let mut h = ScSingleWriter::with_prefetch(0).with_grant_around(8);
    for q in 0..24 {
        fault(&mut h, 0, q, Access::Write);
    }
    h
}

#[test]
fn a_manager_at_a_barrier_grants_a_walking_writer_the_idle_block_around_its_request() {
    let mut h = home_that_wrote_24_pages();
    // Before the barrier: only what is asked for.
    assert!(around(&write_req(&mut h, 0)).is_empty());
    arrive(&mut h);
    // The first requests after the arrival: not yet a walk.
    for q in [9, 10, 11] {
        assert!(around(&write_req(&mut h, q)).is_empty(), "page {q}");
    }
    // The fourth: the idle pages of its block (8..16) but those node 1 holds or asked for.
    let out = write_req(&mut h, 12);
    assert_eq!(around(&out), vec![8, 13, 14, 15]);
    assert!(
        out.contains(&Action::Send {
            to: 1,
            msg: ProtoMsg::Grant {
                page: 12,
                access: Access::Write,
                with_data: true
            },
            attach: Some(12),
        }),
        "the page asked for is granted as asked: {out:?}"
    );
    // Each page granted around is lowered to read-only before its contents are read and
    // dropped after; the steps of all of them are grouped (runs the engine does in one call).
    let step = |a: &Action| match a {
        Action::SetAccess {
            page,
            access: Access::Read,
        } if *page != 12 => Some(0),
        Action::Send {
            msg: ProtoMsg::GrantExclusive { .. },
            ..
        } => Some(1),
        Action::SetAccess {
            page,
            access: Access::None,
        } if *page != 12 => Some(2),
        _ => None,
    };
    let steps: Vec<u8> = out.iter().filter_map(step).collect();
    assert_eq!(steps, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2], "{out:?}");
    assert_eq!(h.stats().pages_granted_around, 4);
    assert!(
        h.describe(14).contains("owner node 1"),
        "{}",
        h.describe(14)
    );
    // A request whose block holds nothing idle grants nothing more; after the departure,
    // nothing around at all.
    assert!(around(&write_req(&mut h, 15)).is_empty());
    depart(&mut h);
    for q in [16, 17, 18, 19, 20] {
        assert!(around(&write_req(&mut h, q)).is_empty(), "page {q}");
    }
}

#[test]
fn a_page_granted_around_comes_read_only_and_exclusive_and_its_first_write_is_upgraded_here() {
    let mut n1 = ScSingleWriter::with_prefetch(0).with_grant_around(8);
    let out = msg(
        &mut n1,
        1,
        0,
        ProtoMsg::GrantExclusive {
            page: 13,
            with_data: true,
        },
    );
    assert_eq!(
        out,
        [Action::InstallIncoming {
            page: 13,
            access: Access::Read
        }]
    );
    // The write upgrades the only copy here; the manager hears of it without waiting.
    let out = fault(&mut n1, 1, 13, Access::Write);
    assert_eq!(
        out,
        [
            Action::Send {
                to: 0,
                msg: ProtoMsg::ExclusiveWritten { page: 13 },
                attach: None
            },
            Action::SetAccess {
                page: 13,
                access: Access::Write
            }
        ]
    );
    // Once only.
    assert!(fault(&mut n1, 1, 13, Access::Write).is_empty());
    // An exclusive grant that answers this node's read request (a migratory page) says
    // nothing when written.
    fault(&mut n1, 1, 14, Access::Read);
    msg(
        &mut n1,
        1,
        0,
        ProtoMsg::GrantExclusive {
            page: 14,
            with_data: true,
        },
    );
    let out = fault(&mut n1, 1, 14, Access::Write);
    assert!(
        !out.iter().any(|a| matches!(a, Action::Send { .. })),
        "{out:?}"
    );
}

#[test]
fn the_manager_counts_pages_written_where_it_granted_them_around() {
    let mut h = home_that_wrote_24_pages();
    arrive(&mut h);
    for q in [9, 10, 11] {
        write_req(&mut h, q);
    }
    assert_eq!(around(&write_req(&mut h, 12)), vec![8, 13, 14, 15]);
    for q in [8, 13] {
        msg(&mut h, 0, 1, ProtoMsg::ExclusiveWritten { page: q });
    }
    msg(&mut h, 0, 1, ProtoMsg::ExclusiveUnused { page: 14 });
    let t = h.around_tally(1);
    assert_eq!((t.unresolved, t.written, t.unwritten), (1, 2, 1));
    // Page 15, not heard of, belonged to a region destroyed since: it no longer counts.
    assert!(h.forget(8..16));
    assert_eq!(h.around_tally(1).unresolved, 0);
}

/// The home (node 0), blocks of 32, having written pages 0..128 and granted node 1 the 28
/// pages around its requests for pages 0..4 at a barrier it has departed from since.
fn home_that_granted_28_around() -> (ScSingleWriter, Vec<PageId>) {
    let mut h = ScSingleWriter::with_prefetch(0).with_grant_around(32);
    for q in 0..128 {
        fault(&mut h, 0, q, Access::Write);
    }
    arrive(&mut h);
    for q in [0, 1, 2] {
        write_req(&mut h, q);
    }
    let granted = around(&write_req(&mut h, 3));
    assert_eq!(granted, (4..32).collect::<Vec<_>>());
    depart(&mut h);
    (h, granted)
}

#[test]
fn a_node_that_gives_pages_granted_around_back_unwritten_gets_none_around_again() {
    let (mut h, granted) = home_that_granted_28_around();
    // Node 1 gives 16 of them back unwritten when node 0 wants them again (its exclusive
    // copy unwritten: `ExclusiveUnused`, then the page with `Done` at the manager).
    for &q in &granted[..16] {
        fault(&mut h, 0, q, Access::Write);
        msg(&mut h, 0, 1, ProtoMsg::ExclusiveUnused { page: q });
        msg(&mut h, 0, 0, ProtoMsg::Done { page: q });
    }
    assert_eq!(h.stats().granted_around_unwritten, 16);
    arrive(&mut h);
    for q in [32, 33, 34, 35, 36] {
        assert!(
            around(&write_req(&mut h, q)).is_empty(),
            "16 of 28 given back unwritten: no more grants around (page {q})"
        );
    }
}

#[test]
fn pages_given_back_written_keep_the_grants_coming() {
    let (mut h, granted) = home_that_granted_28_around();
    // Node 0 takes 14 back: 12 written by node 1 (no `ExclusiveUnused`), 2 unwritten.
    for &q in &granted[..12] {
        fault(&mut h, 0, q, Access::Write);
        msg(&mut h, 0, 0, ProtoMsg::Done { page: q });
    }
    for &q in &granted[12..14] {
        fault(&mut h, 0, q, Access::Write);
        msg(&mut h, 0, 1, ProtoMsg::ExclusiveUnused { page: q });
        msg(&mut h, 0, 0, ProtoMsg::Done { page: q });
    }
    // 2 of 14 unwritten, below the 16 it takes to judge: the grants go on.
    arrive(&mut h);
    for q in [32, 33, 34] {
        write_req(&mut h, q);
    }
    assert_eq!(around(&write_req(&mut h, 35)).len(), 28);
}
