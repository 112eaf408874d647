//! The shared window: layout, arenas, regions and home placement.
//!
//! Layout of the window `[base, base+size)`:
//! - the first half is the *collective* arena: every node makes the same collective allocations
//!   in the same order and therefore gets the same addresses, without messages;
//! - the second half is split into one arena per node: node k allocates there alone (no
//!   messages). The lower half of node k's arena is homed on node k; its upper half is the
//!   *first-touch* part: each of its pages is homed on the first node to touch it (a program
//!   whose master allocates data that the workers then initialise, as SPLASH-2's do, gets each
//!   page homed at its writer). Which part an address lies in follows from the address alone,
//!   so no node needs to hear of another's local allocations.
//!
//! Each collective allocation is a region with a home policy; the region table is identical on
//! every node because collective calls happen in the same order everywhere.

use std::sync::{Mutex, RwLock};

use crate::{NodeId, PageId};

/// Where a region's pages have their home (manager and first owner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Home {
    /// Every page on one node.
    Node(NodeId),
    /// Pages split in `nodes` contiguous blocks, block i on node i.
    Block,
    /// Page i of the region on node `i % nodes`.
    Cyclic,
    /// Page i of the region on `list[i % list.len()]`.
    Custom(Vec<NodeId>),
    /// Consecutive runs: `(node, pages)` in order; pages past the last run belong to the last
    /// run's node (SMI's BLOCKED and CUSTOMIZED layouts).
    Runs(Vec<(NodeId, u64)>),
    /// Each page homed on the first node that touches it (the page's directory node,
    /// `page % nodes`, records the first node to ask).
    FirstTouch,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpaceError {
    #[error("allocation of {bytes} bytes does not fit: {arena} arena has {free} bytes left (raise SVM_SPACE_SIZE)")]
    OutOfSpace {
        bytes: usize,
        arena: &'static str,
        free: usize,
    },
    #[error("allocation of 0 bytes")]
    Empty,
    #[error("home node {node} does not exist in a job of {nodes} nodes")]
    BadHome { node: NodeId, nodes: NodeId },
    #[error("{what} is not supported yet; use Home::Node, Block, Cyclic, Custom or Runs")]
    NotSupported { what: &'static str },
    #[error("{addr:#x} is not the start of a live allocation of this node")]
    BadFree { addr: usize },
}

/// Page ids of static segments start here (window pages are numbered from 0).
pub const STATIC_PAGE_BASE: PageId = 1 << 48;

/// A static segment of the program (its writable data) managed like the window.
#[derive(Debug)]
struct StaticSeg {
    base: usize,
    size: usize,
    first: PageId,
    home: NodeId,
    /// Contents at take-over, on the home only: what the home's pages hold until first written.
    initial: Option<Vec<u8>>,
}

#[derive(Debug, Clone)]
struct Region {
    start: PageId,
    end: PageId,
    home: Home,
    /// Protocol id (`crate::protocol::PROTOCOL_NAMES`) of the region's pages.
    proto: u8,
}

/// A deterministic first-fit allocator over an address range (also used for allocations
/// inside regions, `crate::region`).
#[derive(Debug)]
pub(crate) struct Arena {
    end: usize,
    top: usize,
    /// Freed blocks (addr, len) available for reuse, and live blocks.
    free: Vec<(usize, usize)>,
    live: rustc_hash::FxHashMap<usize, usize>,
}

impl Arena {
    pub(crate) fn new(start: usize, end: usize) -> Arena {
        Arena {
            end,
            top: start,
            free: Vec::new(),
            live: Default::default(),
        }
    }

    pub(crate) fn alloc(
        &mut self,
        bytes: usize,
        align: usize,
        name: &'static str,
    ) -> Result<usize, SpaceError> {
        let len = bytes.div_ceil(align) * align;
        // Lowest-address first fit in a sorted free list: deterministic, so nodes making the
        // same calls in the same order get the same addresses.
        if let Some(i) = self
            .free
            .iter()
            .position(|&(a, l)| l >= len && a % align == 0)
        {
            let (a, l) = self.free[i];
            if l > len {
                self.free[i] = (a + len, l - len);
            } else {
                self.free.remove(i);
            }
            self.live.insert(a, len);
            return Ok(a);
        }
        let a = self.top.div_ceil(align) * align;
        if a.checked_add(len).is_none_or(|e| e > self.end) {
            return Err(SpaceError::OutOfSpace {
                bytes,
                arena: name,
                free: self.end.saturating_sub(a),
            });
        }
        if a > self.top {
            // The alignment gap stays usable.
            let gap = (self.top, a - self.top);
            self.top = a;
            self.give_back(gap.0, gap.1);
        }
        self.top = a + len;
        self.live.insert(a, len);
        Ok(a)
    }

    pub(crate) fn free(&mut self, addr: usize) -> Result<usize, SpaceError> {
        let len = self
            .live
            .remove(&addr)
            .ok_or(SpaceError::BadFree { addr })?;
        self.give_back(addr, len);
        Ok(len)
    }

    /// Returns `[addr, addr+len)` to the free list, merged with free neighbours; a free block
    /// that reaches the top lowers the top instead.
    fn give_back(&mut self, addr: usize, len: usize) {
        let i = self.free.partition_point(|&(a, _)| a < addr);
        let (mut a, mut l) = (addr, len);
        let mut at = i;
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == a {
            at = i - 1;
            a = self.free[at].0;
            l += self.free[at].1;
            self.free.remove(at);
        }
        if at < self.free.len() && a + l == self.free[at].0 {
            l += self.free[at].1;
            self.free.remove(at);
        }
        if a + l == self.top {
            self.top = a;
        } else {
            self.free.insert(at, (a, l));
        }
    }
}

/// The layout and allocators of one node's view of the window.
#[derive(Debug)]
pub struct Space {
    base: usize,
    size: usize,
    page_size: usize,
    page_shift: u32,
    me: NodeId,
    nodes: NodeId,
    node_arena_size: usize,
    /// Offset in each node's arena of its first-touch part (half the arena, page aligned).
    first_touch_offset: usize,
    collective: Mutex<Arena>,
    /// The collective arena's allocation top, published after the region table is updated:
    /// read on every incoming protocol message without taking the arena's lock.
    collective_top: std::sync::atomic::AtomicUsize,
    local: Mutex<Arena>,
    /// This node's first-touch part of its arena.
    local_first_touch: Mutex<Arena>,
    regions: RwLock<Vec<Region>>,
    statics: Vec<StaticSeg>,
    /// Homes of first-touch pages known here: pages this node touched, and on a page's
    /// directory node every page it assigned.
    first_touch: RwLock<rustc_hash::FxHashMap<PageId, NodeId>>,
    /// Protocol of pages outside any region with its own (`SVM_PROTOCOL`).
    default_proto: u8,
}

/// Alignment of small allocations (pages for anything of a page or more).
const SMALL_ALIGN: usize = 64;

impl Space {
    pub fn new(base: usize, size: usize, page_size: usize, me: NodeId, nodes: NodeId) -> Space {
        let half = (size / 2) / page_size * page_size;
        let node_arena_size = ((size - half) / nodes as usize) / page_size * page_size;
        let my_start = base + half + me as usize * node_arena_size;
        let first_touch_offset = (node_arena_size / 2) / page_size * page_size;
        let my_first_touch = my_start + first_touch_offset;
        Space {
            base,
            size,
            page_size,
            page_shift: page_size.trailing_zeros(),
            me,
            nodes,
            node_arena_size,
            first_touch_offset,
            collective: Mutex::new(Arena::new(base, base + half)),
            collective_top: std::sync::atomic::AtomicUsize::new(base),
            local: Mutex::new(Arena::new(my_start, my_first_touch)),
            local_first_touch: Mutex::new(Arena::new(my_first_touch, my_start + node_arena_size)),
            regions: RwLock::new(Vec::new()),
            statics: Vec::new(),
            first_touch: RwLock::new(Default::default()),
            default_proto: 0,
        }
    }

    /// Sets the protocol id of pages outside regions with a protocol of their own.
    pub fn set_default_protocol(&mut self, proto: u8) {
        self.default_proto = proto;
    }

    /// Protocol id of a page.
    pub fn proto_of(&self, page: PageId) -> u8 {
        if page >= STATIC_PAGE_BASE {
            return self.default_proto;
        }
        let regions = self.regions.read().unwrap_or_else(|p| p.into_inner());
        let i = regions.partition_point(|r| r.end <= page);
        match regions.get(i) {
            Some(r) if r.start <= page => r.proto,
            _ => self.default_proto,
        }
    }

    /// Adds a static segment `[base, base+size)` (page aligned) homed on `home`; `initial` is
    /// its contents at take-over (kept on the home only).
    pub fn add_static(&mut self, base: usize, size: usize, home: NodeId, initial: Vec<u8>) {
        let first = self
            .statics
            .last()
            .map(|s| s.first + (s.size / self.page_size) as u64)
            .unwrap_or(STATIC_PAGE_BASE);
        let initial = (home == self.me).then_some(initial);
        self.statics.push(StaticSeg {
            base,
            size,
            first,
            home,
            initial,
        });
    }

    fn static_of_addr(&self, addr: usize) -> Option<&StaticSeg> {
        self.statics
            .iter()
            .find(|s| addr >= s.base && addr < s.base + s.size)
    }

    fn static_of_page(&self, page: PageId) -> Option<&StaticSeg> {
        self.statics
            .iter()
            .find(|s| page >= s.first && page < s.first + (s.size / self.page_size) as u64)
    }

    /// The contents a static page had at take-over, on its home (None elsewhere and for window
    /// pages, which start as zeros).
    pub fn initial_contents(&self, page: PageId) -> Option<&[u8]> {
        let s = self.static_of_page(page)?;
        let off = ((page - s.first) as usize) * self.page_size;
        s.initial.as_ref().map(|v| &v[off..off + self.page_size])
    }

    pub fn base(&self) -> usize {
        self.base
    }
    pub fn size(&self) -> usize {
        self.size
    }
    pub fn page_size(&self) -> usize {
        self.page_size
    }
    pub fn nodes(&self) -> NodeId {
        self.nodes
    }

    /// Whether `addr` is shared memory: in the window or in a static segment.
    pub fn contains(&self, addr: usize) -> bool {
        (addr >= self.base && addr < self.base + self.size) || self.static_of_addr(addr).is_some()
    }
    /// Page id of a shared address (see [`Space::contains`]).
    pub fn page_of(&self, addr: usize) -> PageId {
        if addr >= self.base && addr < self.base + self.size {
            return ((addr - self.base) >> self.page_shift) as PageId;
        }
        match self.static_of_addr(addr) {
            Some(s) => s.first + ((addr - s.base) >> self.page_shift) as PageId,
            None => panic!("address {addr:#x} is not shared memory"),
        }
    }
    /// Address of a page.
    pub fn page_addr(&self, page: PageId) -> usize {
        if page >= STATIC_PAGE_BASE {
            if let Some(s) = self.static_of_page(page) {
                return s.base + (((page - s.first) as usize) << self.page_shift);
            }
        }
        self.base + ((page as usize) << self.page_shift)
    }
    fn collective_end(&self) -> usize {
        self.base + (self.size / 2) / self.page_size * self.page_size
    }

    /// Home (manager) of a page.
    pub fn home(&self, page: PageId) -> NodeId {
        if page >= STATIC_PAGE_BASE {
            return self.static_of_page(page).map(|s| s.home).unwrap_or(0);
        }
        let addr = self.page_addr(page);
        let cend = self.collective_end();
        if addr >= cend {
            if self.in_first_touch_part(addr) {
                return self.first_touch_home(page);
            }
            return (((addr - cend) / self.node_arena_size) as NodeId).min(self.nodes - 1);
        }
        let regions = self.regions.read().unwrap_or_else(|p| p.into_inner());
        let i = regions.partition_point(|r| r.end <= page);
        match regions.get(i) {
            Some(r) if r.start <= page => {
                let off = page - r.start;
                match &r.home {
                    Home::Node(n) => *n,
                    Home::Cyclic => (off % self.nodes as u64) as NodeId,
                    Home::Block => {
                        let per = (r.end - r.start).div_ceil(self.nodes as u64).max(1);
                        ((off / per) as NodeId).min(self.nodes - 1)
                    }
                    Home::Custom(list) => list[(off % list.len() as u64) as usize],
                    Home::Runs(runs) => {
                        let mut left = off;
                        let mut home = runs.last().map(|r| r.0).unwrap_or(0);
                        for &(node, pages) in runs {
                            if left < pages {
                                home = node;
                                break;
                            }
                            left -= pages;
                        }
                        home
                    }
                    Home::FirstTouch => self.first_touch_home(page),
                }
            }
            _ => 0,
        }
    }

    /// Home of a first-touch page as known here.
    fn first_touch_home(&self, page: PageId) -> NodeId {
        let homes = self.first_touch.read().unwrap_or_else(|p| p.into_inner());
        // Not known here yet: this node never touched the page, so no node it deals with
        // about the page is this one; any other node is right.
        homes
            .get(&page)
            .copied()
            .unwrap_or(if self.me == 0 { 1 } else { 0 })
    }

    fn first_touch_known(&self, page: PageId) -> bool {
        self.first_touch
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&page)
    }

    /// Whether the address of a node arena lies in that arena's first-touch part.
    fn in_first_touch_part(&self, addr: usize) -> bool {
        let cend = self.collective_end();
        addr >= cend && (addr - cend) % self.node_arena_size >= self.first_touch_offset
    }

    /// What the fault path needs about a page, from one look at the region table: its
    /// protocol, and whether it is a first-touch page whose home this node does not know yet.
    pub fn fault_route(&self, page: PageId) -> (u8, bool) {
        if page >= STATIC_PAGE_BASE {
            return (self.default_proto, false);
        }
        if self.in_first_touch_part(self.page_addr(page)) {
            return (self.default_proto, !self.first_touch_known(page));
        }
        let regions = self.regions.read().unwrap_or_else(|p| p.into_inner());
        let i = regions.partition_point(|r| r.end <= page);
        match regions.get(i) {
            Some(r) if r.start <= page => {
                let unresolved = r.home == Home::FirstTouch && !self.first_touch_known(page);
                (r.proto, unresolved)
            }
            _ => (self.default_proto, false),
        }
    }

    /// Whether `page` is a first-touch page whose home this node does not know yet.
    pub fn home_unresolved(&self, page: PageId) -> bool {
        if page >= STATIC_PAGE_BASE {
            return false;
        }
        if self.in_first_touch_part(self.page_addr(page)) {
            return !self.first_touch_known(page);
        }
        let regions = self.regions.read().unwrap_or_else(|p| p.into_inner());
        let i = regions.partition_point(|r| r.end <= page);
        match regions.get(i) {
            Some(r) if r.start <= page && r.home == Home::FirstTouch => {
                !self.first_touch_known(page)
            }
            _ => false,
        }
    }

    /// Directory of a first-touch page: the node that decides its home.
    pub fn directory(&self, page: PageId) -> NodeId {
        (page % self.nodes as u64) as NodeId
    }

    /// Directory side: the home of `page`, assigning `asker` if it has none yet.
    pub fn assign_first_touch(&self, page: PageId, asker: NodeId) -> NodeId {
        *self
            .first_touch
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(page)
            .or_insert(asker)
    }

    /// Records the home of a first-touch page learnt from its directory.
    pub fn learn_first_touch(&self, page: PageId, home: NodeId) {
        self.first_touch
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(page, home);
    }

    /// Whether pages `a` and `b` lie in one allocated region: the same collective allocation,
    /// the same static segment, or the allocated part of the same node's arena (for another
    /// node's arena, just the same arena: its allocation top is not known here).
    pub fn same_region(&self, a: PageId, b: PageId) -> bool {
        if a >= STATIC_PAGE_BASE || b >= STATIC_PAGE_BASE {
            return match (self.static_of_page(a), self.static_of_page(b)) {
                (Some(x), Some(y)) => std::ptr::eq(x, y),
                _ => false,
            };
        }
        let (aa, ba) = (self.page_addr(a), self.page_addr(b));
        let cend = self.collective_end();
        if aa < cend || ba < cend {
            if aa >= cend || ba >= cend {
                return false;
            }
            let regions = self.regions.read().unwrap_or_else(|p| p.into_inner());
            let i = regions.partition_point(|r| r.end <= a);
            return regions.get(i).is_some_and(|r| {
                r.start <= a && b >= r.start && b < r.end && r.home != Home::FirstTouch
            });
        }
        // First-touch pages may have different homes, as in a first-touch region.
        if self.in_first_touch_part(aa) || self.in_first_touch_part(ba) {
            return false;
        }
        let arena = |addr: usize| (addr - cend) / self.node_arena_size;
        if arena(aa) != arena(ba) {
            return false;
        }
        if arena(aa) == self.me as usize {
            let top = self.local.lock().unwrap_or_else(|p| p.into_inner()).top;
            return ba < top;
        }
        true
    }

    /// True if `page` lies in the collective arena above everything this node has allocated
    /// there so far: another node is ahead of us in the collective call sequence, and requests
    /// for it must wait until we catch up (its home is not known yet).
    pub fn is_unknown_collective(&self, page: PageId) -> bool {
        if page >= STATIC_PAGE_BASE {
            return false;
        }
        let addr = self.page_addr(page);
        if addr >= self.collective_end() {
            return false;
        }
        addr >= self
            .collective_top
            .load(std::sync::atomic::Ordering::Acquire)
    }

    fn check_home(&self, home: &Home) -> Result<(), SpaceError> {
        let bad = |n: NodeId| {
            if n >= self.nodes {
                Err(SpaceError::BadHome {
                    node: n,
                    nodes: self.nodes,
                })
            } else {
                Ok(())
            }
        };
        match home {
            Home::Node(n) => bad(*n),
            Home::Custom(list) if list.is_empty() => Err(SpaceError::Empty),
            Home::Custom(list) => list.iter().try_for_each(|n| bad(*n)),
            Home::Runs(runs) if runs.is_empty() => Err(SpaceError::Empty),
            Home::Runs(runs) => runs.iter().try_for_each(|(n, _)| bad(*n)),
            Home::FirstTouch => Ok(()),
            _ => Ok(()),
        }
    }

    /// Collective allocation: must be called by every node in the same order with the same
    /// arguments. Page-aligned so regions never share a page.
    pub fn alloc_collective(&self, bytes: usize, home: Home) -> Result<usize, SpaceError> {
        self.alloc_collective_proto(bytes, home, self.default_proto)
    }

    /// [`Space::alloc_collective`] for a region whose pages use protocol `proto`.
    pub fn alloc_collective_proto(
        &self,
        bytes: usize,
        home: Home,
        proto: u8,
    ) -> Result<usize, SpaceError> {
        if bytes == 0 {
            return Err(SpaceError::Empty);
        }
        self.check_home(&home)?;
        let mut a = self.collective.lock().unwrap_or_else(|p| p.into_inner());
        let addr = a.alloc(bytes, self.page_size, "the collective")?;
        let len = a.live[&addr];
        // Publish the region before the top moves past it for other threads' `is_unknown` checks.
        let start = self.page_of(addr);
        let end = start + (len / self.page_size) as u64;
        let mut regions = self.regions.write().unwrap_or_else(|p| p.into_inner());
        regions.retain(|r| r.end <= start || r.start >= end);
        let i = regions.partition_point(|r| r.end <= start);
        regions.insert(
            i,
            Region {
                start,
                end,
                home,
                proto,
            },
        );
        drop(regions);
        self.collective_top
            .store(a.top, std::sync::atomic::Ordering::Release);
        Ok(addr)
    }

    /// The page range `[start, end)` of the live collective allocation starting at `addr`.
    pub fn collective_pages(&self, addr: usize) -> Result<std::ops::Range<PageId>, SpaceError> {
        let a = self.collective.lock().unwrap_or_else(|p| p.into_inner());
        let len = *a.live.get(&addr).ok_or(SpaceError::BadFree { addr })?;
        let start = self.page_of(addr);
        Ok(start..start + (len / self.page_size) as u64)
    }

    /// Collective free (same order on every node): the region leaves the table and its range
    /// goes back to the collective arena for reuse. The caller has made every node forget the
    /// pages first (`Node::forget_pages`).
    pub fn free_collective(&self, addr: usize) -> Result<(), SpaceError> {
        let pages = self.collective_pages(addr)?;
        let mut a = self.collective.lock().unwrap_or_else(|p| p.into_inner());
        let mut regions = self.regions.write().unwrap_or_else(|p| p.into_inner());
        regions.retain(|r| r.start != pages.start);
        self.first_touch
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|p, _| !pages.contains(p));
        drop(regions);
        a.free(addr)?;
        self.collective_top
            .store(a.top, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Bytes between the collective arena's start and its allocation top (what collective
    /// allocations occupy, free blocks below the top included).
    pub fn collective_used(&self) -> usize {
        self.collective_top
            .load(std::sync::atomic::Ordering::Acquire)
            .saturating_sub(self.base)
    }

    /// Local allocation in this node's arena (no messages; home = this node).
    pub fn alloc_local(&self, bytes: usize) -> Result<usize, SpaceError> {
        self.alloc_in(&self.local, bytes, "this node's")
    }

    /// Local allocation in this node's first-touch part (no messages; each page homed on the
    /// first node that touches it).
    pub fn alloc_local_first_touch(&self, bytes: usize) -> Result<usize, SpaceError> {
        self.alloc_in(&self.local_first_touch, bytes, "this node's first-touch")
    }

    fn alloc_in(
        &self,
        arena: &Mutex<Arena>,
        bytes: usize,
        name: &'static str,
    ) -> Result<usize, SpaceError> {
        if bytes == 0 {
            return Err(SpaceError::Empty);
        }
        let align = if bytes >= self.page_size {
            self.page_size
        } else {
            SMALL_ALIGN
        };
        arena
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .alloc(bytes, align, name)
    }

    /// Frees an allocation of [`Space::alloc_local`] or [`Space::alloc_local_first_touch`].
    /// The homes of freed first-touch pages stay what they were: every node already agrees on
    /// them, and a reuse of the memory finds them there.
    pub fn free_local(&self, addr: usize) -> Result<(), SpaceError> {
        let arena = if self.in_first_touch_part(addr) {
            &self.local_first_touch
        } else {
            &self.local
        };
        arena
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .free(addr)
            .map(|_| ())
    }

    pub fn me(&self) -> NodeId {
        self.me
    }
}

#[cfg(test)]
#[path = "space_tests.rs"]
mod tests;
