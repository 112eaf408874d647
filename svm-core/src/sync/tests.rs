use super::*;

#[test]
fn manager_is_id_mod_nodes() {
    let s = SyncState::new(0, 3);
    assert_eq!(s.manager(7), 1);
}

/// A few `SyncState`s joined by one FIFO queue; everything that is not a `Send` is collected
/// as (node, event).
struct Net {
    nodes: Vec<SyncState>,
    wire: VecDeque<(NodeId, NodeId, SyncMsg)>,
    events: Vec<(NodeId, SyncEvent)>,
    /// Quanta of remote requests started and not ended yet (node, lock): they end only when a
    /// test says so ([`Net::end_quanta`]), so by default the local share is the largest.
    quanta: Vec<(NodeId, u64)>,
    /// Messages sent so far.
    sent: usize,
}

impl Net {
    fn new(n: NodeId) -> Self {
        Net {
            nodes: (0..n).map(|me| SyncState::new(me, n)).collect(),
            wire: VecDeque::new(),
            events: Vec::new(),
            quanta: Vec::new(),
            sent: 0,
        }
    }

    fn absorb(&mut self, node: NodeId, out: Vec<SyncEvent>) {
        for ev in out {
            match ev {
                SyncEvent::Send { to, msg } => {
                    self.sent += 1;
                    self.wire.push_back((node, to, msg))
                }
                SyncEvent::Quantum { lock } => self.quanta.push((node, lock)),
                other => self.events.push((node, other)),
            }
        }
    }

    fn acquire(&mut self, node: NodeId, lock: u64, waiter: Waiter, try_only: bool) {
        let mut out = Vec::new();
        self.nodes[node as usize].lock_acquire(lock, waiter, try_only, &mut out);
        self.absorb(node, out);
    }

    fn release(
        &mut self,
        node: NodeId,
        lock: u64,
        waiter: Waiter,
        notices: Vec<PageId>,
    ) -> Result<(), SyncError> {
        let mut out = Vec::new();
        let r = self.nodes[node as usize].lock_release(lock, waiter, notices, &mut out);
        self.absorb(node, out);
        r
    }

    fn arrive(
        &mut self,
        node: NodeId,
        barrier: u64,
        count: u32,
        waiter: Waiter,
    ) -> Result<(), SyncError> {
        self.arrive_with(node, barrier, count, waiter, vec![])
    }

    fn arrive_with(
        &mut self,
        node: NodeId,
        barrier: u64,
        count: u32,
        waiter: Waiter,
        notices: Vec<PageId>,
    ) -> Result<(), SyncError> {
        let mut out = Vec::new();
        let r = self.nodes[node as usize].barrier_arrive(barrier, count, waiter, notices, &mut out);
        self.absorb(node, out);
        r
    }

    /// Delivers messages until the wire is empty (lingers go on).
    fn deliver(&mut self) {
        while let Some((from, to, msg)) = self.wire.pop_front() {
            let mut out = Vec::new();
            self.nodes[to as usize].on_message(from, &msg, &mut out);
            self.absorb(to, out);
        }
    }

    /// Node 1's waiter 1 holds lock 0 (managed by node 0), and node 0's waiter 100 waits for
    /// it: the request has reached node 1.
    fn lock_held_at_1_wanted_at_0(&mut self) {
        self.acquire(1, 0, 1, false);
        self.settle();
        assert_eq!(self.granted(), vec![1]);
        self.acquire(0, 0, 100, false);
        self.settle();
    }

    /// Delivers messages until the wire is empty, ending every linger (as if its time passed).
    fn settle(&mut self) {
        loop {
            self.deliver();
            let mut lingers = Vec::new();
            self.events.retain(|(n, e)| match e {
                SyncEvent::Linger { lock } => {
                    lingers.push((*n, *lock));
                    false
                }
                _ => true,
            });
            if lingers.is_empty() {
                break;
            }
            for (n, lock) in lingers {
                let mut out = Vec::new();
                self.nodes[n as usize].linger_expired(lock, &mut out);
                self.absorb(n, out);
            }
        }
    }

    /// Ends the quanta of the remote requests so far (as if [`LOCK_QUANTUM`] passed).
    fn end_quanta(&mut self) {
        for (n, lock) in std::mem::take(&mut self.quanta) {
            let mut out = Vec::new();
            self.nodes[n as usize].quantum_expired(lock, &mut out);
            self.absorb(n, out);
        }
    }

    fn take(&mut self) -> Vec<(NodeId, SyncEvent)> {
        std::mem::take(&mut self.events)
    }

    /// Waiters granted since the last call, in order.
    fn granted(&mut self) -> Vec<Waiter> {
        self.take()
            .into_iter()
            .map(|(_, e)| match e {
                SyncEvent::Granted { waiter, .. } => waiter,
                other => panic!("expected a grant, got {other:?}"),
            })
            .collect()
    }
}

#[test]
fn cohort_hands_off_locally_at_most_max_times_then_yields() {
    let mut net = Net::new(2);
    // Lock 0 is managed by node 0 (its token starts there). More threads of node 1 want it
    // than it may hand it to in a row.
    let waiters = MAX_LOCAL_HANDOFFS as u64 + 4;
    for w in 1..=waiters {
        net.acquire(1, 0, w, false);
    }
    // Only one request crossed the network.
    assert_eq!(net.wire.len(), 1);
    net.settle();
    assert_eq!(net.granted(), vec![1]);
    // A thread of node 0 asks for it: the manager forwards the request to node 1. (Its id is
    // none of node 1's waiters'.)
    let remote: Waiter = 1_000_000;
    net.acquire(0, 0, remote, false);
    net.settle();
    assert!(net.take().is_empty());

    let mut order = vec![1];
    let mut holder = (1, 1);
    for _ in 0..waiters {
        net.release(holder.0, 0, holder.1, vec![]).unwrap();
        net.settle();
        let g = net.granted();
        assert_eq!(g.len(), 1, "exactly one grant per release");
        order.push(g[0]);
        holder = (if g[0] == remote { 0 } else { 1 }, g[0]);
    }
    // Node 1 keeps the lock for MAX_LOCAL_HANDOFFS hand-offs (its quantum never ends here),
    // then node 0's waiter gets it, then node 1's remaining waiters.
    let local = MAX_LOCAL_HANDOFFS as u64;
    let mut want: Vec<Waiter> = (1..=1 + local).collect();
    want.push(remote);
    want.extend(2 + local..=waiters);
    assert_eq!(order, want);
    assert_eq!(net.nodes[1].max_overtakes(), MAX_LOCAL_HANDOFFS);
}

#[test]
fn the_token_stays_with_its_last_holder() {
    let mut net = Net::new(2);
    // Lock 0 is managed by node 0; node 1 takes it once (request, forward, grant).
    net.acquire(1, 0, 1, false);
    net.settle();
    assert_eq!(net.granted(), vec![1]);
    net.release(1, 0, 1, vec![7]).unwrap();
    // The release sends nothing and the re-acquires send nothing.
    assert!(net.wire.is_empty());
    assert!(net.nodes[1].token_idle(0));
    for w in 2..20 {
        net.acquire(1, 0, w, false);
        assert_eq!(net.granted(), vec![w]);
        assert!(!net.nodes[1].token_idle(0));
        net.release(1, 0, w, vec![]).unwrap();
        assert!(net.wire.is_empty());
    }
    // The manager knows where the token is.
    assert!(
        net.nodes[0]
            .describe_lock(0)
            .contains("the token is at or goes last to node 1"),
        "{}",
        net.nodes[0].describe_lock(0)
    );
    assert_eq!(net.nodes[0].locks_towards(1), vec![0]);
    // Node 0 wants it back: request to the manager (itself), forward to node 1, grant straight
    // to node 0, carrying node 1's notices.
    net.acquire(0, 0, 50, false);
    net.settle();
    assert_eq!(
        net.take(),
        vec![(
            0,
            SyncEvent::Granted {
                lock: 0,
                waiter: 50,
                notices: vec![7]
            }
        )]
    );
    assert!(!net.nodes[1].token_idle(0));
    assert_eq!(net.nodes[1].lock_notice_count(), 0);
}

#[test]
fn waiting_nodes_are_served_within_the_bound_along_the_chain() {
    // Three nodes; lock 1 is managed by node 1. Node 2 holds the token with many local
    // waiters; nodes 0 and 1 ask for it. Each waiting node gets it within
    // MIN_LOCAL_HANDOFFS grants of the node ahead of it once the quanta have ended.
    let mut net = Net::new(3);
    for w in 1..=30 {
        net.acquire(2, 1, w, false);
    }
    net.settle();
    assert_eq!(net.granted(), vec![1]);
    net.acquire(0, 1, 100, false);
    net.settle();
    net.acquire(1, 1, 200, false);
    net.settle();
    // The requests are older than the quantum: the local share is the minimum.
    net.end_quanta();
    let mut order = vec![1];
    let mut holder = (2u16, 1u64);
    while order.len() < 32 {
        net.release(holder.0, 1, holder.1, vec![]).unwrap();
        net.settle();
        let g = net.granted();
        assert_eq!(g.len(), 1);
        order.push(g[0]);
        holder = (
            match g[0] {
                100 => 0,
                200 => 1,
                _ => 2,
            },
            g[0],
        );
    }
    let pos = |w| order.iter().position(|&x| x == w).unwrap();
    assert_eq!(pos(100), 1 + MIN_LOCAL_HANDOFFS as usize);
    assert_eq!(pos(200), pos(100) + 1);
    for n in &net.nodes {
        assert!(n.max_overtakes() <= MIN_LOCAL_HANDOFFS);
    }
}

#[test]
fn try_lock_busy_path() {
    let mut net = Net::new(2);
    // Node 1 holds lock 2 (manager node 0).
    net.acquire(1, 2, 1, false);
    net.settle();
    assert_eq!(net.granted(), vec![1]);

    // A try-lock on node 0 asks the manager and is refused.
    net.acquire(0, 2, 10, true);
    assert!(matches!(net.wire[0].2, SyncMsg::LockTry { lock: 2 }));
    // A blocking waiter on node 0 queues behind the outstanding try without a second request.
    net.acquire(0, 2, 11, false);
    assert_eq!(net.wire.len(), 1);
    // While the try is outstanding, a second try fails at once.
    net.acquire(0, 2, 12, true);
    assert_eq!(
        net.take(),
        vec![(
            0,
            SyncEvent::TryFailed {
                lock: 2,
                waiter: 12
            }
        )]
    );
    net.settle();
    // LockBusy fails the try and re-requests for the blocking waiter.
    assert_eq!(
        net.take(),
        vec![(
            0,
            SyncEvent::TryFailed {
                lock: 2,
                waiter: 10
            }
        )]
    );
    // A try-lock on the holding node while another local thread is inside fails locally.
    net.acquire(1, 2, 2, true);
    assert_eq!(
        net.take(),
        vec![(1, SyncEvent::TryFailed { lock: 2, waiter: 2 })]
    );
    assert!(net.wire.is_empty());

    // The release goes to node 0's blocking waiter, with the holder's notices.
    net.release(1, 2, 1, vec![5, 3]).unwrap();
    net.settle();
    assert_eq!(
        net.take(),
        vec![(
            0,
            SyncEvent::Granted {
                lock: 2,
                waiter: 11,
                notices: vec![3, 5]
            }
        )]
    );

    // A try-lock of a free lock succeeds; the token moves to the trying node (with no
    // notices for it: 3 and 5 were its own writes).
    net.release(0, 2, 11, vec![]).unwrap();
    net.settle();
    net.acquire(1, 2, 3, true);
    net.settle();
    assert_eq!(
        net.take(),
        vec![(
            1,
            SyncEvent::Granted {
                lock: 2,
                waiter: 3,
                notices: vec![]
            }
        )]
    );
    // Requests that came while the try was pending were forwarded to the new tail.
    net.acquire(0, 2, 13, false);
    net.settle();
    net.release(1, 2, 3, vec![]).unwrap();
    net.settle();
    assert_eq!(net.granted(), vec![13]);
}

#[test]
fn barrier_mismatch_is_refused_and_the_round_still_completes() {
    let mut net = Net::new(2);
    assert_eq!(
        net.arrive(0, 1, 0, 7),
        Err(SyncError::ZeroCount { barrier: 1 })
    );
    assert!(net.wire.is_empty());
    // Barrier 1 is managed by node 1; the round's count is set by the first arrival.
    net.arrive(0, 1, 3, 1).unwrap();
    net.settle();
    net.arrive(1, 1, 2, 2).unwrap();
    net.settle();
    assert_eq!(
        net.take(),
        vec![(
            1,
            SyncEvent::BarrierMismatch {
                barrier: 1,
                waiter: 2,
                expected: 3,
                got: 2
            }
        )]
    );
    assert!(
        net.nodes[1].describe_barrier(1).contains("1/3 arrived"),
        "{}",
        net.nodes[1].describe_barrier(1)
    );
    // Correct arrivals complete the round; node 0 has two waiters released together.
    net.arrive(0, 1, 3, 3).unwrap();
    net.arrive(1, 1, 3, 4).unwrap();
    net.settle();
    let mut done = net.take();
    done.sort_by_key(|(n, _)| *n);
    assert_eq!(
        done,
        vec![
            (
                0,
                SyncEvent::BarrierDone {
                    barrier: 1,
                    waiters: vec![1, 3],
                    notices: vec![],
                    all_nodes: false,
                    nodes: 2,
                }
            ),
            (
                1,
                SyncEvent::BarrierDone {
                    barrier: 1,
                    waiters: vec![4],
                    notices: vec![],
                    all_nodes: false,
                    nodes: 2,
                }
            ),
        ]
    );
    // The next round starts fresh with a new count.
    net.arrive(0, 1, 1, 5).unwrap();
    net.settle();
    assert_eq!(
        net.take(),
        vec![(
            0,
            SyncEvent::BarrierDone {
                barrier: 1,
                waiters: vec![5],
                notices: vec![],
                all_nodes: false,
                // Only node 0 took part in this episode.
                nodes: 1,
            }
        )]
    );
}

#[test]
fn managed_barrier_names_to_each_node_the_pages_other_nodes_wrote() {
    // 3 nodes, node 1 with two threads: page 10 only node 0 wrote, 11 both threads of node 1,
    // 12 nodes 0 and 2, 13 every node.
    let mut net = Net::new(3);
    net.arrive_with(0, 4, 4, 1, vec![10, 12, 13]).unwrap();
    net.arrive_with(1, 4, 4, 2, vec![11, 13]).unwrap();
    net.arrive_with(1, 4, 4, 3, vec![11]).unwrap();
    net.arrive_with(2, 4, 4, 4, vec![12, 13]).unwrap();
    net.settle();
    let mut done: Vec<(NodeId, Vec<PageId>)> = net
        .take()
        .into_iter()
        .map(|(n, e)| match e {
            SyncEvent::BarrierDone { notices, .. } => (n, notices),
            other => panic!("expected a departure, got {other:?}"),
        })
        .collect();
    done.sort();
    assert_eq!(
        done,
        vec![
            (0, vec![11, 12, 13]),
            (1, vec![10, 12, 13]),
            (2, vec![10, 11, 12, 13]),
        ]
    );
}

#[test]
fn release_without_holding_is_an_error() {
    let mut net = Net::new(2);
    // Never acquired.
    assert_eq!(
        net.release(0, 4, 1, vec![]),
        Err(SyncError::NotHolder { lock: 4 })
    );
    // Held by another thread of the same node.
    net.acquire(0, 4, 1, false);
    net.acquire(0, 4, 2, false);
    net.settle();
    assert_eq!(net.granted(), vec![1]);
    assert_eq!(
        net.release(0, 4, 2, vec![]),
        Err(SyncError::NotHolder { lock: 4 })
    );
    // Held by this node but by nobody after the last release.
    net.release(0, 4, 1, vec![]).unwrap();
    assert_eq!(net.granted(), vec![2]);
    net.release(0, 4, 2, vec![]).unwrap();
    assert_eq!(
        net.release(0, 4, 2, vec![]),
        Err(SyncError::NotHolder { lock: 4 })
    );
    // Errors left no trace on the wire beyond the legitimate release.
    net.settle();
    assert!(net.take().is_empty());
}

#[test]
fn stray_lock_messages_are_ignored() {
    let mut net = Net::new(2);
    net.acquire(0, 0, 1, false);
    net.settle();
    assert_eq!(net.granted(), vec![1]);
    // An outcome of a try the manager never forwarded, and a request from the tail itself.
    let mut out = Vec::new();
    net.nodes[0].on_message(
        1,
        &SyncMsg::LockTryDone {
            lock: 0,
            to: 1,
            granted: true,
        },
        &mut out,
    );
    net.nodes[0].on_message(0, &SyncMsg::LockAcquire { lock: 0 }, &mut out);
    assert!(out.is_empty());
    assert!(net.nodes[0].is_holder(0, 1));
    assert_eq!(net.nodes[0].lock_notice_count(), 0);
}

/// The notices of `node`'s grants since the last call.
fn granted_notices(net: &mut Net, node: NodeId) -> Vec<Vec<PageId>> {
    net.take()
        .into_iter()
        .filter(|(n, _)| *n == node)
        .filter_map(|(_, e)| match e {
            SyncEvent::Granted { notices, .. } => Some(notices),
            _ => None,
        })
        .collect()
}

#[test]
fn a_grant_names_only_the_notices_the_node_has_not_seen() {
    let mut net = Net::new(2);
    // Node 0 writes pages 4 and 5 under lock 1; node 1 takes it and learns of them.
    net.acquire(0, 1, 1, false);
    net.settle();
    net.take();
    net.release(0, 1, 1, vec![4, 5]).unwrap();
    net.acquire(1, 1, 2, false);
    net.settle();
    assert_eq!(granted_notices(&mut net, 1), vec![vec![4, 5]]);
    // Node 1 writes nothing; node 0 takes the lock again: 4 and 5 were its own writes.
    net.release(1, 1, 2, vec![]).unwrap();
    net.acquire(0, 1, 3, false);
    net.settle();
    assert_eq!(granted_notices(&mut net, 0), vec![Vec::<PageId>::new()]);
    // Node 0 writes 6; node 1 hears of 6 only (it has acted on 4 and 5 already).
    net.release(0, 1, 3, vec![6]).unwrap();
    net.acquire(1, 1, 4, false);
    net.settle();
    assert_eq!(granted_notices(&mut net, 1), vec![vec![6]]);
    // Node 1 writes 4 again: node 0 must hear of it, and of nothing it wrote itself.
    net.release(1, 1, 4, vec![4]).unwrap();
    net.acquire(0, 1, 5, false);
    net.settle();
    assert_eq!(granted_notices(&mut net, 0), vec![vec![4]]);
    // A third node that never held the lock hears of every page still named.
    let mut net3 = Net::new(3);
    net3.acquire(0, 2, 1, false);
    net3.settle();
    net3.take();
    net3.release(0, 2, 1, vec![7]).unwrap();
    net3.acquire(1, 2, 2, false);
    net3.settle();
    net3.take();
    net3.release(1, 2, 2, vec![8]).unwrap();
    net3.acquire(2, 2, 3, false);
    net3.settle();
    assert_eq!(granted_notices(&mut net3, 2), vec![vec![7, 8]]);
}

#[test]
fn lock_notices_are_collected_by_epoch() {
    // Node 1 manages lock 1. Node 0 takes it and releases with notices before a global
    // barrier: they stay with the token on node 0.
    let mut net = Net::new(2);
    net.acquire(0, 1, 1, false);
    net.settle();
    assert_eq!(net.granted(), vec![1]);
    net.release(0, 1, 1, vec![4, 5]).unwrap();
    assert_eq!(net.nodes[0].lock_notice_count(), 2);
    // Node 0 leaves the barrier (epoch 1) and releases again before node 1 has left it.
    net.nodes[0].clear_lock_notices();
    assert_eq!(net.nodes[0].epoch(), 1);
    assert_eq!(net.nodes[0].lock_notice_count(), 0);
    net.acquire(0, 1, 2, false);
    assert_eq!(net.granted(), vec![2]);
    net.release(0, 1, 2, vec![5, 6]).unwrap();
    // Node 1, still before the barrier, takes the lock: the notices come with the token.
    net.acquire(1, 1, 3, false);
    net.settle();
    assert!(net
        .take()
        .iter()
        .any(|(_, e)| matches!(e, SyncEvent::Granted { notices, .. } if notices == &vec![5, 6])));
    // Node 1 leaves the barrier: the notices released after it survive.
    net.nodes[1].clear_lock_notices();
    assert_eq!(net.nodes[1].lock_notice_count(), 2);
    // Another barrier: everything goes.
    net.nodes[1].clear_lock_notices();
    assert_eq!(net.nodes[1].lock_notice_count(), 0);
}

#[test]
fn the_global_barrier_is_named_not_numbered() {
    use super::BarrierName;
    let global = BarrierName(crate::node::GLOBAL_BARRIER).to_string();
    assert_eq!(global, "the global barrier (svm::barrier)");
    assert_eq!(BarrierName(7).to_string(), "barrier 7");
    let e = super::SyncError::ZeroCount {
        barrier: crate::node::GLOBAL_BARRIER,
    }
    .to_string();
    assert!(!e.contains("18446744073709551615"), "{e}");
}

#[test]
fn a_released_token_lingers_for_local_reacquires_within_the_bound() {
    let mut net = Net::new(2);
    net.lock_held_at_1_wanted_at_0();
    // Node 1's thread releases and takes the lock again, MAX_LOCAL_HANDOFFS times, without a
    // message: each release lingers.
    for _ in 0..MAX_LOCAL_HANDOFFS {
        net.release(1, 0, 1, vec![]).unwrap();
        assert_eq!(net.take(), vec![(1, SyncEvent::Linger { lock: 0 })]);
        assert!(net.wire.is_empty() && net.nodes[1].lingering(0));
        net.acquire(1, 0, 1, false);
        assert_eq!(net.granted(), vec![1]);
    }
    // The bound is reached: the next release passes the token at once.
    net.release(1, 0, 1, vec![]).unwrap();
    net.settle();
    assert_eq!(net.granted(), vec![100]);
    assert_eq!(net.nodes[1].max_overtakes(), MAX_LOCAL_HANDOFFS);
    // Node 1 asks again; node 0 releases and nobody on node 0 comes back: the linger ends and
    // the token moves.
    net.acquire(1, 0, 2, false);
    net.settle();
    net.release(0, 0, 100, vec![]).unwrap();
    assert_eq!(net.take(), vec![(0, SyncEvent::Linger { lock: 0 })]);
    let mut out = Vec::new();
    net.nodes[0].linger_expired(0, &mut out);
    net.absorb(0, out);
    net.settle();
    assert_eq!(net.granted(), vec![2]);
    // A late timer is harmless.
    let mut out = Vec::new();
    net.nodes[0].linger_expired(0, &mut out);
    assert!(out.is_empty());
}

#[test]
fn a_barrier_arrival_moves_the_tokens_lingering_at_its_node_at_once() {
    for all_nodes in [false, true] {
        let mut net = Net::new(2);
        net.lock_held_at_1_wanted_at_0();
        // Node 1's thread releases: the token lingers there.
        net.release(1, 0, 1, vec![]).unwrap();
        assert_eq!(net.take(), vec![(1, SyncEvent::Linger { lock: 0 })]);
        assert!(net.nodes[1].lingering(0));
        // It arrives at a barrier next: no local re-acquire can come before the barrier
        // completes, so the token moves now, not when the linger's time is up.
        let mut out = Vec::new();
        if all_nodes {
            net.nodes[1]
                .barrier_all_arrive(crate::node::GLOBAL_BARRIER, 1, vec![], &mut out)
                .unwrap();
        } else {
            net.nodes[1]
                .barrier_arrive(7, 2, 1, vec![], &mut out)
                .unwrap();
        }
        net.absorb(1, out);
        assert!(!net.nodes[1].lingering(0), "all_nodes={all_nodes}");
        net.deliver();
        assert_eq!(net.granted(), vec![100], "all_nodes={all_nodes}");
    }
}

#[test]
fn the_local_share_beyond_the_minimum_ends_with_the_quantum() {
    let mut net = Net::new(2);
    // Node 1 holds lock 0 (manager node 0) with many local waiters; node 0 asks for it.
    let waiters = MAX_LOCAL_HANDOFFS as u64;
    for w in 1..=waiters {
        net.acquire(1, 0, w, false);
    }
    net.settle();
    assert_eq!(net.granted(), vec![1]);
    // Node 0 passed the token at once on node 1's request: no quantum was started.
    assert!(net.quanta.is_empty());
    net.acquire(0, 0, 100, false);
    net.settle();
    assert_eq!(
        net.quanta,
        vec![(1, 0)],
        "the forwarded request starts a quantum"
    );
    // The quantum ends before the minimum share is used up: the minimum still holds.
    net.end_quanta();
    let mut holder = 1;
    for _ in 0..MIN_LOCAL_HANDOFFS {
        net.release(1, 0, holder, vec![]).unwrap();
        net.settle();
        let g = net.granted();
        assert_eq!(g, vec![holder + 1]);
        holder = g[0];
    }
    net.release(1, 0, holder, vec![]).unwrap();
    net.settle();
    assert_eq!(net.granted(), vec![100]);
    assert_eq!(net.nodes[1].max_overtakes(), MIN_LOCAL_HANDOFFS);
    // Node 1 asks again (its waiters remain): a new quantum at node 0, whose thread
    // releases and takes the lock back beyond the minimum while the quantum lasts.
    net.settle();
    assert_eq!(net.quanta, vec![(0, 0)]);
    for _ in 0..MIN_LOCAL_HANDOFFS + 5 {
        net.release(0, 0, 100, vec![]).unwrap();
        assert_eq!(net.take(), vec![(0, SyncEvent::Linger { lock: 0 })]);
        net.acquire(0, 0, 100, false);
        assert_eq!(net.granted(), vec![100]);
    }
    // Released and lingering past the minimum when the quantum ends: the token moves at
    // once, without waiting for the linger.
    net.release(0, 0, 100, vec![]).unwrap();
    assert_eq!(net.take(), vec![(0, SyncEvent::Linger { lock: 0 })]);
    net.end_quanta();
    net.settle();
    assert_eq!(net.granted(), vec![holder + 1]);
    assert!(!net.nodes[0].lingering(0));
    // A late quantum (no request waiting any more) changes nothing.
    let mut out = Vec::new();
    net.nodes[0].quantum_expired(0, &mut out);
    net.nodes[1].quantum_expired(0, &mut out);
    assert!(out.is_empty());
}

// ---------------------------------------------------------------- all-nodes barriers

impl Net {
    fn arrive_all(&mut self, node: NodeId, barrier: u64, waiter: Waiter, notices: Vec<PageId>) {
        let mut out = Vec::new();
        self.nodes[node as usize]
            .barrier_all_arrive(barrier, waiter, notices, &mut out)
            .expect("one thread per node");
        self.absorb(node, out);
    }

    /// (node, waiter, notices) of every `BarrierDone` since the last call.
    fn departures(&mut self) -> Vec<(NodeId, Waiter, Vec<PageId>)> {
        self.take()
            .into_iter()
            .map(|(n, e)| match e {
                SyncEvent::BarrierDone {
                    waiters,
                    notices,
                    all_nodes,
                    ..
                } => {
                    assert_eq!(waiters.len(), 1, "one thread per node");
                    assert!(all_nodes, "a departure of the all-nodes barrier says so");
                    (n, waiters[0], notices)
                }
                other => panic!("expected a departure, got {other:?}"),
            })
            .collect()
    }
}

#[test]
fn all_nodes_barrier_rounds_are_log2_and_every_node_leaves_with_every_other_nodes_notices() {
    assert_eq!(
        (1..=9).map(dissemination::rounds).collect::<Vec<_>>(),
        [0, 1, 2, 2, 3, 3, 3, 3, 4]
    );
    // Every node names its own page 1000 + node and the page 999 they all wrote.
    for n in 1..=9 {
        let mut net = Net::new(n);
        for node in 0..n {
            net.arrive_all(node, 5, 100 + node as u64, vec![999, 1000 + node as PageId]);
            if node + 1 < n {
                // Nobody can leave before the last node arrived.
                net.settle();
                assert!(net.departures().is_empty(), "{n} nodes: left early");
            }
        }
        net.settle();
        // Each node sent one message per round.
        assert_eq!(
            net.sent,
            n as usize * dissemination::rounds(n) as usize,
            "{n} nodes"
        );
        let mut left = net.departures();
        left.sort();
        assert_eq!(left.len(), n as usize, "{n} nodes: every node leaves");
        for (node, waiter, notices) in left {
            assert_eq!(waiter, 100 + node as u64);
            let mut others: Vec<PageId> = (0..n)
                .filter(|&k| k != node)
                .map(|k| 1000 + k as PageId)
                .collect();
            if n > 1 {
                others.insert(0, 999);
            }
            if n.is_power_of_two() {
                // A page only this node wrote is current here: not named back to it.
                assert_eq!(notices, others, "{n} nodes: node {node}");
            } else {
                // Its own notices may come back through others: harmless, but every other
                // node's must be there.
                let extra: Vec<_> = notices.iter().filter(|p| !others.contains(p)).collect();
                assert!(
                    others.iter().all(|p| notices.contains(p))
                        && extra.iter().all(|&&p| p == 1000 + node as PageId),
                    "{n} nodes: node {node} left with {notices:?}"
                );
            }
        }
    }
}

#[test]
fn all_nodes_barrier_round_messages_of_the_next_episode_wait_for_their_turn() {
    let mut net = Net::new(3);
    for node in 0..3 {
        net.arrive_all(node, 9, node as u64, vec![]);
    }
    // Deliver only until node 0 has left; node 0 then arrives again at once.
    let mut left0 = false;
    while !left0 {
        let (from, to, msg) = net.wire.pop_front().expect("messages to deliver");
        let mut out = Vec::new();
        net.nodes[to as usize].on_message(from, &msg, &mut out);
        net.absorb(to, out);
        left0 = net
            .events
            .iter()
            .any(|(n, e)| *n == 0 && matches!(e, SyncEvent::BarrierDone { .. }));
    }
    net.arrive_all(0, 9, 10, vec![77]);
    net.settle();
    let first: Vec<_> = net.departures();
    assert_eq!(first.len(), 3, "episode 0 completes everywhere: {first:?}");
    assert!(first
        .iter()
        .all(|(_, w, notices)| *w < 10 && notices.is_empty()));
    // Episode 1: node 0 waits until the others arrive.
    net.arrive_all(1, 9, 11, vec![]);
    net.settle();
    assert!(net.departures().is_empty());
    net.arrive_all(2, 9, 12, vec![]);
    net.settle();
    let second = net.departures();
    assert_eq!(second.len(), 3);
    assert!(second
        .iter()
        .all(|(_, w, notices)| *w >= 10 && notices == &[77]));
}

#[test]
fn a_second_thread_of_a_node_at_an_all_nodes_barrier_is_refused() {
    let mut s = SyncState::new(0, 2);
    let mut out = Vec::new();
    s.barrier_all_arrive(3, 1, vec![], &mut out).unwrap();
    assert_eq!(
        s.barrier_all_arrive(3, 2, vec![], &mut out),
        Err(SyncError::BarrierBusy { barrier: 3 })
    );
    assert!(
        s.describe_barrier(3).contains("round 0 of 1"),
        "{}",
        s.describe_barrier(3)
    );
}

#[test]
fn a_lock_never_used_is_idle_at_its_manager_from_the_start() {
    let mut s = SyncState::new(1, 2);
    // Lock 3 is managed by node 1 (3 % 2), lock 4 by node 0.
    assert!(!s.token_idle(3), "no state yet");
    assert!(
        !s.first_use_here(4),
        "managed elsewhere: its token is not here"
    );
    assert!(s.first_use_here(3));
    assert!(s.token_idle(3), "recorded, token here and free");
    assert!(!s.first_use_here(3), "only the first use");
    let mut out = Vec::new();
    s.lock_acquire(3, 7, false, &mut out);
    assert!(
        matches!(out.as_slice(), [SyncEvent::Granted { waiter: 7, .. }]),
        "{out:?}"
    );
    assert!(!s.token_idle(3), "held");
}
