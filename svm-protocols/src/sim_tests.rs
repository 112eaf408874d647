use super::*;
use crate::ScSingleWriter;

fn sc_sw(_: NodeId) -> Box<dyn Protocol> {
    Box::new(ScSingleWriter::new())
}

/// A protocol that never answers anything (to exercise deadlock detection).
struct Mute;
impl Protocol for Mute {
    fn name(&self) -> &'static str {
        "mute"
    }
    fn on_fault(&mut self, _: &dyn Context, _: PageId, _: Access, _: &mut Vec<Action>) {}
    fn on_message(
        &mut self,
        _: &dyn Context,
        _: NodeId,
        _: &ProtoMsg,
        _: usize,
        _: &mut Vec<Action>,
    ) {
    }
    fn on_release(&mut self, _: &dyn Context, token: u64, out: &mut Vec<Action>) {
        out.push(Action::ReleaseDone {
            token,
            notices: vec![],
        });
    }
    fn on_acquire(&mut self, _: &dyn Context, token: u64, _: &[PageId], out: &mut Vec<Action>) {
        out.push(Action::AcquireDone { token });
    }
    fn describe(&self, page: PageId) -> String {
        format!("mute knows nothing about page {page}")
    }
}

/// Grants read access and takes it back in the same batch on the first fault, for good on
/// the second.
struct Flicker {
    faults: u32,
}
impl Protocol for Flicker {
    fn name(&self) -> &'static str {
        "flicker"
    }
    fn on_fault(&mut self, _: &dyn Context, page: PageId, _: Access, out: &mut Vec<Action>) {
        self.faults += 1;
        out.push(Action::SetAccess {
            page,
            access: Access::Read,
        });
        if self.faults == 1 {
            out.push(Action::SetAccess {
                page,
                access: Access::None,
            });
        }
    }
    fn on_message(
        &mut self,
        _: &dyn Context,
        _: NodeId,
        _: &ProtoMsg,
        _: usize,
        _: &mut Vec<Action>,
    ) {
    }
    fn on_release(&mut self, _: &dyn Context, token: u64, out: &mut Vec<Action>) {
        out.push(Action::ReleaseDone {
            token,
            notices: vec![],
        });
    }
    fn on_acquire(&mut self, _: &dyn Context, token: u64, _: &[PageId], out: &mut Vec<Action>) {
        out.push(Action::AcquireDone { token });
    }
    fn stats(&self) -> ProtocolStats {
        ProtocolStats {
            invalidations: self.faults as u64,
            ..ProtocolStats::default()
        }
    }
    fn describe(&self, page: PageId) -> String {
        format!("flicker page {page}")
    }
}

#[test]
fn a_woken_thread_retries_and_faults_again_if_access_was_lost() {
    let mut c = Cluster::new(SimConfig::new(1, 1), |_| Box::new(Flicker { faults: 0 }));
    let t = c.spawn(0, vec![Op::Load { addr: 0, reg: 0 }]);
    c.run().unwrap();
    assert_eq!(c.log(t), &[0]);
    assert_eq!(
        c.protocol_stats(0).invalidations,
        2,
        "the retry must fault a second time"
    );
}

#[test]
fn same_seed_same_run() {
    let run = |seed| {
        let mut c = Cluster::new(SimConfig::new(3, seed), sc_sw);
        let ts: Vec<_> = (0..3)
            .map(|n| {
                c.spawn(
                    n,
                    vec![
                        Op::Store {
                            addr: 8 * n as u64,
                            value: n as u64 + 1,
                        },
                        Op::Load { addr: 0, reg: 0 },
                        Op::Load { addr: 8, reg: 1 },
                        Op::Load { addr: 16, reg: 2 },
                    ],
                )
            })
            .collect();
        let stats = c.run().unwrap();
        (
            stats,
            ts.iter().map(|&t| c.log(t).to_vec()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(run(5), run(5));
    let distinct: std::collections::HashSet<_> = (0..50).map(|s| run(s).1).collect();
    assert!(
        distinct.len() > 1,
        "different seeds should interleave differently"
    );
}

#[test]
fn deadlock_is_reported_with_a_dump() {
    let mut c = Cluster::new(SimConfig::new(2, 1), |_| Box::new(Mute));
    c.spawn(1, vec![Op::Load { addr: 0, reg: 0 }]);
    let e = c.run().unwrap_err();
    assert_eq!(e.kind, SimErrorKind::Deadlock);
    assert!(e.dump.contains("mute knows nothing about page 0"), "{e}");
    assert!(e.dump.contains("Fault"), "{e}");
}

#[test]
fn step_limit_and_spin_bound() {
    let mut c = Cluster::new(SimConfig::new(1, 1).max_steps(10), sc_sw);
    c.spawn(
        0,
        vec![Op::SpinUntilEq {
            addr: 0,
            value: 1,
            max_loads: 1000,
        }],
    );
    assert_eq!(c.run().unwrap_err().kind, SimErrorKind::StepLimit(10));
    let mut c = Cluster::new(SimConfig::new(1, 1), sc_sw);
    c.spawn(
        0,
        vec![Op::SpinUntilEq {
            addr: 8,
            value: 1,
            max_loads: 5,
        }],
    );
    assert_eq!(
        c.run().unwrap_err().kind,
        SimErrorKind::SpinBound { thread: 0, addr: 8 }
    );
}

#[test]
fn misuse_is_reported() {
    let mut c = Cluster::new(SimConfig::new(2, 1), sc_sw);
    c.spawn(0, vec![Op::Unlock(3)]);
    assert!(matches!(c.run().unwrap_err().kind, SimErrorKind::Sync(_)));
    let mut c = Cluster::new(SimConfig::new(2, 1), sc_sw);
    c.spawn(0, vec![Op::Barrier { id: 0, count: 2 }]);
    c.spawn(1, vec![Op::Barrier { id: 0, count: 3 }]);
    let e = c.run().unwrap_err();
    // Either arrival may reach the manager first; the other is refused.
    assert!(
        matches!(e.kind, SimErrorKind::Sync(ref m) if m.contains("count")),
        "{e}"
    );
    let mut c = Cluster::new(SimConfig::new(1, 1), sc_sw);
    c.spawn(0, vec![Op::Load { addr: 3, reg: 0 }]);
    assert!(matches!(
        c.run().unwrap_err().kind,
        SimErrorKind::BadProgram(_)
    ));
}

#[test]
fn try_lock_and_registers() {
    let mut c = Cluster::new(SimConfig::new(2, 9), sc_sw);
    let t = c.spawn(
        0,
        vec![
            Op::TryLock { lock: 1, reg: 0 },
            Op::Load { addr: 8, reg: 1 },
            Op::AddImm { reg: 1, imm: 5 },
            Op::StoreReg { addr: 8, reg: 1 },
            Op::Unlock(1),
            Op::Load { addr: 8, reg: 2 },
        ],
    );
    c.run().unwrap();
    assert_eq!(c.regs(t), &[1, 5, 5]);
    assert_eq!(c.peek(0, 8), 5);
    assert_eq!(c.access(0, 0), Access::Write);
    assert!(c.describe(0).contains("sc-sw page 0"));
}

#[test]
fn dropped_copies_read_zero_on_the_next_install_only_if_unwritten() {
    // Node 1 writes page 0 (home 0): ownership moves, the home's copy becomes stale but is
    // kept; node 1's copy is dropped when ownership returns to node 0.
    let mut c = Cluster::new(SimConfig::new(2, 3).check_single_writer(true), sc_sw);
    c.spawn(
        1,
        vec![
            Op::Store { addr: 0, value: 9 },
            Op::Barrier { id: 0, count: 2 },
        ],
    );
    let t = c.spawn(
        0,
        vec![
            Op::Barrier { id: 0, count: 2 },
            Op::Store { addr: 8, value: 1 },
            Op::Load { addr: 0, reg: 0 },
        ],
    );
    c.run().unwrap();
    assert_eq!(c.log(t), &[9]);
    assert_eq!(c.access(1, 0), Access::None);
    assert_eq!(
        c.peek(1, 0),
        0,
        "a non-home node's copy is dropped at SetAccess None"
    );
    assert!(c.stats().pages_sent >= 2);
}
