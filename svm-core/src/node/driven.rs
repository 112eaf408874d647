//! Driving a node's engine without its thread: a deterministic simulator (or a test) hands it
//! frames, has it serve the faults its backend queued, lets time pass for its timers (lock
//! lingers, deadlines), and starts application threads' synchronisation operations without
//! blocking. These are the same calls the engine thread makes (`engine.rs`), so what is driven
//! is the real engine: fault service, message dispatch, protocol actions, release/acquire
//! fan-in.
//!
//! The driver owns the time: every step takes `now` (ns, any origin, never going back), and
//! the engine reads no clock of its own, so a seeded simulation replays exactly, timers
//! included.

use super::*;

/// A synchronisation operation started with [`Node::submit`]; the engine completes it.
pub struct Pending {
    cell: Arc<WaitCell>,
}

impl Pending {
    /// How the operation ended, once the engine completed it.
    pub fn result(&self) -> Option<WaitResult> {
        if self.cell.state.load(Ordering::Acquire) != 1 {
            return None;
        }
        self.cell
            .result
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Node {
    /// Assembles a node whose engine does not run by itself: the caller drives it with
    /// [`Node::deliver`], [`Node::serve_faults`], [`Node::poll_timers`] and
    /// [`Node::submit`], giving it the time of every step.
    pub fn start_driven(parts: NodeParts) -> Result<Arc<Node>, crate::sys::SysError> {
        Self::assemble(parts, Clock::Driven)
    }

    /// The state, at time `now` (a driven step; a time before the last step's counts as the
    /// last step's, so the engine's time never goes back).
    fn state_at(&self, now: u64) -> step::StateGuard<'_> {
        let mut st = self.lock_state();
        st.now = st.now.max(now);
        st
    }

    /// A fresh waiter id for a driven application thread.
    pub fn new_waiter(&self) -> Waiter {
        self.next_waiter.fetch_add(1, Ordering::Relaxed)
    }

    /// Handles, at time `now`, one whole frame that node `from` sent.
    pub fn deliver(&self, now: u64, from: NodeId, frame: &[u8]) -> Result<(), EngineError> {
        let mut st = self.state_at(now);
        self.on_frame(&mut st, from, frame)?;
        self.drain_loopback(&mut st)
    }

    /// Serves, at time `now`, the faults the backend has queued.
    pub fn serve_faults(&self, now: u64) -> Result<(), EngineError> {
        let mut faults = Vec::new();
        self.backend
            .take_faults(&mut faults)
            .map_err(EngineError::Faults)?;
        let mut st = self.state_at(now);
        for f in faults {
            self.on_fault(&mut st, f)?;
        }
        self.drain_loopback(&mut st)
    }

    /// When the engine's next timer is due (ns, on the driver's clock): the earliest end of a
    /// lock linger or protocol timer (sc-sw's minimum hold); None without one. The engine
    /// thread polls without sleeping until then; a driver calls [`Node::poll_timers`] at that
    /// time.
    pub fn poll_at(&self) -> Option<u64> {
        Self::next_timer(&self.lock_state())
    }

    /// Lets time pass to `now`: runs the timers due by then (lingering lock tokens move on to
    /// the nodes waiting for them, held pages are given up) and checks the deadlines the
    /// engine thread checks (a send to a closed peer without its Goodbye, a fault waiting past
    /// `SVM_TIMEOUT`).
    pub fn poll_timers(&self, now: u64) -> Result<(), EngineError> {
        let mut st = self.state_at(now);
        self.run_timers(&mut st)?;
        self.check_deadlines(&st)
    }

    /// Starts, at time `now`, waiter `w`'s operation `op` as an application thread's call
    /// does: a lock or unlock the fast path can do (`lockfast.rs`) ends at once (`Ok(None)`:
    /// granted or released); anything else goes to the engine ([`Node::submit`]).
    pub fn begin(&self, now: u64, w: Waiter, op: SyncOp) -> Result<Option<Pending>, EngineError> {
        let fast = match op {
            SyncOp::Lock { id, .. } => self.fast_lock_as(w, id),
            SyncOp::Unlock(id) => self.fast_unlock_as(w, id),
            _ => false,
        };
        if fast {
            return Ok(None);
        }
        self.submit(now, w, op).map(Some)
    }

    /// Node `peer`'s connection closed and every frame it sent was delivered: an orderly end
    /// if it said Goodbye, else [`EngineError::Lost`] (what the engine thread does on EOF).
    pub fn link_closed(&self, peer: NodeId) -> Result<(), EngineError> {
        let st = self.lock_state();
        self.peer_closed(&st, peer)
    }

    /// Runs `f` on this node's synchronisation state (tests and simulators: tokens held,
    /// notices kept, overtakes).
    pub fn inspect_sync<R>(&self, f: impl FnOnce(&SyncState) -> R) -> R {
        f(&self.lock_state().sync)
    }

    /// The protocol's description of `page` here (for diagnostics).
    pub fn describe_page(&self, page: PageId) -> String {
        let st = self.lock_state();
        self.protocol_of(&st, page)
            .map(|p| p.describe(page))
            .unwrap_or_default()
    }

    /// Starts, at time `now`, waiter `w`'s synchronisation operation `op` in the engine; it
    /// completes now or as messages arrive.
    /// If another thread holds the state (a driver serving faults in a second thread), the
    /// operation is posted and runs when that step ends (`step.rs`).
    pub fn submit(&self, now: u64, w: Waiter, op: SyncOp) -> Result<Pending, EngineError> {
        let cell = self.start_sync_op(Some(now), w, op)?;
        Ok(Pending { cell })
    }
}
