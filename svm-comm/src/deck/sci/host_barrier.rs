//! Barriers in shared memory, for jobs whose nodes all run on this host over DECK-SCI: the
//! slots live in the header page of node 0's segment, which every node maps. An arrival is one
//! compare-and-swap on the slot's state word; the last arrival of an episode advances the
//! slot's generation and wakes the sleepers with one futex call, like a barrier of threads in
//! one process (`pthread_barrier_wait`). No engine thread and no message is involved, which is
//! what a barrier of 4 processes on 2 cores needs: every message delay there costs two wake-ups
//! (the peer's engine, then the application thread it completes).
//!
//! What it does not do: carry write notices. A caller with something to hand over arrives
//! *slow*; every participant of that episode then learns so when it leaves and goes through
//! the message barrier as well (the DSM engine's, with the notices) — see
//! `svm-core/src/node/sync_ops.rs`.
//!
//! Slot layout (64 bytes; [`SLOTS`] slots from [`AREA`] in the header page):
//! - `+0` u64: the barrier's id, valid once the tag at `+28` says so;
//! - `+8` u64: the state: generation (high 32 bits), participant count of the episode (16
//!   bits), arrivals so far (low 16 bits) — one word, so an arrival, the count check and the
//!   completion are one atomic step;
//! - `+16` u32: the generation again, as the futex word sleepers wait on;
//! - `+20`, `+24` u32: the slow flags of even and odd generations (generation + 1 when some
//!   arrival of that episode was slow). Two, so the arrivals of the next episode cannot
//!   overwrite the flag before the slowest leaver of this one has read it: the next episode
//!   cannot complete (and so the one after cannot start) before every participant of this one
//!   has arrived again;
//! - `+28` u32: the slot's tag: 0 free, 1 being claimed (the id is being written), 2 claimed.
//!   A slot is claimed once and never given back.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Release, SeqCst};
use std::sync::Arc;
use std::time::Duration;

use super::shm::{futex_wait, futex_wake, Segment};

/// First byte of the slots in the header page (the header fields end well before).
const AREA: usize = 1024;
/// Slot size.
const SLOT_LEN: usize = 64;
/// Slots: distinct barrier ids a job can run here (more fall back to the message barrier).
pub const SLOTS: usize = (super::HDR_LEN - AREA) / SLOT_LEN;
/// Largest participant count of one episode (16 bits of the state word).
pub const MAX_COUNT: u32 = u16::MAX as u32;

const S_ID: usize = 0;
const S_STATE: usize = 8;
const S_GEN: usize = 16;
const S_SLOW: usize = 20;
const S_TAG: usize = 28;
const TAG_CLAIMING: u32 = 1;
const TAG_CLAIMED: u32 = 2;

/// How one arrival went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Every participant arrived; `slow`: some arrival of the episode was slow.
    Done { slow: bool },
    /// The episode under way counts `expected` participants, not the caller's count (the
    /// caller did not arrive).
    Mismatch { expected: u32 },
    /// No slot for this id (all taken, or a count this barrier cannot hold): the caller uses
    /// the message barrier. Every participant gets the same answer for the same id and count.
    NoSlot,
    /// `keep_waiting` said stop before the episode completed (the caller did arrive).
    Abandoned,
}

/// The barrier slots of a job, in node 0's DECK-SCI segment.
#[derive(Clone)]
pub struct HostBarrier {
    seg: Arc<Segment>,
}

impl std::fmt::Debug for HostBarrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostBarrier")
    }
}

fn pack(gen: u32, count: u32, arrived: u32) -> u64 {
    ((gen as u64) << 32) | ((count as u64) << 16) | arrived as u64
}

fn unpack(s: u64) -> (u32, u32, u32) {
    (
        (s >> 32) as u32,
        ((s >> 16) & 0xffff) as u32,
        (s & 0xffff) as u32,
    )
}

impl HostBarrier {
    /// The slots of node 0's segment `seg` (every node of the job passes the same segment).
    pub(super) fn new(seg: Arc<Segment>) -> HostBarrier {
        HostBarrier { seg }
    }

    /// Slots in a new file `path` (created, must not exist; remove it when done): for
    /// barriers between threads or processes that are not a DECK-SCI mesh (tests).
    pub fn in_new_file(path: &std::path::Path) -> std::io::Result<HostBarrier> {
        Ok(HostBarrier::new(Arc::new(Segment::create(
            path,
            super::HDR_LEN,
        )?)))
    }

    /// The episode under way at barrier `id`: (participant count, arrivals so far); None if
    /// the barrier has no slot. For diagnostics: the answer is stale as soon as it is given.
    pub fn arrivals(&self, id: u64) -> Option<(u32, u32)> {
        (0..SLOTS).find_map(|i| {
            let off = AREA + i * SLOT_LEN;
            let claimed = self.seg.u32_at(off + S_TAG).load(Acquire) == TAG_CLAIMED
                && self.seg.u64_at(off + S_ID).load(Acquire) == id;
            claimed.then(|| {
                let (_, count, arrived) = unpack(self.seg.u64_at(off + S_STATE).load(Acquire));
                (count, arrived)
            })
        })
    }

    /// The slot of barrier `id`: found, or claimed if free. Ids hash to a start slot and probe
    /// linearly; slots are never freed, so once the table is full it stays so and every node
    /// sees the same answer.
    fn slot(&self, id: u64) -> Option<usize> {
        let start = (id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize % SLOTS;
        for i in 0..SLOTS {
            let off = AREA + ((start + i) % SLOTS) * SLOT_LEN;
            let tag = self.seg.u32_at(off + S_TAG);
            let id_word = self.seg.u64_at(off + S_ID);
            match tag.compare_exchange(0, TAG_CLAIMING, AcqRel, Acquire) {
                Ok(_) => {
                    id_word.store(id, Release);
                    tag.store(TAG_CLAIMED, Release);
                    return Some(off);
                }
                Err(_) => {
                    // Another arrival is writing the id: a few instructions away.
                    while tag.load(Acquire) == TAG_CLAIMING {
                        std::hint::spin_loop();
                    }
                    if id_word.load(Acquire) == id {
                        return Some(off);
                    }
                }
            }
        }
        None
    }

    /// Arrives at barrier `id` of `count` participants (threads, over all nodes) and waits
    /// until all have arrived. `slow`: this arrival has something the shared-memory barrier
    /// cannot carry (see the module). `keep_waiting` is asked about every `nap` while the
    /// episode is not complete; false abandons the wait.
    pub fn wait(
        &self,
        id: u64,
        count: u32,
        slow: bool,
        nap: Duration,
        mut keep_waiting: impl FnMut() -> bool,
    ) -> Arrival {
        if count == 0 || count > MAX_COUNT {
            return Arrival::NoSlot;
        }
        let Some(off) = self.slot(id) else {
            return Arrival::NoSlot;
        };
        let state = self.seg.u64_at(off + S_STATE);
        let gen_word = self.seg.u32_at(off + S_GEN);
        let mut cur = state.load(Acquire);
        let gen = loop {
            let (gen, c, arrived) = unpack(cur);
            if arrived > 0 && c != count {
                return Arrival::Mismatch { expected: c };
            }
            if slow {
                // Before the arrival counts: whoever sees the episode complete sees the flag.
                self.seg
                    .u32_at(off + S_SLOW + 4 * (gen as usize & 1))
                    .store(gen.wrapping_add(1), SeqCst);
            }
            let next = if arrived + 1 == count {
                pack(gen.wrapping_add(1), 0, 0)
            } else {
                pack(gen, count, arrived + 1)
            };
            match state.compare_exchange(cur, next, SeqCst, Acquire) {
                Ok(_) => {
                    if arrived + 1 == count {
                        gen_word.store(gen.wrapping_add(1), SeqCst);
                        futex_wake(gen_word);
                    }
                    break gen;
                }
                Err(now) => cur = now,
            }
        };
        while unpack(state.load(Acquire)).0 == gen {
            if !keep_waiting() {
                return Arrival::Abandoned;
            }
            futex_wait(gen_word, gen, nap);
        }
        let flag = self.seg.u32_at(off + S_SLOW + 4 * (gen as usize & 1));
        Arrival::Done {
            slow: flag.load(SeqCst) == gen.wrapping_add(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn barrier(name: &str) -> (HostBarrier, std::path::PathBuf) {
        let path =
            std::env::temp_dir().join(format!("svm-host-barrier-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        (HostBarrier::in_new_file(&path).expect("segment"), path)
    }

    #[test]
    fn threads_leave_together_episode_after_episode_and_see_a_slow_arrival() {
        let (b, path) = barrier("episodes");
        const N: u32 = 4;
        const ROUNDS: u32 = 200;
        let phase = AtomicU32::new(0);
        std::thread::scope(|s| {
            for t in 0..N {
                let (b, phase) = (b.clone(), &phase);
                s.spawn(move || {
                    for r in 0..ROUNDS {
                        // Nobody may leave episode r before everyone has reached it.
                        phase.fetch_add(1, Ordering::SeqCst);
                        let slow = r % 7 == 3 && t == r % N;
                        let got = b.wait(9, N, slow, Duration::from_millis(50), || true);
                        assert_eq!(got, Arrival::Done { slow: r % 7 == 3 }, "round {r}");
                        assert!(phase.load(Ordering::SeqCst) >= (r + 1) * N, "round {r}");
                    }
                });
            }
        });
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_different_count_is_refused_without_arriving_and_the_episode_still_completes() {
        let (b, path) = barrier("mismatch");
        std::thread::scope(|s| {
            let b1 = b.clone();
            let first = s.spawn(move || b1.wait(3, 2, false, Duration::from_millis(20), || true));
            // Wait until the first arrival is counted.
            while b.arrivals(3) != Some((2, 1)) {
                std::thread::yield_now();
            }
            assert_eq!(
                b.wait(3, 5, false, Duration::from_millis(20), || true),
                Arrival::Mismatch { expected: 2 }
            );
            assert_eq!(
                b.wait(3, 2, false, Duration::from_millis(20), || true),
                Arrival::Done { slow: false }
            );
            assert_eq!(first.join().unwrap(), Arrival::Done { slow: false });
        });
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_wait_can_be_abandoned_and_ids_beyond_the_slots_fall_back() {
        let (b, path) = barrier("slots");
        // Any id, the global barrier's u64::MAX and 0 included.
        assert_eq!(
            b.wait(u64::MAX, 1, false, Duration::from_millis(5), || true),
            Arrival::Done { slow: false }
        );
        assert_eq!(
            b.wait(0, 1, false, Duration::from_millis(5), || true),
            Arrival::Done { slow: false }
        );
        let mut asked = 0;
        let got = b.wait(1, 2, false, Duration::from_millis(5), || {
            asked += 1;
            asked < 3
        });
        assert_eq!(got, Arrival::Abandoned);
        for id in 100..100 + SLOTS as u64 - 3 {
            assert!(b.slot(id).is_some());
        }
        // Every slot is taken now (id 1 has one): a new id gets none, an old one keeps its own.
        assert_eq!(
            b.wait(5000, 1, false, Duration::from_millis(5), || true),
            Arrival::NoSlot
        );
        assert_eq!(b.slot(100), b.slot(100));
        assert!(b.slot(100).is_some());
        assert_eq!(
            b.wait(100, 0, false, Duration::from_millis(5), || true),
            Arrival::NoSlot
        );
        let _ = std::fs::remove_file(path);
    }
}
