//! The application-thread fast path of a lock whose token this node holds (see `docs/sync.md`).
//!
//! A [`FastLock`] is one atomic word per lock, published by the engine when the lock's token is
//! here and free: wanted by nobody ([`super::SyncState::token_idle`]), or wanted by a remote
//! node while the local threads still have a share of hand-offs left under the fairness bound
//! ([`super::SyncState::fast_share`]). A thread takes such a lock with one compare-and-swap and
//! gives it back with another, without the engine, its state lock or a futex — as long as the
//! node's protocols are *quiescent* (a release would send nothing and carry no notices:
//! `Protocol::quiescent`), so skipping the release and acquire hooks changes nothing.
//! Everything else goes through the engine, which takes the word back first
//! ([`FastLock::reclaim`]).
//!
//! A word published while a remote node waits is *limited*: it carries the number of local
//! takes still allowed, each take uses one, and the release of the take that used the last one
//! goes through the engine, which then passes the token on. The engine counts the takes it did
//! not see as local hand-offs when it takes the word back.
//!
//! Word layout: bits 0–1 the state ([`SLOW`], [`IDLE`], [`HELD`]), bit 2 [`WANTED`] (the
//! engine adopted the fast holder: its release must go through the engine), bit 3
//! [`CONVERTED`] (the engine ran the acquire hooks for the holder late, because the protocols
//! stopped being quiescent while it held the lock), bit 4 `LIMITED` (a remote node waits: the
//! share below applies), bits 5–36 the holder's waiter id, bits 37–63 the share: the takes
//! still allowed (idle) or allowed after the holder's (held).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::Waiter;

/// The engine owns the lock's state: use the slow path.
pub const SLOW: u64 = 0;
/// Token here, free: a thread may take it with a CAS.
pub const IDLE: u64 = 1;
/// Taken through the fast path by the thread in the waiter bits.
pub const HELD: u64 = 2;
const STATE: u64 = 3;
/// The engine adopted the fast holder (it wants the lock): release through the engine.
pub const WANTED: u64 = 4;
/// The engine ran the acquire hooks for the fast holder.
pub const CONVERTED: u64 = 8;
/// A remote node waits for the token: the word's share applies.
const LIMITED: u64 = 16;
const WAITER_SHIFT: u32 = 5;
const WAITER_BITS: u32 = 32;
/// Largest waiter id the fast path serves (larger ones use the slow path).
const WAITER_MAX: u64 = (1 << WAITER_BITS) - 1;
const SHARE_SHIFT: u32 = WAITER_SHIFT + WAITER_BITS;
/// Largest share a word carries (the fairness bound is far below it).
const SHARE_MAX: u32 = (1 << (64 - SHARE_SHIFT)) - 1;

fn waiter_of(word: u64) -> Waiter {
    (word >> WAITER_SHIFT) & WAITER_MAX
}

fn share_of(word: u64) -> u32 {
    (word >> SHARE_SHIFT) as u32
}

fn with_share(share: u32) -> u64 {
    (share.min(SHARE_MAX) as u64) << SHARE_SHIFT
}

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
    /// Takes of a limited word the engine has not counted yet (see [`FastLock::reclaim`]).
    pub takes: u32,
}

/// One lock's fast-path word.
#[derive(Debug, Default)]
pub struct FastLock {
    word: AtomicU64,
    /// Acquisitions through the fast path (statistics). Only the thread that just took the
    /// lock writes it, so a plain load and store count it: no locked instruction.
    taken: AtomicU64,
    /// The share of the limited word as the engine last counted it: what it published, less
    /// the takes it counted since. Only the engine reads and writes it, under its state lock.
    counted_share: AtomicU32,
}

impl FastLock {
    pub fn new() -> Self {
        Self::default()
    }

    /// Application thread: takes the lock if it is idle (and, while a remote node waits, if
    /// the local share allows one more take). One CAS.
    pub fn try_take(&self, waiter: Waiter) -> bool {
        let cur = self.word.load(Ordering::Relaxed);
        if cur & STATE != IDLE || waiter > WAITER_MAX {
            return false;
        }
        let next = if cur & LIMITED != 0 {
            // A published limited word allows at least one take (see `try_give_back`).
            let share = share_of(cur);
            if share == 0 {
                return false;
            }
            HELD | LIMITED | (waiter << WAITER_SHIFT) | with_share(share - 1)
        } else {
            HELD | (waiter << WAITER_SHIFT)
        };
        self.word
            .compare_exchange(cur, next, Ordering::Acquire, Ordering::Relaxed)
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
    /// engine wants it or converted it, or the take used the last of a remote waiter's share
    /// (then the release must go through the engine, which passes the token on). One CAS.
    pub fn try_give_back(&self, waiter: Waiter) -> bool {
        let cur = self.word.load(Ordering::Relaxed);
        if cur & (STATE | WANTED | CONVERTED) != HELD || waiter_of(cur) != waiter {
            return false;
        }
        let next = if cur & LIMITED != 0 {
            let share = share_of(cur);
            if share == 0 {
                return false;
            }
            IDLE | LIMITED | with_share(share)
        } else {
            IDLE
        };
        self.word
            .compare_exchange(cur, next, Ordering::Release, Ordering::Relaxed)
            .is_ok()
    }

    /// Engine (state lock held): the token became idle here, wanted by nobody; threads may
    /// take it.
    pub fn publish(&self) {
        let _ = self
            .word
            .compare_exchange(SLOW, IDLE, Ordering::Release, Ordering::Relaxed);
    }

    /// Engine (state lock held): the token is here and free while a remote node waits, and
    /// the local threads may take it `share` more times (at least 1) before it moves on.
    pub fn publish_limited(&self, share: u32) {
        let share = share.min(SHARE_MAX);
        if share == 0 {
            return;
        }
        if self
            .word
            .compare_exchange(
                SLOW,
                IDLE | LIMITED | with_share(share),
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            self.counted_share.store(share, Ordering::Relaxed);
        }
    }

    /// Takes of a limited word not counted yet, given its current share; counts them.
    fn count_takes(&self, cur: u64) -> u32 {
        if cur & LIMITED == 0 {
            return 0;
        }
        let left = share_of(cur);
        let counted = self.counted_share.swap(left, Ordering::Relaxed);
        counted.saturating_sub(left)
    }

    /// Engine (state lock held): takes the lock's state back before changing it. Also returns
    /// the takes of a limited word since the engine last counted them (local hand-offs while
    /// a remote node waited).
    pub fn reclaim(&self) -> (Reclaimed, u32) {
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            let next = match cur & STATE {
                IDLE => SLOW,
                HELD if cur & WANTED != 0 => return (Reclaimed::Adopted, self.count_takes(cur)),
                HELD => cur | WANTED,
                _ => return (Reclaimed::Engine, 0),
            };
            match self
                .word
                .compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) if next == SLOW => return (Reclaimed::Engine, self.count_takes(cur)),
                Ok(_) => return (Reclaimed::Holder(waiter_of(cur)), self.count_takes(cur)),
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
        if cur & STATE != HELD || waiter_of(cur) != waiter {
            return None;
        }
        self.word.store(SLOW, Ordering::Release);
        Some(TakenBack {
            adopt: cur & WANTED == 0,
            acquire_hooks: cur & CONVERTED == 0,
            takes: self.count_takes(cur),
        })
    }

    /// Whether a thread holds the lock through the fast path.
    pub fn fast_held(&self) -> bool {
        self.word.load(Ordering::Acquire) & STATE == HELD
    }

    /// Whether the engine owns the lock's state (nothing published, nobody holds it fast).
    pub fn is_slow(&self) -> bool {
        self.word.load(Ordering::Acquire) & STATE == SLOW
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
        assert_eq!(f.reclaim(), (Reclaimed::Engine, 0));
        assert!(f.is_slow());
        assert!(!f.try_take(1));
        // Held: the engine adopts the holder; its release must go slow.
        f.publish();
        assert!(f.try_take(3));
        assert_eq!(f.reclaim(), (Reclaimed::Holder(3), 0));
        assert_eq!(f.reclaim(), (Reclaimed::Adopted, 0));
        assert!(!f.try_give_back(3));
        assert_eq!(f.take_back(4), None);
        assert_eq!(
            f.take_back(3),
            Some(TakenBack {
                adopt: false,
                acquire_hooks: true,
                takes: 0,
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
                acquire_hooks: false,
                takes: 0,
            })
        );
        // A waiter id beyond the word's field goes slow.
        f.publish();
        assert!(!f.try_take(WAITER_MAX + 1));
        assert!(f.try_take(WAITER_MAX));
        assert!(f.try_give_back(WAITER_MAX));
    }

    #[test]
    fn a_limited_word_allows_its_share_and_counts_every_take_once() {
        let f = FastLock::new();
        f.publish_limited(0);
        assert!(f.is_slow(), "a share of nothing is not published");
        f.publish_limited(3);
        // Two takes that give back fast.
        assert!(f.try_take(1));
        assert!(f.try_give_back(1));
        assert!(f.try_take(2));
        assert!(f.try_give_back(2));
        // The engine looks: two takes, and the word is its own again.
        assert_eq!(f.reclaim(), (Reclaimed::Engine, 2));
        assert_eq!(f.reclaim(), (Reclaimed::Engine, 0));
        f.publish_limited(2);
        assert!(f.try_take(1));
        assert!(f.try_give_back(1));
        // The last take of the share: its release must go through the engine.
        assert!(f.try_take(1));
        assert!(!f.try_give_back(1));
        assert!(!f.try_take(2), "held");
        assert_eq!(
            f.take_back(1),
            Some(TakenBack {
                adopt: true,
                acquire_hooks: true,
                takes: 2,
            })
        );
        assert!(f.is_slow());
        // Adopted while held: the take is counted at the adoption, not again at the release.
        f.publish_limited(5);
        assert!(f.try_take(7));
        assert_eq!(f.reclaim(), (Reclaimed::Holder(7), 1));
        assert_eq!(f.reclaim(), (Reclaimed::Adopted, 0));
        assert!(!f.try_give_back(7));
        assert_eq!(
            f.take_back(7),
            Some(TakenBack {
                adopt: false,
                acquire_hooks: true,
                takes: 0,
            })
        );
        // An unlimited publish after a limited one counts nothing.
        f.publish();
        assert!(f.try_take(1));
        assert!(f.try_give_back(1));
        assert_eq!(f.reclaim(), (Reclaimed::Engine, 0));
    }

    #[test]
    fn threads_racing_for_a_limited_word_take_it_exactly_its_share() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let f = Arc::new(FastLock::new());
        let done = Arc::new(AtomicBool::new(false));
        f.publish_limited(1000);
        let takes: Vec<(u64, bool)> = (1..=4u64)
            .map(|w| {
                let (f, done) = (f.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut n = 0;
                    while !done.load(Ordering::Acquire) {
                        if f.try_take(w) {
                            n += 1;
                            if !f.try_give_back(w) {
                                // The share's last take: its release is the engine's.
                                done.store(true, Ordering::Release);
                                return (n, true);
                            }
                        }
                        std::hint::spin_loop();
                    }
                    (n, false)
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect();
        assert_eq!(takes.iter().map(|t| t.0).sum::<u64>(), 1000);
        assert_eq!(takes.iter().filter(|t| t.1).count(), 1);
        let last = (1..=4)
            .find(|&w| takes[w as usize - 1].1)
            .expect("a last taker");
        let tb = f.take_back(last).expect("the last taker holds the word");
        assert_eq!(tb.takes, 1000);
    }
}
