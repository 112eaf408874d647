//! Helpers of the protocols' unit tests: what a protocol step's actions did.

use svm_core::protocol::{Action, NodeId, PageId, ProtoMsg};

/// The messages sent, with their destinations, in order.
pub(crate) fn sent(out: &[Action]) -> Vec<(NodeId, ProtoMsg)> {
    out.iter()
        .filter_map(|a| match a {
            Action::Send { to, msg, .. } => Some((*to, msg.clone())),
            _ => None,
        })
        .collect()
}

/// The pages installed from incoming data, in order.
pub(crate) fn installs(out: &[Action]) -> Vec<PageId> {
    out.iter()
        .filter_map(|a| match a {
            Action::InstallIncoming { page, .. } => Some(*page),
            _ => None,
        })
        .collect()
}

/// How many `SendDiffs` actions there are (one per home a flush sends diffs to).
pub(crate) fn diffs_sent(out: &[Action]) -> usize {
    out.iter()
        .filter(|a| matches!(a, Action::SendDiffs { .. }))
        .count()
}
