//! Scheduling attributes of the calling thread (`sched_setattr`), and the CPU time of a
//! thread of this process.

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

/// The CPU time in ns that thread `tid` of this process has run so far (its per-thread CPU
/// clock, as `pthread_getcpuclockid` builds it from the thread id), or None if there is no
/// such thread (it ended). A thread's clock moves only while it runs: the engine compares
/// two readings to learn whether a thread it woke has run since (`node/installs.rs`).
pub fn thread_cpu_ns(tid: u32) -> Option<u64> {
    // The kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): the complement of the id
    // shifted past the three low bits, which say "per thread" (4) and "scheduler time" (2).
    let id = ((!tid) << 3) as libc::clockid_t | 6;
    let ts = nix::time::clock_gettime(nix::time::ClockId::from_raw(id)).ok()?;
    Some(ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64)
}

/// A thread for tests of CPU clocks: blocked, except while [`ParkedThread::run_once`] makes it
/// compute for a moment; it ends when dropped.
#[cfg(test)]
pub(crate) struct ParkedThread {
    pub(crate) tid: u32,
    go: Option<std::sync::mpsc::Sender<()>>,
    done: std::sync::mpsc::Receiver<()>,
    handle: Option<std::thread::JoinHandle<()>>,
}

#[cfg(test)]
impl ParkedThread {
    /// Starts the thread and waits until it is blocked.
    pub(crate) fn start() -> Self {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (go, go_rx) = std::sync::mpsc::channel::<()>();
        let (done_tx, done) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            tid_tx.send(nix::unistd::gettid().as_raw() as u32).unwrap();
            while go_rx.recv().is_ok() {
                let mut x = 0u64;
                for i in 0..5_000_000u64 {
                    x = x.wrapping_add(std::hint::black_box(i));
                }
                std::hint::black_box(x);
                done_tx.send(()).unwrap();
            }
        });
        let tid = tid_rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20)); // blocked in recv by now
        ParkedThread {
            tid,
            go: Some(go),
            done,
            handle: Some(handle),
        }
    }

    /// Lets the thread compute once, and waits until it is done (and about to block again).
    pub(crate) fn run_once(&self) {
        self.go.as_ref().unwrap().send(()).unwrap();
        self.done.recv().unwrap();
    }
}

#[cfg(test)]
impl Drop for ParkedThread {
    fn drop(&mut self) {
        self.go.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{thread_cpu_ns, ParkedThread};

    #[test]
    fn a_threads_cpu_clock_moves_only_while_it_runs() {
        let t = ParkedThread::start();
        let blocked = thread_cpu_ns(t.tid).expect("the thread's clock");
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(
            thread_cpu_ns(t.tid),
            Some(blocked),
            "a blocked thread's clock stands still"
        );
        t.run_once();
        let ran = thread_cpu_ns(t.tid).expect("the thread's clock");
        assert!(
            ran > blocked,
            "{ran} > {blocked}: the clock moved while it ran"
        );
    }
}
