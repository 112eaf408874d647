//! Futex wait/wake on an `AtomicU32`: the sleeping half of every spin-then-sleep wait, and the
//! only blocking primitive a signal handler may use.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Sleeps while `*word == expected`, for at most `timeout` (None = no limit). Returns on wake,
/// timeout, signal or value change; callers re-check their condition.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT_PRIVATE reads the aligned u32 behind `word`, which outlives the call;
    // `tsp` is null or points to a live timespec. The syscall is async-signal-safe.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            tsp,
        );
    }
}

/// Wakes up to `n` threads sleeping on `word`.
pub fn wake(word: &AtomicU32, n: i32) {
    // SAFETY: FUTEX_WAKE_PRIVATE only uses the address as a key; no memory is accessed.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        );
    }
}

/// Spins briefly, then sleeps, until `cond(word.load())` holds or the deadline passes. Returns
/// false on timeout.
pub fn wait_until(
    word: &AtomicU32,
    mut cond: impl FnMut(u32) -> bool,
    deadline: Option<std::time::Instant>,
) -> bool {
    for i in 0..SPINS {
        if cond(word.load(Ordering::Acquire)) {
            return true;
        }
        if i % 64 == 63 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
    loop {
        let v = word.load(Ordering::Acquire);
        if cond(v) {
            return true;
        }
        let timeout = match deadline {
            Some(d) => {
                let now = std::time::Instant::now();
                if now >= d {
                    return false;
                }
                Some((d - now).min(Duration::from_millis(500)))
            }
            None => Some(Duration::from_millis(500)),
        };
        wait(word, v, timeout);
    }
}

/// Iterations of the spin phase before sleeping (a few microseconds: on an oversubscribed
/// 2-core machine, longer spins only steal time from the thread we wait for).
pub const SPINS: u32 = 256;
