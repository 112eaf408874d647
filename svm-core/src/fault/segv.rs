//! SIGSEGV backend: per-page `mprotect` on a memfd mapping; the runtime reads and installs
//! contents through an always-writable alias of the same memfd, so installing data never races
//! with the application and never needs a RW→fill→RO sequence.

use std::os::fd::RawFd;

use super::{Fault, FaultBackend, WaiterRef};
use crate::sys::segv as sig;
use crate::sys::{EventFd, SysError, Window};
use crate::Access;

pub struct SegvBackend {
    window: Window,
    event: EventFd,
    page_size: usize,
}

impl SegvBackend {
    pub fn new(window: Window, page_size: usize) -> Result<SegvBackend, SysError> {
        let event = EventFd::new()?;
        sig::install(&window.ranges(), event.raw())?;
        Ok(SegvBackend {
            window,
            event,
            page_size,
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
        _present: bool,
        _initial: Option<&[u8]>,
    ) -> Result<bool, SysError> {
        // The memfd already holds every page's contents (zeros, or a static segment's data).
        if old != new {
            self.window.protect(addr, len, new)?;
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
        self.window.write_alias(addr, data);
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
        // The alias is always writable, whatever the application's protection.
        for (off, bytes) in runs {
            self.window.write_alias(addr + off, bytes);
        }
        Ok(true)
    }

    fn read(&self, addr: usize, dst: &mut [u8], _present: bool, _initial: Option<&[u8]>) {
        self.window.read(addr, dst);
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
