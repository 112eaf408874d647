//! Locks and barriers as sans-IO state machines, shared by the engine and the simulator.
//!
//! Each object has a manager node (`id % nodes`). Threads of one node queue locally first, so
//! only one request per node crosses the network (cohort locking); a node that holds a lock hands
//! it to its own waiting threads up to [`MAX_LOCAL_HANDOFFS`] times in a row before giving it back
//! to the manager, so remote waiters are not starved.
//!
//! The protocol hooks are not called here: the engine runs `Protocol::on_release` before calling
//! [`SyncState::lock_release`] / [`SyncState::barrier_arrive`] (passing the notices the protocol
//! produced), and runs `Protocol::on_acquire` with the notices of a [`SyncEvent::Granted`] or
//! [`SyncEvent::BarrierDone`] before waking the threads.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

pub mod sem;

use svm_comm::wire::{NodeId, PageId, SyncMsg};

/// Identifies one waiting thread (chosen by the engine).
pub type Waiter = u64;

/// Consecutive local hand-offs of a lock before it goes back to the manager.
pub const MAX_LOCAL_HANDOFFS: u32 = 8;

/// What the sync layer asks the engine to do.
#[derive(Debug, Clone, PartialEq)]
pub enum SyncEvent {
    /// Send a sync message to a node (possibly this node).
    Send { to: NodeId, msg: SyncMsg },
    /// `waiter` now holds `lock`; run the protocol's acquire with `notices`, then wake it.
    Granted {
        lock: u64,
        waiter: Waiter,
        notices: Vec<PageId>,
    },
    /// A try-lock by `waiter` failed: the lock is held elsewhere.
    TryFailed { lock: u64, waiter: Waiter },
    /// Barrier complete for these waiters of this node; run the acquire with `notices` once,
    /// then wake them.
    BarrierDone {
        barrier: u64,
        waiters: Vec<Waiter>,
        notices: Vec<PageId>,
    },
    /// The manager refused `waiter`'s arrival: its count differs from the round's.
    BarrierMismatch {
        barrier: u64,
        waiter: Waiter,
        expected: u32,
        got: u32,
    },
}

/// A barrier as a user knows it: the id, or "the global barrier (svm::barrier)" for the one
/// behind `svm::barrier()`, whose id is an internal number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierName(pub u64);

impl std::fmt::Display for BarrierName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0 == crate::node::GLOBAL_BARRIER {
            f.write_str("the global barrier (svm::barrier)")
        } else {
            write!(f, "barrier {}", self.0)
        }
    }
}

/// Misuse of a lock or barrier by the application.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    #[error("unlock of lock {lock} by a thread that does not hold it")]
    NotHolder { lock: u64 },
    #[error("{} called with a participant count of 0", BarrierName(*barrier))]
    ZeroCount { barrier: u64 },
}

#[derive(Default, Debug)]
struct NodeLock {
    /// This node holds the lock token (granted by the manager, not yet released).
    held: bool,
    /// The local thread inside the critical section.
    owner: Option<Waiter>,
    /// Local threads waiting, with whether each is a try-lock.
    queue: VecDeque<(Waiter, bool)>,
    /// A LockAcquire or LockTry is outstanding at the manager.
    requested: bool,
    handoffs: u32,
    /// Notices of local critical sections not yet handed back to the manager.
    notices: BTreeSet<PageId>,
}

#[derive(Default, Debug)]
struct ManagedLock {
    holder: Option<NodeId>,
    queue: VecDeque<NodeId>,
    /// Write notices attached to the lock, each with the newest barrier epoch of a release
    /// that carried it.
    notices: BTreeMap<PageId, u64>,
}

#[derive(Default, Debug)]
struct NodeBarrier {
    /// Local threads that arrived and wait for the release, with their counts.
    waiters: VecDeque<(Waiter, u32)>,
}

#[derive(Default, Debug)]
struct ManagedBarrier {
    count: u32,
    arrived: u32,
    per_node: Vec<u32>,
    notices: BTreeSet<PageId>,
}

/// All lock and barrier state of one node: its local side of every object and the manager
/// side of the objects it manages.
#[derive(Debug)]
pub struct SyncState {
    me: NodeId,
    nodes: NodeId,
    locks: HashMap<u64, NodeLock>,
    managed_locks: HashMap<u64, ManagedLock>,
    barriers: HashMap<u64, NodeBarrier>,
    managed_barriers: HashMap<u64, ManagedBarrier>,
    /// Global barriers completed on this node ([`SyncState::clear_lock_notices`] calls).
    epoch: u64,
}

impl SyncState {
    pub fn new(me: NodeId, nodes: NodeId) -> Self {
        SyncState {
            me,
            nodes,
            locks: HashMap::new(),
            managed_locks: HashMap::new(),
            barriers: HashMap::new(),
            managed_barriers: HashMap::new(),
            epoch: 0,
        }
    }

    /// Manager node of a lock or barrier id.
    pub fn manager(&self, id: u64) -> NodeId {
        (id % self.nodes as u64) as NodeId
    }

    /// A local thread wants `lock` (`try_only`: give up instead of waiting if it is held).
    pub fn lock_acquire(
        &mut self,
        lock: u64,
        waiter: Waiter,
        try_only: bool,
        out: &mut Vec<SyncEvent>,
    ) {
        let mgr = self.manager(lock);
        let l = self.locks.entry(lock).or_default();
        if l.held && l.owner.is_none() {
            l.owner = Some(waiter);
            out.push(SyncEvent::Granted {
                lock,
                waiter,
                notices: Vec::new(),
            });
            return;
        }
        if try_only && (l.held || l.requested) {
            out.push(SyncEvent::TryFailed { lock, waiter });
            return;
        }
        l.queue.push_back((waiter, try_only));
        if !l.held && !l.requested {
            l.requested = true;
            let msg = if try_only {
                SyncMsg::LockTry { lock }
            } else {
                SyncMsg::LockAcquire { lock }
            };
            out.push(SyncEvent::Send { to: mgr, msg });
        }
    }

    /// Whether local thread `waiter` holds `lock`.
    pub fn is_holder(&self, lock: u64, waiter: Waiter) -> bool {
        self.locks
            .get(&lock)
            .is_some_and(|l| l.held && l.owner == Some(waiter))
    }

    /// The local thread `waiter` releases `lock`; `notices` come from the protocol's release.
    pub fn lock_release(
        &mut self,
        lock: u64,
        waiter: Waiter,
        notices: Vec<PageId>,
        out: &mut Vec<SyncEvent>,
    ) -> Result<(), SyncError> {
        let mgr = self.manager(lock);
        let l = match self.locks.get_mut(&lock) {
            Some(l) if l.held && l.owner == Some(waiter) => l,
            _ => return Err(SyncError::NotHolder { lock }),
        };
        l.notices.extend(notices);
        l.owner = None;
        if l.handoffs < MAX_LOCAL_HANDOFFS {
            if let Some((next, _)) = l.queue.pop_front() {
                l.handoffs += 1;
                l.owner = Some(next);
                out.push(SyncEvent::Granted {
                    lock,
                    waiter: next,
                    notices: Vec::new(),
                });
                return Ok(());
            }
        }
        l.held = false;
        l.handoffs = 0;
        let notices: Vec<PageId> = std::mem::take(&mut l.notices).into_iter().collect();
        out.push(SyncEvent::Send {
            to: mgr,
            msg: SyncMsg::LockRelease {
                lock,
                notices,
                epoch: self.epoch,
            },
        });
        if !l.queue.is_empty() {
            l.requested = true;
            out.push(SyncEvent::Send {
                to: mgr,
                msg: SyncMsg::LockAcquire { lock },
            });
        }
        Ok(())
    }

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

    /// Garbage-collects the write notices kept at managed locks. The engine calls it on every
    /// node when a *global* barrier completes there (one in which every thread of the job that
    /// may use locks takes part), while handling [`SyncEvent::BarrierDone`] and before any of
    /// this node's threads can run again (before the protocol's departure hook, so before the
    /// threads wake).
    ///
    /// Why this is safe: the barrier's own notices name every page written anywhere before
    /// the barrier, and every node invalidates them at departure, so a lock notice from before
    /// the barrier is redundant afterwards. A notice from *after* the barrier must survive,
    /// though, and may reach this manager before this node has left the barrier itself (the
    /// barrier's release messages race with the lock traffic of nodes that already left). So
    /// each node counts its global barriers (its *epoch*), `LockRelease` carries the sender's
    /// epoch, and a call here advances this node's epoch and drops only the notices that came
    /// with an older epoch than the new one: those were released before their sender left
    /// this barrier.
    pub fn clear_lock_notices(&mut self) {
        self.epoch += 1;
        let epoch = self.epoch;
        for l in self.managed_locks.values_mut() {
            l.notices.retain(|_, e| *e >= epoch);
        }
    }

    /// Global barriers completed on this node (see [`SyncState::clear_lock_notices`]).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Total notices held at managed locks (for the memory-bound tests).
    pub fn lock_notice_count(&self) -> usize {
        self.managed_locks.values().map(|l| l.notices.len()).sum()
    }

    /// A sync message arrived from `from`.
    pub fn on_message(&mut self, from: NodeId, msg: &SyncMsg, out: &mut Vec<SyncEvent>) {
        match msg {
            SyncMsg::LockAcquire { lock } => self.manager_acquire(*lock, from, false, out),
            SyncMsg::LockTry { lock } => self.manager_acquire(*lock, from, true, out),
            SyncMsg::LockRelease {
                lock,
                notices,
                epoch,
            } => {
                let m = self.managed_locks.entry(*lock).or_default();
                if m.holder != Some(from) {
                    tracing::warn!(
                        lock,
                        from,
                        "lock release from a node that does not hold it; ignored"
                    );
                    return;
                }
                for &p in notices {
                    let e = m.notices.entry(p).or_insert(*epoch);
                    *e = (*e).max(*epoch);
                }
                m.holder = m.queue.pop_front();
                if let Some(next) = m.holder {
                    let notices = m.notices.keys().copied().collect();
                    out.push(SyncEvent::Send {
                        to: next,
                        msg: SyncMsg::LockGrant {
                            lock: *lock,
                            notices,
                        },
                    });
                }
            }
            SyncMsg::LockGrant { lock, notices } => {
                let l = self.locks.entry(*lock).or_default();
                l.requested = false;
                l.held = true;
                l.handoffs = 0;
                match l.queue.pop_front() {
                    Some((waiter, _)) => {
                        l.owner = Some(waiter);
                        out.push(SyncEvent::Granted {
                            lock: *lock,
                            waiter,
                            notices: notices.clone(),
                        });
                    }
                    None => {
                        // Nobody waits any more (cannot happen with the current API, kept total):
                        // hand the lock straight back.
                        l.held = false;
                        let to = self.manager(*lock);
                        out.push(SyncEvent::Send {
                            to,
                            msg: SyncMsg::LockRelease {
                                lock: *lock,
                                notices: Vec::new(),
                                epoch: self.epoch,
                            },
                        });
                    }
                }
            }
            SyncMsg::LockBusy { lock } => {
                let to = self.manager(*lock);
                let l = self.locks.entry(*lock).or_default();
                l.requested = false;
                if let Some(pos) = l.queue.iter().position(|(_, t)| *t) {
                    let (waiter, _) = l.queue.remove(pos).expect("position is in range");
                    out.push(SyncEvent::TryFailed {
                        lock: *lock,
                        waiter,
                    });
                }
                if !l.queue.is_empty() {
                    l.requested = true;
                    out.push(SyncEvent::Send {
                        to,
                        msg: SyncMsg::LockAcquire { lock: *lock },
                    });
                }
            }
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
                b.notices.extend(notices.iter().copied());
                if b.arrived >= b.count {
                    let notices: Vec<PageId> = std::mem::take(&mut b.notices).into_iter().collect();
                    for (node, &arrivals) in b.per_node.iter().enumerate() {
                        if arrivals > 0 {
                            out.push(SyncEvent::Send {
                                to: node as NodeId,
                                msg: SyncMsg::BarrierRelease {
                                    barrier: *barrier,
                                    arrivals,
                                    notices: notices.clone(),
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
            } => {
                let b = self.barriers.entry(*barrier).or_default();
                let n = (*arrivals as usize).min(b.waiters.len());
                let waiters = b.waiters.drain(..n).map(|(w, _)| w).collect();
                out.push(SyncEvent::BarrierDone {
                    barrier: *barrier,
                    waiters,
                    notices: notices.clone(),
                });
            }
            // Semaphores have their own state machine (`sem.rs`); the engine routes them there.
            SyncMsg::SemWait { .. } | SyncMsg::SemPost { .. } | SyncMsg::SemGrant { .. } => {}
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
        }
    }

    fn manager_acquire(
        &mut self,
        lock: u64,
        from: NodeId,
        try_only: bool,
        out: &mut Vec<SyncEvent>,
    ) {
        let m = self.managed_locks.entry(lock).or_default();
        if m.holder.is_none() {
            m.holder = Some(from);
            let notices = m.notices.keys().copied().collect();
            out.push(SyncEvent::Send {
                to: from,
                msg: SyncMsg::LockGrant { lock, notices },
            });
        } else if try_only {
            out.push(SyncEvent::Send {
                to: from,
                msg: SyncMsg::LockBusy { lock },
            });
        } else {
            m.queue.push_back(from);
        }
    }

    /// Diagnostic text for a lock: who holds it, who waits (for deadline messages).
    pub fn describe_lock(&self, lock: u64) -> String {
        let local = self.locks.get(&lock);
        let managed = self.managed_locks.get(&lock);
        format!(
            "lock {lock} (manager node {}): this node holds it: {}, local waiters: {}{}",
            self.manager(lock),
            local.map(|l| l.held).unwrap_or(false),
            local.map(|l| l.queue.len()).unwrap_or(0),
            managed
                .map(|m| format!(", held by node {:?}, nodes queued: {:?}", m.holder, m.queue))
                .unwrap_or_default()
        )
    }

    /// Diagnostic text for a barrier.
    pub fn describe_barrier(&self, barrier: u64) -> String {
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

    pub fn me(&self) -> NodeId {
        self.me
    }
}

#[cfg(test)]
mod tests;
