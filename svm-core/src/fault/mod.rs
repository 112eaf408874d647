//! Catching accesses to the shared window: the `FaultBackend` trait and its two implementations,
//! userfaultfd (`uffd.rs`) and SIGSEGV + mprotect (`segv.rs`).

pub mod segv;
pub mod uffd;

use std::os::fd::RawFd;

use crate::sys::SysError;
use crate::Access;

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
    fn read(&self, addr: usize, dst: &mut [u8], present: bool, initial: Option<&[u8]>);
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
    /// Shutdown, after the engine stopped: the managed memory becomes ordinary private memory
    /// of this process (what it holds locally stays; pages it never held read as zeros or,
    /// for segv, as whatever the memfd holds), so code that runs after the job — exit
    /// handlers, destructors writing the program's globals — never waits for a fault.
    fn shutdown(&self);
}
