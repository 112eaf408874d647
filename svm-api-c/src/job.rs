//! The job: joining it, the profiler and trace files, finishing, and the node queries.

use super::*;

#[no_mangle]
pub extern "C" fn svm_init() -> c_int {
    entry(true, || {
        let mut h = HANDLE.lock().unwrap_or_else(|p| p.into_inner());
        if STATE.load(Ordering::Acquire) != NOT_STARTED {
            return Err(Error(
                SVM_E_STATE,
                "svm: svm_init() was already called in this process".into(),
            ));
        }
        *h = Some(api::init_with(svm_protocols::by_name)?);
        STATE.store(RUNNING, Ordering::Release);
        Ok(())
    })
}

/// Sets (or with NULL clears) the environment variable `var` read by `svm_init`; only before it.
///
/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn set_before_init(var: &str, file: *const c_char) -> Res {
    if STATE.load(Ordering::Acquire) != NOT_STARTED {
        return Err(Error(
            SVM_E_STATE,
            format!(
                "svm: {var} can only be set before svm_init() (it is read when the node starts)"
            ),
        ));
    }
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    match unsafe { cabi::c_str(file) } {
        None => std::env::remove_var(var),
        Some(f) => {
            let f = f
                .to_str()
                .map_err(|_| arg(&format!("the {var} file name is not UTF-8")))?;
            if f.is_empty() {
                return Err(arg(&format!("an empty {var} file name")));
            }
            // Absolute, as svmrun passes it: rank 0 merges the parts every node writes.
            let path = std::env::current_dir()
                .map(|d| d.join(f))
                .map_err(|e| Error(SVM_E_ARG, format!("svm: {var}: no current directory: {e}")))?;
            std::env::set_var(var, path);
        }
    }
    Ok(())
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_set_profile(file: *const c_char) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry(true, || unsafe { set_before_init("SVM_PROFILE", file) })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_set_trace(file: *const c_char) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry(true, || unsafe { set_before_init("SVM_TRACE", file) })
}

#[no_mangle]
pub extern "C" fn svm_finish() -> c_int {
    entry(false, || {
        let h = HANDLE.lock().unwrap_or_else(|p| p.into_inner()).take();
        STATE.store(FINISHED, Ordering::Release);
        match h {
            Some(svm) => Ok(svm.finish()?),
            None => running(),
        }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_node_id(id: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry(false, || unsafe { out(id, api::node_id() as c_int, "id") })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_nodes(count: *mut c_int) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry(false, || unsafe {
        out(count, api::nodes() as c_int, "count")
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_page_size(bytes: *mut usize) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry(false, || unsafe { out(bytes, api::page_size(), "bytes") })
}
