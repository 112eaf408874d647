//! userfaultfd backend: anonymous memory registered for MISSING and write-protect faults.
//!
//! - read fault on a missing page → the engine fetches it → `UFFDIO_COPY` in write-protect mode
//!   (the page arrives read-only and the thread wakes);
//! - write to a read-only page → WP fault → `UFFDIO_WRITEPROTECT` clear (wakes the thread);
//! - invalidate → `MADV_DONTNEED` (the next access is a MISSING fault again);
//! - a kernel access (`read(2)` into shared memory) faults like a user access.
//!
//! Ranges whose writes are found by scanning ([`FaultBackend::scan_writes`]) are registered
//! with a second userfaultfd instead, whose write-protect faults the kernel resolves itself
//! (`UFFD_FEATURE_WP_ASYNC`): a write to a write-protected page there goes through without an
//! event, and [`FaultBackend::take_written`] lists the pages written since and protects them
//! again (`PAGEMAP_SCAN`). Missing-page faults come from both; every other call goes to the
//! userfaultfd its range is registered with.

use std::os::fd::RawFd;
use std::sync::RwLock;

use super::{Fault, FaultBackend, SequentialFill, WaiterRef};
use crate::sys::segv::now_ns;
use crate::sys::uffd::{Pagemap, Uffd, UffdFault};
use crate::sys::{Poller, SysError, Window};
use crate::Access;

pub struct UffdBackend {
    window: Window,
    uffd: Uffd,
    page_size: usize,
    /// Zeros to copy from: one page, or a whole chunk of a sequential fill.
    zero: Vec<u8>,
    fill: SequentialFill,
    /// Write tracking by scan, where the kernel has it and it is not turned off.
    scan: Option<ScanTracking>,
}

/// The second userfaultfd (asynchronous write-protect) and the ranges registered with it.
struct ScanTracking {
    uffd: Uffd,
    pagemap: Pagemap,
    /// Watches both userfaultfds: the backend's one descriptor for the engine.
    poller: Poller,
    /// `(start, end)` of each range registered with `uffd`, sorted.
    ranges: RwLock<Vec<(usize, usize)>>,
}

impl ScanTracking {
    /// Both userfaultfds in one poller, or None where the kernel lacks either
    /// `UFFD_FEATURE_WP_ASYNC` or `PAGEMAP_SCAN` (before Linux 6.7).
    fn open(sync: &Uffd) -> Option<ScanTracking> {
        let uffd = Uffd::open_async_wp().ok()?;
        let pagemap = Pagemap::open().ok()?;
        if !probe_scan(&uffd, &pagemap) {
            return None;
        }
        let poller = Poller::new().ok()?;
        poller.add(sync.raw(), 0).ok()?;
        poller.add(uffd.raw(), 1).ok()?;
        Some(ScanTracking {
            uffd,
            pagemap,
            poller,
            ranges: RwLock::new(Vec::new()),
        })
    }

    fn ranges(&self) -> std::sync::RwLockReadGuard<'_, Vec<(usize, usize)>> {
        self.ranges.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The scanned range holding `addr`, if any.
    fn range_at(&self, addr: usize) -> Option<(usize, usize)> {
        let ranges = self.ranges();
        let i = ranges.partition_point(|&(_, e)| e <= addr);
        ranges.get(i).copied().filter(|&(s, _)| s <= addr)
    }
}

/// Whether a write to a write-protected page of a range registered with `uffd` goes through
/// without an event and is then reported once by `pagemap` (a page mapped for the probe and
/// unmapped again).
fn probe_scan(uffd: &Uffd, pagemap: &Pagemap) -> bool {
    let Ok(page) = crate::sys::uffd::ProbePage::map() else {
        return false;
    };
    let (addr, len) = (page.addr(), page.size());
    // Present before it is registered: a missing-page fault here would wait for an event
    // nobody reads.
    page.touch();
    let ok = (|| -> Result<bool, SysError> {
        uffd.register(addr, len)?;
        uffd.write_protect(addr, len, true)?;
        page.touch();
        let mut first = Vec::new();
        pagemap.take_written(addr, addr + len, &mut first)?;
        let mut second = Vec::new();
        pagemap.take_written(addr, addr + len, &mut second)?;
        Ok(first == [(addr, addr + len)] && second.is_empty())
    })();
    let _ = uffd.unregister(addr, len);
    ok.unwrap_or(false)
}

/// Largest run of zeros one `UFFDIO_COPY` of a sequential fill copies (and the size of the
/// zero buffer it copies from).
const FILL_CHUNK: usize = 256 << 10;

impl UffdBackend {
    /// `scan`: whether ranges may have their writes found by scanning (`SVM_WRITE_SCAN`);
    /// without the kernel's support (before Linux 6.7) they never do.
    pub fn new(window: Window, page_size: usize, scan: bool) -> Result<UffdBackend, SysError> {
        let uffd = Uffd::open()?;
        for (base, size) in window.ranges() {
            uffd.register(base, size)?;
        }
        let scan = if scan {
            ScanTracking::open(&uffd)
        } else {
            None
        };
        Ok(UffdBackend {
            window,
            uffd,
            page_size,
            zero: vec![0u8; page_size.max(FILL_CHUNK)],
            fill: SequentialFill::default(),
            scan,
        })
    }

    /// The userfaultfd the range holding `addr` is registered with.
    fn uffd_at(&self, addr: usize) -> &Uffd {
        match &self.scan {
            Some(t) if t.range_at(addr).is_some() => &t.uffd,
            _ => &self.uffd,
        }
    }

    /// Calls `f(userfaultfd, start, len, scanned)` for each part of `[addr, addr + len)` cut
    /// where it enters or leaves a scanned range, in order. Without scanning: once, for the
    /// whole range (the fault path's calls pay nothing for the feature).
    fn for_parts(
        &self,
        addr: usize,
        len: usize,
        mut f: impl FnMut(&Uffd, usize, usize, bool) -> Result<(), SysError>,
    ) -> Result<(), SysError> {
        let Some(t) = &self.scan else {
            return f(&self.uffd, addr, len, false);
        };
        // Held across the calls: only `scan_writes` and `drop_range` change the ranges, and
        // neither runs from inside `f`.
        let ranges = t.ranges();
        let end = addr + len;
        let mut at = addr;
        while at < end {
            let i = ranges.partition_point(|&(_, e)| e <= at);
            let (scanned, upto) = match ranges.get(i) {
                Some(&(s, e)) if s <= at => (true, e.min(end)),
                Some(&(s, _)) => (false, s.min(end)),
                None => (false, end),
            };
            let uffd = if scanned { &t.uffd } else { &self.uffd };
            f(uffd, at, upto - at, scanned)?;
            at = upto;
        }
        Ok(())
    }

    /// Whether every part of `[addr, addr + len)` is scanned.
    fn all_scanned(&self, addr: usize, len: usize) -> bool {
        self.scan
            .as_ref()
            .and_then(|t| t.range_at(addr))
            .is_some_and(|(_, e)| addr + len <= e)
    }

    /// The userfaultfd all of `[addr, addr + len)` is registered with, or None where the
    /// range straddles a scanned range's edge (one lookup: this is on the fault path).
    fn single_uffd(&self, addr: usize, len: usize) -> Option<&Uffd> {
        let Some(t) = &self.scan else {
            return Some(&self.uffd);
        };
        let ranges = t.ranges();
        let end = addr + len;
        let i = ranges.partition_point(|&(_, e)| e <= addr);
        match ranges.get(i) {
            Some(&(s, e)) if s <= addr => (end <= e).then_some(&t.uffd),
            Some(&(s, _)) => (end <= s).then_some(&self.uffd),
            None => Some(&self.uffd),
        }
    }

    fn write_protect(&self, addr: usize, len: usize, protect: bool) -> Result<(), SysError> {
        self.for_parts(addr, len, |uffd, a, l, _| uffd.write_protect(a, l, protect))
    }
}

impl FaultBackend for UffdBackend {
    fn name(&self) -> &'static str {
        "uffd"
    }

    fn poll_fd(&self) -> RawFd {
        match &self.scan {
            Some(t) => t.poller.raw(),
            None => self.uffd.raw(),
        }
    }

    fn take_faults(&self, out: &mut Vec<Fault>) -> Result<(), SysError> {
        let mut evs: Vec<UffdFault> = Vec::new();
        self.uffd.read_events(&mut evs)?;
        if let Some(t) = &self.scan {
            t.uffd.read_events(&mut evs)?;
        }
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
                    self.write_protect(addr, len, true)?;
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
                    self.write_protect(addr, len, false)?;
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
        if self.all_scanned(addr, len) {
            // Writes here never wait for the engine, so neither do its own: the runs go in
            // place, beside what local threads write to other bytes of the page meanwhile
            // (rebuilding the page aside, as below, could drop such a write). The page then
            // reads as written to the next scan: one more notice, never one fewer.
            for (off, bytes) in runs {
                self.window.write_present(addr + off, bytes)?;
            }
            return Ok(true);
        }
        // The engine thread must not write through the write-protected mapping (it would
        // fault to itself), and local writers must not slip in between reading and replacing
        // the page: write-protect it, build the patched page aside, then replace it
        // atomically. Threads that fault meanwhile wait for the engine and retry.
        if access == Access::Write {
            self.write_protect(addr, len, true)?;
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
        self.window.discard(addr, len)?;
        // A scanned range goes back to the first userfaultfd: a region later allocated there
        // may need synchronous write faults.
        if let Some(t) = &self.scan {
            let mut ranges = t.ranges.write().unwrap_or_else(|p| p.into_inner());
            let end = addr + len;
            let dropped: Vec<(usize, usize)> = ranges
                .iter()
                .copied()
                .filter(|&(s, e)| s >= addr && e <= end)
                .collect();
            for &(s, e) in &dropped {
                t.uffd.unregister(s, e - s)?;
                self.uffd.register(s, e - s)?;
            }
            ranges.retain(|r| !dropped.contains(r));
        }
        Ok(())
    }

    fn scan_writes(&self, addr: usize, len: usize) -> Result<bool, SysError> {
        let Some(t) = &self.scan else {
            return Ok(false);
        };
        let mut ranges = t.ranges.write().unwrap_or_else(|p| p.into_inner());
        let end = addr + len;
        if ranges.iter().any(|&(s, e)| s < end && addr < e) {
            return Ok(false);
        }
        // Pages present here now would lose their write protection with the registration:
        // the range is dropped first, so every page starts missing under the new one.
        self.window.discard(addr, len)?;
        self.uffd.unregister(addr, len)?;
        if let Err(e) = t.uffd.register(addr, len) {
            self.uffd.register(addr, len)?;
            return Err(e);
        }
        let i = ranges.partition_point(|&(s, _)| s < addr);
        ranges.insert(i, (addr, end));
        Ok(true)
    }

    fn writes_scanned(&self, addr: usize) -> bool {
        self.scan
            .as_ref()
            .is_some_and(|t| t.range_at(addr).is_some())
    }

    fn take_written(&self, asked: &[(usize, usize)], out: &mut Vec<usize>) -> Result<(), SysError> {
        let Some(t) = &self.scan else {
            return Ok(());
        };
        let mut scanned: Vec<(usize, usize)> = Vec::new();
        for &(a, l) in asked {
            self.for_parts(a, l, |_, s, n, yes| {
                if yes {
                    scanned.push((s, s + n));
                }
                Ok(())
            })?;
        }
        let mut runs = Vec::new();
        let mut failed = None;
        for (s, e) in scanned {
            let before = runs.len();
            if let Err(err) = t.pagemap.take_written(s, e, &mut runs) {
                // Every page of the range counts as written, protected again by hand: a
                // write is never left unreported.
                runs.truncate(before);
                runs.push((s, e));
                t.uffd.write_protect(s, e - s, true)?;
                failed = Some(err);
            }
        }
        for (s, e) in runs {
            out.extend((s..e).step_by(self.page_size));
        }
        match failed {
            Some(err) => Err(err),
            None => Ok(()),
        }
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
        self.for_parts(addr, len, |uffd, a, l, _| uffd.wake(a, l))
    }

    fn shutdown(&self) {
        if let Some(t) = &self.scan {
            for &(s, e) in t.ranges().iter() {
                let _ = t.uffd.write_protect(s, e - s, false);
                let _ = t.uffd.unregister(s, e - s);
            }
        }
        for (base, size) in self.window.ranges() {
            // Clear write protection first so present pages are writable as plain memory.
            // (A scanned range is no longer registered here: these calls skip nothing else.)
            let _ = self.for_parts(base, size, |uffd, a, l, scanned| {
                if !scanned {
                    let _ = uffd.write_protect(a, l, false);
                    let _ = uffd.unregister(a, l);
                }
                Ok(())
            });
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
            let zeros = &self.zero[..self.page_size];
            self.for_parts(addr, len, |uffd, a, l, _| {
                if !uffd.zeropage(a, l)? {
                    // Some page was present already: page by page, skipping those. A page
                    // whose table entry holds only a write-protect marker also refuses the
                    // zero page (EEXIST), but takes a copy of zeros.
                    for off in (0..l).step_by(self.page_size) {
                        if !uffd.zeropage(a + off, self.page_size)? {
                            uffd.copy(a + off, zeros, read_only)?;
                        }
                    }
                }
                Ok(())
            })?;
            if read_only {
                self.write_protect(addr, len, true)?;
            }
            return Ok(());
        }
        let src = data.unwrap_or(&self.zero[..len.min(self.page_size)]);
        // One call for the whole range; if some page is present already (a racing install),
        // the copy stopped there: page by page, making the protection of present pages right.
        if src.len() == len {
            if let Some(uffd) = self.single_uffd(addr, len) {
                if uffd.copy(addr, src, read_only)? {
                    return Ok(());
                }
            }
        }
        for off in (0..len).step_by(self.page_size) {
            let chunk = &src[off.min(src.len())..(off + self.page_size).min(src.len())];
            let uffd = self.uffd_at(addr + off);
            if !uffd.copy(addr + off, chunk, read_only)? {
                uffd.write_protect(addr + off, chunk.len(), read_only)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::Backing;

    /// Far from the windows of the other tests of this process.
    const BASE: usize = 0x5e00_0000_0000;
    const PAGES: usize = 64;

    /// Linux 6.7 and later have `UFFD_FEATURE_WP_ASYNC` and `PAGEMAP_SCAN`.
    fn kernel_scans() -> bool {
        let release = nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut nums = release
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse::<u32>().ok());
        let (major, minor) = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
        (major, minor) >= (6, 7)
    }

    /// A backend over a window of its own with scanning, or None (and why) where this host
    /// cannot: no userfaultfd, or a kernel before 6.7 — where the backend must then say it
    /// cannot scan.
    fn scanning_backend(base: usize) -> Option<UffdBackend> {
        if !crate::sys::uffd::available() {
            eprintln!("SKIPPED: no userfaultfd here");
            return None;
        }
        let ps = crate::sys::os_page_size();
        let w = Window::map(base, PAGES * ps, Backing::Anonymous).expect("window");
        let b = UffdBackend::new(w, ps, true).expect("backend");
        if !kernel_scans() {
            assert!(b.scan.is_none(), "scanning set up on a kernel before 6.7");
            eprintln!("SKIPPED: a kernel before Linux 6.7");
            return None;
        }
        assert!(b.scan.is_some(), "Linux 6.7+ and no write scanning");
        Some(b)
    }

    /// Whether the page at `addr` is present (`/proc/self/pagemap`, bit 63), without touching
    /// it: a missing page of a registered range would wait for an event nobody reads.
    fn present(addr: usize) -> bool {
        use std::io::{Read, Seek, SeekFrom};
        let ps = crate::sys::os_page_size();
        let mut f = std::fs::File::open("/proc/self/pagemap").expect("pagemap");
        f.seek(SeekFrom::Start((addr / ps * 8) as u64))
            .expect("seek");
        let mut e = [0u8; 8];
        f.read_exact(&mut e).expect("entry");
        u64::from_le_bytes(e) >> 63 == 1
    }

    fn write_byte(addr: usize, v: u8) {
        // SAFETY: the test's own window page, made writable (or write-protected by the
        // asynchronous userfaultfd, whose faults the kernel resolves) just before.
        unsafe { std::ptr::write_volatile(addr as *mut u8, v) };
    }

    /// In a scanned range a write to a read-only page raises no fault and the next scan of
    /// that page reports it once; a page not asked about stays writable; the range goes back
    /// to write faults when it is dropped; and a diff patched in place leaves the page's other
    /// bytes as the application wrote them.
    #[test]
    fn a_scanned_range_reports_each_write_once_and_goes_back_to_faults_when_dropped() {
        let Some(b) = scanning_backend(BASE) else {
            return;
        };
        let ps = crate::sys::os_page_size();
        let range = (BASE + 16 * ps, 16 * ps);
        assert!(b.scan_writes(range.0, range.1).expect("scan set up"));
        assert!(
            !b.scan_writes(range.0, ps).expect("overlap refused"),
            "an overlapping range is refused"
        );
        let (p, q) = (range.0, range.0 + ps);
        assert!(b.writes_scanned(p) && !b.writes_scanned(BASE));
        for page in [p, q] {
            b.set_access(page, ps, Access::None, Access::Write, false, None)
                .expect("materialised writable");
            b.set_access(page, ps, Access::Write, Access::Read, true, None)
                .expect("made read-only");
        }
        // Written while read-only: no event to serve, the write is simply done.
        write_byte(p + 8, 7);
        let mut found = Vec::new();
        b.take_written(&[(p, ps)], &mut found).expect("scan");
        assert_eq!(found, vec![p]);
        found.clear();
        b.take_written(&[(p, ps)], &mut found).expect("scan");
        assert!(found.is_empty(), "reported twice: {found:?}");
        write_byte(p + 9, 8);
        b.take_written(&[(p, 2 * ps)], &mut found).expect("scan");
        assert_eq!(found, vec![p], "q was not written");
        // A diff applied in place: the runs land, the rest of the page is the application's.
        write_byte(p + 100, 9);
        b.patch(p, ps, Access::Read, true, &[(0, &[1, 2, 3])])
            .expect("patch");
        let mut page = vec![0u8; ps];
        b.read(p, &mut page, true, None).expect("read");
        assert_eq!(&page[..3], &[1, 2, 3]);
        assert_eq!((page[8], page[9], page[100]), (7, 8, 9));
        // A page never materialised (a home serving zeros it does not hold) is not reported,
        // and the scan leaves its table entry alone: a run of zero pages made readable
        // afterwards maps every page of it.
        let hole = range.0 + 4 * ps;
        found.clear();
        b.take_written(&[(hole, 2 * ps)], &mut found).expect("scan");
        assert!(found.is_empty(), "holes reported written: {found:?}");
        b.set_access(hole, 4 * ps, Access::None, Access::Read, false, None)
            .expect("zero run");
        for i in 0..4 {
            assert!(
                present(hole + i * ps),
                "page {i} of the zero run not mapped"
            );
        }
        // Dropped (a destroyed region): write faults again, through the first userfaultfd.
        b.drop_range(range.0, range.1).expect("drop");
        assert!(!b.writes_scanned(p));
        found.clear();
        b.take_written(&[(p, ps)], &mut found).expect("scan");
        assert!(found.is_empty(), "a dropped range is not scanned");
        b.shutdown();
    }
}
