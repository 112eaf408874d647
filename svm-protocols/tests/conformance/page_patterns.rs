//! Sharing patterns the protocols adapt to: pages pushed to their readers, rows asked for in
//! pairs, migratory pages that become shared.

use super::*;

/// Two nodes, stencil-like phases under the global barrier, with what can go wrong when a home
/// sends pages unasked (the push of sc-mw and scope in a job of two nodes, `home_mw_push.rs`): node 1 writes
/// a word of a page node 0 writes and pushes (its own writes must survive a pushed copy, also
/// while its diffs are in flight), node 0's threads pass barriers of their own in between
/// (their writes must not be covered by an older push), the phases outlast a push budget, and
/// a lock-protected counter on a pushed page is incremented from both nodes.
pub fn pushed_pages_two_nodes<C: Sim>(s: &Subject) {
    const PHASES: u64 = 16;
    // Page 1 (node 0's row), page 3 (the counter): homed on node 0; page 2: node 1's row.
    let (row0, row1, counter) = (1, 2, addr(3, 0));
    let own = |p: u64, w: u64| 1_000 * (p + 1) + w;
    let second = |p: u64| 500_000 + p;
    let theirs = |p: u64| 2_000_000 + p;
    let mine = |p: u64| 3_000_000 + p;
    let inc = |p: u64| Op::AddImm { reg: 0, imm: p + 1 };
    let locked_inc = |p: u64| {
        [
            Op::Lock(9),
            Op::Load {
                addr: counter,
                reg: 0,
            },
            inc(p),
            Op::StoreReg {
                addr: counter,
                reg: 0,
            },
            Op::Unlock(9),
        ]
    };
    let mut pushed = 0;
    for seed in 0..seeds() {
        let cfg = SimConfig::new(2, seed)
            .page_size(8 * PAGE_WORDS)
            .home(|p| if p == 2 { 1 } else { 0 })
            .check_single_writer(s.single_writer)
            .discard(s.discard);
        let mut c = C::build(s, cfg);
        let (mut t0, mut t0b, mut t1) = (Vec::new(), Vec::new(), Vec::new());
        let mut want0 = Vec::new();
        let mut want1 = Vec::new();
        let mut total = 0;
        for p in 0..PHASES {
            let extra = p % 2 == 1;
            // Node 0: its row, a barrier of its own threads, a second write to its row.
            t0.extend([
                Op::Store {
                    addr: addr(row0, 0),
                    value: own(p, 0),
                },
                Op::Store {
                    addr: addr(row0, 1),
                    value: own(p, 1),
                },
            ]);
            if extra {
                t0.push(Op::Barrier { id: 5, count: 2 });
                t0.push(Op::Store {
                    addr: addr(row0, 0),
                    value: second(p),
                });
                t0b.push(Op::Barrier { id: 5, count: 2 });
            }
            t0.push(Op::BarrierAll(7));
            t0.extend([
                Op::Load {
                    addr: addr(row1, 0),
                    reg: 1,
                },
                Op::Load {
                    addr: addr(row0, 4),
                    reg: 1,
                },
            ]);
            want0.extend([theirs(p), mine(p)]);
            t0.push(Op::BarrierAll(8));
            // Node 0's second thread: the counter, at any time.
            t0b.extend(locked_inc(p));
            total += p + 1;
            // Node 1: its row, and its word of node 0's row; loads that widen the window
            // in which its copy of node 0's row is being written.
            t1.extend([
                Op::Store {
                    addr: addr(row0, 4),
                    value: mine(p),
                },
                Op::Store {
                    addr: addr(row1, 0),
                    value: theirs(p),
                },
                Op::Load {
                    addr: addr(row1, 0),
                    reg: 1,
                },
                Op::BarrierAll(7),
            ]);
            want1.push(theirs(p));
            let first = if extra { second(p) } else { own(p, 0) };
            t1.extend([0, 1, 4].map(|w| Op::Load {
                addr: addr(row0, w),
                reg: 1,
            }));
            want1.extend([first, own(p, 1), mine(p)]);
            t1.extend(locked_inc(p));
            total += p + 1;
            t1.push(Op::BarrierAll(8));
        }
        for t in [&mut t0, &mut t0b, &mut t1] {
            t.push(Op::Barrier { id: 11, count: 3 });
        }
        t0.push(Op::Load {
            addr: counter,
            reg: 1,
        });
        want0.push(total);
        if std::env::var("SVM_DEBUG_SEED").ok() == Some(seed.to_string()) {
            c = c.traced(s);
        }
        let (a, _, b) = (c.spawn(0, t0), c.spawn(0, t0b), c.spawn(1, t1));
        run(s, &mut c, "pushed pages, two nodes");
        if std::env::var("SVM_DEBUG_SEED").ok() == Some(seed.to_string()) {
            eprintln!("{}", c.dump_state());
        }
        let rd = |t: ThreadId| -> Vec<u64> { c.log(t).to_vec() };
        // Node 1's lock section loads the counter too: leave those out.
        let log1: Vec<u64> = rd(b).chunks(5).flat_map(|ch| ch[..4].to_vec()).collect();
        assert_eq!(
            (rd(a), log1),
            (want0, want1),
            "{} / pushed pages, two nodes, seed {seed}",
            s.name
        );
        pushed += c.protocol_stats(0).pages_pushed + c.protocol_stats(1).pages_pushed;
    }
    if s.name != "sc-sw" {
        assert!(
            pushed > 0,
            "{} / pushed pages, two nodes: no page was pushed",
            s.name
        );
    }
}

/// Rows of two pages, each node writing its own row and reading its neighbours' between
/// barriers (a stencil's boundary exchange), then a racy flag and datum on the two pages of
/// one row. Under sc-sw the row pages are asked for in pairs after the first rounds
/// (remembered pairs); every read must still see the last round's values, and a reader that
/// sees the flag must see the datum, whether the datum's page came along with the flag's.
pub fn paired_rows<C: Sim>(s: &Subject) {
    const ROUNDS: u64 = 4;
    // Row of node n: pages 4n+1 and 4n+2, both homed at n (homes in blocks of 4 pages).
    let row = |n: u64| [addr(4 * n + 1, 0), addr(4 * n + 2, 0)];
    let value = |round: u64, n: u64, half: u64| 1_000 * (round + 1) + 10 * n + half;
    let mut paired = 0;
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 3) as NodeId;
        let cfg = SimConfig::new(nodes, seed)
            .page_size(8 * PAGE_WORDS)
            .home(move |p| ((p / 4) % nodes as u64) as NodeId)
            .check_single_writer(s.single_writer)
            .discard(s.discard);
        let mut c = C::build(s, cfg);
        let mut tids = Vec::new();
        for n in 0..nodes as u64 {
            let neighbours: Vec<u64> = [n.wrapping_sub(1), n + 1]
                .into_iter()
                .filter(|&m| m < nodes as u64)
                .collect();
            let mut p = Vec::new();
            for round in 0..ROUNDS {
                for &m in &neighbours {
                    for a in row(m) {
                        p.push(Op::Load { addr: a, reg: 0 });
                    }
                }
                p.push(Op::Barrier {
                    id: 1,
                    count: nodes as u32,
                });
                for (half, a) in row(n).into_iter().enumerate() {
                    p.push(Op::Store {
                        addr: a,
                        value: value(round, n, half as u64),
                    });
                }
                p.push(Op::Barrier {
                    id: 2,
                    count: nodes as u32,
                });
            }
            if s.sc_for_racy {
                // Node 1's row: the flag on its first page, the datum on its second.
                let [flag, datum] = row(1);
                if n == 1 {
                    p.extend(publish(datum, flag));
                } else {
                    p.extend(consume(datum, flag, 1));
                }
            }
            tids.push((n, neighbours, c.spawn(n as NodeId, p)));
        }
        run(s, &mut c, "paired rows");
        for (n, neighbours, t) in &tids {
            let want: Vec<u64> = (0..ROUNDS)
                .flat_map(|round| {
                    neighbours.iter().flat_map(move |&m| {
                        (0..2).map(move |half| {
                            if round == 0 {
                                0
                            } else {
                                value(round - 1, m, half)
                            }
                        })
                    })
                })
                .collect();
            let log = c.log(*t);
            assert_eq!(
                &log[..want.len()],
                &want[..],
                "{} / paired rows, seed {seed}, node {n}: a read missed the last round's row",
                s.name
            );
            if s.sc_for_racy && *n != 1 {
                assert_eq!(
                    log[log.len() - 1],
                    42,
                    "{} / paired rows, seed {seed}: node {n} saw the flag, not the datum; {}",
                    s.name,
                    c.describe(6)
                );
            }
        }
        paired += (0..nodes)
            .map(|n| c.protocol_stats(n).pages_paired)
            .sum::<u64>();
    }
    if s.name == "sc-sw" {
        assert!(
            paired > 0,
            "sc-sw / paired rows: no page was ever asked for with its pair"
        );
    }
}

/// A page that migrates (every node in turn reads then writes it under a lock), then is
/// read by everyone, then carries racy data next to a flag on another page. Under sc-sw the
/// first phase takes the migratory path (exclusive read grants, writes without a request);
/// the reads that follow must end it; no increment or store is lost, and racy readers stay
/// sequentially consistent.
pub fn migratory_then_shared<C: Sim>(s: &Subject) {
    const ROUNDS: u64 = 3;
    let x = addr(1, 0);
    let data = addr(1, 5);
    let flag = addr(2, 0);
    let mut upgrades = 0;
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 3) as NodeId;
        let mut c = cluster::<C>(s, nodes, seed);
        let mut tids = Vec::new();
        for n in 0..nodes {
            let mut p = Vec::new();
            for _ in 0..ROUNDS {
                p.extend([
                    Op::Lock(7),
                    Op::Load { addr: x, reg: 0 },
                    Op::AddImm { reg: 0, imm: 1 },
                    Op::StoreReg { addr: x, reg: 0 },
                    Op::Unlock(7),
                ]);
            }
            p.push(Op::Barrier {
                id: 1,
                count: nodes as u32,
            });
            p.extend([Op::Load { addr: x, reg: 1 }, Op::Load { addr: x, reg: 1 }]);
            p.push(Op::Barrier {
                id: 2,
                count: nodes as u32,
            });
            if s.sc_for_racy {
                if n == 0 {
                    p.extend(publish(data, flag));
                } else {
                    p.extend(consume(data, flag, 2));
                }
            }
            tids.push(c.spawn(n, p));
        }
        run(s, &mut c, "migratory then shared");
        let total = ROUNDS * nodes as u64;
        for (n, &t) in tids.iter().enumerate() {
            let log = c.log(t);
            assert_eq!(
                log[log.len() - if n > 0 && s.sc_for_racy { 3 } else { 2 }..][..2],
                [total, total],
                "{} / migratory then shared, seed {seed}, node {n}: lost increments; {}",
                s.name,
                c.describe(1)
            );
            if n > 0 && s.sc_for_racy {
                assert_eq!(
                    log[log.len() - 1],
                    42,
                    "{} / migratory then shared, seed {seed}: node {n} saw the flag, not the data; {}",
                    s.name,
                    c.describe(1)
                );
            }
        }
        upgrades += (0..nodes)
            .map(|n| c.protocol_stats(n).migratory_upgrades)
            .sum::<u64>();
    }
    if s.name == "sc-sw" {
        assert!(
            upgrades > 0,
            "sc-sw / migratory then shared: no write took the migratory path over all seeds"
        );
    }
}

/// Radix's permutation in miniature: node 0, home of every page, writes its word of each of
/// 16 pages in order and waits at a barrier, while every other node writes its own word of
/// each page in a scrambled order; after the barrier everyone reads every word. Under sc-sw
/// (every option) the manager waiting at the barrier grants the writers pages around their
/// requests (`SVM_GRANT_AROUND`), read-only and exclusive; every write must survive. Returns
/// the pages granted around over all seeds.
pub fn scattered_writes_at_a_barrier<C: Sim>(s: &Subject) -> u64 {
    const PAGES: u64 = 16;
    let value = |round: u64, page: u64, n: u64| 10_000 * (round + 1) + 100 * page + n;
    let mut granted = 0;
    for seed in 0..seeds().min(300) {
        let nodes = 2 + (seed % 2) as NodeId;
        let cfg = SimConfig::new(nodes, seed)
            .page_size(8 * PAGE_WORDS)
            .home(|_| 0)
            .check_single_writer(s.single_writer)
            .discard(s.discard);
        let mut c = C::build(s, cfg);
        let mut tids = Vec::new();
        for n in 0..nodes as u64 {
            let mut p = Vec::new();
            for round in 0..2 {
                for i in 0..PAGES {
                    let page = if n == 0 {
                        i
                    } else {
                        (i * 5 + n + round) % PAGES
                    };
                    p.push(Op::Store {
                        addr: addr(page + 1, n as usize),
                        value: value(round, page, n),
                    });
                }
                p.push(Op::Barrier {
                    id: 1,
                    count: nodes as u32,
                });
                for page in 0..PAGES {
                    for m in 0..nodes as u64 {
                        p.push(Op::Load {
                            addr: addr(page + 1, m as usize),
                            reg: 0,
                        });
                    }
                }
                p.push(Op::Barrier {
                    id: 2,
                    count: nodes as u32,
                });
            }
            tids.push(c.spawn(n as NodeId, p));
        }
        run(s, &mut c, "scattered writes at a barrier");
        let want: Vec<u64> = (0..2)
            .flat_map(|round| {
                (0..PAGES)
                    .flat_map(move |page| (0..nodes as u64).map(move |m| value(round, page, m)))
            })
            .collect();
        for (n, t) in tids.iter().enumerate() {
            assert_eq!(
                c.log(*t),
                &want[..],
                "{} / scattered writes at a barrier, seed {seed}, node {n}: a write was lost",
                s.name
            );
        }
        granted += (0..nodes)
            .map(|n| c.protocol_stats(n).pages_granted_around)
            .sum::<u64>();
    }
    granted
}
