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

/// The life of a fault slot. Transitions (who makes them):
///
/// ```text
/// Free --claim (handler, CAS)--> Claimed --post (handler)--> Posted --take (engine, CAS)--> Taken
///   ^                                                                                         |
///   +------------------- release (handler, after it saw Done) <-- Done <--complete (engine)---+
/// ```
///
/// Only the handler that claimed a slot writes its data and moves it to `Posted` and back to
/// `Free`; only the engine moves it from `Posted` to `Taken` to `Done`. The CASes make the
/// claim and the take exclusive. `tests::handshake_every_interleaving` checks this by running
/// every interleaving of two faulting threads and the engine on one slot.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    Free = 0,
    Claimed = 1,
    Posted = 2,
    Taken = 3,
    Done = 4,
}

impl SlotState {
    const fn word(self) -> u32 {
        self as u32
    }
}

/// One in-flight fault.
pub struct Slot {
    pub state: AtomicU32,
    pub addr: AtomicUsize,
    pub write: AtomicU32,
    /// CLOCK_MONOTONIC nanoseconds when the handler posted the fault.
    pub posted_ns: AtomicU64,
    /// Linux thread id of the faulting thread (for the trace's per-thread tracks).
    pub tid: AtomicU32,
}

#[allow(clippy::declare_interior_mutable_const)]
const SLOT_INIT: Slot = Slot {
    state: AtomicU32::new(SlotState::Free.word()),
    addr: AtomicUsize::new(0),
    write: AtomicU32::new(0),
    posted_ns: AtomicU64::new(0),
    tid: AtomicU32::new(0),
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
    // Acquire: pairs with `install`'s Release stores (end cleared first, so a range being
    // replaced is never seen with a new start and an old end).
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

/// The calling thread's Linux thread id, from a signal handler (a bare system call: no
/// allocation, no lock, nothing cached).
fn gettid_signal_safe() -> u32 {
    nix::unistd::gettid().as_raw() as u32
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
        // Release, end first: a handler running meanwhile sees an empty range rather than a
        // new start with an old end.
        RANGE_END[i].store(0, Ordering::Release);
        RANGE_START[i].store(b, Ordering::Release);
        RANGE_END[i].store(b + s, Ordering::Release);
    }
    // Release: publishes the ranges above to the handler's Acquire load of EVENT_FD.
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
    // Acquire: pairs with `install`'s and `deactivate`'s Release stores.
    EVENT_FD.load(Ordering::Acquire) >= 0
}

/// Stops posting faults (at shutdown): later faults in the window go to the previous handler.
pub fn deactivate() {
    // Release: nothing to publish beyond the value; kept symmetric with `install`.
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
    // Acquire: pairs with `install`'s Release store, after the ranges were published.
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
    // Relaxed: the data is published by the Release store of `Posted` below, and the engine
    // reads it only after its AcqRel CAS from `Posted` has seen that store.
    s.addr.store(addr, Ordering::Relaxed);
    s.write.store(write as u32, Ordering::Relaxed);
    s.posted_ns.store(now_ns(), Ordering::Relaxed);
    s.tid.store(gettid_signal_safe(), Ordering::Relaxed);
    // Release: publishes addr/write/posted_ns/tid to the engine's take.
    s.state.store(SlotState::Posted.word(), Ordering::Release);
    signal_eventfd(fd);
    // Spin briefly, then sleep on the slot until the engine resolves the fault. The engine
    // enforces the deadline (SVM_TIMEOUT) and ends the process with a diagnostic.
    let mut spins = 0u32;
    loop {
        // Acquire: pairs with the engine's Release store of `Done`, so everything the engine
        // did to resolve the fault (the page's contents and protection) happens before the
        // retried access.
        let st = s.state.load(Ordering::Acquire);
        if st == SlotState::Done.word() {
            break;
        }
        if spins < futex::SPINS {
            spins += 1;
            std::hint::spin_loop();
        } else {
            futex::wait(&s.state, st, Some(std::time::Duration::from_millis(200)));
        }
    }
    // Release: our reads of the slot are done before another thread's claim (its AcqRel CAS
    // from `Free`) can reuse it.
    s.state.store(SlotState::Free.word(), Ordering::Release);
    // SAFETY: see above.
    unsafe { *libc::__errno_location() = saved_errno };
}

/// Claims a free slot (lock-free; yields while all are busy).
fn claim() -> usize {
    loop {
        for (i, s) in SLOTS.iter().enumerate() {
            // AcqRel on success: acquires the previous owner's release of the slot; Relaxed on
            // failure: a busy slot tells us nothing we use.
            if s.state
                .compare_exchange(
                    SlotState::Free.word(),
                    SlotState::Claimed.word(),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                // AcqRel: the engine's Acquire load of SLOTS_USED then covers this slot before
                // it can see the slot `Posted` (which is stored after this, in program order).
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
    // Release: the engine's work on the fault (page contents, protection) happens before the
    // handler's Acquire load sees `Done`.
    s.state.store(SlotState::Done.word(), Ordering::Release);
    futex::wake(&s.state, 1);
}

/// Engine side: takes every posted fault, calling `f(slot, addr, write, posted_ns, tid)`.
pub fn take_posted(mut f: impl FnMut(usize, usize, bool, u64, u32)) {
    // Acquire: pairs with the handlers' AcqRel fetch_max (see `claim`).
    let used = SLOTS_USED.load(Ordering::Acquire);
    for (i, s) in SLOTS[..used].iter().enumerate() {
        // AcqRel on success: acquires the handler's Release store of `Posted` (so the Relaxed
        // loads of the data below see what it wrote); Relaxed on failure: nothing to read.
        if s.state
            .compare_exchange(
                SlotState::Posted.word(),
                SlotState::Taken.word(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            f(
                i,
                s.addr.load(Ordering::Relaxed),
                s.write.load(Ordering::Relaxed) != 0,
                s.posted_ns.load(Ordering::Relaxed),
                s.tid.load(Ordering::Relaxed),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    //! An exhaustive interleaving test of the slot handshake: two faulting threads and the
    //! engine on one slot, every atomic step of each an explicit transition, and a depth-first
    //! search over every order in which they can run (sequentially consistent steps; the
    //! orderings are argued in the comments above). Invariants: the engine takes only a posted
    //! fault and reads exactly what its poster wrote; a thread leaves only after its own fault
    //! was completed; at most one thread owns the slot; every schedule ends with both faults
    //! served.
    use super::SlotState::{self, *};

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum H {
        Claim,
        Write,
        Post,
        Wait,
        Release,
        Out,
    }

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    enum E {
        Take,
        Complete,
    }

    #[derive(Clone, PartialEq, Eq, Debug)]
    struct World {
        state: SlotState,
        data: u32,
        handlers: [H; 2],
        /// What each thread's fault was answered with (the data the engine read for it).
        served: [Option<u32>; 2],
        engine: E,
        /// Data the engine read in its current take.
        taken: Option<u32>,
        /// The thread that owns the slot (claimed, not yet released).
        owner: Option<usize>,
    }

    fn step_handler(w: &World, t: usize) -> Option<World> {
        let mut n = w.clone();
        match w.handlers[t] {
            H::Claim => {
                // The CAS Free -> Claimed; a failed CAS is a retry (no state change).
                if w.state != Free {
                    return None;
                }
                assert!(w.owner.is_none(), "slot claimed twice: {w:?}");
                n.state = Claimed;
                n.owner = Some(t);
                n.handlers[t] = H::Write;
            }
            H::Write => {
                n.data = 100 + t as u32;
                n.handlers[t] = H::Post;
            }
            H::Post => {
                n.state = Posted;
                n.handlers[t] = H::Wait;
            }
            H::Wait => {
                if w.state != Done {
                    return None;
                }
                n.handlers[t] = H::Release;
            }
            H::Release => {
                assert_eq!(w.owner, Some(t), "released a slot it does not own: {w:?}");
                n.state = Free;
                n.owner = None;
                n.handlers[t] = H::Out;
            }
            H::Out => return None,
        }
        Some(n)
    }

    fn step_engine(w: &World) -> Option<World> {
        let mut n = w.clone();
        match w.engine {
            E::Take => {
                if w.state != Posted {
                    return None;
                }
                n.state = Taken;
                n.taken = Some(w.data);
                n.engine = E::Complete;
            }
            E::Complete => {
                let owner = w.owner.expect("a taken slot has an owner");
                let got = w.taken.expect("completing without a take");
                assert_eq!(
                    got,
                    100 + owner as u32,
                    "engine read another thread's fault"
                );
                n.served[owner] = Some(got);
                n.state = Done;
                n.taken = None;
                n.engine = E::Take;
            }
        }
        Some(n)
    }

    fn explore(w: &World, seen: &mut std::collections::HashSet<String>, ends: &mut usize) {
        if !seen.insert(format!("{w:?}")) {
            return;
        }
        let mut moved = false;
        for t in 0..2 {
            if let Some(n) = step_handler(w, t) {
                if n.handlers[t] == H::Release {
                    assert_eq!(
                        n.served[t],
                        Some(100 + t as u32),
                        "left before served: {n:?}"
                    );
                }
                moved = true;
                explore(&n, seen, ends);
            }
        }
        if let Some(n) = step_engine(w) {
            moved = true;
            explore(&n, seen, ends);
        }
        if !moved {
            // No step possible: it must be the end, with both faults served.
            assert_eq!(w.handlers, [H::Out, H::Out], "stuck: {w:?}");
            assert_eq!(w.served, [Some(100), Some(101)]);
            assert_eq!(w.state, Free);
            *ends += 1;
        }
    }

    #[test]
    fn handshake_every_interleaving() {
        let start = World {
            state: Free,
            data: 0,
            handlers: [H::Claim, H::Claim],
            served: [None, None],
            engine: E::Take,
            taken: None,
            owner: None,
        };
        let mut seen = std::collections::HashSet::new();
        let mut ends = 0;
        explore(&start, &mut seen, &mut ends);
        assert!(
            ends >= 1 && seen.len() > 20,
            "{} states, {ends} ends",
            seen.len()
        );
    }

    #[test]
    fn states_are_distinct_words() {
        let all = [Free, Claimed, Posted, Taken, Done];
        for (i, a) in all.iter().enumerate() {
            assert_eq!(a.word(), i as u32);
        }
        assert_eq!(
            super::SLOTS[0]
                .state
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
    }
}
