//! The shared window's mappings: the fixed-address window and the program's static segments
//! taken over at start, their backing (anonymous for userfaultfd, a memfd with an alias or
//! forced `/proc/self/mem` access for the segv backend), protection and page contents.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::ptr::NonNull;

use nix::sys::mman::{mmap, mmap_anonymous, mprotect, munmap, MapFlags, ProtFlags};

use super::{call, os_page_size, SysError};
use crate::Access;

fn prot(access: Access) -> ProtFlags {
    match access {
        Access::None => ProtFlags::PROT_NONE,
        Access::Read => ProtFlags::PROT_READ,
        Access::Write => ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
    }
}

/// One mapping the runtime manages: the shared window, or a static segment of the program (its
/// writable data) taken over at start.
struct Mapping {
    base: usize,
    size: usize,
    /// Alias mapping (segv backend) — same memfd, always read-write.
    alias: Option<NonNull<libc::c_void>>,
    memfd: Option<OwnedFd>,
    /// Unmapped on drop (the window and aliases; a static segment stays mapped: the program's
    /// own data lives there until the process ends).
    unmap_base: bool,
}

/// The fixed-address shared window plus any static segments, each with (for the segv backend)
/// an always-writable alias of the same memory through which the runtime reads and installs
/// page contents.
pub struct Window {
    maps: Vec<Mapping>,
    backing: Backing,
    /// `/proc/self/mem` ([`Backing::AnonymousForced`]).
    proc_mem: Option<std::fs::File>,
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
    /// Private anonymous memory, PROT_NONE at the window (protection per page); the runtime
    /// reads and writes page contents through `/proc/self/mem`, whose accesses are not bound
    /// by the mapping's protection (the kernel's forced access, as a debugger's). A page the
    /// application touches first is an ordinary anonymous page (the cost of `calloc`'s first
    /// touch), where a memfd page costs about twice as much to allocate (segv backend, when
    /// [`forced_access_works`]).
    AnonymousForced,
}

/// Whether this process can write memory it has mapped PROT_NONE through `/proc/self/mem`
/// (not where `/proc` is missing or the kernel forbids forced access,
/// `proc_mem.force_override=never`): tried on a scratch page.
pub fn forced_access_works() -> bool {
    let ps = os_page_size();
    let Ok(len) = nz(ps) else {
        return false;
    };
    // SAFETY: a fresh private mapping at a kernel-chosen address, unmapped below.
    let Ok(p) = (unsafe {
        mmap_anonymous(
            None,
            len,
            ProtFlags::PROT_NONE,
            MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE,
        )
    }) else {
        return false;
    };
    let probe = open_proc_mem().is_ok_and(|f| {
        let addr = p.as_ptr() as u64;
        let wrote = f.write_all_at(&[0x5a], addr).is_ok();
        let mut back = [0u8; 1];
        wrote && f.read_exact_at(&mut back, addr).is_ok() && back[0] == 0x5a
    });
    // SAFETY: the scratch mapping made above, used by nothing else.
    let _ = unsafe { munmap(p, ps) };
    probe
}

fn open_proc_mem() -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/proc/self/mem")
}

fn nz(len: usize) -> Result<std::num::NonZeroUsize, SysError> {
    std::num::NonZeroUsize::new(len).ok_or(SysError::Call {
        call: "mmap (size 0)",
        errno: nix::errno::Errno::EINVAL,
    })
}

/// Creates a memfd of `size` bytes and maps it read-write at a kernel-chosen address.
fn memfd_with_alias(
    name: &std::ffi::CStr,
    size: usize,
) -> Result<(OwnedFd, NonNull<libc::c_void>), SysError> {
    let fd = nix::sys::memfd::memfd_create(name, nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)
        .map_err(call("memfd_create"))?;
    nix::unistd::ftruncate(&fd, size as i64).map_err(call("ftruncate(memfd)"))?;
    // SAFETY: a fresh mapping at a kernel-chosen address; owned by the returned Window.
    let alias = unsafe {
        mmap(
            None,
            nz(size)?,
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            MapFlags::MAP_SHARED | MapFlags::MAP_NORESERVE,
            &fd,
            0,
        )
    }
    .map_err(call("mmap(alias)"))?;
    Ok((fd, alias))
}

impl Window {
    /// Maps `size` bytes at exactly `base` without replacing anything already mapped.
    pub fn map(base: usize, size: usize, backing: Backing) -> Result<Window, SysError> {
        let len = nz(size)?;
        let addr = std::num::NonZeroUsize::new(base);
        let taken = |e: nix::errno::Errno| {
            if e == nix::errno::Errno::EEXIST {
                SysError::WindowTaken {
                    base,
                    end: base + size,
                }
            } else {
                SysError::Call {
                    call: "mmap(window)",
                    errno: e,
                }
            }
        };
        let fixed = MapFlags::MAP_FIXED_NOREPLACE | MapFlags::MAP_NORESERVE;
        let mut w = Window {
            maps: Vec::new(),
            backing,
            proc_mem: None,
        };
        match backing {
            Backing::AnonymousForced | Backing::Anonymous => {
                // userfaultfd catches faults in readable, writable memory; the segv backend's
                // window starts closed, its contents reached through /proc/self/mem.
                let prot = if backing == Backing::AnonymousForced {
                    w.proc_mem = Some(open_proc_mem().map_err(|e| SysError::Call {
                        call: "open(/proc/self/mem)",
                        errno: nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
                    })?);
                    ProtFlags::PROT_NONE
                } else {
                    ProtFlags::PROT_READ | ProtFlags::PROT_WRITE
                };
                // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; the kernel
                // fails with EEXIST instead. The new mapping is owned by the returned Window.
                let p = unsafe { mmap_anonymous(addr, len, prot, fixed | MapFlags::MAP_PRIVATE) }
                    .map_err(taken)?;
                w.maps.push(Mapping {
                    base: p.as_ptr() as usize,
                    size,
                    alias: None,
                    memfd: None,
                    unmap_base: true,
                });
            }
            Backing::MemfdWithAlias => {
                let (fd, alias) = memfd_with_alias(c"svm-window", size)?;
                // SAFETY: as above, MAP_FIXED_NOREPLACE cannot clobber existing mappings.
                let p = unsafe {
                    mmap(
                        addr,
                        len,
                        ProtFlags::PROT_NONE,
                        fixed | MapFlags::MAP_SHARED,
                        &fd,
                        0,
                    )
                };
                let p = match p {
                    Ok(p) => p,
                    Err(e) => {
                        // SAFETY: the alias was mapped just above and nothing else uses it.
                        let _ = unsafe { munmap(alias, size) };
                        return Err(taken(e));
                    }
                };
                w.maps.push(Mapping {
                    base: p.as_ptr() as usize,
                    size,
                    alias: Some(alias),
                    memfd: Some(fd),
                    unmap_base: true,
                });
            }
        }
        if w.maps[0].base != base {
            // Kernels before 4.17 ignore MAP_FIXED_NOREPLACE and map elsewhere.
            return Err(SysError::WindowTaken {
                base,
                end: base + size,
            });
        }
        w.no_huge_pages(base, size);
        Ok(w)
    }

    /// Takes over `[base, base+size)` — writable memory of this process such as the program's
    /// data segment — so that the runtime manages it like the window: the range is replaced by
    /// a fresh mapping of the window's backing. Returns the contents it had. Must be called
    /// before any other thread of the program uses that memory.
    pub fn take_over_static(&mut self, base: usize, size: usize) -> Result<Vec<u8>, SysError> {
        let ps = os_page_size();
        if !base.is_multiple_of(ps) || !size.is_multiple_of(ps) || size == 0 {
            return Err(SysError::Call {
                call: "take over static segment (unaligned)",
                errno: nix::errno::Errno::EINVAL,
            });
        }
        if self
            .maps
            .iter()
            .any(|m| base < m.base + m.size && m.base < base + size)
        {
            return Err(SysError::Call {
                call: "take over static segment (overlaps)",
                errno: nix::errno::Errno::EEXIST,
            });
        }
        let mut saved = vec![0u8; size];
        // SAFETY: the caller names readable, writable memory of this process (checked by the
        // caller against /proc/self/maps); we copy it into a private buffer of the same size.
        unsafe { std::ptr::copy_nonoverlapping(base as *const u8, saved.as_mut_ptr(), size) };
        let addr = std::num::NonZeroUsize::new(base);
        let len = nz(size)?;
        let (alias, memfd) = match self.backing {
            Backing::Anonymous | Backing::AnonymousForced => {
                // SAFETY: MAP_FIXED replaces the program's own data pages, which this process
                // owns and whose contents were saved above; no other thread uses them yet.
                unsafe {
                    mmap_anonymous(
                        addr,
                        len,
                        ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                        MapFlags::MAP_FIXED | MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE,
                    )
                }
                .map_err(call("mmap(static segment)"))?;
                if self.backing == Backing::AnonymousForced {
                    // The saved contents go back page by page, skipping zero pages (they stay
                    // unallocated until touched), before the range is closed to the
                    // application.
                    for (i, chunk) in saved.chunks(ps).enumerate() {
                        if chunk.iter().any(|&b| b != 0) {
                            // SAFETY: the fresh read-write mapping made just above covers it.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    chunk.as_ptr(),
                                    (base + i * ps) as *mut u8,
                                    chunk.len(),
                                )
                            };
                        }
                    }
                    // SAFETY: our own mapping, made above.
                    unsafe { mprotect(ptr(base), size, ProtFlags::PROT_NONE) }
                        .map_err(call("mprotect(static segment)"))?;
                }
                (None, None)
            }
            Backing::MemfdWithAlias => {
                let (fd, alias) = memfd_with_alias(c"svm-static", size)?;
                // SAFETY: the alias is a fresh read-write mapping of `size` bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(saved.as_ptr(), alias.as_ptr() as *mut u8, size)
                };
                // SAFETY: as in the anonymous case: our own saved data pages are replaced.
                unsafe {
                    mmap(
                        addr,
                        len,
                        ProtFlags::PROT_NONE,
                        MapFlags::MAP_FIXED | MapFlags::MAP_SHARED,
                        &fd,
                        0,
                    )
                }
                .map_err(call("mmap(static segment)"))?;
                (Some(alias), Some(fd))
            }
        };
        self.maps.push(Mapping {
            base,
            size,
            alias,
            memfd,
            unmap_base: false,
        });
        self.no_huge_pages(base, size);
        Ok(saved)
    }

    fn no_huge_pages(&self, base: usize, size: usize) {
        // SAFETY: advice on our own mapping; MADV_NOHUGEPAGE changes no contents.
        let _ = unsafe {
            nix::sys::mman::madvise(ptr(base), size, nix::sys::mman::MmapAdvise::MADV_NOHUGEPAGE)
        };
    }

    pub fn base(&self) -> usize {
        self.maps[0].base
    }
    pub fn size(&self) -> usize {
        self.maps[0].size
    }
    /// Every managed range `(base, size)`: the window first, then static segments.
    pub fn ranges(&self) -> Vec<(usize, usize)> {
        self.maps.iter().map(|m| (m.base, m.size)).collect()
    }
    pub fn contains(&self, addr: usize) -> bool {
        self.maps
            .iter()
            .any(|m| addr >= m.base && addr < m.base + m.size)
    }

    fn check(&self, addr: usize, len: usize) -> &Mapping {
        self.maps
            .iter()
            .find(|m| addr >= m.base && addr.checked_add(len).is_some_and(|e| e <= m.base + m.size))
            .unwrap_or_else(|| panic!("range {addr:#x}+{len:#x} outside the managed mappings"))
    }

    /// Sets the protection of the application mapping (segv backend).
    pub fn protect(&self, addr: usize, len: usize, access: Access) -> Result<(), SysError> {
        self.check(addr, len);
        // SAFETY: the range lies inside a mapping we own; changing its protection cannot
        // affect memory outside it.
        match unsafe { mprotect(ptr(addr), len, prot(access)) } {
            Ok(()) => Ok(()),
            Err(nix::errno::Errno::ENOMEM) => Err(SysError::MapCountExhausted {
                max_map_count: std::fs::read_to_string("/proc/sys/vm/max_map_count")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "unknown".into()),
            }),
            Err(e) => Err(SysError::Call {
                call: "mprotect",
                errno: e,
            }),
        }
    }

    /// Drops the contents of a range of the application mapping (anonymous backend): the next
    /// access faults as MISSING.
    pub fn discard(&self, addr: usize, len: usize) -> Result<(), SysError> {
        self.check(addr, len);
        // SAFETY: MADV_DONTNEED on our own anonymous range: contents are dropped, which is the
        // intent (the protocol invalidated the copy); no other memory is affected.
        unsafe {
            nix::sys::mman::madvise(ptr(addr), len, nix::sys::mman::MmapAdvise::MADV_DONTNEED)
        }
        .map_err(call("madvise(MADV_DONTNEED)"))
    }

    /// Address in the alias mapping of managed address `addr` (segv backend).
    fn alias_addr(m: &Mapping, addr: usize) -> Option<usize> {
        m.alias.map(|a| a.as_ptr() as usize + (addr - m.base))
    }

    /// Copies `dst.len()` bytes starting at `addr` into `dst`. With an alias the copy goes
    /// through it, with forced access through `/proc/self/mem` (neither faults, whatever the
    /// protection); otherwise the caller guarantees the range is present and readable in the
    /// application mapping.
    pub fn read(&self, addr: usize, dst: &mut [u8]) -> Result<(), SysError> {
        let m = self.check(addr, dst.len());
        if let Some(f) = &self.proc_mem {
            return f
                .read_exact_at(dst, addr as u64)
                .map_err(io_err("pread(/proc/self/mem)"));
        }
        let src = Self::alias_addr(m, addr).unwrap_or(addr);
        // SAFETY: the range is inside a managed mapping (checked) and, per the caller's
        // contract, mapped readable (alias: always). Other threads may write concurrently only
        // where the coherence protocol allows races (then the bytes read are whatever was there).
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Writes `src` at `addr` through the application mapping, where the range is present and
    /// either writable or write-protected by a userfaultfd whose write-protect faults the
    /// kernel resolves itself ([`crate::sys::uffd::Uffd::open_async_wp`]): the write goes
    /// through, beside whatever other threads write to other bytes of the page.
    pub fn write_present(&self, addr: usize, src: &[u8]) -> Result<(), SysError> {
        self.check(addr, src.len());
        if let Some(f) = &self.proc_mem {
            return f
                .write_all_at(src, addr as u64)
                .map_err(io_err("pwrite(/proc/self/mem)"));
        }
        // SAFETY: the range is inside a managed mapping (checked) and, per the caller's
        // contract, present and writable without an event to handle (so this thread cannot
        // block on a fault only it would serve). Concurrent writes of the application to the
        // same bytes are a data race of the program, as with any multiple-writer protocol.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), addr as *mut u8, src.len()) };
        Ok(())
    }

    /// Writes `src` at `addr` whatever the application mapping's protection: through the
    /// alias or `/proc/self/mem` (segv backend only).
    pub fn write_forced(&self, addr: usize, src: &[u8]) -> Result<(), SysError> {
        let m = self.check(addr, src.len());
        if let Some(f) = &self.proc_mem {
            return f
                .write_all_at(src, addr as u64)
                .map_err(io_err("pwrite(/proc/self/mem)"));
        }
        let dst =
            Self::alias_addr(m, addr).expect("write_forced needs the memfd or forced backing");
        // SAFETY: the alias is always mapped read-write and the range is inside it (checked).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) };
        Ok(())
    }

    /// Writes `src` at `addr` directly in the application mapping; the caller guarantees the
    /// range is present and writable there (anonymous backend, engine-side updates).
    pub fn write_direct(&self, addr: usize, src: &[u8]) {
        self.check(addr, src.len());
        // SAFETY: inside a managed mapping (checked); writable per the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), addr as *mut u8, src.len()) }
    }

    /// Whether page contents are read and written through `/proc/self/mem`
    /// ([`Backing::AnonymousForced`]).
    pub fn is_forced(&self) -> bool {
        self.proc_mem.is_some()
    }

    /// Backs a writable range of the application mapping with real zeroed pages at once
    /// (`MADV_POPULATE_WRITE`), so the application's first writes take no fault (anonymous
    /// backings; a sequential first-touch fill).
    pub fn populate_write(&self, addr: usize, len: usize) -> Result<(), SysError> {
        self.check(addr, len);
        // SAFETY: advice on a range of our own mapping (checked), which the caller made
        // writable: the kernel allocates zeroed pages for the holes and changes no contents.
        let r = unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) };
        if r != 0 {
            return Err(SysError::Call {
                call: "madvise(MADV_POPULATE_WRITE)",
                errno: nix::errno::Errno::last(),
            });
        }
        Ok(())
    }

    /// Frees the memory behind a range (segv backend), keeping it mapped: it will read as
    /// zeros. A memfd gets a hole punched; anonymous memory is discarded.
    pub fn punch_hole(&self, addr: usize, len: usize) -> Result<(), SysError> {
        let m = self.check(addr, len);
        let Some(fd) = m.memfd.as_ref() else {
            return self.discard(addr, len);
        };
        nix::fcntl::fallocate(
            fd.as_raw_fd(),
            nix::fcntl::FallocateFlags::FALLOC_FL_PUNCH_HOLE
                | nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
            (addr - m.base) as i64,
            len as i64,
        )
        .map_err(call("fallocate(PUNCH_HOLE)"))
    }
}

/// Maps an I/O error of a system call to a [`SysError`].
pub(super) fn io_err(call: &'static str) -> impl Fn(std::io::Error) -> SysError {
    move |e| SysError::Call {
        call,
        errno: nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
    }
}

fn ptr(addr: usize) -> NonNull<libc::c_void> {
    NonNull::new(addr as *mut libc::c_void).expect("managed addresses are non-null")
}

impl Drop for Window {
    fn drop(&mut self) {
        for m in &self.maps {
            // SAFETY: mappings created by Window are unmapped exactly once; static segments
            // (unmap_base false) stay mapped because the program's data lives there.
            unsafe {
                if m.unmap_base {
                    let _ = munmap(ptr(m.base), m.size);
                }
                if let Some(a) = m.alias {
                    let _ = munmap(a, m.size);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::{app_cells, app_load, app_store};

    /// Fixed test addresses, one per use, far below where the kernel places mappings (top
    /// down from the end of the user address space) and below the default window.
    const TEST_RANGES: usize = 0x5f00_0000_0000;

    fn test_range(n: usize) -> usize {
        TEST_RANGES + n * (1 << 30)
    }

    /// The segv backend's window, both backings: contents written and read whatever the
    /// protection, seen by the application once readable, zeros after a hole is punched.
    #[test]
    fn segv_windows_install_and_drop_contents_behind_the_protection() {
        let ps = os_page_size();
        let mut backings = vec![Backing::MemfdWithAlias];
        if forced_access_works() {
            backings.push(Backing::AnonymousForced);
        } else {
            eprintln!("SKIPPED (forced access): /proc/self/mem refuses writes here");
        }
        for (i, backing) in backings.into_iter().enumerate() {
            let base = test_range(i);
            let w = Window::map(base, 4 * ps, backing).expect("window");
            assert_eq!(w.is_forced(), backing == Backing::AnonymousForced);
            let page = vec![0xabu8; ps];
            // Written while the application may not even read the page.
            w.write_forced(base + ps, &page).expect("forced write");
            let mut back = vec![0u8; ps];
            w.read(base + ps, &mut back).expect("forced read");
            assert_eq!(back, page, "{backing:?}");
            w.protect(base + ps, ps, Access::Read).expect("protect");
            assert_eq!(
                app_load::<u8>((base, 4 * ps), base + ps + 17),
                0xab,
                "{backing:?}"
            );
            w.protect(base + ps, ps, Access::None).expect("protect");
            w.punch_hole(base + ps, ps).expect("drop");
            w.read(base + ps, &mut back).expect("read");
            assert!(
                back.iter().all(|&b| b == 0),
                "{backing:?}: contents survived the drop"
            );
            // A fill made writable in one go is backed at once and reads as zeros.
            w.protect(base, 4 * ps, Access::Write).expect("protect");
            if w.is_forced() {
                w.populate_write(base, 4 * ps).expect("populate");
            }
            assert_eq!(
                app_load::<u64>((base, 4 * ps), base + 3 * ps),
                0,
                "{backing:?}"
            );
        }
    }

    /// Cells over the window read and write the memory itself; a range past the end or a
    /// misaligned start is refused.
    #[test]
    fn cells_are_the_window_in_place_and_stay_inside_it() {
        let ps = os_page_size();
        let base = test_range(7);
        let w = Window::map(base, 2 * ps, Backing::MemfdWithAlias).expect("window");
        w.protect(base, 2 * ps, Access::Write).expect("protect");
        let window = (base, 2 * ps);
        let cells = app_cells::<u64>(window, base + ps - 8, 2);
        cells[0].set(7);
        cells[1].set(9);
        assert_eq!(app_load::<u64>(window, base + ps - 8), 7);
        assert_eq!(app_load::<u64>(window, base + ps), 9);
        app_store::<u64>(window, base + ps, 11);
        assert_eq!(cells[1].get(), 11);
        assert_eq!(app_cells::<u64>(window, base, 2 * ps / 8).len(), 2 * ps / 8);
        let past_end = std::panic::catch_unwind(|| app_cells::<u64>(window, base + ps, ps / 8 + 1));
        assert!(past_end.is_err(), "a range past the window was accepted");
        let misaligned = std::panic::catch_unwind(|| app_cells::<u64>(window, base + 4, 1));
        assert!(misaligned.is_err(), "a misaligned range was accepted");
        let overflow = std::panic::catch_unwind(|| app_cells::<u64>(window, base, usize::MAX / 4));
        assert!(overflow.is_err(), "an overflowing length was accepted");
    }

    /// A static segment taken over by the forced backing keeps its contents (behind PROT_NONE).
    #[test]
    fn a_static_segment_taken_over_keeps_its_contents() {
        if !forced_access_works() {
            eprintln!("SKIPPED: /proc/self/mem refuses writes here");
            return;
        }
        let ps = os_page_size();
        let base = test_range(2);
        let w_base = test_range(3);
        let mut w = Window::map(w_base, 4 * ps, Backing::AnonymousForced).expect("window");
        // The "program's data": 3 pages, the middle one zero.
        // SAFETY: a fresh read-write mapping at the free range found above.
        let data = unsafe {
            mmap_anonymous(
                std::num::NonZeroUsize::new(base),
                nz(3 * ps).unwrap(),
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_FIXED_NOREPLACE,
            )
        }
        .expect("data mapping");
        assert_eq!(data.as_ptr() as usize, base);
        app_store::<u8>((base, 3 * ps), base + 5, 7);
        app_store::<u8>((base, 3 * ps), base + 2 * ps + 9, 9);
        let saved = w.take_over_static(base, 3 * ps).expect("take over");
        assert_eq!((saved[5], saved[2 * ps + 9]), (7, 9));
        let mut back = vec![1u8; 3 * ps];
        w.read(base, &mut back).expect("read");
        assert_eq!(back, saved);
    }
}
