//! libsvm_cvm: the CVM personality (`include/cvm.h`).
//!
//! - The master (node 0) runs `main`; every other process waits (the `main` wrapper stub) for
//!   `cvm_create_procs`, which ships the worker function's address to it.
//! - Ordinary globals are private to each process. At `cvm_create_procs` every worker starts
//!   with the master's globals as they are at that moment: the master sends the pages of its
//!   writable data that changed since it started (parameters parsed from argv, `cvm_alloc`
//!   pointers), and the worker copies them over its own before calling the worker function.
//! - `cvm_alloc` memory is shared; the default protocol is `scope` (lazy-release-like:
//!   lock-scoped visibility, everything at barriers); `SVM_PROTOCOL` selects another.
//! - No panic crosses the C boundary: every exported function catches it and ends the job.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use svm_core::api::{self, Barrier, InitOptions};
use svm_core::sys::{self, cabi};
use svm_core::workers::{self, fail, guard, or_fail, Procs};

/// Number of processes (nodes); read by C as `extern int cvm_num_procs`.
#[no_mangle]
pub static cvm_num_procs: AtomicI32 = AtomicI32::new(1);
/// This process (0 is the master); read by C as `extern int cvm_proc_id`.
#[no_mangle]
pub static cvm_proc_id: AtomicI32 = AtomicI32::new(0);

/// Header constants (cvm.h).
pub const CVM_MAX_LOCKS: c_int = 4096;
pub const CVM_MAX_THREADS: usize = 64;
/// Barrier id used by `cvm_barrier` (the id argument is ignored, as in CVM).
const CVM_BARRIER: u64 = workers::PERSONALITY_IDS + 1;
/// Tag of the globals snapshot of creation round r: SNAPSHOT_TAG + r.
const SNAPSHOT_TAG: u64 = 0xC7_0000_0000;
/// Snapshot granularity.
const CHUNK: usize = 4096;

struct Cvm {
    data_start: usize,
    data_len: usize,
    /// Master: its writable data as it was when the job started.
    image: Vec<u8>,
    round: AtomicU64,
    threads_per_proc: AtomicUsize,
    /// Master: tasks dispatched and not yet waited for by `cvm_finish`.
    dispatched: AtomicUsize,
    /// Worker: the last creation round whose snapshot was applied.
    applied: Mutex<u64>,
    /// (creation round, next thread index in it): TIDs restart every round, so they stay
    /// within this process's range (`proc_id * CVM_MAX_THREADS ..`).
    threads: Mutex<(u64, usize)>,
}

static CVM: OnceLock<Cvm> = OnceLock::new();

thread_local! {
    static THREAD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn cvm() -> &'static Cvm {
    match CVM.get() {
        Some(c) => c,
        None => fail("the CVM runtime is not initialised: link with the flags of `svm-config --libs cvm` (they wrap main)"),
    }
}

fn procs() -> &'static Procs {
    match workers::procs() {
        Some(p) => p,
        None => fail("the CVM runtime is not initialised"),
    }
}

/// The pages of the master's data that differ from its start image, as
/// `(offset: u64, len: u64, bytes)*`.
fn snapshot(c: &Cvm) -> Vec<u8> {
    // SAFETY: `data_start..+data_len` is the program's writable static data, from the
    // linker's bounds `__wrap_main` passed at start; it stays mapped for the process's life.
    let cur = unsafe { cabi::bytes(c.data_start as *const u8, c.data_len) }.unwrap_or(&[]);
    let mut out = Vec::new();
    for (i, (now, then)) in cur.chunks(CHUNK).zip(c.image.chunks(CHUNK)).enumerate() {
        if now != then {
            out.extend_from_slice(&((i * CHUNK) as u64).to_le_bytes());
            out.extend_from_slice(&(now.len() as u64).to_le_bytes());
            out.extend_from_slice(now);
        }
    }
    out
}

/// Copies a snapshot over this process's own globals.
fn apply_snapshot(c: &Cvm, data: &[u8]) {
    let mut at = 0;
    while at + 16 <= data.len() {
        let off = u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes")) as usize;
        let len = u64::from_le_bytes(data[at + 8..at + 16].try_into().expect("8 bytes")) as usize;
        at += 16;
        if off.checked_add(len).is_none_or(|e| e > c.data_len) || at + len > data.len() {
            fail("a malformed globals snapshot arrived from the master");
        }
        // SAFETY: the range is inside the program's writable static data (`data_start`,
        // `data_len` from the linker's bounds at start; checked above), `data[at..]` holds `len` bytes.
        unsafe { cabi::copy_bytes((c.data_start + off) as *mut u8, data[at..].as_ptr(), len) };
        at += len;
    }
}

fn set_identity(p: &Procs) {
    cvm_num_procs.store(p.nodes as i32, Ordering::Release);
    cvm_proc_id.store(p.me as i32, Ordering::Release);
}

/// Runs one CVM worker thread: brings this process's globals to the master's state of the
/// creation round (once per round per process), then calls the worker.
fn run_worker(f: usize, arg: u64) {
    let c = cvm();
    // The argument carries the creation round (low half) and the threads per process.
    let (round, threads) = (arg & 0xffff_ffff, (arg >> 32) as usize);
    c.threads_per_proc.store(threads.max(1), Ordering::Release);
    {
        let mut applied = c.applied.lock().unwrap_or_else(|p| p.into_inner());
        if *applied < round && procs().me != 0 {
            let data = workers::recv_tagged(SNAPSHOT_TAG + round);
            apply_snapshot(c, &data);
            // `cvm_proc_id` and `cvm_num_procs` may live in the program's data (C programs
            // reference them through copy relocations): the master's values just came over.
            set_identity(procs());
            *applied = round;
        }
    }
    let index = {
        let mut t = c.threads.lock().unwrap_or_else(|p| p.into_inner());
        if t.0 != round {
            // Thread 0 of the master is its main thread, which runs the worker too.
            *t = (round, usize::from(procs().me == 0));
        }
        t.1 += 1;
        (t.1 - 1) % CVM_MAX_THREADS
    };
    THREAD.with(|t| t.set(index));
    workers::run_c_fn(f, arg);
}

/// Called by the `__wrap_main` stub with the program's `main` and the bounds of its writable
/// data.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_cvm_main(
    argc: c_int,
    argv: *mut *mut c_char,
    real_main: extern "C" fn(c_int, *mut *mut c_char) -> c_int,
    data_start: *mut c_void,
    data_end: *mut c_void,
) -> c_int {
    let p = guard("starting the CVM runtime", || {
        let opts = InitOptions {
            statics: Vec::new(),
            default_protocol: Some("scope".into()),
        };
        let p = workers::start(svm_protocols::by_name, opts, run_worker);
        let (start, end) = (data_start as usize, data_end as usize);
        let len = end.saturating_sub(start);
        let image = if p.me == 0 {
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            unsafe { cabi::bytes(start as *const u8, len) }
                .map(|b| b.to_vec())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let _ = CVM.set(Cvm {
            data_start: start,
            data_len: len,
            image,
            round: AtomicU64::new(0),
            threads_per_proc: AtomicUsize::new(1),
            dispatched: AtomicUsize::new(0),
            applied: Mutex::new(0),
            threads: Mutex::new((0, 0)),
        });
        set_identity(p);
        p
    });
    workers::run_main(p, argc, argv, real_main)
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn cvm_startup(_argc: c_int, _argv: *mut *mut c_char) {
    // The runtime started before main (the wrapper); this only checks that it did.
    guard("cvm_startup", || {
        cvm();
    })
}

#[no_mangle]
pub extern "C" fn cvm_create_procs(worker: extern "C" fn()) {
    cvm_create_procs_threads(worker, 1)
}

#[no_mangle]
pub extern "C" fn cvm_create_procs_threads(worker: extern "C" fn(), threads: c_int) {
    guard("cvm_create_procs", || {
        let (c, p) = (cvm(), procs());
        if p.me != 0 {
            fail("cvm_create_procs is called by the master (process 0) only");
        }
        let threads = (threads.max(1) as usize).min(CVM_MAX_THREADS);
        let round = c.round.fetch_add(1, Ordering::AcqRel) + 1;
        let snap = snapshot(c);
        for k in 1..p.nodes {
            or_fail(api::send_message(k, SNAPSHOT_TAG + round, &snap));
        }
        c.threads_per_proc.store(threads, Ordering::Release);
        let f = worker;
        let arg = round | ((threads as u64) << 32);
        for k in 1..p.nodes {
            for _ in 0..threads {
                p.dispatch(k, f, arg);
            }
        }
        // The master's own call to worker() is its first thread; the others run beside it.
        for _ in 1..threads {
            p.dispatch(0, f, arg);
        }
        c.dispatched
            .fetch_add((p.nodes - 1) * threads + threads - 1, Ordering::AcqRel);
    })
}

#[no_mangle]
pub extern "C" fn cvm_finish() {
    guard("cvm_finish", || {
        let (c, p) = (cvm(), procs());
        if p.me == 0 {
            p.wait_done(c.dispatched.swap(0, Ordering::AcqRel));
        }
    })
}

#[no_mangle]
pub extern "C" fn cvm_alloc(size: c_int) -> *mut c_void {
    guard("cvm_alloc", || {
        procs();
        if size < 0 {
            fail(&format!("cvm_alloc({size}): negative size"));
        }
        workers::alloc_shared(size as usize) as *mut c_void
    })
}

fn lock_id(id: c_int) -> u64 {
    if !(0..CVM_MAX_LOCKS).contains(&id) {
        fail(&format!(
            "lock id {id} is outside 0..{CVM_MAX_LOCKS} (CVM_MAX_LOCKS)"
        ));
    }
    id as u64
}

#[no_mangle]
pub extern "C" fn cvm_lock(id: c_int) {
    guard("cvm_lock", || or_fail(api::lock_id(lock_id(id))))
}

#[no_mangle]
pub extern "C" fn cvm_unlock(id: c_int) {
    guard("cvm_unlock", || or_fail(api::unlock_id(lock_id(id))))
}

#[no_mangle]
pub extern "C" fn cvm_barrier(_id: c_int) {
    guard("cvm_barrier", || {
        let (c, p) = (cvm(), procs());
        let threads = c.threads_per_proc.load(Ordering::Acquire);
        if threads == 1 {
            // One application thread per process (= node): no manager (dissemination).
            or_fail(api::barrier_nodes(CVM_BARRIER));
        } else {
            or_fail(Barrier::new(CVM_BARRIER, (p.nodes * threads) as u32).wait());
        }
    })
}

#[no_mangle]
pub extern "C" fn cvm_tid() -> c_int {
    let me = workers::procs().map(|p| p.me).unwrap_or(0);
    (me * CVM_MAX_THREADS + THREAD.with(|t| t.get())) as c_int
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_cvm_abort(status: c_int, msg: *const c_char) -> ! {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    let text = unsafe { cabi::c_string(msg) }.unwrap_or_default();
    eprintln!("{text}");
    sys::flush_stdio();
    api::abort_job(if status == 0 { 1 } else { status }, &text)
}
