//! Unit tests of the window layout: collective and local allocation, homes, regions.

use super::*;

const B: usize = 0x6000_0000_0000;

#[test]
fn collective_allocations_match_across_nodes_and_homes_follow_policy() {
    let a = Space::new(B, 1 << 30, 4096, 0, 4);
    let b = Space::new(B, 1 << 30, 4096, 3, 4);
    for s in [&a, &b] {
        assert_eq!(s.alloc_collective(100, Home::Node(2)).unwrap(), B);
        assert_eq!(s.alloc_collective(8 * 4096, Home::Block).unwrap(), B + 4096);
        assert_eq!(
            s.alloc_collective(8 * 4096, Home::Cyclic).unwrap(),
            B + 9 * 4096
        );
    }
    assert_eq!(a.home(0), 2);
    assert_eq!(
        (1..9).map(|p| a.home(p)).collect::<Vec<_>>(),
        vec![0, 0, 1, 1, 2, 2, 3, 3]
    );
    assert_eq!(
        (9..13).map(|p| b.home(p)).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert!(a.is_unknown_collective(20));
    assert!(!a.is_unknown_collective(3));
}

#[test]
fn local_arenas_are_disjoint_and_homed_on_their_node() {
    let s0 = Space::new(B, 1 << 30, 4096, 0, 2);
    let s1 = Space::new(B, 1 << 30, 4096, 1, 2);
    let a0 = s0.alloc_local(10).unwrap();
    let a1 = s1.alloc_local(10).unwrap();
    assert_ne!(a0, a1);
    assert_eq!(s0.home(s0.page_of(a0)), 0);
    assert_eq!(s0.home(s0.page_of(a1)), 1);
    let x = s0.alloc_local(10).unwrap();
    assert_eq!(x, a0 + SMALL_ALIGN);
    s0.free_local(x).unwrap();
    assert_eq!(s0.free_local(x), Err(SpaceError::BadFree { addr: x }));
    assert_eq!(s0.alloc_local(10).unwrap(), x);
}

#[test]
fn first_touch_local_pages_are_homed_where_the_directory_says() {
    let s0 = Space::new(B, 1 << 30, 4096, 0, 2);
    let s1 = Space::new(B, 1 << 30, 4096, 1, 2);
    let owned = s0.alloc_local(2 * 4096).unwrap();
    let a = s0.alloc_local_first_touch(3 * 4096).unwrap();
    assert!(s0.in_first_touch_part(a) && !s0.in_first_touch_part(owned));
    let b = s1.alloc_local_first_touch(4096).unwrap();
    assert_ne!(s1.page_of(b), s0.page_of(a), "every node has its own part");
    let p = s0.page_of(a);
    for s in [&s0, &s1] {
        assert!(s.home_unresolved(p) && s.home_unresolved(p + 2));
        assert_eq!(s.fault_route(p), (0, true));
        assert!(!s.home_unresolved(s.page_of(owned)));
        assert!(
            !s.same_region(p, p + 1),
            "read-ahead stays off unresolved homes"
        );
    }
    // Node 1 touches page p first; page p's directory (p % 2) records it.
    let directory = [&s0, &s1][s0.directory(p) as usize];
    assert_eq!(directory.assign_first_touch(p, 1), 1);
    assert_eq!(
        directory.assign_first_touch(p, 0),
        1,
        "the first asker stays"
    );
    s1.learn_first_touch(p, 1);
    s0.learn_first_touch(p, 1);
    for s in [&s0, &s1] {
        assert!(!s.home_unresolved(p));
        assert_eq!(
            s.home(p),
            1,
            "homed where first touched, not on the allocator"
        );
    }
    assert_eq!(s0.home(s0.page_of(owned)), 0);
    s0.free_local(a).unwrap();
    assert_eq!(s0.free_local(a), Err(SpaceError::BadFree { addr: a }));
    assert_eq!(
        s0.alloc_local_first_touch(4096).unwrap(),
        a,
        "freed space is reused"
    );
    s0.free_local(owned).unwrap();
}

#[test]
fn static_segments_have_their_own_page_ids_and_home() {
    let mut s = Space::new(B, 1 << 30, 4096, 1, 2);
    s.add_static(0x55_0000, 3 * 4096, 0, vec![7u8; 3 * 4096]);
    let p = s.page_of(0x55_1008);
    assert_eq!(p, STATIC_PAGE_BASE + 1);
    assert_eq!(s.page_addr(p), 0x55_1000);
    assert_eq!(s.home(p), 0);
    assert!(s.contains(0x55_2fff) && !s.contains(0x55_3000));
    assert_eq!(
        s.initial_contents(p),
        None,
        "initial contents are kept on the home only"
    );
    let mut h = Space::new(B, 1 << 30, 4096, 0, 2);
    h.add_static(0x55_0000, 3 * 4096, 0, vec![7u8; 3 * 4096]);
    assert_eq!(
        h.initial_contents(STATIC_PAGE_BASE + 2).map(|c| c[0]),
        Some(7)
    );
    assert!(!h.is_unknown_collective(STATIC_PAGE_BASE));
    assert!(h.same_region(STATIC_PAGE_BASE, STATIC_PAGE_BASE + 2));
    assert!(!h.same_region(STATIC_PAGE_BASE + 2, STATIC_PAGE_BASE + 3));
}

#[test]
fn same_region_stays_inside_allocations() {
    let s = Space::new(B, 1 << 30, 4096, 0, 2);
    s.alloc_collective(2 * 4096, Home::Node(0)).unwrap();
    s.alloc_collective(4096, Home::Node(0)).unwrap();
    assert!(s.same_region(0, 1));
    assert!(
        !s.same_region(1, 2),
        "the next allocation is another region"
    );
    assert!(!s.same_region(2, 3), "beyond every allocation");
    let a = s.alloc_local(3 * 4096).unwrap();
    let p = s.page_of(a);
    assert!(s.same_region(p, p + 2));
    assert!(
        !s.same_region(p + 2, p + 3),
        "past this node's allocation top"
    );
}

#[test]
fn freed_collective_ranges_are_reused_and_merged() {
    let s = Space::new(B, 1 << 30, 4096, 0, 2);
    let a = s.alloc_collective(3 * 4096, Home::Cyclic).unwrap();
    let b = s.alloc_collective(4096, Home::Node(1)).unwrap();
    let c = s.alloc_collective(2 * 4096, Home::Node(0)).unwrap();
    assert_eq!(s.collective_pages(b).unwrap(), 3..4);
    s.free_collective(a).unwrap();
    assert_eq!(s.free_collective(a), Err(SpaceError::BadFree { addr: a }));
    assert_eq!(s.home(1), 0, "a freed range has no region");
    s.free_collective(b).unwrap();
    assert_eq!(s.alloc_collective(4 * 4096, Home::Node(1)).unwrap(), a);
    assert_eq!(s.home(2), 1);
    s.free_collective(c).unwrap();
    assert_eq!(s.collective_used(), 4 * 4096, "the top came down");
    assert!(s.is_unknown_collective(4));
    for _ in 0..10_000 {
        let x = s.alloc_collective(5 * 4096, Home::Block).unwrap();
        assert_eq!(x, B + 4 * 4096);
        s.free_collective(x).unwrap();
    }
    s.free_collective(a).unwrap();
    assert_eq!(s.collective_used(), 0);
}

#[test]
fn errors() {
    let s = Space::new(B, 1 << 20, 4096, 0, 2);
    assert_eq!(s.alloc_collective(0, Home::Block), Err(SpaceError::Empty));
    assert!(matches!(
        s.alloc_collective(1 << 30, Home::Block),
        Err(SpaceError::OutOfSpace { .. })
    ));
    assert_eq!(
        s.alloc_collective(1, Home::Node(5)),
        Err(SpaceError::BadHome { node: 5, nodes: 2 })
    );
    assert!(s.alloc_collective(1, Home::FirstTouch).is_ok());
}
