//! DECK's error codes and how errors reach C: each call's return code plus the calling
//! thread's last error text (`deck_strerror`), and the panic guard every entry point runs in.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use svm_comm::deck::DeckError;
use svm_core::sys::cabi;

pub const DECK_OK: c_int = 0;
pub const DECK_ERROR: c_int = -1;
pub const DECK_EINVAL: c_int = -2;
pub const DECK_ETIMEDOUT: c_int = -3;
pub const DECK_EOVERFLOW: c_int = -4;
pub const DECK_EEND: c_int = -5;
pub const DECK_ETYPE: c_int = -6;
pub const DECK_ENOINIT: c_int = -7;
pub const DECK_EAGAIN: c_int = -8;
pub const DECK_EINTERNAL: c_int = -9;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_error(s: String) {
    let c = CString::new(s.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

pub(crate) fn code(e: DeckError) -> c_int {
    let c = match &e {
        DeckError::Overflow { .. } => DECK_EOVERFLOW,
        DeckError::EndOfMessage => DECK_EEND,
        DeckError::TypeMismatch { .. } => DECK_ETYPE,
        DeckError::NoSuchNode(_) | DeckError::NoSuchMailbox(_) | DeckError::BadName => DECK_EINVAL,
        DeckError::Timeout(_) => DECK_ETIMEDOUT,
        DeckError::Comm(_) | DeckError::Setup(_) => DECK_ERROR,
    };
    set_error(e.to_string());
    c
}

pub(crate) fn fail(c: c_int, why: &str) -> c_int {
    set_error(why.to_string());
    c
}

/// Runs `f`, turning a panic into `DECK_EINTERNAL`.
pub(crate) fn guard(f: impl FnOnce() -> Result<c_int, c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(c)) => c,
        Err(p) => {
            let what = cabi::panic_message(&*p);
            fail(DECK_EINTERNAL, &format!("internal error: {what}"))
        }
    }
}

/// The calling thread's last error text (valid until its next DECK call).
#[no_mangle]
pub extern "C" fn deck_strerror() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}
