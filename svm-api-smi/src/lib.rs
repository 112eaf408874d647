//! libsvm_smi: the SMI (Shared Memory Interface) personality of svm.
//!
//! The C interface is `include/smi.h`; `docs/smi.md` says what each call maps to. In short:
//! every svm node is one SMI process (and one SMI "node"); SMI regions are DSM regions with a
//! home placement (UNDIVIDED → the owner's node, BLOCKED/CUSTOMIZED → runs of pages, CYCLIC →
//! pages dealt round-robin, LOCAL → this node's arena, published to importers through a
//! shared directory); SMI mutexes, barriers and progress counters are svm locks and barriers,
//! so they are the consistency points (lock = acquire, unlock = release, barrier = both).
//! Regions use the protocol `sc-sw` unless `SVM_PROTOCOL` says otherwise (polled flags must
//! see remote stores without an SMI call, as on SCI: `docs/smi.md`).
//!
//! No panic crosses the C boundary: every exported function catches it and returns
//! `SMI_ERR_OTHER` with a message on stderr.
//!
//! Modules (imports point one way, down this list; all use this root's `Smi`): `consts`,
//! `ffi`, `layout` (pure layout/splitting helpers) and `table` (the region table, region
//! kinds and flags) are leaves; `registered` (SMI_SHM_REGISTER buffers); `region` (creating,
//! connecting, freeing regions; the export directory); `loops` (loop splitting and
//! scheduling); `repl` (replication; uses `loops`); `mmu`, `sync`, `xfer`, `misc`; `service`
//! (the message service thread: region callbacks, heartbeats; uses `region` and `misc`).

mod consts;
mod ffi;
mod layout;
mod loops;
mod misc;
mod mmu;
mod region;
mod registered;
mod repl;
mod service;
mod sync;
mod table;
mod xfer;

use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use svm_core::api::{self, Home, SharedSlice, Svm, SvmError};
use svm_core::sys;

use consts::*;

/// Result of the internal functions: the SMI error code on failure.
pub(crate) type Res<T = ()> = Result<T, c_int>;

/// Sizes of the runtime's own shared tables.
/// Exported LOCAL/PT2PT regions per process (SMI itself has no limit of its own; SCI drivers
/// allowed a few hundred to a few thousand segments per node).
const DIR_ENTRIES: usize = 4096;
const DIR_WORDS: usize = 4;
const NODEMEM_BYTES: usize = 64 * 1024;

/// Kinds of runtime-owned svm ids (locks, barriers, semaphores): see [`Smi::sync_id`].
pub(crate) const K_MUTEX: u64 = 1;
pub(crate) const K_BARRIER: u64 = 2;
pub(crate) const K_PC: u64 = 3;
pub(crate) const K_LOOP: u64 = 4;
pub(crate) const K_DIR: u64 = 5;
pub(crate) const K_MMU: u64 = 6;
pub(crate) const K_FLUSH: u64 = 7;
pub(crate) const K_TURN: u64 = 8;

/// Message tags (user messages of the runtime), "SMI" in the high bits.
pub(crate) const TAG_BASE: u64 = 0x0053_4d49 << 40;
pub(crate) const TAG_SIGNAL: u64 = TAG_BASE + 1;
pub(crate) const TAG_MSG: u64 = TAG_BASE + 2;
pub(crate) const TAG_CB: u64 = TAG_BASE + 3;
pub(crate) const TAG_HB: u64 = TAG_BASE + 4;

/// The personality's state in this process.
pub(crate) struct Smi {
    pub me: usize,
    pub n: usize,
    pub page: usize,
    /// Protocol of SMI regions.
    pub proto: String,
    svm: Mutex<Option<Svm>>,
    /// Per process: its directory of exported LOCAL/PT2PT regions (homed on it).
    pub dir: Vec<SharedSlice<u64>>,
    /// One page per process for small all-gathers.
    pub xchg: SharedSlice<u64>,
    /// Per node: its node memory (`SMI_Nodemem_address`).
    pub nodemem: Vec<usize>,
    pub pids: Vec<i32>,
    pub st: Mutex<State>,
    pub stop: AtomicBool,
    pub finalized: AtomicBool,
    /// Set while this process is inside a serialized replication phase (see repl.rs).
    pub in_replication: AtomicBool,
    service: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Mutable per-process tables.
#[derive(Default)]
pub(crate) struct State {
    pub regions: Vec<table::Region>,
    /// Replication state of the regions that have been replicated (by region id).
    pub repl: HashMap<c_int, repl::Repl>,
    pub next_region: i32,
    pub mutexes: Vec<Option<usize>>,
    /// Mutexes this process holds (SMI locks are not counted: see `SMI_Mutex_lock`).
    pub held: HashSet<usize>,
    pub barriers: Vec<bool>,
    pub pcs: Vec<SharedSlice<u64>>,
    pub loops: Vec<Option<loops::Sched>>,
    pub splits: Vec<loops::Split>,
    pub speeds: Option<Vec<f64>>,
    pub handles: HashMap<usize, c_int>,
    pub next_handle: usize,
    pub isend: HashSet<usize>,
    pub pt2pt_seq: HashMap<(usize, usize), u64>,
    pub signal_threads: HashMap<usize, std::thread::JoinHandle<()>>,
}

static SMI: OnceLock<Smi> = OnceLock::new();
static INITIALIZED: AtomicBool = AtomicBool::new(false);
static DEBUG: AtomicI32 = AtomicI32::new(0);

/// The runtime, or `SMI_ERR_NOINIT` before `SMI_Init` / after `SMI_Finalize`.
pub(crate) fn smi() -> Res<&'static Smi> {
    match SMI.get() {
        Some(s) if !s.finalized.load(Ordering::Acquire) => Ok(s),
        _ => Err(SMI_ERR_NOINIT),
    }
}

impl Smi {
    pub fn st(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A runtime-owned svm lock/barrier/semaphore id whose manager is node `home`
    /// (svm managers are `id % nodes`).
    pub fn sync_id(&self, kind: u64, key: u64, home: usize) -> u64 {
        (((kind << 40) | (key & ((1 << 40) - 1))) * self.n as u64) + (home % self.n) as u64
    }

    /// Locks runtime lock `id`, runs `f`, unlocks.
    pub fn locked<T>(&self, id: u64, f: impl FnOnce() -> T) -> Res<T> {
        sv(api::lock_id(id))?;
        let r = f();
        sv(api::unlock_id(id))?;
        Ok(r)
    }

    /// Barrier of all processes (release + acquire for everyone).
    pub fn barrier(&self) -> Res {
        if self.in_replication.load(Ordering::Acquire) {
            eprintln!(
                "smi[{}]: a barrier or collective call inside a replicated phase (between \
                 SMI_Switch_to_replication and SMI_Ensure_consistency/SMI_Switch_to_sharing) is \
                 not supported by svm (docs/smi.md)",
                self.me
            );
            return Err(SMI_ERR_OTHER);
        }
        registered::sync();
        sv(api::barrier())?;
        registered::sync();
        Ok(())
    }

    /// A release: this process's writes become visible to later acquirers.
    pub fn release(&self) -> Res {
        let id = self.sync_id(K_FLUSH, 0, self.me);
        self.locked(id, || ())
    }

    /// Every process contributes `vals` (at most a page of words); returns all contributions
    /// in rank order. Collective.
    pub fn allgather(&self, vals: &[u64]) -> Res<Vec<Vec<u64>>> {
        let row = self.page / 8;
        if vals.len() > row {
            return Err(SMI_ERR_PARAM);
        }
        self.xchg.slice(self.me * row, row).write_from(0, vals);
        self.barrier()?;
        let mut out = Vec::with_capacity(self.n);
        for p in 0..self.n {
            let mut v = vec![0u64; vals.len()];
            self.xchg.slice(p * row, row).read_into(0, &mut v);
            out.push(v);
        }
        self.barrier()?;
        Ok(out)
    }

    /// Collective allocation of a DSM region of `bytes` (rounded up to pages) with `home`, in
    /// the personality's protocol.
    pub fn alloc_region(&self, bytes: usize, home: Home) -> Res<SharedSlice<u8>> {
        let len = bytes.max(1).div_ceil(self.page) * self.page;
        sv(api::alloc_collective_in::<u8>(len, home, &self.proto))
    }

    /// Polling with a growing pause until `f` yields, up to the job's timeout.
    pub fn poll<T>(&self, what: &str, mut f: impl FnMut() -> Res<Option<T>>) -> Res<T> {
        let deadline = Instant::now() + timeout();
        let mut pause = Duration::from_micros(20);
        loop {
            if let Some(v) = f()? {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                eprintln!(
                    "smi[{}]: timed out after {:?} (SVM_TIMEOUT) waiting for {what}",
                    self.me,
                    timeout()
                );
                return Err(SMI_ERR_OTHER);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(2));
        }
    }
}

/// The job's deadline for blocking waits (`SVM_TIMEOUT`, default 300 s).
pub(crate) fn timeout() -> Duration {
    std::env::var("SVM_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| *s > 0.0 && s.is_finite())
        .map(Duration::from_secs_f64)
        .unwrap_or(Duration::from_secs(300))
}

/// Maps a runtime error to an SMI code, with the message on stderr.
pub(crate) fn sv<T>(r: Result<T, SvmError>) -> Res<T> {
    r.map_err(|e| {
        eprintln!("smi[{}]: {e}", api::node_id());
        match e {
            SvmError::Space { .. } => SMI_ERR_NOMEM,
            SvmError::NotInitialized => SMI_ERR_NOINIT,
            SvmError::BadNode { .. } | SvmError::ReservedId { .. } => SMI_ERR_PARAM,
            _ => SMI_ERR_OTHER,
        }
    })
}

/// Runs an exported function's body: maps `Res` to the SMI code and a panic to
/// `SMI_ERR_OTHER` (no panic crosses the C ABI).
pub(crate) fn entry(name: &str, f: impl FnOnce() -> Res) -> c_int {
    if DEBUG.load(Ordering::Relaxed) > 0 {
        eprintln!("smi[{}]: {name}", api::node_id());
    }
    // Every SMI call is a potential synchronisation point of registered buffers.
    registered::sync();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    registered::sync();
    match r {
        Ok(Ok(())) => SMI_SUCCESS,
        Ok(Err(code)) => {
            if DEBUG.load(Ordering::Relaxed) > 0 {
                eprintln!("smi[{}]: {name} returns error {code}", api::node_id());
            }
            code
        }
        Err(p) => {
            let msg = sys::cabi::panic_message(&*p);
            eprintln!("smi[{}]: {name}: internal error: {msg}", api::node_id());
            SMI_ERR_OTHER
        }
    }
}

/// Like [`entry`] for functions returning a value instead of an error code.
pub(crate) fn entry_val<T>(name: &str, fallback: T, f: impl FnOnce() -> Res<T>) -> T {
    let mut out = None;
    let code = entry(name, || {
        out = Some(f()?);
        Ok(())
    });
    match out {
        Some(v) if code == SMI_SUCCESS => v,
        _ => fallback,
    }
}

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
pub(crate) unsafe fn out<T>(p: *mut T, v: T) -> Res {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    if unsafe { ffi::put(p, v) } {
        Ok(())
    } else {
        Err(SMI_ERR_PARAM)
    }
}

// ------------------------------------------------------------------------------- start-up

/// The classic SMI launcher arguments `-r R -n N -h HOST -m MAGIC [-p PORT] ... --`.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Classic {
    pub rank: Option<usize>,
    pub size: Option<usize>,
    pub host: Option<String>,
    pub magic: Option<String>,
    pub port: Option<u16>,
    /// Index (in argv) of the first user argument.
    pub user_from: usize,
}

/// Recognises the classic form: argv[1] is an option and a `--` follows; everything up to and
/// including `--` is the launcher's.
pub(crate) fn parse_classic(args: &[String]) -> Option<Classic> {
    let dd = args.iter().position(|a| a == "--")?;
    if dd != 1 && !args.get(1).is_some_and(|a| a.starts_with('-')) {
        return None;
    }
    let mut c = Classic {
        user_from: dd + 1,
        ..Default::default()
    };
    let mut i = 1;
    while i < dd {
        let val = args.get(i + 1).filter(|_| i + 1 < dd).cloned();
        match args[i].as_str() {
            "-r" => c.rank = val.as_deref().and_then(|v| v.parse().ok()),
            "-n" => c.size = val.as_deref().and_then(|v| v.parse().ok()),
            "-h" => c.host = val.clone(),
            "-m" => c.magic = val.clone(),
            "-p" => c.port = val.as_deref().and_then(|v| v.parse().ok()),
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    Some(c)
}

/// Default rendezvous port for the classic form without `-p`.
const CLASSIC_PORT: u16 = 27_182;

/// Maps the classic arguments onto svm's bootstrap variables when no launcher set them.
fn classic_env(c: &Classic) {
    let launched = ["SVM_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if launched {
        return;
    }
    let (Some(rank), Some(size)) = (c.rank, c.size) else {
        return;
    };
    std::env::set_var("SVM_RANK", rank.to_string());
    std::env::set_var("SVM_SIZE", size.to_string());
    if std::env::var_os("SVM_COORD").is_none() {
        let host = c.host.clone().unwrap_or_else(|| "127.0.0.1".into());
        std::env::set_var(
            "SVM_COORD",
            format!("{host}:{}", c.port.unwrap_or(CLASSIC_PORT)),
        );
    }
    if std::env::var_os("SVM_JOB_KEY").is_none() {
        std::env::set_var(
            "SVM_JOB_KEY",
            key_from_magic(c.magic.as_deref().unwrap_or("smi")),
        );
    }
}

/// A 32-byte job key (64 hex digits) derived from the launcher's magic number: every process
/// of the job gets the same one. (It only keeps strangers out as well as the magic does.)
pub(crate) fn key_from_magic(magic: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in magic.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut out = String::new();
    for _ in 0..4 {
        // splitmix64
        h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = h;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        out.push_str(&format!("{z:016x}"));
    }
    out
}

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn start(argc: *mut c_int, argv: *mut *mut *mut c_char) -> Res {
    if SMI.get().is_some() {
        // A second SMI_Init (or one after SMI_Finalize) is an error, as in SMI.
        return Err(SMI_ERR_OTHER);
    }
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    let args = unsafe { ffi::args(argc, argv) };
    if let Some(c) = parse_classic(&args) {
        classic_env(&c);
        let keep: Vec<usize> = (c.user_from..args.len()).collect();
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        if !unsafe { ffi::rewrite_args(argc, argv, &keep) } {
            return Err(SMI_ERR_PARAM);
        }
    }
    let svm = sv(api::init_with(svm_protocols::by_name))?;
    let (me, n, page) = (api::node_id(), api::nodes(), api::page_size());
    let proto = std::env::var("SVM_PROTOCOL")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "sc-sw".into());
    let alloc = |words: usize, home: Home| sv(api::alloc_collective_in::<u64>(words, home, &proto));
    let mut dir = Vec::with_capacity(n);
    for p in 0..n {
        dir.push(alloc(DIR_ENTRIES * DIR_WORDS, Home::Node(p as u16))?);
    }
    let xchg = alloc(
        n * page / 8,
        Home::Runs((0..n).map(|p| (p as u16, 1)).collect()),
    )?;
    let mut nodemem = Vec::with_capacity(n);
    for p in 0..n {
        nodemem.push(alloc(NODEMEM_BYTES / 8, Home::Node(p as u16))?.addr());
    }
    let s = Smi {
        me,
        n,
        page,
        proto,
        svm: Mutex::new(Some(svm)),
        dir,
        xchg,
        nodemem,
        pids: Vec::new(),
        st: Mutex::new(State {
            next_region: 1,
            barriers: vec![true],
            ..Default::default()
        }),
        stop: AtomicBool::new(false),
        finalized: AtomicBool::new(false),
        in_replication: AtomicBool::new(false),
        service: Mutex::new(None),
    };
    let pids = s.allgather(&[std::process::id() as u64])?;
    let s = Smi {
        pids: pids.iter().map(|v| v[0] as i32).collect(),
        ..s
    };
    if SMI.set(s).is_err() {
        return Err(SMI_ERR_OTHER);
    }
    let s = smi()?;
    let h = std::thread::Builder::new()
        .name("smi-service".into())
        .spawn(service::service_loop);
    match h {
        Ok(h) => *s.service.lock().unwrap_or_else(|p| p.into_inner()) = Some(h),
        Err(e) => {
            eprintln!("smi[{me}]: cannot start the service thread: {e}");
            return Err(SMI_ERR_OTHER);
        }
    }
    sys::on_process_exit(on_exit);
    INITIALIZED.store(true, Ordering::Release);
    Ok(())
}

/// `exit(status)` without SMI_Finalize: a failure ends the whole job with that status; a clean
/// exit ends this process's part in order.
fn on_exit(status: i32) {
    let Some(s) = SMI.get() else { return };
    if s.finalized.swap(true, Ordering::AcqRel) {
        return;
    }
    sys::flush_stdio();
    if status != 0 {
        api::abort_job(status, &format!("process {} called exit({status})", s.me));
    }
    shutdown(s);
}

/// Stops the helper threads and ends this node's part of the job in order.
fn shutdown(s: &Smi) {
    s.stop.store(true, Ordering::Release);
    misc::stop_watchdog();
    if let Some(h) = s.service.lock().unwrap_or_else(|p| p.into_inner()).take() {
        let _ = h.join();
    }
    let svm = s.svm.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(svm) = svm {
        if let Err(e) = svm.finish() {
            eprintln!("smi[{}]: {e}", s.me);
        }
    }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_Init", || unsafe { start(argc, argv) })
}

#[no_mangle]
pub extern "C" fn SMI_Finalize() -> c_int {
    entry("SMI_Finalize", || {
        let s = smi()?;
        s.barrier()?;
        region::free_all(s);
        sys::flush_stdio();
        if !s.finalized.swap(true, Ordering::AcqRel) {
            shutdown(s);
        }
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn SMI_Abort(code: c_int) {
    sys::flush_stdio();
    let me = api::node_id();
    if SMI.get().is_some() {
        api::abort_job(code, &format!("process {me} called SMI_Abort({code})"));
    }
    sys::exit_process(code)
}

// ----------------------------------------------------------------------- runtime information

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn rank_info(p: *mut c_int, f: impl FnOnce(&Smi) -> usize) -> Res {
    let s = smi()?;
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { out(p, f(s) as c_int) }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Proc_rank(rank: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_Proc_rank", || unsafe { rank_info(rank, |s| s.me) })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Proc_size(size: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_Proc_size", || unsafe { rank_info(size, |s| s.n) })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Local_proc_rank(rank: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_Local_proc_rank", || unsafe { rank_info(rank, |_| 0) })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Local_proc_size(size: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_Local_proc_size", || unsafe { rank_info(size, |_| 1) })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Max_local_proc_size(size: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_Max_local_proc_size", || unsafe {
        rank_info(size, |_| 1)
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Node_rank(rank: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_Node_rank", || unsafe { rank_info(rank, |s| s.me) })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Node_size(size: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_Node_size", || unsafe { rank_info(size, |s| s.n) })
}

pub(crate) fn check_rank(s: &Smi, r: c_int) -> Res<usize> {
    if r < 0 || r as usize >= s.n {
        return Err(SMI_ERR_PARAM);
    }
    Ok(r as usize)
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Proc_to_node(proc_: c_int, node: *mut c_int) -> c_int {
    entry("SMI_Proc_to_node", || {
        let p = check_rank(smi()?, proc_)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(node, p as c_int) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_First_proc_on_node(node: c_int, proc_: *mut c_int) -> c_int {
    entry("SMI_First_proc_on_node", || {
        let k = check_rank(smi()?, node)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(proc_, k as c_int) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Get_node_name(name: *mut c_char, len: *mut usize) -> c_int {
    entry("SMI_Get_node_name", || {
        // As in SMI, this works before SMI_Init too; a name that does not fit (with its NUL)
        // is SMI_ERR_OTHER.
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let cap = unsafe { ffi::get(len as *const usize) }.ok_or(SMI_ERR_PARAM)?;
        if name.is_null() || cap == 0 {
            return Err(SMI_ERR_PARAM);
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_else(|_| "localhost".into());
        let host = host.trim();
        if host.len() >= cap {
            eprintln!(
                "smi: SMI_Get_node_name: the host name '{host}' needs {} bytes, {cap} given",
                host.len() + 1
            );
            return Err(SMI_ERR_OTHER);
        }
        let mut b: Vec<c_char> = host.bytes().map(|c| c as c_char).collect();
        let l = b.len();
        b.push(0);
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        if !unsafe { ffi::write_array(name, &b) } {
            return Err(SMI_ERR_PARAM);
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(len, l) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Page_size(size: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_Page_size", || unsafe { rank_info(size, |s| s.page) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn classic_arguments_are_recognised_and_stripped() {
        let c = parse_classic(&v("prog -r 2 -n 4 -h node0 -m 1234 -p 4000 -v -- a b")).unwrap();
        assert_eq!(c.rank, Some(2));
        assert_eq!(c.size, Some(4));
        assert_eq!(c.host.as_deref(), Some("node0"));
        assert_eq!(c.magic.as_deref(), Some("1234"));
        assert_eq!(c.port, Some(4000));
        assert_eq!(c.user_from, 13);
        assert_eq!(parse_classic(&v("prog -- x")).unwrap().user_from, 2);
    }

    #[test]
    fn plain_arguments_are_left_alone() {
        assert!(parse_classic(&v("prog a b")).is_none());
        assert!(parse_classic(&v("prog a -- b")).is_none());
        assert!(parse_classic(&v("prog")).is_none());
    }

    #[test]
    fn magic_gives_a_valid_key() {
        let k = key_from_magic("1234");
        assert_eq!(k.len(), 64);
        assert!(k.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(k, key_from_magic("1234"));
        assert_ne!(k, key_from_magic("1235"));
    }
}
