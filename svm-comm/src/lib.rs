//! svm-comm: how svm nodes talk to each other.
//!
//! - [`wire`]: the frame header and message representations (no unsafe, fuzzed);
//! - [`transport`]: the `Transport` trait the engine sends through;
//! - [`tcp`]: the TCP full-mesh transport with a job-key handshake;
//! - [`deck`]: µDECK (messages, mailboxes, name server, groups) and DECK-SCI, the shared-memory
//!   transport ([`deck::sci`]);
//! - [`loopback`]: an in-process link (engine tests, several nodes in one process);
//! - [`bootstrap`]: rank, size, coordinator and job key from `svmrun`, Slurm or Open MPI/PMIx;
//! - [`placement`]: which CPUs of the host each node runs on (`SVM_CPUS`, `svmrun --bind`).

pub mod bootstrap;
pub mod deck;
pub mod loopback;
pub mod placement;
pub mod tcp;
pub mod transport;
pub mod wire;

pub use wire::{Access, Msg, NodeId, PageId, ProtoMsg, SyncMsg};
