//! `SMI_SHM_REGISTER`: memory the program allocated itself (outside the DSM window), exported
//! to other processes.
//!
//! Other processes can only reach memory inside the window, so a registered buffer gets a DSM
//! copy in this process's arena; importers (REMOTE, RDMA, `SMI_Put`/`SMI_Get`) see that copy.
//! The buffer and its copy are made equal at every SMI synchronisation point of this process
//! (barriers, mutexes, signals, messages, progress counters, flushes, transfers): the bytes
//! this process changed since the last point go to the copy, then the bytes other processes
//! changed in the copy come back into the buffer. A twin (the contents at the last point)
//! tells the two apart, so both sides' writes survive, byte-exact, as in a multiple-writer
//! protocol. Unsynchronised polling of a registered buffer does not see remote stores.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::ffi;

struct Registered {
    user: usize,
    copy: usize,
    len: usize,
    /// Contents of both at the last synchronisation point.
    twin: Vec<u8>,
}

static REGISTERED: Mutex<Vec<Registered>> = Mutex::new(Vec::new());
static ANY: AtomicBool = AtomicBool::new(false);

fn table() -> std::sync::MutexGuard<'static, Vec<Registered>> {
    REGISTERED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs of indices where `a` and `b` differ, as (start, end).
fn diff_runs(a: &[u8], b: &[u8]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut i = 0;
    let n = a.len().min(b.len());
    while i < n {
        // Skip equal 8-byte words quickly.
        if i + 8 <= n && a[i..i + 8] == b[i..i + 8] {
            i += 8;
            continue;
        }
        if a[i] == b[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && a[i] != b[i] {
            i += 1;
        }
        runs.push((start, i));
    }
    runs
}

/// Registers `len` bytes at `user` with the DSM copy at `copy` (filled with the buffer's
/// contents). False when the buffer cannot be read.
///
/// # Safety
/// Each address argument is 0 or valid for the access described above: the contract of the
/// exported function that passes on its C caller's buffers.
pub(crate) unsafe fn add(_s: &crate::Smi, user: usize, copy: usize, len: usize) -> bool {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    let Some(cur) = (unsafe { ffi::bytes_from(user, len) }) else {
        return false;
    };
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    if !unsafe { ffi::bytes_to(copy, &cur) } {
        return false;
    }
    let mut t = table();
    t.push(Registered {
        user,
        copy,
        len,
        twin: cur,
    });
    ANY.store(true, Ordering::Release);
    true
}

/// Forgets the registration whose DSM copy is at `copy`.
pub(crate) fn remove(_s: &crate::Smi, copy: usize) {
    let mut t = table();
    t.retain(|r| r.copy != copy);
    ANY.store(!t.is_empty(), Ordering::Release);
}

/// Makes every registered buffer and its DSM copy equal (this process's changes out, the
/// others' changes in). Called at each synchronisation point: before a release, after an
/// acquire.
pub(crate) fn sync() {
    if !ANY.load(Ordering::Acquire) {
        return;
    }
    let mut t = table();
    for r in t.iter_mut() {
        // Out: what this process wrote into its buffer.
        // SAFETY: `r.user` and `r.copy` are `r.len` bytes each: the C program's buffer,
        // which SMI's contract keeps valid while registered, and its DSM copy made by `add`.
        if let Some(cur) = unsafe { ffi::bytes_from(r.user, r.len) } {
            for (a, b) in diff_runs(&cur, &r.twin) {
                // SAFETY: `r.user` and `r.copy` are `r.len` bytes each: the C program's buffer,
                // which SMI's contract keeps valid while registered, and its DSM copy made by `add`.
                unsafe { ffi::bytes_to(r.copy + a, &cur[a..b]) };
                r.twin[a..b].copy_from_slice(&cur[a..b]);
            }
        }
        // In: what others wrote into the copy.
        // SAFETY: `r.user` and `r.copy` are `r.len` bytes each: the C program's buffer,
        // which SMI's contract keeps valid while registered, and its DSM copy made by `add`.
        if let Some(cpy) = unsafe { ffi::bytes_from(r.copy, r.len) } {
            for (a, b) in diff_runs(&cpy, &r.twin) {
                // SAFETY: `r.user` and `r.copy` are `r.len` bytes each: the C program's buffer,
                // which SMI's contract keeps valid while registered, and its DSM copy made by `add`.
                unsafe { ffi::bytes_to(r.user + a, &cpy[a..b]) };
                r.twin[a..b].copy_from_slice(&cpy[a..b]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::diff_runs;

    #[test]
    fn runs_cover_exactly_the_differing_bytes() {
        let a = vec![0u8; 40];
        let mut b = a.clone();
        b[3] = 1;
        b[4] = 1;
        b[17] = 9;
        b[39] = 2;
        assert_eq!(diff_runs(&a, &b), vec![(3, 5), (17, 18), (39, 40)]);
        assert!(diff_runs(&a, &a).is_empty());
    }
}
