//! Queued sending for the DSM engine's DECK-SCI links ([`DeckConfig::queued_sends`]).
//!
//! A DECK-SCI send waits for the receiver: for ring slots, eager buffer space, rendezvous
//! grants. The engine sends while it holds its node's state, so two nodes flushing large diff
//! batches to each other at one barrier would each wait for a receiver whose engine is stuck
//! in the same wait. With queued sends a frame that can go at once (a free ring slot, and
//! eager space for a protocol-2 message) is still written by the caller; anything else — a
//! rendezvous message, a full buffer, or any frame behind a queued one — is copied into the
//! link's outbox and written by the link's sender thread, which may wait without holding
//! anyone's state. Frames keep their order.
//!
//! [`DeckConfig::queued_sends`]: super::DeckConfig::queued_sends

use std::collections::VecDeque;
use std::sync::atomic::Ordering::*;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{lock, Pair, Protocol, EAGER_HDR, SLOT};
use crate::transport::CommError;

/// How long closing a link waits for its sender thread to write what is queued.
pub(super) const DRAIN_DEADLINE: Duration = Duration::from_secs(5);

/// Frames waiting for the sender thread.
#[derive(Default)]
pub(super) struct Outbox {
    frames: VecDeque<Vec<u8>>,
    /// The sender thread is writing a frame it took from `frames`.
    busy: bool,
    /// The sender thread exists.
    started: bool,
    /// Why a queued send failed; later sends report it.
    failed: Option<String>,
}

/// The outbox and the condition its sender thread and drainers wait on.
#[derive(Default)]
pub(super) struct Queue {
    outbox: Mutex<Outbox>,
    changed: Condvar,
}

impl Queue {
    /// Wakes the sender thread (to notice the link closed) and drainers.
    pub(super) fn notify(&self) {
        self.changed.notify_all();
    }
}

impl Pair {
    /// Can a message of `n` bytes be written now without waiting for the receiver? Called
    /// with the outbox locked and nothing queued, so no other sender of this link runs.
    fn can_send_now(&self, n: usize) -> bool {
        let g = *self.geo();
        let st = lock(&self.send);
        let ring_read = self.mine().u64_at(self.out_ctl() + super::C_RING_READ);
        let ring_free = st.ring_w - ring_read.load(Acquire) < g.ring as u64;
        match self.protocol_for(n) {
            Protocol::Short => ring_free,
            Protocol::Eager => {
                let need = (EAGER_HDR + n).next_multiple_of(SLOT) as u64;
                let cap = g.eager as u64;
                let mut start = st.eager_w;
                if start % cap + need > cap {
                    start = start.next_multiple_of(cap);
                }
                let read = self.mine().u64_at(self.out_ctl() + super::C_EAGER_READ);
                ring_free && need <= cap && start + need - read.load(Acquire) <= cap
            }
            Protocol::Rendezvous => false,
        }
    }

    /// [`Pair::send_parts`] for the DSM engine: never waits for the receiver (see the module
    /// docs).
    pub(super) fn send_queued(self: &Arc<Self>, parts: &[&[u8]]) -> Result<(), CommError> {
        let n: usize = parts.iter().map(|p| p.len()).sum();
        let mut ob = lock(&self.queue.outbox);
        if let Some(why) = &ob.failed {
            return Err(self.lost(why.clone()));
        }
        // The outbox lock stays held while writing: no queued frame can overtake this one.
        if ob.frames.is_empty() && !ob.busy && self.can_send_now(n) {
            return self.send_parts(parts);
        }
        if self.local_closed.load(SeqCst) {
            return Err(self.lost("send on a closed link".into()));
        }
        ob.frames.push_back(parts.concat());
        if !ob.started {
            ob.started = true;
            let pair = self.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("svm-deck-send-{}", self.peer))
                .spawn(move || pair.sender_thread());
            if let Err(e) = spawned {
                ob.started = false;
                ob.frames.pop_back();
                return Err(self.lost(format!("cannot start the DECK-SCI sender thread: {e}")));
            }
        }
        self.queue.changed.notify_all();
        Ok(())
    }

    /// Writes queued frames in order, waiting for the receiver as long as it takes; ends when
    /// the link is closed and nothing is queued, or a send failed.
    fn sender_thread(self: Arc<Self>) {
        let mut ob = lock(&self.queue.outbox);
        loop {
            let Some(frame) = ob.frames.pop_front() else {
                if self.local_closed.load(SeqCst) {
                    ob.started = false;
                    return;
                }
                ob = self
                    .queue
                    .changed
                    .wait_timeout(ob, Duration::from_millis(100))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                continue;
            };
            ob.busy = true;
            drop(ob);
            let sent = self.send_parts(&[&frame]);
            ob = lock(&self.queue.outbox);
            ob.busy = false;
            if let Err(e) = sent {
                ob.failed = Some(match e {
                    CommError::Lost { why, .. } => why,
                    other => other.to_string(),
                });
                ob.frames.clear();
                ob.started = false;
                self.queue.changed.notify_all();
                return;
            }
            self.queue.changed.notify_all();
        }
    }

    /// Waits until the sender thread has written everything queued (or failed), at most until
    /// `deadline`.
    pub(super) fn drain(&self, deadline: Instant) {
        let mut ob = lock(&self.queue.outbox);
        while (!ob.frames.is_empty() || ob.busy) && ob.failed.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            ob = self
                .queue
                .changed
                .wait_timeout(ob, left.min(Duration::from_millis(100)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}
