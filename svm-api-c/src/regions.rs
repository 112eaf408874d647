//! Regions (created and destroyed at run time, with a protocol and a home policy), the
//! allocations inside them, node-local allocations and homes.

use super::*;
use std::ffi::c_void;
use svm_core::api::Home;
use svm_core::region;

/// `svm_home_t` of svm.h.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SvmHome {
    kind: c_int,
    node: c_int,
    nodes: *const c_int,
    pages: *const u64,
    count: usize,
}

fn node_id(n: c_int) -> Res<u16> {
    u16::try_from(n).map_err(|_| Error(SVM_E_NODE, format!("svm: there is no node {n}")))
}

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn home(p: *const SvmHome) -> Res<Home> {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    let Some(h) = (unsafe { cabi::read_in(p) }) else {
        return Ok(Home::Node(0));
    };
    let list = |what: &str| -> Res<Vec<c_int>> {
        if h.count == 0 || h.count > MAX_HOME_LIST {
            return Err(arg(&format!(
                "home policy {what}: count {} is not in 1..={MAX_HOME_LIST}",
                h.count
            )));
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { cabi::read_array(h.nodes, h.count) }
            .ok_or_else(|| arg(&format!("home policy {what}: `nodes` is NULL")))
    };
    Ok(match h.kind {
        0 => Home::Node(node_id(h.node)?),
        1 => Home::Block,
        2 => Home::Cyclic,
        3 => Home::Custom(
            list("SVM_HOME_CUSTOM")?
                .into_iter()
                .map(node_id)
                .collect::<Res<_>>()?,
        ),
        4 => {
            let nodes = list("SVM_HOME_RUNS")?;
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            let pages = unsafe { cabi::read_array(h.pages, h.count) }
                .ok_or_else(|| arg("home policy SVM_HOME_RUNS: `pages` is NULL"))?;
            Home::Runs(
                nodes
                    .into_iter()
                    .zip(pages)
                    .map(|(n, p)| Ok((node_id(n)?, p)))
                    .collect::<Res<_>>()?,
            )
        }
        5 => Home::FirstTouch,
        k => return Err(arg(&format!("unknown home policy kind {k}"))),
    })
}

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn create(size: usize, protocol: Option<&str>, h: *const SvmHome, r: *mut u32) -> Res {
    if r.is_null() {
        return Err(arg("`region` is NULL"));
    }
    if size == 0 {
        return Err(arg("a region of 0 bytes"));
    }
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    let info = region::create(size, unsafe { home(h) }?, protocol)?;
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { out(r, info.id, "region") }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_create(
    size: usize,
    protocol: c_int,
    home: *const SvmHome,
    region: *mut u32,
) -> c_int {
    entry(false, || {
        let name = match protocol {
            0 => None,
            1..=3 => Some(svm_core::protocol::PROTOCOL_NAMES[protocol as usize - 1]),
            p => {
                return Err(Error(
                    SVM_E_PROTOCOL,
                    format!(
                    "svm: unknown protocol {p} (SVM_PROTOCOL_DEFAULT, _SC_SW, _SC_MW or _SCOPE)"
                ),
                ))
            }
        };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { create(size, name, home, region) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_create_named(
    size: usize,
    protocol: *const c_char,
    home: *const SvmHome,
    region: *mut u32,
) -> c_int {
    entry(false, || {
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let name = match unsafe { cabi::c_str(protocol) } {
            None => None,
            Some(s) => Some(
                s.to_str()
                    .map_err(|_| Error(SVM_E_PROTOCOL, "svm: protocol name is not UTF-8".into()))?,
            ),
        };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { create(size, name, home, region) }
    })
}

#[no_mangle]
pub extern "C" fn svm_region_destroy(region: u32) -> c_int {
    entry(false, || Ok(region::destroy(region)?))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_addr(region: u32, addr: *mut *mut c_void) -> c_int {
    entry(false, || {
        let info = region::info(region)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(addr, info.addr as *mut c_void, "addr") }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_size(region: u32, size: *mut usize) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry(false, || unsafe {
        out(size, region::info(region)?.size, "size")
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_lookup(
    addr: *const c_void,
    region: *mut u32,
    offset: *mut usize,
) -> c_int {
    entry(false, || {
        let (info, off) = region::lookup(addr as usize)?
            .ok_or_else(|| Error(SVM_E_ADDR, format!("svm: {addr:p} is in no live region")))?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(region, info.id, "region") }?;
        if !offset.is_null() {
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            unsafe { out(offset, off, "offset") }?;
        }
        Ok(())
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_alloc(
    region: u32,
    size: usize,
    ptr: *mut *mut c_void,
) -> c_int {
    entry(false, || {
        if ptr.is_null() {
            return Err(arg("`ptr` is NULL"));
        }
        let a = region::alloc(region, size)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(ptr, a as *mut c_void, "ptr") }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_region_free(region: u32, ptr: *mut c_void) -> c_int {
    entry(false, || Ok(region::free(region, ptr as usize)?))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_alloc_local(size: usize, ptr: *mut *mut c_void) -> c_int {
    // SAFETY: the C caller's contract, passed on (this function's `# Safety`).
    unsafe { alloc_local_into(size, ptr, api::alloc_local::<u8>) }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_alloc_local_first_touch(size: usize, ptr: *mut *mut c_void) -> c_int {
    // SAFETY: the C caller's contract, passed on (this function's `# Safety`).
    unsafe { alloc_local_into(size, ptr, api::alloc_local_first_touch::<u8>) }
}

/// `*ptr` = the address of `size` bytes from one of this node's local allocators.
///
/// # Safety
/// `ptr` is NULL or valid for a write of one pointer.
unsafe fn alloc_local_into(
    size: usize,
    ptr: *mut *mut c_void,
    alloc: fn(usize) -> api::Result<api::SharedSlice<u8>>,
) -> c_int {
    entry(false, || {
        if ptr.is_null() {
            return Err(arg("`ptr` is NULL"));
        }
        let s = alloc(size)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(ptr, s.addr() as *mut c_void, "ptr") }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_free_local(ptr: *mut c_void) -> c_int {
    entry(false, || Ok(api::free_local_addr(ptr as usize)?))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn svm_home_of(addr: *const c_void, node: *mut c_int) -> c_int {
    entry(false, || {
        let h = api::home_of(addr as usize).ok_or_else(|| {
            Error(
                SVM_E_ADDR,
                format!(
                    "svm: {addr:p} is not shared memory, or a first-touch page not touched here"
                ),
            )
        })?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(node, h as c_int, "node") }
    })
}
