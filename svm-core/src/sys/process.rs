//! The process: descriptors inherited from the launcher, exiting, exit hooks, and C function
//! addresses shipped between nodes running the same executable.

/// Takes ownership of a listening socket inherited from the launcher (`SVM_COORD_FD`).
pub fn inherited_listener(fd: i32) -> std::io::Result<std::net::TcpListener> {
    let st = nix::sys::stat::fstat(fd).map_err(std::io::Error::from)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(std::io::Error::other(format!(
            "descriptor {fd} is not a socket"
        )));
    }
    let _ = nix::fcntl::fcntl(
        fd,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    );
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

/// Flushes every C stdio stream of the process (`fflush(NULL)`).
pub fn flush_stdio() {
    // SAFETY: fflush(NULL) flushes all open output streams; it takes no pointer we own.
    unsafe {
        libc::fflush(std::ptr::null_mut());
    }
}

/// Ends the process through C `exit(code)`: stdio is flushed and exit handlers run.
pub fn exit_process(code: i32) -> ! {
    // SAFETY: exit has no preconditions.
    unsafe { libc::exit(code) }
}

static EXIT_HOOK: std::sync::OnceLock<fn(i32)> = std::sync::OnceLock::new();

extern "C" fn exit_trampoline(status: libc::c_int, _arg: *mut libc::c_void) {
    if let Some(h) = EXIT_HOOK.get() {
        // A panic must not unwind into libc's exit path.
        let _ = std::panic::catch_unwind(|| h(status));
    }
}

extern "C" {
    /// glibc: registers a function called by `exit` with the exit status.
    fn on_exit(
        f: extern "C" fn(libc::c_int, *mut libc::c_void),
        arg: *mut libc::c_void,
    ) -> libc::c_int;
}

/// Calls `hook(status)` when the process calls `exit(status)` (or returns from `main`).
/// Registered once per process; later calls are ignored.
pub fn on_process_exit(hook: fn(i32)) {
    if EXIT_HOOK.set(hook).is_ok() {
        // SAFETY: registers a function with the C library; the argument pointer is unused.
        unsafe {
            on_exit(exit_trampoline, std::ptr::null_mut());
        }
    }
}

/// The address of a C function (to ship it to another node running the same executable).
pub fn fn_addr(f: extern "C" fn()) -> usize {
    f as usize
}

/// The C function at `addr`.
///
/// # Safety
/// `addr` is the address of an `extern "C" fn()` of this process: it came from [`fn_addr`] on a
/// node running the same executable at the same addresses (the personalities check this at
/// start, and svmrun turns address randomization off).
pub unsafe fn fn_from_addr(addr: usize) -> extern "C" fn() {
    // SAFETY: per the contract above, `addr` is the address of an `extern "C" fn()` (non-zero,
    // so the non-nullable fn pointer is valid).
    unsafe { std::mem::transmute::<usize, extern "C" fn()>(addr) }
}

/// Whether `addr` lies in an executable mapping of this process (`/proc/self/maps`).
fn in_executable_mapping(addr: usize) -> bool {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return false;
    };
    maps.lines().any(|l| {
        let mut w = l.split_whitespace();
        let (Some(range), Some(perms)) = (w.next(), w.next()) else {
            return false;
        };
        let Some((a, b)) = range.split_once('-') else {
            return false;
        };
        let parse = |x: &str| usize::from_str_radix(x, 16).ok();
        perms.as_bytes().get(2) == Some(&b'x')
            && matches!((parse(a), parse(b)), (Some(a), Some(b)) if a <= addr && addr < b)
    })
}

/// [`fn_from_addr`] for an address another node sent: checks what can be checked — non-zero and
/// inside this process's executable code — and otherwise relies on the personalities' start-up
/// check that every node runs the same executable at the same addresses. None if the check
/// fails.
///
/// # Safety
/// `addr` came from [`fn_addr`] of an `extern "C" fn()` on a node that runs this executable at
/// the same addresses (the personalities check the latter at start); being inside executable
/// code, which is checked here, does not make an address a function entry.
pub unsafe fn c_fn_at(addr: usize) -> Option<extern "C" fn()> {
    if addr == 0 || !in_executable_mapping(addr) {
        return None;
    }
    // SAFETY: `addr` is inside executable code of this process (checked) and, by this
    // function's contract, the address of that `extern "C" fn()` here.
    Some(unsafe { fn_from_addr(addr) })
}
