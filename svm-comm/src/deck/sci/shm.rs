//! The only place with raw memory and system-call code of DECK-SCI: shared segment files mapped
//! `MAP_SHARED`, typed atomic views into them, bounded copies in and out, the zero-copy view of a
//! held rendezvous area, cross-process futexes, the named pipes links are polled through, and the
//! liveness probe.
//!
//! Invariant of every [`Segment`]: `base` points to a live `MAP_SHARED` mapping of `len` bytes
//! that stays mapped until the `Segment` is dropped. Every accessor checks its range against
//! `len` (and its alignment) before it forms a pointer, so a bad offset computed from a corrupt
//! peer value panics in our code instead of touching memory outside the mapping. The contents of
//! a segment are written by other processes at any time: they are only ever read through atomics
//! or copied out as plain bytes, never turned into references to non-atomic Rust values — except
//! through [`Segment::view`], an `unsafe fn` whose caller holds the range by the flow control.

use std::fs::{File, OpenOptions};
use std::io;
use std::io::{Read, Write};
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

impl Segment {
    /// A shared view of `len` bytes at `off`, without copying (protocol 3 zero-copy receive).
    ///
    /// # Safety
    /// For as long as the returned slice lives, no process may write the range: the caller holds
    /// it by the DECK-SCI flow control (the range is a rendezvous area the receiver has not
    /// granted again), and the writes that filled it happened-before (Acquire of the packet
    /// announcing it).
    #[inline]
    pub unsafe fn view(&self, off: usize, len: usize) -> &[u8] {
        self.check(off, len, 1);
        // SAFETY: in bounds (checked above); the mapping outlives `&self`; the caller guarantees
        // that nobody writes the range while the slice lives (see `# Safety`).
        unsafe { std::slice::from_raw_parts(self.base.add(off), len) }
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

/// A named pipe in the segment directory: the pollable side of one link. The receiver holds the
/// read end (its `poll_fd`), the sender the write end; the sender writes one byte when the
/// receiver's poller has asked for it (`poll_armed` in the segment). Plain file I/O, no `unsafe`.
///
/// When every write end is closed (the sender dropped its link or its process died) the read end
/// reports EOF and `POLLHUP`, so a poller learns of a dead peer without any helper thread.
pub struct Fifo(File);

impl Fifo {
    /// Creates the pipe `path` (mode 0600; a leftover of a dead job is replaced) and opens its
    /// non-blocking read end.
    pub fn create_reader(path: &Path) -> io::Result<Fifo> {
        match nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)) {
            Ok(()) => {}
            Err(nix::errno::Errno::EEXIST) => {
                std::fs::remove_file(path)?;
                nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))
                    .map_err(io::Error::from)?;
            }
            Err(e) => return Err(e.into()),
        }
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?;
        Self::checked(f)
    }

    /// Opens the non-blocking write end of an existing pipe (its reader must have it open).
    pub fn open_writer(path: &Path) -> io::Result<Fifo> {
        let f = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?;
        Self::checked(f)
    }

    fn checked(f: File) -> io::Result<Fifo> {
        use std::os::unix::fs::FileTypeExt;
        if !f.metadata()?.file_type().is_fifo() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a named pipe",
            ));
        }
        Ok(Fifo(f))
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Makes the read end readable (write end only). A full pipe is still readable: fine; a
    /// pipe whose reader is gone (the peer died) gives EPIPE, never SIGPIPE.
    pub fn signal(&self) {
        let _ = write_no_sigpipe(&self.0, &[1u8]);
    }

    /// Read end: consumes every pending byte. Returns true when the pipe has no writer left
    /// (EOF: the peer closed its link or died).
    pub fn drain(&self) -> bool {
        let mut b = [0u8; 64];
        loop {
            match (&self.0).read(&mut b) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
        }
    }

    /// Read end: makes our own read end readable (for "more data than one call drains"), through
    /// a short-lived write end opened via `/proc/self/fd` (the name is unlinked after setup).
    pub fn signal_self(&self) -> io::Result<()> {
        let w = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(format!("/proc/self/fd/{}", self.fd()))?;
        match write_no_sigpipe(&w, &[1u8]) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Is SIGPIPE ignored in this process (as in every Rust program, whose runtime ignores it)?
/// Read once: the C programs linked with svm keep the default action, which kills.
fn sigpipe_ignored() -> bool {
    static IGNORED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *IGNORED.get_or_init(|| {
        // SAFETY: an all-zero `sigaction` is a valid value of this plain C struct; it is only an
        // output buffer here.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only queries the current one into `old`, a valid struct on
        // our stack.
        let r = unsafe { libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old) };
        r == 0 && old.sa_sigaction == libc::SIG_IGN
    })
}

/// Writes to a pipe without the risk of SIGPIPE when its reader is gone: when the signal's
/// action is not "ignore", it is blocked in this thread around the write, and a SIGPIPE that the
/// write raised (and only that one) is consumed before the mask is restored.
fn write_no_sigpipe(f: &File, b: &[u8]) -> io::Result<usize> {
    if sigpipe_ignored() {
        return (&*f).write(b);
    }
    // SAFETY: all-zero `sigset_t`s are valid output buffers; sigemptyset/sigaddset initialise
    // `set`, the calls only read and write these sets on our stack.
    let (mut set, mut old, mut pending): (libc::sigset_t, libc::sigset_t, libc::sigset_t) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed(), std::mem::zeroed()) };
    // SAFETY: valid sets on our stack; pthread_sigmask changes only this thread's mask, and is
    // restored below on every path.
    let was_pending = unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        libc::sigpending(&mut pending) == 0 && libc::sigismember(&pending, libc::SIGPIPE) == 1
    };
    let r = (&*f).write(b);
    if !was_pending && matches!(&r, Err(e) if e.raw_os_error() == Some(libc::EPIPE)) {
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `set` holds SIGPIPE, blocked in this thread, so the pending signal our write
        // raised is taken from the queue instead of being delivered; a null info pointer is
        // allowed, `zero` is a valid timespec (no waiting).
        unsafe {
            libc::sigtimedwait(&set, std::ptr::null_mut(), &zero);
        }
    }
    // SAFETY: restores the mask saved above (a valid set on our stack).
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    r
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
