//! svm-core: one node's runtime — the shared window, fault backends, the engine that connects
//! them to a coherence protocol and the communicator, synchronization, statistics, and the
//! native API.

pub mod config;
pub mod diff;
pub mod fault;
pub mod page_table;
pub mod profile;
pub mod protocol;
pub mod region;
pub mod space;
pub mod sync;
pub mod sys;
pub mod workers;

pub use svm_comm::wire::{Access, NodeId, PageId};
pub mod api;
pub mod node;
pub mod stats;
