//! The `deck_msg_*` entry points: creating, packing and unpacking messages.

use std::ffi::{c_int, c_void};
use std::panic::catch_unwind;

use svm_comm::deck::{MboxId, Message};
use svm_core::sys::cabi;

use crate::args::{id_of, mbox, mbox_t, msg, msg_ref, put, put_msg};
use crate::error::{code, fail, guard, DECK_EINVAL, DECK_EOVERFLOW, DECK_OK};
use crate::{deck_mbox_t, deck_msg_t};

/// # C contract
/// `out` is NULL or valid for a write.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_create(out: *mut *mut deck_msg_t, size: usize) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    guard(|| unsafe { put_msg(out, Message::new(size)) }.map(|_| DECK_OK))
}

/// # C contract
/// `m` is NULL or a live message, not used afterwards.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_destroy(m: *mut deck_msg_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let m = unsafe { cabi::handle_take(m) }.ok_or_else(|| fail(DECK_EINVAL, "NULL message"))?;
        drop(m);
        Ok(DECK_OK)
    })
}

/// # C contract
/// `m` is NULL or a live message.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_clear(m: *mut deck_msg_t) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    guard(|| unsafe { msg(m) }.map(|m| m.clear()).map(|_| DECK_OK))
}

/// # C contract
/// `m` is NULL or a live message.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_reset(m: *mut deck_msg_t) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    guard(|| unsafe { msg(m) }.map(|m| m.reset()).map(|_| DECK_OK))
}

/// # C contract
/// `m` is NULL or a live message.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_length(m: *const deck_msg_t) -> usize {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    catch_unwind(|| unsafe { cabi::handle_ref(m) }.map_or(0, |m| m.0.len())).unwrap_or(0)
}

/// # C contract
/// `m` is NULL or a live message; `data` is valid for `len` bytes (or `len` is 0).
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_pack(
    m: *mut deck_msg_t,
    data: *const c_void,
    len: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let m = unsafe { msg(m) }?;
        let b =
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            unsafe { cabi::bytes(data.cast::<u8>(), len) }.ok_or_else(|| fail(DECK_EINVAL, "NULL data"))?;
        m.pack_bytes(b).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `m` is NULL or a live message; `buf` valid for `cap` bytes; `len` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_unpack(
    m: *mut deck_msg_t,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let m = unsafe { msg(m) }?;
        let b = m.unpack_bytes().map_err(code)?;
        if b.len() > cap {
            return Err(fail(
                DECK_EOVERFLOW,
                &format!("{} bytes do not fit a buffer of {cap}", b.len()),
            ));
        }
        // `buf` has room for `cap >= b.len()` bytes (the C caller's contract).
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        if !unsafe { cabi::copy_bytes(buf.cast::<u8>(), b.as_ptr(), b.len()) } {
            return Err(fail(DECK_EINVAL, "NULL buffer"));
        }
        // `len` is optional: NULL means the caller does not want it.
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { cabi::write_out(len, b.len()) };
        Ok(DECK_OK)
    })
}

macro_rules! typed {
    ($pack:ident, $unpack:ident, $t:ty) => {
        /// # C contract
        /// `m` is NULL or a live message.
        ///
        /// # Safety
        /// Each pointer argument is NULL or valid, for the duration of the call, for the access this
        /// function's C documentation describes (the C caller's contract; NULL is refused with an
        /// error code).
        #[no_mangle]
        pub unsafe extern "C" fn $pack(m: *mut deck_msg_t, v: $t) -> c_int {
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            guard(|| unsafe { msg(m) }?.pack(&v).map(|_| DECK_OK).map_err(code))
        }
        /// # C contract
        /// `m` is NULL or a live message; `out` NULL or writable.
        ///
        /// # Safety
        /// Each pointer argument is NULL or valid, for the duration of the call, for the access this
        /// function's C documentation describes (the C caller's contract; NULL is refused with an
        /// error code).
        #[no_mangle]
        pub unsafe extern "C" fn $unpack(m: *mut deck_msg_t, out: *mut $t) -> c_int {
            guard(|| {
                if out.is_null() {
                    return Err(fail(DECK_EINVAL, "NULL output pointer"));
                }
                // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
                // `# Safety`) makes each NULL or valid for this access.
                let v = unsafe { msg(m) }?.unpack::<$t>().map_err(code)?;
                // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
                // `# Safety`) makes each NULL or valid for this access.
                unsafe { put(out, v) }?;
                Ok(DECK_OK)
            })
        }
    };
}
typed!(deck_msg_pack_int32, deck_msg_unpack_int32, i32);
typed!(deck_msg_pack_uint32, deck_msg_unpack_uint32, u32);
typed!(deck_msg_pack_int64, deck_msg_unpack_int64, i64);
typed!(deck_msg_pack_uint64, deck_msg_unpack_uint64, u64);
typed!(deck_msg_pack_double, deck_msg_unpack_double, f64);

/// # C contract
/// `m` NULL or a live message; `b` NULL or a valid mailbox.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_pack_mbox(m: *mut deck_msg_t, b: *const deck_mbox_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let id = id_of(&unsafe { mbox(b) }?)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { msg(m) }?.pack(&id).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `m` NULL or a live message; `b` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_unpack_mbox(m: *mut deck_msg_t, b: *mut deck_mbox_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let id = unsafe { msg(m) }?.unpack::<MboxId>().map_err(code)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { put(b, mbox_t(id)) }?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `m` and `inner` NULL or live messages (distinct).
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_pack_msg(m: *mut deck_msg_t, inner: *const deck_msg_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let inner = unsafe { msg_ref(inner, "NULL inner message") }?.clone();
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { msg(m) }?.pack(&inner).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `m` NULL or a live message; `out` NULL or writable.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_msg_unpack_msg(
    m: *mut deck_msg_t,
    out: *mut *mut deck_msg_t,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return Err(fail(DECK_EINVAL, "NULL output pointer"));
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let inner = unsafe { msg(m) }?.unpack::<Message>().map_err(code)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { put_msg(out, inner) }?;
        Ok(DECK_OK)
    })
}
