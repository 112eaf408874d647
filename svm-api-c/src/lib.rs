//! libsvm: the native C API (`include/svm.h`, reference in docs/c-api.md), a thin layer over
//! the native Rust API (`svm_core::api`, `svm_core::region`).
//!
//! Every exported function returns `SVM_OK` or a negative error code, keeps the full message
//! for `svm_last_error`, and catches panics (none crosses the C boundary). Pointers from C go
//! through `svm_core::sys::cabi`. The runtime's state (not started, running, finished) is
//! checked on every call, so calls after `svm_finish` are errors.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

use svm_core::api::{self, Svm, SvmError};
use svm_core::space::SpaceError;
use svm_core::sys::cabi;

// The exported calls, by area; what they share (codes, `entry`, `out`) is below.
mod job;
mod messages;
mod regions;
mod stats;
mod sync;

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
