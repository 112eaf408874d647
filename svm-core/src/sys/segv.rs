//! The SIGSEGV fault backend's signal side.
//!
//! The handler allocates nothing and takes no lock. For an address inside the window it claims a
//! preallocated slot (a CAS), writes the fault there, signals the engine's eventfd (`write(2)`)
//! and sleeps on the slot's futex until the engine marks it done; then it returns and the access
//! is retried. Addresses outside the window go to the handler that was installed before ours.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::{futex, signal_eventfd, SysError};

/// Fault slots: at most this many threads may be inside the handler at once (more wait for a
/// free slot).
pub const MAX_SLOTS: usize = 256;

pub const FREE: u32 = 0;
const CLAIMED: u32 = 1;
pub const POSTED: u32 = 2;
pub const TAKEN: u32 = 3;
pub const DONE: u32 = 4;

/// One in-flight fault.
pub struct Slot {
    pub state: AtomicU32,
    pub addr: AtomicUsize,
    pub write: AtomicU32,
    /// CLOCK_MONOTONIC nanoseconds when the handler posted the fault.
    pub posted_ns: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const SLOT_INIT: Slot = Slot {
    state: AtomicU32::new(FREE),
    addr: AtomicUsize::new(0),
    write: AtomicU32::new(0),
    posted_ns: AtomicU64::new(0),
};

pub static SLOTS: [Slot; MAX_SLOTS] = [SLOT_INIT; MAX_SLOTS];
/// Highest slot index ever claimed + 1 (bounds the engine's scan).
pub static SLOTS_USED: AtomicUsize = AtomicUsize::new(0);

/// Managed ranges `[start, end)` (the window, then static segments); unused entries are 0..0.
pub const MAX_RANGES: usize = 8;
#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicUsize = AtomicUsize::new(0);
static RANGE_START: [AtomicUsize; MAX_RANGES] = [ZERO; MAX_RANGES];
static RANGE_END: [AtomicUsize; MAX_RANGES] = [ZERO; MAX_RANGES];

fn managed(addr: usize) -> bool {
    (0..MAX_RANGES).any(|i| {
        addr >= RANGE_START[i].load(Ordering::Acquire)
            && addr < RANGE_END[i].load(Ordering::Acquire)
    })
}
static EVENT_FD: AtomicI32 = AtomicI32::new(-1);
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// Monotonic clock in nanoseconds (vDSO; async-signal-safe).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the local timespec; it is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Installs the SIGSEGV handler for the managed ranges `(base, size)`; faults are announced on
/// `event_fd`. Idempotent per process (a second call only updates the ranges and fd).
pub fn install(ranges: &[(usize, usize)], event_fd: i32) -> Result<(), SysError> {
    if ranges.len() > MAX_RANGES {
        return Err(SysError::Call {
            call: "install SIGSEGV handler (too many ranges)",
            errno: nix::errno::Errno::E2BIG,
        });
    }
    for i in 0..MAX_RANGES {
        let (b, s) = ranges.get(i).copied().unwrap_or((0, 0));
        RANGE_END[i].store(0, Ordering::Release);
        RANGE_START[i].store(b, Ordering::Release);
        RANGE_END[i].store(b + s, Ordering::Release);
    }
    EVENT_FD.store(event_fd, Ordering::Release);
    if PREVIOUS.get().is_some() {
        return Ok(());
    }
    // SAFETY: sigaction structs are plain data; zeroed is a valid starting value.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler as *const () as usize;
    act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
    // SAFETY: `act.sa_mask` is a valid sigset_t inside our local struct.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    // SAFETY: as above.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: installs a handler that follows the async-signal-safety rules (see `handler`);
    // both structs are live locals.
    if unsafe { libc::sigaction(libc::SIGSEGV, &act, &mut old) } != 0 {
        return Err(SysError::Call {
            call: "sigaction(SIGSEGV)",
            errno: nix::errno::Errno::last(),
        });
    }
    let _ = PREVIOUS.set(old);
    Ok(())
}

/// Whether the handler is currently serving a window (faults are posted to an engine).
pub fn active() -> bool {
    EVENT_FD.load(Ordering::Acquire) >= 0
}

/// Stops posting faults (at shutdown): later faults in the window go to the previous handler.
pub fn deactivate() {
    EVENT_FD.store(-1, Ordering::Release);
}

#[cfg(target_arch = "x86_64")]
fn is_write(ctx: *mut libc::c_void) -> bool {
    // SAFETY: for SA_SIGINFO handlers the kernel passes a valid ucontext_t; on x86_64 bit 1 of
    // the page-fault error code (REG_ERR) is set for writes.
    unsafe {
        let uc = ctx as *const libc::ucontext_t;
        ((*uc).uc_mcontext.gregs[libc::REG_ERR as usize] & 2) != 0
    }
}

#[cfg(target_arch = "aarch64")]
fn is_write(ctx: *mut libc::c_void) -> bool {
    // SAFETY: for SA_SIGINFO handlers the kernel passes a valid ucontext_t whose __reserved area
    // holds context records; the ESR record (magic 0x45535201) carries the fault syndrome, whose
    // WnR bit (6) is set for writes.
    unsafe {
        let uc = ctx as *const libc::ucontext_t;
        let mut p = (*uc).uc_mcontext.__reserved.as_ptr() as *const u8;
        let end = p.add((*uc).uc_mcontext.__reserved.len());
        while p.add(8) <= end {
            let magic = (p as *const u32).read_unaligned();
            let size = (p.add(4) as *const u32).read_unaligned() as usize;
            if magic == 0 || size == 0 {
                break;
            }
            if magic == 0x4553_5201 {
                let esr = (p.add(8) as *const u64).read_unaligned();
                return esr & (1 << 6) != 0;
            }
            p = p.add(size);
        }
        true
    }
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let fd = EVENT_FD.load(Ordering::Acquire);
    if fd < 0 || !managed(addr) {
        chain(sig, info, ctx);
        return;
    }
    // SAFETY: errno is thread-local; we save and restore it so the interrupted code never sees
    // our syscalls' errors.
    let saved_errno = unsafe { *libc::__errno_location() };
    let write = is_write(ctx);
    let slot = claim();
    let s = &SLOTS[slot];
    s.addr.store(addr, Ordering::Relaxed);
    s.write.store(write as u32, Ordering::Relaxed);
    s.posted_ns.store(now_ns(), Ordering::Relaxed);
    s.state.store(POSTED, Ordering::Release);
    signal_eventfd(fd);
    // Spin briefly, then sleep on the slot until the engine resolves the fault. The engine
    // enforces the deadline (SVM_TIMEOUT) and ends the process with a diagnostic.
    let mut spins = 0u32;
    loop {
        let st = s.state.load(Ordering::Acquire);
        if st == DONE {
            break;
        }
        if spins < futex::SPINS {
            spins += 1;
            std::hint::spin_loop();
        } else {
            futex::wait(&s.state, st, Some(std::time::Duration::from_millis(200)));
        }
    }
    s.state.store(FREE, Ordering::Release);
    // SAFETY: see above.
    unsafe { *libc::__errno_location() = saved_errno };
}

/// Claims a free slot (lock-free; yields while all are busy).
fn claim() -> usize {
    loop {
        for (i, s) in SLOTS.iter().enumerate() {
            if s.state
                .compare_exchange(FREE, CLAIMED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                SLOTS_USED.fetch_max(i + 1, Ordering::AcqRel);
                return i;
            }
        }
        // SAFETY: sched_yield has no preconditions and is async-signal-safe.
        unsafe { libc::sched_yield() };
    }
}

/// Passes a fault outside the window to the handler installed before ours.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(prev) = PREVIOUS.get() else {
        restore_default(sig);
        return;
    };
    let h = prev.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // Re-executing the faulting instruction with the default action kills the process
        // with SIGSEGV, as it would have without us.
        restore_default(sig);
    } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with SA_SIGINFO, so it has this signature.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: without SA_SIGINFO the previous handler takes only the signal number.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
}

fn restore_default(sig: libc::c_int) {
    // SAFETY: zeroed sigaction with SIG_DFL is valid; sigaction is async-signal-safe.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &act, std::ptr::null_mut());
    }
}

/// Engine side: marks a slot done and wakes its thread.
pub fn complete(slot: usize) {
    let s = &SLOTS[slot];
    s.state.store(DONE, Ordering::Release);
    futex::wake(&s.state, 1);
}

/// Engine side: takes every posted fault, calling `f(slot, addr, write, posted_ns)`.
pub fn take_posted(mut f: impl FnMut(usize, usize, bool, u64)) {
    let used = SLOTS_USED.load(Ordering::Acquire);
    for (i, s) in SLOTS[..used].iter().enumerate() {
        if s.state
            .compare_exchange(POSTED, TAKEN, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            f(
                i,
                s.addr.load(Ordering::Relaxed),
                s.write.load(Ordering::Relaxed) != 0,
                s.posted_ns.load(Ordering::Relaxed),
            );
        }
    }
}
