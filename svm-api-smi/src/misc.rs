//! `SMI_Query`, time, debugging, the watchdog and I/O redirection.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_long, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use svm_core::api;
use svm_core::sys;

use crate::consts::*;
use crate::table::with_region;
use crate::{entry, ffi, out, smi, Res, DEBUG, INITIALIZED, TAG_HB};

fn sys_int(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn cpu_mhz() -> c_int {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("cpu MHz"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .or_else(|| {
            sys_int("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
                .map(|k| k as f64 / 1000.0)
        })
        .map(|m| m.round() as c_int)
        .unwrap_or(0)
}

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn query(cmd: c_int, arg: c_int, result: *mut c_void) -> Res {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    let int = |v: c_int| unsafe { out(result as *mut c_int, v) };
    if cmd == Q_SMI_INITIALIZED {
        let init = INITIALIZED.load(Ordering::Acquire) && smi().is_ok();
        return int(init as c_int);
    }
    if result.is_null() {
        return Err(SMI_ERR_PARAM);
    }
    let Ok(s) = smi() else {
        // SMI writes 0 before saying it is not initialised.
        int(0)?;
        return Err(SMI_ERR_NOINIT);
    };
    // Region queries about an unknown region: SMI answers 0 ("not connected") / -1 (owner).
    let known = crate::table::with_region(s, arg, |_| Ok(())).is_ok();
    match cmd {
        Q_SMI_REGION_CONNECTED if !known => return int(0),
        Q_SMI_REGION_OWNER | Q_SMI_REGION_SGMT_ID if !known => return int(-1),
        _ => {}
    }
    match cmd {
        // No SCI hardware: no adapters, no stream buffers, no DMA, an unknown topology.
        Q_SCI_ADAPTERTYPE | Q_SCI_SYSTEM_TYPE => int(SCI_NONE),
        Q_SCI_ID | Q_SCI_PROC_ID => int(-1),
        Q_SCI_CONNECTION_STATE => int(1),
        Q_SCI_SCI_TOPOLOGY_TYPE => int(SCI_TOPOLOGY_UNKNOWN),
        c if (Q_SCI_FIRST..=Q_SCI_SYSTEM_TYPE).contains(&c) => int(0),
        Q_SMI_SIGNALS_AVAILABLE => int(1),
        Q_SMI_DMA_AVAILABLE => int(0),
        Q_SMI_REGION_CONNECTED => int(with_region(s, arg, |r| Ok(r.connected as c_int))?),
        Q_SMI_REGION_SGMT_ID => int(with_region(s, arg, |r| Ok(r.sgmt_id))?),
        Q_SMI_REGION_ADPTNBR => int(with_region(s, arg, |_| Ok(0))?),
        Q_SMI_REGION_ADDRESS => {
            let a = with_region(s, arg, |r| {
                Ok(if r.connected && r.mapped { r.addr } else { 0 })
            })?;
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            unsafe { out(result as *mut usize, a) }
        }
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        Q_SMI_REGION_SIZE => unsafe {
            out(
                result as *mut c_long,
                with_region(s, arg, |r| Ok(r.size as c_long))?,
            )
        },
        // Regions of several segments (BLOCKED, FRAGMENTED, ...) have no single owner.
        Q_SMI_REGION_OWNER => int(with_region(s, arg, |r| {
            Ok(if r.segs.len() > 1 {
                -1
            } else {
                r.owner as c_int
            })
        })?),
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        Q_SMI_REGION_OFFSET => unsafe {
            out(
                result as *mut c_long,
                with_region(s, arg, |r| Ok(r.offset as c_long))?,
            )
        },
        // The application topology: one dimension of nprocs processes.
        Q_SMI_NBR_APP_DIMS => int(1),
        Q_SMI_APP_DIM_EXTENT => int(if arg == 0 { s.n as c_int } else { 1 }),
        Q_SMI_APP_DIM_OFFSET => int(if arg == 0 { s.me as c_int } else { 0 }),
        Q_SYS_NBRCPUS => int(std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1) as c_int),
        Q_SYS_CPUFREQ => int(cpu_mhz()),
        Q_SYS_PAGESIZE => int(s.page as c_int),
        Q_SYS_WRITECOMBINING => int(WC_DISABLED),
        Q_SYS_PID => {
            let p = crate::check_rank(s, arg)?;
            int(s.pids[p])
        }
        // Ticks are nanoseconds.
        Q_SYS_TICK_DURATION => int(1000),
        Q_SYS_CPU_CACHELINELEN => int(sys_int(
            "/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size",
        )
        .unwrap_or(64) as c_int),
        _ => Err(SMI_ERR_PARAM),
    }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Query(cmd: c_int, arg: c_int, result: *mut c_void) -> c_int {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    entry("SMI_Query", || unsafe { query(cmd, arg, result) })
}

// ----------------------------------------------------------------------------------- time

static TIMER: Mutex<Option<Instant>> = Mutex::new(None);

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn split(d: Duration, sec: *mut c_int, usec: *mut c_int) -> Res {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { out(sec, d.as_secs() as c_int) }?;
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { out(usec, d.subsec_micros() as c_int) }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Get_timer(sec: *mut c_int, usec: *mut c_int) -> c_int {
    entry("SMI_Get_timer", || {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        *TIMER.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { split(now, sec, usec) }
    })
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Get_timespan(sec: *mut c_int, usec: *mut c_int) -> c_int {
    entry("SMI_Get_timespan", || {
        let mut t = TIMER.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let d = t.map(|s| now - s).unwrap_or_default();
        *t = Some(now);
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { split(d, sec, usec) }
    })
}

#[no_mangle]
pub extern "C" fn SMI_Wtime() -> f64 {
    sys::segv::now_ns() as f64 / 1e9
}

#[no_mangle]
pub extern "C" fn SMI_Wticks() -> c_long {
    sys::segv::now_ns() as c_long
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Get_ticks(ticks64: *mut c_void) {
    // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
    // `# Safety`) makes each NULL or valid for this access.
    unsafe { ffi::put(ticks64 as *mut u64, sys::segv::now_ns()) };
}

#[no_mangle]
pub extern "C" fn SMI_Debug(level: c_int) -> c_int {
    entry("SMI_Debug", || {
        DEBUG.store(level, Ordering::Relaxed);
        Ok(())
    })
}

// ------------------------------------------------------------------------------- watchdog

struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

static WATCHDOG: Mutex<Option<Watchdog>> = Mutex::new(None);
static WATCHDOG_CB: Mutex<Option<extern "C" fn()>> = Mutex::new(None);
/// When each watched process last sent a heartbeat (filled by the service thread).
static SEEN: Mutex<Option<HashMap<usize, Instant>>> = Mutex::new(None);

/// A heartbeat from `from` (`stopping`: it ends its part and stops sending).
pub(crate) fn heartbeat(from: usize, stopping: bool) {
    let mut g = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    let m = g.get_or_insert_with(HashMap::new);
    if stopping {
        m.remove(&from);
    } else {
        m.insert(from, Instant::now());
    }
}

fn send_beats(me: usize, n: usize, stopping: bool) {
    for p in (0..n).filter(|p| *p != me) {
        let _ = api::send_message(p, TAG_HB, &[stopping as u8]);
    }
}

/// Stops this process's watchdog and tells the others to stop watching it.
pub(crate) fn stop_watchdog() {
    let w = WATCHDOG.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(w) = w {
        w.stop.store(true, Ordering::Release);
        let _ = w.thread.join();
        send_beats(api::node_id(), api::nodes(), true);
    }
}

#[no_mangle]
pub extern "C" fn SMI_Watchdog(seconds: c_int) -> c_int {
    entry("SMI_Watchdog", || {
        let s = smi()?;
        stop_watchdog();
        if seconds == WATCHDOG_DISABLE || seconds == WATCHDOG_OFF {
            return Ok(());
        }
        if seconds < 0 {
            return Err(SMI_ERR_PARAM);
        }
        let limit = Duration::from_secs(seconds as u64);
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let (me, n) = (s.me, s.n);
        let thread = std::thread::Builder::new()
            .name("smi-watchdog".into())
            .spawn(move || {
                let period = (limit / 3).max(Duration::from_millis(100));
                let mut last = Instant::now() - period;
                while !st.load(Ordering::Acquire) {
                    if last.elapsed() >= period {
                        send_beats(me, n, false);
                        last = Instant::now();
                    }
                    let silent = {
                        let g = SEEN.lock().unwrap_or_else(|p| p.into_inner());
                        g.as_ref().and_then(|m| {
                            m.iter().find(|(_, t)| t.elapsed() > limit).map(|(p, _)| *p)
                        })
                    };
                    if let Some(p) = silent {
                        let cb = *WATCHDOG_CB.lock().unwrap_or_else(|p| p.into_inner());
                        if let Some(cb) = cb {
                            let _ = std::panic::catch_unwind(|| cb());
                        }
                        api::abort_job(
                            1,
                            &format!(
                                "SMI watchdog: process {p} gave no sign of life for {seconds} s"
                            ),
                        );
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
            .map_err(|_| SMI_ERR_OTHER)?;
        *WATCHDOG.lock().unwrap_or_else(|p| p.into_inner()) = Some(Watchdog { stop, thread });
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn SMI_Watchdog_callback(f: Option<extern "C" fn()>) -> c_int {
    entry("SMI_Watchdog_callback", || {
        smi()?;
        *WATCHDOG_CB.lock().unwrap_or_else(|p| p.into_inner()) = f;
        Ok(())
    })
}

// -------------------------------------------------------------------------- I/O redirection

/// # Safety
/// Each pointer argument is NULL or valid for the access described above: the contract of
/// the exported function that passes on its C caller's pointers.
unsafe fn redirect(s: &crate::Smi, mode: c_int, param: *mut c_void, fd: i32, read: bool) -> Res {
    match mode {
        IO_ASIS => Ok(()),
        IO_FILE => {
            // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
            // `# Safety`) makes each NULL or valid for this access.
            let name = unsafe { ffi::string(param as *const c_char) }.ok_or(SMI_ERR_PARAM)?;
            let path = format!("{name}.{}", s.me);
            ffi::redirect_fd(fd, &path, read).map_err(|e| {
                eprintln!("smi[{}]: SMI_Redirect_IO: {path}: {e}", s.me);
                SMI_ERR_OTHER
            })
        }
        _ => Err(SMI_ERR_PARAM),
    }
}

/// # Safety
/// Each pointer argument is NULL or valid, for the duration of the call, for the access this
/// function's C documentation describes (the C caller's contract; NULL is refused with an
/// error code).
#[no_mangle]
pub unsafe extern "C" fn SMI_Redirect_IO(
    err: c_int,
    errparam: *mut c_void,
    out_: c_int,
    outparam: *mut c_void,
    in_: c_int,
    inparam: *mut c_void,
) -> c_int {
    entry("SMI_Redirect_IO", || {
        let s = smi()?;
        for m in [err, out_, in_] {
            if m != IO_ASIS && m != IO_FILE {
                return Err(SMI_ERR_PARAM);
            }
        }
        sys::flush_stdio();
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { redirect(s, err, errparam, 2, false) }?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { redirect(s, out_, outparam, 1, false) }?;
        // SAFETY: the pointer arguments come from the C caller, whose contract (this function's
        // `# Safety`) makes each NULL or valid for this access.
        unsafe { redirect(s, in_, inparam, 0, true) }
    })
}
