//! userfaultfd backend: anonymous memory registered for MISSING and write-protect faults.
//!
//! - read fault on a missing page → the engine fetches it → `UFFDIO_COPY` in write-protect mode
//!   (the page arrives read-only and the thread wakes);
//! - write to a read-only page → WP fault → `UFFDIO_WRITEPROTECT` clear (wakes the thread);
//! - invalidate → `MADV_DONTNEED` (the next access is a MISSING fault again);
//! - a kernel access (`read(2)` into shared memory) faults like a user access.

use std::os::fd::RawFd;

use super::{Fault, FaultBackend, SequentialFill, WaiterRef};
use crate::sys::segv::now_ns;
use crate::sys::uffd::{Uffd, UffdFault};
use crate::sys::{SysError, Window};
use crate::Access;

pub struct UffdBackend {
    window: Window,
    uffd: Uffd,
    page_size: usize,
    /// Zeros to copy from: one page, or a whole chunk of a sequential fill.
    zero: Vec<u8>,
    fill: SequentialFill,
}

/// Largest run of zeros one `UFFDIO_COPY` of a sequential fill copies (and the size of the
/// zero buffer it copies from).
const FILL_CHUNK: usize = 256 << 10;

impl UffdBackend {
    pub fn new(window: Window, page_size: usize) -> Result<UffdBackend, SysError> {
        let uffd = Uffd::open()?;
        for (base, size) in window.ranges() {
            uffd.register(base, size)?;
        }
        Ok(UffdBackend {
            window,
            uffd,
            page_size,
            zero: vec![0u8; page_size.max(FILL_CHUNK)],
            fill: SequentialFill::default(),
        })
    }
}

impl FaultBackend for UffdBackend {
    fn name(&self) -> &'static str {
        "uffd"
    }

    fn poll_fd(&self) -> RawFd {
        self.uffd.raw()
    }

    fn take_faults(&self, out: &mut Vec<Fault>) -> Result<(), SysError> {
        let mut evs: Vec<UffdFault> = Vec::new();
        self.uffd.read_events(&mut evs)?;
        let now = now_ns();
        let mask = !(self.page_size - 1);
        out.extend(evs.into_iter().map(|e| Fault {
            addr: e.addr & mask,
            write: e.write || e.wp,
            waiter: WaiterRef::Uffd,
            since_ns: now,
            tid: e.tid,
        }));
        Ok(())
    }

    fn set_access(
        &self,
        addr: usize,
        len: usize,
        old: Access,
        new: Access,
        present: bool,
        initial: Option<&[u8]>,
    ) -> Result<bool, SysError> {
        match new {
            Access::None => {
                if present {
                    self.window.discard(addr, len)?;
                }
                Ok(false)
            }
            Access::Read => {
                if !present {
                    self.copy_pages(addr, len, initial, true)?;
                } else if old == Access::Write {
                    self.uffd.write_protect(addr, len, true)?;
                }
                Ok(true)
            }
            Access::Write => {
                if !present {
                    if initial.is_none()
                        && len > self.page_size
                        && self.fill.continues(addr, len, self.page_size)
                    {
                        // A sequential first-touch fill: real zeroed pages now, so the thread's
                        // writes do not each take the kernel's copy-on-write fault of a
                        // zero-page mapping.
                        self.copy_zeros(addr, len)?;
                    } else {
                        self.copy_pages(addr, len, initial, false)?;
                    }
                } else if old != Access::Write {
                    self.uffd.write_protect(addr, len, false)?;
                }
                Ok(true)
            }
        }
    }

    fn install(
        &self,
        addr: usize,
        data: &[u8],
        access: Access,
        present: bool,
    ) -> Result<bool, SysError> {
        if present {
            self.window.discard(addr, data.len())?;
        }
        self.copy_pages(addr, data.len(), Some(data), access != Access::Write)?;
        if access == Access::None {
            self.window.discard(addr, data.len())?;
            return Ok(false);
        }
        Ok(true)
    }

    fn patch(
        &self,
        addr: usize,
        len: usize,
        access: Access,
        present: bool,
        runs: &[(usize, &[u8])],
    ) -> Result<bool, SysError> {
        if !present {
            return Ok(false);
        }
        // The engine thread must not write through the write-protected mapping (it would
        // fault to itself), and local writers must not slip in between reading and replacing
        // the page: write-protect it, build the patched page aside, then replace it
        // atomically. Threads that fault meanwhile wait for the engine and retry.
        if access == Access::Write {
            self.uffd.write_protect(addr, len, true)?;
        }
        let mut page = vec![0u8; len];
        self.window.read(addr, &mut page)?;
        for (off, bytes) in runs {
            page[*off..off + bytes.len()].copy_from_slice(bytes);
        }
        self.window.discard(addr, len)?;
        self.copy_pages(addr, len, Some(&page), access != Access::Write)?;
        Ok(true)
    }

    fn drop_range(&self, addr: usize, len: usize) -> Result<(), SysError> {
        // Write protection lives in the page table entries, which MADV_DONTNEED removes: the
        // next access is a MISSING fault, as for a page never touched.
        self.window.discard(addr, len)
    }

    fn read(
        &self,
        addr: usize,
        dst: &mut [u8],
        present: bool,
        initial: Option<&[u8]>,
    ) -> Result<(), SysError> {
        if present {
            return self.window.read(addr, dst);
        } else if let Some(init) = initial {
            dst.copy_from_slice(&init[..dst.len()]);
        } else {
            dst.fill(0);
        }
        Ok(())
    }

    fn wake(&self, addr: usize, len: usize, _waiter: WaiterRef) -> Result<(), SysError> {
        self.uffd.wake(addr, len)
    }

    fn shutdown(&self) {
        for (base, size) in self.window.ranges() {
            // Clear write protection first so present pages are writable as plain memory.
            let _ = self.uffd.write_protect(base, size, false);
            let _ = self.uffd.unregister(base, size);
        }
    }
}

impl UffdBackend {
    /// Fills the missing pages of `addr..addr + len` with zeroed, writable memory (page by
    /// page where a racing install filled some already).
    fn copy_zeros(&self, addr: usize, len: usize) -> Result<(), SysError> {
        for off in (0..len).step_by(self.zero.len()) {
            let n = (len - off).min(self.zero.len());
            self.copy_pages(addr + off, n, Some(&self.zero[..n]), false)?;
        }
        Ok(())
    }

    /// Fills missing pages with `data` (or zeros), page by OS page so a page another racing
    /// install already filled is simply skipped.
    fn copy_pages(
        &self,
        addr: usize,
        len: usize,
        data: Option<&[u8]>,
        read_only: bool,
    ) -> Result<(), SysError> {
        if data.is_none() && len > self.page_size {
            // A run of blank pages (fault-around): zero-page mappings, one call; memory is
            // used only for the pages the application then writes.
            if !self.uffd.zeropage(addr, len)? {
                // Some page was present already: page by page, skipping those.
                for off in (0..len).step_by(self.page_size) {
                    self.uffd.zeropage(addr + off, self.page_size)?;
                }
            }
            if read_only {
                self.uffd.write_protect(addr, len, true)?;
            }
            return Ok(());
        }
        let src = data.unwrap_or(&self.zero[..len.min(self.page_size)]);
        // One call for the whole range; if some page is present already (a racing install),
        // the copy stopped there: page by page, making the protection of present pages right.
        if src.len() == len && self.uffd.copy(addr, src, read_only)? {
            return Ok(());
        }
        for off in (0..len).step_by(self.page_size) {
            let chunk = &src[off.min(src.len())..(off + self.page_size).min(src.len())];
            if !self.uffd.copy(addr + off, chunk, read_only)? {
                self.uffd
                    .write_protect(addr + off, chunk.len(), read_only)?;
            }
        }
        Ok(())
    }
}
