//! userfaultfd: MISSING + write-protect tracking on anonymous memory.
//!
//! The kernel ABI (include/uapi/linux/userfaultfd.h) is small and stable, so the structures and
//! ioctl numbers are declared here rather than generated (the bindgen-based crates need libclang
//! at build time).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::SysError;

const UFFD_API: u64 = 0xAA;
const UFFDIO_REGISTER_MODE_MISSING: u64 = 1;
const UFFDIO_REGISTER_MODE_WP: u64 = 2;
const UFFDIO_COPY_MODE_WP: u64 = 2;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1;
const UFFD_EVENT_PAGEFAULT: u8 = 0x12;
const UFFD_PAGEFAULT_FLAG_WRITE: u64 = 1;
const UFFD_PAGEFAULT_FLAG_WP: u64 = 2;
const UFFD_FEATURE_THREAD_ID: u64 = 1 << 8;
/// Write-protect faults resolved by the kernel without an event (Linux 6.7): the write goes
/// through and the page's written state is left for `PAGEMAP_SCAN` to report.
const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
const _UFFDIO_WRITEPROTECT: u64 = 0x06;

#[repr(C)]
#[derive(Default)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioCopy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioZeropage {
    range: UffdioRange,
    mode: u64,
    zeropage: i64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

/// `struct uffd_msg` (32 bytes), page-fault view.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct UffdMsg {
    event: u8,
    reserved1: u8,
    reserved2: u16,
    reserved3: u32,
    flags: u64,
    address: u64,
    ptid: u32,
    pad: u32,
}

nix::ioctl_readwrite!(uffdio_api, 0xAA, 0x3F, UffdioApi);
nix::ioctl_readwrite!(uffdio_register, 0xAA, 0x00, UffdioRegister);
nix::ioctl_read!(uffdio_wake, 0xAA, 0x02, UffdioRange);
nix::ioctl_read!(uffdio_unregister, 0xAA, 0x01, UffdioRange);
nix::ioctl_readwrite!(uffdio_copy, 0xAA, 0x03, UffdioCopy);
nix::ioctl_readwrite!(uffdio_writeprotect, 0xAA, 0x06, UffdioWriteprotect);
nix::ioctl_readwrite!(uffdio_zeropage, 0xAA, 0x04, UffdioZeropage);

/// One page fault reported by the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UffdFault {
    pub addr: usize,
    /// The access was a write (to a missing page, or to a write-protected one).
    pub write: bool,
    /// The fault is a write-protect fault (the page is present, read-only).
    pub wp: bool,
    pub tid: u32,
}

/// A userfaultfd with a range registered for MISSING and WP faults.
pub struct Uffd {
    fd: OwnedFd,
}

fn err(call: &'static str) -> impl FnOnce(nix::errno::Errno) -> SysError {
    move |errno| SysError::Call { call, errno }
}

impl Uffd {
    /// Opens a userfaultfd (non-blocking, close-on-exec) and negotiates the API.
    pub fn open() -> Result<Uffd, SysError> {
        Self::open_with(UFFD_FEATURE_THREAD_ID)
    }

    /// Opens a userfaultfd whose write-protect faults the kernel resolves itself
    /// (`UFFD_FEATURE_WP_ASYNC`): a write to a write-protected page raises no event, and
    /// [`Pagemap::take_written`] later lists the pages written and protects them again.
    /// Missing-page faults are reported as by [`Uffd::open`]. Fails on kernels before 6.7.
    pub fn open_async_wp() -> Result<Uffd, SysError> {
        Self::open_with(UFFD_FEATURE_THREAD_ID | UFFD_FEATURE_WP_ASYNC)
    }

    fn open_with(features: u64) -> Result<Uffd, SysError> {
        // SAFETY: the userfaultfd syscall takes only flags and returns a new descriptor or -1.
        let raw =
            unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if raw < 0 {
            return Err(SysError::Call {
                call: "userfaultfd",
                errno: nix::errno::Errno::last(),
            });
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
        let mut api = UffdioApi {
            api: UFFD_API,
            features,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_API reads and writes the struct we pass, which lives on our stack.
        unsafe { uffdio_api(fd.as_raw_fd(), &mut api) }.map_err(err("ioctl(UFFDIO_API)"))?;
        Ok(Uffd { fd })
    }

    pub fn raw(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Registers `[start, start+len)` for MISSING and write-protect faults.
    pub fn register(&self, start: usize, len: usize) -> Result<(), SysError> {
        let mut r = UffdioRegister {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_REGISTER reads/writes our struct; the range is our own mapping.
        unsafe { uffdio_register(self.raw(), &mut r) }.map_err(err("ioctl(UFFDIO_REGISTER)"))?;
        if r.ioctls & (1 << _UFFDIO_WRITEPROTECT) == 0 {
            return Err(SysError::Call {
                call: "UFFDIO_REGISTER (no write-protect support)",
                errno: nix::errno::Errno::ENOTSUP,
            });
        }
        Ok(())
    }

    /// Stops tracking `[start, start+len)`: threads waiting on faults there are woken and later
    /// accesses are ordinary memory accesses.
    pub fn unregister(&self, start: usize, len: usize) -> Result<(), SysError> {
        let mut r = UffdioRange {
            start: start as u64,
            len: len as u64,
        };
        // SAFETY: UFFDIO_UNREGISTER only reads the range struct; the range is registered memory.
        unsafe { uffdio_unregister(self.raw(), &mut r) }
            .map(|_| ())
            .map_err(err("ioctl(UFFDIO_UNREGISTER)"))
    }

    /// Reads pending fault events into `out` (non-blocking). Returns the number read.
    pub fn read_events(&self, out: &mut Vec<UffdFault>) -> Result<usize, SysError> {
        let mut msgs = [UffdMsg::default(); 32];
        let mut n = 0;
        loop {
            // SAFETY: reads whole uffd_msg records into a local array of the same layout.
            let r = unsafe {
                libc::read(
                    self.raw(),
                    msgs.as_mut_ptr().cast(),
                    std::mem::size_of_val(&msgs),
                )
            };
            if r < 0 {
                let e = nix::errno::Errno::last();
                if e == nix::errno::Errno::EAGAIN || e == nix::errno::Errno::EINTR {
                    return Ok(n);
                }
                return Err(SysError::Call {
                    call: "read(userfaultfd)",
                    errno: e,
                });
            }
            let k = r as usize / std::mem::size_of::<UffdMsg>();
            for m in &msgs[..k] {
                if m.event == UFFD_EVENT_PAGEFAULT {
                    out.push(UffdFault {
                        addr: m.address as usize,
                        write: m.flags & UFFD_PAGEFAULT_FLAG_WRITE != 0,
                        wp: m.flags & UFFD_PAGEFAULT_FLAG_WP != 0,
                        tid: m.ptid,
                    });
                    n += 1;
                }
            }
            if k < msgs.len() {
                return Ok(n);
            }
        }
    }

    /// Atomically fills a missing page with `src` and wakes its waiters; `read_only` maps it
    /// write-protected. Returns `Ok(false)` if the page was already present (EEXIST).
    pub fn copy(&self, dst: usize, src: &[u8], read_only: bool) -> Result<bool, SysError> {
        let mut c = UffdioCopy {
            dst: dst as u64,
            src: src.as_ptr() as u64,
            len: src.len() as u64,
            mode: if read_only { UFFDIO_COPY_MODE_WP } else { 0 },
            copy: 0,
        };
        // SAFETY: the kernel copies `len` bytes from our live slice into the registered range.
        match unsafe { uffdio_copy(self.raw(), &mut c) } {
            Ok(_) => Ok(true),
            Err(nix::errno::Errno::EEXIST) => Ok(false),
            Err(e) => Err(SysError::Call {
                call: "ioctl(UFFDIO_COPY)",
                errno: e,
            }),
        }
    }

    /// Maps the shared zero page at every missing page of the range and wakes their waiters
    /// (no memory is used until a page is written; a write is then the kernel's own
    /// copy-on-write fault, never a userfaultfd fault unless the page is write-protected).
    /// Returns `Ok(false)` if some page of the range was already present (EEXIST): the pages
    /// before it are mapped, the rest untouched.
    pub fn zeropage(&self, start: usize, len: usize) -> Result<bool, SysError> {
        let mut z = UffdioZeropage {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: 0,
            zeropage: 0,
        };
        // SAFETY: UFFDIO_ZEROPAGE reads/writes our struct; the range is registered memory.
        match unsafe { uffdio_zeropage(self.raw(), &mut z) } {
            Ok(_) => Ok(true),
            Err(nix::errno::Errno::EEXIST) => Ok(false),
            Err(e) => Err(SysError::Call {
                call: "ioctl(UFFDIO_ZEROPAGE)",
                errno: e,
            }),
        }
    }

    /// Sets or clears write protection on present pages; clearing wakes threads waiting on a WP
    /// fault there.
    pub fn write_protect(&self, start: usize, len: usize, protect: bool) -> Result<(), SysError> {
        let mut w = UffdioWriteprotect {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: if protect {
                UFFDIO_WRITEPROTECT_MODE_WP
            } else {
                0
            },
        };
        // SAFETY: UFFDIO_WRITEPROTECT reads our struct; the range is registered memory.
        unsafe { uffdio_writeprotect(self.raw(), &mut w) }
            .map(|_| ())
            .map_err(err("ioctl(UFFDIO_WRITEPROTECT)"))
    }

    /// Wakes threads waiting on faults in the range (after the page became accessible some other
    /// way).
    pub fn wake(&self, start: usize, len: usize) -> Result<(), SysError> {
        let mut r = UffdioRange {
            start: start as u64,
            len: len as u64,
        };
        // SAFETY: UFFDIO_WAKE only reads the range struct.
        unsafe { uffdio_wake(self.raw(), &mut r) }
            .map(|_| ())
            .map_err(err("ioctl(UFFDIO_WAKE)"))
    }
}

/// `struct pm_scan_arg` of the `PAGEMAP_SCAN` ioctl (include/uapi/linux/fs.h, Linux 6.7).
#[repr(C)]
#[derive(Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `struct page_region`: one run of pages `PAGEMAP_SCAN` reports.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// Protect the pages found again, in the same walk (`PM_SCAN_WP_MATCHING`).
const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
/// Fail unless the range is registered with an asynchronous write-protect userfaultfd.
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;
/// The page was written since it was last write-protected.
const PAGE_IS_WRITTEN: u64 = 1 << 1;
/// The page is present. A hole counts as written (it has no write protection), and protecting
/// it again would leave a marker in its table entry that `UFFDIO_ZEROPAGE` then refuses.
const PAGE_IS_PRESENT: u64 = 1 << 3;

nix::ioctl_readwrite!(pagemap_scan, b'f', 16, PmScanArg);

/// `/proc/self/pagemap`, for `PAGEMAP_SCAN`.
pub struct Pagemap {
    file: std::fs::File,
}

impl Pagemap {
    pub fn open() -> Result<Pagemap, SysError> {
        let file = std::fs::File::open("/proc/self/pagemap")
            .map_err(super::window::io_err("open(/proc/self/pagemap)"))?;
        Ok(Pagemap { file })
    }

    /// Appends to `out` the runs `(start, end)` of pages in `[start, end)` written since they
    /// were last write-protected, and write-protects them again in the same walk, so a write
    /// after it is reported by the next call. The range must be registered with a userfaultfd
    /// from [`Uffd::open_async_wp`] (else `EPERM`); pages not present are neither reported nor
    /// touched.
    pub fn take_written(
        &self,
        start: usize,
        end: usize,
        out: &mut Vec<(usize, usize)>,
    ) -> Result<(), SysError> {
        let mut regions = [PageRegion::default(); 64];
        let mut from = start as u64;
        while from < end as u64 {
            let mut arg = PmScanArg {
                size: std::mem::size_of::<PmScanArg>() as u64,
                flags: PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
                start: from,
                end: end as u64,
                vec: regions.as_mut_ptr() as u64,
                vec_len: regions.len() as u64,
                category_mask: PAGE_IS_WRITTEN | PAGE_IS_PRESENT,
                return_mask: PAGE_IS_WRITTEN,
                ..PmScanArg::default()
            };
            // SAFETY: PAGEMAP_SCAN reads `arg` and writes at most `vec_len` page_region records
            // into `regions`, a live local array of that many; it walks this process's own
            // page tables in `[start, end)` and writes nothing else of ours but `walk_end`.
            let n = unsafe { pagemap_scan(self.file.as_raw_fd(), &mut arg) }
                .map_err(err("ioctl(PAGEMAP_SCAN)"))?;
            let n = (n.max(0) as usize).min(regions.len());
            out.extend(
                regions[..n]
                    .iter()
                    .map(|r| (r.start as usize, r.end as usize)),
            );
            // The walk stops early when the runs fill `regions`; it goes on from there.
            if arg.walk_end <= from {
                break;
            }
            from = arg.walk_end;
        }
        Ok(())
    }
}

/// One anonymous read-write page of its own, unmapped on drop: what a probe of a userfaultfd
/// feature registers and writes.
pub struct ProbePage {
    addr: usize,
    len: usize,
}

impl ProbePage {
    pub fn map() -> Result<ProbePage, SysError> {
        let len = super::os_page_size();
        // SAFETY: a fresh private anonymous mapping at an address the kernel chooses: nothing
        // else refers to it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(SysError::Call {
                call: "mmap(probe page)",
                errno: nix::errno::Errno::last(),
            });
        }
        Ok(ProbePage {
            addr: p as usize,
            len,
        })
    }

    pub fn addr(&self) -> usize {
        self.addr
    }

    /// Its size: one page.
    pub fn size(&self) -> usize {
        self.len
    }

    /// Writes the page's first byte. The caller makes sure the write cannot wait for a
    /// userfaultfd event nobody reads: the page is present, and write-protected (if at all)
    /// only by a userfaultfd whose write-protect faults the kernel resolves itself.
    pub fn touch(&self) {
        // SAFETY: the page is mapped read-write for as long as `self` lives (see the caller's
        // contract above for the userfaultfd).
        unsafe { std::ptr::write_volatile(self.addr as *mut u8, 1) };
    }
}

impl Drop for ProbePage {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `map` made, which nothing refers to any more.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

/// Whether this process may use userfaultfd (root, CAP_SYS_PTRACE, or the sysctl allows it).
pub fn available() -> bool {
    Uffd::open().is_ok()
}
