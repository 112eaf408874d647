//! libsvm_splash: the runtime behind `c.m4.svm`, the SPLASH-2 (ANL macro) personality.
//!
//! The C interface is `include/splash_svm.h`. What it does, following `shared/spec/splash.md`:
//! - the executable's writable data segment becomes a shared region homed on the master
//!   (node 0), so every global is shared, fetched page by page on first touch;
//! - the master runs `main`; every other node parks in a worker loop and runs what `CREATE`
//!   ships to it (a function address: every node runs the same binary at the same addresses,
//!   which is checked at start);
//! - `G_MALLOC` is job-wide from any node (under a home-based protocol each page is homed on
//!   the first node that touches it); locks and barriers are named by the address of
//!   their variable (the same on every node), pause flags and condition variables by integer
//!   ids valid on every node;
//! - `exit(status)` anywhere ends the job with that status; `MAIN_END` ends it with 0.
//!
//! No panic crosses the C boundary: every exported function catches it and ends the job.

use std::ffi::{c_char, c_int, c_long, c_ulong, c_void};
use std::sync::atomic::Ordering;
use std::time::Duration;

use svm_core::api::{self, InitOptions, SharedSlice};
use svm_core::sys;
use svm_core::workers::{self, fail, guard, or_fail, Procs};

/// Base of the lock ids guarding pause flags and condition variables (plus the word's address
/// in words: below `OBJECT_ADDR_LIMIT / 8`).
const WORD_LOCKS: u64 = workers::PERSONALITY_IDS;
/// Base of the ids of the locks the program declares (`LOCKDEC`, `ALOCKDEC`, `GSDEC`).
const ADDR_LOCKS: u64 = WORD_LOCKS + OBJECT_ADDR_LIMIT / 8;
/// Base of the ids of the barriers the program declares (`BARDEC`).
const ADDR_BARRIERS: u64 = ADDR_LOCKS + OBJECT_ADDR_LIMIT / 8;
/// Objects are named by addresses below this (x86-64 and AArch64 user space with 4-level
/// paging; the kernel maps nothing above unless a program asks for it with a hint).
const OBJECT_ADDR_LIMIT: u64 = 1 << 47;

fn procs() -> &'static Procs {
    match workers::procs() {
        Some(p) => p,
        None => fail(
            "the SPLASH runtime is not initialised: link with the flags of `svm-config --libs splash` (they wrap main)",
        ),
    }
}

/// Called by the `__wrap_main` stub with the program's `argc`/`argv`, its real `main`, and
/// the bounds of its writable data (`__data_start`, `_end`).
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_splash_main(
    argc: c_int,
    argv: *mut *mut c_char,
    real_main: extern "C" fn(c_int, *mut *mut c_char) -> c_int,
    data_start: *mut c_void,
    data_end: *mut c_void,
) -> c_int {
    let p = guard("starting the SPLASH runtime", || {
        // The program's globals are shared, homed on the master (spec/splash.md, fact 1);
        // programs spin on plain shared flags, so the default protocol is sc-sw (fact 7).
        let opts = InitOptions {
            statics: vec![(data_start as usize, data_end as usize)],
            default_protocol: Some("sc-sw".into()),
        };
        workers::start(svm_protocols::by_name, opts, workers::run_c_fn)
    });
    workers::run_main(p, argc, argv, real_main)
}

#[no_mangle]
pub extern "C" fn svm_splash_initenv() {
    guard("MAIN_INITENV", || {
        procs();
    })
}

#[no_mangle]
pub extern "C" fn svm_splash_main_end() {
    guard("MAIN_END", || {
        let p = procs();
        if p.begin_ending() {
            p.end_job();
        }
        sys::exit_process(0);
    })
}

#[no_mangle]
pub extern "C" fn svm_splash_clock() -> c_ulong {
    guard("CLOCK", || {
        workers::procs()
            .map(|p| p.clock_us())
            .unwrap_or_else(|| sys::segv::now_ns() / 1000) as c_ulong
    })
}

#[no_mangle]
pub extern "C" fn svm_splash_malloc(size: usize) -> *mut c_void {
    guard("G_MALLOC", || {
        procs();
        workers::alloc_shared(size) as *mut c_void
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_splash_free(ptr: *mut c_void) {
    guard("G_FREE", || {
        if !ptr.is_null() {
            // Memory of other nodes (or already freed) is ignored: SPLASH never relies on it.
            let _ = api::free_local_addr(ptr as usize);
        }
    })
}

fn create(f: extern "C" fn()) {
    let p = procs();
    p.dispatch(p.next_target(), f, 0);
}

#[no_mangle]
pub extern "C" fn svm_splash_create(f: extern "C" fn()) {
    guard("CREATE", || create(f))
}

#[no_mangle]
pub extern "C" fn svm_splash_create_n(f: extern "C" fn(), n: c_long) {
    guard("CREATE", || {
        for _ in 1..n.max(1) {
            create(f);
        }
    });
    f();
}

#[no_mangle]
pub extern "C" fn svm_splash_wait_for_end(n: c_long) {
    guard("WAIT_FOR_END", || procs().wait_done(n.max(0) as usize))
}

/// The job-wide id of the lock or barrier whose `LOCKDEC`/`ALOCKDEC`/`BARDEC` variable is at
/// `addr`: `base` plus the address in words. As in the suite's own pthread macros, a lock *is*
/// its variable: `LOCK(x)` passes `&x` and never reads `x`. Reading an id stored in `x` would
/// fetch `x`'s page, which in the suite's programs also holds what the lock guards (a free-list
/// head, a task queue, a counter): under sc-sw every `LOCK` after another node's write there
/// was a read fault before the acquisition, and the holder's next write a fault too. Every node
/// runs the program at the same addresses (checked at start), so the id is the same on all
/// nodes. Two variables of 8 bytes are at least 8 bytes apart, so their ids differ, and
/// consecutive ids spread over the managers (`id % nodes`).
fn object_id(base: u64, addr: *const c_void, what: &str) -> u64 {
    let a = addr as u64;
    if a >= OBJECT_ADDR_LIMIT {
        fail(&format!(
            "{what}: the object at {addr:p} is outside the user address space this runtime names \
             objects in (below {OBJECT_ADDR_LIMIT:#x}); declare it in a global or in G_MALLOC memory"
        ));
    }
    base + a / 8
}

#[no_mangle]
pub extern "C" fn svm_splash_lock_at(lock: *const c_void) {
    guard("LOCK", || {
        or_fail(api::lock_id(object_id(ADDR_LOCKS, lock, "LOCK")))
    })
}

#[no_mangle]
pub extern "C" fn svm_splash_unlock_at(lock: *const c_void) {
    guard("UNLOCK", || {
        or_fail(api::unlock_id(object_id(ADDR_LOCKS, lock, "UNLOCK")))
    })
}

#[no_mangle]
pub extern "C" fn svm_splash_barrier_at(barrier: *const c_void, n: c_long) {
    guard("BARRIER", || {
        let id = object_id(ADDR_BARRIERS, barrier, "BARRIER");
        or_fail(api::Barrier::new(id, n.clamp(1, u32::MAX as c_long) as u32).wait())
    })
}

/// A pause flag or condition variable: one shared word; its address is the object's id and
/// (offset into the runtime's range) the id of the lock that guards it.
fn shared_word_new() -> c_long {
    procs();
    let w = or_fail(api::alloc_local::<u64>(1));
    w.set(0, 0);
    w.addr() as c_long
}

fn word(id: c_long) -> (SharedSlice<u64>, u64) {
    let w = or_fail(SharedSlice::<u64>::from_raw_parts(id as usize, 1));
    (w, WORD_LOCKS + id as u64 / 8)
}

fn locked<T>(lock: u64, f: impl FnOnce() -> T) -> T {
    or_fail(api::lock_id(lock));
    let r = f();
    or_fail(api::unlock_id(lock));
    r
}

/// Polls `cond` under the object's lock with a growing sleep between polls (waits must sleep:
/// nodes oversubscribe the cores).
fn wait_until(lock: u64, mut cond: impl FnMut() -> bool) {
    let mut pause = Duration::from_micros(20);
    loop {
        if locked(lock, &mut cond) {
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(2));
    }
}

#[no_mangle]
pub extern "C" fn svm_splash_pause_new() -> c_long {
    guard("PAUSEINIT", shared_word_new)
}

#[no_mangle]
pub extern "C" fn svm_splash_pause_set(id: c_long) {
    guard("SETPAUSE", || {
        let (w, l) = word(id);
        locked(l, || w.set(0, 1));
    })
}

#[no_mangle]
pub extern "C" fn svm_splash_pause_clear(id: c_long) {
    guard("CLEARPAUSE", || {
        let (w, l) = word(id);
        locked(l, || w.set(0, 0));
    })
}

#[no_mangle]
pub extern "C" fn svm_splash_pause_wait(id: c_long) {
    guard("WAITPAUSE", || {
        let (w, l) = word(id);
        wait_until(l, || w.get(0) != 0);
    })
}

#[no_mangle]
pub extern "C" fn svm_splash_condvar_new() -> c_long {
    guard("CONDVARINIT", shared_word_new)
}

#[no_mangle]
pub extern "C" fn svm_splash_condvar_wait(cv: c_long, lock: *const c_void) {
    guard("CONDVARWAIT", || {
        let lock = object_id(ADDR_LOCKS, lock, "CONDVARWAIT");
        let (w, l) = word(cv);
        // The caller holds `lock`: read the generation before letting signallers in.
        let generation = locked(l, || w.get(0));
        or_fail(api::unlock_id(lock));
        wait_until(l, || w.get(0) != generation);
        or_fail(api::lock_id(lock));
    })
}

fn condvar_bump(cv: c_long) {
    let (w, l) = word(cv);
    locked(l, || w.set(0, w.get(0).wrapping_add(1)));
}

#[no_mangle]
pub extern "C" fn svm_splash_condvar_signal(cv: c_long) {
    // Waking every waiter is a permitted implementation of signal (waits may wake spuriously).
    guard("CONDVARSIGNAL", || condvar_bump(cv))
}

#[no_mangle]
pub extern "C" fn svm_splash_condvar_broadcast(cv: c_long) {
    guard("CONDVARBCAST", || condvar_bump(cv))
}

#[no_mangle]
pub extern "C" fn svm_splash_fence() {
    std::sync::atomic::fence(Ordering::SeqCst);
}

#[no_mangle]
pub extern "C" fn svm_splash_node() -> c_long {
    api::node_id() as c_long
}

#[no_mangle]
pub extern "C" fn svm_splash_nodes() -> c_long {
    api::nodes() as c_long
}
