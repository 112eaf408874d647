//! The application-thread fast path of a lock whose token this node holds (see `docs/sync.md`).
//!
//! A [`FastLock`] is one atomic word per lock, published by the engine when the lock's token is
//! here, free and wanted by nobody ([`super::SyncState::token_idle`]). A thread takes such a
//! lock with one compare-and-swap and gives it back with another, without the engine, its
//! state lock or a futex — as long as the node's protocols are *quiescent* (a release would
//! send nothing and carry no notices: `Protocol::quiescent`), so skipping the release and
//! acquire hooks changes nothing. Everything else goes through the engine, which takes the word
//! back first ([`FastLock::reclaim`]).
//!
//! Word layout: bits 0–1 the state ([`SLOW`], [`IDLE`], [`HELD`]), bit 2 [`WANTED`] (the
//! engine adopted the fast holder: its release must go through the engine), bit 3
//! [`CONVERTED`] (the engine ran the acquire hooks for the holder late, because the protocols
//! stopped being quiescent while it held the lock), bits 4.. the holder's waiter id.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Waiter;

/// The engine owns the lock's state: use the slow path.
pub const SLOW: u64 = 0;
/// Token here, free, nobody waiting: a thread may take it with a CAS.
pub const IDLE: u64 = 1;
/// Taken through the fast path by the thread in the upper bits.
pub const HELD: u64 = 2;
const STATE: u64 = 3;
/// The engine adopted the fast holder (it wants the lock): release through the engine.
pub const WANTED: u64 = 4;
/// The engine ran the acquire hooks for the fast holder.
pub const CONVERTED: u64 = 8;
const SHIFT: u32 = 4;

/// What [`FastLock::reclaim`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reclaimed {
    /// The engine owns the lock (it was idle or already the engine's).
    Engine,
    /// A thread holds it through the fast path; from now on its release goes through the
    /// engine, which must record it as the holder.
    Holder(Waiter),
    /// A thread holds it through the fast path and was adopted before.
    Adopted,
}

/// What a thread's slow-path release found in the word ([`FastLock::take_back`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TakenBack {
    /// The engine has not recorded the thread as the holder yet.
    pub adopt: bool,
    /// The acquire hooks have not run for this critical section yet.
    pub acquire_hooks: bool,
}

/// One lock's fast-path word.
#[derive(Debug, Default)]
pub struct FastLock {
    word: AtomicU64,
    /// Acquisitions through the fast path (statistics). Only the thread that just took the
    /// lock writes it, so a plain load and store count it: no locked instruction.
    taken: AtomicU64,
}

impl FastLock {
    pub fn new() -> Self {
        Self::default()
    }

    /// Application thread: takes the lock if it is idle. One CAS.
    pub fn try_take(&self, waiter: Waiter) -> bool {
        self.word.load(Ordering::Relaxed) == IDLE
            && self
                .word
                .compare_exchange(
                    IDLE,
                    HELD | (waiter << SHIFT),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Application thread, holding the lock it took with [`FastLock::try_take`]: counts the
    /// acquisition.
    pub fn count_take(&self) {
        self.taken
            .store(self.taken.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Acquisitions counted by [`FastLock::count_take`].
    pub fn taken(&self) -> u64 {
        self.taken.load(Ordering::Relaxed)
    }

    /// Application thread: gives back a lock it took with [`FastLock::try_take`], unless the
    /// engine wants it or converted it (then the release must go through the engine). One CAS.
    pub fn try_give_back(&self, waiter: Waiter) -> bool {
        self.word
            .compare_exchange(
                HELD | (waiter << SHIFT),
                IDLE,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// Engine (state lock held): the token became idle here; threads may take it.
    pub fn publish(&self) {
        let _ = self
            .word
            .compare_exchange(SLOW, IDLE, Ordering::Release, Ordering::Relaxed);
    }

    /// Engine (state lock held): takes the lock's state back before changing it.
    pub fn reclaim(&self) -> Reclaimed {
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            let next = match cur & STATE {
                IDLE => SLOW,
                HELD if cur & WANTED != 0 => return Reclaimed::Adopted,
                HELD => cur | WANTED,
                _ => return Reclaimed::Engine,
            };
            match self
                .word
                .compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if next == SLOW => return Reclaimed::Engine,
                Ok(_) => return Reclaimed::Holder(cur >> SHIFT),
                Err(now) => cur = now,
            }
        }
    }

    /// Engine (state lock held): the protocols stopped being quiescent; if a thread holds the
    /// lock through the fast path and its acquire hooks have not run, marks them run (the
    /// caller runs them) and returns true.
    pub fn convert(&self) -> bool {
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            if cur & STATE != HELD || cur & CONVERTED != 0 {
                return false;
            }
            match self.word.compare_exchange(
                cur,
                cur | CONVERTED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Engine (state lock held), for a thread releasing through the slow path: if `waiter`
    /// holds the lock through the fast path, gives the state to the engine and says what is
    /// still to do.
    pub fn take_back(&self, waiter: Waiter) -> Option<TakenBack> {
        let cur = self.word.load(Ordering::Acquire);
        if cur & STATE != HELD || cur >> SHIFT != waiter {
            return None;
        }
        self.word.store(SLOW, Ordering::Release);
        Some(TakenBack {
            adopt: cur & WANTED == 0,
            acquire_hooks: cur & CONVERTED == 0,
        })
    }

    /// Whether a thread holds the lock through the fast path.
    pub fn fast_held(&self) -> bool {
        self.word.load(Ordering::Acquire) & STATE == HELD
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_give_back_and_reclaim() {
        let f = FastLock::new();
        // Not published: the slow path.
        assert!(!f.try_take(1));
        f.publish();
        assert!(f.try_take(1));
        assert!(!f.try_take(2));
        assert!(!f.try_give_back(2));
        assert!(f.try_give_back(1));
        // Idle: the engine takes it back and threads go slow.
        assert_eq!(f.reclaim(), Reclaimed::Engine);
        assert!(!f.try_take(1));
        // Held: the engine adopts the holder; its release must go slow.
        f.publish();
        assert!(f.try_take(3));
        assert_eq!(f.reclaim(), Reclaimed::Holder(3));
        assert_eq!(f.reclaim(), Reclaimed::Adopted);
        assert!(!f.try_give_back(3));
        assert_eq!(f.take_back(4), None);
        assert_eq!(
            f.take_back(3),
            Some(TakenBack {
                adopt: false,
                acquire_hooks: true
            })
        );
        assert!(!f.fast_held());
        // Converted: the release goes slow without the acquire hooks.
        f.publish();
        assert!(f.try_take(5));
        assert!(f.convert());
        assert!(!f.convert());
        assert!(!f.try_give_back(5));
        assert_eq!(
            f.take_back(5),
            Some(TakenBack {
                adopt: true,
                acquire_hooks: false
            })
        );
    }
}
