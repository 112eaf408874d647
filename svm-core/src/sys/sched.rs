//! Scheduling attributes of the calling thread (`sched_setattr`).

use super::SysError;

/// What [`set_current_thread_sched`] could apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The slice and the nice value.
    Both,
    /// The slice only: raising the thread's priority (a nice value below its own) needs
    /// `CAP_SYS_NICE` or `RLIMIT_NICE`.
    SliceOnly,
}

/// Gives the calling thread, under the normal (fair) scheduling class, a custom time slice of
/// `slice_ns` nanoseconds (0: the kernel's default) and the nice value `nice` (None: keep
/// its own). Since Linux 6.12 a woken thread whose slice is shorter than the running
/// thread's preempts it at once, if it is eligible (has not had more than its share of the
/// CPU lately, which a lower nice value makes likelier); the kernel clamps `slice_ns` to
/// 0.1–100 ms, and older kernels ignore it. If the nice value is not permitted, the slice is
/// still applied.
pub fn set_current_thread_sched(slice_ns: u64, nice: Option<i32>) -> Result<Applied, SysError> {
    // errno is cleared first because -1 is also a valid nice value.
    nix::errno::Errno::clear();
    // SAFETY: getpriority with PRIO_PROCESS and 0 reads the calling thread's nice value; it
    // has no memory arguments.
    let own = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    if own == -1 && nix::errno::Errno::last_raw() != 0 {
        return Err(SysError::Call {
            call: "getpriority",
            errno: nix::errno::Errno::last(),
        });
    }
    let set = |nice: i32| {
        let attr = libc::sched_attr {
            size: std::mem::size_of::<libc::sched_attr>() as u32,
            sched_policy: libc::SCHED_OTHER as u32,
            sched_flags: 0,
            sched_nice: nice,
            sched_priority: 0,
            sched_runtime: slice_ns,
            sched_deadline: 0,
            sched_period: 0,
        };
        // SAFETY: `attr` is a valid, fully initialised `sched_attr` whose `size` field is its
        // size; the kernel only reads it during the call. Thread id 0 is the calling thread.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_setattr,
                0,
                &attr as *const libc::sched_attr,
                0,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(nix::errno::Errno::last())
        }
    };
    let fail = |errno| SysError::Call {
        call: "sched_setattr",
        errno,
    };
    match nice {
        Some(n) if n != own => match set(n) {
            Ok(()) => Ok(Applied::Both),
            Err(nix::errno::Errno::EPERM) => {
                set(own).map_err(fail)?;
                Ok(Applied::SliceOnly)
            }
            Err(e) => Err(fail(e)),
        },
        _ => {
            set(own).map_err(fail)?;
            Ok(Applied::Both)
        }
    }
}
