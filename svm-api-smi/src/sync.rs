//! Mutexes, barriers, flushes and progress counters: the consistency points.
//!
//! An SMI mutex is an svm lock (acquire on lock, release on unlock) whose manager is the
//! process named at `SMI_MUTEX_INIT` (or `id % nprocs`); barriers are svm barriers (release then
//! acquire for everyone); a progress counter is one word per process, homed on it, changed and
//! read under an svm lock managed by that process (increment = release, a satisfied wait =
//! acquire).

use std::ffi::c_int;

use svm_core::api::{self, Home};

use crate::consts::*;
use crate::{entry, out, smi, sv, Res, Smi, K_BARRIER, K_MUTEX, K_PC};

/// The mutex index of `id` (without `NOCONSISTENCY`).
fn mutex_index(id: c_int) -> usize {
    (id & !NOCONSISTENCY) as usize
}

fn mutex_lock_id(s: &Smi, id: c_int) -> Res<u64> {
    let m = (id & !NOCONSISTENCY) as usize;
    if id < 0 {
        return Err(SMI_ERR_PARAM);
    }
    let st = s.st();
    let home = st.mutexes.get(m).copied().flatten().ok_or(SMI_ERR_PARAM)?;
    Ok(s.sync_id(K_MUTEX, m as u64, home))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_MUTEX_INIT(id: *mut c_int, _algorithm: c_int, prank: c_int) -> c_int {
    entry("SMI_MUTEX_INIT", || {
        let s = smi()?;
        if id.is_null() || prank >= s.n as c_int || prank < -1 {
            return Err(SMI_ERR_PARAM);
        }
        s.barrier()?;
        let m = {
            let mut st = s.st();
            let m = st.mutexes.len();
            let home = if prank >= 0 { prank as usize } else { m % s.n };
            st.mutexes.push(Some(home));
            m
        };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(id, m as c_int) }
    })
}

#[no_mangle]
pub extern "C" fn SMI_Mutex_lock(id: c_int) -> c_int {
    entry("SMI_Mutex_lock", || {
        let s = smi()?;
        let l = mutex_lock_id(s, id)?;
        // As SMI's Burns-Lynch lock (which only looks at the other processes' flags), the
        // holder locking again returns at once; the first unlock releases.
        if s.st().held.contains(&mutex_index(id)) {
            return Ok(());
        }
        sv(api::lock_id(l))?;
        s.st().held.insert(mutex_index(id));
        Ok(())
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Mutex_trylock(id: c_int, acquired: *mut c_int) -> c_int {
    entry("SMI_Mutex_trylock", || {
        let s = smi()?;
        if acquired.is_null() {
            return Err(SMI_ERR_PARAM);
        }
        let l = mutex_lock_id(s, id)?;
        if s.st().held.contains(&mutex_index(id)) {
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            return unsafe { out(acquired, 1) };
        }
        let got = sv(api::try_lock_id(l))?;
        if got {
            s.st().held.insert(mutex_index(id));
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(acquired, got as c_int) }
    })
}

#[no_mangle]
pub extern "C" fn SMI_Mutex_unlock(id: c_int) -> c_int {
    entry("SMI_Mutex_unlock", || {
        let s = smi()?;
        let l = mutex_lock_id(s, id)?;
        // Unlocking a mutex this process does not hold changes nothing (SMI clears its own
        // flag, which is already clear).
        if !s.st().held.remove(&mutex_index(id)) {
            return Ok(());
        }
        api::unlock_id(l).map_err(|e| {
            eprintln!("smi[{}]: SMI_Mutex_unlock({id}): {e}", s.me);
            SMI_ERR_PARAM
        })
    })
}

#[no_mangle]
pub extern "C" fn SMI_Mutex_destroy(id: c_int) -> c_int {
    entry("SMI_Mutex_destroy", || {
        let s = smi()?;
        mutex_lock_id(s, id)?;
        let mut st = s.st();
        st.mutexes[mutex_index(id)] = None;
        st.held.remove(&mutex_index(id));
        Ok(())
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Location_of_mutex(id: c_int, prank: *mut c_int) -> c_int {
    entry("SMI_Location_of_mutex", || {
        let s = smi()?;
        mutex_lock_id(s, id)?;
        let home = s.st().mutexes[(id & !NOCONSISTENCY) as usize].unwrap_or(0);
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(prank, home as c_int) }
    })
}

#[no_mangle]
pub extern "C" fn SMI_BARRIER(id: c_int) -> c_int {
    entry("SMI_BARRIER", || {
        let s = smi()?;
        let ok = id >= 0 && s.st().barriers.get(id as usize).copied().unwrap_or(false);
        if !ok {
            return Err(SMI_ERR_PARAM);
        }
        if id == 0 {
            return s.barrier();
        }
        if s.in_replication.load(std::sync::atomic::Ordering::Acquire) {
            return s.barrier();
        }
        sv(api::Barrier::new(s.sync_id(K_BARRIER, id as u64, 0), s.n as u32).wait())
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_BARRIER_INIT(
    id: *mut c_int,
    _algorithm: c_int,
    _is_active: c_int,
) -> c_int {
    entry("SMI_BARRIER_INIT", || {
        let s = smi()?;
        if id.is_null() {
            return Err(SMI_ERR_PARAM);
        }
        s.barrier()?;
        let b = {
            let mut st = s.st();
            st.barriers.push(true);
            st.barriers.len() - 1
        };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(id, b as c_int) }
    })
}

#[no_mangle]
pub extern "C" fn SMI_BARRIER_DESTROY(id: c_int) -> c_int {
    entry("SMI_BARRIER_DESTROY", || {
        let s = smi()?;
        let mut st = s.st();
        match st.barriers.get_mut(id as usize) {
            Some(b) if id > 0 && *b => {
                *b = false;
                Ok(())
            }
            _ => Err(SMI_ERR_PARAM),
        }
    })
}

fn flush_target(s: &Smi, rank: c_int) -> Res {
    if rank != FLUSH_ALL {
        crate::check_rank(s, rank)?;
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn SMI_Flush_write(rank: c_int) -> c_int {
    entry("SMI_Flush_write", || {
        let s = smi()?;
        flush_target(s, rank)?;
        s.release()
    })
}

#[no_mangle]
pub extern "C" fn SMI_Flush_read(rank: c_int) -> c_int {
    entry("SMI_Flush_read", || {
        let s = smi()?;
        flush_target(s, rank)?;
        // An acquire: svm's protocols invalidate stale copies at the writers' releases (sc-mw,
        // sc-sw); the lock round trip orders this process after them.
        s.release()
    })
}

// ------------------------------------------------------------------------ progress counters

fn pc(s: &Smi, id: c_int) -> Res<svm_core::api::SharedSlice<u64>> {
    let st = s.st();
    usize::try_from(id)
        .ok()
        .and_then(|i| st.pcs.get(i).copied())
        .ok_or(SMI_ERR_PARAM)
}

fn pc_lock(s: &Smi, id: c_int, p: usize) -> u64 {
    s.sync_id(K_PC, id as u64, p)
}

fn pc_word(s: &Smi, p: usize) -> usize {
    p * s.page / 8
}

fn pc_proc(s: &Smi, p: c_int) -> Res<usize> {
    if p == OWNPC {
        Ok(s.me)
    } else {
        crate::check_rank(s, p)
    }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Init_PC(id: *mut c_int) -> c_int {
    entry("SMI_Init_PC", || {
        let s = smi()?;
        if id.is_null() {
            return Err(SMI_ERR_PARAM);
        }
        s.barrier()?;
        let home = Home::Runs((0..s.n).map(|p| (p as u16, 1)).collect());
        let w = sv(api::alloc_collective_in::<u64>(
            s.n * s.page / 8,
            home,
            &s.proto,
        ))?;
        let i = {
            let mut st = s.st();
            st.pcs.push(w);
            st.pcs.len() - 1
        };
        s.barrier()?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(id, i as c_int) }
    })
}

#[no_mangle]
pub extern "C" fn SMI_Reset_PC(id: c_int) -> c_int {
    entry("SMI_Reset_PC", || {
        let s = smi()?;
        // As in SMI, NOCONSISTENCY may be OR-ed into the id (svm keeps the consistency).
        let id = id & !NOCONSISTENCY;
        let w = pc(s, id)?;
        s.barrier()?;
        s.locked(pc_lock(s, id, s.me), || w.set(pc_word(s, s.me), 0))?;
        s.barrier()
    })
}

#[no_mangle]
pub extern "C" fn SMI_Increment_PC(id: c_int, val: c_int) -> c_int {
    entry("SMI_Increment_PC", || {
        let s = smi()?;
        let id = id & !NOCONSISTENCY;
        let w = pc(s, id)?;
        if val < 0 {
            return Err(SMI_ERR_PARAM);
        }
        let i = pc_word(s, s.me);
        s.locked(pc_lock(s, id, s.me), || w.set(i, w.get(i) + val as u64))
    })
}

fn get_pc(s: &Smi, id: c_int, p: usize) -> Res<u64> {
    let w = pc(s, id)?;
    s.locked(pc_lock(s, id, p), || w.get(pc_word(s, p)))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Get_PC(id: c_int, proc_: c_int, val: *mut c_int) -> c_int {
    entry("SMI_Get_PC", || {
        let s = smi()?;
        let id = id & !NOCONSISTENCY;
        let p = pc_proc(s, proc_)?;
        let v = get_pc(s, id, p)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(val, v.min(c_int::MAX as u64) as c_int) }
    })
}

fn own_pc(s: &Smi, id: c_int) -> Res<c_int> {
    Ok(get_pc(s, id, s.me)?.min(c_int::MAX as u64) as c_int)
}

fn wait_pc(s: &Smi, id: c_int, p: usize, val: c_int) -> Res {
    s.poll(
        &format!("progress counter {id} of process {p} to reach {val}"),
        || Ok((get_pc(s, id, p)? as i64 >= val as i64).then_some(())),
    )
}

#[no_mangle]
pub extern "C" fn SMI_Wait_individual_PC(id: c_int, proc_: c_int, val: c_int) -> c_int {
    entry("SMI_Wait_individual_PC", || {
        let s = smi()?;
        let id = id & !NOCONSISTENCY;
        let p = pc_proc(s, proc_)?;
        // SMI_OWNPC: until the process has come as far as this one.
        let val = if val == OWNPC { own_pc(s, id)? } else { val };
        wait_pc(s, id, p, val)
    })
}

#[no_mangle]
pub extern "C" fn SMI_Wait_collective_PC(id: c_int, val: c_int) -> c_int {
    entry("SMI_Wait_collective_PC", || {
        let s = smi()?;
        let id = id & !NOCONSISTENCY;
        pc(s, id)?;
        let own = own_pc(s, id)?;
        let val = if val == OWNPC { own } else { val };
        if val > own {
            eprintln!(
                "smi[{}]: SMI_Wait_collective_PC({id}, {val}): cannot wait for more progress \
                 than this process's own ({own})",
                s.me
            );
            return Err(SMI_ERR_PARAM);
        }
        for p in 0..s.n {
            wait_pc(s, id, p, val)?;
        }
        Ok(())
    })
}
