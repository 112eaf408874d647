//! What scope consistency promises: lock scopes, false sharing, and write notices (bounded,
//! surviving barrier races).

use super::*;

/// Data written inside a critical section of L is seen by the next acquirer of L. Two locks
/// protect a counter and two data words each, all on pages shared with the other lock's words
/// and with words each thread writes outside any critical section (false sharing everywhere);
/// every thread warms stale copies first. In every critical section the data must match the
/// counter (it is written after the counter, on other pages), and each thread must read back
/// its own private writes.
pub fn lock_scope<C: Sim>(s: &Subject) {
    const ROUNDS: u64 = 4;
    // Lock k: counter at word k of page 1, data at word k of pages 2 and 3.
    let counter = |k: u64| addr(1, k as usize);
    let data = |k: u64, j: u64| addr(2 + j, k as usize);
    // Thread t's private word: pages 2 and 3, words 4..8.
    let private = |t: usize| addr(2 + (t / 4) as u64, 4 + t % 4);
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 3) as NodeId;
        let per_node = 1 + (seed / 3 % 2) as usize;
        let total = nodes as usize * per_node;
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5c0e);
        let mut c = cluster::<C>(s, nodes, seed);
        let mut count = [0u64; 2];
        let mut tids = Vec::new();
        for t in 0..total {
            let mut p: Vec<Op> = (1..4)
                .flat_map(|pg| {
                    [
                        Op::Load {
                            addr: addr(pg, 0),
                            reg: 3,
                        },
                        Op::Load {
                            addr: addr(pg, 5),
                            reg: 3,
                        },
                    ]
                })
                .collect();
            p.push(Op::Barrier {
                id: 1,
                count: total as u32,
            });
            for r in 0..ROUNDS {
                let k = rng.gen_range(0..2u64);
                count[k as usize] += 1;
                p.extend([
                    Op::Store {
                        addr: private(t),
                        value: (t as u64 + 1) * 1000 + r,
                    },
                    Op::Lock(20 + k),
                    Op::Load {
                        addr: counter(k),
                        reg: 0,
                    },
                    Op::Load {
                        addr: data(k, 0),
                        reg: 1,
                    },
                    Op::Load {
                        addr: data(k, 1),
                        reg: 2,
                    },
                    Op::AddImm { reg: 0, imm: 1 },
                    Op::StoreReg {
                        addr: counter(k),
                        reg: 0,
                    },
                    Op::StoreReg {
                        addr: data(k, 0),
                        reg: 0,
                    },
                    Op::AddImm { reg: 0, imm: 1000 },
                    Op::StoreReg {
                        addr: data(k, 1),
                        reg: 0,
                    },
                    Op::Unlock(20 + k),
                    Op::Load {
                        addr: private(t),
                        reg: 3,
                    },
                ]);
            }
            p.push(Op::Barrier {
                id: 2,
                count: total as u32,
            });
            p.extend((0..2).flat_map(|k| {
                [
                    Op::Load {
                        addr: counter(k),
                        reg: 0,
                    },
                    Op::Load {
                        addr: data(k, 0),
                        reg: 0,
                    },
                    Op::Load {
                        addr: data(k, 1),
                        reg: 0,
                    },
                ]
            }));
            p.extend((0..total).map(|u| Op::Load {
                addr: private(u),
                reg: 0,
            }));
            tids.push(c.spawn((t % nodes as usize) as NodeId, p));
        }
        run(s, &mut c, "lock scope");
        for (t, &tid) in tids.iter().enumerate() {
            let log = &c.log(tid)[6..];
            for r in 0..ROUNDS as usize {
                let (cnt, d0, d1, own) =
                    (log[4 * r], log[4 * r + 1], log[4 * r + 2], log[4 * r + 3]);
                let want = if cnt == 0 { (0, 0) } else { (cnt, cnt + 1000) };
                assert_eq!(
                    (d0, d1),
                    want,
                    "{} / lock scope, seed {seed}, thread {t}, round {r}: the data does not match counter {cnt}",
                    s.name
                );
                assert_eq!(
                    own,
                    (t as u64 + 1) * 1000 + r as u64,
                    "{} / lock scope, seed {seed}, thread {t}: own write lost",
                    s.name
                );
            }
            let fin = &log[4 * ROUNDS as usize..];
            let want: Vec<u64> = (0..2)
                .flat_map(|k| {
                    let n = count[k];
                    [n, n, if n == 0 { 0 } else { n + 1000 }]
                })
                .chain((0..total).map(|u| (u as u64 + 1) * 1000 + ROUNDS - 1))
                .collect();
            assert_eq!(
                fin,
                &want[..],
                "{} / lock scope, seed {seed}, thread {t}: final state after the barrier",
                s.name
            );
        }
    }
}

/// False sharing: every thread writes its own words of the same two pages, many times per
/// phase, between barriers; after each barrier everyone reads every word. All writes
/// survive; multiple-writer protocols must not move the pages back and forth per write.
pub fn false_sharing<C: Sim>(s: &Subject) {
    const PHASES: u64 = 3;
    const WRITES: u64 = 4;
    let word = |t: usize, pg: u64| addr(1 + pg, t);
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 3) as NodeId;
        let per_node = 1 + (seed / 3 % 2) as usize;
        let total = nodes as usize * per_node;
        let value = |p: u64, t: usize, w: u64| (p + 1) * 10_000 + (t as u64 + 1) * 100 + w;
        let mut c = cluster::<C>(s, nodes, seed);
        let mut tids = Vec::new();
        for t in 0..total {
            let mut p = Vec::new();
            for ph in 0..PHASES {
                for w in 0..WRITES {
                    for pg in 0..2 {
                        p.push(Op::Store {
                            addr: word(t, pg),
                            value: value(ph, t, w),
                        });
                    }
                    p.push(Op::Load {
                        addr: word(t, w % 2),
                        reg: 0,
                    });
                }
                p.push(Op::Barrier {
                    id: 4,
                    count: total as u32,
                });
                p.extend((0..total).flat_map(|u| {
                    (0..2).map(move |pg| Op::Load {
                        addr: word(u, pg),
                        reg: 1,
                    })
                }));
                p.push(Op::Barrier {
                    id: 5,
                    count: total as u32,
                });
            }
            tids.push(c.spawn((t % nodes as usize) as NodeId, p));
        }
        run(s, &mut c, "false sharing");
        let pages_sent = c.pages_sent();
        for (t, &tid) in tids.iter().enumerate() {
            let want: Vec<u64> = (0..PHASES)
                .flat_map(|ph| {
                    (0..WRITES)
                        .map(move |w| value(ph, t, w))
                        .chain((0..total).flat_map(move |u| [value(ph, u, WRITES - 1); 2]))
                })
                .collect();
            assert_eq!(
                c.log(tid),
                &want[..],
                "{} / false sharing, seed {seed}, thread {t}",
                s.name
            );
        }
        if !s.sc_for_racy && !s.flushes_any_time {
            // No ping-pong: per phase a node fetches each page for its writes and for its reads
            // (plus a refetch when another node's flush invalidates a copy it still writes).
            let bound = nodes as u64 * 2 * PHASES * 4;
            assert!(
                pages_sent <= bound,
                "{} / false sharing ({} simulator), seed {seed}: {pages_sent} page transfers for {} nodes (bound {bound})",
                s.name,
                C::KIND,
                nodes
            );
        }
    }
}

/// A long run with many lock operations and periodic global barriers keeps the write notices
/// at lock managers bounded: each phase writes a new window of pages under three locks, so
/// without garbage collection the notices would grow with the number of phases.
pub fn notices_stay_bounded<C: Sim>(s: &Subject) {
    const PHASES: u64 = 12;
    const WINDOW: u64 = 5;
    const LOCKS: u64 = 3;
    for seed in 0..seeds() / 4 {
        let nodes = 3;
        let mut c = cluster::<C>(s, nodes, seed);
        let mut rng = StdRng::seed_from_u64(seed ^ 0xb0b);
        let mut sums = vec![0u64; (PHASES * WINDOW) as usize];
        let mut tids = Vec::new();
        for n in 0..nodes {
            let mut p = Vec::new();
            for ph in 0..PHASES {
                for _ in 0..4 {
                    let pg = 1 + ph * WINDOW + rng.gen_range(0..WINDOW);
                    let lock = 30 + pg % LOCKS;
                    let inc = rng.gen_range(1..50);
                    sums[(pg - 1) as usize] += inc;
                    p.extend([
                        Op::Lock(lock),
                        Op::Load {
                            addr: addr(pg, n as usize),
                            reg: 0,
                        },
                        Op::Load {
                            addr: addr(pg, 7),
                            reg: 0,
                        },
                        Op::AddImm { reg: 0, imm: inc },
                        Op::StoreReg {
                            addr: addr(pg, 7),
                            reg: 0,
                        },
                        Op::Unlock(lock),
                    ]);
                }
                // The global barrier (`svm::barrier()`): the engine drops the lock notices it
                // makes redundant only there, as it cannot tell whether a barrier of some
                // other id has every thread of the job.
                p.push(Op::BarrierAll(svm_core::node::GLOBAL_BARRIER));
            }
            if n == 0 {
                p.extend((0..PHASES * WINDOW).map(|i| Op::Load {
                    addr: addr(1 + i, 7),
                    reg: 1,
                }));
            }
            tids.push(c.spawn(n, p));
        }
        run(s, &mut c, "notices stay bounded");
        let peak = c.peak_lock_notices();
        let log = c.log(tids[0]);
        assert_eq!(
            &log[log.len() - sums.len()..],
            &sums[..],
            "{} / notices stay bounded, seed {seed}",
            s.name
        );
        // At most the notices of the current and the previous phase (a manager may not have
        // left the barrier yet when post-barrier releases reach it).
        let bound = 2 * WINDOW * LOCKS;
        assert!(
            peak <= bound,
            "{} / notices stay bounded ({} simulator), seed {seed}: {peak} notices at lock managers (bound {bound})",
            s.name,
            C::KIND
        );
        let held: usize = (0..nodes)
            .map(|n| c.with_sync(n, |st| st.lock_notice_count()))
            .sum();
        assert!(
            held as u64 <= WINDOW * LOCKS,
            "{} / notices stay bounded, seed {seed}: {held} left",
            s.name
        );
    }
}

/// Lock notices released right after a global barrier survive the garbage collection of that
/// barrier, even when they reach the lock's manager before the manager has left the barrier
/// itself: nodes 1 and 2 increment a counter under lock 0 (managed by node 0) right after each
/// barrier, while node 0 only takes part in the barriers.
pub fn notices_survive_barrier_races<C: Sim>(s: &Subject) {
    const PHASES: u64 = 6;
    const INCS: u64 = 3;
    for seed in 0..seeds() {
        let mut c = cluster::<C>(s, 3, seed);
        let ctr = addr(1 + seed % 3, (seed % 8) as usize);
        let barrier = Op::Barrier {
            id: 1 + seed % 3,
            count: 3,
        };
        c.spawn(0, vec![barrier; PHASES as usize + 1]);
        let mut last = 0;
        for n in 1..3 {
            let mut p = Vec::new();
            for _ in 0..PHASES {
                p.push(barrier);
                for _ in 0..INCS {
                    p.extend([
                        Op::Lock(0),
                        Op::Load { addr: ctr, reg: 0 },
                        Op::AddImm { reg: 0, imm: 1 },
                        Op::StoreReg { addr: ctr, reg: 0 },
                        Op::Unlock(0),
                    ]);
                }
            }
            p.extend([
                barrier,
                Op::Lock(0),
                Op::Load { addr: ctr, reg: 1 },
                Op::Unlock(0),
            ]);
            last = c.spawn(n, p);
        }
        run(s, &mut c, "notices survive barrier races");
        let log = c.log(last);
        assert_eq!(
            log.last().copied(),
            Some(2 * PHASES * INCS),
            "{} / notices survive barrier races, seed {seed}: lost increments",
            s.name
        );
    }
}
