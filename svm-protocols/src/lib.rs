//! svm-protocols: one file per coherence protocol (`sc-mw` and `scope` share `home_mw`), each implementing `svm_core::protocol::Protocol`,
//! and the deterministic simulators the conformance suite runs them in: `sim`, the protocol-level
//! cluster, and `engine_sim`, the same programs on the real engine of every node.

mod budget;
pub mod engine_sim;
mod home_mw;
pub mod sc_multi_writer;
pub mod sc_single_writer;
mod scan_ahead;
pub mod scope;
pub mod sim;
#[cfg(test)]
mod test_actions;

pub use sc_multi_writer::ScMultiWriter;
pub use sc_single_writer::ScSingleWriter;
pub use scope::Scope;

use svm_core::protocol::Protocol;

/// Builds the protocol named `name` (the `--protocol` / `SVM_PROTOCOL` value).
pub fn by_name(name: &str) -> Option<Box<dyn Protocol>> {
    match name {
        "sc-sw" => Some(Box::new(ScSingleWriter::new())),
        "sc-mw" => Some(Box::new(ScMultiWriter::new())),
        "scope" => Some(Box::new(Scope::new())),
        _ => None,
    }
}
