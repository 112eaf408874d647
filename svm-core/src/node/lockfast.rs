//! The engine's side of the lock fast path (`crate::sync::fast`, `docs/sync.md`): publishing
//! idle tokens, taking them back, running the acquire hooks late when the protocols stop being
//! quiescent, and the application threads' compare-and-swap entry points.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rustc_hash::{FxBuildHasher, FxHashMap};

use super::{AcquireCont, EngineError, EngineState, Node, NodeId, WaitResult};
use crate::sync::fast::{FastLock, Reclaimed};
use crate::sync::Waiter;

/// What an application thread keeps for its synchronisation calls, in one thread-local: a fast
/// lock or unlock then costs one thread-local access (in a shared library such as a C
/// personality every access is a call to `__tls_get_addr`; radiosity at one node spent 10 % of
/// its time there with two per call).
pub(super) struct ThreadLocks {
    /// This thread's waiter id (0 until it first waits in the engine).
    pub(super) waiter: Cell<Waiter>,
    /// The node `cache` belongs to (`Node::instance`; 0: none yet).
    node: Cell<u64>,
    /// This thread's copy of the `Node::fast` entries it used: lock → word. Never dropped, so
    /// that the thread-local has no destructor: a thread-local with one cannot be used once the
    /// thread's destructors ran, and the job's end runs in the main thread's exit handlers,
    /// after them (`exit()` in a C program). What a thread that ends leaves here is a few
    /// entries.
    cache: ManuallyDrop<RefCell<FxHashMap<u64, Arc<FastLock>>>>,
}

thread_local! {
    pub(super) static THREAD: ThreadLocks = const {
        ThreadLocks {
            waiter: Cell::new(0),
            node: Cell::new(0),
            cache: ManuallyDrop::new(RefCell::new(HashMap::with_hasher(FxBuildHasher))),
        }
    };
}

impl Node {
    /// Records whether every protocol is quiescent; if not, runs the acquire hooks late for
    /// every lock a thread holds through the fast path (so the critical section is counted
    /// open and its release runs the hooks).
    pub(super) fn note_protocols(&self, st: &mut EngineState) -> Result<(), EngineError> {
        if self.record_quiescence(st) || self.fast_held.load(Ordering::SeqCst) == 0 {
            return Ok(());
        }
        let converted = st.fast_locks.values().filter(|f| f.convert()).count();
        for _ in 0..converted {
            self.late_acquire(st)?;
        }
        Ok(())
    }

    /// Records for the fast path whether every protocol is quiescent, and returns it; and
    /// for the shared-memory barrier whether every protocol is barrier-quiescent.
    pub(super) fn record_quiescence(&self, st: &EngineState) -> bool {
        // One pass (this runs after every step): a protocol that is not quiescent is not
        // barrier-quiescent either.
        let (mut quiet, mut barrier_quiet) = (true, true);
        for p in st.protocols.iter().flatten() {
            if !p.quiescent() {
                (quiet, barrier_quiet) = (false, false);
                break;
            }
            barrier_quiet &= p.barrier_quiescent();
        }
        self.proto_dirty.store(!quiet, Ordering::SeqCst);
        self.barrier_dirty.store(!barrier_quiet, Ordering::SeqCst);
        quiet
    }

    /// Runs the acquire hooks (no notices) for a critical section entered through the fast
    /// path; nobody waits for their completion.
    pub(super) fn late_acquire(&self, st: &mut EngineState) -> Result<(), EngineError> {
        let token = Self::new_token(st);
        st.acquires.insert(
            token,
            AcquireCont {
                waiters: Vec::new(),
                result: WaitResult::Granted,
            },
        );
        self.acquire_all(st, token, &[], None)
    }

    /// The engine is about to change `lock`'s state: takes its fast-path word back, adopting a
    /// thread that holds it through the fast path as the holder, and counts the takes made
    /// through a limited word (while a remote node waits) as local hand-offs.
    /// Returns those takes.
    pub(super) fn reclaim_fast(&self, st: &mut EngineState, lock: u64) -> u32 {
        let Some(f) = st.fast_locks.get(&lock) else {
            return 0;
        };
        let (found, takes) = f.reclaim();
        st.sync.count_fast_handoffs(lock, takes);
        if let Reclaimed::Holder(h) = found {
            st.sync.adopt_holder(lock, h);
        }
        takes
    }

    /// Takes back every lock word published while a remote node waits (their tokens linger
    /// here), before something that may move those tokens on: a local barrier arrival ends
    /// every linger at once.
    pub(super) fn reclaim_lingering_fast(&self, st: &mut EngineState) {
        let lingering: Vec<u64> = st
            .fast_locks
            .iter()
            .filter(|(lock, f)| !f.is_slow() && st.sync.lingering(**lock))
            .map(|(lock, _)| *lock)
            .collect();
        for lock in lingering {
            self.reclaim_fast(st, lock);
        }
    }

    /// A slow-path release by `w`: if it took `lock` through the fast path, the engine takes
    /// over (records it as the holder, runs the acquire hooks it skipped).
    pub(super) fn take_back_fast(
        &self,
        st: &mut EngineState,
        lock: u64,
        w: Waiter,
    ) -> Result<(), EngineError> {
        let Some(f) = st.fast_locks.get(&lock).cloned() else {
            return Ok(());
        };
        let Some(tb) = f.take_back(w) else {
            return Ok(());
        };
        self.fast_held.fetch_sub(1, Ordering::SeqCst);
        st.sync.count_fast_handoffs(lock, tb.takes);
        if tb.adopt {
            st.sync.adopt_holder(lock, w);
        }
        if tb.acquire_hooks {
            self.late_acquire(st)?;
        }
        Ok(())
    }

    /// After the engine changed `lock`'s state (a slow-path release, a timer): if the token
    /// stays here idle, threads may take it through the fast path; if it lingers for them
    /// while a remote node waits, they may take it as many times as the fairness bound still
    /// allows (`SyncState::fast_share`), after which it moves on.
    pub(super) fn publish_fast(&self, st: &mut EngineState, lock: u64) {
        let share = if st.sync.token_idle(lock) {
            None
        } else {
            match st.sync.fast_share(lock) {
                Some(share) => Some(share),
                None => return,
            }
        };
        let f = st
            .fast_locks
            .entry(lock)
            .or_insert_with(|| {
                let f = Arc::new(FastLock::new());
                self.fast
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(lock, f.clone());
                f
            })
            .clone();
        match share {
            None => f.publish(),
            Some(share) => f.publish_limited(share),
        }
    }

    /// A lock without a fast-path word: if it was never used here and its token starts here
    /// (this node manages it), it is idle from the start, and this publishes its word, so that
    /// its first acquisition too, not only those after a release, can skip the engine. Returns
    /// whether it did.
    fn publish_unused(&self, lock: u64) -> bool {
        if (lock % self.nodes as u64) as NodeId != self.me {
            return false;
        }
        let mut st = self.lock_state();
        if !st.sync.first_use_here(lock) {
            return false;
        }
        self.publish_fast(&mut st, lock);
        true
    }

    /// Runs `op` on the fast-path word of `lock`, if there is one (the thread's cache `t`
    /// first).
    fn with_fast<R>(
        &self,
        t: &ThreadLocks,
        lock: u64,
        op: impl FnOnce(&FastLock) -> R,
    ) -> Option<R> {
        let mut cache = t.cache.borrow_mut();
        // Keyed by the node's instance number, not its address: a node built after another
        // was dropped (engine tests, the simulator) may reuse the address.
        if t.node.get() != self.instance {
            t.node.set(self.instance);
            cache.clear();
        }
        let f = match cache.get(&lock) {
            Some(f) => f,
            None => {
                let f = self
                    .fast
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(&lock)?
                    .clone();
                cache.entry(lock).or_insert(f)
            }
        };
        Some(op(f))
    }

    /// Takes `lock` without the engine if its token is here, idle, and the protocols are
    /// quiescent.
    pub(super) fn fast_lock(&self, lock: u64) -> bool {
        if self.proto_dirty.load(Ordering::SeqCst) {
            return false;
        }
        THREAD.with(|t| {
            let w = self.waiter_of(t);
            self.fast_lock_in(t, w, lock)
        })
    }

    /// [`Node::fast_lock`] for waiter `w` (0: a thread that never waited, which the fast path
    /// does not serve).
    pub(super) fn fast_lock_as(&self, w: Waiter, lock: u64) -> bool {
        THREAD.with(|t| self.fast_lock_in(t, w, lock))
    }

    fn fast_lock_in(&self, t: &ThreadLocks, w: Waiter, lock: u64) -> bool {
        if w == 0 || self.proto_dirty.load(Ordering::SeqCst) {
            return false;
        }
        let take = |f: &FastLock| {
            self.fast_held.fetch_add(1, Ordering::SeqCst);
            let ok = f.try_take(w);
            if ok {
                f.count_take();
            } else {
                self.fast_held.fetch_sub(1, Ordering::SeqCst);
            }
            ok
        };
        let taken = match self.with_fast(t, lock, take) {
            Some(taken) => taken,
            // No word yet: a lock never used here may be idle at its manager from the start.
            None => self.publish_unused(lock) && self.with_fast(t, lock, take).unwrap_or(false),
        };
        if taken {
            self.lock_taken(lock);
        }
        taken
    }

    /// Releases `lock` without the engine if this thread took it through the fast path and
    /// nothing needs the release hooks.
    pub(super) fn fast_unlock(&self, lock: u64) -> bool {
        if self.proto_dirty.load(Ordering::SeqCst) {
            return false;
        }
        THREAD.with(|t| self.fast_unlock_in(t, t.waiter.get(), lock))
    }

    /// [`Node::fast_unlock`] for waiter `w`.
    pub(super) fn fast_unlock_as(&self, w: Waiter, lock: u64) -> bool {
        THREAD.with(|t| self.fast_unlock_in(t, w, lock))
    }

    fn fast_unlock_in(&self, t: &ThreadLocks, w: Waiter, lock: u64) -> bool {
        if w == 0 || self.proto_dirty.load(Ordering::SeqCst) {
            return false;
        }
        self.with_fast(t, lock, |f| {
            let ok = f.try_give_back(w);
            if ok {
                self.fast_held.fetch_sub(1, Ordering::SeqCst);
                self.lock_given_back(lock);
            }
            ok
        })
        .unwrap_or(false)
    }
}
