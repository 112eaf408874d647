//! The only place in svm-core with raw `mmap`/`mprotect`/`madvise`/`ioctl`/signal code.
//!
//! Everything here exposes safe functions whose preconditions are checked (ranges inside the
//! window, page alignment) so the rest of the runtime is free of `unsafe`.

pub mod cabi;
pub mod futex;
mod poll;
mod process;
pub mod sched;
pub mod segv;
pub mod uffd;
mod window;

pub use poll::{current_thread_id, signal_eventfd, EventFd, Poller};
pub use process::{
    c_fn_at, close_inherited, exit_now, exit_process, flush_stdio, fn_addr, fn_from_addr,
    inherited_listener, on_process_exit,
};
pub use window::{forced_access_works, Backing, Window};

/// Errors from the system layer, with the call that failed.
#[derive(Debug, thiserror::Error)]
pub enum SysError {
    #[error(
        "the shared window {base:#x}..{end:#x} is already (partly) mapped in this process; choose a \
         free range with SVM_SPACE_BASE (and SVM_SPACE_SIZE)"
    )]
    WindowTaken { base: usize, end: usize },
    #[error("{call} failed: {errno}{}", errno_hint(*errno))]
    Call {
        call: &'static str,
        errno: nix::errno::Errno,
    },
    #[error(
        "mprotect ran out of memory mappings (vm.max_map_count = {max_map_count}): the segv backend \
         splits a mapping per page; raise the sysctl vm.max_map_count or use SVM_FAULT=uffd"
    )]
    MapCountExhausted { max_map_count: String },
}

/// What an errno usually means for the runtime's calls, and what to do about it.
fn errno_hint(errno: nix::errno::Errno) -> &'static str {
    use nix::errno::Errno;
    match errno {
        Errno::ENOMEM => {
            " (out of memory or address space: check `ulimit -v`, or choose a smaller \
             SVM_SPACE_SIZE)"
        }
        Errno::EPERM | Errno::EACCES => {
            " (not permitted: for userfaultfd see vm.unprivileged_userfaultfd, or use \
             SVM_FAULT=segv)"
        }
        Errno::EAGAIN => " (the resource was busy or the wait timed out; try again)",
        Errno::EMFILE | Errno::ENFILE => " (too many open files: raise `ulimit -n`)",
        Errno::EINVAL => " (an argument the kernel does not accept on this machine)",
        Errno::ENOSYS => " (the kernel does not support this call)",
        _ => "",
    }
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

/// Checks an application access to `len` elements of type `T` at window address `addr`: the
/// whole range inside `window` (start, bytes) and `addr` aligned for `T`. Panics otherwise —
/// the shared accessors below dereference the range on the strength of this check.
fn check_app_range<T>(window: (usize, usize), addr: usize, len: usize) {
    let bytes = len
        .checked_mul(std::mem::size_of::<T>())
        .expect("shared range length overflows");
    assert!(
        addr >= window.0 && addr.saturating_add(bytes) <= window.0 + window.1,
        "range {addr:#x}+{bytes} outside the shared window"
    );
    assert!(
        addr.is_multiple_of(std::mem::align_of::<T>()),
        "misaligned shared access at {addr:#x}"
    );
}

/// Volatile load of a `T` at window address `addr` by the application (may fault; the fault is
/// served by the runtime). Panics if the range is outside the shared window or misaligned.
pub(crate) fn app_load<T: Copy>(window: (usize, usize), addr: usize) -> T {
    check_app_range::<T>(window, addr, 1);
    // SAFETY: the address is inside the shared window and aligned (checked), and the window
    // stays mapped for the life of the process (the runtime that owns it is a static that is
    // never dropped); the page-fault path makes it accessible.
    unsafe { std::ptr::read_volatile(addr as *const T) }
}

/// Volatile store of a `T` at window address `addr` by the application.
pub(crate) fn app_store<T: Copy>(window: (usize, usize), addr: usize, v: T) {
    check_app_range::<T>(window, addr, 1);
    // SAFETY: as in app_load.
    unsafe { std::ptr::write_volatile(addr as *mut T, v) }
}

/// The `len` elements of type `T` at window address `addr` as cells the application reads and
/// writes in place (may fault; the fault is served by the runtime). Panics if the range is
/// outside the shared window or misaligned.
pub(crate) fn app_cells<'a, T: bytemuck::Pod>(
    window: (usize, usize),
    addr: usize,
    len: usize,
) -> &'a [std::cell::Cell<T>] {
    check_app_range::<T>(window, addr, len);
    // SAFETY: as in app_load, for the whole range; any bit pattern is a valid `T` (`Pod`).
    // `Cell` allows mutation through shared references on this thread and is not `Sync`, so
    // the reference cannot cross threads; threads or nodes writing the same elements without
    // synchronisation race exactly as with `app_copy_in`.
    unsafe { std::slice::from_raw_parts(addr as *const std::cell::Cell<T>, len) }
}

/// Bulk copy out of the shared window (application access; may fault).
pub(crate) fn app_copy_out<T: Copy>(window: (usize, usize), addr: usize, dst: &mut [T]) {
    check_app_range::<T>(window, addr, dst.len());
    // SAFETY: the source range is inside the mapped window and aligned (checked), and does not
    // overlap the private destination slice.
    unsafe { std::ptr::copy_nonoverlapping(addr as *const T, dst.as_mut_ptr(), dst.len()) }
}

/// Bulk copy into the shared window (application access; may fault).
pub(crate) fn app_copy_in<T: Copy>(window: (usize, usize), addr: usize, src: &[T]) {
    check_app_range::<T>(window, addr, src.len());
    // SAFETY: as in app_copy_out, in the other direction.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), addr as *mut T, src.len()) }
}

#[cfg(test)]
mod errno_tests {
    #[test]
    fn errno_values_are_explained() {
        let e = super::SysError::Call {
            call: "mmap",
            errno: nix::errno::Errno::ENOMEM,
        }
        .to_string();
        assert!(e.contains("SVM_SPACE_SIZE"), "{e}");
        let e = super::SysError::Call {
            call: "userfaultfd",
            errno: nix::errno::Errno::EPERM,
        }
        .to_string();
        assert!(e.contains("SVM_FAULT=segv"), "{e}");
    }
}
