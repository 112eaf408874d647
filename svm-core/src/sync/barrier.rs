//! Barriers counted at a manager (`id % nodes`): arrivals with their write notices, the
//! release of every node that took part, a count that does not match; the barrier of every
//! node, one thread each, without a manager is `dissemination.rs` (see `docs/sync.md`).

use std::collections::{BTreeMap, VecDeque};

use svm_comm::wire::{NodeId, PageId, SyncMsg};

use super::{BarrierName, SyncError, SyncEvent, SyncState, Waiter};

#[derive(Default, Debug)]
pub(super) struct NodeBarrier {
    /// Local threads that arrived and wait for the release, with their counts.
    waiters: VecDeque<(Waiter, u32)>,
}

#[derive(Default, Debug)]
pub(super) struct ManagedBarrier {
    count: u32,
    arrived: u32,
    per_node: Vec<u32>,
    /// The pages named by the arrivals' write notices, with who named them.
    notices: BTreeMap<PageId, Writers>,
}

/// Who wrote a page named by a barrier's write notices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writers {
    One(NodeId),
    Several,
}

/// The barrier notices node `node` must act on: the pages some *other* node wrote. A page only
/// `node` itself wrote is current in its own copy (its diffs went to the home before it
/// arrived, and every older write of others was invalidated at an earlier acquire), so
/// invalidating it would only make the node fetch its own writes back.
fn notices_for(all: &BTreeMap<PageId, Writers>, node: NodeId) -> Vec<PageId> {
    all.iter()
        .filter(|(_, w)| **w != Writers::One(node))
        .map(|(p, _)| *p)
        .collect()
}

impl SyncState {
    /// A local thread arrives at `barrier` with `count` participants in total.
    pub fn barrier_arrive(
        &mut self,
        barrier: u64,
        count: u32,
        waiter: Waiter,
        notices: Vec<PageId>,
        out: &mut Vec<SyncEvent>,
    ) -> Result<(), SyncError> {
        if count == 0 {
            return Err(SyncError::ZeroCount { barrier });
        }
        self.end_lingers(out);
        let mgr = self.manager(barrier);
        self.barriers
            .entry(barrier)
            .or_default()
            .waiters
            .push_back((waiter, count));
        out.push(SyncEvent::Send {
            to: mgr,
            msg: SyncMsg::BarrierArrive {
                barrier,
                count,
                notices,
            },
        });
        Ok(())
    }

    /// The local thread `waiter` arrives at `barrier`, a barrier of every node of the job with
    /// exactly one thread each (the global barrier; see `dissemination.rs`): no manager,
    /// ⌈log2 N⌉ rounds of one message per node. Every node must use this form for `barrier`.
    pub fn barrier_all_arrive(
        &mut self,
        barrier: u64,
        waiter: Waiter,
        notices: Vec<PageId>,
        out: &mut Vec<SyncEvent>,
    ) -> Result<(), SyncError> {
        self.end_lingers(out);
        let at = (self.me, self.nodes);
        self.all_nodes
            .entry(barrier)
            .or_default()
            .arrive(at, barrier, waiter, notices, out)
    }

    /// Diagnostic text for a barrier.
    pub fn describe_barrier(&self, barrier: u64) -> String {
        if let Some(b) = self.all_nodes.get(&barrier) {
            return format!(
                "{} (all nodes, no manager): {}",
                BarrierName(barrier),
                b.describe(self.nodes)
            );
        }
        match self.managed_barriers.get(&barrier) {
            Some(b) if b.arrived > 0 => format!(
                "{} (managed here): {}/{} arrived, per node {:?}",
                BarrierName(barrier),
                b.arrived,
                b.count,
                b.per_node
            ),
            _ => format!(
                "{} (manager node {})",
                BarrierName(barrier),
                self.manager(barrier)
            ),
        }
    }

    /// A barrier message arrived from `from` (routed here by [`SyncState::on_message`]).
    pub(super) fn on_barrier_message(
        &mut self,
        from: NodeId,
        msg: &SyncMsg,
        out: &mut Vec<SyncEvent>,
    ) {
        match msg {
            SyncMsg::BarrierArrive {
                barrier,
                count,
                notices,
            } => {
                let nodes = self.nodes as usize;
                let b = self.managed_barriers.entry(*barrier).or_default();
                if b.arrived == 0 {
                    b.count = *count;
                    b.per_node = vec![0; nodes];
                } else if b.count != *count {
                    out.push(SyncEvent::Send {
                        to: from,
                        msg: SyncMsg::BarrierMismatch {
                            barrier: *barrier,
                            expected: b.count,
                            got: *count,
                        },
                    });
                    return;
                }
                b.arrived += 1;
                b.per_node[from as usize] += 1;
                for &p in notices {
                    b.notices
                        .entry(p)
                        .and_modify(|w| {
                            if *w != Writers::One(from) {
                                *w = Writers::Several
                            }
                        })
                        .or_insert(Writers::One(from));
                }
                if b.arrived >= b.count {
                    let all = std::mem::take(&mut b.notices);
                    let took_part = b.per_node.iter().filter(|&&a| a > 0).count() as u32;
                    for (node, &arrivals) in b.per_node.iter().enumerate() {
                        if arrivals > 0 {
                            out.push(SyncEvent::Send {
                                to: node as NodeId,
                                msg: SyncMsg::BarrierRelease {
                                    barrier: *barrier,
                                    arrivals,
                                    notices: notices_for(&all, node as NodeId),
                                    nodes: took_part,
                                },
                            });
                        }
                    }
                    b.arrived = 0;
                    b.count = 0;
                }
            }
            SyncMsg::BarrierRelease {
                barrier,
                arrivals,
                notices,
                nodes,
            } => {
                let b = self.barriers.entry(*barrier).or_default();
                let n = (*arrivals as usize).min(b.waiters.len());
                let waiters = b.waiters.drain(..n).map(|(w, _)| w).collect();
                out.push(SyncEvent::BarrierDone {
                    barrier: *barrier,
                    waiters,
                    notices: notices.clone(),
                    all_nodes: false,
                    nodes: *nodes,
                });
            }
            SyncMsg::BarrierRound {
                barrier,
                episode,
                round,
                notices,
            } => {
                let at = (self.me, self.nodes);
                self.all_nodes
                    .entry(*barrier)
                    .or_default()
                    .received(at, *barrier, *episode, *round, notices, out);
            }
            SyncMsg::BarrierMismatch {
                barrier,
                expected,
                got,
            } => {
                let b = self.barriers.entry(*barrier).or_default();
                if let Some(pos) = b.waiters.iter().position(|(_, c)| c == got) {
                    let (waiter, _) = b.waiters.remove(pos).expect("position is in range");
                    out.push(SyncEvent::BarrierMismatch {
                        barrier: *barrier,
                        waiter,
                        expected: *expected,
                        got: *got,
                    });
                }
            }
            // Lock and semaphore messages never come here (`on_message` routes them).
            _ => {}
        }
    }
}
