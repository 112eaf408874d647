//! The node's statistics, as a struct and as JSON.

use super::*;

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
