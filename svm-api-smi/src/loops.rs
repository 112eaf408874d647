//! Loop splitting (`SMI_Loop_split_init`, ...) and loop scheduling (`SMI_Loop_init`,
//! `SMI_Get_iterations`, ...).
//!
//! Loop scheduling keeps, per process, the part of the index space it has not handed out yet
//! as `[next, end)` in a word pair homed on that process and guarded by an svm lock it
//! manages. A process takes chunks from the front of its own part (status LOCAL), then steals
//! chunks from the back of the parts of processes within the help distance (status REMOTE).
//! Every chunk is cut under the owner's lock, so every index is handed out exactly once.

use std::ffi::c_int;
use std::time::Instant;

use svm_core::api::{self, Home, SharedSlice};

use crate::consts::*;
use crate::layout;
use crate::table::with_region;
use crate::{entry, out, smi, sv, Res, Smi, K_LOOP};

/// One scheduled loop (`SMI_Loop_init`).
#[derive(Debug, Clone)]
pub(crate) struct Sched {
    w: SharedSlice<u64>,
    key: u64,
    lo: i64,
    len: i64,
    cyclic: bool,
    k: f64,
    kcur: f64,
    min_local: i64,
    min_remote: i64,
    max_local: i64,
    max_remote: i64,
    help: i32,
    adapt: i32,
    /// `SMI_PART_*` of the loop.
    mode: c_int,
    /// This process's last call returned `SMI_LOOP_READY`: the next call starts a new run
    /// over the whole range (SMI's rePartition: barrier, new parts, barrier).
    ready: bool,
    /// TIMED_BLOCKED: when this process took its block, and how many indices it had.
    taken: Option<(Instant, i64)>,
    /// Runs started and indices handed to this process (`SVM_SMI_LOOP_STATS`).
    runs: u64,
    got: u64,
}

/// One old-style loop splitting (`SMI_Loop_split_init`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Split {
    glo: i64,
    ghi: i64,
    llo: i64,
    lhi: i64,
    started: Option<Instant>,
    secs: f64,
}

impl Sched {
    fn row(&self, s: &Smi, p: usize) -> usize {
        p * s.page / 8
    }
    fn lock(&self, s: &Smi, p: usize) -> u64 {
        s.sync_id(K_LOOP, self.key, p)
    }
    /// Index of position `pos` of process `p`'s part.
    fn index(&self, s: &Smi, p: usize, pos: i64) -> i64 {
        if self.cyclic {
            self.lo + p as i64 + pos * s.n as i64
        } else {
            self.lo + pos
        }
    }
    /// The weights of a new run's parts.
    fn weights(&self, s: &Smi) -> Res<Vec<f64>> {
        Ok(match self.mode {
            PART_ADAPTED_BLOCKED => speed_weights(s),
            PART_TIMED_BLOCKED => {
                // Iterations per second of each process's last block (SMI measures the time
                // between taking the block and the next call).
                let mine = match self.taken {
                    Some((t, n)) if n > 0 => n as f64 / t.elapsed().as_secs_f64().max(1e-9),
                    _ => 0.0,
                };
                let all = s.allgather(&[mine.to_bits()])?;
                let v: Vec<f64> = all.iter().map(|x| f64::from_bits(x[0])).collect();
                if v.iter().all(|x| *x > 0.0 && x.is_finite()) {
                    v
                } else {
                    speed_weights(s)
                }
            }
            _ => equal_weights(s),
        })
    }
    /// Writes this process's initial part.
    fn init_own(&self, s: &Smi, weights: &[f64]) -> Res {
        let (a, b) = if self.cyclic {
            (0, layout::class_count(self.len, s.me, s.n))
        } else {
            layout::weighted_blocks(self.len, weights)[s.me]
        };
        let r = self.row(s, s.me);
        s.locked(self.lock(s, s.me), || {
            self.w.write_from(r, &[a as u64, b as u64])
        })
    }
    /// SMI's chunk rule: what is left when it is at most the minimum, else remaining / k
    /// rounded to nearest and at least the minimum; never above the maximum (0: none).
    fn chunk(&self, rem: i64, min: i64, max: i64) -> i64 {
        let mut c = rem;
        if rem > min {
            c = ((rem as f64 / self.kcur.max(1.0)) + 0.5) as i64;
            c = c.max(min);
        }
        if max > 0 {
            c = c.min(max);
        }
        c.clamp(1, rem)
    }
    fn adapt_k(&mut self, s: &Smi) {
        self.kcur = match self.adapt {
            ADAPT_EXPO => (self.kcur * 2.0).min(1e6),
            ADAPT_LINEAR => (self.kcur + 1.0).min(1e6),
            ADAPT_OPT => s.n as f64,
            _ => self.kcur,
        };
    }
}

fn equal_weights(s: &Smi) -> Vec<f64> {
    vec![1.0; s.n]
}

fn speed_weights(s: &Smi) -> Vec<f64> {
    s.st().speeds.clone().unwrap_or_else(|| equal_weights(s))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Loop_init(id: *mut c_int, lo: c_int, hi: c_int, mode: c_int) -> c_int {
    entry("SMI_Loop_init", || {
        let s = smi()?;
        if id.is_null() || !(PART_BLOCKED..=PART_TIMED_BLOCKED).contains(&mode) {
            return Err(SMI_ERR_PARAM);
        }
        s.barrier()?;
        let home = Home::Runs((0..s.n).map(|p| (p as u16, 1)).collect());
        let w = sv(api::alloc_collective_in::<u64>(
            s.n * s.page / 8,
            home,
            &s.proto,
        ))?;
        let idx = s.st().loops.len();
        let sched = Sched {
            w,
            key: (w.addr() / s.page) as u64,
            lo: lo as i64,
            len: (hi as i64 - lo as i64 + 1).max(0),
            cyclic: mode == PART_CYCLIC,
            k: s.n as f64,
            kcur: s.n as f64,
            min_local: 1,
            min_remote: 1,
            max_local: 0,
            max_remote: 0,
            help: 16,
            adapt: NO_ADAPT,
            mode,
            ready: false,
            taken: None,
            runs: 1,
            got: 0,
        };
        let weights = sched.weights(s)?;
        sched.init_own(s, &weights)?;
        s.st().loops.push(Some(sched));
        s.barrier()?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(id, idx as c_int) }
    })
}

fn with_loop<T>(s: &Smi, id: c_int, f: impl FnOnce(&mut Sched) -> T) -> Res<T> {
    let mut st = s.st();
    let l = usize::try_from(id)
        .ok()
        .and_then(|i| st.loops.get_mut(i))
        .and_then(|l| l.as_mut())
        .ok_or(SMI_ERR_PARAM)?;
    Ok(f(l))
}

/// Takes the next chunk: (status, lo, hi) with hi inclusive.
fn next_chunk(s: &Smi, id: c_int) -> Res<(c_int, i64, i64)> {
    let (st, a, b) = take_chunk(s, id)?;
    with_loop(s, id, |l| {
        l.ready = st == LOOP_READY;
        if b >= a {
            let step = if l.cyclic { s.n as i64 } else { 1 };
            l.got += ((b - a) / step + 1) as u64;
        }
    })?;
    Ok((st, a, b))
}

/// A new run over the whole range (after this process saw `SMI_LOOP_READY`): as SMI's
/// rePartition, a barrier (everybody finished the last run), new parts, a barrier (every part
/// is written before anybody steals).
fn restart(s: &Smi, id: c_int) -> Res {
    let l = with_loop(s, id, |l| l.clone())?;
    s.barrier()?;
    let w = l.weights(s)?;
    l.init_own(s, &w)?;
    s.barrier()?;
    with_loop(s, id, |m| {
        m.kcur = m.k;
        m.taken = None;
        m.runs += 1;
    })
}

fn take_chunk(s: &Smi, id: c_int) -> Res<(c_int, i64, i64)> {
    if with_loop(s, id, |l| l.ready)? {
        restart(s, id)?;
    }
    let l = with_loop(s, id, |l| l.clone())?;
    let r = l.row(s, s.me);
    if l.mode == PART_TIMED_BLOCKED {
        // The whole own block at once, with SMI_LOOP_READY (SMI's getLocalTimed).
        let (a, b) = s.locked(l.lock(s, s.me), || {
            let (next, end) = (l.w.get(r) as i64, l.w.get(r + 1) as i64);
            l.w.set(r, end as u64);
            (next, end)
        })?;
        with_loop(s, id, |m| m.taken = Some((Instant::now(), b - a)))?;
        return Ok(if a < b {
            (LOOP_READY, l.index(s, s.me, a), l.index(s, s.me, b - 1))
        } else {
            (LOOP_READY, 1, 0)
        });
    }
    // Own part, from the front.
    let own = s.locked(l.lock(s, s.me), || {
        let (next, end) = (l.w.get(r) as i64, l.w.get(r + 1) as i64);
        if next < end {
            let c = l.chunk(end - next, l.min_local, l.max_local);
            l.w.set(r, (next + c) as u64);
            Some((next, next + c - 1))
        } else {
            None
        }
    })?;
    if let Some((a, b)) = own {
        with_loop(s, id, |m| m.adapt_k(s))?;
        return Ok((LOOP_LOCAL, l.index(s, s.me, a), l.index(s, s.me, b)));
    }
    // Others' parts, nearest first, from the back.
    let reach = if l.help < 0 {
        0
    } else {
        (l.help as usize).min(s.n - 1)
    };
    for d in 1..=reach {
        let v = (s.me + d) % s.n;
        let r = l.row(s, v);
        let got = s.locked(l.lock(s, v), || {
            let (next, end) = (l.w.get(r) as i64, l.w.get(r + 1) as i64);
            if next < end {
                let c = l.chunk(end - next, l.min_remote, l.max_remote);
                l.w.set(r + 1, (end - c) as u64);
                Some((end - c, end - 1))
            } else {
                None
            }
        })?;
        if let Some((a, b)) = got {
            return Ok((LOOP_REMOTE, l.index(s, v, a), l.index(s, v, b)));
        }
    }
    // An empty range: `for (i = lo; i <= hi; i++)` runs no iteration.
    Ok((LOOP_READY, 1, 0))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Get_iterations(
    id: c_int,
    status: *mut c_int,
    lo: *mut c_int,
    hi: *mut c_int,
) -> c_int {
    entry("SMI_Get_iterations", || {
        let s = smi()?;
        if status.is_null() || lo.is_null() || hi.is_null() {
            return Err(SMI_ERR_PARAM);
        }
        let (st, a, b) = next_chunk(s, id)?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(status, st) }?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(lo, a as c_int) }?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(hi, b as c_int) }
    })
}

#[no_mangle]
pub extern "C" fn SMI_Loop_free(id: c_int) -> c_int {
    entry("SMI_Loop_free", || {
        let s = smi()?;
        let (runs, got) = with_loop(s, id, |l| (l.runs, l.got))?;
        if std::env::var_os("SVM_SMI_LOOP_STATS").is_some() {
            eprintln!("smi[{}]: loop {id}: runs={runs} indices={got}", s.me);
        }
        s.st().loops[id as usize] = None;
        Ok(())
    })
}

/// A fixed floating-point workload; returns its duration in seconds.
fn benchmark() -> f64 {
    let t = Instant::now();
    let mut x = 1.000_001f64;
    for i in 0..2_000_000u32 {
        x = std::hint::black_box(x * 1.000_000_1 + (i & 7) as f64 * 1e-9);
    }
    std::hint::black_box(x);
    t.elapsed().as_secs_f64().max(1e-9)
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Evaluate_speed(speeds: *mut f64) -> c_int {
    entry("SMI_Evaluate_speed", || {
        let s = smi()?;
        let mine = 1.0 / benchmark();
        let all = s.allgather(&[mine.to_bits()])?;
        let v: Vec<f64> = all.iter().map(|x| f64::from_bits(x[0])).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let norm: Vec<f64> = v.iter().map(|x| x / mean).collect();
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        if !speeds.is_null() && !unsafe { crate::ffi::write_array(speeds, &norm) } {
            return Err(SMI_ERR_PARAM);
        }
        s.st().speeds = Some(norm);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn SMI_Use_evaluated_speed(id: c_int) -> c_int {
    entry("SMI_Use_evaluated_speed", || {
        let s = smi()?;
        let l = with_loop(s, id, |l| l.clone())?;
        if l.cyclic {
            return Ok(());
        }
        // Collective: nobody may take chunks while the parts are redrawn.
        s.barrier()?;
        l.init_own(s, &speed_weights(s))?;
        s.barrier()
    })
}

fn keep(v: i32, old: i64) -> i64 {
    if v == NO_CHANGE {
        old
    } else {
        v as i64
    }
}

#[no_mangle]
pub extern "C" fn SMI_Set_loop_param(
    id: c_int,
    k: f64,
    min_local: c_int,
    min_remote: c_int,
    max_local: c_int,
    max_remote: c_int,
) -> c_int {
    entry("SMI_Set_loop_param", || {
        let s = smi()?;
        if [min_local, min_remote, max_local, max_remote]
            .iter()
            .any(|v| *v < 0)
            || k < 0.0
            || !k.is_finite()
        {
            return Err(SMI_ERR_PARAM);
        }
        with_loop(s, id, |l| {
            if k != NO_CHANGE as f64 {
                l.k = k;
                l.kcur = k;
            }
            l.min_local = keep(min_local, l.min_local);
            l.min_remote = keep(min_remote, l.min_remote);
            l.max_local = keep(max_local, l.max_local);
            l.max_remote = keep(max_remote, l.max_remote);
        })
    })
}

#[no_mangle]
pub extern "C" fn SMI_Set_loop_help_param(id: c_int, max_help_dist: c_int) -> c_int {
    entry("SMI_Set_loop_help_param", || {
        let s = smi()?;
        if max_help_dist < HELP_ONLY_SMP {
            return Err(SMI_ERR_PARAM);
        }
        with_loop(s, id, |l| l.help = max_help_dist)
    })
}

#[no_mangle]
pub extern "C" fn SMI_Loop_k_adaption_mode(id: c_int, mode: c_int, _max_calc_dist: c_int) -> c_int {
    entry("SMI_Loop_k_adaption_mode", || {
        let s = smi()?;
        if !(NO_ADAPT..=ADAPT_OPT).contains(&mode) {
            return Err(SMI_ERR_PARAM);
        }
        with_loop(s, id, |l| {
            l.adapt = mode;
            l.kcur = l.k;
        })
    })
}

// ------------------------------------------------------------------------- loop splitting

fn with_split<T>(s: &Smi, id: c_int, f: impl FnOnce(&mut Split) -> T) -> Res<T> {
    let mut st = s.st();
    let l = usize::try_from(id)
        .ok()
        .and_then(|i| st.splits.get_mut(i))
        .ok_or(SMI_ERR_PARAM)?;
    Ok(f(l))
}

/// The local range of `split` for block `me` of weights.
fn set_block(split: &mut Split, me: usize, weights: &[f64]) {
    let len = (split.ghi - split.glo + 1).max(0);
    let (a, b) = layout::weighted_blocks(len, weights)[me];
    split.llo = split.glo + a;
    split.lhi = split.glo + b - 1;
}

/// The local range of a split: this process's range of the split given to
/// `SMI_Switch_to_sharing(..., SMI_SHR_LOOP_SPLITTING, ...)`.
pub(crate) fn split_local(s: &Smi, id: c_int) -> Res<(i64, i64)> {
    with_split(s, id, |l| (l.llo, l.lhi))
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Loop_split_init(id: *mut c_int) -> c_int {
    entry("SMI_Loop_split_init", || {
        let s = smi()?;
        let i = {
            let mut st = s.st();
            st.splits.push(Split {
                glo: 0,
                ghi: -1,
                llo: 0,
                lhi: -1,
                ..Default::default()
            });
            st.splits.len() - 1
        };
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(id, i as c_int) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Loop_index_range(
    id: c_int,
    lower: *mut c_int,
    upper: *mut c_int,
    mode: c_int,
) -> c_int {
    entry("SMI_Loop_index_range", || {
        let s = smi()?;
        let (lo, hi) = match mode {
            LOOP_SET_GLOBAL | LOOP_SET_LOCAL => {
                // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
                // `# Safety`) makes each NULL or valid for this access.
                let lo = unsafe { crate::ffi::get(lower as *const c_int) }.ok_or(SMI_ERR_PARAM)?;
                // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
                // `# Safety`) makes each NULL or valid for this access.
                let hi = unsafe { crate::ffi::get(upper as *const c_int) }.ok_or(SMI_ERR_PARAM)?;
                (lo as i64, hi as i64)
            }
            LOOP_GET_GLOBAL | LOOP_GET_LOCAL => (0, 0),
            _ => return Err(SMI_ERR_PARAM),
        };
        let (a, b) = with_split(s, id, |l| match mode {
            LOOP_SET_GLOBAL => {
                l.glo = lo;
                l.ghi = hi;
                (lo, hi)
            }
            LOOP_SET_LOCAL => {
                l.llo = lo;
                l.lhi = hi;
                (lo, hi)
            }
            LOOP_GET_GLOBAL => (l.glo, l.ghi),
            _ => (l.llo, l.lhi),
        })?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(lower, a as c_int) }?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { out(upper, b as c_int) }
    })
}

#[no_mangle]
pub extern "C" fn SMI_Determine_loop_splitting(
    id: c_int,
    mode: c_int,
    param1: c_int,
    param2: c_int,
) -> c_int {
    entry("SMI_Determine_loop_splitting", || {
        let s = smi()?;
        match mode {
            SPLIT_REGULAR => with_split(s, id, |l| {
                (l.llo, l.lhi) = layout::regular_block(l.glo, l.ghi, s.me, s.n);
            }),
            SPLIT_OWNER => {
                if param1 <= 0 {
                    return Err(SMI_ERR_PARAM);
                }
                let elem = param1 as i64;
                let (base, segs) = with_region(s, param2, |r| Ok((r.addr as i64, r.segs.clone())))?;
                with_split(s, id, |l| {
                    // As SMI: byte 0 of the region is element `lower`; this process's part of
                    // the first (upper - lower + 1) elements, floor-divided into elements;
                    // (0, -1) when it has none.
                    let bytes = (l.ghi - l.glo + 1).max(0) * elem;
                    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
                    for (a, len, p) in segs {
                        let off = a as i64 - base;
                        let end = (off + len as i64).min(bytes);
                        if p != s.me || off >= end {
                            continue;
                        }
                        let first = l.glo + off / elem;
                        let last = first + (end - off) / elem - 1;
                        if first <= last {
                            lo = lo.min(first);
                            hi = hi.max(last);
                        }
                    }
                    (l.llo, l.lhi) = if lo > hi { (0, -1) } else { (lo, hi) };
                })
            }
            _ => Err(SMI_ERR_PARAM),
        }
    })
}

#[no_mangle]
pub extern "C" fn SMI_Loop_time_start(id: c_int) -> c_int {
    entry("SMI_Loop_time_start", || {
        with_split(smi()?, id, |l| l.started = Some(Instant::now()))
    })
}

#[no_mangle]
pub extern "C" fn SMI_Loop_time_stop(id: c_int) -> c_int {
    entry("SMI_Loop_time_stop", || {
        with_split(smi()?, id, |l| {
            if let Some(t) = l.started.take() {
                l.secs += t.elapsed().as_secs_f64();
            }
        })
    })
}

#[no_mangle]
pub extern "C" fn SMI_Loop_balance_index_range(id: c_int) -> c_int {
    entry("SMI_Loop_balance_index_range", || {
        let s = smi()?;
        let (count, secs) = with_split(s, id, |l| ((l.lhi - l.llo + 1).max(0) as f64, l.secs))?;
        let speed = if secs > 0.0 && count > 0.0 {
            count / secs
        } else {
            0.0
        };
        let all = s.allgather(&[speed.to_bits()])?;
        let mut w: Vec<f64> = all.iter().map(|x| f64::from_bits(x[0])).collect();
        if w.iter().any(|x| *x <= 0.0 || !x.is_finite()) {
            w = equal_weights(s);
        }
        with_split(s, id, |l| {
            set_block(l, s.me, &w);
            l.secs = 0.0;
        })
    })
}
