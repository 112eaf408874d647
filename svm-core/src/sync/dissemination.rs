//! Barriers of every node, one thread each (the global barrier `svm::barrier()` and the
//! personalities' barriers that are known to have one participant per node), as a
//! **dissemination barrier**: no manager, ⌈log2 N⌉ rounds; in round k node i sends what it knows
//! (its own write notices and those it received in earlier rounds) to node (i + 2^k) mod N and
//! waits for the message of node (i − 2^k) mod N. After the last round every node has heard,
//! directly or through others, from every node — so it holds the union of all other nodes'
//! notices, exactly what a central manager would have handed it — and leaves.
//!
//! Against the central barrier (N − 1 arrivals to a manager, N − 1 departures from it): at 2
//! nodes one message delay instead of two; at 4 nodes two delays, as before, but no node sends
//! or receives more than one message per delay (the manager used to receive 3 and send 3 in a
//! row); from 8 nodes on, ⌈log2 N⌉ delays instead of 2, with N·⌈log2 N⌉ messages spread evenly.
//!
//! Episodes: a node that left episode e may send its round messages of episode e + 1 before a
//! slower node has finished episode e, so every message names its episode and round, and
//! messages that come early wait in `early` until their round.

use std::collections::{BTreeMap, BTreeSet};

use svm_comm::wire::{NodeId, PageId, SyncMsg};

use super::{SyncError, SyncEvent, Waiter};

/// This node's state of one all-nodes barrier.
#[derive(Debug, Default)]
pub(super) struct AllNodesBarrier {
    /// Episodes this node completed (the next arrival starts episode `episode`).
    episode: u64,
    /// The local thread in the current episode (None: not arrived).
    waiter: Option<Waiter>,
    /// Rounds of the current episode this node has completed (received from its partner).
    round: u32,
    /// Notices known so far in the current episode (this node's and those heard): what the
    /// next round's message carries.
    notices: BTreeSet<PageId>,
    /// Notices heard from other nodes in the current episode: what this node acts on at
    /// departure. A page only this node wrote is current in its own copy; invalidating it
    /// would only make the node fetch its own writes back. (With N not a power of two a
    /// node's own notices can come back to it through others; it then invalidates those
    /// pages too, which costs a fetch but is never wrong.)
    heard: BTreeSet<PageId>,
    /// Round messages received before this node reached their round: (episode, round) →
    /// notices.
    early: BTreeMap<(u64, u32), Vec<PageId>>,
}

/// ⌈log2 nodes⌉: the rounds of a barrier of `nodes` nodes.
pub(super) fn rounds(nodes: NodeId) -> u32 {
    (nodes.max(1) as u32).next_power_of_two().trailing_zeros()
}

impl AllNodesBarrier {
    /// The local thread `waiter` arrives with this node's `notices`. A second local thread
    /// arriving while the first waits is refused.
    pub(super) fn arrive(
        &mut self,
        (me, nodes): (NodeId, NodeId),
        barrier: u64,
        waiter: Waiter,
        notices: Vec<PageId>,
        out: &mut Vec<SyncEvent>,
    ) -> Result<(), SyncError> {
        if self.waiter.is_some() {
            return Err(SyncError::BarrierBusy { barrier });
        }
        self.waiter = Some(waiter);
        self.round = 0;
        self.notices.extend(notices);
        if rounds(nodes) > 0 {
            self.send_round(me, nodes, barrier, out);
        }
        self.progress((me, nodes), barrier, out);
        Ok(())
    }

    /// The round message of `(episode, round)` from this node's partner of that round.
    pub(super) fn received(
        &mut self,
        (me, nodes): (NodeId, NodeId),
        barrier: u64,
        episode: u64,
        round: u32,
        notices: &[PageId],
        out: &mut Vec<SyncEvent>,
    ) {
        self.early
            .entry((episode, round))
            .or_default()
            .extend_from_slice(notices);
        self.progress((me, nodes), barrier, out);
    }

    /// Sends this node's message of the current round.
    fn send_round(&self, me: NodeId, nodes: NodeId, barrier: u64, out: &mut Vec<SyncEvent>) {
        let to = ((me as u64 + (1u64 << self.round)) % nodes as u64) as NodeId;
        out.push(SyncEvent::Send {
            to,
            msg: SyncMsg::BarrierRound {
                barrier,
                episode: self.episode,
                round: self.round,
                notices: self.notices.iter().copied().collect(),
            },
        });
    }

    /// Completes every round whose message is here; leaves the barrier after the last.
    fn progress(&mut self, (me, nodes): (NodeId, NodeId), barrier: u64, out: &mut Vec<SyncEvent>) {
        let Some(waiter) = self.waiter else {
            return; // not arrived: received rounds wait in `early`
        };
        let total = rounds(nodes);
        while self.round < total {
            let Some(got) = self.early.remove(&(self.episode, self.round)) else {
                return;
            };
            self.notices.extend(got.iter().copied());
            self.heard.extend(got);
            self.round += 1;
            if self.round < total {
                self.send_round(me, nodes, barrier, out);
            }
        }
        self.waiter = None;
        self.round = 0;
        self.episode += 1;
        self.notices.clear();
        out.push(SyncEvent::BarrierDone {
            barrier,
            waiters: vec![waiter],
            notices: std::mem::take(&mut self.heard).into_iter().collect(),
            all_nodes: true,
            nodes: nodes as u32,
        });
    }

    /// One line for diagnostics.
    pub(super) fn describe(&self, nodes: NodeId) -> String {
        match self.waiter {
            Some(_) => format!(
                "a thread of this node waits in episode {}, round {} of {} (the round's message from node (this − {}) mod {nodes} has not come)",
                self.episode,
                self.round,
                rounds(nodes),
                1u64 << self.round
            ),
            None => format!("no thread of this node waits (episode {})", self.episode),
        }
    }
}
