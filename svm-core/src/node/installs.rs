//! The page each application thread was last woken for, and whether it has run since the
//! engine looked (`Context::install_unused`).
//!
//! The engine reads the thread's CPU clock right after the wake-up, in the step that installed
//! the page. Usually the thread has not run by then (it shares its CPU with the engine, or
//! waits for one), and the page stays until it has: given away earlier, it would make the
//! thread fault again without having used it. A thread that did run first (it preempted the
//! engine at its wake-up, used the page and blocked again, in the release after an SMI copy,
//! say) keeps the page until its next run, at most [`UNUSED_INSTALL_MAX_NS`]: that extension
//! is what lets the writers of MP-MPICH's `strided` make several copies per page. Measured the
//! other way, reading the clock before the installation (so that only a thread that never ran
//! keeps its page): `strided` at 4 nodes on 2 CPUs 3.7–25 s with 86,000–917,000 remote faults
//! and 4–13 requests kept, against 1.2–1.7 s, 35,000–49,000 and 240–540 as built.

use crate::sys::sched::thread_cpu_ns;
use crate::PageId;

/// How long after its installation a page counts as unused while its thread has not run
/// (ns). A thread woken on a CPU that other nodes' threads keep busy may wait a scheduler
/// slice or two (1.4 ms here) before it runs; beyond that the page goes anyway, so no
/// request waits on a thread that does not run for a long time.
const UNUSED_INSTALL_MAX_NS: u64 = 3_000_000;

#[derive(Debug, Clone, Copy)]
struct Install {
    tid: u32,
    page: PageId,
    /// The thread's CPU time when the engine read it, right after the wake-up.
    cpu_ns: u64,
    /// When it was woken (ns, as `EngineState::now`).
    at_ns: u64,
}

/// The last page each thread was woken for, while that is recent (a handful of entries: one
/// per application thread at most).
#[derive(Debug, Default)]
pub(super) struct Installs {
    last: Vec<Install>,
}

impl Installs {
    /// Thread `tid` (0: unknown, not tracked) was woken at `now`, just before, because `page`
    /// became accessible: its clock is read now (see the module's comment for why after the
    /// wake-up).
    pub(super) fn woke(&mut self, tid: u32, page: PageId, now: u64) {
        self.last
            .retain(|i| i.tid != tid && now.saturating_sub(i.at_ns) < UNUSED_INSTALL_MAX_NS);
        if tid == 0 {
            return;
        }
        // A thread that is gone has no clock: nothing to wait for.
        if let Some(cpu_ns) = thread_cpu_ns(tid) {
            self.last.push(Install {
                tid,
                page,
                cpu_ns,
                at_ns: now,
            });
        }
    }

    /// Whether a thread was woken for `page` less than [`UNUSED_INSTALL_MAX_NS`] before
    /// `now` and has not run since its clock was read (the clock has not moved; a thread that
    /// is gone has no clock and keeps nothing).
    pub(super) fn unused(&self, page: PageId, now: u64) -> bool {
        self.last.iter().any(|i| {
            i.page == page
                && now.saturating_sub(i.at_ns) < UNUSED_INSTALL_MAX_NS
                && thread_cpu_ns(i.tid) == Some(i.cpu_ns)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::sched::ParkedThread;

    #[test]
    fn a_page_is_unused_until_its_thread_runs_or_the_bound_passes() {
        let t = ParkedThread::start();
        let tid = t.tid;
        let mut installs = Installs::default();
        installs.woke(tid, 7, 1_000);
        installs.woke(0, 8, 1_000);
        assert!(installs.unused(7, 2_000), "its thread has not run");
        assert!(
            !installs.unused(8, 2_000),
            "no known thread waits for page 8"
        );
        assert!(
            !installs.unused(9, 2_000),
            "nothing was installed for page 9"
        );
        assert!(
            !installs.unused(7, 1_000 + UNUSED_INSTALL_MAX_NS),
            "the bound has passed"
        );
        t.run_once();
        assert!(!installs.unused(7, 2_000), "its thread has run");
        // A later wake of the same thread replaces its entry.
        installs.woke(tid, 9, 3_000);
        assert!(!installs.unused(7, 3_000));
        drop(t);
        // The thread is gone: nothing waits for its page.
        assert!(!installs.unused(9, 4_000));
    }
}
