//! Counting semaphores as a sans-IO state machine (job-wide, manager `id % nodes`).
//!
//! `post` is a release (the protocol's release runs first and its write notices travel with
//! the post); a granted `wait` is an acquire carrying the notices of the posts before it. Threads
//! of one node queue locally; each waiting thread has its own request at the manager (a count
//! is consumed per wait).

use std::collections::{BTreeSet, HashMap, VecDeque};

use svm_comm::wire::{NodeId, PageId, SyncMsg};

use super::{SyncEvent, Waiter};

#[derive(Default, Debug)]
struct ManagedSem {
    count: u64,
    queue: VecDeque<NodeId>,
    notices: BTreeSet<PageId>,
}

/// All semaphore state of one node.
#[derive(Debug)]
pub struct SemState {
    nodes: NodeId,
    waiting: HashMap<u64, VecDeque<Waiter>>,
    managed: HashMap<u64, ManagedSem>,
}

impl SemState {
    pub fn new(nodes: NodeId) -> Self {
        SemState {
            nodes,
            waiting: HashMap::new(),
            managed: HashMap::new(),
        }
    }

    fn manager(&self, id: u64) -> NodeId {
        (id % self.nodes as u64) as NodeId
    }

    /// A local thread waits on semaphore `id`.
    pub fn wait(&mut self, id: u64, waiter: Waiter, out: &mut Vec<SyncEvent>) {
        self.waiting.entry(id).or_default().push_back(waiter);
        out.push(SyncEvent::Send {
            to: self.manager(id),
            msg: SyncMsg::SemWait { sem: id },
        });
    }

    /// A local thread posts semaphore `id`; `notices` come from the protocol's release.
    pub fn post(&mut self, id: u64, notices: Vec<PageId>, out: &mut Vec<SyncEvent>) {
        out.push(SyncEvent::Send {
            to: self.manager(id),
            msg: SyncMsg::SemPost { sem: id, notices },
        });
    }

    /// Notices kept at the semaphores this node manages.
    pub fn notice_count(&self) -> usize {
        self.managed.values().map(|s| s.notices.len()).sum()
    }

    /// Drops notices kept at managed semaphores (at a global barrier, like lock notices).
    pub fn clear_notices(&mut self) {
        for s in self.managed.values_mut() {
            s.notices.clear();
        }
    }

    /// Handles a semaphore message; returns false if `msg` is not one.
    pub fn on_message(&mut self, from: NodeId, msg: &SyncMsg, out: &mut Vec<SyncEvent>) -> bool {
        match msg {
            SyncMsg::SemWait { sem } => {
                let s = self.managed.entry(*sem).or_default();
                if s.count > 0 {
                    s.count -= 1;
                    let notices = s.notices.iter().copied().collect();
                    out.push(SyncEvent::Send {
                        to: from,
                        msg: SyncMsg::SemGrant { sem: *sem, notices },
                    });
                } else {
                    s.queue.push_back(from);
                }
            }
            SyncMsg::SemPost { sem, notices } => {
                let s = self.managed.entry(*sem).or_default();
                s.notices.extend(notices.iter().copied());
                match s.queue.pop_front() {
                    Some(node) => {
                        let notices = s.notices.iter().copied().collect();
                        out.push(SyncEvent::Send {
                            to: node,
                            msg: SyncMsg::SemGrant { sem: *sem, notices },
                        });
                    }
                    None => s.count += 1,
                }
            }
            SyncMsg::SemGrant { sem, notices } => {
                if let Some(w) = self.waiting.get_mut(sem).and_then(|q| q.pop_front()) {
                    out.push(SyncEvent::Granted {
                        lock: *sem,
                        waiter: w,
                        notices: notices.clone(),
                    });
                }
            }
            _ => return false,
        }
        true
    }

    /// Diagnostic text.
    pub fn describe(&self, id: u64) -> String {
        match self.managed.get(&id) {
            Some(s) => format!(
                "semaphore {id} (managed here): count {}, nodes waiting {:?}",
                s.count, s.queue
            ),
            None => format!("semaphore {id} (manager node {})", self.manager(id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sends(out: &[SyncEvent]) -> Vec<(NodeId, SyncMsg)> {
        out.iter()
            .filter_map(|e| match e {
                SyncEvent::Send { to, msg } => Some((*to, msg.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn post_before_wait_and_wait_before_post() {
        let mut m = SemState::new(2); // node 0 manages even ids
        let mut out = Vec::new();
        m.on_message(
            1,
            &SyncMsg::SemPost {
                sem: 4,
                notices: vec![9],
            },
            &mut out,
        );
        assert!(out.is_empty());
        m.on_message(1, &SyncMsg::SemWait { sem: 4 }, &mut out);
        assert_eq!(
            sends(&out),
            vec![(
                1,
                SyncMsg::SemGrant {
                    sem: 4,
                    notices: vec![9]
                }
            )]
        );
        out.clear();
        m.on_message(1, &SyncMsg::SemWait { sem: 4 }, &mut out);
        assert!(out.is_empty(), "count is 0: the wait queues");
        m.on_message(
            0,
            &SyncMsg::SemPost {
                sem: 4,
                notices: vec![],
            },
            &mut out,
        );
        assert_eq!(sends(&out).len(), 1);
    }

    #[test]
    fn grants_wake_local_waiters_in_order() {
        let mut n = SemState::new(2);
        let mut out = Vec::new();
        n.wait(3, 10, &mut out);
        n.wait(3, 11, &mut out);
        assert_eq!(
            sends(&out),
            vec![
                (1, SyncMsg::SemWait { sem: 3 }),
                (1, SyncMsg::SemWait { sem: 3 })
            ]
        );
        out.clear();
        n.on_message(
            1,
            &SyncMsg::SemGrant {
                sem: 3,
                notices: vec![],
            },
            &mut out,
        );
        assert_eq!(
            out,
            vec![SyncEvent::Granted {
                lock: 3,
                waiter: 10,
                notices: vec![]
            }]
        );
    }
}
