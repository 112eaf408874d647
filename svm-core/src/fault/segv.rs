//! SIGSEGV backend: per-page `mprotect` on the window; the runtime reads and installs contents
//! without going through the application's protection — through `/proc/self/mem` on private
//! anonymous memory where the kernel allows forced access (first touch then costs what an
//! anonymous page costs), else through an always-writable alias of a memfd — so installing data
//! never races with the application and never needs a RW→fill→RO sequence.

use std::os::fd::RawFd;

use super::{Fault, FaultBackend, SequentialFill, WaiterRef};
use crate::sys::segv as sig;
use crate::sys::{EventFd, SysError, Window};
use crate::Access;

pub struct SegvBackend {
    window: Window,
    event: EventFd,
    page_size: usize,
    fill: SequentialFill,
}

impl SegvBackend {
    pub fn new(window: Window, page_size: usize) -> Result<SegvBackend, SysError> {
        let event = EventFd::new()?;
        sig::install(&window.ranges(), event.raw())?;
        Ok(SegvBackend {
            window,
            event,
            page_size,
            fill: SequentialFill::default(),
        })
    }
}

impl FaultBackend for SegvBackend {
    fn name(&self) -> &'static str {
        "segv"
    }

    fn poll_fd(&self) -> RawFd {
        self.event.raw()
    }

    fn take_faults(&self, out: &mut Vec<Fault>) -> Result<(), SysError> {
        self.event.drain();
        let mask = !(self.page_size - 1);
        sig::take_posted(|slot, addr, write, since_ns, tid| {
            out.push(Fault {
                addr: addr & mask,
                write,
                waiter: WaiterRef::Slot(slot),
                since_ns,
                tid,
            });
        });
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
        // The window already holds every page's contents (zeros, or a static segment's data).
        if old != new {
            self.window.protect(addr, len, new)?;
        }
        if self.window.is_forced()
            && new == Access::Write
            && !present
            && initial.is_none()
            && len > self.page_size
            && self.fill.continues(addr, len, self.page_size)
        {
            // A sequential first-touch fill of anonymous memory: real zeroed pages now, one
            // call for the run instead of a kernel fault per page when each is first written.
            self.window.populate_write(addr, len)?;
        }
        Ok(true)
    }

    fn install(
        &self,
        addr: usize,
        data: &[u8],
        access: Access,
        _present: bool,
    ) -> Result<bool, SysError> {
        self.window.write_forced(addr, data)?;
        self.window.protect(addr, data.len(), access)?;
        Ok(true)
    }

    fn drop_range(&self, addr: usize, len: usize) -> Result<(), SysError> {
        self.window.protect(addr, len, Access::None)?;
        self.window.punch_hole(addr, len)
    }

    fn patch(
        &self,
        addr: usize,
        _len: usize,
        _access: Access,
        _present: bool,
        runs: &[(usize, &[u8])],
    ) -> Result<bool, SysError> {
        // Forced writes (alias or /proc/self/mem) ignore the application's protection.
        for (off, bytes) in runs {
            self.window.write_forced(addr + off, bytes)?;
        }
        Ok(true)
    }

    fn read(
        &self,
        addr: usize,
        dst: &mut [u8],
        _present: bool,
        _initial: Option<&[u8]>,
    ) -> Result<(), SysError> {
        self.window.read(addr, dst)
    }

    fn wake(&self, _addr: usize, _len: usize, waiter: WaiterRef) -> Result<(), SysError> {
        if let WaiterRef::Slot(s) = waiter {
            sig::complete(s);
        }
        Ok(())
    }

    fn shutdown(&self) {
        for (base, size) in self.window.ranges() {
            let _ = self.window.protect(base, size, Access::Write);
        }
        sig::deactivate();
    }
}
