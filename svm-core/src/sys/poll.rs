//! Waking and waiting: the engine's eventfd and epoll instance.

use std::os::fd::{AsRawFd, OwnedFd};

use super::{call, SysError};

/// An eventfd used to wake the engine thread (async-signal-safe to signal).
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> Result<EventFd, SysError> {
        let fd = nix::sys::eventfd::EventFd::from_flags(
            nix::sys::eventfd::EfdFlags::EFD_CLOEXEC | nix::sys::eventfd::EfdFlags::EFD_NONBLOCK,
        )
        .map_err(call("eventfd"))?;
        Ok(EventFd(fd.into()))
    }
    pub fn raw(&self) -> i32 {
        self.0.as_raw_fd()
    }
    pub fn signal(&self) {
        signal_eventfd(self.raw());
    }
    /// Consumes pending signals.
    pub fn drain(&self) {
        let mut b = [0u8; 8];
        let _ = nix::unistd::read(self.raw(), &mut b);
    }
}

/// Adds one to an eventfd; only a `write(2)`, so callable from a signal handler.
pub fn signal_eventfd(fd: i32) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a local to a file descriptor; write(2) is async-signal-safe.
    unsafe {
        libc::write(fd, (&one as *const u64).cast(), 8);
    }
}

/// Kernel thread id of the calling thread (for diagnostics).
pub fn current_thread_id() -> i32 {
    nix::unistd::gettid().as_raw()
}

/// An epoll instance; registered descriptors are named by raw number because their owners
/// (links, the fault backend) outlive the poller in the engine. The flag: whether the kernel
/// has `epoll_pwait2` (until a call says it has not).
pub struct Poller(OwnedFd, std::sync::atomic::AtomicBool);

impl Poller {
    pub fn new() -> Result<Poller, SysError> {
        // SAFETY: epoll_create1 takes flags only and returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(SysError::Call {
                call: "epoll_create1",
                errno: nix::errno::Errno::last(),
            });
        }
        Ok(Poller(
            // SAFETY: `fd` is a fresh descriptor that nothing else owns.
            unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) },
            std::sync::atomic::AtomicBool::new(true),
        ))
    }

    /// The epoll descriptor itself (readable while a watched descriptor is ready: a poller
    /// can be watched by another one).
    pub fn raw(&self) -> i32 {
        self.0.as_raw_fd()
    }

    /// Watches `fd` for readability (level-triggered), reporting `token`.
    pub fn add(&self, fd: i32, token: u64) -> Result<(), SysError> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
            u64: token,
        };
        // SAFETY: epoll_ctl reads the event struct; an invalid fd only yields an error.
        if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(SysError::Call {
                call: "epoll_ctl(ADD)",
                errno: nix::errno::Errno::last(),
            });
        }
        Ok(())
    }

    /// Changes what `fd` (added before) is watched for: readability, and writability too when
    /// `writable` (level-triggered: reported for as long as the descriptor takes more bytes).
    pub fn watch(&self, fd: i32, token: u64, writable: bool) -> Result<(), SysError> {
        let mut events = libc::EPOLLIN | libc::EPOLLRDHUP;
        if writable {
            events |= libc::EPOLLOUT;
        }
        let mut ev = libc::epoll_event {
            events: events as u32,
            u64: token,
        };
        // SAFETY: epoll_ctl reads the event struct; an unknown fd only yields an error.
        if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_MOD, fd, &mut ev) } < 0 {
            return Err(SysError::Call {
                call: "epoll_ctl(MOD)",
                errno: nix::errno::Errno::last(),
            });
        }
        Ok(())
    }

    pub fn remove(&self, fd: i32) {
        // SAFETY: as in add; removing an unknown fd only yields an error, which we ignore.
        unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        };
    }

    /// Waits up to `timeout_ms` (-1 = forever, 0 = poll) and returns the ready tokens in `out`
    /// (`wait_for` without `epoll_pwait2`).
    fn wait_ms(&self, out: &mut Vec<u64>, timeout_ms: i32) -> Result<(), SysError> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
        // SAFETY: the kernel writes at most 64 events into our local array.
        let n = unsafe { libc::epoll_wait(self.0.as_raw_fd(), evs.as_mut_ptr(), 64, timeout_ms) };
        Self::ready(out, &evs, n, "epoll_wait")
    }

    /// Waits up to `timeout` (to the nanosecond: `epoll_pwait2`, Linux 5.11; on older kernels
    /// `epoll_wait` with the timeout rounded up to a millisecond) and returns the ready tokens
    /// in `out`.
    pub fn wait_for(
        &self,
        out: &mut Vec<u64>,
        timeout: std::time::Duration,
    ) -> Result<(), SysError> {
        if timeout.is_zero() || !self.1.load(std::sync::atomic::Ordering::Relaxed) {
            let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
            return self.wait_ms(out, ms);
        }
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: the kernel writes at most 64 events into our local array and reads the
        // local timespec; a null signal mask (size 0) leaves the mask as it is.
        let n = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                self.0.as_raw_fd(),
                evs.as_mut_ptr(),
                64,
                &ts as *const libc::timespec,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        } as i32;
        if n < 0 && nix::errno::Errno::last() == nix::errno::Errno::ENOSYS {
            self.1.store(false, std::sync::atomic::Ordering::Relaxed);
            return self.wait_for(out, timeout);
        }
        Self::ready(out, &evs, n, "epoll_pwait2")
    }

    /// The tokens of the first `n` events (`n` < 0: the call failed; EINTR is no event).
    fn ready(
        out: &mut Vec<u64>,
        evs: &[libc::epoll_event],
        n: i32,
        call: &'static str,
    ) -> Result<(), SysError> {
        out.clear();
        if n < 0 {
            let e = nix::errno::Errno::last();
            if e == nix::errno::Errno::EINTR {
                return Ok(());
            }
            return Err(SysError::Call { call, errno: e });
        }
        out.extend(evs[..n as usize].iter().map(|e| e.u64));
        Ok(())
    }
}
