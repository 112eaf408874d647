//! The C ABI boundary: every read or write through a pointer a C program passed in.
//!
//! The obligation these rest on belongs to the C caller: `smi.h` documents that pointer
//! arguments are NULL or valid for the access, as C APIs do. NULL is always checked; anything
//! else is taken at the caller's word, which is why the helpers taking a pointer are `unsafe
//! fn`s: the exported `unsafe extern "C" fn`s that call them state, in each `unsafe` block,
//! which argument carries that contract. The dereferences themselves are svm-core's C boundary
//! ([`svm_core::sys::cabi`]); this module adapts it to the SMI runtime's conventions (addresses
//! as `usize`, the program's `argc`/`argv` by pointer).

use std::ffi::{c_char, c_void};

use svm_core::sys::cabi;

/// Writes `v` through a C out-parameter. False (nothing written) for NULL.
///
/// # Safety
/// `p` is NULL or valid for writing a `T`.
pub unsafe fn put<T>(p: *mut T, v: T) -> bool {
    // SAFETY: forwarded from this function's contract.
    unsafe { cabi::write_out(p, v) }
}

/// Reads a `T` through a C in-parameter. None for NULL.
///
/// # Safety
/// `p` is NULL or points to a readable `T`.
pub unsafe fn get<T: Copy>(p: *const T) -> Option<T> {
    // SAFETY: forwarded from this function's contract.
    unsafe { cabi::read_in(p) }
}

/// Copies `len` elements out of a C array. None for NULL with a non-zero length.
///
/// # Safety
/// `p` is NULL or points to `len` readable `T`s.
pub unsafe fn read_array<T: Copy>(p: *const T, len: usize) -> Option<Vec<T>> {
    // SAFETY: forwarded from this function's contract.
    unsafe { cabi::read_array(p, len) }
}

/// Writes `src` into a C array with room for `src.len()` elements. False for NULL.
///
/// # Safety
/// `p` is NULL or valid for writing `src.len()` `T`s.
pub unsafe fn write_array<T: Copy>(p: *mut T, src: &[T]) -> bool {
    // SAFETY: forwarded from this function's contract.
    unsafe { cabi::write_array(p, src) }
}

/// memmove of `len` bytes between C buffers (either may be shared memory: touching it is
/// served by the DSM's fault handling). False if either is NULL.
///
/// # Safety
/// Each of `dst` and `src` is 0 or the address of `len` bytes, writable / readable.
pub unsafe fn copy(dst: usize, src: usize, len: usize) -> bool {
    // SAFETY: forwarded from this function's contract.
    unsafe { cabi::copy_bytes(dst as *mut u8, src as *const u8, len) }
}

/// Copies `len` bytes of a C buffer into a vector. None for NULL with a non-zero length.
///
/// # Safety
/// `p` is 0 or the address of `len` readable bytes.
pub unsafe fn bytes_from(p: usize, len: usize) -> Option<Vec<u8>> {
    let mut v = vec![0u8; len];
    // SAFETY: `v` holds `len` writable bytes; `p` per this function's contract.
    unsafe { copy(v.as_mut_ptr() as usize, p, len) }.then_some(v)
}

/// Copies `src` into a C buffer. False for NULL with non-empty `src`.
///
/// # Safety
/// `p` is 0 or the address of `src.len()` writable bytes.
pub unsafe fn bytes_to(p: usize, src: &[u8]) -> bool {
    // SAFETY: `src` is readable; `p` per this function's contract.
    unsafe { copy(p, src.as_ptr() as usize, src.len()) }
}

/// A NUL-terminated C string (lossily converted). None for NULL.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string.
pub unsafe fn string(p: *const c_char) -> Option<String> {
    // SAFETY: forwarded from this function's contract.
    unsafe { cabi::c_string(p) }
}

/// `malloc(size)` of the C library (memory the C program may `free`). Null on failure.
pub fn malloc(size: usize) -> *mut c_void {
    cabi::malloc(size)
}

/// `free(p)` of the C library, for memory from [`malloc`].
///
/// # Safety
/// `p` is NULL or came from `malloc` and is freed once (kept by the registries that own these
/// pointers).
pub unsafe fn free(p: *mut c_void) {
    // SAFETY: forwarded from this function's contract.
    unsafe { cabi::free(p) }
}

/// A C array of `v`'s elements in fresh `malloc` memory (the program may `free` it).
pub fn malloc_array<T: Copy>(v: &[T]) -> *mut T {
    let p = malloc(std::mem::size_of_val(v)) as *mut T;
    if !p.is_null() {
        // SAFETY: a fresh allocation of exactly `v.len()` elements.
        unsafe { write_array(p, v) };
    }
    p
}

/// Rewrites the program's `argc`/`argv` to `argv[0]` followed by `keep` (indices into the
/// current argv), terminated by NULL. The pointers stay those of the program.
///
/// # Safety
/// `argc` and `argv` are NULL or the addresses of the program's `argc` and `argv` (what `main`
/// received: `argv` has `argc` string pointers and a NULL terminator, and may be rewritten).
pub unsafe fn rewrite_args(argc: *mut i32, argv: *mut *mut *mut c_char, keep: &[usize]) -> bool {
    // SAFETY: `argc`, `argv` per this function's contract.
    let (Some(n), Some(arr)) = (unsafe { get(argc) }, unsafe { get(argv) }) else {
        return false;
    };
    if arr.is_null() || n < 1 {
        return false;
    }
    // SAFETY: the program's argv holds `n` pointers (this function's contract).
    let Some(old) = (unsafe { read_array(arr as *const *mut c_char, n as usize) }) else {
        return false;
    };
    let mut new = vec![old[0]];
    new.extend(keep.iter().filter_map(|&i| old.get(i).copied()));
    let count = new.len();
    new.push(std::ptr::null_mut());
    // SAFETY: argv has n + 1 slots (the NULL terminator), and count + 1 <= n + 1; `argc` per
    // this function's contract.
    unsafe { write_array(arr, &new) };
    // SAFETY: as above.
    unsafe { put(argc, count as i32) }
}

/// The program's arguments (argv[0..argc]) as strings.
///
/// # Safety
/// As [`rewrite_args`] (read only).
pub unsafe fn args(argc: *mut i32, argv: *mut *mut *mut c_char) -> Vec<String> {
    // SAFETY: `argc`, `argv` per this function's contract.
    let (Some(n), Some(arr)) = (unsafe { get(argc) }, unsafe { get(argv) }) else {
        return Vec::new();
    };
    if arr.is_null() || n < 1 {
        return Vec::new();
    }
    // SAFETY: the program's argv holds `n` pointers, each a string (this function's contract).
    unsafe { read_array(arr as *const *mut c_char, n as usize) }
        .unwrap_or_default()
        .into_iter()
        // SAFETY: as above.
        .map(|p| unsafe { string(p) }.unwrap_or_default())
        .collect()
}

/// Redirects file descriptor `fd` to the file at `path` (opened for reading when `read`,
/// otherwise created/truncated for writing).
pub fn redirect_fd(fd: i32, path: &str, read: bool) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = if read {
        std::fs::File::open(path)?
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?
    };
    // `f` is open for the call (dropping it afterwards leaves `fd` pointing at the file).
    nix::unistd::dup2(f.as_raw_fd(), fd)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn buffers_round_trip_and_null_is_refused() {
        let src = *b"hello";
        let mut dst = [0u8; 5];
        let (d, s) = (dst.as_mut_ptr() as usize, src.as_ptr() as usize);
        // SAFETY: both are 5-byte arrays of this test.
        assert!(unsafe { copy(d, s, 5) });
        assert_eq!(&dst, b"hello");
        // SAFETY: NULL destination (refused) and a 5-byte source.
        assert!(!unsafe { copy(0, s, 5) });
        // SAFETY: nothing is accessed for a zero length.
        assert!(unsafe { copy(0, 0, 0) });
        // SAFETY: a 5-byte array of this test.
        assert_eq!(unsafe { bytes_from(s, 5) }.as_deref(), Some(&b"hello"[..]));
        // SAFETY: NULL is refused.
        assert_eq!(unsafe { bytes_from(0, 1) }, None);
        let p = malloc_array(&[1i32, 2, 3]);
        // SAFETY: `p` holds 3 elements, from `malloc`, freed once.
        assert_eq!(unsafe { read_array(p, 3) }, Some(vec![1, 2, 3]));
        // SAFETY: as above.
        unsafe { free(p.cast()) };
    }

    #[test]
    fn redirect_fd_points_a_descriptor_at_a_file() {
        let dir = std::env::temp_dir().join(format!("svm_smi_ffi_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (inp, outp) = (dir.join("in"), dir.join("out"));
        std::fs::write(&inp, "from the file").unwrap();
        // Stand-ins for the standard streams: descriptors this test owns.
        let mut r = std::fs::File::open("/dev/null").unwrap();
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap();
        redirect_fd(r.as_raw_fd(), inp.to_str().unwrap(), true).unwrap();
        redirect_fd(w.as_raw_fd(), outp.to_str().unwrap(), false).unwrap();
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        assert_eq!(s, "from the file");
        w.write_all(b"to the file").unwrap();
        drop(w);
        assert_eq!(std::fs::read_to_string(&outp).unwrap(), "to the file");
        assert!(redirect_fd(r.as_raw_fd(), dir.join("missing").to_str().unwrap(), true).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
