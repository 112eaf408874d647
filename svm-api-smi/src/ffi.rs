//! The C ABI boundary: every read or write through a pointer a C program passed in.
//!
//! The obligation these rest on belongs to the C caller: `smi.h` documents that pointer
//! arguments are NULL or valid for the access, as C APIs do. NULL is always checked; anything
//! else is taken at the caller's word. The dereferences themselves are svm-core's C boundary
//! ([`svm_core::sys::cabi`]); this module adapts it to the SMI runtime's conventions (addresses
//! as `usize`, the program's `argc`/`argv` by pointer), so the crate has no `unsafe` at all.

#![forbid(unsafe_code)]

use std::ffi::{c_char, c_void};

use svm_core::sys::cabi;

/// Writes `v` through a C out-parameter. False (nothing written) for NULL.
pub fn put<T>(p: *mut T, v: T) -> bool {
    cabi::write_out(p, v)
}

/// Reads a `T` through a C in-parameter. None for NULL.
pub fn get<T: Copy>(p: *const T) -> Option<T> {
    cabi::read_in(p)
}

/// Copies `len` elements out of a C array. None for NULL with a non-zero length.
pub fn read_array<T: Copy>(p: *const T, len: usize) -> Option<Vec<T>> {
    cabi::read_array(p, len)
}

/// Writes `src` into a C array with room for `src.len()` elements. False for NULL.
pub fn write_array<T: Copy>(p: *mut T, src: &[T]) -> bool {
    cabi::write_array(p, src)
}

/// memmove of `len` bytes between C buffers (either may be shared memory: touching it is
/// served by the DSM's fault handling). False if either is NULL.
pub fn copy(dst: usize, src: usize, len: usize) -> bool {
    cabi::copy_bytes(dst as *mut u8, src as *const u8, len)
}

/// Copies `len` bytes of a C buffer into a vector. None for NULL with a non-zero length.
pub fn bytes_from(p: usize, len: usize) -> Option<Vec<u8>> {
    let mut v = vec![0u8; len];
    copy(v.as_mut_ptr() as usize, p, len).then_some(v)
}

/// Copies `src` into a C buffer. False for NULL with non-empty `src`.
pub fn bytes_to(p: usize, src: &[u8]) -> bool {
    copy(p, src.as_ptr() as usize, src.len())
}

/// A NUL-terminated C string (lossily converted). None for NULL.
pub fn string(p: *const c_char) -> Option<String> {
    cabi::c_string(p)
}

/// `malloc(size)` of the C library (memory the C program may `free`). Null on failure.
pub fn malloc(size: usize) -> *mut c_void {
    cabi::malloc(size)
}

/// `free(p)` of the C library, for memory from [`malloc`]: `p` is NULL or came from `malloc`
/// and is freed once (kept by the registries that own these pointers).
pub fn free(p: *mut c_void) {
    cabi::free(p)
}

/// A C array of `v`'s elements in fresh `malloc` memory (the program may `free` it).
pub fn malloc_array<T: Copy>(v: &[T]) -> *mut T {
    let p = malloc(std::mem::size_of_val(v)) as *mut T;
    if !p.is_null() {
        write_array(p, v);
    }
    p
}

/// Rewrites the program's `argc`/`argv` to `argv[0]` followed by `keep` (indices into the
/// current argv), terminated by NULL. The pointers stay those of the program.
pub fn rewrite_args(argc: *mut i32, argv: *mut *mut *mut c_char, keep: &[usize]) -> bool {
    let (Some(n), Some(arr)) = (get(argc), get(argv)) else {
        return false;
    };
    if arr.is_null() || n < 1 {
        return false;
    }
    let Some(old) = read_array(arr as *const *mut c_char, n as usize) else {
        return false;
    };
    let mut new = vec![old[0]];
    new.extend(keep.iter().filter_map(|&i| old.get(i).copied()));
    let count = new.len();
    new.push(std::ptr::null_mut());
    // argv has n + 1 slots (the NULL terminator), and count + 1 <= n + 1.
    write_array(arr, &new);
    put(argc, count as i32)
}

/// The program's arguments (argv[0..argc]) as strings.
pub fn args(argc: *mut i32, argv: *mut *mut *mut c_char) -> Vec<String> {
    let (Some(n), Some(arr)) = (get(argc), get(argv)) else {
        return Vec::new();
    };
    if arr.is_null() || n < 1 {
        return Vec::new();
    }
    read_array(arr as *const *mut c_char, n as usize)
        .unwrap_or_default()
        .into_iter()
        .map(|p| string(p).unwrap_or_default())
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
        assert!(copy(dst.as_mut_ptr() as usize, src.as_ptr() as usize, 5));
        assert_eq!(&dst, b"hello");
        assert!(!copy(0, src.as_ptr() as usize, 5));
        assert!(copy(0, 0, 0));
        assert_eq!(
            bytes_from(src.as_ptr() as usize, 5).as_deref(),
            Some(&b"hello"[..])
        );
        assert_eq!(bytes_from(0, 1), None);
        let p = malloc_array(&[1i32, 2, 3]);
        assert_eq!(read_array(p, 3), Some(vec![1, 2, 3]));
        free(p.cast());
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
