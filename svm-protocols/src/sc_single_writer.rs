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

use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

use svm_core::protocol::{
    Access, Action, Context, FaultAround, NodeId, PageId, ProtoMsg, Protocol, ProtocolStats,
};

#[path = "sc_single_writer_hold.rs"]
mod hold;
use hold::{Holds, Probe};
#[path = "sc_single_writer_ahead.rs"]
mod ahead;
#[path = "sc_single_writer_around.rs"]
mod around;
#[path = "sc_single_writer_grants.rs"]
mod grants;
#[path = "sc_single_writer_manager.rs"]
mod manager;
#[path = "sc_single_writer_pairs.rs"]
mod pairs;
#[path = "sc_single_writer_push.rs"]
mod push;

use ahead::Stream;
use around::GrantAround;
use pairs::Pair;

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
    /// Asked for through a remembered pair (see [`Pair`]) and not faulted on since. Write
    /// access asked for so is installed read-only and exclusive: the first write takes it
    /// here and shows the pair was worth it; losing the page unwritten forgets the pair.
    paired: bool,
    /// Came exclusive and unasked: granted around another request while its manager waited
    /// at a barrier (`sc_single_writer_around.rs`). The first write here tells the manager
    /// (`ProtoMsg::ExclusiveWritten`), as giving it up unwritten does (`ExclusiveUnused`).
    around: bool,
    /// The release epoch (see [`ScSingleWriter::epoch`]) in which another node last took
    /// this node's access to the page: write access regained in the same epoch means two
    /// nodes write the page between two synchronisations (false sharing, or a race), and the
    /// page is held (see [`Holds`]).
    lost_in: Option<u64>,
    /// This node dropped its pushed copy and told the home (`ProtoMsg::Dropped`), which has
    /// not answered yet: a push arriving meanwhile left the home before it took this node out
    /// of the copyset, so it is discarded (`sc_single_writer_push.rs`).
    drop_pending: bool,
    /// The copy held came by a push.
    pushed_copy: bool,
    /// Drop copies of this page after a phase of use: a pushed copy of it was invalidated by
    /// its home's next write (the home rewrites it every other phase, as a stencil
    /// alternating two grids does). Applies to pushed copies and to copies this node fetched
    /// itself. Unlearned when this node faults on the page in the phase right after dropping
    /// it (it was still needed); a fault in a later phase reads what the home wrote since.
    drop_after_use: bool,
    /// This node dropped its copy at this barrier arrival (`ScSingleWriter::arrivals`) and has
    /// not had the page since.
    dropped_at: Option<u64>,
    /// Where the page stands in the write probe of its hold (see [`Holds`]).
    probe: Probe,
    /// How many exclusive copies of this page in a row this node wrote (saturating); an
    /// exclusive copy given up unwritten starts it over. From [`WRITTEN_TO_TRUST`] on, an
    /// exclusive grant is installed writable at once (see `install_grant`).
    exclusive_written: u8,
    /// Exclusive grants installed writable since one was last installed read-only to see
    /// whether it is still written (at most [`TRUSTED_INSTALLS`] in a row).
    trusted_installs: u8,
}

/// Exclusive copies of a page written in a row after which this node installs the next
/// exclusive grant of it writable, without waiting for the write fault.
const WRITTEN_TO_TRUST: u8 = 2;
/// Exclusive grants installed writable in a row before one is installed read-only again, so
/// a page this node stopped writing is noticed (given up unwritten: the manager is told).
const TRUSTED_INSTALLS: u8 = 7;

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
    /// The first node that took ownership of the page from its home for a write (or as an
    /// exclusive copy).
    first_taker: Option<NodeId>,
    /// The page's owner is not asked for copies ahead for this node
    /// (`sc_single_writer_ahead.rs`): another node than [`ManagerPage::first_taker`] took
    /// ownership for a write (two nodes write the page in turns: false sharing, migratory
    /// data), or a copy taken ahead from the owner was invalidated before this node read it.
    /// Either way the copy would take write access from a node about to write the page again.
    owner_ahead_off: bool,
    /// Nodes that asked to read the page: the home pushes them a copy at its barrier
    /// arrivals after writing it (`sc_single_writer_push.rs`).
    consumers: NodeSet,
    /// Pushes left before the consumers must ask again: a read request earns
    /// `push::PUSH_BUDGET` at first, twice the last (up to `push::PUSH_BUDGET_MAX`) when the
    /// consumer asks again after the budget ran out.
    push: crate::budget::Budget,
    /// The home's release epoch (`ScSingleWriter::epoch`) of its last write: a read request
    /// from another node in the same epoch means the page is read while it is written (a
    /// stencil updated in place), not handed over at barriers.
    written_epoch: Option<u64>,
    /// Read after a write in one epoch once: never pushed (a push would only be invalidated
    /// by the next write of the same phase).
    no_push: bool,
    /// This node's barrier arrivals at which it pushed the page after writing it, the last
    /// two (a push of a page taken back whose contents did not change is not counted): two
    /// arrivals apart, the home writes the page every other phase, right after its copies
    /// were dropped (`ScSingleWriter::regain_dropped`).
    pushed_at: [Option<u64>; 2],
    /// Pushes of the page taken back and found unchanged that still count in `pushed_at`.
    unchanged_regains: crate::budget::Budget,
    /// How sure the manager is that the page migrates: raised each time a node that read it
    /// writes it while holding the only copy besides the owner's (the last writer), reset when
    /// another pattern shows. From [`MIGRATORY_CONFIDENCE`] on, read requests move ownership
    /// with an exclusive copy, so the write that follows costs no second request
    /// (migratory-data detection after Cox & Fowler, Stenström et al., ISCA 1993). Reset when a
    /// holder gives an exclusive copy up unwritten (`ProtoMsg::ExclusiveUnused`) or a write
    /// finds other readers.
    migratory: u8,
}

impl ManagerPage {
    /// Whether `me`, the home, could send copies of the page unasked now: it owns the page,
    /// no operation on it is under way or queued, and no other node ever wrote it
    /// (`sc_single_writer_push.rs`).
    fn pushable_by(&self, me: NodeId) -> bool {
        self.owner == me && self.busy.is_none() && self.queue.is_empty() && !self.written_remotely
    }
}

/// Sequential consistency with a single writer and multiple readers; see the module docs.
#[derive(Debug, Default)]
pub struct ScSingleWriter {
    pages: FxHashMap<PageId, NodePage>,
    managed: FxHashMap<PageId, ManagerPage>,
    /// Read-ahead: pages granted unasked behind a sequential read stream (0 = off).
    prefetch: usize,
    /// Fault-around (off by default), see [`ScSingleWriter::with_fault_around`].
    fault_around: FaultAround,
    /// Manager: per reader, its read-ahead stream (see [`Stream`]).
    streams: FxHashMap<NodeId, Stream>,
    /// Messages from this node to itself, handled in place in FIFO order.
    local: VecDeque<ProtoMsg>,
    /// Node side: the page this node last asked its manager for.
    last_request: Option<PageId>,
    /// Node side: remembered pairs, by first page (see [`Pair`]).
    pairs: FxHashMap<PageId, Pair>,
    /// Node side: releases and barrier arrivals of this node so far (the release epoch).
    epoch: u64,
    /// Node side: the minimum hold (see [`Holds`]).
    holds: Holds,
    /// Producer–consumer push at barrier arrivals (`sc_single_writer_push.rs`).
    push: bool,
    /// Pages homed here that this node wrote since its last barrier arrival and that have
    /// consumers: pushed at the next one.
    to_push: BTreeSet<PageId>,
    /// Node side: barrier arrivals of this node so far.
    arrivals: u64,
    /// Pushed pages homed here whose copies were all dropped since: write access is taken at
    /// this node's next barrier departure (`ScSingleWriter::regain_dropped`).
    regain_at_depart: BTreeSet<PageId>,
    /// Pages homed here taken back writable at the last departure, with their digest then
    /// (`ScSingleWriter::regain_dropped`).
    regained: BTreeMap<PageId, u64>,
    /// Pushed copies received since this node's last barrier departure that this node
    /// expects to drop (`NodePage::drop_after_use`): their phase of use is the next one.
    drop_after_next: BTreeSet<PageId>,
    /// Copies to drop at this node's next barrier arrival, before their home writes them
    /// again: pushed copies had through a whole phase (since the departure before the last),
    /// and copies fetched in this phase (`NodePage::drop_after_use`).
    drop_at_arrival: BTreeSet<PageId>,
    /// Manager: grants around write requests while this node waits at a barrier
    /// (`sc_single_writer_around.rs`).
    around: GrantAround,
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

    /// With the minimum hold of `ns` (see [`Holds`]; 0 = off). Needs a context with a clock
    /// (`Context::now`) and a caller of [`Protocol::on_timer`].
    pub fn with_hold(mut self, ns: u64) -> Self {
        self.holds.hold_ns = ns;
        self
    }

    /// With the producer–consumer push at barrier arrivals (`sc_single_writer_push.rs`).
    pub fn with_push(mut self) -> Self {
        self.push = true;
        self
    }

    /// With grants around write requests while this node waits at a barrier, in aligned
    /// blocks of `pages` pages (`sc_single_writer_around.rs`; 0 or 1 = off).
    pub fn with_grant_around(mut self, pages: usize) -> Self {
        self.around.block = pages as u64;
        self
    }

    /// As [`ScSingleWriter::with_grant_around`], granting around once a node made `requests`
    /// write requests since this node's barrier arrival (the default is 4; the conformance
    /// suite grants from the first, to reach the case in its short programs).
    pub fn with_grant_around_after(mut self, pages: usize, requests: u32) -> Self {
        self.around.block = pages as u64;
        self.around.after_requests = requests;
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
            paired: false,
            around: false,
            lost_in: None,
            drop_pending: false,
            pushed_copy: false,
            drop_after_use: false,
            dropped_at: None,
            probe: Probe::Off,
            exclusive_written: 0,
            trusted_installs: 0,
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
            first_taker: None,
            owner_ahead_off: false,
            consumers: NodeSet::new(),
            push: Default::default(),
            written_epoch: None,
            no_push: false,
            pushed_at: [None; 2],
            unchanged_regains: Default::default(),
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
            if let Some(np) = attach.and_then(|page| self.pages.get_mut(&page)) {
                // A copy leaves: the page is no longer this node's only copy.
                np.probe = Probe::Off;
            }
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
        let np = self.node_page(ctx, page);
        np.access = access;
        np.probe = Probe::Off;
        out.push(Action::SetAccess { page, access });
    }

    /// Handles the messages this node sent to itself, in order.
    fn drain_local(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        while let Some(msg) = self.local.pop_front() {
            self.handle(ctx, ctx.me(), &msg, out);
        }
    }

    fn handle(&mut self, ctx: &dyn Context, from: NodeId, msg: &ProtoMsg, out: &mut Vec<Action>) {
        if let ProtoMsg::FwdRead { page, .. }
        | ProtoMsg::FwdWrite { page, .. }
        | ProtoMsg::FwdExclusive { page, .. } = *msg
        {
            if let Some(keep) = self.holds.keeps(ctx, page, hold::fwd_requester(msg)) {
                self.holds.deferred.push((from, msg.clone()));
                self.count_kept(keep);
                if keep == hold::Keep::Hold {
                    self.probe_hold(ctx, page, out);
                }
                return;
            }
        }
        match *msg {
            // ---- manager side ----
            ProtoMsg::ReadReq { page } => self.mgr_request(ctx, page, from, Access::Read, out),
            ProtoMsg::WriteReq { page } => self.mgr_request(ctx, page, from, Access::Write, out),
            ProtoMsg::InvalAck { page } => self.mgr_inval_ack(ctx, page, out),
            ProtoMsg::Done { page } => self.mgr_done(ctx, page, from, out),
            ProtoMsg::ExclusiveWritten { page } => self.around_written(page),
            ProtoMsg::ExclusiveUnused { page } => {
                self.around_unwritten(page);
                if let Some(m) = self.managed.get_mut(&page) {
                    m.migratory = 0;
                }
            }
            // ---- node side ----
            ProtoMsg::FwdRead { page, to } => {
                self.exclusive_given_up(ctx, page, out);
                if self.node_page(ctx, page).access == Access::Write {
                    self.set_access(ctx, page, Access::Read, out);
                    self.access_taken(ctx, page);
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
                self.forget_unused_pair(ctx, page);
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
                let np = self.node_page(ctx, page);
                if np.access != Access::None {
                    // A pushed copy the home's next write takes: drop the next one after use.
                    np.drop_after_use |= std::mem::take(&mut np.pushed_copy);
                    self.stats.invalidations += 1;
                    self.access_taken(ctx, page);
                }
                self.set_access(ctx, page, Access::None, out);
                self.send(ctx, from, ProtoMsg::InvalAck { page }, None, out);
            }
            ProtoMsg::Grant {
                page,
                access,
                with_data,
            } => {
                // A read copy nobody here asked for: sent ahead by the manager.
                let unasked = access == Access::Read
                    && self
                        .pages
                        .get(&page)
                        .is_none_or(|np| np.access == Access::None && np.outstanding.is_none());
                self.install_grant(ctx, page, access, with_data, false, from, out);
                if unasked && self.node_page(ctx, page).access == Access::Read {
                    self.stats.pages_read_ahead += 1;
                }
                self.note_fetched_copy(ctx, page);
            }
            ProtoMsg::GrantExclusive { page, with_data } => {
                let unasked = self
                    .pages
                    .get(&page)
                    .is_none_or(|np| np.outstanding.is_none());
                self.install_grant(ctx, page, Access::Read, with_data, true, from, out);
                if unasked {
                    let np = self.node_page(ctx, page);
                    np.around = np.exclusive;
                }
            }
            ProtoMsg::AheadAsk { page, count } => {
                self.send_ahead_copies(ctx, page, count, from, out)
            }
            ProtoMsg::AheadCopy { page } => self.take_ahead_copy(ctx, page, from, out),
            ProtoMsg::Push { page } => self.install_push(ctx, page, from, out),
            ProtoMsg::Dropped { page } => self.mgr_dropped(ctx, page, from, out),
            ProtoMsg::DropAck { page } => self.node_page(ctx, page).drop_pending = false,
            // Multiple-writer traffic never reaches an sc-sw instance (each region has one
            // protocol); a stray one is ignored like any other stray message.
            ProtoMsg::Diffs { .. }
            | ProtoMsg::DiffAck { .. }
            | ProtoMsg::HomeMoved { .. }
            | ProtoMsg::HomeTaken { .. } => {}
        }
    }

    /// This node, the owner, is asked to give `page` up or share it. If it holds the page
    /// through an exclusive grant it never wrote, the page is not migrating after all: the
    /// manager is told so, and grants plain read copies from then on.
    fn exclusive_given_up(&mut self, ctx: &dyn Context, page: PageId, out: &mut Vec<Action>) {
        self.forget_unused_pair(ctx, page);
        let np = self.node_page(ctx, page);
        np.around = false;
        if std::mem::take(&mut np.exclusive) {
            np.exclusive_written = 0;
            np.trusted_installs = 0;
            let home = ctx.home(page);
            self.send(ctx, home, ProtoMsg::ExclusiveUnused { page }, None, out);
        }
    }

    /// Asks the manager for `access` to `page` unless a request that covers it is under way
    /// (a read under way, write wanted: asked once the read copy is in). Whether it asked.
    fn request(
        &mut self,
        ctx: &dyn Context,
        page: PageId,
        access: Access,
        out: &mut Vec<Action>,
    ) -> bool {
        let np = self.node_page(ctx, page);
        match np.outstanding {
            Some(pending) if pending >= access => return false,
            Some(_) => {
                np.upgrade_wanted = true;
                return false;
            }
            None => np.outstanding = Some(access),
        }
        let msg = if access == Access::Write {
            ProtoMsg::WriteReq { page }
        } else {
            ProtoMsg::ReadReq { page }
        };
        self.send(ctx, ctx.home(page), msg, None, out);
        true
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
        let arrivals = self.arrivals;
        let np = self.node_page(ctx, page);
        if access == Access::Write && np.raise_probed() {
            self.stats.hold_probe_rewrites += 1;
            out.push(Action::SetAccess {
                page,
                access: Access::Write,
            });
            return;
        }
        if np.access >= access {
            return; // already granted; the engine wakes the thread itself
        }
        if np.dropped_at.take() == Some(arrivals) {
            np.drop_after_use = false; // the dropped copy was still needed
        }
        let pair_used = std::mem::take(&mut np.paired) && np.exclusive && access == Access::Write;
        let upgrade_here = access == Access::Write && np.exclusive && np.outstanding.is_none();
        if pair_used {
            // Write access asked for through a pair, and used: trust the pair.
            if let Some(pair) = page.checked_sub(1).and_then(|f| self.pairs.get_mut(&f)) {
                pair.trusted = true;
            }
        }
        if upgrade_here {
            self.exclusive_upgrade(ctx, page, out);
            return;
        }
        if self.request(ctx, page, access, out) {
            self.learn_pair(ctx, page, access);
            self.request_paired(ctx, page, out);
        }
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

    fn on_release(&mut self, ctx: &dyn Context, token: u64, out: &mut Vec<Action>) {
        self.end_holds(ctx, out);
        out.push(Action::ReleaseDone {
            token,
            notices: Vec::new(),
        });
    }

    fn on_barrier_arrive(&mut self, ctx: &dyn Context, token: u64, out: &mut Vec<Action>) {
        self.end_holds(ctx, out);
        self.around.arrived();
        self.arrivals += 1;
        self.drop_consumed(ctx, out);
        self.push_written(ctx, out);
        out.push(Action::ReleaseDone {
            token,
            notices: Vec::new(),
        });
    }

    fn on_barrier_depart(
        &mut self,
        ctx: &dyn Context,
        token: u64,
        _notices: &[PageId],
        out: &mut Vec<Action>,
    ) {
        self.around.departed();
        let next = std::mem::take(&mut self.drop_after_next);
        self.drop_at_arrival.extend(next);
        self.regain_dropped(ctx, out);
        out.push(Action::AcquireDone { token });
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

    /// Always: acquires do nothing here, and a release only ends the holds (see [`Holds`]),
    /// which no guarantee depends on. A lock released through the fast path keeps them until
    /// a token leaves this node ([`Protocol::on_token_leaves`]), a slow-path release, or a
    /// barrier: data a release published is only wanted elsewhere once the lock moved.
    /// Closing the fast path while pages were held sent every release of fmm's box locks
    /// through the engine and ended the holds of its particle pages at each (docs/protocols.md,
    /// "Minimum hold"). Barrier arrivals push and drop copies, but pages waiting to be pushed
    /// do not make the state busy either: a barrier through shared memory runs the hooks anyway
    /// (`barrier_hooks_without_messages`), and keeping the lock fast path open matters more
    /// (raytrace's task queues: 8–16× → 15–33× the pthread time while pages waiting to be
    /// pushed closed it).
    fn quiescent(&self) -> bool {
        true
    }

    /// Not while a page is held: a barrier arrival ends every hold, so a barrier through
    /// shared memory must run the hooks then.
    fn barrier_quiescent(&self) -> bool {
        self.holds.until.is_empty()
    }

    /// The holds end before the token leaves, as at a release (see [`Holds`]).
    fn on_token_leaves(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        self.end_holds(ctx, out);
    }

    /// With the push on, a barrier through shared memory runs the hooks: pushes and drops are
    /// messages to the pages' homes and consumers, never to the barrier, and without them
    /// every boundary page of a stencil costs a fault and an invalidation per iteration
    /// (Jacobi over DECK-SCI).
    fn barrier_hooks_without_messages(&self) -> bool {
        self.push
    }

    fn next_timer(&self) -> Option<u64> {
        self.holds.next_timer()
    }

    fn on_timer(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        self.end_due_holds(ctx, out);
    }

    /// A page request may wait at its owner, and a copy stays valid across an acquire: a
    /// lock's pages asked for along with it are used (`SVM_LOCK_PAGES`).
    fn keeps_pages_for_locks(&self) -> bool {
        true
    }

    fn recheck_kept(&mut self, ctx: &dyn Context, out: &mut Vec<Action>) {
        self.recheck_kept_now(ctx, out);
    }

    fn stats(&self) -> ProtocolStats {
        self.stats.clone()
    }

    fn forget(&mut self, pages: std::ops::Range<PageId>) -> bool {
        self.pages.retain(|p, _| !pages.contains(p));
        self.managed.retain(|p, _| !pages.contains(p));
        self.pairs
            .retain(|p, _| !pages.contains(p) && !pages.contains(&(p + 1)));
        if self.last_request.is_some_and(|p| pages.contains(&p)) {
            self.last_request = None;
        }
        self.streams.retain(|_, s| !pages.contains(&s.next));
        for s in self.streams.values_mut() {
            s.unconfirmed.retain(|p| !pages.contains(p));
        }
        self.holds.until.retain(|(_, p)| !pages.contains(p));
        self.holds.probes.retain(|(_, p)| !pages.contains(p));
        self.holds.rechecks.retain(|p| !pages.contains(p));
        self.to_push.retain(|p| !pages.contains(p));
        self.drop_after_next.retain(|p| !pages.contains(p));
        self.drop_at_arrival.retain(|p| !pages.contains(p));
        self.regain_at_depart.retain(|p| !pages.contains(p));
        self.regained.retain(|p, _| !pages.contains(p));
        self.around.forget(&pages);
        self.holds
            .deferred
            .retain(|(_, m)| !pages.contains(&m.page()));
        true
    }

    fn configure(&mut self, opts: &svm_core::protocol::ProtocolOptions) {
        self.prefetch = opts.read_ahead;
        self.fault_around = FaultAround::new(opts.fault_around);
        self.holds.hold_ns = opts.hold_ns;
        self.push = opts.push;
        self.around.block = opts.grant_around as u64;
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
#[path = "sc_single_writer_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "sc_single_writer_hold_tests.rs"]
mod hold_tests;

#[cfg(test)]
#[path = "sc_single_writer_push_tests.rs"]
mod push_tests;

#[cfg(test)]
#[path = "sc_single_writer_ahead_tests.rs"]
mod ahead_tests;

#[cfg(test)]
#[path = "sc_single_writer_around_tests.rs"]
mod around_tests;
