//! Unit tests of sc-sw's read-ahead from the owner to the manager
//! (`sc_single_writer_ahead.rs`), driven without a cluster: node 0 is the home and manager of
//! every page, node 1 owns the pages it wrote, node 2 asks for some of them meanwhile.

use super::*;
use crate::test_actions::{fault_at, installs, message_at, sent};

fn fault(p: &mut ScSingleWriter, me: NodeId, page: PageId, a: Access) -> Vec<Action> {
    fault_at(p, (me, 3), page, a)
}

fn msg(p: &mut ScSingleWriter, me: NodeId, from: NodeId, m: ProtoMsg) -> Vec<Action> {
    message_at(p, (me, 3), from, m)
}

/// The home (node 0) and node 1, which wrote `pages`: node 1 owns them, writable.
fn written_by_node_1(pages: std::ops::Range<PageId>) -> (ScSingleWriter, ScSingleWriter) {
    let mut home = ScSingleWriter::with_prefetch(8);
    let mut owner = ScSingleWriter::with_prefetch(8);
    for p in pages {
        assert_eq!(
            sent(&fault(&mut owner, 1, p, Access::Write)),
            vec![(0, ProtoMsg::WriteReq { page: p })]
        );
        let out = msg(&mut home, 0, 1, ProtoMsg::WriteReq { page: p });
        let grant = ProtoMsg::Grant {
            page: p,
            access: Access::Write,
            with_data: true,
        };
        assert_eq!(sent(&out), vec![(1, grant.clone())]);
        assert_eq!(installs(&msg(&mut owner, 1, 0, grant)), vec![p]);
    }
    (home, owner)
}

/// The home reads `page`, which node 1 owns: the read goes to node 1, whose grant the home
/// installs. Returns what the home sent besides the forwarded read.
fn home_reads(
    home: &mut ScSingleWriter,
    owner: &mut ScSingleWriter,
    page: PageId,
) -> Vec<ProtoMsg> {
    let out = sent(&fault(home, 0, page, Access::Read));
    assert_eq!(out[0], (1, ProtoMsg::FwdRead { page, to: 0 }));
    let granted = sent(&msg(owner, 1, 0, out[0].1.clone()));
    assert_eq!(
        granted,
        vec![(
            0,
            ProtoMsg::Grant {
                page,
                access: Access::Read,
                with_data: true
            }
        )]
    );
    assert_eq!(installs(&msg(home, 0, 1, granted[0].1.clone())), vec![page]);
    out[1..]
        .iter()
        .map(|(to, m)| {
            assert_eq!(*to, 1, "asked of the owner");
            m.clone()
        })
        .collect()
}

#[test]
fn the_owner_sends_the_manager_the_pages_after_its_sequential_reads() {
    let (mut home, mut owner) = written_by_node_1(10..20);
    // The first read starts a stream; the second continues it: window 2 → 4.
    assert!(home_reads(&mut home, &mut owner, 10).is_empty());
    let ask = home_reads(&mut home, &mut owner, 11);
    assert_eq!(ask, vec![ProtoMsg::AheadAsk { page: 12, count: 4 }]);
    // The owner lowers each page to read-only and sends it.
    let out = msg(&mut owner, 1, 0, ask[0].clone());
    let copies: Vec<PageId> = sent(&out)
        .into_iter()
        .map(|(to, m)| match m {
            ProtoMsg::AheadCopy { page } if to == 0 => page,
            other => panic!("unexpected {other:?} to {to}"),
        })
        .collect();
    assert_eq!(copies, vec![12, 13, 14, 15]);
    assert!(owner.describe(12).contains("access Read, owner here: true"));
    // Meanwhile node 2 asks to write page 15: the manager forwards it to node 1, and the
    // copy of 15 that was on its way is refused. The others are taken, the manager in
    // their copysets.
    let out = msg(&mut home, 0, 2, ProtoMsg::WriteReq { page: 15 });
    assert!(matches!(
        sent(&out)[..],
        [(1, ProtoMsg::FwdWrite { page: 15, .. })]
    ));
    for p in 12..15 {
        assert_eq!(
            installs(&msg(&mut home, 0, 1, ProtoMsg::AheadCopy { page: p })),
            vec![p]
        );
        assert!(
            home.describe(p).contains("copyset [0]"),
            "{}",
            home.describe(p)
        );
    }
    assert!(installs(&msg(&mut home, 0, 1, ProtoMsg::AheadCopy { page: 15 })).is_empty());
    assert!(
        home.describe(15).contains("access None"),
        "{}",
        home.describe(15)
    );
    assert_eq!(home.stats().pages_read_ahead, 3);
    // The home reads them without asking.
    for p in 12..15 {
        assert!(fault(&mut home, 0, p, Access::Read).is_empty());
    }
}

#[test]
fn a_copy_is_refused_once_the_manager_asked_for_the_page_itself() {
    let (mut home, mut owner) = written_by_node_1(10..20);
    home_reads(&mut home, &mut owner, 10);
    let ask = home_reads(&mut home, &mut owner, 11);
    let out = msg(&mut owner, 1, 0, ask[0].clone());
    assert_eq!(sent(&out).len(), 4);
    // The home's thread reaches page 12 before its copy: its own read goes to the owner,
    // and the copy sent ahead is refused (the forwarded read brings the page).
    let out = sent(&fault(&mut home, 0, 12, Access::Read));
    assert_eq!(out[0], (1, ProtoMsg::FwdRead { page: 12, to: 0 }));
    assert!(installs(&msg(&mut home, 0, 1, ProtoMsg::AheadCopy { page: 12 })).is_empty());
    assert!(home.describe(12).contains("outstanding Some(Read)"));
}

#[test]
fn the_owner_keeps_what_it_may_not_share_and_a_wasted_copy_shrinks_the_window() {
    let (mut home, mut owner) = written_by_node_1(10..30);
    // Node 1 asked for write access to page 14 again after losing it: it stops there.
    home_reads(&mut home, &mut owner, 10);
    let ask = home_reads(&mut home, &mut owner, 11);
    let _ = msg(&mut owner, 1, 0, ProtoMsg::FwdRead { page: 14, to: 2 });
    assert!(!fault(&mut owner, 1, 14, Access::Write).is_empty());
    let copies = sent(&msg(&mut owner, 1, 0, ask[0].clone()));
    assert_eq!(
        copies.iter().map(|(_, m)| m.page()).collect::<Vec<_>>(),
        vec![12, 13],
        "stops at the page with a request under way"
    );
    for (_, m) in copies {
        let p = m.page();
        assert_eq!(installs(&msg(&mut home, 0, 1, m)), vec![p]);
    }
    // Node 1 writes page 13 again before the home read it: the home's copy is invalidated
    // unused, so the window halves and page 13 is not asked for ahead again.
    let out = sent(&fault(&mut owner, 1, 13, Access::Write));
    assert_eq!(out, vec![(0, ProtoMsg::WriteReq { page: 13 })]);
    let out = sent(&msg(&mut home, 0, 1, ProtoMsg::WriteReq { page: 13 }));
    assert_eq!(
        out,
        vec![(
            1,
            ProtoMsg::Grant {
                page: 13,
                access: Access::Write,
                with_data: false
            }
        )]
    );
    assert!(home.describe(13).contains("access None"));
    // The stream (at 16 now) continues with the window halved: 4, not 8.
    let _ = msg(
        &mut owner,
        1,
        0,
        ProtoMsg::Grant {
            page: 13,
            access: Access::Write,
            with_data: false,
        },
    );
    assert_eq!(
        home_reads(&mut home, &mut owner, 16),
        vec![ProtoMsg::AheadAsk { page: 17, count: 4 }]
    );
}

#[test]
fn pages_two_nodes_took_for_writes_are_not_asked_for_ahead() {
    let (mut home, mut owner) = written_by_node_1(10..20);
    // Node 2 takes page 13 from node 1 for a write, and node 1 takes it back: the page is
    // write-shared, so the stream's asks stop before it.
    for (writer, from) in [(2, 1), (1, 2)] {
        let out = sent(&msg(&mut home, 0, writer, ProtoMsg::WriteReq { page: 13 }));
        assert!(
            matches!(out[..], [(f, ProtoMsg::FwdWrite { page: 13, to, .. })] if f == from && to == writer),
            "{out:?}"
        );
        let _ = msg(&mut home, 0, writer, ProtoMsg::Done { page: 13 });
    }
    let _ = msg(&mut owner, 1, 2, grant_write(13));
    home_reads(&mut home, &mut owner, 10);
    assert_eq!(
        home_reads(&mut home, &mut owner, 11),
        vec![ProtoMsg::AheadAsk { page: 12, count: 1 }]
    );
}

fn grant_write(page: PageId) -> ProtoMsg {
    ProtoMsg::Grant {
        page,
        access: Access::Write,
        with_data: true,
    }
}
