//! libsvm_splash: the runtime behind `c.m4.svm`, the SPLASH-2 (ANL macro) personality.
//!
//! The C interface is `include/splash_svm.h`. What it does, following `shared/spec/splash.md`:
//! - the executable's writable data segment becomes a shared region homed on the master
//!   (node 0), so every global is shared, fetched page by page on first touch;
//! - the master runs `main`; every other node parks in a worker loop and runs what `CREATE`
//!   ships to it (a function address: every node runs the same binary at the same addresses,
//!   which is checked at start);
//! - `G_MALLOC` is job-wide from any node; locks, barriers, pause flags and condition
//!   variables are integer ids valid on every node;
//! - `exit(status)` anywhere ends the job with that status; `MAIN_END` ends it with 0.
//!
//! No panic crosses the C boundary: every exported function catches it and ends the job.

use std::ffi::{c_char, c_int, c_long, c_ulong, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use svm_core::api::{self, Home, InitOptions, SharedSlice, Svm};
use svm_core::sys;

/// Exit status used when the runtime itself fails.
const EXIT_RUNTIME: i32 = 70;
/// Task queue entries per node.
const QUEUE: usize = 1024;
/// Queue entry meaning "leave the worker loop".
const STOP: u64 = u64::MAX;
/// Runtime-owned ids (below the reserved range of svm-core, above anything a program uses).
const ID_BASE: u64 = 1 << 62;
const TASK_SEM: u64 = ID_BASE;
const DONE_SEM: u64 = ID_BASE + 4096;
const QUEUE_LOCK: u64 = ID_BASE + 8192;
const PAUSE_LOCK_BASE: u64 = ID_BASE + (1 << 40);

struct Splash {
    me: usize,
    nodes: usize,
    svm: Mutex<Option<Svm>>,
    /// Per node: [head, tail, entries...] (homed on that node).
    queues: Vec<SharedSlice<u64>>,
    /// Master's monotonic clock at start (ns): the job's time base.
    clock_base_ns: u64,
    next_target: AtomicU64,
    next_id: AtomicU64,
    /// Set while the runtime itself is ending the process (the exit hook must stand aside).
    ending: AtomicBool,
}

static SPLASH: OnceLock<Splash> = OnceLock::new();

fn fail(what: &str) -> ! {
    eprintln!("svm_splash: {what}");
    api::abort_job(EXIT_RUNTIME, what)
}

fn splash() -> &'static Splash {
    match SPLASH.get() {
        Some(s) => s,
        None => fail("the SPLASH runtime is not initialised: link with the flags of `svm-config --libs splash` (they wrap main)"),
    }
}

/// Runs `f`, turning a panic into the end of the job (no panic crosses the C ABI).
fn guard<T>(what: &str, f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            fail(&format!("{what}: {msg}"))
        }
    }
}

fn or_fail<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => fail(&e.to_string()),
    }
}

/// A fingerprint of the executable and where everything is mapped: nodes must agree, since
/// function and data addresses travel between them.
fn layout_fingerprint() -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    if let Ok(exe) = std::fs::read_link("/proc/self/exe") {
        exe.hash(&mut h);
        if let Ok(md) = std::fs::metadata(&exe) {
            md.len().hash(&mut h);
        }
    }
    if let Ok(maps) = std::fs::read_to_string("/proc/self/maps") {
        for line in maps.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            // Executable mappings of files: code addresses must be equal everywhere.
            if f.len() >= 6 && f[1].contains('x') && f[5].starts_with('/') {
                f[0].hash(&mut h);
                f[5].hash(&mut h);
            }
        }
    }
    h.finish()
}

fn init(data_start: usize, data_end: usize) -> Splash {
    let opts = InitOptions { statics: vec![(data_start, data_end)] };
    let svm = or_fail(api::init_with_options(svm_protocols::by_name, opts));
    let (me, nodes) = (api::node_id(), api::nodes());
    // Everyone publishes its layout fingerprint; node 0 also publishes the time base.
    let prints = or_fail(api::alloc_collective::<u64>(nodes.max(2)));
    let base = or_fail(api::alloc_collective::<u64>(1));
    prints.set(me, layout_fingerprint());
    if me == 0 {
        base.set(0, sys::segv::now_ns());
    }
    let mut queues = Vec::with_capacity(nodes);
    for k in 0..nodes {
        queues.push(or_fail(api::alloc_collective_with::<u64>(QUEUE + 2, Home::Node(k as u16))));
    }
    or_fail(api::barrier());
    if prints.get(me) != prints.get(0) {
        fail(&format!(
            "node {me} runs a different executable or maps it at other addresses than node 0: \
             run every node with the same binary and address randomization off (svmrun does this)"
        ));
    }
    Splash {
        me,
        nodes,
        svm: Mutex::new(Some(svm)),
        queues,
        clock_base_ns: base.get(0),
        next_target: AtomicU64::new(0),
        next_id: AtomicU64::new(1),
        ending: AtomicBool::new(false),
    }
}

/// Called by the process's exit path (`exit(status)` anywhere, or a return from `main` that
/// the stub did not catch): a failure ends the whole job with that status; a clean exit on the
/// master ends the job in order.
fn on_process_exit(status: c_int) {
    let Some(s) = SPLASH.get() else { return };
    if s.ending.swap(true, Ordering::AcqRel) {
        return;
    }
    if status != 0 {
        api::abort_job(status, &format!("node {} called exit({status})", s.me));
    }
    if s.me == 0 {
        end_job(s);
    } else {
        // A worker ending the whole job with status 0 (a program's "process 0" that finished).
        api::abort_job(0, &format!("node {} called exit(0)", s.me));
    }
}

/// Stops every worker and ends this node's part in order.
fn end_job(s: &Splash) {
    sys::flush_stdio();
    for k in 1..s.nodes {
        enqueue(s, k, STOP);
    }
    let svm = s.svm.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(svm) = svm {
        or_fail(svm.finish());
    }
}

fn enqueue(s: &Splash, node: usize, entry: u64) {
    let q = s.queues[node];
    or_fail(api::lock_id(QUEUE_LOCK));
    let tail = q.get(1);
    let head = q.get(0);
    if tail - head >= QUEUE as u64 {
        fail(&format!("more than {QUEUE} tasks queued for node {node}"));
    }
    q.set(2 + (tail as usize % QUEUE), entry);
    q.set(1, tail + 1);
    or_fail(api::unlock_id(QUEUE_LOCK));
    or_fail(api::sem_post(TASK_SEM + node as u64));
}

fn run_task(entry: u64) {
    // SAFETY-free conversion: the address came from `svm_splash_create` on a node running the
    // same executable at the same addresses (checked at start), so it names the same function.
    let f: extern "C" fn() = sys::fn_from_addr(entry as usize);
    guard("a CREATEd function", || f());
    or_fail(api::sem_post(DONE_SEM));
}

fn spawn_task(entry: u64) {
    let r = std::thread::Builder::new().name("splash-worker".into()).spawn(move || run_task(entry));
    if let Err(e) = r {
        fail(&format!("cannot start a worker thread: {e}"));
    }
}

fn worker_loop(s: &Splash) -> ! {
    let q = s.queues[s.me];
    loop {
        or_fail(api::sem_wait(TASK_SEM + s.me as u64));
        or_fail(api::lock_id(QUEUE_LOCK));
        let head = q.get(0);
        let entry = q.get(2 + (head as usize % QUEUE));
        q.set(0, head + 1);
        or_fail(api::unlock_id(QUEUE_LOCK));
        if entry == STOP {
            s.ending.store(true, Ordering::Release);
            sys::flush_stdio();
            let svm = s.svm.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(svm) = svm {
                or_fail(svm.finish());
            }
            sys::exit_process(0);
        }
        spawn_task(entry);
    }
}

/// # Safety
/// Called by the `__wrap_main` stub with the program's `argc`/`argv`, its real `main`, and
/// the bounds of its writable data (`__data_start`, `_end`).
#[no_mangle]
pub extern "C" fn svm_splash_main(
    argc: c_int,
    argv: *mut *mut c_char,
    real_main: extern "C" fn(c_int, *mut *mut c_char) -> c_int,
    data_start: *mut c_void,
    data_end: *mut c_void,
) -> c_int {
    let s = guard("starting the SPLASH runtime", || {
        if SPLASH.get().is_none() {
            let st = init(data_start as usize, data_end as usize);
            let _ = SPLASH.set(st);
        }
        sys::on_process_exit(on_process_exit);
        splash()
    });
    if s.me != 0 {
        worker_loop(s);
    }
    let status = real_main(argc, argv);
    guard("ending the job", || {
        if !s.ending.swap(true, Ordering::AcqRel) {
            if status != 0 {
                sys::flush_stdio();
                api::abort_job(status, &format!("main returned {status}"));
            }
            end_job(s);
        }
    });
    status
}

#[no_mangle]
pub extern "C" fn svm_splash_initenv() {
    guard("MAIN_INITENV", || {
        splash();
    })
}

#[no_mangle]
pub extern "C" fn svm_splash_main_end() {
    guard("MAIN_END", || {
        let s = splash();
        if !s.ending.swap(true, Ordering::AcqRel) {
            end_job(s);
        }
        sys::exit_process(0);
    })
}

#[no_mangle]
pub extern "C" fn svm_splash_clock() -> c_ulong {
    guard("CLOCK", || {
        let base = SPLASH.get().map(|s| s.clock_base_ns).unwrap_or(0);
        (sys::segv::now_ns().saturating_sub(base) / 1000) as c_ulong
    })
}

#[no_mangle]
pub extern "C" fn svm_splash_malloc(size: usize) -> *mut c_void {
    guard("G_MALLOC", || {
        splash();
        let s = or_fail(api::alloc_local::<u8>(size.max(1)));
        s.addr() as *mut c_void
    })
}

#[no_mangle]
pub extern "C" fn svm_splash_free(ptr: *mut c_void) {
    guard("G_FREE", || {
        if !ptr.is_null() {
            // Memory of other nodes (or already freed) is ignored: SPLASH never relies on it.
            let _ = api::free_local_addr(ptr as usize);
        }
    })
}

fn create(s: &Splash, f: extern "C" fn()) {
    let entry = sys::fn_addr(f) as u64;
    if s.nodes == 1 {
        spawn_task(entry);
        return;
    }
    // Round-robin over the workers first, then the master's node: 1, 2, .., N-1, 0, 1, ...
    let i = s.next_target.fetch_add(1, Ordering::Relaxed) as usize % s.nodes;
    let target = (i + 1) % s.nodes;
    if target == s.me {
        spawn_task(entry);
    } else {
        enqueue(s, target, entry);
    }
}

#[no_mangle]
pub extern "C" fn svm_splash_create(f: extern "C" fn()) {
    guard("CREATE", || create(splash(), f))
}

#[no_mangle]
pub extern "C" fn svm_splash_create_n(f: extern "C" fn(), n: c_long) {
    guard("CREATE", || {
        let s = splash();
        for _ in 1..n.max(1) {
            create(s, f);
        }
    });
    f();
}

#[no_mangle]
pub extern "C" fn svm_splash_wait_for_end(n: c_long) {
    guard("WAIT_FOR_END", || {
        splash();
        for _ in 0..n.max(0) {
            or_fail(api::sem_wait(DONE_SEM));
        }
    })
}

fn new_ids(n: u64) -> u64 {
    let s = splash();
    let k = s.next_id.fetch_add(n.max(1), Ordering::Relaxed);
    // Unique job-wide: node number in the high bits, a per-node counter below.
    ((s.me as u64 + 1) << 36) | k
}

#[no_mangle]
pub extern "C" fn svm_splash_lock_new() -> c_long {
    guard("LOCKINIT", || new_ids(1) as c_long)
}

#[no_mangle]
pub extern "C" fn svm_splash_lock_array_new(n: c_long) -> c_long {
    guard("ALOCKINIT", || new_ids(n.max(1) as u64) as c_long)
}

#[no_mangle]
pub extern "C" fn svm_splash_lock(id: c_long) {
    guard("LOCK", || or_fail(api::lock_id(id as u64)))
}

#[no_mangle]
pub extern "C" fn svm_splash_unlock(id: c_long) {
    guard("UNLOCK", || or_fail(api::unlock_id(id as u64)))
}

#[no_mangle]
pub extern "C" fn svm_splash_barrier_new() -> c_long {
    guard("BARINIT", || new_ids(1) as c_long)
}

#[no_mangle]
pub extern "C" fn svm_splash_barrier(id: c_long, n: c_long) {
    guard("BARRIER", || or_fail(api::Barrier::new(id as u64, n.clamp(1, u32::MAX as c_long) as u32).wait()))
}

/// A pause flag or condition variable: one shared word; its address is the object's id and
/// (offset into the runtime's range) the id of the lock that guards it.
fn shared_word_new() -> c_long {
    splash();
    let w = or_fail(api::alloc_local::<u64>(1));
    w.set(0, 0);
    w.addr() as c_long
}

fn word(id: c_long) -> (SharedSlice<u64>, u64) {
    let w = or_fail(SharedSlice::<u64>::from_raw_parts(id as usize, 1));
    (w, PAUSE_LOCK_BASE + id as u64 / 8)
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
pub extern "C" fn svm_splash_condvar_wait(cv: c_long, lock: c_long) {
    guard("CONDVARWAIT", || {
        let (w, l) = word(cv);
        // The caller holds `lock`: read the generation before letting signallers in.
        let generation = locked(l, || w.get(0));
        or_fail(api::unlock_id(lock as u64));
        wait_until(l, || w.get(0) != generation);
        or_fail(api::lock_id(lock as u64));
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
