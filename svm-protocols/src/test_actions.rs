//! Helpers of the protocols' unit tests: protocol steps on a node of a job whose pages all
//! have node 0 as home, and what a step's actions did.

use svm_core::protocol::{Access, Action, NodeId, PageId, ProtoMsg, Protocol, StaticContext};

/// Node `me` of a job of `nodes` nodes whose every page has node 0 as home.
pub(crate) fn homed_on_0(me: NodeId, nodes: NodeId) -> StaticContext<impl Fn(PageId) -> NodeId> {
    StaticContext {
        me,
        nodes,
        homes: |_| 0,
    }
}

/// Node `me` (of `nodes`, pages homed on node 0) faults on `page` for `access`.
pub(crate) fn fault_at(
    p: &mut dyn Protocol,
    (me, nodes): (NodeId, NodeId),
    page: PageId,
    access: Access,
) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_fault(&homed_on_0(me, nodes), page, access, &mut out);
    out
}

/// Node `me` (of `nodes`, pages homed on node 0) handles `m` from `from`.
pub(crate) fn message_at(
    p: &mut dyn Protocol,
    (me, nodes): (NodeId, NodeId),
    from: NodeId,
    m: ProtoMsg,
) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_message(&homed_on_0(me, nodes), from, &m, 0, &mut out);
    out
}

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
