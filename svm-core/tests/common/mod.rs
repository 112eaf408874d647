//! What the engine test files share: a node's configuration and parts over the in-memory
//! backend and loopback links.

use std::sync::Arc;

use svm_comm::transport::Link;
use svm_core::config::Config;
use svm_core::fault::FaultBackend;
use svm_core::node::{FailureMode, NodeParts};
use svm_core::protocol::{protocol_id, PROTOCOL_NAMES};
use svm_core::space::Space;
use svm_core::NodeId;

/// The configuration of a test node: `protocol` by default, `SVM_TIMEOUT` of `timeout_s`.
pub fn config(protocol: &str, timeout_s: u64) -> Config {
    Config::from_lookup(&|k| match k {
        "SVM_PROTOCOL" => Some(protocol.to_string()),
        "SVM_TIMEOUT" => Some(timeout_s.to_string()),
        _ => None,
    })
    .expect("configuration")
}

/// The parts of node `me` of `nodes`: every protocol of the build (`cfg.protocol` by default),
/// `backend` and `links`.
pub fn node_parts(
    cfg: &Config,
    me: NodeId,
    nodes: NodeId,
    backend: Box<dyn FaultBackend>,
    links: Vec<Option<Box<dyn Link>>>,
    failure_mode: FailureMode,
) -> NodeParts {
    let default_proto = protocol_id(&cfg.protocol).expect("a protocol of this build");
    let mut space = Space::new(cfg.space_base, cfg.space_size, cfg.page_size, me, nodes);
    space.set_default_protocol(default_proto);
    NodeParts {
        cfg: cfg.clone(),
        me,
        nodes,
        space: Arc::new(space),
        backend,
        links,
        protocols: PROTOCOL_NAMES
            .iter()
            .map(|name| svm_protocols::by_name(name))
            .collect(),
        default_proto,
        failure_mode,
    }
}
