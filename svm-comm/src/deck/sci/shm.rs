//! The only place with raw memory and system-call code of DECK-SCI: shared segment files mapped
//! `MAP_SHARED`, typed atomic views into them, bounded copies in and out, cross-process futexes,
//! eventfds and the liveness probe.
//!
//! Invariant of every [`Segment`]: `base` points to a live `MAP_SHARED` mapping of `len` bytes
//! that stays mapped until the `Segment` is dropped. Every accessor checks its range against
//! `len` (and its alignment) before it forms a pointer, so a bad offset computed from a corrupt
//! peer value panics in our code instead of touching memory outside the mapping. The contents of
//! a segment are written by other processes at any time: they are only ever read through atomics
//! or copied out as plain bytes, never turned into references to non-atomic Rust values.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8};
use std::time::Duration;

/// A shared segment file mapped read-write and shared into this process.
pub struct Segment {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory shared with other processes anyway; all access goes through
// atomics or bounds-checked byte copies, so handing the handle to another thread is as safe as
// sharing the same memory with another process.
unsafe impl Send for Segment {}
// SAFETY: as for `Send`: no method hands out `&mut` into the mapping.
unsafe impl Sync for Segment {}

impl Segment {
    /// Creates `path` (mode 0600, must not exist) of `len` bytes and maps it.
    pub fn create(path: &Path, len: usize) -> io::Result<Segment> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        file.set_len(len as u64)?;
        Self::map(&file, len)
    }

    /// Opens and maps an existing segment file; its size must be exactly `len`.
    pub fn open(path: &Path, len: usize) -> io::Result<Segment> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let have = file.metadata()?.len();
        if have != len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("segment {} has {have} bytes, expected {len} (is it being created, or from another build?)", path.display()),
            ));
        }
        Self::map(&file, len)
    }

    fn map(file: &File, len: usize) -> io::Result<Segment> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty segment"));
        }
        // SAFETY: a fresh mapping chosen by the kernel (no MAP_FIXED), so it cannot replace any
        // existing memory; the descriptor is open and refers to a regular file of at least `len`
        // bytes (created or checked by the caller).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Segment {
            base: p.cast(),
            len,
        })
    }

    #[inline]
    fn check(&self, off: usize, n: usize, align: usize) {
        assert!(
            off.checked_add(n).is_some_and(|end| end <= self.len) && off.is_multiple_of(align),
            "DECK-SCI: access of {n} bytes at offset {off} outside a segment of {} bytes",
            self.len
        );
    }

    /// The 32-bit atomic at `off` (4-aligned).
    #[inline]
    pub fn u32_at(&self, off: usize) -> &AtomicU32 {
        self.check(off, 4, 4);
        // SAFETY: in bounds and aligned (checked above); the mapping lives as long as `self`, and
        // the memory is only ever accessed atomically or by byte copies, never through `&mut`.
        unsafe { &*(self.base.add(off) as *const AtomicU32) }
    }

    /// The 64-bit atomic at `off` (8-aligned).
    #[inline]
    pub fn u64_at(&self, off: usize) -> &AtomicU64 {
        self.check(off, 8, 8);
        // SAFETY: as in `u32_at`: in bounds, 8-aligned, mapping outlives the reference.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    /// The byte at `off`, as an atomic.
    #[inline]
    pub fn u8_at(&self, off: usize) -> &AtomicU8 {
        self.check(off, 1, 1);
        // SAFETY: as in `u32_at`: in bounds (alignment 1), mapping outlives the reference.
        unsafe { &*(self.base.add(off) as *const AtomicU8) }
    }

    /// Copies `src` into the segment at `off`.
    #[inline]
    pub fn write(&self, off: usize, src: &[u8]) {
        self.check(off, src.len(), 1);
        // SAFETY: the destination range is inside the mapping (checked) and cannot overlap `src`,
        // which is process-private memory. Flow control gives this writer exclusive use of the
        // range until it publishes it with a Release store.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.add(off), src.len()) }
    }

    /// Copies `dst.len()` bytes out of the segment at `off`.
    #[inline]
    pub fn read(&self, off: usize, dst: &mut [u8]) {
        self.check(off, dst.len(), 1);
        // SAFETY: the source range is inside the mapping (checked) and does not overlap `dst`
        // (process-private). The range was published to us by an Acquire load of the writer's
        // Release store; a misbehaving writer can only make us read garbage bytes, never read
        // outside the mapping.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(off), dst.as_mut_ptr(), dst.len()) }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` describe a mapping made in `map` and not yet unmapped; every
        // reference handed out borrows `self`, so none outlives this call.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// Blocks while `*word == expected`, at most `timeout`. Cross-process (no FUTEX_PRIVATE_FLAG).
/// Returns on wake-up, value change, timeout or signal; the caller re-checks its condition.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned 32-bit location that outlives the call (a reference);
    // FUTEX_WAIT only reads it and compares. `ts` is a valid timespec on our stack. Errors
    // (EAGAIN when the value changed, ETIMEDOUT, EINTR) are all "re-check and go on".
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes every waiter on `word` (in any process mapping the same page).
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a valid aligned 32-bit location; FUTEX_WAKE does not access user memory
    // beyond using its address as a key.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<u8>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Is process `pid` still there? (`kill(pid, 0)`; EPERM means it exists but is not ours.)
pub fn pid_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; kill only checks existence and permission.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A non-blocking, close-on-exec eventfd: the pollable side of a link.
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain system call with constant flags; the result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor owned by nobody else.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Makes the descriptor readable.
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our own descriptor; EAGAIN (counter
        // saturated) still leaves it readable, which is all we need.
        unsafe {
            libc::write(self.fd(), (&one as *const u64).cast(), 8);
        }
    }

    /// Resets the counter (the descriptor stops being readable).
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64 from our own non-blocking descriptor; EAGAIN
        // means it was not readable.
        unsafe {
            libc::read(self.fd(), (&mut v as *mut u64).cast(), 8);
        }
    }
}

/// Turns the rendezvous listener inherited from `svmrun` (`SVM_COORD_FD`) into a `TcpListener`,
/// after checking that the descriptor is a listening socket. Used by µDECK's `init` (svm-core
/// has its own copy in `sys`; svm-comm cannot depend on it).
pub fn inherited_listener(fd: RawFd) -> io::Result<std::net::TcpListener> {
    let mut accepting: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `accepting`, a valid c_int on our
    // stack; an fd that is not a socket just makes it fail with ENOTSOCK/EBADF.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            (&mut accepting as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    if accepting == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a listening socket",
        ));
    }
    // SAFETY: the descriptor is an open listening socket (checked above) that the launcher gave
    // to this process alone; the listener becomes its only owner.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let l = std::net::TcpListener::from(owned);
    Ok(l)
}
