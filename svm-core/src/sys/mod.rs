//! The only place in svm-core with raw `mmap`/`mprotect`/`madvise`/`ioctl`/signal code.
//!
//! Everything here exposes safe functions whose preconditions are checked (ranges inside the
//! window, page alignment) so the rest of the runtime is free of `unsafe`.

pub mod futex;
pub mod segv;
pub mod uffd;

use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;

use nix::sys::mman::{mmap, mmap_anonymous, mprotect, munmap, MapFlags, ProtFlags};

use crate::Access;

/// Errors from the system layer, with the call that failed.
#[derive(Debug, thiserror::Error)]
pub enum SysError {
    #[error(
        "the shared window {base:#x}..{end:#x} is already (partly) mapped in this process; choose a \
         free range with SVM_SPACE_BASE (and SVM_SPACE_SIZE)"
    )]
    WindowTaken { base: usize, end: usize },
    #[error("{call} failed: {errno}")]
    Call { call: &'static str, errno: nix::errno::Errno },
    #[error(
        "mprotect ran out of memory mappings (vm.max_map_count = {max_map_count}): the segv backend \
         splits a mapping per page; raise the sysctl vm.max_map_count or use SVM_FAULT=uffd"
    )]
    MapCountExhausted { max_map_count: String },
}

fn call(call: &'static str) -> impl FnOnce(nix::errno::Errno) -> SysError {
    move |errno| SysError::Call { call, errno }
}

/// Page size of the machine.
pub fn os_page_size() -> usize {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .map(|v| v as usize)
        .unwrap_or(4096)
}

fn prot(access: Access) -> ProtFlags {
    match access {
        Access::None => ProtFlags::PROT_NONE,
        Access::Read => ProtFlags::PROT_READ,
        Access::Write => ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
    }
}

/// A fixed-address mapping of the shared window plus, for the segv backend, an always-writable
/// alias of the same memory through which the runtime reads and installs page contents.
pub struct Window {
    base: usize,
    size: usize,
    /// Alias mapping (segv backend) — same memfd, always read-write.
    alias: Option<NonNull<libc::c_void>>,
    memfd: Option<OwnedFd>,
}

// SAFETY: the raw pointers only name mappings owned by this value; all access goes through
// methods that check ranges, and the mappings live until drop.
unsafe impl Send for Window {}
// SAFETY: as above; concurrent readers/writers of page contents are coordinated by the engine.
unsafe impl Sync for Window {}

/// How the window is backed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// Private anonymous memory, readable and writable, for userfaultfd (MISSING + WP).
    Anonymous,
    /// A memfd mapped twice: PROT_NONE at the window (protection per page) and read-write
    /// elsewhere (the alias).
    MemfdWithAlias,
}

impl Window {
    /// Maps `size` bytes at exactly `base` without replacing anything already mapped.
    pub fn map(base: usize, size: usize, backing: Backing) -> Result<Window, SysError> {
        let len = std::num::NonZeroUsize::new(size).ok_or(SysError::Call {
            call: "mmap (window size 0)",
            errno: nix::errno::Errno::EINVAL,
        })?;
        let addr = std::num::NonZeroUsize::new(base);
        let taken = |e: nix::errno::Errno| {
            if e == nix::errno::Errno::EEXIST {
                SysError::WindowTaken { base, end: base + size }
            } else {
                SysError::Call { call: "mmap(window)", errno: e }
            }
        };
        let fixed = MapFlags::MAP_FIXED_NOREPLACE | MapFlags::MAP_NORESERVE;
        match backing {
            Backing::Anonymous => {
                // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; the kernel
                // fails with EEXIST instead. The new mapping is owned by the returned Window.
                let p = unsafe {
                    mmap_anonymous(
                        addr,
                        len,
                        ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                        fixed | MapFlags::MAP_PRIVATE,
                    )
                }
                .map_err(taken)?;
                let w = Window { base: p.as_ptr() as usize, size, alias: None, memfd: None };
                if w.base != base {
                    // Kernels before 4.17 ignore MAP_FIXED_NOREPLACE and map elsewhere.
                    return Err(SysError::WindowTaken { base, end: base + size });
                }
                w.no_huge_pages();
                Ok(w)
            }
            Backing::MemfdWithAlias => {
                let fd = nix::sys::memfd::memfd_create(
                    c"svm-window",
                    nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
                )
                .map_err(call("memfd_create"))?;
                nix::unistd::ftruncate(&fd, size as i64).map_err(call("ftruncate(memfd)"))?;
                // SAFETY: as above, MAP_FIXED_NOREPLACE cannot clobber existing mappings.
                let p = unsafe {
                    mmap(addr, len, ProtFlags::PROT_NONE, fixed | MapFlags::MAP_SHARED, &fd, 0)
                }
                .map_err(taken)?;
                let mut w = Window { base: p.as_ptr() as usize, size, alias: None, memfd: None };
                if w.base != base {
                    return Err(SysError::WindowTaken { base, end: base + size });
                }
                // SAFETY: a fresh mapping at a kernel-chosen address; owned by the Window.
                let alias = unsafe {
                    mmap(
                        None,
                        len,
                        ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                        MapFlags::MAP_SHARED | MapFlags::MAP_NORESERVE,
                        &fd,
                        0,
                    )
                }
                .map_err(call("mmap(alias)"))?;
                w.alias = Some(alias);
                w.memfd = Some(fd);
                w.no_huge_pages();
                Ok(w)
            }
        }
    }

    fn no_huge_pages(&self) {
        // SAFETY: advice on our own mapping; MADV_NOHUGEPAGE changes no contents.
        let _ = unsafe {
            nix::sys::mman::madvise(self.ptr(self.base), self.size, nix::sys::mman::MmapAdvise::MADV_NOHUGEPAGE)
        };
    }

    pub fn base(&self) -> usize {
        self.base
    }
    pub fn size(&self) -> usize {
        self.size
    }
    pub fn contains(&self, addr: usize) -> bool {
        addr >= self.base && addr < self.base + self.size
    }

    fn ptr(&self, addr: usize) -> NonNull<libc::c_void> {
        NonNull::new(addr as *mut libc::c_void).expect("window addresses are non-null")
    }

    fn check(&self, addr: usize, len: usize) {
        assert!(
            addr >= self.base && addr.checked_add(len).is_some_and(|e| e <= self.base + self.size),
            "range {addr:#x}+{len:#x} outside the window"
        );
    }

    /// Sets the protection of the application mapping (segv backend).
    pub fn protect(&self, addr: usize, len: usize, access: Access) -> Result<(), SysError> {
        self.check(addr, len);
        // SAFETY: the range lies inside the window we own; changing its protection cannot
        // affect memory outside it.
        match unsafe { mprotect(self.ptr(addr), len, prot(access)) } {
            Ok(()) => Ok(()),
            Err(nix::errno::Errno::ENOMEM) => Err(SysError::MapCountExhausted {
                max_map_count: std::fs::read_to_string("/proc/sys/vm/max_map_count")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "unknown".into()),
            }),
            Err(e) => Err(SysError::Call { call: "mprotect", errno: e }),
        }
    }

    /// Drops the contents of a range of the application mapping (anonymous backend): the next
    /// access faults as MISSING.
    pub fn discard(&self, addr: usize, len: usize) -> Result<(), SysError> {
        self.check(addr, len);
        // SAFETY: MADV_DONTNEED on our own anonymous range: contents are dropped, which is the
        // intent (the protocol invalidated the copy); no other memory is affected.
        unsafe { nix::sys::mman::madvise(self.ptr(addr), len, nix::sys::mman::MmapAdvise::MADV_DONTNEED) }
            .map_err(call("madvise(MADV_DONTNEED)"))
    }

    /// Address in the alias mapping of window address `addr` (segv backend).
    fn alias_addr(&self, addr: usize) -> Option<usize> {
        self.alias.map(|a| a.as_ptr() as usize + (addr - self.base))
    }

    /// Copies `dst.len()` bytes of the window starting at `addr` into `dst`. With an alias the
    /// copy goes through it (never faults); without one the caller guarantees the range is
    /// present and readable in the application mapping.
    pub fn read(&self, addr: usize, dst: &mut [u8]) {
        self.check(addr, dst.len());
        let src = self.alias_addr(addr).unwrap_or(addr);
        // SAFETY: the range is inside the window (checked) and, per the caller's contract,
        // mapped readable (alias: always). Other threads may write concurrently only where the
        // coherence protocol allows races (then the bytes read are whatever was there).
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) }
    }

    /// Writes `src` into the window at `addr` through the alias (segv backend only).
    pub fn write_alias(&self, addr: usize, src: &[u8]) {
        self.check(addr, src.len());
        let dst = self.alias_addr(addr).expect("write_alias needs the memfd backing");
        // SAFETY: the alias is always mapped read-write and the range is inside it (checked).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) }
    }

    /// Frees the memory behind a range of the memfd (segv backend), keeping it mapped: it will
    /// read as zeros.
    pub fn punch_hole(&self, addr: usize, len: usize) -> Result<(), SysError> {
        self.check(addr, len);
        let fd = self.memfd.as_ref().expect("punch_hole needs the memfd backing");
        nix::fcntl::fallocate(
            fd.as_raw_fd(),
            nix::fcntl::FallocateFlags::FALLOC_FL_PUNCH_HOLE | nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
            (addr - self.base) as i64,
            len as i64,
        )
        .map_err(call("fallocate(PUNCH_HOLE)"))
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: both mappings were created by Window::map and are unmapped exactly once.
        unsafe {
            let _ = munmap(self.ptr(self.base), self.size);
            if let Some(a) = self.alias {
                let _ = munmap(a, self.size);
            }
        }
    }
}

/// Volatile load of a `T` at window address `addr` by the application (may fault; the fault is
/// served by the runtime). Panics if the range is outside the shared window.
pub fn app_load<T: Copy>(window: (usize, usize), addr: usize) -> T {
    assert!(
        addr >= window.0 && addr + std::mem::size_of::<T>() <= window.0 + window.1,
        "address {addr:#x} outside the shared window"
    );
    assert!(addr.is_multiple_of(std::mem::align_of::<T>()), "misaligned shared access at {addr:#x}");
    // SAFETY: the address is inside the shared window (checked), aligned (checked), and the
    // window stays mapped for the life of the process; the page-fault path makes it accessible.
    unsafe { std::ptr::read_volatile(addr as *const T) }
}

/// Volatile store of a `T` at window address `addr` by the application.
pub fn app_store<T: Copy>(window: (usize, usize), addr: usize, v: T) {
    assert!(
        addr >= window.0 && addr + std::mem::size_of::<T>() <= window.0 + window.1,
        "address {addr:#x} outside the shared window"
    );
    assert!(addr.is_multiple_of(std::mem::align_of::<T>()), "misaligned shared access at {addr:#x}");
    // SAFETY: as in app_load.
    unsafe { std::ptr::write_volatile(addr as *mut T, v) }
}

/// Bulk copy out of the shared window (application access; may fault).
pub fn app_copy_out<T: Copy>(window: (usize, usize), addr: usize, dst: &mut [T]) {
    let bytes = std::mem::size_of_val(dst);
    assert!(
        addr >= window.0 && addr + bytes <= window.0 + window.1,
        "range {addr:#x}+{bytes} outside the shared window"
    );
    // SAFETY: the source range is inside the mapped window (checked) and does not overlap the
    // private destination slice.
    unsafe { std::ptr::copy_nonoverlapping(addr as *const T, dst.as_mut_ptr(), dst.len()) }
}

/// Bulk copy into the shared window (application access; may fault).
pub fn app_copy_in<T: Copy>(window: (usize, usize), addr: usize, src: &[T]) {
    let bytes = std::mem::size_of_val(src);
    assert!(
        addr >= window.0 && addr + bytes <= window.0 + window.1,
        "range {addr:#x}+{bytes} outside the shared window"
    );
    // SAFETY: as in app_copy_out, in the other direction.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), addr as *mut T, src.len()) }
}

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
/// (links, the fault backend) outlive the poller in the engine.
pub struct Poller(OwnedFd);

impl Poller {
    pub fn new() -> Result<Poller, SysError> {
        // SAFETY: epoll_create1 takes flags only and returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(SysError::Call { call: "epoll_create1", errno: nix::errno::Errno::last() });
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Ok(Poller(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) }))
    }

    /// Watches `fd` for readability (level-triggered), reporting `token`.
    pub fn add(&self, fd: i32, token: u64) -> Result<(), SysError> {
        let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, u64: token };
        // SAFETY: epoll_ctl reads the event struct; an invalid fd only yields an error.
        if unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(SysError::Call { call: "epoll_ctl(ADD)", errno: nix::errno::Errno::last() });
        }
        Ok(())
    }

    pub fn remove(&self, fd: i32) {
        // SAFETY: as in add; removing an unknown fd only yields an error, which we ignore.
        unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
    }

    /// Waits up to `timeout_ms` (-1 = forever, 0 = poll) and returns the ready tokens in `out`.
    pub fn wait(&self, out: &mut Vec<u64>, timeout_ms: i32) -> Result<(), SysError> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
        // SAFETY: the kernel writes at most 64 events into our local array.
        let n = unsafe { libc::epoll_wait(self.0.as_raw_fd(), evs.as_mut_ptr(), 64, timeout_ms) };
        out.clear();
        if n < 0 {
            let e = nix::errno::Errno::last();
            if e == nix::errno::Errno::EINTR {
                return Ok(());
            }
            return Err(SysError::Call { call: "epoll_wait", errno: e });
        }
        out.extend(evs[..n as usize].iter().map(|e| e.u64));
        Ok(())
    }
}

/// Takes ownership of a listening socket inherited from the launcher (`SVM_COORD_FD`).
pub fn inherited_listener(fd: i32) -> std::io::Result<std::net::TcpListener> {
    let st = nix::sys::stat::fstat(fd).map_err(std::io::Error::from)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(std::io::Error::other(format!("descriptor {fd} is not a socket")));
    }
    let _ = nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC));
    // SAFETY: the launcher handed this descriptor to us (checked to be a socket above) and
    // nothing else in the process uses it; the listener becomes its only owner.
    let l = unsafe { <std::net::TcpListener as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    l.local_addr()?;
    Ok(l)
}

/// Closes a descriptor inherited from the launcher that this node does not use.
pub fn close_inherited(fd: i32) {
    if nix::sys::stat::fstat(fd).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFSOCK) {
        let _ = nix::unistd::close(fd);
    }
}

/// Ends the process at once with `code` after flushing Rust's stdout/stderr: used when a node
/// must fail without running exit handlers that might wait on the runtime.
pub fn exit_now(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: _exit has no preconditions; it ends the process immediately.
    unsafe { libc::_exit(code) }
}
