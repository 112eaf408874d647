//! The C ABI boundary of the personalities (`libsvm`, `libsvm_splash`, `libsvm_smi`,
//! `libsvm_cvm`, `libsvm_deck`): reading and writing through pointers a C program passed in.
//!
//! Two layers:
//! - [`raw`]: the unchecked primitives, each with a `# Safety` section stating exactly what the
//!   pointer must be. Every dereference of a C pointer in the project is in there.
//! - The checked entry points below. Each validates what can be validated — NULL, a length
//!   whose byte size overflows or whose range wraps the address space, and, for handles, that
//!   the pointer is a live handle of this library of the right type (a registry of handles) —
//!   and relies for the rest on **the C caller's contract**: a non-NULL pointer to C memory is
//!   valid for the access for the duration of the call. Since that cannot be checked, they are
//!   `unsafe fn`s too, with the contract as their `# Safety` section.
//!
//! The contract comes from C: every exported function that takes a pointer is an
//! `unsafe extern "C" fn` whose `# Safety` section (and the personality's header) states what
//! its pointer arguments must be, as every C API does; its body calls the entry points here in
//! `unsafe` blocks whose `// SAFETY:` comment names the argument and that contract. Pointers
//! made up in Rust never go through here (Rust code uses references).
//!
//! Three kinds of pointer cross the boundary:
//! - **C memory** (out-parameters, arrays, buffers, strings): [`write_out`], [`read_in`],
//!   [`read_array`], [`write_array`], [`copy_bytes`], [`bytes`], [`bytes_mut`], [`c_str`],
//!   [`c_string`], [`args`].
//! - **Handles** the library itself created with [`handle_new`] and gave to C as an opaque
//!   pointer (`deck_msg_t *`): [`handle_ref`], [`handle_mut`], [`handle_take`]. These check the
//!   registry, so a stale, foreign or mistyped handle is refused (None) rather than used; the C
//!   caller still guarantees it does not use one handle from two threads at once.
//! - **`malloc` memory** the library hands to C (which may `free` it): [`malloc`], [`free`]. Here
//!   [`free`] carries C's own contract: the pointer came from `malloc` and is freed once.

use std::any::TypeId;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr};
use std::sync::Mutex;

/// The unchecked primitives. Each is `unsafe`: the caller states why its `# Safety` holds.
pub mod raw {
    use std::ffi::{c_char, CStr};

    /// Writes `v` to `p` (unaligned).
    ///
    /// # Safety
    /// `p` is valid for writing a `T` (non-NULL, inside one allocation, not aliased by a live
    /// reference).
    pub unsafe fn write<T>(p: *mut T, v: T) {
        // SAFETY: the caller's contract above.
        unsafe { p.write_unaligned(v) }
    }

    /// Reads a `T` from `p` (unaligned).
    ///
    /// # Safety
    /// `p` is valid for reading a `T`, and those bytes are a valid `T`.
    pub unsafe fn read<T: Copy>(p: *const T) -> T {
        // SAFETY: the caller's contract above.
        unsafe { p.read_unaligned() }
    }

    /// Copies `len` bytes from `src` to `dst`; the ranges may overlap.
    ///
    /// # Safety
    /// `src` is valid for reading and `dst` for writing `len` bytes.
    pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract above; `copy` allows overlap.
        unsafe { std::ptr::copy(src, dst, len) }
    }

    /// `len` bytes at `p` as a slice.
    ///
    /// # Safety
    /// `p` is non-NULL and valid for reading `len` bytes, which nobody modifies while the slice
    /// lives (`'a`), and `len <= isize::MAX`.
    pub unsafe fn slice<'a>(p: *const u8, len: usize) -> &'a [u8] {
        // SAFETY: the caller's contract above.
        unsafe { std::slice::from_raw_parts(p, len) }
    }

    /// `len` bytes at `p` as a mutable slice.
    ///
    /// # Safety
    /// `p` is non-NULL and valid for reading and writing `len` bytes, which nobody else
    /// accesses while the slice lives (`'a`), and `len <= isize::MAX`.
    pub unsafe fn slice_mut<'a>(p: *mut u8, len: usize) -> &'a mut [u8] {
        // SAFETY: the caller's contract above.
        unsafe { std::slice::from_raw_parts_mut(p, len) }
    }

    /// The NUL-terminated string at `p`.
    ///
    /// # Safety
    /// `p` is non-NULL and points to a NUL-terminated string that stays valid and unmodified
    /// while the result lives (`'a`).
    pub unsafe fn c_str<'a>(p: *const c_char) -> &'a CStr {
        // SAFETY: the caller's contract above.
        unsafe { CStr::from_ptr(p) }
    }
}

/// Bytes of `len` elements of `T` starting at `p`, if that range neither overflows nor wraps the
/// address space (what can be checked about a C range without touching it).
fn range_ok<T>(p: *const T, len: usize) -> bool {
    len.checked_mul(std::mem::size_of::<T>())
        .filter(|b| *b <= isize::MAX as usize)
        .is_some_and(|b| (p as usize).checked_add(b).is_some())
}

/// What a panic caught at the C boundary said (its `&str` or `String` payload), for the error
/// message the personality returns instead of unwinding into C.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// Writes `v` through a C out-parameter. Returns false (nothing written) for NULL.
///
/// # Safety
/// `p` is NULL or valid for writing a `T` (the C caller's contract).
pub unsafe fn write_out<T>(p: *mut T, v: T) -> bool {
    if p.is_null() {
        return false;
    }
    // SAFETY: non-NULL, and the C caller guarantees it points to writable storage for a `T`
    // (the exported function's documented contract).
    unsafe { raw::write(p, v) };
    true
}

/// Reads a `T` through a C in-parameter. None for NULL.
///
/// # Safety
/// `p` is NULL or points to a readable, initialised `T` (the C caller's contract).
pub unsafe fn read_in<T: Copy>(p: *const T) -> Option<T> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL, and the C caller guarantees it points to a readable `T`.
    Some(unsafe { raw::read(p) })
}

/// Copies `len` elements from a C array. None for NULL with a non-zero length.
///
/// # Safety
/// `p` is NULL or points to `len` readable, initialised `T`s (the C caller's contract).
pub unsafe fn read_array<T: Copy>(p: *const T, len: usize) -> Option<Vec<T>> {
    if len == 0 {
        return Some(Vec::new());
    }
    if p.is_null() || !range_ok(p, len) {
        return None;
    }
    let mut v = Vec::with_capacity(len);
    for i in 0..len {
        // SAFETY: the range does not wrap (checked), and the C caller guarantees `len` readable
        // elements at `p`.
        v.push(unsafe { raw::read(p.wrapping_add(i)) });
    }
    Some(v)
}

/// Writes `src` into a C array of at least `src.len()` elements. False for NULL.
///
/// # Safety
/// `p` is NULL or valid for writing `src.len()` `T`s (the C caller's contract).
pub unsafe fn write_array<T: Copy>(p: *mut T, src: &[T]) -> bool {
    if src.is_empty() {
        return true;
    }
    if p.is_null() || !range_ok(p, src.len()) {
        return false;
    }
    for (i, v) in src.iter().enumerate() {
        // SAFETY: the range does not wrap (checked), and the C caller guarantees room for
        // `src.len()` elements at `p`.
        unsafe { raw::write(p.wrapping_add(i), *v) };
    }
    true
}

/// Copies `len` bytes between two C buffers (memmove semantics). False if either is NULL.
///
/// # Safety
/// Each of `dst` and `src` is NULL or valid for `len` bytes (writable / readable; the C
/// caller's contract).
pub unsafe fn copy_bytes(dst: *mut u8, src: *const u8, len: usize) -> bool {
    if len == 0 {
        return true;
    }
    if dst.is_null() || src.is_null() || !range_ok(dst, len) || !range_ok(src, len) {
        return false;
    }
    // SAFETY: the ranges do not wrap (checked), and the C caller guarantees both are valid for
    // `len` bytes.
    unsafe { raw::copy(dst, src, len) };
    true
}

/// Borrows `len` bytes of a C buffer as a slice for the duration of a call.
///
/// # Safety
/// `p` is NULL or points to `len` readable bytes that nobody modifies while the slice (of
/// the caller's choice of lifetime `'a`) is used.
pub unsafe fn bytes<'a>(p: *const u8, len: usize) -> Option<&'a [u8]> {
    if len == 0 {
        return Some(&[]);
    }
    if p.is_null() || !range_ok(p, len) {
        return None;
    }
    // SAFETY: non-NULL, at most isize::MAX bytes without wrapping (checked), and the C caller
    // guarantees `len` readable bytes that stay valid and unmodified for the duration of the
    // exported call that uses the slice.
    Some(unsafe { raw::slice(p, len) })
}

/// Borrows `len` bytes of a C buffer mutably for the duration of a call.
///
/// # Safety
/// `p` is NULL or points to `len` writable bytes that nobody else accesses while the slice
/// (lifetime `'a`) is used.
pub unsafe fn bytes_mut<'a>(p: *mut u8, len: usize) -> Option<&'a mut [u8]> {
    if len == 0 {
        return Some(&mut []);
    }
    if p.is_null() || !range_ok(p, len) {
        return None;
    }
    // SAFETY: non-NULL, at most isize::MAX bytes without wrapping (checked), and the C caller
    // guarantees `len` writable bytes, not accessed by anyone else during the exported call
    // that uses the slice.
    Some(unsafe { raw::slice_mut(p, len) })
}

/// Borrows a NUL-terminated C string for the duration of a call (no UTF-8 conversion, for
/// callers that must reject invalid text rather than repair it). None for NULL.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that nobody modifies while the result
/// (lifetime `'a`) is used.
pub unsafe fn c_str<'a>(p: *const c_char) -> Option<&'a CStr> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL, and the C caller guarantees a NUL-terminated string that stays valid
    // and unmodified for the duration of the exported call that uses it.
    Some(unsafe { raw::c_str(p) })
}

/// Reads a NUL-terminated C string (lossy UTF-8). None for NULL.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string.
pub unsafe fn c_string(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL, and the C caller guarantees a NUL-terminated string (used only inside
    // this call).
    Some(unsafe { raw::c_str(p) }.to_string_lossy().into_owned())
}

/// Reads `argv[0..argc]` as strings.
///
/// # Safety
/// `argv` is NULL or points to `argc` pointers, each NULL or a NUL-terminated string (what
/// C's `main` receives).
pub unsafe fn args(argc: i32, argv: *const *const c_char) -> Vec<String> {
    // SAFETY: `argv` is NULL or holds `argc` pointers (this function's contract).
    unsafe { read_array(argv, argc.max(0) as usize) }
        .unwrap_or_default()
        .into_iter()
        // SAFETY: each is NULL or a NUL-terminated string (this function's contract).
        .map(|p| unsafe { c_string(p) }.unwrap_or_default())
        .collect()
}

/// Live handles: address → type. A handle is registered by [`handle_new`] and removed by
/// [`handle_take`], so the other handle functions can refuse anything else.
static HANDLES: Mutex<Option<HashMap<usize, TypeId>>> = Mutex::new(None);

fn live_handle<T: 'static>(p: *const T) -> bool {
    !p.is_null()
        && HANDLES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|h| h.get(&(p as usize)) == Some(&TypeId::of::<T>()))
}

/// Moves `v` to the heap and returns it as an opaque handle for C. It stays alive until
/// [`handle_take`] is called on it.
pub fn handle_new<T: 'static>(v: T) -> *mut T {
    let p = Box::into_raw(Box::new(v));
    HANDLES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(p as usize, TypeId::of::<T>());
    p
}

/// Borrows the value behind a handle from [`handle_new`] for the duration of a call. None for
/// NULL, and for anything that is not a live handle of this `T`.
///
/// The C caller's obligation: nothing mutates or destroys the handle during the call (no other
/// thread uses it at the same time).
///
/// # Safety
/// Nothing mutates or destroys the handle while the reference (lifetime `'a`) is used (no
/// other thread uses it at the same time).
pub unsafe fn handle_ref<'a, T: 'static>(p: *const T) -> Option<&'a T> {
    if !live_handle(p) {
        return None;
    }
    // SAFETY: `p` is a live handle of this `T` (checked in the registry): it came from
    // `Box::into_raw` of a `T` (aligned, initialised, not yet freed), and by the C caller's
    // obligation it is not mutated or freed while the reference is used.
    Some(unsafe { &*p })
}

/// Borrows the value behind a handle from [`handle_new`] mutably for the duration of a call.
/// None for NULL, and for anything that is not a live handle of this `T`.
///
/// The C caller's obligation: the handle is not used by anyone else (another thread, or another
/// argument of the same call) during the call.
///
/// # Safety
/// Nothing else uses the handle (another thread, another argument of the same call) while
/// the reference (lifetime `'a`) is used.
pub unsafe fn handle_mut<'a, T: 'static>(p: *mut T) -> Option<&'a mut T> {
    if !live_handle(p) {
        return None;
    }
    // SAFETY: `p` is a live handle of this `T` (checked in the registry): it came from
    // `Box::into_raw` of a `T`, and by the C caller's obligation nothing else accesses it while
    // the reference is used.
    Some(unsafe { &mut *p })
}

/// Takes back ownership of a handle from [`handle_new`] (to drop it, typically). None for
/// NULL, and for anything that is not a live handle of this `T` (a second take included).
///
/// The C caller's obligation: no other thread uses the handle during the call.
///
/// # Safety
/// No other thread uses the handle during the call.
pub unsafe fn handle_take<T: 'static>(p: *mut T) -> Option<Box<T>> {
    let removed = !p.is_null()
        && HANDLES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .is_some_and(|h| match h.get(&(p as usize)) {
                Some(t) if *t == TypeId::of::<T>() => h.remove(&(p as usize)).is_some(),
                _ => false,
            });
    if !removed {
        return None;
    }
    // SAFETY: `p` was a live handle of this `T` and has just been removed from the registry
    // (so this is the only take): it came from `Box::into_raw` of a `Box<T>` in `handle_new`,
    // and ownership returns to a Box.
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
///
/// # Safety
/// `p` is NULL or came from [`malloc`] (or the C library's `malloc`), is freed only once,
/// and nobody uses the memory afterwards.
pub unsafe fn free(p: *mut c_void) {
    // SAFETY: `p` is NULL (a no-op) or a live malloc allocation freed this once (the contract
    // above).
    unsafe { libc::free(p) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_is_refused_and_values_round_trip() {
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert!(!unsafe { write_out::<i32>(std::ptr::null_mut(), 1) });
        let mut x = 0i32;
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert!(unsafe { write_out(&mut x, 7) });
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert_eq!(unsafe { read_in(&x) }, Some(7));
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert_eq!(unsafe { read_in::<i32>(std::ptr::null()) }, None);
        let a = [1u64, 2, 3];
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert_eq!(unsafe { read_array(a.as_ptr(), 3) }, Some(vec![1, 2, 3]));
        let mut b = [0u64; 3];
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert!(unsafe { write_array(b.as_mut_ptr(), &a) });
        assert_eq!(b, a);
        let s = c"hello";
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert_eq!(unsafe { c_string(s.as_ptr()) }, Some("hello".into()));
        let argv = [c"a".as_ptr(), c"bc".as_ptr()];
        assert_eq!(
            // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
            unsafe { args(2, argv.as_ptr()) },
            vec!["a".to_string(), "bc".to_string()]
        );
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert_eq!(unsafe { c_str(s.as_ptr()) }, Some(s));
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert_eq!(unsafe { c_str(std::ptr::null()) }, None);
        assert_eq!(
            // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
            unsafe { c_str(c"\xff".as_ptr()) }.map(|c| c.to_str().is_err()),
            Some(true)
        );
    }

    #[test]
    fn ranges_that_wrap_or_overflow_are_refused() {
        let p = usize::MAX as *const u64;
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert_eq!(unsafe { read_array(p.wrapping_sub(1), 4) }, None);
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert_eq!(unsafe { bytes(usize::MAX as *const u8, 2) }, None);
        assert_eq!(
            // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
            unsafe { read_array(std::ptr::dangling::<u64>(), usize::MAX / 4) },
            None
        );
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert!(!unsafe { copy_bytes(usize::MAX as *mut u8, 8 as *const u8, 2) });
    }

    #[test]
    fn only_live_handles_of_the_right_type_are_used() {
        let h = handle_new(41u32);
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert_eq!(unsafe { handle_ref(h) }.copied(), Some(41));
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        if let Some(v) = unsafe { handle_mut(h) } {
            *v += 1;
        }
        // The same address as another type, or an address that is no handle: refused.
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert!(unsafe { handle_ref(h.cast::<u64>()) }.is_none());
        let x = 5u32;
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert!(unsafe { handle_ref(&x as *const u32) }.is_none());
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert_eq!(unsafe { handle_take(h) }.map(|b| *b), Some(42));
        // Taken: no longer live (a second take or a use after destroy is refused).
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert!(unsafe { handle_take(h) }.is_none());
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert!(unsafe { handle_ref(h) }.is_none());
    }

    #[test]
    fn handles_live_from_new_to_take() {
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert!(unsafe { handle_ref::<Vec<u8>>(std::ptr::null()) }.is_none());
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert!(unsafe { handle_mut::<Vec<u8>>(std::ptr::null_mut()) }.is_none());
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert!(unsafe { handle_take::<Vec<u8>>(std::ptr::null_mut()) }.is_none());
        let h = handle_new(vec![1u8, 2]);
        assert!(!h.is_null());
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        unsafe { handle_mut(h) }.unwrap().push(3);
        // SAFETY: `h` is this test's own live handle.
        let v = unsafe { handle_ref(h as *const Vec<u8>) };
        assert_eq!(v.unwrap(), &[1, 2, 3]);
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert_eq!(*unsafe { handle_take(h) }.unwrap(), vec![1, 2, 3]);
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

    /// The personality crates touch C memory only through this module: their `unsafe` is the
    /// C boundary itself — `unsafe extern "C" fn`s (and their `unsafe fn` helpers) whose
    /// `# Safety` is the C caller's contract, and `unsafe` blocks calling this module's
    /// functions with those pointers (clippy's `undocumented_unsafe_blocks` makes each state
    /// its reason). No `unsafe impl`/`unsafe trait`, and none of the primitives that would
    /// dereference or reinterpret memory themselves.
    #[test]
    fn personality_crates_touch_c_memory_only_through_cabi() {
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
        const PRIMITIVES: &[&str] = &[
            "transmute",
            "slice::from_raw_parts",
            "Box::from_raw(",
            "ptr::read",
            "ptr::write",
            "ptr::copy",
            "read_volatile",
            "write_volatile",
            "read_unaligned",
            "write_unaligned",
        ];
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
                let lines: Vec<&str> = src.lines().collect();
                for l in unsafe_keywords(&src) {
                    let text = lines[l - 1];
                    if text.contains("unsafe impl") || text.contains("unsafe trait") {
                        bad.push(format!("{}:{l}: {}", f.display(), text.trim()));
                    }
                }
                for (i, text) in lines.iter().enumerate() {
                    let code = text.split("//").next().unwrap_or("");
                    if let Some(p) = PRIMITIVES.iter().find(|p| code.contains(*p)) {
                        bad.push(format!("{}:{}: `{p}`", f.display(), i + 1));
                    }
                }
            }
        }
        assert!(
            crates >= 4,
            "expected the svm-api-* crates next to svm-core"
        );
        assert!(
            bad.is_empty(),
            "a personality crate touches memory itself (use sys::cabi): {bad:?}"
        );
    }

    #[test]
    fn malloc_memory_is_usable_and_freed() {
        let p = malloc(3 * std::mem::size_of::<u64>()) as *mut u64;
        assert!(!p.is_null());
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert!(unsafe { write_array(p, &[7, 8, 9]) });
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        assert_eq!(unsafe { read_array(p, 3) }, Some(vec![7, 8, 9]));
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        unsafe { free(p.cast()) };
        let z = malloc(0);
        assert!(!z.is_null());
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        unsafe { free(z) };
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        unsafe { free(std::ptr::null_mut()) };
    }
}
