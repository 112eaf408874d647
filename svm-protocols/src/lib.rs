//! svm-protocols: one file per coherence protocol, each implementing `svm_core::protocol::Protocol`,
//! and the deterministic in-memory cluster that runs them all through one conformance suite.
