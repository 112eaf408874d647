//! libsvm: the native C API (`include/svm.h`, reference in docs/c-api.md), a thin layer over
//! the native Rust API (`svm_core::api`, `svm_core::region`).
//!
//! Every exported function returns `SVM_OK` or a negative error code, keeps the full message
//! for `svm_last_error`, and catches panics (none crosses the C boundary). Pointers from C go
//! through `svm_core::sys::cabi`. The runtime's state (not started, running, finished) is
//! checked on every call, so calls after `svm_finish` are errors.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use svm_core::api::{self, Home, Svm, SvmError};
use svm_core::region;
use svm_core::space::SpaceError;
use svm_core::sys::cabi;

pub const SVM_OK: c_int = 0;
pub const SVM_E_STATE: c_int = -1;
pub const SVM_E_ARG: c_int = -2;
pub const SVM_E_REGION: c_int = -3;
pub const SVM_E_NOMEM: c_int = -4;
pub const SVM_E_PROTOCOL: c_int = -5;
pub const SVM_E_NODE: c_int = -6;
pub const SVM_E_LOCK: c_int = -7;
pub const SVM_E_BARRIER: c_int = -8;
pub const SVM_E_ID: c_int = -9;
pub const SVM_E_ADDR: c_int = -10;
pub const SVM_E_TIMEOUT: c_int = -11;
pub const SVM_E_TRUNC: c_int = -12;
pub const SVM_E_INIT: c_int = -13;
pub const SVM_E_NOTSUP: c_int = -14;
pub const SVM_E_DESTROY: c_int = -15;
pub const SVM_E_INTERNAL: c_int = -16;

/// Longest home list accepted (`svm_home_t.count`).
const MAX_HOME_LIST: usize = 1 << 20;

/// A failed call: its code and message.
struct Error(c_int, String);

type Res<T = ()> = Result<T, Error>;

impl From<SvmError> for Error {
    fn from(e: SvmError) -> Error {
        let code = match &e {
            SvmError::Config(_)
            | SvmError::Bootstrap(_)
            | SvmError::Sys { .. }
            | SvmError::Comm(_)
            | SvmError::Static { .. } => SVM_E_INIT,
            SvmError::Space { err, .. } => match err {
                SpaceError::OutOfSpace { .. } => SVM_E_NOMEM,
                SpaceError::Empty => SVM_E_ARG,
                SpaceError::BadHome { .. } => SVM_E_NODE,
                SpaceError::NotSupported { .. } => SVM_E_NOTSUP,
                SpaceError::BadFree { .. } => SVM_E_ADDR,
            },
            SvmError::AlreadyInitialized | SvmError::NotInitialized => SVM_E_STATE,
            SvmError::UnknownProtocol(_) => SVM_E_PROTOCOL,
            SvmError::NotLockHolder { .. } => SVM_E_LOCK,
            SvmError::BarrierMismatch { .. } | SvmError::ZeroCount { .. } => SVM_E_BARRIER,
            SvmError::BadNode { .. } => SVM_E_NODE,
            SvmError::ReservedId { .. } => SVM_E_ID,
            SvmError::BadRegion { .. } => SVM_E_REGION,
            SvmError::Destroy { why, .. } if why.contains("not supported") => SVM_E_NOTSUP,
            SvmError::Destroy { .. } => SVM_E_DESTROY,
            #[allow(unreachable_patterns)]
            _ => SVM_E_INTERNAL,
        };
        Error(code, e.to_string())
    }
}

fn arg(what: &str) -> Error {
    Error(SVM_E_ARG, format!("svm: {what}"))
}

/// Writes an out-parameter; NULL is a bad argument.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn out<T>(p: *mut T, v: T, name: &str) -> Res {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    if unsafe { cabi::write_out(p, v) } {
        Ok(())
    } else {
        Err(arg(&format!("`{name}` is NULL")))
    }
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

const NOT_STARTED: u8 = 0;
const RUNNING: u8 = 1;
const FINISHED: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(NOT_STARTED);
static HANDLE: Mutex<Option<Svm>> = Mutex::new(None);

fn running() -> Res {
    match STATE.load(Ordering::Acquire) {
        RUNNING => Ok(()),
        NOT_STARTED => Err(Error(
            SVM_E_STATE,
            "svm: the runtime is not initialized: call svm_init() first".into(),
        )),
        _ => Err(Error(
            SVM_E_STATE,
            "svm: the runtime has finished (svm_finish was called)".into(),
        )),
    }
}

/// Runs an exported call: checks the state (unless `any_state`), catches panics, records the
/// message of a failure for `svm_last_error`.
fn entry(any_state: bool, f: impl FnOnce() -> Res) -> c_int {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if !any_state {
            running()?;
        }
        f()
    }));
    let err = match r {
        Ok(Ok(())) => return SVM_OK,
        Ok(Err(e)) => e,
        Err(p) => {
            let msg = cabi::panic_message(&*p);
            let msg = format!("svm: node {}: internal error: {msg}", api::node_id());
            eprintln!("{msg}");
            Error(SVM_E_INTERNAL, msg)
        }
    };
    let msg = CString::new(err.1.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = msg);
    err.0
}

#[no_mangle]
pub extern "C" fn svm_strerror(code: c_int) -> *const c_char {
    let s: &'static std::ffi::CStr = match code {
        SVM_OK => c"SVM_OK: success",
        SVM_E_STATE => c"SVM_E_STATE: the runtime is not running (svm_init not called, called twice, or svm_finish called)",
        SVM_E_ARG => c"SVM_E_ARG: bad argument",
        SVM_E_REGION => c"SVM_E_REGION: not a live region",
        SVM_E_NOMEM => c"SVM_E_NOMEM: out of shared memory (raise SVM_SPACE_SIZE, or the region's size)",
        SVM_E_PROTOCOL => c"SVM_E_PROTOCOL: unknown protocol",
        SVM_E_NODE => c"SVM_E_NODE: no such node in this job",
        SVM_E_LOCK => c"SVM_E_LOCK: the calling thread does not hold the lock",
        SVM_E_BARRIER => c"SVM_E_BARRIER: bad barrier count",
        SVM_E_ID => c"SVM_E_ID: id reserved for the runtime (ids must be below 2^63)",
        SVM_E_ADDR => c"SVM_E_ADDR: not a live allocation or region address",
        SVM_E_TIMEOUT => c"SVM_E_TIMEOUT: timed out",
        SVM_E_TRUNC => c"SVM_E_TRUNC: buffer too small",
        SVM_E_INIT => c"SVM_E_INIT: joining the job failed",
        SVM_E_NOTSUP => c"SVM_E_NOTSUP: not supported",
        SVM_E_DESTROY => c"SVM_E_DESTROY: the nodes disagree about the region being destroyed",
        SVM_E_INTERNAL => c"SVM_E_INTERNAL: internal error",
        _ => c"unknown svm error code",
    };
    s.as_ptr()
}

#[no_mangle]
pub extern "C" fn svm_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr())
}

// ---------------------------------------------------------------------------- the job

#[no_mangle]
pub extern "C" fn svm_init() -> c_int {
    entry(true, || {
        let mut h = HANDLE.lock().unwrap_or_else(|p| p.into_inner());
        if STATE.load(Ordering::Acquire) != NOT_STARTED {
            return Err(Error(
                SVM_E_STATE,
                "svm: svm_init() was already called in this process".into(),
            ));
        }
        *h = Some(api::init_with(svm_protocols::by_name)?);
        STATE.store(RUNNING, Ordering::Release);
        Ok(())
    })
}

/// Sets (or with NULL clears) the environment variable `var` read by `svm_init`; only before it.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn set_before_init(var: &str, file: *const c_char) -> Res {
    if STATE.load(Ordering::Acquire) != NOT_STARTED {
        return Err(Error(
            SVM_E_STATE,
            format!(
                "svm: {var} can only be set before svm_init() (it is read when the node starts)"
            ),
        ));
    }
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    match unsafe { cabi::c_str(file) } {
        None => std::env::remove_var(var),
        Some(f) => {
            let f = f
                .to_str()
                .map_err(|_| arg(&format!("the {var} file name is not UTF-8")))?;
            if f.is_empty() {
                return Err(arg(&format!("an empty {var} file name")));
            }
            // Absolute, as svmrun passes it: rank 0 merges the parts every node writes.
            let path = std::env::current_dir()
                .map(|d| d.join(f))
                .map_err(|e| Error(SVM_E_ARG, format!("svm: {var}: no current directory: {e}")))?;
            std::env::set_var(var, path);
        }
    }
    Ok(())
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_set_profile(file: *const c_char) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry(true, || unsafe { set_before_init("SVM_PROFILE", file) })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_set_trace(file: *const c_char) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry(true, || unsafe { set_before_init("SVM_TRACE", file) })
}

#[no_mangle]
pub extern "C" fn svm_finish() -> c_int {
    entry(false, || {
        let h = HANDLE.lock().unwrap_or_else(|p| p.into_inner()).take();
        STATE.store(FINISHED, Ordering::Release);
        match h {
            Some(svm) => Ok(svm.finish()?),
            None => running(),
        }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_node_id(id: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry(false, || unsafe { out(id, api::node_id() as c_int, "id") })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_nodes(count: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry(false, || unsafe {
        out(count, api::nodes() as c_int, "count")
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_page_size(bytes: *mut usize) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry(false, || unsafe { out(bytes, api::page_size(), "bytes") })
}

// ---------------------------------------------------------------------------- regions

/// `svm_home_t` of svm.h.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SvmHome {
    kind: c_int,
    node: c_int,
    nodes: *const c_int,
    pages: *const u64,
    count: usize,
}

fn node_id(n: c_int) -> Res<u16> {
    u16::try_from(n).map_err(|_| Error(SVM_E_NODE, format!("svm: there is no node {n}")))
}

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn home(p: *const SvmHome) -> Res<Home> {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    let Some(h) = (unsafe { cabi::read_in(p) }) else {
        return Ok(Home::Node(0));
    };
    let list = |what: &str| -> Res<Vec<c_int>> {
        if h.count == 0 || h.count > MAX_HOME_LIST {
            return Err(arg(&format!(
                "home policy {what}: count {} is not in 1..={MAX_HOME_LIST}",
                h.count
            )));
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { cabi::read_array(h.nodes, h.count) }
            .ok_or_else(|| arg(&format!("home policy {what}: `nodes` is NULL")))
    };
    Ok(match h.kind {
        0 => Home::Node(node_id(h.node)?),
        1 => Home::Block,
        2 => Home::Cyclic,
        3 => Home::Custom(
            list("SVM_HOME_CUSTOM")?
                .into_iter()
                .map(node_id)
                .collect::<Res<_>>()?,
        ),
        4 => {
            let nodes = list("SVM_HOME_RUNS")?;
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            let pages = unsafe { cabi::read_array(h.pages, h.count) }
                .ok_or_else(|| arg("home policy SVM_HOME_RUNS: `pages` is NULL"))?;
            Home::Runs(
                nodes
                    .into_iter()
                    .zip(pages)
                    .map(|(n, p)| Ok((node_id(n)?, p)))
                    .collect::<Res<_>>()?,
            )
        }
        5 => Home::FirstTouch,
        k => return Err(arg(&format!("unknown home policy kind {k}"))),
    })
}

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn create(size: usize, protocol: Option<&str>, h: *const SvmHome, r: *mut u32) -> Res {
    if r.is_null() {
        return Err(arg("`region` is NULL"));
    }
    if size == 0 {
        return Err(arg("a region of 0 bytes"));
    }
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    let info = region::create(size, unsafe { home(h) }?, protocol)?;
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { out(r, info.id, "region") }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_create(
    size: usize,
    protocol: c_int,
    home: *const SvmHome,
    region: *mut u32,
) -> c_int {
    entry(false, || {
        let name = match protocol {
            0 => None,
            1..=3 => Some(svm_core::protocol::PROTOCOL_NAMES[protocol as usize - 1]),
            p => {
                return Err(Error(
                    SVM_E_PROTOCOL,
                    format!(
                    "svm: unknown protocol {p} (SVM_PROTOCOL_DEFAULT, _SC_SW, _SC_MW or _SCOPE)"
                ),
                ))
            }
        };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { create(size, name, home, region) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_create_named(
    size: usize,
    protocol: *const c_char,
    home: *const SvmHome,
    region: *mut u32,
) -> c_int {
    entry(false, || {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let name = match unsafe { cabi::c_str(protocol) } {
            None => None,
            Some(s) => Some(
                s.to_str()
                    .map_err(|_| Error(SVM_E_PROTOCOL, "svm: protocol name is not UTF-8".into()))?,
            ),
        };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { create(size, name, home, region) }
    })
}

#[no_mangle]
pub extern "C" fn svm_region_destroy(region: u32) -> c_int {
    entry(false, || Ok(region::destroy(region)?))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_addr(region: u32, addr: *mut *mut c_void) -> c_int {
    entry(false, || {
        let info = region::info(region)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(addr, info.addr as *mut c_void, "addr") }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_size(region: u32, size: *mut usize) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry(false, || unsafe {
        out(size, region::info(region)?.size, "size")
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_lookup(
    addr: *const c_void,
    region: *mut u32,
    offset: *mut usize,
) -> c_int {
    entry(false, || {
        let (info, off) = region::lookup(addr as usize)?
            .ok_or_else(|| Error(SVM_E_ADDR, format!("svm: {addr:p} is in no live region")))?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(region, info.id, "region") }?;
        if !offset.is_null() {
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            unsafe { out(offset, off, "offset") }?;
        }
        Ok(())
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_alloc(
    region: u32,
    size: usize,
    ptr: *mut *mut c_void,
) -> c_int {
    entry(false, || {
        if ptr.is_null() {
            return Err(arg("`ptr` is NULL"));
        }
        let a = region::alloc(region, size)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(ptr, a as *mut c_void, "ptr") }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_free(region: u32, ptr: *mut c_void) -> c_int {
    entry(false, || Ok(region::free(region, ptr as usize)?))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_alloc_local(size: usize, ptr: *mut *mut c_void) -> c_int {
    // SAFETY: the C caller's contract, passed on (this function's `# Safety`).
    unsafe { alloc_local_into(size, ptr, api::alloc_local::<u8>) }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_alloc_local_first_touch(size: usize, ptr: *mut *mut c_void) -> c_int {
    // SAFETY: the C caller's contract, passed on (this function's `# Safety`).
    unsafe { alloc_local_into(size, ptr, api::alloc_local_first_touch::<u8>) }
}

/// `*ptr` = the address of `size` bytes from one of this node's local allocators.
///
/// # Safety
/// `ptr` is NULL or valid for a write of one pointer.
unsafe fn alloc_local_into(
    size: usize,
    ptr: *mut *mut c_void,
    alloc: fn(usize) -> api::Result<api::SharedSlice<u8>>,
) -> c_int {
    entry(false, || {
        if ptr.is_null() {
            return Err(arg("`ptr` is NULL"));
        }
        let s = alloc(size)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(ptr, s.addr() as *mut c_void, "ptr") }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_free_local(ptr: *mut c_void) -> c_int {
    entry(false, || Ok(api::free_local_addr(ptr as usize)?))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_home_of(addr: *const c_void, node: *mut c_int) -> c_int {
    entry(false, || {
        let h = api::home_of(addr as usize).ok_or_else(|| {
            Error(
                SVM_E_ADDR,
                format!(
                    "svm: {addr:p} is not shared memory, or a first-touch page not touched here"
                ),
            )
        })?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(node, h as c_int, "node") }
    })
}

// ---------------------------------------------------------------------------- synchronisation

#[no_mangle]
pub extern "C" fn svm_lock(id: u64) -> c_int {
    entry(false, || Ok(api::lock_id(id)?))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_trylock(id: u64, acquired: *mut c_int) -> c_int {
    entry(false, || {
        if acquired.is_null() {
            return Err(arg("`acquired` is NULL"));
        }
        let got = api::try_lock_id(id)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(acquired, got as c_int, "acquired") }
    })
}

#[no_mangle]
pub extern "C" fn svm_unlock(id: u64) -> c_int {
    entry(false, || Ok(api::unlock_id(id)?))
}

#[no_mangle]
pub extern "C" fn svm_barrier() -> c_int {
    entry(false, || Ok(api::barrier()?))
}

#[no_mangle]
pub extern "C" fn svm_barrier_id(id: u64, count: c_uint) -> c_int {
    entry(false, || Ok(api::Barrier::new(id, count).wait()?))
}

#[no_mangle]
pub extern "C" fn svm_sem_post(id: u64) -> c_int {
    entry(false, || Ok(api::sem_post(id)?))
}

#[no_mangle]
pub extern "C" fn svm_sem_wait(id: u64) -> c_int {
    entry(false, || Ok(api::sem_wait(id)?))
}

// ---------------------------------------------------------------------------- messages

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_send(to: c_int, tag: u64, data: *const c_void, len: usize) -> c_int {
    entry(false, || {
        let to = usize::try_from(to)
            .map_err(|_| Error(SVM_E_NODE, format!("svm: there is no node {to}")))?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let bytes = unsafe { cabi::bytes(data as *const u8, len) }
            .ok_or_else(|| arg("`data` is NULL with a non-zero length"))?;
        Ok(api::send_message(to, tag, bytes)?)
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_recv(
    from: c_int,
    tag: u64,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
    sender: *mut c_int,
    timeout_ms: c_int,
) -> c_int {
    entry(false, || {
        if len.is_null() {
            return Err(arg("`len` is NULL"));
        }
        if cap > 0 && buf.is_null() {
            return Err(arg("`buf` is NULL with a non-zero capacity"));
        }
        if from != -1 && (from < 0 || from as usize >= api::nodes()) {
            return Err(Error(
                SVM_E_NODE,
                format!(
                    "svm: there is no node {from} in a job of {} nodes",
                    api::nodes()
                ),
            ));
        }
        if tag >= api::RESERVED_IDS {
            return Err(Error(
                SVM_E_ID,
                format!("svm: tag {tag} is reserved for the runtime (tags must be below 2^63)"),
            ));
        }
        let timeout = (timeout_ms >= 0).then(|| Duration::from_millis(timeout_ms as u64));
        let m = api::recv_message(
            |m| m.tag == tag && (from == -1 || m.from as c_int == from),
            timeout,
        )?
        .ok_or_else(|| {
            Error(
                SVM_E_TIMEOUT,
                format!(
                    "svm: node {}: no message with tag {tag} within {timeout_ms} ms",
                    api::node_id()
                ),
            )
        })?;
        let n = m.data.len().min(cap);
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        if !unsafe { cabi::copy_bytes(buf as *mut u8, m.data.as_ptr(), n) } {
            return Err(arg("`buf` is NULL"));
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(len, m.data.len(), "len") }?;
        if !sender.is_null() {
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            unsafe { out(sender, m.from as c_int, "sender") }?;
        }
        if m.data.len() > cap {
            return Err(Error(
                SVM_E_TRUNC,
                format!(
                    "svm: a message of {} bytes did not fit the buffer of {cap} bytes",
                    m.data.len()
                ),
            ));
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------- statistics

/// `svm_stats_t` of svm.h.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct SvmStats {
    node: c_int,
    nodes: c_int,
    read_faults: u64,
    write_faults: u64,
    local_faults: u64,
    remote_faults: u64,
    pages_fetched: u64,
    bytes_fetched: u64,
    pages_served: u64,
    invalidations: u64,
    messages_sent: u64,
    messages_received: u64,
    bytes_sent: u64,
    bytes_received: u64,
    twins_made: u64,
    diffs_created: u64,
    diffs_applied: u64,
    diff_bytes_sent: u64,
    diff_bytes_applied: u64,
    notices_sent: u64,
    notice_invalidations: u64,
    read_fault_mean_us: f64,
    write_fault_mean_us: f64,
    lock_acquire_mean_us: f64,
    barrier_wait_mean_us: f64,
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_stats(stats: *mut SvmStats) -> c_int {
    entry(false, || {
        let s = api::stats();
        let m = s.messages.values();
        let c = SvmStats {
            node: s.node as c_int,
            nodes: s.nodes as c_int,
            read_faults: s.read_faults,
            write_faults: s.write_faults,
            local_faults: s.local_faults,
            remote_faults: s.remote_faults,
            pages_fetched: s.pages_fetched,
            bytes_fetched: s.bytes_fetched,
            pages_served: s.pages_served,
            invalidations: s.invalidations,
            messages_sent: m.clone().map(|m| m.sent).sum(),
            messages_received: m.clone().map(|m| m.received).sum(),
            bytes_sent: m.clone().map(|m| m.sent_bytes).sum(),
            bytes_received: m.map(|m| m.received_bytes).sum(),
            twins_made: s.twins_made,
            diffs_created: s.diffs_created,
            diffs_applied: s.diffs_applied,
            diff_bytes_sent: s.diff_bytes_sent,
            diff_bytes_applied: s.diff_bytes_applied,
            notices_sent: s.notices_sent,
            notice_invalidations: s.notice_invalidations,
            read_fault_mean_us: s.read_fault_latency.mean_us,
            write_fault_mean_us: s.write_fault_latency.mean_us,
            lock_acquire_mean_us: s.lock_acquire_latency.mean_us,
            barrier_wait_mean_us: s.barrier_wait.mean_us,
        };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(stats, c, "stats") }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_stats_json(buf: *mut c_char, cap: usize, len: *mut usize) -> c_int {
    entry(false, || {
        let json = api::stats().to_json();
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(len, json.len(), "len") }?;
        if cap > json.len() {
            let mut bytes = json.into_bytes();
            bytes.push(0);
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            if !unsafe { cabi::copy_bytes(buf as *mut u8, bytes.as_ptr(), bytes.len()) } {
                return Err(arg("`buf` is NULL"));
            }
            return Ok(());
        }
        if cap > 0 {
            let mut part = json.as_bytes()[..cap - 1].to_vec();
            part.push(0);
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            if !unsafe { cabi::copy_bytes(buf as *mut u8, part.as_ptr(), part.len()) } {
                return Err(arg("`buf` is NULL"));
            }
        }
        Err(Error(
            SVM_E_TRUNC,
            format!(
                "svm: the statistics need {} bytes and a NUL; the buffer has {cap}",
                json.len()
            ),
        ))
    })
}
