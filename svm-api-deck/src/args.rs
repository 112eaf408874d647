//! Conversions between the C caller's arguments and svm-comm values: reads and writes through
//! the caller's pointers (under the crate's pointer contract, see the crate documentation) and
//! the `deck_mbox_t` <-> `MboxId` mapping.

use std::ffi::{c_char, c_int};

use svm_comm::deck::{MboxId, Message};
use svm_core::sys::cabi;

use crate::error::{fail, DECK_EINVAL};
use crate::{deck_mbox_t, deck_msg_t};

pub(crate) fn id_of(m: &deck_mbox_t) -> Result<MboxId, c_int> {
    let node = u16::try_from(m.node).map_err(|_| fail(DECK_EINVAL, "mailbox node out of range"))?;
    Ok(MboxId { node, id: m.id })
}

/// Writes `v` through the C out-parameter `p`.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
pub(crate) unsafe fn put<T>(p: *mut T, v: T) -> Result<(), c_int> {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    if unsafe { cabi::write_out(p, v) } {
        Ok(())
    } else {
        Err(fail(DECK_EINVAL, "NULL output pointer"))
    }
}

/// Hands `m` to C as a new message handle written through `out` (nothing is allocated when
/// `out` is NULL).
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
pub(crate) unsafe fn put_msg(out: *mut *mut deck_msg_t, m: Message) -> Result<(), c_int> {
    if out.is_null() {
        return Err(fail(DECK_EINVAL, "NULL output pointer"));
    }
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { put(out, cabi::handle_new(deck_msg_t(m))) }
}

/// The message behind a handle (NULL or a live message from this library, not used by another
/// thread meanwhile: `deck.h`'s contract).
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
pub(crate) unsafe fn msg<'a>(p: *mut deck_msg_t) -> Result<&'a mut Message, c_int> {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { cabi::handle_mut(p) }
        .map(|m| &mut m.0)
        .ok_or_else(|| fail(DECK_EINVAL, "NULL message"))
}

/// The message behind a handle, read only.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
pub(crate) unsafe fn msg_ref<'a>(p: *const deck_msg_t, what: &str) -> Result<&'a Message, c_int> {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { cabi::handle_ref(p) }
        .map(|m| &m.0)
        .ok_or_else(|| fail(DECK_EINVAL, what))
}

/// A copy of the C caller's mailbox (NULL or a valid `deck_mbox_t`).
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
pub(crate) unsafe fn mbox(p: *const deck_mbox_t) -> Result<deck_mbox_t, c_int> {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { cabi::read_in(p) }.ok_or_else(|| fail(DECK_EINVAL, "NULL mailbox"))
}

/// A name passed by the C caller (NULL or a NUL-terminated string), which must be UTF-8.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
pub(crate) unsafe fn name<'a>(p: *const c_char) -> Result<&'a str, c_int> {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { cabi::c_str(p) }
        .ok_or_else(|| fail(DECK_EINVAL, "NULL name"))?
        .to_str()
        .map_err(|_| fail(DECK_EINVAL, "name is not UTF-8"))
}

pub(crate) fn mbox_t(id: MboxId) -> deck_mbox_t {
    deck_mbox_t {
        node: id.node as u32,
        id: id.id,
    }
}
