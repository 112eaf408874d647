//! The C ABI boundary of the personalities (`libsvm_splash`, `libsvm_smi`, `libsvm_cvm`,
//! `libsvm_deck`): reading and writing through pointers a C program passed in.
//!
//! These functions are safe to call from Rust because the obligation they rest on belongs to the
//! C caller of the exported function: the personality's header documents that pointers are
//! NULL or valid for the access (as C APIs do). NULL is always checked and reported; anything
//! else is taken at the C caller's word. Keeping every such dereference here keeps `unsafe` out
//! of the personality crates.
//!
//! That is also why clippy's `not_unsafe_ptr_arg_deref` is allowed here: these functions *are*
//! the documented boundary where a C caller's pointer is trusted, exactly like the exported
//! `extern "C"` functions that call them.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_char, CStr};

/// Writes `v` through a C out-parameter. Returns false (nothing written) for NULL.
pub fn write_out<T>(p: *mut T, v: T) -> bool {
    if p.is_null() {
        return false;
    }
    // SAFETY: non-NULL, and the C caller guarantees it points to writable storage for a `T`
    // (the exported function's documented contract).
    unsafe { p.write_unaligned(v) };
    true
}

/// Reads a `T` through a C in-parameter. None for NULL.
pub fn read_in<T: Copy>(p: *const T) -> Option<T> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL, and the C caller guarantees it points to a readable `T`.
    Some(unsafe { p.read_unaligned() })
}

/// Copies `len` elements from a C array. None for NULL with a non-zero length.
pub fn read_array<T: Copy>(p: *const T, len: usize) -> Option<Vec<T>> {
    if len == 0 {
        return Some(Vec::new());
    }
    if p.is_null() {
        return None;
    }
    let mut v = Vec::with_capacity(len);
    for i in 0..len {
        // SAFETY: the C caller guarantees `len` readable elements at `p`.
        v.push(unsafe { p.add(i).read_unaligned() });
    }
    Some(v)
}

/// Writes `src` into a C array of at least `src.len()` elements. False for NULL.
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

/// Copies `len` bytes between two C buffers (memmove semantics). False if either is NULL.
pub fn copy_bytes(dst: *mut u8, src: *const u8, len: usize) -> bool {
    if len == 0 {
        return true;
    }
    if dst.is_null() || src.is_null() {
        return false;
    }
    // SAFETY: the C caller guarantees both ranges are valid for `len` bytes; `copy` allows
    // overlap.
    unsafe { std::ptr::copy(src, dst, len) };
    true
}

/// Borrows `len` bytes of a C buffer as a slice for the duration of a call.
pub fn bytes<'a>(p: *const u8, len: usize) -> Option<&'a [u8]> {
    if len == 0 {
        return Some(&[]);
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: the C caller guarantees `len` readable bytes that stay valid and unmodified for
    // the duration of the exported call that uses the slice.
    Some(unsafe { std::slice::from_raw_parts(p, len) })
}

/// Borrows `len` bytes of a C buffer mutably for the duration of a call.
pub fn bytes_mut<'a>(p: *mut u8, len: usize) -> Option<&'a mut [u8]> {
    if len == 0 {
        return Some(&mut []);
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: the C caller guarantees `len` writable bytes, not accessed by anyone else during
    // the exported call that uses the slice.
    Some(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

/// Reads a NUL-terminated C string (lossy UTF-8). None for NULL.
pub fn c_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL, and the C caller guarantees a NUL-terminated string.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Reads `argv[0..argc]` as strings.
pub fn args(argc: i32, argv: *const *const c_char) -> Vec<String> {
    read_array(argv, argc.max(0) as usize)
        .unwrap_or_default()
        .into_iter()
        .map(|p| c_string(p).unwrap_or_default())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_is_refused_and_values_round_trip() {
        assert!(!write_out::<i32>(std::ptr::null_mut(), 1));
        let mut x = 0i32;
        assert!(write_out(&mut x, 7));
        assert_eq!(read_in(&x), Some(7));
        assert_eq!(read_in::<i32>(std::ptr::null()), None);
        let a = [1u64, 2, 3];
        assert_eq!(read_array(a.as_ptr(), 3), Some(vec![1, 2, 3]));
        let mut b = [0u64; 3];
        assert!(write_array(b.as_mut_ptr(), &a));
        assert_eq!(b, a);
        let s = c"hello";
        assert_eq!(c_string(s.as_ptr()), Some("hello".into()));
        let argv = [c"a".as_ptr(), c"bc".as_ptr()];
        assert_eq!(args(2, argv.as_ptr()), vec!["a".to_string(), "bc".to_string()]);
    }
}
