//! DECK threads and local semaphores: thin wrappers over `std` (pthread semantics).

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Starts a detached thread (DECK's default); the handle may be ignored.
pub fn spawn<F: FnOnce() + Send + 'static>(f: F) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("deck-thread".into())
        .spawn(f)
}

/// Sleeps the calling thread.
pub fn sleep(d: Duration) {
    std::thread::sleep(d)
}

/// Gives the processor to another thread.
pub fn yield_now() {
    std::thread::yield_now()
}

/// The calling thread's id.
pub fn self_id() -> std::thread::ThreadId {
    std::thread::current().id()
}

/// A counting semaphore local to this process (DECK semaphores are never remote).
#[derive(Debug, Default)]
pub struct Semaphore {
    count: Mutex<u64>,
    cv: Condvar,
}

impl Semaphore {
    pub fn new(initial: u64) -> Semaphore {
        Semaphore {
            count: Mutex::new(initial),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, u64> {
        self.count.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn post(&self) {
        *self.lock() += 1;
        self.cv.notify_one();
    }

    pub fn wait(&self) {
        let mut c = self.lock();
        while *c == 0 {
            c = self.cv.wait(c).unwrap_or_else(|p| p.into_inner());
        }
        *c -= 1;
    }

    /// Takes a unit if one is available, without waiting.
    pub fn try_wait(&self) -> bool {
        let mut c = self.lock();
        if *c == 0 {
            return false;
        }
        *c -= 1;
        true
    }

    /// Waits at most `timeout`; `false` on timeout.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut c = self.lock();
        while *c == 0 {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            c = self
                .cv
                .wait_timeout(c, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *c -= 1;
        true
    }

    pub fn value(&self) -> u64 {
        *self.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn semaphore_counts_and_wakes() {
        let s = Arc::new(Semaphore::new(1));
        assert!(s.try_wait());
        assert!(!s.try_wait());
        assert!(!s.wait_timeout(Duration::from_millis(10)));
        let s2 = s.clone();
        let h = spawn(move || {
            for _ in 0..100 {
                s2.post();
            }
        })
        .unwrap();
        for _ in 0..100 {
            assert!(s.wait_timeout(Duration::from_secs(10)));
        }
        h.join().unwrap();
        assert_eq!(s.value(), 0);
    }
}
