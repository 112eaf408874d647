//! The `deck_mbox_*` entry points: creating mailboxes, posting to them, retrieving from them
//! and naming them.

use std::ffi::{c_char, c_int, c_long};
use std::sync::Arc;
use std::time::Duration;

use svm_comm::deck::Mbox;

use crate::args::{id_of, mbox, mbox_t, msg_ref, name, put, put_msg};
use crate::error::{
    code, fail, guard, DECK_EAGAIN, DECK_EINVAL, DECK_ENOINIT, DECK_ETIMEDOUT, DECK_OK,
};
use crate::state::{deck, state};
use crate::{deck_mbox_t, deck_msg_t};

/// # C contract
/// `out` NULL or writable; `nm` NULL or a NUL-terminated string.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_create(out: *mut deck_mbox_t, nm: *const c_char) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(fail(DECK_EINVAL, "NULL mailbox"));
        }
        let d = deck()?;
        let b = d.mbox_create();
        if !nm.is_null() {
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            d.bind(&b, unsafe { name(nm) }?).map_err(code)?;
        }
        let id = b.id();
        if let Some(st) = state().as_mut() {
            st.owned.insert(id.id, Arc::new(b));
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { put(out, mbox_t(id)) }?;
        Ok(DECK_OK)
    })
}

fn owned(b: &deck_mbox_t) -> Result<Arc<Mbox>, c_int> {
    let st = state();
    let st = st
        .as_ref()
        .ok_or_else(|| fail(DECK_ENOINIT, "deck_init has not been called"))?;
    if b.node != st.deck.node() as u32 {
        return Err(fail(
            DECK_EINVAL,
            "only the node that created a mailbox retrieves from it",
        ));
    }
    st.owned
        .get(&b.id)
        .cloned()
        .ok_or_else(|| fail(DECK_EINVAL, "no such mailbox (destroyed?)"))
}

/// # C contract
/// `b` NULL or a valid mailbox.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_destroy(b: *mut deck_mbox_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let b = unsafe { mbox(b) }?;
        owned(&b)?;
        if let Some(st) = state().as_mut() {
            st.owned.remove(&b.id);
        }
        Ok(DECK_OK)
    })
}

/// # C contract
/// `b` NULL or a valid mailbox; `m` NULL or a live message.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_post(b: *const deck_mbox_t, m: *const deck_msg_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let id = id_of(&unsafe { mbox(b) }?)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let m = unsafe { msg_ref(m, "NULL message") }?;
        deck()?.post(id, m).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// `timeout`: None blocks, Some(0) does not wait.
///
/// # C contract
/// `b` NULL or valid; `out` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn retrieve(
    b: *const deck_mbox_t,
    out: *mut *mut deck_msg_t,
    timeout: Option<Duration>,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(fail(DECK_EINVAL, "NULL output pointer"));
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let b = owned(&unsafe { mbox(b) }?)?;
        let m = match timeout {
            None => b.retrieve(),
            Some(t) if t.is_zero() => b
                .try_retrieve()
                .ok_or_else(|| fail(DECK_EAGAIN, "no message"))?,
            Some(t) => b
                .retrieve_timeout(t)
                .ok_or_else(|| fail(DECK_ETIMEDOUT, "no message in time"))?,
        };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { put_msg(out, m) }?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `b` NULL or valid; `out` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_retrv(
    b: *const deck_mbox_t,
    out: *mut *mut deck_msg_t,
) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { retrieve(b, out, None) }
}

/// # C contract
/// `b` NULL or valid; `out` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_tretrv(
    b: *const deck_mbox_t,
    out: *mut *mut deck_msg_t,
    timeout_ms: c_long,
) -> c_int {
    let t = Duration::from_millis(timeout_ms.max(1) as u64);
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { retrieve(b, out, Some(t)) }
}

/// # C contract
/// `b` NULL or valid; `out` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_tryretrv(
    b: *const deck_mbox_t,
    out: *mut *mut deck_msg_t,
) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { retrieve(b, out, Some(Duration::ZERO)) }
}

/// # C contract
/// `b` NULL or valid; `nm` NULL or a NUL-terminated string.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_bind(b: *const deck_mbox_t, nm: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let b = owned(&unsafe { mbox(b) }?)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        deck()?.bind(&b, unsafe { name(nm) }?).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `out` NULL or writable; `nm` NULL or a NUL-terminated string.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn fetch(out: *mut deck_mbox_t, nm: *const c_char, timeout: Option<Duration>) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let n = unsafe { name(nm) }?;
        let d = deck()?;
        let id = match timeout {
            None => d.fetch(n),
            Some(t) => d.fetch_timeout(n, t),
        }
        .map_err(code)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { put(out, mbox_t(id)) }?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `out` NULL or writable; `nm` NULL or a NUL-terminated string.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_fetch(out: *mut deck_mbox_t, nm: *const c_char) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { fetch(out, nm, None) }
}

/// # C contract
/// `out` NULL or writable; `nm` NULL or a NUL-terminated string.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_mbox_tfetch(
    out: *mut deck_mbox_t,
    nm: *const c_char,
    timeout_ms: c_long,
) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe {
        fetch(
            out,
            nm,
            Some(Duration::from_millis(timeout_ms.max(0) as u64)),
        )
    }
}
