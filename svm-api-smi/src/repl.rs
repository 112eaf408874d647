//! Switching a region between sharing and replication.
//!
//! SMI gives every process a private copy of a replicated region *at the same address*. A DSM
//! window cannot hold different contents for different processes at one address at the same
//! time, and svm-core has no call (yet) that takes pages out of coherence, so svm runs the
//! replicated phase of the processes one after the other: process 0 runs on while the others
//! wait inside `SMI_Switch_to_replication`; when a process reaches `SMI_Ensure_consistency`
//! or `SMI_Switch_to_sharing`, its copy (the region's contents) is saved into its row of a
//! scratch region, the region is restored to the contents at the start of the phase, and the
//! next process runs. When all copies are saved, they are combined as the mode says (single
//! source, every-local, loop splitting, or an ADD reduction) into the region. Results are
//! those of SMI; the replicated phase runs serially, and collective calls (barriers, other
//! collectives) or waiting for another process inside it are not possible (they fail with a
//! message instead of hanging). With one process, replication changes nothing (as in SMI).

use std::ffi::c_int;
use std::sync::atomic::Ordering;

use svm_core::api::{self, Home, SharedSlice};

use crate::consts::*;
use crate::table::with_region;
use crate::{entry, smi, sv, Res, Smi, K_TURN};

#[derive(Debug)]
pub(crate) struct Repl {
    active: bool,
    /// Contents every process's copy starts from (None: undefined, REP_NOTHING).
    snapshot: Option<Vec<u8>>,
    /// n rows of the region's size, row p homed on process p.
    scratch: SharedSlice<u8>,
}

fn region_bytes(addr: usize, size: usize) -> Res<SharedSlice<u8>> {
    sv(SharedSlice::<u8>::from_raw_parts(addr, size))
}

fn read_all(m: SharedSlice<u8>) -> Vec<u8> {
    let mut v = vec![0u8; m.len()];
    m.read_into(0, &mut v);
    v
}

fn turn_sem(s: &Smi, addr: usize, p: usize) -> u64 {
    s.sync_id(K_TURN, (addr / s.page) as u64, p)
}

/// Starts (or restarts) this process's serialized turn: everyone takes the snapshot, then
/// process 0 runs and the others wait for their turn.
fn enter_phase(s: &Smi, id: c_int, addr: usize, snapshot: Option<Vec<u8>>) -> Res {
    sv(api::barrier())?;
    if let Some(rp) = s.st().repl.get_mut(&id) {
        rp.active = true;
        rp.snapshot = snapshot;
    }
    s.in_replication.store(true, Ordering::Release);
    if s.me != 0 {
        sv(api::sem_wait(turn_sem(s, addr, s.me)))?;
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn SMI_Switch_to_replication(
    id: c_int,
    mode: c_int,
    _p1: c_int,
    _p2: c_int,
    _p3: c_int,
) -> c_int {
    entry("SMI_Switch_to_replication", || {
        let s = smi()?;
        let (addr, size) = with_region(s, id, |r| {
            if !r.connected || !r.mapped || r.frags.is_some() {
                return Err(SMI_ERR_PARAM);
            }
            Ok((r.addr, r.size))
        })?;
        let (active, has) = {
            let st = s.st();
            let rp = st.repl.get(&id);
            (rp.is_some_and(|x| x.active), rp.is_some())
        };
        let known = REP_NOTHING | REP_EVERYTHING | REP_LOCAL_AND_BEYOND | REP_ONE_PER_NODE;
        if mode & !known != 0 || mode & (REP_NOTHING | REP_EVERYTHING | REP_LOCAL_AND_BEYOND) == 0 {
            return Err(SMI_ERR_PARAM);
        }
        if active || s.in_replication.load(Ordering::Acquire) {
            return if active { Ok(()) } else { Err(SMI_ERR_BUSY) };
        }
        if s.n == 1 {
            return Ok(());
        }
        sv(api::barrier())?;
        if !has {
            let home = Home::Runs(
                (0..s.n)
                    .map(|p| (p as u16, (size / s.page) as u64))
                    .collect(),
            );
            let scratch = s.alloc_region(size * s.n, home)?;
            s.st().repl.insert(
                id,
                Repl {
                    active: false,
                    snapshot: None,
                    scratch,
                },
            );
        }
        // REP_EVERYTHING and REP_LOCAL_AND_BEYOND: every copy starts with the contents.
        let snapshot = if mode & REP_NOTHING == 0 {
            Some(read_all(region_bytes(addr, size)?))
        } else {
            None
        };
        enter_phase(s, id, addr, snapshot)
    })
}

/// Ends this process's turn and waits for every process to end its own; returns this
/// process's copy.
fn finish_turns(s: &Smi, id: c_int) -> Res<Copies> {
    let (addr, size) = with_region(s, id, |r| Ok((r.addr, r.size)))?;
    let (snapshot, scratch) = match s.st().repl.get_mut(&id) {
        Some(rp) if rp.active => {
            rp.active = false;
            (rp.snapshot.take(), rp.scratch)
        }
        _ => return Err(SMI_ERR_PARAM),
    };
    let region = region_bytes(addr, size)?;
    let mine = read_all(region);
    scratch.slice(s.me * size, size).write_from(0, &mine);
    if let Some(snap) = &snapshot {
        region.write_from(0, snap);
    }
    s.in_replication.store(false, Ordering::Release);
    if s.me + 1 < s.n {
        sv(api::sem_post(turn_sem(s, addr, s.me + 1)))?;
    }
    sv(api::barrier())?;
    Ok(Copies {
        addr,
        size,
        mine,
        scratch,
    })
}

/// Combines the copies into the region (every process calls it; ends with a barrier).
/// Every process's copy after the replicated phase: this process's own, the others' in the
/// scratch rows.
struct Copies {
    addr: usize,
    size: usize,
    mine: Vec<u8>,
    scratch: SharedSlice<u8>,
}

fn combine(s: &Smi, id: c_int, comb: c_int, p1: c_int, p2: c_int, c: &Copies) -> Res {
    let (addr, size, mine, scratch) = (c.addr, c.size, &c.mine[..], c.scratch);
    let region = region_bytes(addr, size)?;
    if comb & SHR_ADD != 0 {
        let (elem, kind) = match (
            comb & DTYPE_FLOATINGPOINT != 0,
            comb & DTYPE_FIXPOINT != 0,
            comb & DTYPE_HIGHPRECISION != 0,
        ) {
            (true, _, false) => (4, 'f'),
            (true, _, true) => (8, 'f'),
            (false, true, false) => (4, 'i'),
            (false, true, true) => (8, 'i'),
            _ => return Err(SMI_ERR_PARAM),
        };
        let count = (p1.max(0) as usize).min(size / elem);
        // Page-aligned slices: two processes never write the same page (nor diff word).
        let (a, b) = page_slice(s, count * elem);
        let (a, b) = (a / elem, b / elem);
        if b > a {
            let bytes = (b - a) * elem;
            let mut acc = vec![0u8; bytes];
            let mut row = vec![0u8; bytes];
            for p in 0..s.n {
                if p == s.me {
                    row.copy_from_slice(&mine[a * elem..b * elem]);
                } else {
                    scratch
                        .slice(p * size + a * elem, bytes)
                        .read_into(0, &mut row);
                }
                add_into(&mut acc, &row, elem, kind, p == 0);
            }
            region.write_from(a * elem, &acc);
        }
    } else if comb & SHR_SINGLE_SOURCE != 0 {
        let src = crate::check_rank(s, p1)?;
        if src == s.me {
            region.write_from(0, mine);
        }
    } else if comb & SHR_LOOP_SPLITTING != 0 {
        // Every process's local range, then each process writes a page-aligned slice of the
        // region, taking each element from the copy of the process whose range holds it.
        let (lo, hi) = crate::loops::split_local(s, p1)?;
        let elem = p2.max(1) as usize;
        let ranges = s.allgather(&[lo as u64, hi as u64])?;
        let (a, b) = page_slice(s, size);
        for (q, r) in ranges.iter().enumerate() {
            let (lo, hi) = (r[0] as i64, r[1] as i64);
            if hi < lo || lo < 0 {
                continue;
            }
            let from = (lo as usize * elem).clamp(a, b);
            let to = ((hi as usize + 1) * elem).clamp(a, b);
            if to > from {
                if q == s.me {
                    region.write_from(from, &mine[from..to]);
                } else {
                    let mut v = vec![0u8; to - from];
                    scratch
                        .slice(q * size + from, to - from)
                        .read_into(0, &mut v);
                    region.write_from(from, &v);
                }
            }
        }
    } else if comb & SHR_EVERY_LOCAL != 0 {
        let segs = with_region(s, id, |r| Ok(r.segs.clone()))?;
        for (a, len, p) in segs {
            if p == s.me && a >= addr && a + len <= addr + size {
                let off = a - addr;
                region.write_from(off, &mine[off..off + len]);
            }
        }
    } else if comb & SHR_NOTHING == 0 {
        return Err(SMI_ERR_PARAM);
    }
    sv(api::barrier())
}

/// This process's page-aligned share `[a, b)` of `bytes` bytes.
fn page_slice(s: &Smi, bytes: usize) -> (usize, usize) {
    let pages = bytes.div_ceil(s.page);
    let a = (pages * s.me / s.n * s.page).min(bytes);
    let b = (pages * (s.me + 1) / s.n * s.page).min(bytes);
    (a, b)
}

/// `acc += row`, elementwise (`first`: acc = row).
fn add_into(acc: &mut [u8], row: &[u8], elem: usize, kind: char, first: bool) {
    for (a, r) in acc.chunks_exact_mut(elem).zip(row.chunks_exact(elem)) {
        if first {
            a.copy_from_slice(r);
            continue;
        }
        match (kind, elem) {
            ('f', 4) => {
                let v = f32::from_ne_bytes(a[..4].try_into().unwrap_or_default())
                    + f32::from_ne_bytes(r[..4].try_into().unwrap_or_default());
                a.copy_from_slice(&v.to_ne_bytes());
            }
            ('f', _) => {
                let v = f64::from_ne_bytes(a[..8].try_into().unwrap_or_default())
                    + f64::from_ne_bytes(r[..8].try_into().unwrap_or_default());
                a.copy_from_slice(&v.to_ne_bytes());
            }
            (_, 4) => {
                let v = i32::from_ne_bytes(a[..4].try_into().unwrap_or_default())
                    .wrapping_add(i32::from_ne_bytes(r[..4].try_into().unwrap_or_default()));
                a.copy_from_slice(&v.to_ne_bytes());
            }
            _ => {
                let v = i64::from_ne_bytes(a[..8].try_into().unwrap_or_default())
                    .wrapping_add(i64::from_ne_bytes(r[..8].try_into().unwrap_or_default()));
                a.copy_from_slice(&v.to_ne_bytes());
            }
        }
    }
}

fn merge(id: c_int, comb: c_int, p1: c_int, p2: c_int, stay: bool) -> Res {
    let s = smi()?;
    with_region(s, id, |_| Ok(()))?;
    let active = s.st().repl.get(&id).is_some_and(|x| x.active);
    if s.n == 1 {
        return Ok(());
    }
    if !active {
        // Not replicated: a consistency point for everyone.
        return if stay {
            Err(SMI_ERR_PARAM)
        } else {
            sv(api::barrier())
        };
    }
    let c = finish_turns(s, id)?;
    combine(s, id, comb, p1, p2, &c)?;
    if stay {
        let merged = read_all(region_bytes(c.addr, c.size)?);
        enter_phase(s, id, c.addr, Some(merged))?;
    }
    Ok(())
}

#[no_mangle]
pub extern "C" fn SMI_Switch_to_sharing(id: c_int, comb: c_int, p1: c_int, p2: c_int) -> c_int {
    entry("SMI_Switch_to_sharing", || merge(id, comb, p1, p2, false))
}

#[no_mangle]
pub extern "C" fn SMI_Ensure_consistency(id: c_int, comb: c_int, p1: c_int, p2: c_int) -> c_int {
    entry("SMI_Ensure_consistency", || merge(id, comb, p1, p2, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_into_sums_each_type() {
        let mut acc = vec![0u8; 8];
        add_into(&mut acc, &[1, 0, 0, 0, 2, 0, 0, 0], 4, 'i', true);
        add_into(&mut acc, &[3, 0, 0, 0, 4, 0, 0, 0], 4, 'i', false);
        assert_eq!(acc, vec![4, 0, 0, 0, 6, 0, 0, 0]);
        let mut acc = 1.5f64.to_ne_bytes().to_vec();
        add_into(&mut acc, &2.25f64.to_ne_bytes(), 8, 'f', false);
        assert_eq!(f64::from_ne_bytes(acc[..8].try_into().unwrap()), 3.75);
    }
}
