//! The protocols under test: every one runs the whole suite on both simulators
//! (`conformance_suite!`), and tests of one protocol's options.

use super::*;

macro_rules! conformance_suite {
    ($module:ident, $subject:expr) => {
        mod $module {
            use super::*;
            const SUBJECT: Subject = $subject;
            #[test]
            fn message_passing() {
                super::message_passing::<Cluster>(&SUBJECT)
            }
            #[test]
            fn store_buffering() {
                super::store_buffering::<Cluster>(&SUBJECT)
            }
            #[test]
            fn iriw() {
                super::iriw::<Cluster>(&SUBJECT)
            }
            #[test]
            fn lock_counters() {
                super::lock_counters::<Cluster>(&SUBJECT)
            }
            #[test]
            fn barrier_phases() {
                super::barrier_phases::<Cluster>(&SUBJECT)
            }
            #[test]
            fn all_nodes_barrier_phases() {
                super::all_nodes_barrier_phases::<Cluster>(&SUBJECT)
            }
            #[test]
            fn subset_barriers() {
                super::subset_barriers::<Cluster>(&SUBJECT)
            }
            #[test]
            fn pushed_pages_two_nodes() {
                super::pushed_pages_two_nodes::<Cluster>(&SUBJECT)
            }
            #[test]
            fn random_drf() {
                super::random_drf::<Cluster>(&SUBJECT)
            }
            #[test]
            fn lock_scope() {
                super::lock_scope::<Cluster>(&SUBJECT)
            }
            #[test]
            fn false_sharing() {
                super::false_sharing::<Cluster>(&SUBJECT)
            }
            #[test]
            fn notices_survive_barrier_races() {
                super::notices_survive_barrier_races::<Cluster>(&SUBJECT)
            }
            #[test]
            fn notices_stay_bounded() {
                super::notices_stay_bounded::<Cluster>(&SUBJECT)
            }
            #[test]
            fn lock_fairness() {
                super::lock_fairness::<Cluster>(&SUBJECT)
            }
            #[test]
            fn lost_token_holder() {
                super::lost_token_holder::<Cluster>(&SUBJECT)
            }
            #[test]
            fn migratory_then_shared() {
                super::migratory_then_shared::<Cluster>(&SUBJECT)
            }
            #[test]
            fn paired_rows() {
                super::paired_rows::<Cluster>(&SUBJECT)
            }
            #[test]
            fn scattered_writes_at_a_barrier() {
                super::scattered_writes_at_a_barrier::<Cluster>(&SUBJECT);
            }
            #[test]
            fn home_reads_pages_others_wrote() {
                super::home_reads_pages_others_wrote::<Cluster>(&SUBJECT)
            }
            /// The same programs on the real engine of every node (`engine_sim`).
            mod engine {
                use super::*;
                #[test]
                fn message_passing() {
                    super::super::message_passing::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn store_buffering() {
                    super::super::store_buffering::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn iriw() {
                    super::super::iriw::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn lock_counters() {
                    super::super::lock_counters::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn barrier_phases() {
                    super::super::barrier_phases::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn all_nodes_barrier_phases() {
                    super::super::all_nodes_barrier_phases::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn subset_barriers() {
                    super::super::subset_barriers::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn random_drf() {
                    super::super::random_drf::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn lock_scope() {
                    super::super::lock_scope::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn false_sharing() {
                    super::super::false_sharing::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn notices_survive_barrier_races() {
                    super::super::notices_survive_barrier_races::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn notices_stay_bounded() {
                    super::super::notices_stay_bounded::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn lock_fairness() {
                    super::super::lock_fairness::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn lost_token_holder() {
                    super::super::lost_token_holder::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn migratory_then_shared() {
                    super::super::migratory_then_shared::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn paired_rows() {
                    super::super::paired_rows::<EngineCluster>(&SUBJECT)
                }
                #[test]
                fn scattered_writes_at_a_barrier() {
                    super::super::scattered_writes_at_a_barrier::<EngineCluster>(&SUBJECT);
                }
                #[test]
                fn home_reads_pages_others_wrote() {
                    super::super::home_reads_pages_others_wrote::<EngineCluster>(&SUBJECT)
                }
            }
        }
    };
}

conformance_suite!(
    sc_sw,
    Subject {
        name: "sc-sw",
        factory: sc_sw,
        sc_for_racy: true,
        single_writer: true,
        discard: Discard::NotHome,
        flushes_any_time: false,
    }
);

// As the userfaultfd engine runs it: every node, the home included, drops its contents at
// `SetAccess None`.
conformance_suite!(
    sc_sw_discard_always,
    Subject {
        name: "sc-sw",
        factory: sc_sw,
        sc_for_racy: true,
        single_writer: true,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

fn sc_sw_read_ahead(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScSingleWriter::with_prefetch(3))
}

// With read-ahead (`SVM_PREFETCH`): unasked read grants behind sequential read streams.
conformance_suite!(
    sc_sw_read_ahead,
    Subject {
        name: "sc-sw",
        factory: sc_sw_read_ahead,
        sc_for_racy: true,
        single_writer: true,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

conformance_suite!(
    sc_mw,
    Subject {
        name: "sc-mw",
        factory: sc_mw,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

conformance_suite!(
    scope,
    Subject {
        name: "scope",
        factory: scope,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

/// The multiple-writer protocols are not sequentially consistent for racy programs: store
/// buffering (x=1; r1=y ‖ y=1; r2=x) gives r1 = r2 = 0, which sc-sw never does (the example
/// of `docs/protocols.md`).
#[test]
fn racy_store_buffering_is_weak_under_multiple_writers() {
    for (name, factory) in [
        ("sc-mw", sc_mw as fn(NodeId) -> Box<dyn Protocol>),
        ("scope", scope),
    ] {
        let mut weak = 0;
        for seed in 0..50 {
            let cfg = SimConfig::new(3, seed)
                .page_size(8 * PAGE_WORDS)
                .home(|_| 2);
            let mut c = Cluster::new(cfg, factory);
            let (x, y) = (addr(1, 0), addr(1, 1));
            let t0 = c.spawn(
                0,
                vec![
                    Op::Store { addr: x, value: 1 },
                    Op::Load { addr: y, reg: 0 },
                ],
            );
            let t1 = c.spawn(
                1,
                vec![
                    Op::Store { addr: y, value: 1 },
                    Op::Load { addr: x, reg: 0 },
                ],
            );
            c.run().unwrap();
            if c.log(t0) == [0] && c.log(t1) == [0] {
                weak += 1;
            }
        }
        assert_eq!(
            weak, 50,
            "{name}: unflushed writes are invisible to other nodes"
        );
    }
}

fn sc_sw_fault_around(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScSingleWriter::with_prefetch(3).with_fault_around(4))
}

fn sc_sw_all_options(_: NodeId) -> Box<dyn Protocol> {
    Box::new(
        svm_protocols::ScSingleWriter::with_prefetch(3)
            .with_fault_around(4)
            .with_hold(HOLD_NS)
            .with_push()
            .with_grant_around_after(4, 1),
    )
}

/// The minimum hold of the sc-sw suite with every option: 40 steps of the engine simulator
/// (each step is 1 µs of its virtual time); the protocol simulator ends a hold at any step.
const HOLD_NS: u64 = 40_000;

// sc-sw with every option on, as `svmrun` runs it: read-ahead, fault-around, the minimum
// hold (`SVM_HOLD_US`: a page written again after another node took it since the last
// release is kept a while from nodes of higher rank; their requests wait for the hold's end
// or the holder's release), the producer–consumer push at barrier arrivals (`SVM_PUSH`) and
// grants around a request at a barrier (`SVM_GRANT_AROUND`; here from a node's first write
// request after the arrival, in blocks of 4 pages, so the suite's short programs reach it).
conformance_suite!(sc_sw_all_options, SC_SW_ALL_OPTIONS);

/// With every option on, the manager waiting at the barrier of
/// `scattered_writes_at_a_barrier` does grant pages around requests: on both simulators.
#[test]
fn sc_sw_grants_pages_around_scattered_writes_at_a_barrier() {
    let s = SC_SW_ALL_OPTIONS;
    for (kind, granted) in [
        ("model", scattered_writes_at_a_barrier::<Cluster>(&s)),
        ("engine", scattered_writes_at_a_barrier::<EngineCluster>(&s)),
    ] {
        assert!(
            granted > 0,
            "sc-sw ({kind} simulator): no page was granted around a request at a barrier"
        );
    }
}

const SC_SW_ALL_OPTIONS: Subject = Subject {
    name: "sc-sw",
    factory: sc_sw_all_options,
    sc_for_racy: true,
    single_writer: true,
    discard: Discard::Always,
    flushes_any_time: false,
};

/// Two nodes write their own word of one page in turns, with no synchronisation between the
/// writes (false sharing), then meet at a barrier and read both words: under the minimum hold
/// requests for the page wait for holds in some runs, a holder's write probe lowers the page
/// and the holder's next write raises it again in some, and every write survives. Returns the
/// requests kept for a thread that had not run since its page came (the protocol
/// simulator models those threads; the engine simulator's threads have no clock).
fn falsely_shared_writes_under_holds<C: Sim>() -> u64 {
    const WRITES: u64 = 12;
    let s = SC_SW_ALL_OPTIONS;
    let mut held = 0;
    let mut rewritten = 0;
    let mut kept_unused = 0;
    for seed in 0..seeds().min(200) {
        let mut c = cluster::<C>(&s, 2, seed);
        let mut tids = Vec::new();
        for t in 0..2 {
            let mut p: Vec<Op> = (1..=WRITES)
                .flat_map(|v| {
                    [
                        Op::Store {
                            addr: addr(1, t),
                            value: v,
                        },
                        Op::Load {
                            addr: addr(1, 1 - t),
                            reg: 0,
                        },
                    ]
                })
                .collect();
            p.push(Op::Barrier { id: 1, count: 2 });
            p.extend((0..2).map(|u| Op::Load {
                addr: addr(1, u),
                reg: 1,
            }));
            tids.push(c.spawn(t as NodeId, p));
        }
        run(&s, &mut c, "falsely shared writes under holds");
        for &tid in &tids {
            assert_eq!(
                c.log(tid)[WRITES as usize..],
                [WRITES, WRITES],
                "seed {seed} ({} simulator): a write was lost",
                C::KIND
            );
        }
        for n in 0..2 {
            let st = c.protocol_stats(n);
            held += st.requests_held;
            rewritten += st.hold_probe_rewrites;
            kept_unused += st.requests_kept_unused;
        }
    }
    assert!(
        held > 0,
        "{} simulator: no request ever waited for a hold",
        C::KIND
    );
    assert!(
        rewritten > 0,
        "{} simulator: no held page was ever written again after its probe lowered it",
        C::KIND
    );
    kept_unused
}

#[test]
fn falsely_shared_writes_under_holds_model() {
    let kept_unused = falsely_shared_writes_under_holds::<Cluster>();
    assert!(
        kept_unused > 0,
        "no request ever waited for a thread that had not run since its page came"
    );
}

#[test]
fn falsely_shared_writes_under_holds_engine() {
    falsely_shared_writes_under_holds::<EngineCluster>();
}

fn sc_mw_fault_around(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScMultiWriter::new().with_fault_around(4))
}

fn scope_fault_around(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::Scope::new().with_fault_around(4))
}

// With fault-around (`SVM_FAULT_AROUND`): a home's first fault on an untouched page makes the
// untouched home pages of its aligned block writable at once (read-ahead on as well for sc-sw).
conformance_suite!(
    sc_sw_fault_around,
    Subject {
        name: "sc-sw",
        factory: sc_sw_fault_around,
        sc_for_racy: true,
        single_writer: true,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

conformance_suite!(
    sc_mw_fault_around,
    Subject {
        name: "sc-mw",
        factory: sc_mw_fault_around,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

conformance_suite!(
    scope_fault_around,
    Subject {
        name: "scope",
        factory: scope_fault_around,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

fn sc_mw_read_ahead(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScMultiWriter::new().with_prefetch(3))
}

fn scope_read_ahead(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::Scope::new().with_prefetch(3))
}

// With `SVM_PREFETCH` on the home-based protocols: a node's fetching faults in order request
// the following pages too (several requests outstanding), and a home's write faults in order
// on its write-tracked pages make the following ones writable and written.
conformance_suite!(
    sc_mw_read_ahead,
    Subject {
        name: "sc-mw",
        factory: sc_mw_read_ahead,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

conformance_suite!(
    scope_read_ahead,
    Subject {
        name: "scope",
        factory: scope_read_ahead,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

fn sc_mw_bounded(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScMultiWriter::new().with_flush_after(FLUSH_AFTER_NS))
}

/// sc-mw's bounded visibility timer (`SVM_FLUSH_AFTER_US`): 30 steps of the engine simulator;
/// the protocol simulator fires it at any step.
const FLUSH_AFTER_NS: u64 = 30_000;

// sc-mw with bounded visibility: flushes without a release between any two steps, on top of
// the lock releases that wait in jobs of two nodes (the engine simulator's default). The
// programs only it makes work are in `bounded_visibility.rs`.
conformance_suite!(
    sc_mw_bounded,
    Subject {
        name: "sc-mw",
        factory: sc_mw_bounded,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: true,
    }
);

fn sc_mw_migrating(_: NodeId) -> Box<dyn Protocol> {
    Box::new(svm_protocols::ScMultiWriter::new().with_home_migration(true))
}

// With home migration at barriers (`SVM_HOME_MIGRATION=1`; jobs of two nodes): pages only the
// other node wrote move to it (`home_mw_migrate.rs`); the programs of two nodes exercise it.
conformance_suite!(
    sc_mw_migrating,
    Subject {
        name: "sc-mw",
        factory: sc_mw_migrating,
        sc_for_racy: false,
        single_writer: false,
        discard: Discard::Always,
        flushes_any_time: false,
    }
);

/// Two nodes run a stencil alternating two grids, each node's row of a grid on a page it is
/// home of: in phase p a node writes its row of grid p % 2 and, after the barrier, reads its
/// neighbour's. Under sc-sw with the push the homes push their rows, the readers drop them
/// after a phase of use, and a home then takes its row back writable at its departure
/// without a fault (`regain_dropped`), pushed after the phase whether its contents changed
/// or not (the first phases write the values the rows already hold). Every read must see the
/// phase's values. Returns the pages taken back over all seeds.
fn alternating_grids_two_nodes<C: Sim>() -> u64 {
    const PHASES: u64 = 24;
    let s = SC_SW_ALL_OPTIONS;
    // Grid g's row of node n: page 2 + 2g + n, homed on n.
    let row = |g: u64, n: u64| 2 + 2 * g + n;
    let value = |p: u64, n: u64, w: u64| if p < 8 { 7 } else { 1_000 * p + 10 * n + w };
    let mut regained = 0;
    for seed in 0..seeds().min(300) {
        let cfg = SimConfig::new(2, seed)
            .page_size(8 * PAGE_WORDS)
            .home(|p| (p % 2) as NodeId)
            .check_single_writer(s.single_writer)
            .discard(s.discard);
        let mut c = C::build(&s, cfg);
        let mut tids = Vec::new();
        for n in 0..2u64 {
            let mut prog = Vec::new();
            for p in 0..PHASES {
                let g = p % 2;
                prog.extend((0..2).map(|w| Op::Store {
                    addr: addr(row(g, n), w as usize),
                    value: value(p, n, w),
                }));
                prog.push(Op::BarrierAll(1));
                prog.extend((0..2).map(|w| Op::Load {
                    addr: addr(row(g, 1 - n), w),
                    reg: 0,
                }));
            }
            tids.push(c.spawn(n as NodeId, prog));
        }
        run(&s, &mut c, "alternating grids");
        for (n, &tid) in tids.iter().enumerate() {
            let want: Vec<u64> = (0..PHASES)
                .flat_map(|p| (0..2).map(move |w| value(p, 1 - n as u64, w)))
                .collect();
            assert_eq!(
                c.log(tid),
                want,
                "seed {seed} ({} simulator): node {n} read a stale row",
                C::KIND
            );
        }
        regained += (0..2)
            .map(|n| c.protocol_stats(n).pages_written_ahead)
            .sum::<u64>();
    }
    regained
}

#[test]
fn alternating_grids_two_nodes_model() {
    assert!(
        alternating_grids_two_nodes::<Cluster>() > 0,
        "no home took its row back"
    );
}

#[test]
fn alternating_grids_two_nodes_engine() {
    assert!(
        alternating_grids_two_nodes::<EngineCluster>() > 0,
        "no home took its row back"
    );
}
