//! The C ABI boundary of the personalities (`libsvm_splash`, `libsvm_smi`, `libsvm_cvm`,
//! `libsvm_deck`): reading and writing through pointers a C program passed in.
//!
//! These functions are safe to call from Rust because the obligation they rest on belongs to the
//! C caller of the exported function: the personality's header documents that pointers are
//! NULL or valid for the access (as C APIs do). NULL is always checked and reported; anything
//! else is taken at the C caller's word. Keeping every such dereference here keeps `unsafe` out
//! of the personality crates.
//!
//! Three kinds of pointer cross the boundary:
//! - **C memory** (out-parameters, arrays, buffers, strings): [`write_out`], [`read_in`],
//!   [`read_array`], [`write_array`], [`copy_bytes`], [`bytes`], [`bytes_mut`], [`c_str`],
//!   [`c_string`], [`args`]. The C caller guarantees the pointer is valid for the access.
//! - **Handles** the library itself created with [`handle_new`] and gave to C as an opaque
//!   pointer (`deck_msg_t *`): [`handle_ref`], [`handle_mut`], [`handle_take`]. The C caller
//!   guarantees it passes back a live handle of this library (not yet destroyed, of the right
//!   type) and does not use it from another thread during the call.
//! - **`malloc` memory** the library hands to C (which may `free` it): [`malloc`], [`free`]. Here
//!   [`free`] carries C's own contract: the pointer came from `malloc` and is freed once.
//!
//! That is also why clippy's `not_unsafe_ptr_arg_deref` is allowed here: these functions *are*
//! the documented boundary where a C caller's pointer is trusted, exactly like the exported
//! `extern "C"` functions that call them.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_char, c_void, CStr};

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

/// Borrows a NUL-terminated C string for the duration of a call (no UTF-8 conversion, for
/// callers that must reject invalid text rather than repair it). None for NULL.
pub fn c_str<'a>(p: *const c_char) -> Option<&'a CStr> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL, and the C caller guarantees a NUL-terminated string that stays valid
    // and unmodified for the duration of the exported call that uses it.
    Some(unsafe { CStr::from_ptr(p) })
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

/// Moves `v` to the heap and returns it as an opaque handle for C. It stays alive until
/// [`handle_take`] is called on it.
pub fn handle_new<T>(v: T) -> *mut T {
    Box::into_raw(Box::new(v))
}

/// Borrows the value behind a handle from [`handle_new`] for the duration of a call. None for
/// NULL.
///
/// The C caller's obligation: `p` is NULL or a live handle from [`handle_new`] of this `T` (not
/// yet given to [`handle_take`]), and nothing mutates or destroys it during the call.
pub fn handle_ref<'a, T>(p: *const T) -> Option<&'a T> {
    // SAFETY: by the C caller's obligation a non-NULL `p` came from `Box::into_raw` of a `T`
    // (aligned, initialised, alive) and is not mutated or freed while the reference is used;
    // `as_ref` checks NULL.
    unsafe { p.as_ref() }
}

/// Borrows the value behind a handle from [`handle_new`] mutably for the duration of a call.
/// None for NULL.
///
/// The C caller's obligation: `p` is NULL or a live handle from [`handle_new`] of this `T` (not
/// yet given to [`handle_take`]), not used by anyone else (another thread, or another argument
/// of the same call) during the call.
pub fn handle_mut<'a, T>(p: *mut T) -> Option<&'a mut T> {
    // SAFETY: by the C caller's obligation a non-NULL `p` came from `Box::into_raw` of a `T`
    // (aligned, initialised, alive) and nothing else accesses it while the reference is used;
    // `as_mut` checks NULL.
    unsafe { p.as_mut() }
}

/// Takes back ownership of a handle from [`handle_new`] (to drop it, typically). None for
/// NULL.
///
/// The C caller's obligation: `p` is NULL or a live handle from [`handle_new`] of this `T`,
/// taken once and never used again afterwards.
pub fn handle_take<T>(p: *mut T) -> Option<Box<T>> {
    if p.is_null() {
        return None;
    }
    // SAFETY: by the C caller's obligation `p` came from `Box::into_raw` of a `Box<T>` in
    // `handle_new`, is still alive and is taken only this once, so ownership returns to a Box.
    Some(unsafe { Box::from_raw(p) })
}

/// `malloc(size)` of the C library: memory the C program may `free`. A zero `size` asks for one
/// byte, so a non-NULL result is always a distinct allocation. NULL on failure.
pub fn malloc(size: usize) -> *mut c_void {
    // SAFETY: malloc has no preconditions; the result is checked for NULL by the callers.
    unsafe { libc::malloc(size.max(1)) }
}

/// `free(p)` of the C library.
///
/// C's contract for `free`, which the caller keeps: `p` is NULL or came from [`malloc`] (or the C
/// library's `malloc`), is freed only once, and nobody uses the memory afterwards. The
/// personalities keep it by freeing only pointers they allocated and still track.
pub fn free(p: *mut c_void) {
    // SAFETY: `p` is NULL (a no-op) or a live malloc allocation freed this once (the contract
    // above).
    unsafe { libc::free(p) }
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
        assert_eq!(
            args(2, argv.as_ptr()),
            vec!["a".to_string(), "bc".to_string()]
        );
        assert_eq!(c_str(s.as_ptr()), Some(s));
        assert_eq!(c_str(std::ptr::null()), None);
        assert_eq!(
            c_str(c"\xff".as_ptr()).map(|c| c.to_str().is_err()),
            Some(true)
        );
    }

    #[test]
    fn handles_live_from_new_to_take() {
        assert!(handle_ref::<Vec<u8>>(std::ptr::null()).is_none());
        assert!(handle_mut::<Vec<u8>>(std::ptr::null_mut()).is_none());
        assert!(handle_take::<Vec<u8>>(std::ptr::null_mut()).is_none());
        let h = handle_new(vec![1u8, 2]);
        assert!(!h.is_null());
        handle_mut(h).unwrap().push(3);
        assert_eq!(handle_ref(h as *const Vec<u8>).unwrap(), &[1, 2, 3]);
        assert_eq!(*handle_take(h).unwrap(), vec![1, 2, 3]);
    }

    /// Lines of the `unsafe` keywords in Rust source `src`, outside comments and string and
    /// character literals (`unsafe_code` and the like are other identifiers).
    fn unsafe_keywords(src: &str) -> Vec<usize> {
        let c: Vec<char> = src.chars().collect();
        let (mut i, mut line, mut found) = (0, 1, Vec::new());
        let at = |i: usize, s: &str| s.chars().enumerate().all(|(k, x)| c.get(i + k) == Some(&x));
        while i < c.len() {
            if c[i] == '\n' {
                line += 1;
                i += 1;
            } else if at(i, "//") {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            } else if at(i, "/*") {
                let mut depth = 0;
                while i < c.len() {
                    if at(i, "/*") {
                        depth += 1;
                        i += 2;
                    } else if at(i, "*/") {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        line += usize::from(c[i] == '\n');
                        i += 1;
                    }
                }
            } else if c[i] == '"' {
                i += 1;
                while i < c.len() && c[i] != '"' {
                    i += if c[i] == '\\' { 2 } else { 1 };
                    line += usize::from(c[i - 1] == '\n');
                }
                i += 1;
            } else if c[i] == '\'' {
                // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
                if c.get(i + 1) == Some(&'\\') {
                    i += 2;
                    while i < c.len() && c[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                } else if c.get(i + 2) == Some(&'\'') {
                    i += 3;
                } else {
                    i += 1;
                }
            } else if c[i].is_alphabetic() || c[i] == '_' {
                let start = i;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
                let word: String = c[start..i].iter().collect();
                let hashes = c[i..].iter().take_while(|&&x| x == '#').count();
                if word == "unsafe" {
                    found.push(line);
                } else if ["r", "br", "cr"].contains(&word.as_str())
                    && c.get(i + hashes) == Some(&'"')
                {
                    // A raw string: no escapes, ends at `"` and as many `#`s.
                    let end: String = std::iter::once('"')
                        .chain("#".repeat(hashes).chars())
                        .collect();
                    i += hashes + 1;
                    while i < c.len() && !at(i, &end) {
                        line += usize::from(c[i] == '\n');
                        i += 1;
                    }
                    i += end.len();
                }
            } else {
                i += 1;
            }
        }
        found
    }

    #[test]
    fn the_unsafe_scanner_skips_comments_and_literals() {
        let src = "// unsafe\n/* a /* unsafe */ b */ let s = \"un\\\"safe unsafe\";\n\
                   let r = r#\"unsafe \"# ; let c = '\\''; fn f<'a>(x: &'a u8) {}\n\
                   #![forbid(unsafe_code)] unsafe { }\n";
        assert_eq!(unsafe_keywords(src), vec![4]);
    }

    /// `#![forbid(unsafe_code)]` cannot lock the personality crates: rustc's `unsafe_code` lint
    /// also rejects `#[no_mangle]`, which every exported C function needs. This test is the lock
    /// instead: their pointer work goes through this module, and no `unsafe` may appear in them.
    #[test]
    fn personality_crates_have_no_unsafe() {
        fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
                let p = e.path();
                if p.is_dir() {
                    rust_files(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut crates = 0;
        let mut bad = Vec::new();
        for e in std::fs::read_dir(&root).unwrap().map(Result::unwrap) {
            if !e.file_name().to_string_lossy().starts_with("svm-api-") {
                continue;
            }
            crates += 1;
            let mut files = Vec::new();
            rust_files(&e.path().join("src"), &mut files);
            for f in files {
                let src = std::fs::read_to_string(&f).unwrap();
                bad.extend(
                    unsafe_keywords(&src)
                        .into_iter()
                        .map(|l| format!("{}:{l}", f.display())),
                );
            }
        }
        assert!(
            crates >= 4,
            "expected the svm-api-* crates next to svm-core"
        );
        assert!(
            bad.is_empty(),
            "`unsafe` in a personality crate (use sys::cabi): {bad:?}"
        );
    }

    #[test]
    fn malloc_memory_is_usable_and_freed() {
        let p = malloc(3 * std::mem::size_of::<u64>()) as *mut u64;
        assert!(!p.is_null());
        assert!(write_array(p, &[7, 8, 9]));
        assert_eq!(read_array(p, 3), Some(vec![7, 8, 9]));
        free(p.cast());
        let z = malloc(0);
        assert!(!z.is_null());
        free(z);
        free(std::ptr::null_mut());
    }
}
