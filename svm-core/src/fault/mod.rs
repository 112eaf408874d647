//! Catching accesses to the shared window: the `FaultBackend` trait and its two implementations,
//! userfaultfd (`uffd.rs`) and SIGSEGV + mprotect (`segv.rs`); and an in-memory backend
//! (`mem.rs`) that runs the engine without a window (engine tests).

pub mod mem;
pub mod segv;
pub mod uffd;

use std::os::fd::RawFd;

use crate::sys::SysError;
use crate::Access;

/// Recognises a sequential first-touch fill from the blank runs a backend makes writable
/// (fault-around): a run that starts where an earlier one ended means a thread is walking the
/// memory in order and will write every page of the new run too. Such runs are worth backing
/// with real memory at once (one call for the run instead of one kernel fault per page when
/// each page is first written; the userfaultfd backend does so with `UFFDIO_COPY`, the segv
/// backend on anonymous memory with `MADV_POPULATE_WRITE` — on a memfd the page allocation
/// itself, not the trap, is the cost, and populating measured no gain); any other run stays
/// lazily allocated, so a program that
/// touches a large allocation sparsely keeps its memory use to the pages it writes (plus at
/// most one run ahead per walking thread).
#[derive(Debug, Default)]
pub struct SequentialFill {
    /// End addresses of the most recent runs (one per walking thread, round robin).
    ends: std::sync::Mutex<([usize; SequentialFill::TRACKED], usize)>,
}

impl SequentialFill {
    /// Walks followed at once (threads of a node filling their own parts).
    const TRACKED: usize = 8;

    /// Notes the blank run `addr..addr + len`; true if it continues an earlier run: starts at
    /// its end or one page (`page` bytes) after it — the faulting page itself has a waiter and
    /// is raised on its own, just before the run around it.
    pub fn continues(&self, addr: usize, len: usize, page: usize) -> bool {
        // Only the engine thread calls this (never a signal handler): a mutex is fine.
        let mut g = self
            .ends
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (ends, next) = &mut *g;
        let end = addr + len;
        if let Some(e) = ends
            .iter_mut()
            .find(|e| **e != 0 && (**e == addr || **e + page == addr))
        {
            *e = end;
            return true;
        }
        ends[*next] = end;
        *next = (*next + 1) % Self::TRACKED;
        false
    }
}

/// How to wake the thread behind a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaiterRef {
    /// A SIGSEGV handler sleeping on fault slot `n`.
    Slot(usize),
    /// A thread blocked by the kernel in a userfaultfd fault on the page.
    Uffd,
}

/// One access the application could not make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub addr: usize,
    pub write: bool,
    pub waiter: WaiterRef,
    /// Monotonic ns when the fault was first seen by the runtime.
    pub since_ns: u64,
    /// Linux thread id of the faulting thread (0 when the backend cannot tell); the trace puts
    /// the fault on that thread's track.
    pub tid: u32,
}

/// A fault backend. All methods are called by the engine with page-aligned coherence pages.
pub trait FaultBackend: Send + Sync {
    fn name(&self) -> &'static str;
    /// Readable when faults are pending (registered with the engine's epoll). May be the
    /// engine's own eventfd.
    fn poll_fd(&self) -> RawFd;
    /// Moves pending faults into `out`.
    fn take_faults(&self, out: &mut Vec<Fault>) -> Result<(), SysError>;
    /// Changes the protection of a page from `old` to `new`; `present` says whether it has local
    /// contents. A page that is not present is materialized from `initial` (a static page's
    /// contents at take-over) or as zeros. Returns the new `present`. Raising access wakes
    /// threads faulting on the page.
    fn set_access(
        &self,
        addr: usize,
        len: usize,
        old: Access,
        new: Access,
        present: bool,
        initial: Option<&[u8]>,
    ) -> Result<bool, SysError>;
    /// Installs `data` as the page's contents with protection `access` (Read or Write); wakes
    /// threads faulting on it. Returns the new `present`.
    fn install(
        &self,
        addr: usize,
        data: &[u8],
        access: Access,
        present: bool,
    ) -> Result<bool, SysError>;
    /// Copies the page's local contents into `dst` (if not present: `initial`, else zeros).
    fn read(
        &self,
        addr: usize,
        dst: &mut [u8],
        present: bool,
        initial: Option<&[u8]>,
    ) -> Result<(), SysError>;
    /// Writes `runs` (byte offset, bytes) into a page's local contents without changing its
    /// protection (a diff applied at a home). Returns false if the page has no local contents
    /// the backend can patch (the engine then keeps the patched contents itself).
    fn patch(
        &self,
        addr: usize,
        len: usize,
        access: Access,
        present: bool,
        runs: &[(usize, &[u8])],
    ) -> Result<bool, SysError>;
    /// Forgets the local contents of `[addr, addr+len)` (a destroyed region): the range becomes
    /// inaccessible and not present, and its memory goes back to the system (uffd:
    /// `MADV_DONTNEED`; segv: `PROT_NONE` and a hole punched in the memfd), so a region later
    /// allocated there starts as zeros.
    fn drop_range(&self, addr: usize, len: usize) -> Result<(), SysError>;
    /// Wakes one waiting thread whose access is already possible.
    fn wake(&self, addr: usize, len: usize, waiter: WaiterRef) -> Result<(), SysError>;
    /// From now on, finds the writes to `[addr, addr+len)` by scanning instead of by faults:
    /// a write to a page made read-only there goes through without a fault, and
    /// [`FaultBackend::take_written`] reports the page. The range's present contents are
    /// dropped (every page starts missing). Returns false, and changes nothing, where the
    /// backend cannot (the segv backend, a kernel before Linux 6.7, `SVM_WRITE_SCAN=0`) or
    /// the range overlaps one already scanned.
    fn scan_writes(&self, _addr: usize, _len: usize) -> Result<bool, SysError> {
        Ok(false)
    }
    /// Whether writes at `addr` are found by scanning ([`FaultBackend::scan_writes`]).
    fn writes_scanned(&self, _addr: usize) -> bool {
        false
    }
    /// Appends to `out` the address of every page of `runs` (`(addr, len)`, parts of
    /// scanned ranges; the rest is skipped) written since it was last made read-only, and
    /// makes those pages read-only again, so that the next call reports the writes after this
    /// one. A page left writable counts as written. Only the pages asked about are made
    /// read-only: a page whose writes nobody needs to see stays writable, without even the
    /// kernel's own fault per write.
    fn take_written(
        &self,
        _runs: &[(usize, usize)],
        _out: &mut Vec<usize>,
    ) -> Result<(), SysError> {
        Ok(())
    }
    /// Shutdown, after the engine stopped: the managed memory becomes ordinary private memory
    /// of this process (what it holds locally stays; pages it never held read as zeros or,
    /// for segv, as whatever the memfd holds), so code that runs after the job — exit
    /// handlers, destructors writing the program's globals — never waits for a fault.
    fn shutdown(&self);
}

#[cfg(test)]
mod tests {
    use super::SequentialFill;

    const P: usize = 4096;

    #[test]
    fn a_run_after_an_earlier_one_continues_it() {
        let f = SequentialFill::default();
        assert!(
            !f.continues(0x10000, 7 * P, P),
            "the first run continues nothing"
        );
        // Right at the end, or one page later (the faulting page raised on its own).
        assert!(f.continues(0x10000 + 7 * P, 8 * P, P));
        assert!(f.continues(0x10000 + 16 * P, 16 * P, P));
    }

    #[test]
    fn sparse_and_backward_runs_do_not_continue() {
        let f = SequentialFill::default();
        assert!(!f.continues(0x100000, 7 * P, P));
        assert!(
            !f.continues(0x100000 + 9 * P, 7 * P, P),
            "two pages past the end"
        );
        assert!(!f.continues(0x80000, 7 * P, P), "before the run");
        assert!(
            !f.continues(0x100000 + 256 * P, 7 * P, P),
            "a strided touch"
        );
    }

    #[test]
    fn several_walks_are_followed_at_once() {
        let f = SequentialFill::default();
        let bases: Vec<usize> = (1..=4).map(|i| i * 0x1000_0000).collect();
        for &b in &bases {
            assert!(!f.continues(b, 8 * P, P));
        }
        for &b in &bases {
            assert!(f.continues(b + 9 * P, 8 * P, P), "walk at {b:#x}");
        }
    }
}
