//! Transfers (`SMI_Memcpy`, `SMI_Put`, ...), signals and small messages.
//!
//! A copy into or out of shared memory is an ordinary copy in the DSM (pages are fetched on
//! touch); unless `SMI_MEMCPY_NOBARRIER` is given it ends with a release, as SMI's store
//! barrier made the data visible remotely. The asynchronous forms complete before they return:
//! their handles report completion at once. Signals and messages are svm user messages
//! (in order per pair of processes).

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::time::Duration;

use svm_core::api::{self, UserMessage};

use crate::consts::*;
use crate::table::with_region;
use crate::{entry, ffi, out, smi, sv, Res, Smi, TAG_MSG, TAG_SIGNAL};

/// Handle values are opaque to C and never dereferenced: a registry maps them to a status.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn new_handle(s: &Smi, status: c_int, h: *mut usize) -> Res {
    if h.is_null() {
        return Err(SMI_ERR_PARAM);
    }
    let v = {
        let mut st = s.st();
        st.next_handle += 1;
        let v = 0x5000 + st.next_handle * 16;
        st.handles.insert(v, status);
        v
    };
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { out(h, v) }
}

/// # Safety
/// Each address argument is 0 or valid for the access described above: the contract of the
/// exported function that passes on its C caller's buffers.
unsafe fn memcpy(s: &Smi, dst: usize, src: usize, len: usize, flags: c_int) -> Res {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    if !unsafe { ffi::copy(dst, src, len) } {
        return Err(SMI_ERR_PARAM);
    }
    if flags & MEMCPY_NOBARRIER == 0 {
        s.release()?;
    }
    Ok(())
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Memcpy(
    dst: *mut c_void,
    src: *mut c_void,
    len: usize,
    flags: c_int,
) -> c_int {
    entry("SMI_Memcpy", || {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { memcpy(smi()?, dst as usize, src as usize, len, flags) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Imemcpy(
    dst: *mut c_void,
    src: *mut c_void,
    len: usize,
    flags: c_int,
    h: *mut usize,
) -> c_int {
    entry("SMI_Imemcpy", || {
        let s = smi()?;
        if h.is_null() {
            return Err(SMI_ERR_PARAM);
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let r = unsafe { memcpy(s, dst as usize, src as usize, len, flags) };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { new_handle(s, r.err().unwrap_or(SMI_SUCCESS), h) }
    })
}

fn wait_handle(s: &Smi, h: usize, remove: bool) -> Res {
    let mut st = s.st();
    let status = if remove {
        st.handles.remove(&h)
    } else {
        st.handles.get(&h).copied()
    };
    match status.ok_or(SMI_ERR_PARAM)? {
        SMI_SUCCESS => Ok(()),
        e => Err(e),
    }
}

#[no_mangle]
pub extern "C" fn SMI_Memwait(h: usize) -> c_int {
    entry("SMI_Memwait", || wait_handle(smi()?, h, true))
}

#[no_mangle]
pub extern "C" fn SMI_Memtest(h: usize) -> c_int {
    entry("SMI_Memtest", || wait_handle(smi()?, h, false))
}

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn all(n: c_int, h: *mut usize, status: *mut c_int, remove: bool) -> Res {
    let s = smi()?;
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    let hs = unsafe {
        ffi::read_array(
            h as *const usize,
            usize::try_from(n).map_err(|_| SMI_ERR_PARAM)?,
        )
    }
    .ok_or(SMI_ERR_PARAM)?;
    let res: Vec<c_int> = hs
        .iter()
        .map(|x| wait_handle(s, *x, remove).err().unwrap_or(SMI_SUCCESS))
        .collect();
    if !status.is_null() {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { ffi::write_array(status, &res) };
    }
    match res.iter().find(|c| **c != SMI_SUCCESS) {
        Some(e) => Err(*e),
        None => Ok(()),
    }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_MemwaitAll(n: c_int, h: *mut usize, status: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_MemwaitAll", || unsafe { all(n, h, status, true) })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_MemtestAll(n: c_int, h: *mut usize, status: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_MemtestAll", || unsafe { all(n, h, status, false) })
}

/// Address of `[offset, offset+len)` of a region (RDMA regions included).
fn region_range(s: &Smi, region: c_int, offset: c_int, len: usize) -> Res<usize> {
    with_region(s, region, |r| {
        if !r.connected || offset < 0 || (offset as usize).saturating_add(len) > r.size {
            return Err(SMI_ERR_PARAM);
        }
        Ok(r.addr + offset as usize)
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Put(
    region: c_int,
    offset: c_int,
    src: *mut c_void,
    len: usize,
) -> c_int {
    entry("SMI_Put", || {
        let s = smi()?;
        let a = region_range(s, region, offset, len)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { memcpy(s, a, src as usize, len, 0) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Get(
    dst: *mut c_void,
    region: c_int,
    offset: c_int,
    len: usize,
) -> c_int {
    entry("SMI_Get", || {
        let s = smi()?;
        let a = region_range(s, region, offset, len)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { memcpy(s, dst as usize, a, len, MEMCPY_NOBARRIER) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Iput(
    region: c_int,
    offset: c_int,
    src: *mut c_void,
    len: usize,
    h: *mut usize,
) -> c_int {
    entry("SMI_Iput", || {
        let s = smi()?;
        if h.is_null() {
            return Err(SMI_ERR_PARAM);
        }
        let a = region_range(s, region, offset, len)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let r = unsafe { memcpy(s, a, src as usize, len, 0) };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { new_handle(s, r.err().unwrap_or(SMI_SUCCESS), h) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Iget(
    dst: *mut c_void,
    region: c_int,
    offset: c_int,
    len: usize,
    h: *mut usize,
) -> c_int {
    entry("SMI_Iget", || {
        let s = smi()?;
        if h.is_null() {
            return Err(SMI_ERR_PARAM);
        }
        let a = region_range(s, region, offset, len)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let r = unsafe { memcpy(s, dst as usize, a, len, MEMCPY_NOBARRIER) };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { new_handle(s, r.err().unwrap_or(SMI_SUCCESS), h) }
    })
}

/// Transfers cannot fail silently in svm (a lost connection ends the job), so a check only
/// has to make the writes visible (unless NOFLUSH).
fn check(s: &Smi, flags: c_int) -> Res {
    if flags & CHECK_NOFLUSH == 0 {
        s.release()?;
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn SMI_Check_transfer(flags: c_int) -> c_int {
    entry("SMI_Check_transfer", || check(smi()?, flags))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Check_transfer_addr(adr: *mut c_void, flags: c_int) -> c_int {
    entry("SMI_Check_transfer_addr", || {
        let s = smi()?;
        crate::table::find_range(s, adr as usize, 1)?;
        check(s, flags)
    })
}

#[no_mangle]
pub extern "C" fn SMI_Check_transfer_proc(proc_: c_int, flags: c_int) -> c_int {
    entry("SMI_Check_transfer_proc", || {
        let s = smi()?;
        crate::check_rank(s, proc_)?;
        check(s, flags)
    })
}

// ------------------------------------------------------------------------------- signals

fn from_filter(rank: c_int, tag: u64) -> impl FnMut(&UserMessage) -> bool {
    move |m: &UserMessage| m.tag == tag && (rank == SIGNAL_ANY || m.from as c_int == rank)
}

/// SMI's reading of a signal rank: when waiting, exactly `SMI_SIGNAL_ANY` means any process;
/// otherwise the `SMI_SIGNAL_ANY` bit (SMI's "global signalization" marker) is removed and the
/// rest is the rank (or `SMI_SIGNAL_BCAST`): `0 | SMI_SIGNAL_ANY` sends to process 0.
pub(crate) fn signal_rank(rank: c_int, waiting: bool) -> c_int {
    if waiting && rank == SIGNAL_ANY {
        rank
    } else {
        rank & !SIGNAL_ANY
    }
}

/// The process a signal is awaited from: any (`SMI_SIGNAL_ANY`) or a valid rank (this
/// process's own too: unlike SMI, which refuses it, a signal to oneself is delivered).
fn signal_source(s: &Smi, rank: c_int) -> Res<c_int> {
    let rank = signal_rank(rank, true);
    if rank != SIGNAL_ANY {
        crate::check_rank(s, rank)?;
    }
    Ok(rank)
}

#[no_mangle]
pub extern "C" fn SMI_Signal_send(rank: c_int) -> c_int {
    entry("SMI_Signal_send", || {
        let s = smi()?;
        let rank = signal_rank(rank, false);
        // A synchronisation point: what this process stored before the signal is visible to
        // its receiver (see `send`).
        s.release()?;
        if rank == SIGNAL_BCAST {
            for p in (0..s.n).filter(|p| *p != s.me) {
                sv(api::send_message(p, TAG_SIGNAL, &[]))?;
            }
            return Ok(());
        }
        let p = crate::check_rank(s, rank)?;
        sv(api::send_message(p, TAG_SIGNAL, &[]))
    })
}

#[no_mangle]
pub extern "C" fn SMI_Signal_wait(rank: c_int) -> c_int {
    entry("SMI_Signal_wait", || {
        let s = smi()?;
        let rank = signal_source(s, rank)?;
        sv(api::recv_message(from_filter(rank, TAG_SIGNAL), None))?
            .map(|_| ())
            .ok_or(SMI_ERR_OTHER)
    })
}

/// `smi_signal_handle_t`.
#[repr(C)]
pub struct SignalHandle {
    pub thread: libc::pthread_t,
    pub rank: c_int,
    pub fcn: Option<extern "C" fn(*mut c_void)>,
    pub arg: *mut c_void,
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Signal_setCallBack(
    rank: c_int,
    fcn: Option<extern "C" fn(*mut c_void)>,
    arg: *mut c_void,
    handle: *mut *mut SignalHandle,
) -> c_int {
    entry("SMI_Signal_setCallBack", || {
        let s = smi()?;
        let rank = signal_source(s, rank)?;
        let f = fcn.ok_or(SMI_ERR_PARAM)?;
        if handle.is_null() {
            return Err(SMI_ERR_PARAM);
        }
        let hp = ffi::malloc(std::mem::size_of::<SignalHandle>()) as *mut SignalHandle;
        if hp.is_null() {
            return Err(SMI_ERR_NOMEM);
        }
        let a = arg as usize;
        let t = std::thread::Builder::new()
            .name("smi-signal".into())
            .spawn(move || {
                let Ok(s) = smi() else { return };
                while !s.stop.load(Ordering::Acquire) {
                    if let Ok(Some(_)) = api::recv_message(
                        from_filter(rank, TAG_SIGNAL),
                        Some(Duration::from_millis(100)),
                    ) {
                        let _ = std::panic::catch_unwind(|| f(a as *mut c_void));
                        return;
                    }
                }
            });
        let t = match t {
            Ok(t) => t,
            Err(e) => {
                // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
                // `# Safety`) makes each NULL or valid for this access.
                unsafe { ffi::free(hp as *mut c_void) };
                eprintln!("smi[{}]: cannot start a signal thread: {e}", s.me);
                return Err(SMI_ERR_OTHER);
            }
        };
        use std::os::unix::thread::JoinHandleExt;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe {
            ffi::put(
                hp,
                SignalHandle {
                    thread: t.as_pthread_t(),
                    rank,
                    fcn,
                    arg,
                },
            )
        };
        s.st().signal_threads.insert(hp as usize, t);
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(handle, hp) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Signal_joinCallBack(handle: *mut *mut SignalHandle) -> c_int {
    entry("SMI_Signal_joinCallBack", || {
        let s = smi()?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let hp = unsafe { ffi::get(handle as *const *mut SignalHandle) }.ok_or(SMI_ERR_PARAM)?;
        let t = s
            .st()
            .signal_threads
            .remove(&(hp as usize))
            .ok_or(SMI_ERR_PARAM)?;
        let _ = t.join();
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { ffi::free(hp as *mut c_void) };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(handle, std::ptr::null_mut()) }
    })
}

// ------------------------------------------------------------------------------ messages

/// # Safety
/// Each address argument is 0 or valid for the access described above: the contract of the
/// exported function that passes on its C caller's buffers.
unsafe fn send(s: &Smi, buf: usize, count: c_int, dest: c_int) -> Res {
    let p = crate::check_rank(s, dest)?;
    // As in SMI: while an SMI_Isend to `dest` has not been completed by SMI_Send_wait, no other
    // message may go there.
    if s.st().isend.contains(&p) {
        return Err(SMI_ERR_PENDING);
    }
    let len = usize::try_from(count).map_err(|_| SMI_ERR_PARAM)?;
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    let data = unsafe { ffi::bytes_from(buf, len) }.ok_or(SMI_ERR_PARAM)?;
    // A synchronisation point, as on SCI, where this process's stores had reached the receiver
    // by the time a message or signal did: a release first, so under `sc-mw` the other copies
    // of the pages it wrote are invalidated before the message arrives (the invalidations
    // travel ahead of it on the same link, or the release waits for them). Without it, a
    // receiver that answers with plain stores to a page the sender holds (MP-MPICH's `put`:
    // the owner clears its buffer, signals, the sender copies the same data again) left the
    // sender's stale copy in place, and the sender's next copy, equal to that copy, sent no
    // diff. `sc-sw` invalidates at the store anyway; the release ends its holds.
    s.release()?;
    sv(api::send_message(p, TAG_MSG, &data))
}

/// # Safety
/// Each address argument is 0 or valid for the access described above: the contract of the
/// exported function that passes on its C caller's buffers.
unsafe fn recv(s: &Smi, buf: usize, count: c_int, src: c_int) -> Res {
    if src != SIGNAL_ANY {
        crate::check_rank(s, src)?;
    }
    let cap = usize::try_from(count).map_err(|_| SMI_ERR_PARAM)?;
    let m = sv(api::recv_message(from_filter(src, TAG_MSG), None))?.ok_or(SMI_ERR_OTHER)?;
    let n = m.data.len().min(cap);
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    if !unsafe { ffi::bytes_to(buf, &m.data[..n]) } {
        return Err(SMI_ERR_PARAM);
    }
    if m.data.len() > cap {
        eprintln!(
            "smi[{}]: SMI_Recv: a message of {} bytes was cut to {cap}",
            s.me,
            m.data.len()
        );
        return Err(SMI_ERR_PARAM);
    }
    Ok(())
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Send(buf: *mut c_void, count: c_int, dest: c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_Send", || unsafe {
        send(smi()?, buf as usize, count, dest)
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Recv(buf: *mut c_void, count: c_int, src: c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_Recv", || unsafe {
        recv(smi()?, buf as usize, count, src)
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Isend(buf: *mut c_void, count: c_int, dest: c_int) -> c_int {
    entry("SMI_Isend", || {
        let s = smi()?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { send(s, buf as usize, count, dest) }?;
        s.st().isend.insert(dest as usize);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn SMI_Send_wait(dest: c_int) -> c_int {
    entry("SMI_Send_wait", || {
        let s = smi()?;
        let p = crate::check_rank(s, dest)?;
        // The data was copied into the message at SMI_Isend: the buffer is free again.
        if s.st().isend.remove(&p) {
            Ok(())
        } else {
            Err(SMI_ERR_NOTPOSTED)
        }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Sendrecv(
    sbuf: *mut c_void,
    rbuf: *mut c_void,
    count: c_int,
    peer: c_int,
) -> c_int {
    entry("SMI_Sendrecv", || {
        let s = smi()?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { send(s, sbuf as usize, count, peer) }?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { recv(s, rbuf as usize, count, peer) }
    })
}
