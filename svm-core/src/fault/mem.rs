//! An in-memory fault backend: page contents and protections kept in a table instead of the
//! process's address space, and accesses made through [`MemBackend::load`] /
//! [`MemBackend::store`] instead of by touching memory. A node built on it runs the real engine
//! — the same fault service, protocols, messages and synchronisation — without a window, page
//! faults or signals, so the engines of several nodes can run in one test process.
//!
//! An access the page's protection does not allow becomes a [`Fault`] the engine reads like a
//! SIGSEGV slot fault; the accessing thread sleeps until the engine raises the page (or wakes
//! its slot) and then retries, as a thread returning from a fault handler does.

use std::collections::{HashMap, VecDeque};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{Fault, FaultBackend, WaiterRef};
use crate::sys::{EventFd, SysError};
use crate::Access;

/// One page of the table.
#[derive(Debug, Clone)]
struct MemPage {
    access: Access,
    /// Local contents; None while the page is not present.
    data: Option<Vec<u8>>,
}

#[derive(Debug, Default)]
struct Table {
    pages: HashMap<usize, MemPage>,
    faults: VecDeque<Fault>,
    /// Slots the engine woke and their accessing threads have not seen yet.
    woken: Vec<usize>,
    next_slot: usize,
    shut: bool,
}

struct Shared {
    page_size: usize,
    /// Revoking all access drops the contents (as the userfaultfd backend does); otherwise
    /// they stay (as with SIGSEGV and mprotect).
    drop_on_revoke: bool,
    table: Mutex<Table>,
    /// Signalled on every protection change, install and wake-up.
    changed: Condvar,
    /// Readable while faults wait for the engine.
    ready: EventFd,
    /// The time faults are stamped with (`Fault::since_ns`) when a driver gives the time
    /// ([`MemBackend::set_time`]); 0: the monotonic clock's.
    time: AtomicU64,
}

/// The in-memory backend. Clones share one table: the node owns one (as its `FaultBackend`),
/// the test keeps another to make accesses.
#[derive(Clone)]
pub struct MemBackend {
    shared: Arc<Shared>,
}

/// A fault an access queued ([`MemBackend::try_load`], [`MemBackend::try_store`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultTicket {
    slot: usize,
    /// The page's base address.
    base: usize,
    need: Access,
}

/// The outcome of an access that does not wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt<T> {
    Done(T),
    /// The protection forbade it: a fault is queued for the engine; retry once it is served.
    Faulted(FaultTicket),
}

/// Why an access through [`MemBackend::load`] / [`MemBackend::store`] did not happen.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MemAccessError {
    #[error("address {addr:#x}+{len} is not inside one page of {page_size} bytes")]
    SpansPages {
        addr: usize,
        len: usize,
        page_size: usize,
    },
    #[error("the access to {addr:#x} was not served within {after:?}")]
    NotServed { addr: usize, after: Duration },
}

impl MemBackend {
    /// A backend that keeps a page's contents when its access is revoked (like the segv
    /// backend).
    pub fn new(page_size: usize) -> Result<MemBackend, SysError> {
        Self::build(page_size, false)
    }

    /// A backend that drops a page's contents when its access is revoked (like the
    /// userfaultfd backend's `MADV_DONTNEED`).
    pub fn dropping(page_size: usize) -> Result<MemBackend, SysError> {
        Self::build(page_size, true)
    }

    fn build(page_size: usize, drop_on_revoke: bool) -> Result<MemBackend, SysError> {
        Ok(MemBackend {
            shared: Arc::new(Shared {
                page_size,
                drop_on_revoke,
                table: Mutex::new(Table::default()),
                changed: Condvar::new(),
                ready: EventFd::new()?,
                time: AtomicU64::new(0),
            }),
        })
    }

    /// Stamps the faults queued from now on with `now` (ns, the time a driver gives the
    /// engine: `Node::start_driven`) instead of the monotonic clock's time.
    pub fn set_time(&self, now: u64) {
        self.shared.time.store(now, Ordering::Relaxed);
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.shared.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn page_base(&self, addr: usize) -> usize {
        addr / self.shared.page_size * self.shared.page_size
    }

    /// Reads `len` bytes at `addr` (within one page), faulting like an application load, and
    /// waiting up to `timeout` for the engine to serve the faults.
    pub fn load(
        &self,
        addr: usize,
        len: usize,
        timeout: Duration,
    ) -> Result<Vec<u8>, MemAccessError> {
        let mut out = Vec::new();
        self.access(addr, len, false, timeout, &mut |bytes| {
            out.extend_from_slice(bytes)
        })?;
        Ok(out)
    }

    /// Writes `bytes` at `addr` (within one page), faulting like an application store.
    pub fn store(
        &self,
        addr: usize,
        bytes: &[u8],
        timeout: Duration,
    ) -> Result<(), MemAccessError> {
        self.access(addr, bytes.len(), true, timeout, &mut |dst| {
            dst.copy_from_slice(bytes)
        })
    }

    /// [`MemBackend::load`] without waiting: the bytes, or the fault the access queued.
    pub fn try_load(&self, addr: usize, len: usize) -> Result<Attempt<Vec<u8>>, MemAccessError> {
        let mut out = Vec::new();
        Ok(
            match self.attempt(addr, len, false, &mut |b| out.extend_from_slice(b))? {
                None => Attempt::Done(out),
                Some(t) => Attempt::Faulted(t),
            },
        )
    }

    /// [`MemBackend::store`] without waiting.
    pub fn try_store(&self, addr: usize, bytes: &[u8]) -> Result<Attempt<()>, MemAccessError> {
        Ok(
            match self.attempt(addr, bytes.len(), true, &mut |d| d.copy_from_slice(bytes))? {
                None => Attempt::Done(()),
                Some(t) => Attempt::Faulted(t),
            },
        )
    }

    /// Whether the engine has served the fault `t` (woke its thread or raised its page): the
    /// access may be retried. Call [`MemBackend::retire`] before retrying.
    pub fn is_served(&self, t: &FaultTicket) -> bool {
        let tb = self.table();
        tb.woken.contains(&t.slot) || Self::raised(&tb, t)
    }

    /// Forgets fault `t`'s wake-up (its access is being retried).
    pub fn retire(&self, t: &FaultTicket) {
        self.table().woken.retain(|s| *s != t.slot);
    }

    /// The local contents of the page holding `addr` (None: not present).
    pub fn contents(&self, addr: usize) -> Option<Vec<u8>> {
        let base = self.page_base(addr);
        self.table().pages.get(&base).and_then(|p| p.data.clone())
    }

    /// Whether faults wait for the engine.
    pub fn has_faults(&self) -> bool {
        !self.table().faults.is_empty()
    }

    /// The protection the engine gave the page holding `addr`.
    pub fn access_of(&self, addr: usize) -> Access {
        let base = self.page_base(addr);
        self.table()
            .pages
            .get(&base)
            .map(|p| p.access)
            .unwrap_or(Access::None)
    }

    /// Whether `ticket`'s fault is served; consumes its wake-up.
    fn served(t: &mut Table, ticket: &FaultTicket) -> bool {
        if let Some(i) = t.woken.iter().position(|s| *s == ticket.slot) {
            t.woken.swap_remove(i);
            return true;
        }
        Self::raised(t, ticket)
    }

    /// Whether `ticket`'s page now allows its access.
    fn raised(t: &Table, ticket: &FaultTicket) -> bool {
        t.shut
            || t.pages
                .get(&ticket.base)
                .is_some_and(|p| p.access >= ticket.need)
    }

    fn access(
        &self,
        addr: usize,
        len: usize,
        write: bool,
        timeout: Duration,
        op: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), MemAccessError> {
        let deadline = Instant::now() + timeout;
        loop {
            let Some(ticket) = self.attempt(addr, len, write, op)? else {
                return Ok(());
            };
            // The thread sleeps until its fault is served, then retries (it may fault again
            // if it lost a race for the page).
            let mut t = self.table();
            while !Self::served(&mut t, &ticket) {
                let now = Instant::now();
                if now >= deadline {
                    return Err(MemAccessError::NotServed {
                        addr,
                        after: timeout,
                    });
                }
                t = self
                    .shared
                    .changed
                    .wait_timeout(t, deadline - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            t.woken.retain(|s| *s != ticket.slot);
        }
    }

    /// Makes the access if the page's protection allows it (None), else queues its fault for
    /// the engine and returns the ticket to wait on.
    fn attempt(
        &self,
        addr: usize,
        len: usize,
        write: bool,
        op: &mut dyn FnMut(&mut [u8]),
    ) -> Result<Option<FaultTicket>, MemAccessError> {
        let ps = self.shared.page_size;
        let base = self.page_base(addr);
        if len == 0 || addr + len > base + ps {
            return Err(MemAccessError::SpansPages {
                addr,
                len,
                page_size: ps,
            });
        }
        let need = if write { Access::Write } else { Access::Read };
        let mut t = self.table();
        if t.shut || t.pages.get(&base).is_some_and(|p| p.access >= need) {
            let page = t.pages.entry(base).or_insert(MemPage {
                access: Access::Write,
                data: None,
            });
            let data = page.data.get_or_insert_with(|| vec![0; ps]);
            op(&mut data[addr - base..addr - base + len]);
            return Ok(None);
        }
        let slot = t.next_slot;
        t.next_slot += 1;
        t.faults.push_back(Fault {
            addr,
            write,
            waiter: WaiterRef::Slot(slot),
            since_ns: match self.shared.time.load(Ordering::Relaxed) {
                0 => crate::sys::segv::now_ns(),
                driven => driven,
            },
            tid: 0,
        });
        drop(t);
        self.shared.ready.signal();
        Ok(Some(FaultTicket { slot, base, need }))
    }

    fn pages_of(&self, addr: usize, len: usize) -> impl Iterator<Item = usize> {
        let ps = self.shared.page_size;
        (0..len.div_ceil(ps)).map(move |i| addr + i * ps)
    }
}

impl FaultBackend for MemBackend {
    fn name(&self) -> &'static str {
        "mem"
    }

    fn poll_fd(&self) -> RawFd {
        self.shared.ready.raw()
    }

    fn take_faults(&self, out: &mut Vec<Fault>) -> Result<(), SysError> {
        self.shared.ready.drain();
        out.extend(self.table().faults.drain(..));
        Ok(())
    }

    fn set_access(
        &self,
        addr: usize,
        len: usize,
        _old: Access,
        new: Access,
        present: bool,
        initial: Option<&[u8]>,
    ) -> Result<bool, SysError> {
        let ps = self.shared.page_size;
        let mut t = self.table();
        let mut now_present = present;
        for base in self.pages_of(addr, len) {
            let page = t.pages.entry(base).or_insert(MemPage {
                access: Access::None,
                data: None,
            });
            page.access = new;
            if !present || (new == Access::None && self.shared.drop_on_revoke) {
                page.data = None;
            }
            if new != Access::None && page.data.is_none() {
                // Materialised from the take-over contents, or as zeros.
                let mut data = vec![0; ps];
                if let Some(init) = initial {
                    data[..init.len().min(ps)].copy_from_slice(&init[..init.len().min(ps)]);
                }
                page.data = Some(data);
            }
            now_present = page.data.is_some();
        }
        drop(t);
        self.shared.changed.notify_all();
        Ok(now_present)
    }

    fn install(
        &self,
        addr: usize,
        data: &[u8],
        access: Access,
        _present: bool,
    ) -> Result<bool, SysError> {
        let base = self.page_base(addr);
        self.table().pages.insert(
            base,
            MemPage {
                access,
                data: Some(data.to_vec()),
            },
        );
        self.shared.changed.notify_all();
        Ok(true)
    }

    fn read(
        &self,
        addr: usize,
        dst: &mut [u8],
        present: bool,
        initial: Option<&[u8]>,
    ) -> Result<(), SysError> {
        let base = self.page_base(addr);
        let t = self.table();
        match t.pages.get(&base).and_then(|p| p.data.as_ref()) {
            Some(data) if present => dst.copy_from_slice(&data[..dst.len()]),
            _ => {
                dst.fill(0);
                if let Some(init) = initial {
                    let n = init.len().min(dst.len());
                    dst[..n].copy_from_slice(&init[..n]);
                }
            }
        }
        Ok(())
    }

    fn patch(
        &self,
        addr: usize,
        _len: usize,
        _access: Access,
        present: bool,
        runs: &[(usize, &[u8])],
    ) -> Result<bool, SysError> {
        if !present {
            return Ok(false);
        }
        let base = self.page_base(addr);
        let mut t = self.table();
        let Some(data) = t.pages.get_mut(&base).and_then(|p| p.data.as_mut()) else {
            return Ok(false);
        };
        for (off, bytes) in runs {
            data[*off..*off + bytes.len()].copy_from_slice(bytes);
        }
        Ok(true)
    }

    fn drop_range(&self, addr: usize, len: usize) -> Result<(), SysError> {
        let mut t = self.table();
        for base in self.pages_of(addr, len) {
            t.pages.remove(&base);
        }
        Ok(())
    }

    fn wake(&self, _addr: usize, _len: usize, waiter: WaiterRef) -> Result<(), SysError> {
        if let WaiterRef::Slot(slot) = waiter {
            self.table().woken.push(slot);
            self.shared.changed.notify_all();
        }
        Ok(())
    }

    fn shutdown(&self) {
        self.table().shut = true;
        self.shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: usize = 4096;
    const SOON: Duration = Duration::from_millis(50);

    #[test]
    fn an_access_the_protection_forbids_becomes_a_fault_and_waits() {
        let m = MemBackend::new(P).expect("backend");
        let err = m
            .load(0x10000, 8, SOON)
            .expect_err("nobody serves the fault");
        assert_eq!(
            err,
            MemAccessError::NotServed {
                addr: 0x10000,
                after: SOON
            }
        );
        let mut faults = Vec::new();
        m.take_faults(&mut faults).expect("take");
        assert_eq!(faults.len(), 1);
        assert_eq!((faults[0].addr, faults[0].write), (0x10000, false));
    }

    #[test]
    fn a_raised_page_serves_the_waiting_access_with_its_contents() {
        let m = MemBackend::new(P).expect("backend");
        let engine = m.clone();
        let t = std::thread::spawn(move || {
            let mut faults = Vec::new();
            while faults.is_empty() {
                engine.take_faults(&mut faults).expect("take");
                std::thread::yield_now();
            }
            let mut page = vec![0u8; P];
            page[8..12].copy_from_slice(&[1, 2, 3, 4]);
            engine
                .install(faults[0].addr / P * P, &page, Access::Read, false)
                .expect("install");
        });
        let got = m.load(0x10008, 4, Duration::from_secs(10)).expect("served");
        t.join().expect("engine thread");
        assert_eq!(got, vec![1, 2, 3, 4]);
        assert_eq!(m.access_of(0x10000), Access::Read);
        assert!(
            m.store(0x10008, &[9], SOON).is_err(),
            "read-only: a store faults"
        );
    }

    #[test]
    fn a_dropping_backend_forgets_contents_when_access_is_revoked() {
        for (m, kept) in [
            (MemBackend::new(P).expect("backend"), true),
            (MemBackend::dropping(P).expect("backend"), false),
        ] {
            assert!(m
                .set_access(0, P, Access::None, Access::Write, false, None)
                .expect("raise"));
            m.store(8, &[5], SOON).expect("store");
            let present = m
                .set_access(0, P, Access::Write, Access::None, true, None)
                .expect("revoke");
            assert_eq!(present, kept);
            let mut page = vec![0u8; P];
            m.read(0, &mut page, present, None).expect("in-memory read");
            assert_eq!(page[8], if kept { 5 } else { 0 });
        }
    }

    #[test]
    fn patches_apply_only_to_present_pages_and_drop_forgets() {
        let m = MemBackend::new(P).expect("backend");
        assert!(!m
            .patch(0, P, Access::None, false, &[(0, &[7])])
            .expect("patch"));
        assert!(m
            .set_access(0, P, Access::None, Access::Write, false, None)
            .expect("raise"));
        assert!(m
            .patch(0, P, Access::Write, true, &[(3, &[7, 7])])
            .expect("patch"));
        assert_eq!(m.load(2, 3, SOON).expect("load"), vec![0, 7, 7]);
        m.drop_range(0, P).expect("drop");
        assert_eq!(m.access_of(0), Access::None);
        let mut dst = vec![1u8; 4];
        m.read(0, &mut dst, false, None).expect("in-memory read");
        assert_eq!(dst, vec![0; 4], "a page without contents reads as zeros");
    }
}
