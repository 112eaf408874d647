//! Frames on their way out. The engine's code does no I/O: `Node::send` only appends a frame
//! to its peer's [`Outbox`]. The thread that ran the step writes the outboxes to the links
//! once it has let go of the state (`StateGuard`'s drop, `step.rs`), so no thread ever holds
//! the engine state across a system call on a link, and the frames of one step to one peer
//! leave in one write.
//!
//! Order: frames are appended under the state lock, so their order in an outbox is the order
//! of the steps; a writer takes the peer's `writing` lock before it takes what is queued and
//! keeps it until the link has the bytes, so writes of one peer never overtake each other.
//! A link that cannot take everything keeps the rest in its own backlog and is watched for
//! writability; the engine thread writes the backlog out when the link drains (`flush_link`).
//! A failed write is recorded for the engine (`EngineState::send_lost`), which ends the job
//! unless the peer's Goodbye turns up within the grace period.

use super::*;

/// One peer's frames that steps produced and no thread has written yet.
pub(super) struct Outbox {
    /// Appended to under the state lock; held only for the copy.
    queued: Mutex<Vec<u8>>,
    /// Held while writing to the link; the buffer is the writer's spare, swapped with
    /// `queued` so neither side allocates in steady state.
    writing: Mutex<Vec<u8>>,
    /// Something was queued since a writer last looked.
    dirty: AtomicBool,
    /// The link has a backlog and is watched for writability.
    watched: AtomicBool,
    /// Why a write to the link failed, until the engine records it.
    failed: Mutex<Option<String>>,
}

impl Outbox {
    pub(super) fn new() -> Self {
        Outbox {
            queued: Mutex::new(Vec::new()),
            writing: Mutex::new(Vec::new()),
            dirty: AtomicBool::new(false),
            watched: AtomicBool::new(false),
            failed: Mutex::new(None),
        }
    }
}

impl Node {
    /// Queues one encoded frame (`head` then `data`) for `to` (the engine's side: no I/O).
    pub(super) fn queue_frame(&self, to: NodeId, head: &[u8], data: &[u8]) {
        let ob = &self.outboxes[to as usize];
        {
            let mut q = locked(&ob.queued);
            q.extend_from_slice(head);
            q.extend_from_slice(data);
        }
        ob.dirty.store(true, Ordering::Release);
        self.out_pending.store(true, Ordering::Release);
    }

    /// Writes every queued frame to its link (the shell's side, without the state). Every
    /// thread that ran a step calls it after letting go of the state, so nothing queued is
    /// left behind: a frame queued while another thread writes is written by the thread that
    /// queued it.
    pub(super) fn write_out(&self) {
        // A load first: most steps send nothing, and every step ends here.
        if !self.out_pending.load(Ordering::Acquire)
            || !self.out_pending.swap(false, Ordering::AcqRel)
        {
            return;
        }
        for (peer, ob) in self.outboxes.iter().enumerate() {
            if !ob.dirty.swap(false, Ordering::AcqRel) {
                continue;
            }
            let Some(link) = self.links[peer].as_ref() else {
                continue;
            };
            let mut bytes = locked(&ob.writing);
            std::mem::swap(&mut *bytes, &mut *locked(&ob.queued));
            if bytes.is_empty() {
                continue;
            }
            let sent = link.send(&[&bytes]);
            bytes.clear();
            match sent {
                Err(e) => self.write_failed(peer as NodeId, e.to_string()),
                Ok(()) => {
                    if link.backlog() > 0 && !ob.watched.swap(true, Ordering::AcqRel) {
                        // The socket is full: the engine writes the rest when it drains (epoll
                        // reports the change of interest even while the engine sleeps).
                        let token = PollToken::Peer(peer as NodeId).key();
                        if let Err(e) = self.poller.watch(link.poll_fd(), token, true) {
                            self.write_failed(
                                peer as NodeId,
                                format!("watching the link for writability: {e}"),
                            );
                        }
                    }
                }
            }
        }
    }

    /// Writes out what `peer`'s link has in its backlog (the engine thread, when the link
    /// became writable); once nothing is left, stops watching it for writability.
    pub(super) fn flush_link(&self, peer: NodeId) -> Result<(), EngineError> {
        let (Some(link), Some(ob)) = (
            self.links[peer as usize].as_ref(),
            self.outboxes.get(peer as usize),
        ) else {
            return Ok(());
        };
        let _writing = locked(&ob.writing);
        if !ob.watched.load(Ordering::Acquire) {
            return Ok(());
        }
        let done = match link.flush() {
            Ok(done) => done,
            Err(e) => {
                self.write_failed(peer, e.to_string());
                true
            }
        };
        if done {
            ob.watched.store(false, Ordering::Release);
            let token = PollToken::Peer(peer).key();
            self.poller
                .watch(link.poll_fd(), token, false)
                .map_err(EngineError::system(|| {
                    format!("watching the link to node {peer}")
                }))?;
        }
        Ok(())
    }

    /// Whether `peer`'s link has a backlog the engine must write out when it drains.
    pub(super) fn link_backlogged(&self, peer: NodeId) -> bool {
        self.outboxes
            .get(peer as usize)
            .is_some_and(|ob| ob.watched.load(Ordering::Acquire))
    }

    /// A write to `peer` failed: kept for the engine, which is woken to record it.
    fn write_failed(&self, peer: NodeId, why: String) {
        locked(&self.outboxes[peer as usize].failed).get_or_insert(why);
        self.out_failed.store(true, Ordering::Release);
        self.wake.signal();
    }

    /// Records the failed writes in the state at the step's time: fatal unless the peer said
    /// (or says within the grace) Goodbye — a peer closes its links only once every node has
    /// said Goodbye, and its own may still be unread.
    pub(super) fn record_write_failures(&self, st: &mut EngineState) {
        if !self.out_failed.swap(false, Ordering::AcqRel) {
            return;
        }
        for (peer, ob) in self.outboxes.iter().enumerate() {
            let Some(why) = locked(&ob.failed).take() else {
                continue;
            };
            if !st.goodbye_from[peer] && st.send_lost[peer].is_none() {
                st.send_lost[peer] = Some((st.now, why));
            }
        }
    }
}
