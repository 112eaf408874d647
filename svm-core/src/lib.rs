//! svm-core: one node's runtime.

pub mod protocol;
pub mod sync;

pub use svm_comm::wire::{Access, NodeId, PageId};
