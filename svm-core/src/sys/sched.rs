//! Scheduling attributes of the calling thread (`sched_setattr`).

use super::SysError;

/// Gives the calling thread a custom time slice of `ns` nanoseconds under the normal (fair)
/// scheduling class, keeping its nice value. Since Linux 6.12 a woken thread whose slice is
/// shorter than the running thread's preempts it at once instead of waiting for the running
/// thread's slice to end; the kernel clamps `ns` to 0.1–100 ms. Older kernels ignore the
/// field (no error).
pub fn set_current_thread_slice(ns: u64) -> Result<(), SysError> {
    // SAFETY: getpriority with PRIO_PROCESS and 0 reads the calling thread's nice value; it
    // has no memory arguments. errno is reset first because -1 is also a valid nice value.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, 0)
    };
    let attr = libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: ns,
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
    if r != 0 {
        return Err(SysError::Call {
            call: "sched_setattr(slice)",
            errno: nix::errno::Errno::last(),
        });
    }
    Ok(())
}
