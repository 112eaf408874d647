//! A step of the engine: a thread takes the state ([`StateGuard`]), runs engine code under it,
//! and when it lets go runs the synchronisation operations other application threads posted
//! meanwhile and writes out the frames the step produced (`outbox.rs`).
//!
//! Posting (flat combining): an application thread whose lock, unlock, barrier or semaphore
//! operation must go through the engine takes the state only if it is free. If the engine
//! thread (or another application thread) holds it — serving faults, say — the operation is
//! posted instead and the thread sleeps on its wait cell at once; the holder runs the posted
//! operations before it lets go, and sends their requests with its own frames. So application
//! threads never wait for fault service to take a lock, and a posted request leaves as soon as
//! the step that held the state ends, without waiting for its thread to be scheduled again.
//!
//! Nothing posted is left behind: a poster, after posting, takes the state if it is free (and
//! so runs what is posted); a holder, after letting go, looks at the posts again and takes the
//! state back if it can. Either the poster finds the state free, or some holder lets go after
//! the post and sees it.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::fence;
use std::sync::TryLockError;

use super::*;

/// An operation an application thread posted for the holder of the state to run.
pub(super) struct PostedOp {
    waiter: Waiter,
    op: SyncOp,
    /// The wait cell the thread sleeps on (fresh).
    cell: Arc<WaitCell>,
}

/// The engine state, held by one thread for one step; letting go of it runs the posted
/// operations and writes out the step's frames.
pub(super) struct StateGuard<'a> {
    node: &'a Node,
    guard: Option<MutexGuard<'a, EngineState>>,
}

impl<'a> StateGuard<'a> {
    pub(super) fn new(node: &'a Node, guard: MutexGuard<'a, EngineState>) -> Self {
        let mut g = StateGuard {
            node,
            guard: Some(guard),
        };
        if node.clock == Clock::Monotonic {
            g.now = now_ns();
        }
        node.record_write_failures(&mut g);
        g
    }
}

impl Deref for StateGuard<'_> {
    type Target = EngineState;
    fn deref(&self) -> &EngineState {
        self.guard.as_deref().expect("held until dropped")
    }
}

impl DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut EngineState {
        self.guard.as_deref_mut().expect("held until dropped")
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        let node = self.node;
        loop {
            if let Some(st) = self.guard.as_deref_mut() {
                if !std::thread::panicking() {
                    node.run_posted(st);
                }
                // For the engine's spin (`Node::threads_wait`), which must not take the state.
                let waiting = st.blocked.len() + st.pages.waiter_count();
                node.waiting_in_engine
                    .store(waiting.min(u32::MAX as usize) as u32, Ordering::Relaxed);
            }
            drop(self.guard.take());
            node.write_out();
            // A post that came after the last look, while the state was still held: take the
            // state back if it is free (if not, its new holder runs the post). The fence pairs
            // with the poster's: either it sees the state free, or this sees its post.
            fence(Ordering::SeqCst);
            if !node.posted_any.load(Ordering::SeqCst) {
                return;
            }
            match node.try_state() {
                Some(g) => {
                    self.guard = Some(g);
                    if node.clock == Clock::Monotonic {
                        self.now = now_ns();
                    }
                }
                None => return,
            }
        }
    }
}

impl Node {
    /// The state lock if no other thread holds it (a poisoned lock is taken as it is: the
    /// state stays consistent between steps).
    fn try_state(&self) -> Option<MutexGuard<'_, EngineState>> {
        match self.state.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// Starts waiter `w`'s operation `op`: under the state if it is free, else posted for the
    /// state's holder (see the module docs). Returns the cell the engine completes. `now` is
    /// the time of a driven step (None: the clock's).
    pub(super) fn start_sync_op(
        &self,
        now: Option<u64>,
        w: Waiter,
        op: SyncOp,
    ) -> Result<Arc<WaitCell>, EngineError> {
        let cell = Arc::new(WaitCell::new());
        if let Some(g) = self.try_state() {
            let mut st = StateGuard::new(self, g);
            if let Some(now) = now {
                st.now = st.now.max(now);
            }
            self.begin_op(&mut st, w, op.blocked(), &cell, |n, st, w| {
                n.run_sync_op(st, w, op)
            })?;
            return Ok(cell);
        }
        locked(&self.posted).push(PostedOp {
            waiter: w,
            op,
            cell: cell.clone(),
        });
        self.posted_any.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if let Some(g) = self.try_state() {
            // The holder let go before it saw the post: run it here (the guard's drop does).
            drop(StateGuard::new(self, g));
        }
        Ok(cell)
    }

    /// Runs the operations posted so far, under the state `st`. One that fails ends the node
    /// as its own thread would have (`Node::fail`), or, under [`FailureMode::Keep`], is kept as
    /// the engine's failure (its thread's wait then ends at its deadline).
    fn run_posted(&self, st: &mut EngineState) {
        // A load first: nearly every step finds nothing posted, and a load costs less than
        // the swap on this path, which every step takes.
        while self.posted_any.load(Ordering::SeqCst)
            && self.posted_any.swap(false, Ordering::SeqCst)
        {
            let ops = std::mem::take(&mut *locked(&self.posted));
            for p in ops {
                let op = p.op;
                let run = self.begin_op(st, p.waiter, op.blocked(), &p.cell, |n, st, w| {
                    n.run_sync_op(st, w, op)
                });
                if let Err(e) = run {
                    if self.failure_mode == FailureMode::Keep {
                        locked(&self.failure).get_or_insert(e);
                    } else {
                        self.fail(Some(st), e);
                    }
                }
            }
        }
    }
}
