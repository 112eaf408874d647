//! Driving a node's engine without its thread: a deterministic simulator (or a test) hands it
//! frames, has it serve the faults its backend queued, ends lock lingers when it decides time
//! has passed, and starts application threads' synchronisation operations without blocking.
//! These are the same calls the engine thread makes (`engine.rs`), so what is driven is the
//! real engine: fault service, message dispatch, protocol actions, release/acquire fan-in.

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
    /// [`Node::deliver`], [`Node::serve_faults`] and [`Node::end_lingers_now`].
    pub fn start_driven(parts: NodeParts) -> Result<Arc<Node>, crate::sys::SysError> {
        Self::assemble(parts)
    }

    /// A fresh waiter id for a driven application thread.
    pub fn new_waiter(&self) -> Waiter {
        self.next_waiter.fetch_add(1, Ordering::Relaxed)
    }

    /// Handles one whole frame that node `from` sent.
    pub fn deliver(&self, from: NodeId, frame: &[u8]) -> Result<(), EngineError> {
        let mut st = self.lock_state();
        self.on_frame(&mut st, from, frame)?;
        self.drain_loopback(&mut st)
    }

    /// Serves the faults the backend has queued.
    pub fn serve_faults(&self) -> Result<(), EngineError> {
        let mut faults = Vec::new();
        self.backend
            .take_faults(&mut faults)
            .map_err(EngineError::Faults)?;
        let mut st = self.lock_state();
        for f in faults {
            self.on_fault(&mut st, f)?;
        }
        self.drain_loopback(&mut st)
    }

    /// Whether some lock token lingers here after a local release.
    pub fn has_lingers(&self) -> bool {
        !self.lock_state().lingers.is_empty()
    }

    /// Ends every lock linger now, whatever its time: the token moves on to the node waiting
    /// for it.
    pub fn end_lingers_now(&self) -> Result<(), EngineError> {
        let mut st = self.lock_state();
        self.end_lingers(&mut st, None)
    }

    /// Starts waiter `w`'s operation `op` as an application thread's call does: a lock or
    /// unlock the fast path can do (`lockfast.rs`) ends at once (`Ok(None)`: granted or
    /// released); anything else goes to the engine ([`Node::submit`]).
    pub fn begin(&self, w: Waiter, op: SyncOp) -> Result<Option<Pending>, EngineError> {
        let fast = match op {
            SyncOp::Lock { id, .. } => self.fast_lock_as(w, id),
            SyncOp::Unlock(id) => self.fast_unlock_as(w, id),
            _ => false,
        };
        if fast {
            return Ok(None);
        }
        self.submit(w, op).map(Some)
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

    /// Starts waiter `w`'s synchronisation operation `op` in the engine; it completes now or
    /// as messages arrive.
    pub fn submit(&self, w: Waiter, op: SyncOp) -> Result<Pending, EngineError> {
        let mut st = self.lock_state();
        let cell = self.begin_op(&mut st, w, op.blocked(), |n, st, w| {
            n.run_sync_op(st, w, op)
        })?;
        Ok(Pending { cell })
    }
}
