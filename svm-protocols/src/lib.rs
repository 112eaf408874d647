//! svm-protocols: one file per coherence protocol, each implementing `svm_core::protocol::Protocol`,
//! and the deterministic in-memory cluster that runs them all through one conformance suite.

pub mod sc_single_writer;
pub mod sim;

pub use sc_single_writer::ScSingleWriter;

use svm_core::protocol::Protocol;

/// Builds the protocol named `name` (the `--protocol` / `SVM_PROTOCOL` value).
pub fn by_name(name: &str) -> Option<Box<dyn Protocol>> {
    match name {
        "sc-sw" => Some(Box::new(ScSingleWriter::new())),
        _ => None,
    }
}
