//! SMI regions onto DSM regions, the directory of exported LOCAL regions, callbacks.

use std::ffi::{c_int, c_void};

use svm_core::api::{self, Home};

use crate::consts::*;
use crate::layout;
use crate::table::{find_range, new_region, with_region, Callback, Flag, Kind, Origin, Region};
use crate::{entry, ffi, out, smi, sv, Res, Smi, K_DIR, TAG_CB};

/// `smi_region_info_t` exactly as C lays it out.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RegionInfo {
    pub size: usize,
    pub owner: c_int,
    pub offset: usize,
    pub sgmt_id: c_int,
    pub partner: c_int,
    pub nbr_sgmts: c_int,
    pub sgmt_owner: *mut c_int,
    pub sgmt_size: *mut usize,
    pub adapter: c_int,
    pub rmt_adapter: c_int,
    pub shrinkable: c_int,
    pub cb_fcn: Option<Callback>,
}

/// `smi_rlayout_t`.
#[repr(C)]
pub struct RLayout {
    pub nsegments: usize,
    pub size: usize,
    pub adr: *mut u8,
    pub seg_size: *mut usize,
    pub seg_adr: *mut *mut u8,
    pub seg_machine: *mut c_int,
}

/// `smi_sgmt_locator_t`.
#[repr(C)]
pub struct Locator {
    pub sci_id: c_int,
    pub segment_id: c_int,
}

/// Directory keys: kind in the high byte.
fn key_local(sgmt_id: c_int) -> u64 {
    (1 << 56) | sgmt_id as u32 as u64
}
fn key_pt2pt(partner: usize, seq: u64) -> u64 {
    (2 << 56) | ((partner as u64) << 24) | (seq & 0xff_ffff)
}

fn dir_lock(s: &Smi, owner: usize) -> u64 {
    s.sync_id(K_DIR, 0, owner)
}

/// Publishes (key → addr, size) in this process's directory.
fn publish(s: &Smi, key: u64, addr: usize, size: usize) -> Res {
    let d = s.dir[s.me];
    s.locked(dir_lock(s, s.me), || {
        let mut free = None;
        for e in 0..crate::DIR_ENTRIES {
            let live = d.get(e * crate::DIR_WORDS + 3);
            if live != 0 && d.get(e * crate::DIR_WORDS) == key {
                return Err(SMI_ERR_BUSY);
            }
            if live == 0 && free.is_none() {
                free = Some(e);
            }
        }
        let e = free.ok_or(SMI_ERR_NOMEM)? * crate::DIR_WORDS;
        d.write_from(e, &[key, addr as u64, size as u64, 1]);
        Ok(())
    })?
}

fn unpublish(s: &Smi, key: u64) -> Res {
    let d = s.dir[s.me];
    s.locked(dir_lock(s, s.me), || {
        for e in 0..crate::DIR_ENTRIES {
            let w = e * crate::DIR_WORDS;
            if d.get(w + 3) != 0 && d.get(w) == key {
                d.set(w + 3, 0);
            }
        }
    })
}

/// Looks `key` up in `owner`'s directory, waiting until it is published.
fn lookup(s: &Smi, owner: usize, key: u64) -> Res<(usize, usize)> {
    let d = s.dir[owner];
    s.poll(
        &format!("process {owner} to export segment {:#x}", key & 0xffff_ffff),
        || {
            s.locked(dir_lock(s, owner), || {
                (0..crate::DIR_ENTRIES).find_map(|e| {
                    let w = e * crate::DIR_WORDS;
                    (d.get(w + 3) != 0 && d.get(w) == key)
                        .then(|| (d.get(w + 1) as usize, d.get(w + 2) as usize))
                })
            })
        },
    )
}

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn create(
    s: &Smi,
    region_type: c_int,
    info: &RegionInfo,
    address: *mut c_void,
) -> Res<Region> {
    let Some((kind, flags)) = Kind::parse(region_type) else {
        eprintln!("smi[{}]: unknown region type {region_type:#x}", s.me);
        return Err(SMI_ERR_PARAM);
    };
    if flags.has(Flag::Register) && kind != Kind::Local {
        eprintln!(
            "smi[{}]: SMI_SHM_REGISTER applies to SMI_SHM_LOCAL regions only",
            s.me
        );
        return Err(SMI_ERR_PARAM);
    }
    let owner_ok = |o: c_int| crate::check_rank(s, o);
    let size = layout::page_round(s.page, info.size);
    // UNDIVIDED: non-owners may pass size 0 (they get the owner's size, see below).
    if info.size == 0 && !matches!(kind, Kind::Remote | Kind::Rdma | Kind::Undivided) {
        return Err(SMI_ERR_PARAM);
    }
    let delayed = flags.has(Flag::Delayed);
    let mut r = match kind {
        Kind::Undivided => {
            let owner = owner_ok(info.owner)?;
            // The owner's size counts (SMI: non-owners may pass 0): it passes it through its
            // row of the exchange page; the barrier at the end of `create` keeps the row
            // until everybody has read it.
            let row = s.page / 8;
            if s.me == owner {
                s.xchg.set(owner * row, info.size as u64);
            }
            s.barrier()?;
            let want = s.xchg.get(owner * row) as usize;
            if want == 0 {
                if s.me == owner {
                    eprintln!("smi[{}]: SMI_SHM_UNDIVIDED region of size 0", s.me);
                }
                s.barrier()?;
                return Err(SMI_ERR_PARAM);
            }
            let size = layout::page_round(s.page, want);
            // A failure is the same everywhere; the barrier keeps the owner from writing the
            // next region's size before everybody has read this one.
            let m = match s.alloc_region(size, Home::Node(owner as u16)) {
                Ok(m) => m,
                Err(e) => {
                    s.barrier()?;
                    return Err(e);
                }
            };
            let mut r = new_region(s, kind, flags, m.addr(), size, owner, Origin::Collective);
            r.connected = !delayed || owner == s.me;
            r
        }
        Kind::Blocked | Kind::Cyclic => {
            s.barrier()?;
            let pages = (size / s.page) as u64;
            let (home, segs, total) = if kind == Kind::Blocked {
                let runs: Vec<(usize, u64)> = layout::blocked_runs(pages, s.n)
                    .into_iter()
                    .enumerate()
                    .collect();
                let total: u64 = runs.iter().map(|r| r.1).sum();
                (layout::runs_home(&runs), Some(runs), total)
            } else {
                (Home::Cyclic, None, pages)
            };
            let m = s.alloc_region(total as usize * s.page, home)?;
            let mut r = new_region(s, kind, flags, m.addr(), size, 0, Origin::Collective);
            r.segs = match segs {
                Some(runs) => layout::segs_of(s.page, m.addr(), &runs),
                None => (0..pages as usize)
                    .map(|i| (m.addr() + i * s.page, s.page, i % s.n))
                    .collect(),
            };
            r.connected = !delayed;
            r
        }
        Kind::Customized => {
            let k = usize::try_from(info.nbr_sgmts).map_err(|_| SMI_ERR_PARAM)?;
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            let owners = unsafe { ffi::read_array(info.sgmt_owner, k) }.ok_or(SMI_ERR_PARAM)?;
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            let sizes = unsafe { ffi::read_array(info.sgmt_size, k) }.ok_or(SMI_ERR_PARAM)?;
            if k == 0 {
                return Err(SMI_ERR_PARAM);
            }
            let mut runs = Vec::with_capacity(k);
            for (o, b) in owners.iter().zip(&sizes) {
                runs.push((
                    owner_ok(*o)?,
                    (layout::page_round(s.page, *b) / s.page) as u64,
                ));
            }
            let total: u64 = runs.iter().map(|r| r.1).sum();
            if (total as usize) * s.page < size {
                return Err(SMI_ERR_PARAM);
            }
            s.barrier()?;
            let m = s.alloc_region(total as usize * s.page, layout::runs_home(&runs))?;
            let mut r = new_region(
                s,
                kind,
                flags,
                m.addr(),
                total as usize * s.page,
                runs[0].0,
                Origin::Collective,
            );
            r.segs = layout::segs_of(s.page, m.addr(), &runs);
            r.connected = !delayed;
            r
        }
        Kind::Fragmented => {
            let frag = layout::page_round(s.page, info.size.div_ceil(s.n));
            let runs: Vec<(usize, u64)> = (0..s.n).map(|p| (p, (frag / s.page) as u64)).collect();
            s.barrier()?;
            let m = s.alloc_region(frag * s.n, layout::runs_home(&runs))?;
            let mut r = new_region(
                s,
                kind,
                flags,
                m.addr(),
                frag * s.n,
                s.me,
                Origin::Collective,
            );
            r.segs = layout::segs_of(s.page, m.addr(), &runs);
            r.frags = Some((0..s.n).map(|p| m.addr() + p * frag).collect());
            r
        }
        Kind::Smp => {
            // Only the processes of one node share it: with one process per node, this one.
            let m = sv(api::alloc_local::<u8>(size))?;
            new_region(s, kind, flags, m.addr(), size, s.me, Origin::Local)
        }
        Kind::Local => {
            let m = sv(api::alloc_local::<u8>(size))?;
            let mut r = new_region(s, kind, flags, m.addr(), size, s.me, Origin::Local);
            if flags.has(Flag::Register) {
                // The program's own buffer (in `*address`) is exported through a DSM copy
                // kept equal to it at every SMI synchronisation point (docs/smi.md).
                // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
                // `# Safety`) makes each NULL or valid for this access.
                let user = unsafe { ffi::get(address as *const usize) }.unwrap_or(0);
                if user == 0 {
                    let _ = api::free_local_addr(m.addr());
                    return Err(SMI_ERR_BADADR);
                }
                // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
                // `# Safety`) makes each NULL or valid for this access.
                if !unsafe { crate::registered::add(s, user, m.addr(), info.size) } {
                    let _ = api::free_local_addr(m.addr());
                    return Err(SMI_ERR_BADADR);
                }
                r.shadow = Some(m.addr());
                r.addr = user;
                r.size = info.size;
                r.segs = vec![(user, info.size, s.me)];
            }
            r.sgmt_id = if info.sgmt_id > 0 {
                info.sgmt_id
            } else {
                0x4000_0000 + r.id
            };
            if !flags.has(Flag::Private) {
                let key = key_local(r.sgmt_id);
                let exported = r.shadow.unwrap_or(r.addr);
                if let Err(e) = publish(s, key, exported, size) {
                    if r.shadow.is_some() {
                        crate::registered::remove(s, exported);
                    }
                    let _ = api::free_local_addr(exported);
                    return Err(e);
                }
                r.export = Some(key);
            }
            r
        }
        Kind::Pt2pt => {
            let owner = owner_ok(info.owner)?;
            let partner = owner_ok(info.partner)?;
            if s.me != owner && s.me != partner {
                return Err(SMI_ERR_PARAM);
            }
            let seq = {
                let mut st = s.st();
                let c = st.pt2pt_seq.entry((owner, partner)).or_insert(0);
                *c += 1;
                *c
            };
            let key = key_pt2pt(partner, seq);
            if s.me == owner {
                let m = sv(api::alloc_local::<u8>(size))?;
                publish(s, key, m.addr(), size)?;
                let mut r = new_region(s, kind, flags, m.addr(), size, owner, Origin::Local);
                r.export = Some(key);
                r
            } else {
                let (a, len) = lookup(s, owner, key)?;
                new_region(s, kind, flags, a, len, owner, Origin::Imported)
            }
        }
        Kind::Remote | Kind::Rdma => {
            let owner = owner_ok(info.owner)?;
            // No export ever has an id <= 0 (as in SMI). Unlike SMI, a process may import its
            // own LOCAL region.
            if info.sgmt_id <= 0 {
                eprintln!(
                    "smi[{}]: a REMOTE/RDMA region needs a segment id > 0 (got {})",
                    s.me, info.sgmt_id
                );
                return Err(SMI_ERR_PARAM);
            }
            let key = key_local(info.sgmt_id);
            let mut r = new_region(s, kind, flags, 0, 0, owner, Origin::Imported);
            r.sgmt_id = info.sgmt_id;
            r.offset = info.offset;
            r.import = Some((owner, key));
            r.mapped = kind == Kind::Remote;
            r.connected = false;
            if !delayed {
                connect(s, &mut r, info.size)?;
            }
            r
        }
    };
    if flags.has(Flag::Callback) {
        r.cb = info.cb_fcn;
    }
    if r.origin == Origin::Collective {
        s.barrier()?;
    }
    Ok(r)
}

/// Connects an imported region: finds the export, tells the owner (callbacks).
fn connect(s: &Smi, r: &mut Region, want: usize) -> Res {
    if let Some((owner, key)) = r.import {
        let (a, len) = lookup(s, owner, key)?;
        if r.offset >= len {
            return Err(SMI_ERR_PARAM);
        }
        let avail = len - r.offset;
        let size = if want == 0 {
            avail
        } else {
            layout::page_round(s.page, want).min(avail)
        };
        r.addr = a + r.offset;
        r.size = size;
        r.segs = vec![(r.addr, size, owner)];
        let msg = [CB_REASON_CONNECT as u8, 0, 0, 0]
            .into_iter()
            .chain((key as u32).to_le_bytes())
            .collect::<Vec<u8>>();
        sv(api::send_message(owner, TAG_CB, &msg))?;
    }
    r.connected = true;
    Ok(())
}

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn region_out(r: &Region, address: *mut c_void) -> Res {
    if let Some(f) = &r.frags {
        // FRAGMENTED: the caller's array receives one address per process.
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        return if unsafe { ffi::write_array(address as *mut usize, f) } {
            Ok(())
        } else {
            Err(SMI_ERR_PARAM)
        };
    }
    let a = if r.connected && r.mapped { r.addr } else { 0 };
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { out(address as *mut usize, a) }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Create_shreg(
    region_type: c_int,
    info: *mut RegionInfo,
    id: *mut c_int,
    address: *mut c_void,
) -> c_int {
    entry("SMI_Create_shreg", || {
        let s = smi()?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let info = unsafe { ffi::get(info as *const RegionInfo) }.ok_or(SMI_ERR_PARAM)?;
        if id.is_null() || address.is_null() {
            return Err(SMI_ERR_PARAM);
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let r = unsafe { create(s, region_type, &info, address) }?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(id, r.id) }?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { region_out(&r, address) }?;
        s.st().regions.push(r);
        Ok(())
    })
}

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn init_reginfo(info: *mut RegionInfo, v: RegionInfo) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_Init_reginfo", || unsafe { out(info, v) })
}

fn reginfo(
    size: usize,
    offset: usize,
    owner: c_int,
    loc: c_int,
    rmt: c_int,
    sgmt: c_int,
    cb: Option<Callback>,
) -> RegionInfo {
    RegionInfo {
        size,
        owner,
        offset,
        sgmt_id: sgmt,
        partner: 0,
        nbr_sgmts: 0,
        sgmt_owner: std::ptr::null_mut(),
        sgmt_size: std::ptr::null_mut(),
        adapter: loc,
        rmt_adapter: rmt,
        shrinkable: 0,
        cb_fcn: cb,
    }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn SMI_Init_reginfo_full(
    info: *mut RegionInfo,
    size: usize,
    offset: usize,
    owner: c_int,
    loc_adpt: c_int,
    rmt_adpt: c_int,
    sgmt_id: c_int,
    cb: Option<Callback>,
) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe {
        init_reginfo(
            info,
            reginfo(size, offset, owner, loc_adpt, rmt_adpt, sgmt_id, cb),
        )
    }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Init_reginfo_short(
    info: *mut RegionInfo,
    size: c_int,
    owner: c_int,
) -> c_int {
    if size < 0 {
        return SMI_ERR_PARAM;
    }
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe {
        init_reginfo(
            info,
            reginfo(size as usize, 0, owner, ADPT_DEFAULT, ADPT_DEFAULT, 0, None),
        )
    }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Connect_shreg(id: c_int, address: *mut c_void) -> c_int {
    entry("SMI_Connect_shreg", || {
        let s = smi()?;
        // Take the region out while connecting (the lookup may wait).
        let mut r = {
            let mut st = s.st();
            let i = st
                .regions
                .iter()
                .position(|r| r.id == id)
                .ok_or(SMI_ERR_PARAM)?;
            st.regions.remove(i)
        };
        let res = if r.connected {
            Ok(())
        } else {
            connect(s, &mut r, 0)
        };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        let res = res.and_then(|_| unsafe { region_out(&r, address) });
        s.st().regions.push(r);
        res
    })
}

/// Frees region `r` of this process (already removed from the table).
pub(crate) fn release_region(s: &Smi, r: Region) -> Res {
    match r.origin {
        Origin::Collective => {
            // svm has no collective free: the address range stays reserved (docs/smi.md).
        }
        Origin::Local => {
            if let Some(key) = r.export {
                unpublish(s, key)?;
            }
            for p in &r.importers {
                let msg = [CB_REASON_DISCONNECT as u8, 1, 0, 0]
                    .into_iter()
                    .chain((r.export.unwrap_or(0) as u32).to_le_bytes())
                    .collect::<Vec<u8>>();
                sv(api::send_message(*p, TAG_CB, &msg))?;
            }
            if let Some(w) = r.shadow {
                crate::registered::remove(s, w);
            }
            sv(api::free_local_addr(r.shadow.unwrap_or(r.addr)))?;
        }
        Origin::Imported => {
            if let (Some((owner, key)), true) = (r.import, r.connected) {
                let msg = [CB_REASON_DISCONNECT as u8, 0, 0, 0]
                    .into_iter()
                    .chain((key as u32).to_le_bytes())
                    .collect::<Vec<u8>>();
                sv(api::send_message(owner, TAG_CB, &msg))?;
            }
        }
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn SMI_Free_shreg(id: c_int) -> c_int {
    entry("SMI_Free_shreg", || {
        let s = smi()?;
        let r = {
            let mut st = s.st();
            let i = st
                .regions
                .iter()
                .position(|r| r.id == id)
                .ok_or(SMI_ERR_PARAM)?;
            st.repl.remove(&id);
            st.regions.remove(i)
        };
        let collective = r.origin == Origin::Collective;
        if collective {
            s.barrier()?;
        }
        release_region(s, r)?;
        if collective {
            s.barrier()?;
        }
        Ok(())
    })
}

/// At SMI_Finalize: every region goes.
pub(crate) fn free_all(s: &Smi) {
    let regions = {
        let mut st = s.st();
        st.repl.clear();
        std::mem::take(&mut st.regions)
    };
    for r in regions {
        let _ = release_region(s, r);
    }
}

#[no_mangle]
pub extern "C" fn SMI_Set_adapter(adapter: c_int) -> c_int {
    entry("SMI_Set_adapter", || {
        smi()?;
        // No SCI adapters: the default adapter (0) and the pseudo-adapters are accepted.
        if adapter == 0 || (ADPT_DEFAULT..=ADPT_BIDIRECTIONAL).contains(&adapter) {
            Ok(())
        } else {
            Err(SMI_ERR_NODEVICE)
        }
    })
}

#[no_mangle]
pub extern "C" fn SMI_Set_region_callback(id: c_int, cb: Option<Callback>) -> c_int {
    entry("SMI_Set_region_callback", || {
        let s = smi()?;
        with_region(s, id, |r| {
            r.cb = cb;
            r.flags.insert(Flag::Callback);
            Ok(())
        })
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Adr_to_region(adr: *mut c_void, id: *mut c_int) -> c_int {
    entry("SMI_Adr_to_region", || {
        let s = smi()?;
        let r = find_range(s, adr as usize, 1)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(id, r) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Range_to_region(
    adr: *mut c_void,
    len: usize,
    id: *mut c_int,
) -> c_int {
    entry("SMI_Range_to_region", || {
        let s = smi()?;
        let r = find_range(s, adr as usize, len)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(id, r) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Region_layout(id: c_int, r: *mut *mut RLayout) -> c_int {
    entry("SMI_Region_layout", || {
        let s = smi()?;
        let (size, adr, segs) = with_region(s, id, |g| Ok((g.size, g.addr, g.segs.clone())))?;
        if r.is_null() {
            return Err(SMI_ERR_PARAM);
        }
        // Separate malloc blocks, so that a program may free the struct and each array.
        let seg_size = ffi::malloc_array(&segs.iter().map(|x| x.1).collect::<Vec<_>>());
        let seg_adr = ffi::malloc_array(&segs.iter().map(|x| x.0 as *mut u8).collect::<Vec<_>>());
        let seg_machine = ffi::malloc_array(&segs.iter().map(|x| x.2 as c_int).collect::<Vec<_>>());
        let l = ffi::malloc(std::mem::size_of::<RLayout>()) as *mut RLayout;
        if l.is_null() || seg_size.is_null() || seg_adr.is_null() || seg_machine.is_null() {
            for p in [
                l as *mut c_void,
                seg_size as _,
                seg_adr as _,
                seg_machine as _,
            ] {
                // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
                // `# Safety`) makes each NULL or valid for this access.
                unsafe { ffi::free(p) };
            }
            return Err(SMI_ERR_NOMEM);
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe {
            ffi::put(
                l,
                RLayout {
                    nsegments: segs.len(),
                    size,
                    adr: adr as *mut u8,
                    seg_size,
                    seg_adr,
                    seg_machine,
                },
            )
        };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(r, l) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Get_region_locator(id: c_int, loc: *mut Locator) -> c_int {
    entry("SMI_Get_region_locator", || {
        let s = smi()?;
        let (owner, sg) = with_region(s, id, |r| Ok((r.owner, r.sgmt_id)))?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe {
            out(
                loc,
                Locator {
                    sci_id: owner as c_int,
                    segment_id: sg,
                },
            )
        }
    })
}

#[no_mangle]
pub extern "C" fn print_region() {
    entry("print_region", || {
        let s = smi()?;
        let st = s.st();
        let mut text = format!("SMI regions of process {}:\n", s.me);
        for r in &st.regions {
            text.push_str(&format!(
                "  region {} type {} flags {:#x} address {:#x} size {} owner {} segments {}{}\n",
                r.id,
                r.kind.value(),
                r.flags.bits(),
                r.addr,
                r.size,
                r.owner,
                r.segs.len(),
                if r.connected { "" } else { " (not connected)" }
            ));
        }
        print!("{text}");
        Ok(())
    });
}
