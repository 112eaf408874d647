//! Unit tests of the C entry points and argument conversions, called directly from Rust.

use super::*;
use crate::args::{mbox, name};

#[test]
fn messages_through_the_c_entry_points() {
    let mut m: *mut deck_msg_t = std::ptr::null_mut();
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        unsafe { deck_msg_create(std::ptr::null_mut(), 16) },
        DECK_EINVAL
    );
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_create(&mut m, 256) }, DECK_OK);
    assert!(!m.is_null());
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_pack_int32(m, -7) }, DECK_OK);
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        unsafe { deck_msg_pack(m, b"abc".as_ptr().cast(), 3) },
        DECK_OK
    );
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        unsafe { deck_msg_pack(m, std::ptr::null(), 3) },
        DECK_EINVAL
    );
    let mut inner: *mut deck_msg_t = std::ptr::null_mut();
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_create(&mut inner, 64) }, DECK_OK);
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_pack_double(inner, 2.5) }, DECK_OK);
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_pack_msg(m, inner) }, DECK_OK);
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_destroy(inner) }, DECK_OK);
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert!(unsafe { deck_msg_length(m) } > 0);
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_length(std::ptr::null()) }, 0);

    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_reset(m) }, DECK_OK);
    let mut v = 0i32;
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_unpack_int32(m, &mut v) }, DECK_OK);
    assert_eq!(v, -7);
    let (mut buf, mut len) = ([0u8; 2], 0usize);
    assert_eq!(
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        unsafe { deck_msg_unpack(m, buf.as_mut_ptr().cast(), 2, &mut len) },
        DECK_EOVERFLOW
    );
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_reset(m) }, DECK_OK);
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_unpack_int32(m, &mut v) }, DECK_OK);
    let mut buf = [0u8; 8];
    assert_eq!(
        // SAFETY: the pointers are NULL or this test's own live values and handles.
        unsafe { deck_msg_unpack(m, buf.as_mut_ptr().cast(), 8, &mut len) },
        DECK_OK
    );
    assert_eq!(&buf[..len], b"abc");
    let mut out: *mut deck_msg_t = std::ptr::null_mut();
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_unpack_msg(m, &mut out) }, DECK_OK);
    let mut d = 0f64;
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_unpack_double(out, &mut d) }, DECK_OK);
    assert_eq!(d, 2.5);
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_destroy(out) }, DECK_OK);

    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_clear(m) }, DECK_OK);
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_length(m) }, 0);
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_clear(std::ptr::null_mut()) }, DECK_EINVAL);
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { deck_msg_destroy(m) }, DECK_OK);
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(
        // SAFETY: the pointers are NULL, or this test's own live values, buffers and handles.
        unsafe { deck_msg_destroy(std::ptr::null_mut()) },
        DECK_EINVAL
    );
}

#[test]
fn names_must_be_utf8_and_mailboxes_non_null() {
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { name(c"box".as_ptr()) }, Ok("box"));
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { name(c"\xff".as_ptr()) }, Err(DECK_EINVAL));
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { name(std::ptr::null()) }, Err(DECK_EINVAL));
    let b = deck_mbox_t { node: 1, id: 9 };
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert_eq!(unsafe { mbox(&b) }.map(|m| (m.node, m.id)), Ok((1, 9)));
    // SAFETY: the pointers are NULL or this test's own live values and handles.
    assert!(unsafe { mbox(std::ptr::null()) }.is_err());
}
