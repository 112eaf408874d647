//! Locks, barriers and semaphores.

use super::*;
use std::ffi::c_uint;

#[no_mangle]
pub extern "C" fn svm_lock(id: u64) -> c_int {
    entry(false, || Ok(api::lock_id(id)?))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_trylock(id: u64, acquired: *mut c_int) -> c_int {
    entry(false, || {
        if acquired.is_null() {
            return Err(arg("`acquired` is NULL"));
        }
        let got = api::try_lock_id(id)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(acquired, got as c_int, "acquired") }
    })
}

#[no_mangle]
pub extern "C" fn svm_unlock(id: u64) -> c_int {
    entry(false, || Ok(api::unlock_id(id)?))
}

#[no_mangle]
pub extern "C" fn svm_barrier() -> c_int {
    entry(false, || Ok(api::barrier()?))
}

#[no_mangle]
pub extern "C" fn svm_barrier_id(id: u64, count: c_uint) -> c_int {
    entry(false, || Ok(api::Barrier::new(id, count).wait()?))
}

#[no_mangle]
pub extern "C" fn svm_sem_post(id: u64) -> c_int {
    entry(false, || Ok(api::sem_post(id)?))
}

#[no_mangle]
pub extern "C" fn svm_sem_wait(id: u64) -> c_int {
    entry(false, || Ok(api::sem_wait(id)?))
}
