//! The coherence protocol interface: a sans-IO state machine.
//!
//! A protocol receives [`Event`]s-as-method-calls (a local fault, a message, a release, an
//! acquire) and appends [`Action`]s to an output vector. It reads no clock, opens no socket and
//! maps no memory, so the same code runs inside the deterministic simulator
//! (`svm-protocols/src/sim.rs`) and inside the real engine (`node.rs`).
//!
//! Contract between engine and protocol:
//! - Actions are executed **in order**. `SetAccess` before a `Send` that attaches the page means
//!   the page's protection is lowered before its contents are read, so no write can slip in
//!   between.
//! - `on_fault` is called for every fault the engine cannot resolve from its own page table
//!   (the engine wakes threads whose needed access is already granted, without the protocol).
//!   The protocol coalesces: a second fault on a page with a request outstanding must not send a
//!   second request of the same strength.
//! - When an `Install` or `SetAccess` action grants access ≥ what a waiting thread needs, the
//!   engine wakes that thread. No explicit wake action exists.
//! - Messages between two nodes are delivered in the order they were sent (per-pair FIFO).
//! - The engine delivers messages a node sends to itself through the same path as any other.
//! - A page never installed on a node reads as zeros: the protocol may `SetAccess` a page that
//!   was never installed (the engine materializes a zero page) and may attach such a page.

pub use svm_comm::wire::{Access, NodeId, PageId, ProtoMsg};

/// What the engine must do for a protocol, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send `msg` to node `to` (possibly this node). With `attach = Some(p)` the engine reads
    /// the current local contents of page `p` and sends them as the frame's raw data.
    Send { to: NodeId, msg: ProtoMsg, attach: Option<PageId> },
    /// Set the local protection of `page` (None = inaccessible, Read = read-only, Write = RW).
    /// Lowering to `None` on a node that is not the page's owner may discard the contents.
    SetAccess { page: PageId, access: Access },
    /// Install the raw data that came with the message being handled as the contents of
    /// `page`, then set `access`. Only valid inside `on_message`.
    InstallIncoming { page: PageId, access: Access },
    /// A release started by `on_release(token)` has completed; `notices` are the write notices
    /// to attach to the lock or barrier (empty for protocols that do not use them).
    ReleaseDone { token: u64, notices: Vec<PageId> },
    /// An acquire started by `on_acquire(token)` has completed.
    AcquireDone { token: u64 },
}

/// What the protocol may ask the engine about (pure queries, no side effects).
pub trait Context {
    /// This node's rank.
    fn me(&self) -> NodeId;
    /// Number of nodes in the job.
    fn nodes(&self) -> NodeId;
    /// Home (manager) node of `page`, from the region's home policy.
    fn home(&self, page: PageId) -> NodeId;
}

/// A simple [`Context`] for tests and the simulator: the home of page `p` is `homes(p)`.
pub struct StaticContext<F: Fn(PageId) -> NodeId> {
    pub me: NodeId,
    pub nodes: NodeId,
    pub homes: F,
}

impl<F: Fn(PageId) -> NodeId> Context for StaticContext<F> {
    fn me(&self) -> NodeId {
        self.me
    }
    fn nodes(&self) -> NodeId {
        self.nodes
    }
    fn home(&self, page: PageId) -> NodeId {
        (self.homes)(page)
    }
}

/// Protocol counters the engine folds into the node's statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtocolStats {
    /// Invalidations this node performed on its own copies.
    pub invalidations: u64,
    /// Ownership transfers this node received.
    pub ownership_received: u64,
}

/// A page coherence protocol (one instance per node per protocol in use).
pub trait Protocol: Send {
    /// The `--protocol` name (`sc-sw`, `sc-mw`, `scope`).
    fn name(&self) -> &'static str;

    /// A local thread touched `page` and needs `access` it does not have.
    fn on_fault(&mut self, ctx: &dyn Context, page: PageId, access: Access, out: &mut Vec<Action>);

    /// A protocol message arrived from `from` (raw data, if any, is available to
    /// [`Action::InstallIncoming`]; `data_len` says how much came).
    fn on_message(
        &mut self,
        ctx: &dyn Context,
        from: NodeId,
        msg: &ProtoMsg,
        data_len: usize,
        out: &mut Vec<Action>,
    );

    /// A local thread is about to release a lock or arrive at a barrier. The protocol must
    /// eventually emit `ReleaseDone { token }` (immediately if it has nothing to do).
    fn on_release(&mut self, ctx: &dyn Context, token: u64, out: &mut Vec<Action>);

    /// A local thread has been granted a lock or left a barrier carrying `notices`. The
    /// protocol must eventually emit `AcquireDone { token }`.
    fn on_acquire(&mut self, ctx: &dyn Context, token: u64, notices: &[PageId], out: &mut Vec<Action>);

    /// Counters for statistics.
    fn stats(&self) -> ProtocolStats {
        ProtocolStats::default()
    }

    /// A human-readable account of what the protocol knows about `page` (for deadline
    /// diagnostics: who owns it, what is pending).
    fn describe(&self, page: PageId) -> String;
}
