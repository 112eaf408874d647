//! Messages between nodes.

use super::*;
use std::ffi::c_void;
use std::time::Duration;

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
