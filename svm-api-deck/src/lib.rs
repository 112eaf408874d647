//! The DECK C API (`include/deck.h`), over svm-comm's µDECK.
//!
//! Every exported function catches panics and returns an error code: no panic crosses the C
//! boundary. Pointers are checked for NULL; beyond that the caller's pointers must be valid as
//! `deck.h` documents (the usual C contract): a `deck_msg_t *` is a live handle this library
//! handed out (not yet destroyed, not used by another thread during the call), everything else
//! points to memory valid for the access. That contract is each pointer-taking function's
//! `# Safety` (they are `unsafe extern "C" fn`s), and every dereference goes through svm-core's
//! C boundary ([`svm_core::sys::cabi`]) in an `unsafe` block that names it.

#![allow(non_camel_case_types)]

mod args;
mod collective;
mod error;
mod mailbox;
mod message;
mod state;
#[cfg(test)]
mod tests;

use svm_comm::deck::Message;

pub use collective::{deck_barrier, deck_bcast, deck_gather, deck_reduce_double};
pub use error::{
    deck_strerror, DECK_EAGAIN, DECK_EEND, DECK_EINTERNAL, DECK_EINVAL, DECK_ENOINIT,
    DECK_EOVERFLOW, DECK_ERROR, DECK_ETIMEDOUT, DECK_ETYPE, DECK_OK,
};
pub use mailbox::{
    deck_mbox_bind, deck_mbox_create, deck_mbox_destroy, deck_mbox_fetch, deck_mbox_post,
    deck_mbox_retrv, deck_mbox_tfetch, deck_mbox_tretrv, deck_mbox_tryretrv,
};
pub use message::{
    deck_msg_clear, deck_msg_create, deck_msg_destroy, deck_msg_length, deck_msg_pack,
    deck_msg_pack_double, deck_msg_pack_int32, deck_msg_pack_int64, deck_msg_pack_mbox,
    deck_msg_pack_msg, deck_msg_pack_uint32, deck_msg_pack_uint64, deck_msg_reset, deck_msg_unpack,
    deck_msg_unpack_double, deck_msg_unpack_int32, deck_msg_unpack_int64, deck_msg_unpack_mbox,
    deck_msg_unpack_msg, deck_msg_unpack_uint32, deck_msg_unpack_uint64,
};
pub use state::{deck_done, deck_init, deck_node, deck_nodes};

/// `deck_mbox_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct deck_mbox_t {
    pub node: u32,
    pub id: u32,
}

/// `deck_msg_t` (opaque to C).
pub struct deck_msg_t(Message);
