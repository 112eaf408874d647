//! Random data-race-free programs, checked against a sequential run of the same program.

use super::*;

/// A random data-race-free program: per thread, the ops and which of its loads are
/// deterministic (a counter read inside a critical section is not: it depends on the order in
/// which threads took the lock).
struct DrfProgram {
    nodes: NodeId,
    /// Per thread: node, ops.
    threads: Vec<(NodeId, Vec<Op>)>,
    /// Per thread: for each load, whether its value is deterministic.
    care: Vec<Vec<bool>>,
    /// Per thread: the ops of each phase (for the sequential run).
    phases: Vec<Vec<Vec<Op>>>,
}

const DRF_WORDS: usize = 2 * PAGE_WORDS;
const DRF_COUNTERS: usize = 4;
const DRF_PHASES: usize = 3;

fn drf_program(seed: u64) -> DrfProgram {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1f);
    let nodes: NodeId = rng.gen_range(2..=4);
    let per_node = rng.gen_range(1..=2);
    let total = nodes as usize * per_node;
    // Word roles: a few lock-protected counters among plain data words, on the same pages.
    let mut words: Vec<usize> = (0..DRF_WORDS).collect();
    for i in (1..words.len()).rev() {
        words.swap(i, rng.gen_range(0..=i));
    }
    let counters: Vec<usize> = words[..DRF_COUNTERS].to_vec();
    let data: Vec<usize> = words[DRF_COUNTERS..].to_vec();
    let waddr = |w: usize| addr(1 + (w / PAGE_WORDS) as u64, w % PAGE_WORDS);
    let barrier = Op::Barrier {
        id: 50,
        count: total as u32,
    };

    let mut phases = vec![Vec::new(); total];
    let mut care = vec![Vec::new(); total];
    for _ in 0..DRF_PHASES {
        // Each data word is written by one thread this phase, or read-only.
        let writer: Vec<Option<usize>> = data
            .iter()
            .map(|_| {
                if rng.gen_bool(0.5) {
                    Some(rng.gen_range(0..total))
                } else {
                    None
                }
            })
            .collect();
        let read_only: Vec<usize> = data
            .iter()
            .zip(&writer)
            .filter(|(_, w)| w.is_none())
            .map(|(&d, _)| d)
            .collect();
        for t in 0..total {
            let own: Vec<usize> = data
                .iter()
                .zip(&writer)
                .filter(|(_, w)| **w == Some(t))
                .map(|(&d, _)| d)
                .collect();
            let readable: Vec<usize> = read_only.iter().chain(&own).copied().collect();
            let mut ops = Vec::new();
            for _ in 0..rng.gen_range(2..=5) {
                match rng.gen_range(0..4) {
                    0 => {
                        let k = rng.gen_range(0..DRF_COUNTERS);
                        let lock = 200 + k as u64;
                        ops.extend([
                            Op::Lock(lock),
                            Op::Load {
                                addr: waddr(counters[k]),
                                reg: 0,
                            },
                            Op::AddImm {
                                reg: 0,
                                imm: rng.gen_range(1..100),
                            },
                            Op::StoreReg {
                                addr: waddr(counters[k]),
                                reg: 0,
                            },
                            Op::Unlock(lock),
                        ]);
                        care[t].push(false);
                    }
                    1 if !own.is_empty() => {
                        let w = own[rng.gen_range(0..own.len())];
                        ops.push(Op::Store {
                            addr: waddr(w),
                            value: rng.gen_range(1..1_000_000),
                        });
                    }
                    2 if !own.is_empty() && !readable.is_empty() => {
                        let src = readable[rng.gen_range(0..readable.len())];
                        let dst = own[rng.gen_range(0..own.len())];
                        ops.extend([
                            Op::Load {
                                addr: waddr(src),
                                reg: 1,
                            },
                            Op::AddImm {
                                reg: 1,
                                imm: rng.gen_range(1..1000),
                            },
                            Op::StoreReg {
                                addr: waddr(dst),
                                reg: 1,
                            },
                        ]);
                        care[t].push(true);
                    }
                    _ if !readable.is_empty() => {
                        let src = readable[rng.gen_range(0..readable.len())];
                        ops.push(Op::Load {
                            addr: waddr(src),
                            reg: 2,
                        });
                        care[t].push(true);
                    }
                    _ => {}
                }
            }
            ops.push(barrier);
            phases[t].push(ops);
        }
    }
    // Finally the last thread reads every word.
    let last = total - 1;
    let dump: Vec<Op> = (0..DRF_WORDS)
        .map(|w| Op::Load {
            addr: waddr(w),
            reg: 3,
        })
        .collect();
    care[last].extend(vec![true; DRF_WORDS]);
    phases[last].push(dump);
    let threads = phases
        .iter()
        .enumerate()
        .map(|(t, ph)| ((t % nodes as usize) as NodeId, ph.concat()))
        .collect();
    DrfProgram {
        nodes,
        threads,
        care,
        phases,
    }
}

/// Runs the program sequentially: phase by phase, thread after thread. Returns every thread's
/// load log.
fn sequential_run(p: &DrfProgram) -> Vec<Vec<u64>> {
    let mut mem: HashMap<u64, u64> = HashMap::new();
    let mut regs = vec![[0u64; 4]; p.threads.len()];
    let mut logs = vec![Vec::new(); p.threads.len()];
    let phases = p.phases.iter().map(Vec::len).max().unwrap_or(0);
    for ph in 0..phases {
        for (t, tp) in p.phases.iter().enumerate() {
            for op in tp.get(ph).into_iter().flatten() {
                match *op {
                    Op::Load { addr, reg } => {
                        let v = mem.get(&addr).copied().unwrap_or(0);
                        regs[t][reg] = v;
                        logs[t].push(v);
                    }
                    Op::Store { addr, value } => {
                        mem.insert(addr, value);
                    }
                    Op::StoreReg { addr, reg } => {
                        mem.insert(addr, regs[t][reg]);
                    }
                    Op::AddImm { reg, imm } => regs[t][reg] = regs[t][reg].wrapping_add(imm),
                    Op::Lock(_)
                    | Op::TryLock { .. }
                    | Op::Unlock(_)
                    | Op::Barrier { .. }
                    | Op::BarrierAll(_) => {}
                    Op::SpinUntilEq { .. } | Op::Crash => {
                        unreachable!("DRF programs do not spin or crash")
                    }
                }
            }
        }
    }
    logs
}

/// Random data-race-free programs (lock-protected read-modify-writes, barrier-separated
/// phases of exclusive writes and shared reads) must end exactly as their sequential run.
pub fn random_drf<C: Sim>(s: &Subject) {
    for seed in 0..seeds() {
        let p = drf_program(seed);
        let want = sequential_run(&p);
        let mut c = cluster::<C>(s, p.nodes, seed);
        if std::env::var("SVM_DEBUG_SEED").ok() == Some(seed.to_string()) {
            c = c.traced(s);
            for (t, (node, ops)) in p.threads.iter().enumerate() {
                eprintln!("thread {t} node {node}: {ops:?}");
            }
        }
        let tids: Vec<ThreadId> = p
            .threads
            .iter()
            .map(|(node, ops)| c.spawn(*node, ops.clone()))
            .collect();
        run(s, &mut c, "random DRF");
        for (t, &tid) in tids.iter().enumerate() {
            let got = c.log(tid);
            assert_eq!(
                got.len(),
                want[t].len(),
                "{} / random DRF, seed {seed}, thread {t}: load count",
                s.name
            );
            for (i, ((g, w), care)) in got.iter().zip(&want[t]).zip(&p.care[t]).enumerate() {
                if *care && g != w && std::env::var("SVM_DEBUG_SEED").is_ok() {
                    eprintln!("{}", c.dump_state());
                }
                assert!(
                    !care || g == w,
                    "{} / random DRF, seed {seed}, thread {t}, load {i}: got {g}, the sequential run gives {w}",
                    s.name
                );
            }
        }
    }
}

/// The random programs are not trivial: they use every kind of step.
#[test]
fn random_drf_programs_cover_every_op_kind() {
    let mut kinds = HashSet::new();
    for seed in 0..50 {
        for (_, ops) in drf_program(seed).threads {
            for op in ops {
                kinds.insert(std::mem::discriminant(&op));
            }
        }
    }
    // Load, Store, StoreReg, AddImm, Lock, Unlock, Barrier.
    assert_eq!(kinds.len(), 7);
}
