//! `sc-sw`: sequential consistency, single writer / multiple readers (IVY, fixed distributed
//! manager).
//!
//! The home of a page (`ctx.home(page)`) is its manager. The manager knows the page's owner
//! (the node holding the master copy), its copyset (nodes with read copies, the owner excluded)
//! and serializes every operation on the page: while one is in progress, new requests wait in a
//! FIFO queue.
//!
//! - Read request from R: the owner lowers itself Write→Read and sends R a copy. If the owner
//!   is the manager the operation completes at once (per-pair FIFO puts every later message of
//!   the manager to R behind the grant); otherwise R reports `Done` to the manager.
//! - Write request from W: the manager invalidates every copy but W's and the owner's and waits
//!   for the acknowledgements, then ownership moves to W (with the contents unless W already
//!   holds a valid copy). A grant sent by a third node is again confirmed with `Done`.
//!
//! Messages this node sends to itself (the manager talking to its own node side) are handled
//! in place, through a local FIFO, instead of travelling through the engine: a fault on a page
//! whose home and owner is this node is resolved inside `on_fault` without any message.

use std::collections::{HashMap, VecDeque};

use svm_core::protocol::{
    Access, Action, Context, FaultAround, NodeId, PageId, ProtoMsg, Protocol, ProtocolStats,
};

/// A set of nodes (a growable bitset: one bit per node, any node count).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSet {
    words: Vec<u64>,
}

impl NodeSet {
    pub fn new() -> Self {
        NodeSet::default()
    }

    pub fn insert(&mut self, n: NodeId) {
        let (w, b) = (n as usize / 64, n as usize % 64);
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << b;
    }

    pub fn remove(&mut self, n: NodeId) {
        let (w, b) = (n as usize / 64, n as usize % 64);
        if let Some(word) = self.words.get_mut(w) {
            *word &= !(1 << b);
        }
    }

    pub fn contains(&self, n: NodeId) -> bool {
        let (w, b) = (n as usize / 64, n as usize % 64);
        self.words.get(w).is_some_and(|word| word & (1 << b) != 0)
    }

    pub fn clear(&mut self) {
        self.words.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| {
            (0..64)
                .filter(move |b| word & (1u64 << b) != 0)
                .map(move |b| (i * 64 + b) as NodeId)
        })
    }
}

/// This node's view of one page.
#[derive(Debug, Clone)]
struct NodePage {
    /// Access as last set by this protocol.
    access: Access,
    /// This node holds the master copy.
    is_owner: bool,
    /// The request sent to the manager and not yet granted.
    outstanding: Option<Access>,
    /// A write fault arrived while a read request was outstanding: ask for write access as
    /// soon as the read copy is installed.
    upgrade_wanted: bool,
    /// This node owns the page through an exclusive read grant (a migratory page) and has not
    /// written it since: no other copy exists, so a write fault takes write access here.
    exclusive: bool,
}

/// An operation the manager has started and not yet completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Busy {
    /// Waiting for `acks` invalidation acknowledgements before moving ownership to `writer`
    /// (for a write, or as an exclusive read copy of a migratory page).
    Invalidating {
        writer: NodeId,
        transfer: Transfer,
        acks: u32,
    },
    /// A third node (the owner) grants `kind` to `requester`; waiting for the requester's `Done`.
    AwaitDone { requester: NodeId, kind: Access },
}

/// How ownership moves to a requester once every other copy is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Transfer {
    /// The requester has no valid copy: the contents travel with the grant.
    with_data: bool,
    /// A read of a migratory page: the requester gets the only copy, read-only until it
    /// writes (`ProtoMsg::GrantExclusive`), instead of write access.
    exclusive: bool,
}

/// Migratory writes in a row (read, then written by the sole reader) before a page's reads
/// are granted exclusively: one such write alone also describes a page two nodes share
/// read-mostly with an occasional write, where exclusive reads would take each other's copies.
const MIGRATORY_CONFIDENCE: u8 = 2;

/// The manager's view of one page (kept at the page's home only).
#[derive(Debug, Clone)]
struct ManagerPage {
    owner: NodeId,
    copyset: NodeSet,
    busy: Option<Busy>,
    queue: VecDeque<(NodeId, Access)>,
    /// Another node than the home has written the page, or a copy sent ahead was invalidated
    /// before its reader went past it: copies sent ahead would only be invalidated again, so
    /// read-ahead skips the page (until some node asks for it itself, for the second case).
    written_remotely: bool,
    /// A copy of the page sent ahead was invalidated unused (cleared by a read request).
    ahead_wasted: bool,
    /// How sure the manager is that the page migrates: raised each time a node that read it
    /// writes it while holding the only copy besides the owner's (the last writer), reset when
    /// another pattern shows. From [`MIGRATORY_CONFIDENCE`] on, read requests move ownership
    /// with an exclusive copy, so the write that follows costs no second request
    /// (migratory-data detection after Cox & Fowler, Stenström et al., ISCA 1993). Reset when a
    /// holder gives an exclusive copy up unwritten (`ProtoMsg::ExclusiveUnused`) or a write
    /// finds other readers.
    migratory: u8,
}

/// The manager's read-ahead state for one reader.
#[derive(Debug, Clone, Default)]
struct Stream {
    /// The page after the last one the reader was granted: a read request for exactly that
    /// page continues a sequential stream (the reader went through the pages sent ahead).
    next: PageId,
    /// Pages to send ahead at the next sequential request: doubles on every sequential
    /// request (up to the configured maximum), halves whenever a page sent ahead is
    /// invalidated before the stream went past it (it was sent for nothing).
    window: usize,
    /// Pages sent ahead the stream has not gone past yet.
    unconfirmed: Vec<PageId>,
}

/// Sequential consistency with a single writer and multiple readers; see the module docs.
#[derive(Debug, Default)]
pub struct ScSingleWriter {
    pages: HashMap<PageId, NodePage>,
    managed: HashMap<PageId, ManagerPage>,
    /// Read-ahead: pages granted unasked behind a sequential read stream (0 = off).
    prefetch: usize,
    /// Fault-around (off by default), see [`ScSingleWriter::with_fault_around`].
    fault_around: FaultAround,
    /// Manager: per reader, its read-ahead stream (see [`Stream`]).
    streams: HashMap<NodeId, Stream>,
    /// Messages from this node to itself, handled in place in FIFO order.
    local: VecDeque<ProtoMsg>,
    stats: ProtocolStats,
}

impl ScSingleWriter {
    pub fn new() -> Self {
        ScSingleWriter::default()
    }

    /// With read-ahead: when a node's read requests walk pages in order, the manager also
    /// grants it read copies of up to `pages` following pages it owns and that are idle, in
    /// the same breath (the node is added to their copysets, exactly as if it had asked).
    pub fn with_prefetch(pages: usize) -> Self {
        ScSingleWriter {
            prefetch: pages,
            ..Default::default()
        }
    }

    /// With fault-around: this node's first fault on a page it is home of, that no node has
    /// asked for yet, makes every such page of the aligned block of `pages` pages around it
    /// writable at once, without a message — exactly the state a write fault of the home
    /// would leave each of them in (owner, empty copyset), so the protocol's invariants hold.
    pub fn with_fault_around(mut self, pages: usize) -> Self {
        self.fault_around = FaultAround::new(pages);
        self
    }

    /// No node has dealt with `page`: this node never touched it and, if it is the home, no
    /// request for it ever reached the manager.
    fn untouched(&self, page: PageId) -> bool {
        !self.pages.contains_key(&page) && !self.managed.contains_key(&page)
    }

    fn node_page(&mut self, ctx: &dyn Context, page: PageId) -> &mut NodePage {
        let me = ctx.me();
        self.pages.entry(page).or_insert_with(|| NodePage {
            access: Access::None,
            is_owner: ctx.home(page) == me,
            outstanding: None,
            upgrade_wanted: false,
            exclusive: false,
        })
    }

    fn managed_page(&mut self, ctx: &dyn Context, page: PageId) -> &mut ManagerPage {
        self.managed.entry(page).or_insert_with(|| ManagerPage {
            owner: ctx.home(page),
            copyset: NodeSet::new(),
            busy: None,
            queue: VecDeque::new(),
            written_remotely: false,
            ahead_wasted: false,
            migratory: 0,
        })
    }

    /// Sends `msg` to `to`; a message to this node without data is queued locally.
    fn send(
        &mut self,
        ctx: &dyn Context,
        to: NodeId,
        msg: ProtoMsg,
        attach: Option<PageId>,
        out: &mut Vec<Action>,
    ) {
        if to == ctx.me() && attach.is_none() {
            self.local.push_back(msg);
        } else {
            out.push(Action::Send { to, msg, attach });
        }
    }

    /// Sets this node's access to `page` (and remembers it).
    fn set_access(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        access: Access,
        out: &mut Vec<Action>,
    ) {
        self.node_page(ctx, page).access = access;
        out.push(Action::SetAccess { page, access });
    }

    /// Handles the messages this node sent to itself, in order.
    fn drain_local(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        while let Some(msg) = self.local.pop_front() {
            self.handle(ctx, ctx.me(), &msg, out);
        }
    }

    fn handle(&mut self, ctx: &dyn Context, from: NodeId, msg: &ProtoMsg, out: &mut Vec<Action>) {
        match *msg {
            // ---- manager side ----
            ProtoMsg::ReadReq { page } => self.mgr_request(ctx, page, from, Access::Read, out),
            ProtoMsg::WriteReq { page } => self.mgr_request(ctx, page, from, Access::Write, out),
            ProtoMsg::InvalAck { page } => self.mgr_inval_ack(ctx, page, out),
            ProtoMsg::Done { page } => self.mgr_done(ctx, page, from, out),
            ProtoMsg::ExclusiveUnused { page } => {
                if let Some(m) = self.managed.get_mut(&page) {
                    m.migratory = 0;
                }
            }
            // ---- node side ----
            ProtoMsg::FwdRead { page, to } => {
                self.exclusive_given_up(ctx, page, out);
                if self.node_page(ctx, page).access == Access::Write {
                    self.set_access(ctx, page, Access::Read, out);
                }
                self.send(
                    ctx,
                    to,
                    ProtoMsg::Grant {
                        page,
                        access: Access::Read,
                        with_data: true,
                    },
                    Some(page),
                    out,
                );
            }
            ProtoMsg::FwdWrite {
                page,
                to,
                with_data,
            } => {
                self.node_page(ctx, page).exclusive = false;
                let transfer = Transfer {
                    with_data,
                    exclusive: false,
                };
                self.give_up_ownership(ctx, page, to, transfer, out);
            }
            ProtoMsg::FwdExclusive {
                page,
                to,
                with_data,
            } => {
                self.exclusive_given_up(ctx, page, out);
                let transfer = Transfer {
                    with_data,
                    exclusive: true,
                };
                self.give_up_ownership(ctx, page, to, transfer, out);
            }
            ProtoMsg::Inval { page } => {
                if self.node_page(ctx, page).access != Access::None {
                    self.stats.invalidations += 1;
                }
                self.set_access(ctx, page, Access::None, out);
                self.send(ctx, from, ProtoMsg::InvalAck { page }, None, out);
            }
            ProtoMsg::Grant {
                page,
                access,
                with_data,
            } => self.install_grant(ctx, page, access, with_data, false, from, out),
            ProtoMsg::GrantExclusive { page, with_data } => {
                self.install_grant(ctx, page, Access::Read, with_data, true, from, out)
            }
            // Multiple-writer traffic never reaches an sc-sw instance (each region has one
            // protocol); a stray one is ignored like any other stray message.
            ProtoMsg::Diffs { .. } | ProtoMsg::DiffAck { .. } => {}
        }
    }

    /// This node, the owner, is asked to give `page` up or share it. If it holds the page
    /// through an exclusive grant it never wrote, the page is not migrating after all: the
    /// manager is told so, and grants plain read copies from then on.
    fn exclusive_given_up(&mut self, ctx: &dyn Context, page: PageId, out: &mut Vec<Action>) {
        let np = self.node_page(ctx, page);
        if std::mem::take(&mut np.exclusive) {
            let home = ctx.home(page);
            self.send(ctx, home, ProtoMsg::ExclusiveUnused { page }, None, out);
        }
    }

    /// This node (the owner) hands ownership and, if `transfer.with_data`, the contents to
    /// `to`: write access, or the only copy read-only (`transfer.exclusive`).
    fn give_up_ownership(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        to: NodeId,
        transfer: Transfer,
        out: &mut Vec<Action>,
    ) {
        let with_data = transfer.with_data;
        let grant = if transfer.exclusive {
            ProtoMsg::GrantExclusive { page, with_data }
        } else {
            ProtoMsg::Grant {
                page,
                access: Access::Write,
                with_data,
            }
        };
        if with_data {
            // Stop local writes first, read the contents into the grant, then drop the copy.
            if self.node_page(ctx, page).access == Access::Write {
                self.set_access(ctx, page, Access::Read, out);
            }
            self.send(ctx, to, grant, Some(page), out);
            self.set_access(ctx, page, Access::None, out);
        } else {
            self.set_access(ctx, page, Access::None, out);
            self.send(ctx, to, grant, None, out);
        }
        self.node_page(ctx, page).is_owner = false;
    }

    /// Installs a grant of `access` (with ownership if `exclusive`: the only copy, read-only
    /// until this node writes it).
    #[allow(clippy::too_many_arguments)]
    fn install_grant(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        access: Access,
        with_data: bool,
        exclusive: bool,
        from: NodeId,
        out: &mut Vec<Action>,
    ) {
        let home = ctx.home(page);
        let np = self.node_page(ctx, page);
        if access == Access::Read && np.access >= Access::Read && !exclusive {
            // An unasked read grant (read-ahead) crossed this node's own request for the
            // page: the copy held is the same, and the manager counts this node a reader.
            if np.outstanding == Some(Access::Read) {
                np.outstanding = None;
            }
            return;
        }
        if with_data {
            out.push(Action::InstallIncoming { page, access });
        } else {
            out.push(Action::SetAccess { page, access });
        }
        let np = self.node_page(ctx, page);
        np.access = access;
        // A read grant does not answer an outstanding write request (read-ahead can bring one
        // while the node waits for write access).
        if np.outstanding.is_some_and(|o| access >= o) {
            np.outstanding = None;
        }
        let mut became_owner = false;
        if access == Access::Write || exclusive {
            became_owner = !np.is_owner;
            np.is_owner = true;
        }
        np.exclusive = exclusive;
        let upgrade = np.outstanding.is_none()
            && std::mem::take(&mut np.upgrade_wanted)
            && access < Access::Write;
        if became_owner {
            self.stats.ownership_received += 1;
        }
        if from != home {
            self.send(ctx, home, ProtoMsg::Done { page }, None, out);
        }
        if upgrade && exclusive {
            // The write that faulted while the read was under way: the only copy is here.
            self.exclusive_upgrade(ctx, page, out);
        } else if upgrade {
            self.node_page(ctx, page).outstanding = Some(Access::Write);
            self.send(ctx, home, ProtoMsg::WriteReq { page }, None, out);
        }
    }

    /// A write fault on a page this node holds exclusively (see [`NodePage::exclusive`]): no
    /// other copy exists and the manager counts this node the owner with an empty copyset,
    /// exactly the state a granted write request leaves, so write access is taken here.
    fn exclusive_upgrade(&mut self, ctx: &dyn Context, page: PageId, out: &mut Vec<Action>) {
        self.node_page(ctx, page).exclusive = false;
        self.stats.migratory_upgrades += 1;
        self.set_access(ctx, page, Access::Write, out);
    }

    // ---------------- manager ----------------

    fn mgr_request(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        from: NodeId,
        kind: Access,
        out: &mut Vec<Action>,
    ) {
        self.managed_page(ctx, page).queue.push_back((from, kind));
        self.mgr_advance(ctx, page, out);
    }

    /// Starts queued operations until one is in progress or the queue is empty.
    fn mgr_advance(&mut self, ctx: &dyn Context, page: PageId, out: &mut Vec<Action>) {
        loop {
            // The operation that just completed may have left messages to this node (a grant
            // to itself, say): they take effect before the next operation looks at this node's
            // access or contents, as they would in per-pair FIFO order.
            self.drain_local(ctx, out);
            let m = self.managed_page(ctx, page);
            if m.busy.is_some() {
                return;
            }
            let Some((req, kind)) = m.queue.pop_front() else {
                return;
            };
            let migrates = m.migratory >= MIGRATORY_CONFIDENCE && req != m.owner;
            match kind {
                Access::Write => self.mgr_start_write(ctx, page, req, false, out),
                _ if migrates => self.mgr_start_write(ctx, page, req, true, out),
                _ => self.mgr_start_read(ctx, page, req, out),
            }
        }
    }

    fn mgr_start_read(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        reader: NodeId,
        out: &mut Vec<Action>,
    ) {
        let me = ctx.me();
        let owner = self.managed_page(ctx, page).owner;
        let grant_read = |with_data| ProtoMsg::Grant {
            page,
            access: Access::Read,
            with_data,
        };
        if reader == owner {
            // The owner itself (the home before its first access): its contents are valid.
            self.send(ctx, reader, grant_read(false), None, out);
        } else if owner == me {
            self.exclusive_given_up(ctx, page, out);
            if self.node_page(ctx, page).access == Access::Write {
                self.set_access(ctx, page, Access::Read, out);
            }
            self.send(ctx, reader, grant_read(true), Some(page), out);
            self.managed_page(ctx, page).copyset.insert(reader);
            self.read_ahead(ctx, page, reader, out);
        } else {
            self.managed_page(ctx, page).busy = Some(Busy::AwaitDone {
                requester: reader,
                kind: Access::Read,
            });
            self.send(
                ctx,
                owner,
                ProtoMsg::FwdRead { page, to: reader },
                None,
                out,
            );
        }
    }

    /// Grants `reader` read copies of the pages after `page` while its requests form a
    /// sequential stream: pages homed and owned here, with no operation under way or queued,
    /// that `reader` does not hold yet and that are not write-shared. Each is exactly a read
    /// grant the manager could have made on request, so the protocol's invariants hold; the
    /// node takes an unasked grant like any other (see `install_grant`). How many: the
    /// reader's window (see [`Stream`]).
    fn read_ahead(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        reader: NodeId,
        out: &mut Vec<Action>,
    ) {
        if self.prefetch == 0 {
            return;
        }
        let me = ctx.me();
        if let Some(m) = self.managed.get_mut(&page) {
            m.ahead_wasted = false; // asked for: send it ahead again when it fits
        }
        let max = self.prefetch;
        let st = self.streams.entry(reader).or_insert_with(|| Stream {
            next: PageId::MAX,
            window: max.min(2),
            unconfirmed: Vec::new(),
        });
        let sequential = st.next == page;
        if sequential {
            // The reader went past what was sent ahead on this stream (the pages just before
            // this one): it was used. Pages sent ahead on other streams stay unconfirmed.
            st.unconfirmed
                .retain(|&q| !(q < page && page - q <= max as PageId));
            st.window = (st.window * 2).clamp(1, max);
        }
        let window = if sequential { st.window } else { 0 };
        let mut next = page + 1;
        for q in page + 1..=page + window as PageId {
            if ctx.home(q) != me || !ctx.same_region(page, q) {
                break;
            }
            let idle = match self.managed.get(&q) {
                Some(m) => {
                    m.owner == me
                        && m.busy.is_none()
                        && m.queue.is_empty()
                        && !m.copyset.contains(reader)
                        && !m.written_remotely
                        && !m.ahead_wasted
                }
                None => true,
            };
            if !idle || self.pages.get(&q).is_some_and(|np| np.exclusive) {
                break;
            }
            if self.node_page(ctx, q).access == Access::Write {
                self.set_access(ctx, q, Access::Read, out);
            }
            let grant = ProtoMsg::Grant {
                page: q,
                access: Access::Read,
                with_data: true,
            };
            self.send(ctx, reader, grant, Some(q), out);
            self.managed_page(ctx, q).copyset.insert(reader);
            next = q + 1;
        }
        let st = self.streams.get_mut(&reader).expect("inserted above");
        st.unconfirmed.extend(page + 1..next);
        st.next = next;
    }

    /// The manager removes `reader`'s copy of `page` for a write: if the copy was sent ahead
    /// and the reader's stream never went past it, it was sent for nothing.
    fn ahead_invalidated(&mut self, page: PageId, reader: NodeId) {
        let Some(st) = self.streams.get_mut(&reader) else {
            return;
        };
        if let Some(i) = st.unconfirmed.iter().position(|&p| p == page) {
            st.unconfirmed.swap_remove(i);
            st.window /= 2;
            if let Some(m) = self.managed.get_mut(&page) {
                m.ahead_wasted = true;
            }
        }
    }

    /// Moves ownership of `page` to `writer` once every other copy is invalidated: write
    /// access, or with `exclusive` the only copy read-only (a read of a migratory page).
    fn mgr_start_write(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        writer: NodeId,
        exclusive: bool,
        out: &mut Vec<Action>,
    ) {
        let me = ctx.me();
        let m = self.managed_page(ctx, page);
        m.written_remotely |= writer != me;
        let owner = m.owner;
        if !exclusive && owner != writer {
            if m.copyset.len() == 1 && m.copyset.contains(writer) {
                // Read by `writer`, then written by it, while it held the only copy besides
                // the last writer's: the page migrates from node to node.
                m.migratory = m.migratory.saturating_add(1).min(MIGRATORY_CONFIDENCE + 1);
            } else if !m.copyset.is_empty() {
                // Read by others too: shared, not migrating.
                m.migratory = 0;
            }
        }
        let transfer = Transfer {
            with_data: !(m.copyset.contains(writer) || owner == writer),
            exclusive,
        };
        let targets: Vec<NodeId> = m
            .copyset
            .iter()
            .filter(|&n| n != writer && n != owner)
            .collect();
        for &t in &targets {
            m.copyset.remove(t);
        }
        let acks = targets.len() as u32;
        if acks > 0 {
            m.busy = Some(Busy::Invalidating {
                writer,
                transfer,
                acks,
            });
        }
        for &t in &targets {
            self.ahead_invalidated(page, t);
        }
        for t in targets {
            self.send(ctx, t, ProtoMsg::Inval { page }, None, out);
        }
        if acks == 0 {
            self.mgr_finish_write(ctx, page, writer, transfer, out);
        }
    }

    /// Every other copy is gone: move ownership (and the contents) to `writer`.
    fn mgr_finish_write(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        writer: NodeId,
        transfer: Transfer,
        out: &mut Vec<Action>,
    ) {
        let me = ctx.me();
        let m = self.managed_page(ctx, page);
        let owner = m.owner;
        if owner == writer {
            // Only a write comes here (an exclusive read is never started for the owner).
            m.copyset.clear();
            m.busy = None;
            self.send(
                ctx,
                writer,
                ProtoMsg::Grant {
                    page,
                    access: Access::Write,
                    with_data: false,
                },
                None,
                out,
            );
        } else if owner == me {
            m.owner = writer;
            m.copyset.clear();
            m.busy = None;
            if transfer.exclusive {
                self.exclusive_given_up(ctx, page, out);
            } else {
                self.node_page(ctx, page).exclusive = false;
            }
            self.give_up_ownership(ctx, page, writer, transfer, out);
        } else {
            // Ownership moves either way: the manager records it at the requester's `Done`.
            m.busy = Some(Busy::AwaitDone {
                requester: writer,
                kind: Access::Write,
            });
            let (to, with_data) = (writer, transfer.with_data);
            let fwd = if transfer.exclusive {
                ProtoMsg::FwdExclusive {
                    page,
                    to,
                    with_data,
                }
            } else {
                ProtoMsg::FwdWrite {
                    page,
                    to,
                    with_data,
                }
            };
            self.send(ctx, owner, fwd, None, out);
        }
    }

    fn mgr_inval_ack(&mut self, ctx: &dyn Context, page: PageId, out: &mut Vec<Action>) {
        let m = self.managed_page(ctx, page);
        let Some(Busy::Invalidating {
            writer,
            transfer,
            acks,
        }) = m.busy
        else {
            return; // stray acknowledgement: nothing waits for it
        };
        if acks > 1 {
            m.busy = Some(Busy::Invalidating {
                writer,
                transfer,
                acks: acks - 1,
            });
            return;
        }
        m.busy = None;
        self.mgr_finish_write(ctx, page, writer, transfer, out);
        self.mgr_advance(ctx, page, out);
    }

    fn mgr_done(&mut self, ctx: &dyn Context, page: PageId, from: NodeId, out: &mut Vec<Action>) {
        let m = self.managed_page(ctx, page);
        match m.busy {
            Some(Busy::AwaitDone { requester, kind }) if requester == from => {
                if kind == Access::Write {
                    m.owner = from;
                    m.copyset.clear();
                } else {
                    m.copyset.insert(from);
                }
                m.busy = None;
                self.mgr_advance(ctx, page, out);
            }
            _ => {} // stray Done: nothing waits for it
        }
    }
}

impl Protocol for ScSingleWriter {
    fn name(&self) -> &'static str {
        "sc-sw"
    }

    fn on_fault(&mut self, ctx: &dyn Context, page: PageId, access: Access, out: &mut Vec<Action>) {
        if access == Access::None {
            return;
        }
        if self.fault_around.enabled() && ctx.home(page) == ctx.me() && self.untouched(page) {
            let mut fa = std::mem::take(&mut self.fault_around);
            let run = fa.run(ctx, page, |q| self.untouched(q));
            self.fault_around = fa;
            for q in run {
                let np = self.node_page(ctx, q);
                np.access = Access::Write;
                out.push(Action::SetAccess {
                    page: q,
                    access: Access::Write,
                });
            }
            return;
        }
        let np = self.node_page(ctx, page);
        if np.access >= access {
            return; // already granted; the engine wakes the thread itself
        }
        if access == Access::Write && np.exclusive && np.outstanding.is_none() {
            self.exclusive_upgrade(ctx, page, out);
            return;
        }
        match np.outstanding {
            Some(pending) if pending >= access => return,
            Some(_) => {
                // Read outstanding, write wanted: ask once the read copy is in.
                np.upgrade_wanted = true;
                return;
            }
            None => np.outstanding = Some(access),
        }
        let msg = if access == Access::Write {
            ProtoMsg::WriteReq { page }
        } else {
            ProtoMsg::ReadReq { page }
        };
        self.send(ctx, ctx.home(page), msg, None, out);
        self.drain_local(ctx, out);
    }

    fn on_message(
        &mut self,
        ctx: &dyn Context,
        from: NodeId,
        msg: &ProtoMsg,
        _data_len: usize,
        out: &mut Vec<Action>,
    ) {
        self.handle(ctx, from, msg, out);
        self.drain_local(ctx, out);
    }

    fn on_release(&mut self, _ctx: &dyn Context, token: u64, out: &mut Vec<Action>) {
        out.push(Action::ReleaseDone {
            token,
            notices: Vec::new(),
        });
    }

    fn on_acquire(
        &mut self,
        _ctx: &dyn Context,
        token: u64,
        _notices: &[PageId],
        out: &mut Vec<Action>,
    ) {
        out.push(Action::AcquireDone { token });
    }

    /// Releases and acquires never do anything here.
    fn quiescent(&self) -> bool {
        true
    }

    fn stats(&self) -> ProtocolStats {
        self.stats.clone()
    }

    fn forget(&mut self, pages: std::ops::Range<PageId>) -> bool {
        self.pages.retain(|p, _| !pages.contains(p));
        self.managed.retain(|p, _| !pages.contains(p));
        self.streams.retain(|_, s| !pages.contains(&s.next));
        for s in self.streams.values_mut() {
            s.unconfirmed.retain(|p| !pages.contains(p));
        }
        true
    }

    fn configure(&mut self, opts: &svm_core::protocol::ProtocolOptions) {
        self.prefetch = opts.read_ahead;
        self.fault_around = FaultAround::new(opts.fault_around);
    }

    fn describe(&self, page: PageId) -> String {
        let local = match self.pages.get(&page) {
            Some(np) => format!(
                "access {:?}, owner here: {}, exclusive: {}, outstanding {:?}, upgrade wanted: {}",
                np.access, np.is_owner, np.exclusive, np.outstanding, np.upgrade_wanted
            ),
            None => "untouched here".to_string(),
        };
        let managed = match self.managed.get(&page) {
            Some(m) => format!(
                "; manager: owner node {}, copyset {:?}, busy {:?}, queued {}, migratory: {}",
                m.owner,
                m.copyset.iter().collect::<Vec<_>>(),
                m.busy,
                m.queue.len(),
                m.migratory
            ),
            None => String::new(),
        };
        format!("sc-sw page {page}: {local}{managed}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use svm_core::protocol::StaticContext;

    fn ctx(me: NodeId, nodes: NodeId, home: NodeId) -> StaticContext<impl Fn(PageId) -> NodeId> {
        StaticContext {
            me,
            nodes,
            homes: move |_| home,
        }
    }

    fn fault(
        p: &mut ScSingleWriter,
        me: NodeId,
        home: NodeId,
        page: PageId,
        a: Access,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        p.on_fault(&ctx(me, 4, home), page, a, &mut out);
        out
    }

    fn msg(
        p: &mut ScSingleWriter,
        me: NodeId,
        home: NodeId,
        from: NodeId,
        m: ProtoMsg,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        p.on_message(&ctx(me, 4, home), from, &m, 0, &mut out);
        out
    }

    fn send(to: NodeId, msg: ProtoMsg, attach: Option<PageId>) -> Action {
        Action::Send { to, msg, attach }
    }

    fn grant(page: PageId, access: Access, with_data: bool) -> ProtoMsg {
        ProtoMsg::Grant {
            page,
            access,
            with_data,
        }
    }

    const P: PageId = 7;

    #[test]
    fn forgotten_pages_start_over() {
        // Node 1 asks the home (node 0) for write access; node 0 manages page P and P+1.
        let mut home = ScSingleWriter::new();
        let mut other = ScSingleWriter::new();
        assert!(!fault(&mut other, 1, 0, P, Access::Write).is_empty());
        let req = ProtoMsg::WriteReq { page: P };
        assert!(!msg(&mut home, 0, 0, 1, req).is_empty());
        fault(&mut home, 0, 0, P + 1, Access::Read);
        assert!(home.describe(P).contains("manager"));
        assert!(other.describe(P).contains("outstanding Some(Write)"));
        assert!(home.forget(P..P + 1) && other.forget(P..P + 1));
        assert_eq!(home.describe(P), format!("sc-sw page {P}: untouched here"));
        assert_eq!(other.describe(P), format!("sc-sw page {P}: untouched here"));
        assert!(
            home.describe(P + 1).contains("access Read"),
            "pages outside the range are kept"
        );
    }

    #[test]
    fn reads_are_granted_exclusively_after_two_migrations_and_plainly_after_a_miss() {
        // The home (node 0) manages P; nodes 1 and 2 take turns reading then writing it.
        let mut h = ScSingleWriter::with_prefetch(0);
        let req = |h: &mut ScSingleWriter, from: NodeId, m: ProtoMsg| {
            let out = msg(h, 0, 0, from, m);
            let fwd = out.iter().find_map(|a| match a {
                Action::Send { to, msg, .. } if *to != from => Some(msg.clone()),
                _ => None,
            });
            msg(h, 0, 0, from, ProtoMsg::Done { page: P });
            fwd
        };
        assert!(
            req(&mut h, 1, ProtoMsg::WriteReq { page: P }).is_none(),
            "the home grants itself"
        );
        let fwd_read = |to| ProtoMsg::FwdRead { page: P, to };
        let fwd_write = |to| ProtoMsg::FwdWrite {
            page: P,
            to,
            with_data: false,
        };
        // First migration (2 reads, then writes): not yet trusted.
        assert_eq!(
            req(&mut h, 2, ProtoMsg::ReadReq { page: P }),
            Some(fwd_read(2))
        );
        assert_eq!(
            req(&mut h, 2, ProtoMsg::WriteReq { page: P }),
            Some(fwd_write(2))
        );
        assert_eq!(
            req(&mut h, 1, ProtoMsg::ReadReq { page: P }),
            Some(fwd_read(1))
        );
        // Second migration: reads now move ownership with the only copy.
        assert_eq!(
            req(&mut h, 1, ProtoMsg::WriteReq { page: P }),
            Some(fwd_write(1))
        );
        let exclusive_to = |to| ProtoMsg::FwdExclusive {
            page: P,
            to,
            with_data: true,
        };
        assert_eq!(
            req(&mut h, 2, ProtoMsg::ReadReq { page: P }),
            Some(exclusive_to(2))
        );
        assert!(h.describe(P).contains("owner node 2"), "{}", h.describe(P));
        // Node 2 gives its exclusive copy up unwritten: plain read copies again, and one
        // migration is not enough to trust the page again.
        let _ = msg(&mut h, 0, 0, 2, ProtoMsg::ExclusiveUnused { page: P });
        assert_eq!(
            req(&mut h, 1, ProtoMsg::ReadReq { page: P }),
            Some(fwd_read(1))
        );
        assert_eq!(
            req(&mut h, 1, ProtoMsg::WriteReq { page: P }),
            Some(fwd_write(1))
        );
        assert_eq!(
            req(&mut h, 2, ProtoMsg::ReadReq { page: P }),
            Some(fwd_read(2))
        );
    }

    #[test]
    fn read_ahead_window_grows_on_sequential_requests_and_shrinks_on_waste() {
        let mut h = ScSingleWriter::with_prefetch(8);
        let read = |h: &mut ScSingleWriter, page| msg(h, 0, 0, 1, ProtoMsg::ReadReq { page });
        let granted = |out: &[Action]| {
            out.iter()
                .filter_map(|a| match a {
                    Action::Send {
                        msg: ProtoMsg::Grant { page, .. },
                        ..
                    } => Some(*page),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(granted(&read(&mut h, 10)), vec![10]);
        // Sequential: the window doubles from 2 to 4.
        assert_eq!(granted(&read(&mut h, 11)), vec![11, 12, 13, 14, 15]);
        // The stream goes past them: confirmed, and the window doubles to 8.
        assert_eq!(
            granted(&read(&mut h, 16)),
            vec![16, 17, 18, 19, 20, 21, 22, 23, 24]
        );
        // Node 2 writes pages sent ahead that node 1 never went past: each invalidation
        // halves the window (8 → 0) and the pages are not sent ahead again.
        for p in 17..21 {
            let out = msg(&mut h, 0, 0, 2, ProtoMsg::WriteReq { page: p });
            assert_eq!(out[0], send(1, ProtoMsg::Inval { page: p }, None));
            let _ = msg(&mut h, 0, 0, 1, ProtoMsg::InvalAck { page: p });
        }
        assert_eq!(granted(&read(&mut h, 40)), vec![40]);
        assert_eq!(granted(&read(&mut h, 41)), vec![41, 42]);
    }

    #[test]
    fn fault_around_takes_only_untouched_home_pages_of_the_block() {
        let mut h = ScSingleWriter::new().with_fault_around(4);
        let set = |page| Action::SetAccess {
            page,
            access: Access::Write,
        };
        // Node 1 asked for page 9 first: the manager knows it, so it is not untouched.
        let out = msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: 9 });
        assert_eq!(out, vec![send(1, grant(9, Access::Read, true), Some(9))]);
        // A read fault on page 10 (block 8..12): 10 and 11, not 9 (and so not 8 either).
        assert_eq!(
            fault(&mut h, 0, 0, 10, Access::Read),
            vec![set(10), set(11)]
        );
        // Page 11 is now the home's, writable: a later fault on it needs nothing.
        assert!(fault(&mut h, 0, 0, 11, Access::Write).is_empty());
        // A remote read of page 11 lowers the home to read-only before the copy leaves.
        let out = msg(&mut h, 0, 0, 2, ProtoMsg::ReadReq { page: 11 });
        assert_eq!(
            out,
            vec![
                Action::SetAccess {
                    page: 11,
                    access: Access::Read
                },
                send(2, grant(11, Access::Read, true), Some(11)),
            ]
        );
        // Pages homed elsewhere never take part: node 1's fault asks the home.
        let mut n = ScSingleWriter::new().with_fault_around(4);
        assert_eq!(
            fault(&mut n, 1, 0, 20, Access::Write),
            vec![send(0, ProtoMsg::WriteReq { page: 20 }, None)]
        );
    }

    #[test]
    fn read_ahead_follows_sequential_streams_and_crossing_grants_are_harmless() {
        let mut h = ScSingleWriter::with_prefetch(2);
        // First request of a stream: only the page asked for.
        let out = msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: 10 });
        assert_eq!(out, vec![send(1, grant(10, Access::Read, true), Some(10))]);
        // The next page continues the stream: two more pages come unasked.
        let out = msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: 11 });
        assert_eq!(
            out,
            vec![
                send(1, grant(11, Access::Read, true), Some(11)),
                send(1, grant(12, Access::Read, true), Some(12)),
                send(1, grant(13, Access::Read, true), Some(13)),
            ]
        );
        // Page 12 is now in node 1's copyset: a write by node 2 invalidates it there.
        let out = msg(&mut h, 0, 0, 2, ProtoMsg::WriteReq { page: 12 });
        assert_eq!(out, vec![send(1, ProtoMsg::Inval { page: 12 }, None)]);
        // A random (non-sequential) request starts a new stream without read-ahead.
        let out = msg(&mut h, 0, 0, 3, ProtoMsg::ReadReq { page: 40 });
        assert_eq!(out.len(), 1);

        // Node side: an unasked grant is installed; the answer to the node's own request for
        // the same page, arriving later, changes nothing.
        let mut n = ScSingleWriter::with_prefetch(2);
        let out = fault(&mut n, 1, 0, 13, Access::Read);
        assert_eq!(out, vec![send(0, ProtoMsg::ReadReq { page: 13 }, None)]);
        let out = msg(&mut n, 1, 0, 0, grant(13, Access::Read, true));
        assert_eq!(
            out,
            vec![Action::InstallIncoming {
                page: 13,
                access: Access::Read
            }]
        );
        assert!(msg(&mut n, 1, 0, 0, grant(13, Access::Read, true)).is_empty());
        // An unasked read grant while a write request is outstanding does not answer it.
        let _ = fault(&mut n, 1, 0, 20, Access::Write);
        let out = msg(&mut n, 1, 0, 0, grant(20, Access::Read, true));
        assert_eq!(
            out,
            vec![Action::InstallIncoming {
                page: 20,
                access: Access::Read
            }]
        );
        assert!(
            fault(&mut n, 1, 0, 20, Access::Write).is_empty(),
            "the write request is still outstanding"
        );
        let out = msg(&mut n, 1, 0, 0, grant(20, Access::Write, false));
        assert_eq!(
            out,
            vec![Action::SetAccess {
                page: 20,
                access: Access::Write
            }]
        );
    }

    #[test]
    fn nodeset_basics() {
        let mut s = NodeSet::new();
        assert!(s.is_empty());
        s.insert(3);
        s.insert(70);
        s.insert(3);
        assert!(s.contains(3) && s.contains(70) && !s.contains(4));
        assert_eq!(s.len(), 2);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![3, 70]);
        s.remove(3);
        s.remove(200);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![70]);
        s.clear();
        assert!(s.is_empty());
    }

    #[test]
    fn home_local_faults_need_no_messages() {
        let mut h = ScSingleWriter::new();
        assert_eq!(h.name(), "sc-sw");
        assert_eq!(
            fault(&mut h, 0, 0, P, Access::Read),
            vec![Action::SetAccess {
                page: P,
                access: Access::Read
            }]
        );
        assert_eq!(
            fault(&mut h, 0, 0, P, Access::Write),
            vec![Action::SetAccess {
                page: P,
                access: Access::Write
            }]
        );
        // Already granted: nothing.
        assert!(fault(&mut h, 0, 0, P, Access::Write).is_empty());
        assert_eq!(h.stats(), ProtocolStats::default());
    }

    #[test]
    fn home_read_by_remote_node() {
        // Node 0 is home and owner with write access; node 1 reads.
        let mut h = ScSingleWriter::new();
        fault(&mut h, 0, 0, P, Access::Write);
        let mut r = ScSingleWriter::new();
        assert_eq!(
            fault(&mut r, 1, 0, P, Access::Read),
            vec![send(0, ProtoMsg::ReadReq { page: P }, None)]
        );
        // Coalesced: a second read fault sends nothing.
        assert!(fault(&mut r, 1, 0, P, Access::Read).is_empty());
        let out = msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: P });
        assert_eq!(
            out,
            vec![
                Action::SetAccess {
                    page: P,
                    access: Access::Read
                },
                send(1, grant(P, Access::Read, true), Some(P)),
            ]
        );
        assert!(h.describe(P).contains("copyset [1]"), "{}", h.describe(P));
        assert!(h.describe(P).contains("busy None"));
        // Grant from the manager: no Done.
        let out = msg(&mut r, 1, 0, 0, grant(P, Access::Read, true));
        assert_eq!(
            out,
            vec![Action::InstallIncoming {
                page: P,
                access: Access::Read
            }]
        );
        assert!(r.describe(P).contains("access Read"));
    }

    #[test]
    fn third_party_read_needs_done() {
        // Home 0, owner 2 (after a write), reader 1.
        let mut h = ScSingleWriter::new();
        let mut o = ScSingleWriter::new();
        let mut r = ScSingleWriter::new();
        fault(&mut o, 2, 0, P, Access::Write);
        let out = msg(&mut h, 0, 0, 2, ProtoMsg::WriteReq { page: P });
        // The home never touched the page: nothing to lower before attaching.
        assert_eq!(
            out,
            vec![
                send(2, grant(P, Access::Write, true), Some(P)),
                Action::SetAccess {
                    page: P,
                    access: Access::None
                }
            ]
        );
        assert_eq!(
            msg(&mut o, 2, 0, 0, grant(P, Access::Write, true)),
            vec![Action::InstallIncoming {
                page: P,
                access: Access::Write
            }]
        );
        assert_eq!(o.stats().ownership_received, 1);

        fault(&mut r, 1, 0, P, Access::Read);
        let out = msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: P });
        assert_eq!(
            out,
            vec![send(2, ProtoMsg::FwdRead { page: P, to: 1 }, None)]
        );
        // While busy, another request queues.
        assert!(msg(&mut h, 0, 0, 3, ProtoMsg::ReadReq { page: P }).is_empty());
        assert!(h.describe(P).contains("queued 1"), "{}", h.describe(P));
        let out = msg(&mut o, 2, 0, 0, ProtoMsg::FwdRead { page: P, to: 1 });
        assert_eq!(
            out,
            vec![
                Action::SetAccess {
                    page: P,
                    access: Access::Read
                },
                send(1, grant(P, Access::Read, true), Some(P))
            ]
        );
        let out = msg(&mut r, 1, 0, 2, grant(P, Access::Read, true));
        assert_eq!(
            out,
            vec![
                Action::InstallIncoming {
                    page: P,
                    access: Access::Read
                },
                send(0, ProtoMsg::Done { page: P }, None)
            ]
        );
        // Done completes the read and starts the queued one.
        let out = msg(&mut h, 0, 0, 1, ProtoMsg::Done { page: P });
        assert_eq!(
            out,
            vec![send(2, ProtoMsg::FwdRead { page: P, to: 3 }, None)]
        );
        assert!(h.describe(P).contains("copyset [1]"), "{}", h.describe(P));
    }

    #[test]
    fn write_invalidates_copies_and_moves_ownership() {
        // Home 0 owns; readers 1 and 2 hold copies; node 3 writes.
        let mut h = ScSingleWriter::new();
        msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: P });
        msg(&mut h, 0, 0, 2, ProtoMsg::ReadReq { page: P });
        let out = msg(&mut h, 0, 0, 3, ProtoMsg::WriteReq { page: P });
        assert_eq!(
            out,
            vec![
                send(1, ProtoMsg::Inval { page: P }, None),
                send(2, ProtoMsg::Inval { page: P }, None)
            ]
        );
        assert!(msg(&mut h, 0, 0, 1, ProtoMsg::InvalAck { page: P }).is_empty());
        // A request arriving meanwhile waits.
        assert!(msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: P }).is_empty());
        let out = msg(&mut h, 0, 0, 2, ProtoMsg::InvalAck { page: P });
        assert_eq!(
            out,
            vec![
                send(3, grant(P, Access::Write, true), Some(P)),
                Action::SetAccess {
                    page: P,
                    access: Access::None
                },
                // The queued read now goes to the new owner.
                send(3, ProtoMsg::FwdRead { page: P, to: 1 }, None),
            ]
        );
        // A copy holder acknowledges an invalidation after dropping its copy.
        let mut r = ScSingleWriter::new();
        fault(&mut r, 1, 0, P, Access::Read);
        msg(&mut r, 1, 0, 0, grant(P, Access::Read, true));
        let out = msg(&mut r, 1, 0, 0, ProtoMsg::Inval { page: P });
        assert_eq!(
            out,
            vec![
                Action::SetAccess {
                    page: P,
                    access: Access::None
                },
                send(0, ProtoMsg::InvalAck { page: P }, None)
            ]
        );
        assert_eq!(r.stats().invalidations, 1);
    }

    #[test]
    fn write_from_copy_holder_via_third_owner_skips_data() {
        // Home 0, owner 2, copy holder 1 upgrades: FwdWrite without data.
        let mut h = ScSingleWriter::new();
        msg(&mut h, 0, 0, 2, ProtoMsg::WriteReq { page: P });
        msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: P });
        msg(&mut h, 0, 0, 1, ProtoMsg::Done { page: P });
        let out = msg(&mut h, 0, 0, 1, ProtoMsg::WriteReq { page: P });
        assert_eq!(
            out,
            vec![send(
                2,
                ProtoMsg::FwdWrite {
                    page: P,
                    to: 1,
                    with_data: false
                },
                None
            )]
        );
        let mut o = ScSingleWriter::new();
        fault(&mut o, 2, 0, P, Access::Write);
        msg(&mut o, 2, 0, 0, grant(P, Access::Write, true));
        let out = msg(
            &mut o,
            2,
            0,
            0,
            ProtoMsg::FwdWrite {
                page: P,
                to: 1,
                with_data: false,
            },
        );
        assert_eq!(
            out,
            vec![
                Action::SetAccess {
                    page: P,
                    access: Access::None
                },
                send(1, grant(P, Access::Write, false), None)
            ]
        );
        assert!(o.describe(P).contains("owner here: false"));
        // With data: lower, attach, drop.
        let mut o2 = ScSingleWriter::new();
        fault(&mut o2, 2, 0, P, Access::Write);
        msg(&mut o2, 2, 0, 0, grant(P, Access::Write, true));
        let out = msg(
            &mut o2,
            2,
            0,
            0,
            ProtoMsg::FwdWrite {
                page: P,
                to: 3,
                with_data: true,
            },
        );
        assert_eq!(
            out,
            vec![
                Action::SetAccess {
                    page: P,
                    access: Access::Read
                },
                send(3, grant(P, Access::Write, true), Some(P)),
                Action::SetAccess {
                    page: P,
                    access: Access::None
                },
            ]
        );
        // Done moves ownership at the manager.
        msg(&mut h, 0, 0, 1, ProtoMsg::Done { page: P });
        assert!(
            h.describe(P)
                .contains("owner node 1, copyset [], busy None"),
            "{}",
            h.describe(P)
        );
    }

    #[test]
    fn owner_upgrade_invalidates_copyset_first() {
        // Node 1 becomes owner, node 2 and home 0 read, then node 1 (owner, read-only) writes.
        let mut h = ScSingleWriter::new();
        msg(&mut h, 0, 0, 1, ProtoMsg::WriteReq { page: P });
        // Home's own read goes to the owner.
        let out = fault(&mut h, 0, 0, P, Access::Read);
        assert_eq!(
            out,
            vec![send(1, ProtoMsg::FwdRead { page: P, to: 0 }, None)]
        );
        // The grant from the owner completes the operation locally (Done to self).
        let out = msg(&mut h, 0, 0, 1, grant(P, Access::Read, true));
        assert_eq!(
            out,
            vec![Action::InstallIncoming {
                page: P,
                access: Access::Read
            }]
        );
        msg(&mut h, 0, 0, 2, ProtoMsg::ReadReq { page: P });
        msg(&mut h, 0, 0, 2, ProtoMsg::Done { page: P });
        assert!(
            h.describe(P).contains("copyset [0, 2]"),
            "{}",
            h.describe(P)
        );
        // Owner upgrade: home invalidates itself in place, node 2 by message.
        let out = msg(&mut h, 0, 0, 1, ProtoMsg::WriteReq { page: P });
        assert_eq!(
            out,
            vec![
                send(2, ProtoMsg::Inval { page: P }, None),
                Action::SetAccess {
                    page: P,
                    access: Access::None
                }
            ]
        );
        assert_eq!(h.stats().invalidations, 1);
        let out = msg(&mut h, 0, 0, 2, ProtoMsg::InvalAck { page: P });
        assert_eq!(out, vec![send(1, grant(P, Access::Write, false), None)]);
        // The owner installs without data, sends no Done, gains no new ownership.
        let mut o = ScSingleWriter::new();
        fault(&mut o, 1, 0, P, Access::Write);
        msg(&mut o, 1, 0, 0, grant(P, Access::Write, true));
        let out = msg(&mut o, 1, 0, 0, ProtoMsg::FwdRead { page: P, to: 2 });
        assert_eq!(
            out[0],
            Action::SetAccess {
                page: P,
                access: Access::Read
            }
        );
        assert_eq!(
            fault(&mut o, 1, 0, P, Access::Write),
            vec![send(0, ProtoMsg::WriteReq { page: P }, None)]
        );
        let out = msg(&mut o, 1, 0, 0, grant(P, Access::Write, false));
        assert_eq!(
            out,
            vec![Action::SetAccess {
                page: P,
                access: Access::Write
            }]
        );
        assert_eq!(o.stats().ownership_received, 1);
    }

    #[test]
    fn home_owner_with_readers_upgrades_after_invalidation() {
        let mut h = ScSingleWriter::new();
        fault(&mut h, 0, 0, P, Access::Read);
        msg(&mut h, 0, 0, 1, ProtoMsg::ReadReq { page: P });
        let out = fault(&mut h, 0, 0, P, Access::Write);
        assert_eq!(out, vec![send(1, ProtoMsg::Inval { page: P }, None)]);
        let out = msg(&mut h, 0, 0, 1, ProtoMsg::InvalAck { page: P });
        assert_eq!(
            out,
            vec![Action::SetAccess {
                page: P,
                access: Access::Write
            }]
        );
    }

    #[test]
    fn read_then_write_fault_coalesces_into_upgrade() {
        let mut r = ScSingleWriter::new();
        assert_eq!(
            fault(&mut r, 1, 0, P, Access::Read),
            vec![send(0, ProtoMsg::ReadReq { page: P }, None)]
        );
        // Write wanted while the read is outstanding: remembered, nothing sent.
        assert!(fault(&mut r, 1, 0, P, Access::Write).is_empty());
        assert!(fault(&mut r, 1, 0, P, Access::Write).is_empty());
        // A third-party read grant: Done, then the write request, in that order.
        let out = msg(&mut r, 1, 0, 2, grant(P, Access::Read, true));
        assert_eq!(
            out,
            vec![
                Action::InstallIncoming {
                    page: P,
                    access: Access::Read
                },
                send(0, ProtoMsg::Done { page: P }, None),
                send(0, ProtoMsg::WriteReq { page: P }, None),
            ]
        );
        // Write outstanding covers later faults.
        assert!(fault(&mut r, 1, 0, P, Access::Read).is_empty());
        assert!(fault(&mut r, 1, 0, P, Access::Write).is_empty());
        let out = msg(&mut r, 1, 0, 0, grant(P, Access::Write, false));
        assert_eq!(
            out,
            vec![Action::SetAccess {
                page: P,
                access: Access::Write
            }]
        );
    }

    #[test]
    fn release_and_acquire_complete_at_once() {
        let mut p = ScSingleWriter::new();
        let c = ctx(0, 2, 0);
        let mut out = Vec::new();
        p.on_release(&c, 5, &mut out);
        p.on_acquire(&c, 6, &[1, 2], &mut out);
        assert_eq!(
            out,
            vec![
                Action::ReleaseDone {
                    token: 5,
                    notices: vec![]
                },
                Action::AcquireDone { token: 6 }
            ]
        );
    }
}
