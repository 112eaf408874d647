//! Locks and barriers: counters under a lock, the home reading pages others wrote, barrier
//! phases (counted, all nodes, subsets).

use super::*;

/// Lock-protected counters, several threads per node (cohort hand-offs), counters sharing pages.
pub fn lock_counters<C: Sim>(s: &Subject) {
    // (page, word, lock) of each counter: two share a page under different locks.
    const COUNTERS: [(u64, usize, u64); 3] = [(1, 0, 10), (1, 3, 11), (2, 7, 12)];
    const ROUNDS: usize = 4;
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 3) as NodeId;
        let per_node = 1 + (seed % 2) as usize * 2;
        // One lock for every counter: long runs of local hand-offs (the cohort bound).
        let big_lock = seed % 4 < 2;
        let total = nodes as usize * per_node;
        let mut c = cluster::<C>(s, nodes, seed);
        let mut expected = [0u64; 3];
        let mut reader = None;
        for j in 0..total {
            let mut p = Vec::new();
            for round in 0..ROUNDS {
                let k = (j + round) % COUNTERS.len();
                let (page, word, own_lock) = COUNTERS[k];
                let lock = if big_lock { 10 } else { own_lock };
                let inc = 1 + j as u64;
                expected[k] += inc;
                p.extend([
                    Op::Lock(lock),
                    Op::Load {
                        addr: addr(page, word),
                        reg: 0,
                    },
                    Op::AddImm { reg: 0, imm: inc },
                    Op::StoreReg {
                        addr: addr(page, word),
                        reg: 0,
                    },
                    Op::Unlock(lock),
                ]);
            }
            p.push(Op::Barrier {
                id: 3,
                count: total as u32,
            });
            if j == total - 1 {
                p.extend(COUNTERS.iter().map(|&(page, word, _)| Op::Load {
                    addr: addr(page, word),
                    reg: 1,
                }));
            }
            let t = c.spawn((j % nodes as usize) as NodeId, p);
            if j == total - 1 {
                reader = Some(t);
            }
        }
        run(s, &mut c, "lock counters");
        let log = c.log(reader.unwrap());
        assert_eq!(
            &log[log.len() - 3..],
            &expected,
            "{} / lock counters, seed {seed} ({nodes} nodes x {per_node} threads): lost increments",
            s.name
        );
    }
}

/// Pages homed on one node, written by the others, read in order by the home: the manager
/// reads pages another node owns, which sc-sw's read-ahead brings from the owner
/// (`AheadAsk`/`AheadCopy`). 2 to 4 nodes; all pages homed at node 0; each other node owns a
/// run of pages, which it rewrites (word 0) in every round; after a barrier node 0 reads word
/// 0 of every page in order while the writers store into word 1 of their pages (the same
/// pages, other words: data-race-free, but the owners take their pages back while copies are
/// on their way to the home) and into word 2 of the next writer's pages (a third node takes a
/// page from its owner meanwhile). Node 0 must read the round's values; words 1 and 2 are
/// checked at the end.
pub fn home_reads_pages_others_wrote<C: Sim>(s: &Subject) {
    const ROUNDS: u64 = 3;
    const PER_WRITER: u64 = 4;
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 3) as NodeId;
        let writers = nodes as u64 - 1;
        let pages = writers * PER_WRITER;
        let page_of = |w: u64, k: u64| 1 + (w - 1) * PER_WRITER + k;
        let value = |round: u64, page: u64| 100 * (round + 1) + page;
        let cfg = SimConfig::new(nodes, seed)
            .page_size(8 * PAGE_WORDS)
            .home(|_| 0)
            .check_single_writer(s.single_writer)
            .discard(s.discard);
        let mut c = C::build(s, cfg);
        let barrier = Op::Barrier {
            id: 1,
            count: nodes as u32,
        };
        let mut reader = Vec::new();
        for _ in 0..ROUNDS {
            reader.push(barrier);
            reader.extend((1..=pages).map(|p| Op::Load {
                addr: addr(p, 0),
                reg: 0,
            }));
            reader.push(barrier);
        }
        reader.extend((1..=pages).flat_map(|p| {
            [1, 2].map(|word| Op::Load {
                addr: addr(p, word),
                reg: 0,
            })
        }));
        let home = c.spawn(0, reader);
        for w in 1..=writers {
            let mut prog = Vec::new();
            for round in 0..ROUNDS {
                prog.extend((0..PER_WRITER).map(|k| Op::Store {
                    addr: addr(page_of(w, k), 0),
                    value: value(round, page_of(w, k)),
                }));
                prog.push(barrier);
                // Taken back while the home reads word 0 (order varies with the seed), and
                // the next writer's pages taken from it (word 2).
                let next = w % writers + 1;
                for k in (0..PER_WRITER).rev() {
                    let (mine, theirs) = (
                        page_of(w, (k + seed) % PER_WRITER),
                        page_of(next, (k + seed + 1) % PER_WRITER),
                    );
                    prog.push(Op::Store {
                        addr: addr(mine, 1),
                        value: value(round, mine) + 1,
                    });
                    prog.push(Op::Store {
                        addr: addr(theirs, 2),
                        value: value(round, theirs) + 2,
                    });
                }
                prog.push(barrier);
            }
            c.spawn(w as NodeId, prog);
        }
        run(s, &mut c, "home reads pages others wrote");
        let want: Vec<u64> = (0..ROUNDS)
            .flat_map(|round| (1..=pages).map(move |p| value(round, p)))
            .chain((1..=pages).flat_map(|p| [1, 2].map(|word| value(ROUNDS - 1, p) + word)))
            .collect();
        assert_eq!(
            c.log(home),
            &want[..],
            "{} / home reads pages others wrote, seed {seed}",
            s.name
        );
    }
}

/// Barrier phases: every thread writes its slot, barrier, reads every slot, barrier.
pub fn barrier_phases<C: Sim>(s: &Subject) {
    const PHASES: u64 = 3;
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 2) as NodeId;
        let total = nodes as usize * 2;
        let slot = |j: usize| addr(1 + (j % 2) as u64, j / 2);
        let value = |p: u64, j: usize| p * 100 + j as u64 + 1;
        let mut c = cluster::<C>(s, nodes, seed);
        let threads: Vec<ThreadId> = (0..total)
            .map(|j| {
                let mut prog = Vec::new();
                for p in 0..PHASES {
                    prog.push(Op::Store {
                        addr: slot(j),
                        value: value(p, j),
                    });
                    prog.push(Op::Barrier {
                        id: 7,
                        count: total as u32,
                    });
                    prog.extend((0..total).map(|i| Op::Load {
                        addr: slot((i + j) % total),
                        reg: 0,
                    }));
                    prog.push(Op::Barrier {
                        id: 8,
                        count: total as u32,
                    });
                }
                c.spawn((j % nodes as usize) as NodeId, prog)
            })
            .collect();
        run(s, &mut c, "barrier phases");
        for (j, &t) in threads.iter().enumerate() {
            let want: Vec<u64> = (0..PHASES)
                .flat_map(|p| (0..total).map(move |i| value(p, (i + j) % total)))
                .collect();
            assert_eq!(
                c.log(t),
                &want[..],
                "{} / barrier phases, seed {seed}, thread {j}",
                s.name
            );
        }
    }
}

/// Barrier phases through the all-nodes (dissemination) barrier, as the engine runs the
/// global barrier: one thread per node, 2 to 5 nodes (odd counts: rounds wrap around), every
/// thread writes its slot, barrier, reads every slot, barrier; the same two barrier ids are
/// used again in every phase, so a node that left an episode early sends the next one's round
/// messages while others are still in the last.
pub fn all_nodes_barrier_phases<C: Sim>(s: &Subject) {
    const PHASES: u64 = 4;
    for seed in 0..seeds() {
        let nodes = 2 + (seed % 4) as NodeId;
        let total = nodes as usize;
        // Slots on two pages: several nodes write the same page (false sharing).
        let slot = |j: usize| addr(1 + (j % 2) as u64, j / 2);
        let value = |p: u64, j: usize| p * 100 + j as u64 + 1;
        let mut c = cluster::<C>(s, nodes, seed);
        let threads: Vec<ThreadId> = (0..total)
            .map(|j| {
                let mut prog = Vec::new();
                for p in 0..PHASES {
                    prog.push(Op::Store {
                        addr: slot(j),
                        value: value(p, j),
                    });
                    prog.push(Op::BarrierAll(7));
                    prog.extend((0..total).map(|i| Op::Load {
                        addr: slot((i + j) % total),
                        reg: 0,
                    }));
                    prog.push(Op::BarrierAll(8));
                }
                c.spawn(j as NodeId, prog)
            })
            .collect();
        run(s, &mut c, "all-nodes barrier phases");
        for (j, &t) in threads.iter().enumerate() {
            let want: Vec<u64> = (0..PHASES)
                .flat_map(|p| (0..total).map(move |i| value(p, (i + j) % total)))
                .collect();
            assert_eq!(
                c.log(t),
                &want[..],
                "{} / all-nodes barrier phases, {nodes} nodes, seed {seed}, thread {j}",
                s.name
            );
        }
    }
}

/// Counted barriers of different subsets of the nodes, 3 nodes, one thread each. Every node
/// first reads a word (so each holds a copy of its page), then all three meet (barrier 10),
/// then node 0 writes the word and meets node 1 alone (barrier 11). Node 2, which was not
/// there, must read node 0's value when it
/// - meets node 0 (barrier 12): the write precedes a barrier they share;
/// - meets node 1 only (barrier 13): the write reached node 1 through barrier 11, and scope
///   consistency makes every write that precedes a barrier visible to its participants;
/// - meets both at a barrier of every node (barrier 14).
///
/// The homes are random (per seed), so the word's page may be homed on any of the three.
pub fn subset_barriers<C: Sim>(s: &Subject) {
    let word = addr(1, 0);
    let all = |id| Op::Barrier { id, count: 3 };
    let pair = |id| Op::Barrier { id, count: 2 };
    let read = Op::Load { addr: word, reg: 0 };
    let write = Op::Store {
        addr: word,
        value: 5,
    };
    let cases: [(&str, Op, [Vec<Op>; 2]); 3] = [
        ("direct", pair(12), [vec![pair(12)], vec![]]),
        ("through node 1", pair(13), [vec![], vec![pair(13)]]),
        ("every node", all(14), [vec![all(14)], vec![all(14)]]),
    ];
    for seed in 0..seeds() {
        for (case, meet, [then0, then1]) in &cases {
            let mut c = cluster::<C>(s, 3, seed);
            let mut p0 = vec![read, all(10), write, pair(11)];
            p0.extend(then0.iter().copied());
            let mut p1 = vec![read, all(10), pair(11)];
            p1.extend(then1.iter().copied());
            c.spawn(0, p0);
            c.spawn(1, p1);
            let reader = c.spawn(2, vec![read, all(10), *meet, read]);
            run(s, &mut c, "subset barriers");
            assert_eq!(
                c.log(reader),
                &[0, 5],
                "{} / subset barriers ({case}), seed {seed}: node 2 read [before, after]",
                s.name
            );
        }
    }
}
