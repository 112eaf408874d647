//! The C ABI boundary: every read or write through a pointer a C program passed in.
//!
//! The obligation these rest on belongs to the C caller: `smi.h` documents that pointer
//! arguments are NULL or valid for the access, as C APIs do. NULL is always checked; anything
//! else is taken at the caller's word. Keeping every dereference here keeps `unsafe` out of the
//! rest of the crate.

use std::ffi::{c_char, c_void, CStr};

/// Writes `v` through a C out-parameter. False (nothing written) for NULL.
pub fn put<T>(p: *mut T, v: T) -> bool {
    if p.is_null() {
        return false;
    }
    // SAFETY: non-NULL, and the C caller guarantees writable storage for a `T` at `p`.
    unsafe { p.write_unaligned(v) };
    true
}

/// Reads a `T` through a C in-parameter. None for NULL.
pub fn get<T: Copy>(p: *const T) -> Option<T> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL, and the C caller guarantees a readable `T` at `p`.
    Some(unsafe { p.read_unaligned() })
}

/// Copies `len` elements out of a C array. None for NULL with a non-zero length.
pub fn read_array<T: Copy>(p: *const T, len: usize) -> Option<Vec<T>> {
    if len == 0 {
        return Some(Vec::new());
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: the C caller guarantees `len` readable elements at `p`.
    Some(
        (0..len)
            .map(|i| unsafe { p.add(i).read_unaligned() })
            .collect(),
    )
}

/// Writes `src` into a C array with room for `src.len()` elements. False for NULL.
pub fn write_array<T: Copy>(p: *mut T, src: &[T]) -> bool {
    if src.is_empty() {
        return true;
    }
    if p.is_null() {
        return false;
    }
    for (i, v) in src.iter().enumerate() {
        // SAFETY: the C caller guarantees room for `src.len()` elements at `p`.
        unsafe { p.add(i).write_unaligned(*v) };
    }
    true
}

/// memmove of `len` bytes between C buffers (either may be shared memory: touching it is
/// served by the DSM's fault handling). False if either is NULL.
pub fn copy(dst: usize, src: usize, len: usize) -> bool {
    if len == 0 {
        return true;
    }
    if dst == 0 || src == 0 {
        return false;
    }
    // SAFETY: the C caller guarantees both ranges are valid for `len` bytes; `copy` allows
    // overlap.
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len) };
    true
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
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL, and the C caller guarantees a NUL-terminated string at `p`.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// `malloc(size)` of the C library (memory the C program may `free`). Null on failure.
pub fn malloc(size: usize) -> *mut c_void {
    // SAFETY: malloc has no preconditions.
    unsafe { libc::malloc(size.max(1)) }
}

/// `free(p)` of the C library, for memory from [`malloc`].
pub fn free(p: *mut c_void) {
    // SAFETY: `p` is NULL or came from `malloc` above and is freed once (callers' contract,
    // kept by the registries that own these pointers).
    unsafe { libc::free(p) }
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
    // SAFETY: dup2 on two valid descriptors: `f` is open, `fd` is a standard stream number.
    if unsafe { libc::dup2(f.as_raw_fd(), fd) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
