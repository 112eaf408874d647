//! Dynamic memory inside a region (`SMI_Init_shregMMU`, `SMI_Imalloc`, `SMI_Cmalloc`, ...) and
//! node memory.
//!
//! The allocator lives in the region itself, so every process that has the region allocates
//! from the same heap: a first-fit, address-ordered free list with coalescing, its words read
//! and written only under the region's svm lock (so the heap is consistent under every
//! protocol). Layout, in 8-byte words from the region's start:
//! `[MAGIC, free-list head (byte offset, 0 = none), Cmalloc result, 0, ...]`; blocks start at
//! byte 64 and are `[size | allocated bit, next free offset]` + payload, 16-byte aligned.

use std::ffi::{c_int, c_void};

use svm_core::api::{self, SharedSlice};

use crate::consts::*;
use crate::table::{with_region, Origin};
use crate::{entry, entry_val, out, smi, sv, Res, Smi, K_MMU};

const MAGIC: u64 = 0x534d_495f_4d4d_5531; // "SMI_MMU1"
const HEAP_START: usize = 64;
const HDR: usize = 16;
const MIN_BLOCK: usize = 32;

/// A heap over `[base, base+size)`.
#[derive(Clone, Copy)]
struct Heap {
    w: SharedSlice<u64>,
    size: usize,
    lock: u64,
}

impl Heap {
    fn word(&self, off: usize) -> u64 {
        self.w.get(off / 8)
    }
    fn set(&self, off: usize, v: u64) {
        self.w.set(off / 8, v)
    }

    /// Writes an empty heap (caller holds the lock or is alone).
    fn format(&self) {
        let first = HEAP_START;
        self.set(0, MAGIC);
        self.set(8, first as u64);
        self.set(16, 0);
        self.set(first, (self.size - first) as u64);
        self.set(first + 8, 0);
    }

    fn alloc(&self, bytes: usize) -> Option<usize> {
        if self.word(0) != MAGIC {
            return None;
        }
        let need = (bytes.checked_add(HDR)?.div_ceil(16) * 16).max(MIN_BLOCK);
        let mut prev = 8usize; // the word holding the link to `cur`
        let mut cur = self.word(8) as usize;
        while cur != 0 {
            let sz = self.word(cur) as usize;
            let next = self.word(cur + 8);
            if sz >= need {
                if sz - need >= MIN_BLOCK {
                    let rest = cur + need;
                    self.set(rest, (sz - need) as u64);
                    self.set(rest + 8, next);
                    self.set(prev, rest as u64);
                    self.set(cur, need as u64 | 1);
                } else {
                    self.set(prev, next);
                    self.set(cur, sz as u64 | 1);
                }
                return Some(cur + HDR);
            }
            prev = cur + 8;
            cur = next as usize;
        }
        None
    }

    /// Frees the block whose payload is at offset `p`; false if it is not a live block.
    fn free(&self, p: usize) -> bool {
        if self.word(0) != MAGIC || p < HEAP_START + HDR || p >= self.size || !p.is_multiple_of(16)
        {
            return false;
        }
        let b = p - HDR;
        let hdr = self.word(b);
        if hdr & 1 == 0 || (hdr & !1) as usize > self.size - b {
            return false;
        }
        let mut sz = (hdr & !1) as usize;
        // Find the neighbours in the address-ordered list.
        let mut prev = 0usize;
        let mut cur = self.word(8) as usize;
        while cur != 0 && cur < b {
            prev = cur;
            cur = self.word(cur + 8) as usize;
        }
        // Merge with the next free block.
        let mut next = cur;
        if cur != 0 && b + sz == cur {
            sz += self.word(cur) as usize;
            next = self.word(cur + 8) as usize;
        }
        if prev != 0 && prev + self.word(prev) as usize == b {
            // Merge into the previous free block.
            self.set(prev, self.word(prev) + sz as u64);
            self.set(prev + 8, next as u64);
        } else {
            self.set(b, sz as u64);
            self.set(b + 8, next as u64);
            self.set(if prev == 0 { 8 } else { prev + 8 }, b as u64);
        }
        true
    }
}

fn heap_of(s: &Smi, id: c_int) -> Res<(Heap, usize, bool)> {
    with_region(s, id, |r| {
        if !r.connected || r.size < HEAP_START + MIN_BLOCK || r.frags.is_some() {
            return Err(SMI_ERR_PARAM);
        }
        let w = sv(SharedSlice::<u64>::from_raw_parts(r.addr, r.size / 8))?;
        let lock = s.sync_id(K_MMU, (r.addr / s.page) as u64, r.owner);
        Ok((
            Heap {
                w,
                size: r.size,
                lock,
            },
            r.addr,
            r.origin == Origin::Collective,
        ))
    })
}

fn heap_at(s: &Smi, a: usize) -> Res<(Heap, usize, bool)> {
    let id = {
        let st = s.st();
        st.regions
            .iter()
            .find(|r| r.mmu && r.connected && r.contains(a, 1))
            .map(|r| r.id)
            .ok_or(SMI_ERR_BADADR)?
    };
    heap_of(s, id)
}

#[no_mangle]
pub extern "C" fn SMI_Init_shregMMU(region_id: c_int) -> c_int {
    entry("SMI_Init_shregMMU", || {
        let s = smi()?;
        let (h, _, collective) = heap_of(s, region_id)?;
        if collective {
            s.barrier()?;
            if s.me == 0 {
                s.locked(h.lock, || h.format())?;
            }
            s.barrier()?;
        } else {
            // A LOCAL region is formatted by its owner; an importer joins an existing heap.
            let owner = with_region(s, region_id, |r| Ok(r.origin == Origin::Local))?;
            s.locked(h.lock, || {
                if owner || h.word(0) != MAGIC {
                    h.format()
                }
            })?;
        }
        with_region(s, region_id, |r| {
            r.mmu = true;
            Ok(())
        })
    })
}

fn imalloc(s: &Smi, size: usize, id: c_int) -> Res<usize> {
    let mmu = with_region(s, id, |r| Ok(r.mmu))?;
    if !mmu {
        return Err(SMI_ERR_PARAM);
    }
    let (h, base, _) = heap_of(s, id)?;
    let off = s
        .locked(h.lock, || h.alloc(size.max(1)))?
        .ok_or(SMI_ERR_NOMEM)?;
    Ok(base + off)
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Imalloc(size: usize, region_id: c_int, address: *mut c_void) -> c_int {
    entry("SMI_Imalloc", || {
        let s = smi()?;
        let a = imalloc(s, size, region_id)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(address as *mut usize, a) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Cmalloc(size: usize, region_id: c_int, address: *mut c_void) -> c_int {
    entry("SMI_Cmalloc", || {
        let s = smi()?;
        let (h, _, _) = heap_of(s, region_id)?;
        s.barrier()?;
        if s.me == 0 {
            let a = imalloc(s, size, region_id).unwrap_or(0);
            s.locked(h.lock, || h.set(16, a as u64))?;
        }
        s.barrier()?;
        let a = s.locked(h.lock, || h.word(16))? as usize;
        if a == 0 {
            return Err(SMI_ERR_NOMEM);
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(address as *mut usize, a) }
    })
}

fn ifree(s: &Smi, a: usize) -> Res {
    let (h, base, _) = heap_at(s, a)?;
    if s.locked(h.lock, || h.free(a - base))? {
        Ok(())
    } else {
        Err(SMI_ERR_BADADR)
    }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Ifree(address: *mut c_void) -> c_int {
    entry("SMI_Ifree", || ifree(smi()?, address as usize))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Cfree(address: *mut c_void) -> c_int {
    entry("SMI_Cfree", || {
        let s = smi()?;
        heap_at(s, address as usize)?;
        s.barrier()?;
        let r = if s.me == 0 {
            ifree(s, address as usize)
        } else {
            Ok(())
        };
        s.barrier()?;
        r
    })
}

#[no_mangle]
pub extern "C" fn SMI_Nodemem_address(node: c_int) -> *mut c_void {
    entry_val("SMI_Nodemem_address", std::ptr::null_mut(), || {
        let s = smi()?;
        let k = crate::check_rank(s, node)?;
        Ok(s.nodemem[k] as *mut c_void)
    })
}

#[no_mangle]
pub extern "C" fn SMI_Nodemem_alloc(size: usize) -> *mut c_void {
    entry_val("SMI_Nodemem_alloc", std::ptr::null_mut(), || {
        smi()?;
        let m = sv(api::alloc_local::<u8>(size.max(1)))?;
        Ok(m.addr() as *mut c_void)
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Nodemem_free(buf: *mut c_void) -> c_int {
    entry("SMI_Nodemem_free", || {
        smi()?;
        api::free_local_addr(buf as usize).map_err(|_| SMI_ERR_BADADR)
    })
}
