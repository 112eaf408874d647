//! The collective entry points: barrier, broadcast, reduction and gather across all nodes.

use std::ffi::c_int;

use svm_core::sys::cabi;

use crate::args::{msg, msg_ref, put};
use crate::deck_msg_t;
use crate::error::{code, fail, guard, DECK_EINVAL, DECK_OK};
use crate::state::deck;

#[no_mangle]
pub extern "C" fn deck_barrier() -> c_int {
    guard(|| deck()?.barrier().map(|_| DECK_OK).map_err(code))
}

fn root_of(root: c_int) -> Result<u16, c_int> {
    u16::try_from(root).map_err(|_| fail(DECK_EINVAL, "root out of range"))
}

/// # C contract
/// `m` NULL or a live message.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_bcast(root: c_int, m: *mut deck_msg_t) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let m = unsafe { msg(m) }?;
        deck()?.broadcast(root_of(root)?, m).map_err(code)?;
        Ok(DECK_OK)
    })
}

/// # C contract
/// `result` NULL or writable (only written on the root).
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_reduce_double(
    root: c_int,
    v: f64,
    op: c_int,
    result: *mut f64,
) -> c_int {
    guard(|| {
        let f: fn(f64, f64) -> f64 = match op {
            0 => |a, b| a + b,
            1 => f64::min,
            2 => f64::max,
            _ => return Err(fail(DECK_EINVAL, "unknown reduction operation")),
        };
        if let Some(r) = deck()?.reduce(root_of(root)?, v, f).map_err(code)? {
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            unsafe { put(result, r) }?;
        }
        Ok(DECK_OK)
    })
}

/// # C contract
/// `m` NULL or a live message; on the root `out` has room for `deck_nodes()` pointers.
///
/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn deck_gather(
    root: c_int,
    m: *const deck_msg_t,
    out: *mut *mut deck_msg_t,
) -> c_int {
    guard(|| {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let m = unsafe { msg_ref(m, "NULL message") }?;
        let d = deck()?;
        if d.node() as c_int == root && out.is_null() {
            return Err(fail(DECK_EINVAL, "NULL output array on the root"));
        }
        if let Some(all) = d.gather(root_of(root)?, m).map_err(code)? {
            let handles: Vec<*mut deck_msg_t> = all
                .into_iter()
                .map(|x| cabi::handle_new(deck_msg_t(x)))
                .collect();
            // `out` has room for deck_nodes() entries on the root (the C caller's contract).
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            if !unsafe { cabi::write_array(out, &handles) } {
                // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
                // `# Safety`) makes each NULL or valid for this access.
                handles
                    .into_iter()
                    .for_each(|h| drop(unsafe { cabi::handle_take(h) }));
                return Err(fail(DECK_EINVAL, "NULL output array on the root"));
            }
        }
        Ok(DECK_OK)
    })
}
