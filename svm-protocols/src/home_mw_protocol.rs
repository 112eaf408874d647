//! sc-mw and scope: the `home_mw_protocol!` macro, which declares each protocol's public type
//! (`ScMultiWriter`, `Scope`) as a [`HomeMw`](super::HomeMw) in one [`Mode`](super::Mode),
//! with the builder methods and the [`Protocol`](svm_core::protocol::Protocol) implementation
//! that forwards every event to it.

/// Declares a public protocol type that is a [`HomeMw`](super::HomeMw) in one
/// [`Mode`](super::Mode): the struct (with `new()` and `Default`) and its
/// [`Protocol`](svm_core::protocol::Protocol) implementation, which forwards every event to the
/// [`HomeMw`](super::HomeMw) and reports itself as `$name`. The doc comments given before the
/// type name go on the struct.
macro_rules! home_mw_protocol {
    ($(#[$attr:meta])* $ty:ident, $name:literal, $mode:expr) => {
        $(#[$attr])*
        #[derive(Debug)]
        pub struct $ty($crate::home_mw::HomeMw);

        impl $ty {
            pub fn new() -> Self {
                $ty($crate::home_mw::HomeMw::new($mode))
            }

            /// With fault-around (`SVM_FAULT_AROUND`): a home's first fault on a page nobody
            /// has touched makes the untouched home pages of the aligned block of `pages`
            /// pages around it writable at once.
            pub fn with_fault_around(mut self, pages: usize) -> Self {
                self.0.fault_around = ::svm_core::protocol::FaultAround::new(pages);
                self
            }

            /// With or without home migration at barriers (`SVM_HOME_MIGRATION`, off by
            /// default; sc-mw in a job of two nodes: `home_mw_migrate.rs`).
            pub fn with_home_migration(mut self, on: bool) -> Self {
                self.0.set_home_migration(on);
                self
            }

            /// With read-ahead of this node's fetches and write-ahead on its own pages, up to
            /// `pages` pages behind a sequential run of faults (`SVM_PREFETCH`; see
            /// `scan_ahead::ScanAhead`).
            pub fn with_prefetch(mut self, pages: usize) -> Self {
                self.0.fetch_ahead = $crate::scan_ahead::ScanAhead::new(pages);
                self.0.write_ahead = $crate::scan_ahead::ScanAhead::new(pages);
                self
            }

            /// With bounded visibility (`SVM_FLUSH_AFTER_US`, sc-mw only): writes not yet
            /// flushed are flushed at the latest `ns` after the first of them.
            pub fn with_flush_after(mut self, ns: u64) -> Self {
                self.0.visible.after_ns = ns;
                self
            }
        }

        impl Default for $ty {
            fn default() -> Self {
                Self::new()
            }
        }

        const _: () = {
            use ::svm_core::protocol::{
                Access, Action, Context, NodeId, PageId, ProtoMsg, Protocol, ProtocolStats,
            };

            impl Protocol for $ty {
                fn name(&self) -> &'static str {
                    $name
                }
                fn on_fault(
                    &mut self,
                    ctx: &dyn Context,
                    page: PageId,
                    access: Access,
                    out: &mut Vec<Action>,
                ) {
                    self.0.on_fault(ctx, page, access, out);
                    self.0.arm_flush_timer(ctx);
                }
                fn on_message(
                    &mut self,
                    ctx: &dyn Context,
                    from: NodeId,
                    msg: &ProtoMsg,
                    data_len: usize,
                    out: &mut Vec<Action>,
                ) {
                    self.0.on_message(ctx, from, msg, data_len, out);
                    self.0.arm_flush_timer(ctx);
                }
                fn on_release(&mut self, ctx: &dyn Context, token: u64, out: &mut Vec<Action>) {
                    self.0.on_release(ctx, token, out)
                }
                fn on_acquire(
                    &mut self,
                    ctx: &dyn Context,
                    token: u64,
                    notices: &[PageId],
                    out: &mut Vec<Action>,
                ) {
                    self.0.on_acquire(ctx, token, notices, out)
                }
                fn on_barrier_arrive(
                    &mut self,
                    ctx: &dyn Context,
                    token: u64,
                    out: &mut Vec<Action>,
                ) {
                    self.0.on_barrier_arrive(ctx, token, false, out)
                }
                fn on_all_nodes_barrier_arrive(
                    &mut self,
                    ctx: &dyn Context,
                    token: u64,
                    out: &mut Vec<Action>,
                ) {
                    self.0.on_barrier_arrive(ctx, token, true, out)
                }
                fn on_barrier_depart(
                    &mut self,
                    ctx: &dyn Context,
                    token: u64,
                    notices: &[PageId],
                    out: &mut Vec<Action>,
                ) {
                    self.0.on_barrier_depart(ctx, token, notices, false, out)
                }
                fn on_all_nodes_barrier_depart(
                    &mut self,
                    ctx: &dyn Context,
                    token: u64,
                    notices: &[PageId],
                    out: &mut Vec<Action>,
                ) {
                    self.0.on_barrier_depart(ctx, token, notices, true, out)
                }
                fn on_partial_barrier_depart(
                    &mut self,
                    ctx: &dyn Context,
                    token: u64,
                    notices: &[PageId],
                    others: bool,
                    out: &mut Vec<Action>,
                ) {
                    self.0.on_partial_barrier_depart(ctx, token, notices, others, out)
                }
                fn quiescent(&self) -> bool {
                    self.0.quiescent()
                }
                fn next_timer(&self) -> Option<u64> {
                    self.0.next_timer()
                }
                fn on_timer(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
                    self.0.on_timer(ctx, out)
                }
                fn release_can_wait(&self) -> bool {
                    self.0.release_can_wait()
                }
                fn home_based(&self) -> bool {
                    true
                }
                fn barrier_quiescent(&self) -> bool {
                    self.0.barrier_quiescent()
                }
                fn stats(&self) -> ProtocolStats {
                    self.0.stats()
                }
                fn forget(&mut self, pages: std::ops::Range<PageId>) -> bool {
                    self.0.forget(pages)
                }
                fn configure(&mut self, opts: &::svm_core::protocol::ProtocolOptions) {
                    self.0.fault_around = ::svm_core::protocol::FaultAround::new(opts.fault_around);
                    self.0.fetch_ahead = $crate::scan_ahead::ScanAhead::new(opts.read_ahead);
                    self.0.write_ahead = $crate::scan_ahead::ScanAhead::new(opts.read_ahead);
                    self.0.push = opts.push;
                    self.0.set_home_migration(opts.home_migration);
                    self.0.visible.after_ns = opts.flush_after_ns;
                }
                fn describe(&self, page: PageId) -> String {
                    self.0.describe($name, page)
                }
            }
        };
    };
}

pub(crate) use home_mw_protocol;
