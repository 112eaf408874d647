//! What one node records while profiling, and the part file it writes at finish.

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::clock::ClockStart;
use super::sites::{self, Captured};
use super::trace::{Ev, TraceBuf};
use crate::stats::Histogram;
use crate::{Access, NodeId, PageId};

/// Most lock grant times kept per node (for counting transfers between nodes); later grants
/// are counted but not timed.
const MAX_GRANTS: usize = 1 << 20;
/// Most barrier episodes kept per barrier and node.
const MAX_EPISODES: usize = 1 << 16;

/// One page as seen by one node.
#[derive(Debug, Default)]
struct PageRec {
    read_faults: u64,
    write_faults: u64,
    /// Write faults on a page this node held readable after reading it (read, then write).
    upgrades: u64,
    /// Write faults taken while a thread of this node held a lock.
    locked_writes: u64,
    remote_faults: u64,
    fault_ns: u64,
    fetches: u64,
    invalidations: u64,
    diff_sent: u64,
    diff_applied: u64,
    /// This node read-faulted the page since it last lost it.
    read_since_loss: bool,
    /// Bytes this node changed (bit per byte), once it changed any.
    written: Option<Box<[u64]>>,
}

#[derive(Debug, Default)]
struct LockRec {
    acquisitions: u64,
    wait_ns: u64,
    hist: Histogram,
    grants: Vec<u64>,
}

/// One node's recording.
pub struct Recorder {
    pub(super) me: NodeId,
    pub(super) nodes: NodeId,
    page_size: usize,
    pub(super) profile_path: Option<PathBuf>,
    pub(super) trace_path: Option<PathBuf>,
    /// The clocks at the recorder's start (the node's start).
    clock: ClockStart,
    pages: FxHashMap<PageId, PageRec>,
    /// Contents of each page this node holds writable, as they were when it got write access
    /// (patched by diffs from others): comparing them tells which bytes this node changed.
    snaps: FxHashMap<PageId, Box<[u8]>>,
    locks: FxHashMap<u64, LockRec>,
    barriers: FxHashMap<u64, Vec<(u64, u64)>>,
    pub(super) sites: Vec<Captured>,
    page_wait_ns: u64,
    lock_wait_ns: u64,
    barrier_wait_ns: u64,
    trace: Option<TraceBuf>,
    scratch: Vec<u8>,
    /// Locks the threads of this node hold now.
    pub(super) locks_held: u64,
    /// Snapshot buffers to reuse.
    spare: Vec<Box<[u8]>>,
}

impl Recorder {
    pub fn new(
        me: NodeId,
        nodes: NodeId,
        page_size: usize,
        profile_path: Option<PathBuf>,
        trace_path: Option<PathBuf>,
    ) -> Recorder {
        let clock = ClockStart::now();
        Recorder {
            me,
            nodes,
            page_size,
            trace: trace_path.as_ref().map(|_| TraceBuf::new(clock.mono0_ns)),
            profile_path,
            trace_path,
            clock,
            pages: FxHashMap::default(),
            snaps: FxHashMap::default(),
            locks: FxHashMap::default(),
            barriers: FxHashMap::default(),
            sites: Vec::new(),
            page_wait_ns: 0,
            lock_wait_ns: 0,
            barrier_wait_ns: 0,
            scratch: vec![0; page_size],
            locks_held: 0,
            spare: Vec::new(),
        }
    }

    pub(super) fn fault(&mut self, page: PageId, write: bool, before: Access) {
        let p = self.pages.entry(page).or_default();
        if write {
            p.write_faults += 1;
            if before == Access::Read && p.read_since_loss {
                p.upgrades += 1;
            } else if self.locks_held > 0 {
                p.locked_writes += 1;
            }
        } else {
            p.read_faults += 1;
            p.read_since_loss = true;
        }
    }

    pub(super) fn fault_served(
        &mut self,
        page: PageId,
        write: bool,
        since: u64,
        now: u64,
        tid: u32,
        remote: bool,
    ) {
        let dt = now.saturating_sub(since);
        let p = self.pages.entry(page).or_default();
        p.fault_ns += dt;
        if remote {
            p.remote_faults += 1;
        }
        self.page_wait_ns += dt;
        if let Some(t) = &mut self.trace {
            t.push(Ev::Fault {
                page,
                write,
                remote,
                start: since,
                dur: dt,
                tid,
            });
        }
    }

    fn mark_written(&mut self, page: PageId, old: &[u8], cur: &[u8]) {
        let ps = self.page_size;
        if old == cur {
            return;
        }
        let mut mask: Option<Box<[u64]>> = None;
        // Compare 8 bytes at a time; mark the bytes of words that differ.
        let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().expect("8-byte chunk"));
        for (w, (a, b)) in old.chunks_exact(8).zip(cur.chunks_exact(8)).enumerate() {
            if word(a) == word(b) {
                continue;
            }
            let m = mask.get_or_insert_with(|| vec![0u64; ps.div_ceil(64)].into_boxed_slice());
            for (k, (x, y)) in a.iter().zip(b).enumerate() {
                if x != y {
                    let i = w * 8 + k;
                    m[i / 64] |= 1 << (i % 64);
                }
            }
        }
        if let Some(m) = mask {
            let p = self.pages.entry(page).or_default();
            match &mut p.written {
                Some(w) => w.iter_mut().zip(m.iter()).for_each(|(a, b)| *a |= b),
                None => p.written = Some(m),
            }
        }
    }

    /// Compares the page with its snapshot (this node is about to lose write access).
    fn compare(&mut self, page: PageId, read: &mut dyn FnMut(&mut [u8])) {
        if let Some(snap) = self.snaps.remove(&page) {
            let mut cur = std::mem::take(&mut self.scratch);
            read(&mut cur);
            self.mark_written(page, &snap, &cur);
            self.scratch = cur;
            self.spare.push(snap);
        }
    }

    fn snapshot_buf(&mut self) -> Box<[u8]> {
        self.spare
            .pop()
            .unwrap_or_else(|| vec![0u8; self.page_size].into_boxed_slice())
    }

    pub(super) fn access_change(
        &mut self,
        page: PageId,
        old: Access,
        new: Access,
        read: &mut dyn FnMut(&mut [u8]),
    ) {
        if old == Access::Write && new < Access::Write {
            self.compare(page, read);
        }
        if new == Access::Write && old < Access::Write {
            let mut snap = self.snapshot_buf();
            read(&mut snap);
            self.snaps.insert(page, snap);
        }
        if new == Access::None && old > Access::None {
            let p = self.pages.entry(page).or_default();
            p.invalidations += 1;
            p.read_since_loss = false;
        }
    }

    pub(super) fn install(
        &mut self,
        page: PageId,
        old: Access,
        new: Access,
        data: &[u8],
        read: &mut dyn FnMut(&mut [u8]),
    ) {
        if old == Access::Write {
            self.compare(page, read);
        }
        if new == Access::Write && data.len() == self.page_size {
            let mut snap = self.snapshot_buf();
            snap.copy_from_slice(data);
            self.snaps.insert(page, snap);
        }
        self.pages.entry(page).or_default().fetches += 1;
    }

    pub(super) fn diff_applied(&mut self, page: PageId, runs: &[(usize, &[u8])]) {
        let n: usize = runs.iter().map(|(_, b)| b.len()).sum();
        self.pages.entry(page).or_default().diff_applied += n as u64;
        // Bytes another node wrote are not this node's writes.
        if let Some(s) = self.snaps.get_mut(&page) {
            for (off, b) in runs {
                if let Some(d) = s.get_mut(*off..off + b.len()) {
                    d.copy_from_slice(b);
                }
            }
        }
    }

    pub(super) fn diff_sent(&mut self, page: PageId, bytes: usize) {
        self.pages.entry(page).or_default().diff_sent += bytes as u64;
    }

    pub(super) fn message(
        &mut self,
        kind: &'static str,
        peer: NodeId,
        bytes: u64,
        out: bool,
        seq: u32,
    ) {
        if let Some(t) = &mut self.trace {
            t.push(Ev::Msg {
                kind,
                peer,
                bytes,
                out,
                seq,
                at: crate::sys::segv::now_ns(),
            });
        }
    }

    pub(super) fn lock_acquired(&mut self, id: u64, t0: u64, now: u64) {
        let dt = now.saturating_sub(t0);
        let real = self.clock.real(now);
        let l = self.locks.entry(id).or_default();
        l.acquisitions += 1;
        self.locks_held += 1;
        l.wait_ns += dt;
        l.hist.record(dt);
        if l.grants.len() < MAX_GRANTS {
            l.grants.push(real);
        }
        self.lock_wait_ns += dt;
        if let Some(t) = &mut self.trace {
            t.push(Ev::Lock {
                id,
                start: t0,
                dur: dt,
            });
        }
    }

    pub(super) fn barrier_passed(&mut self, id: u64, t0: u64, now: u64) {
        let dt = now.saturating_sub(t0);
        let (a, d) = (self.clock.real(t0), self.clock.real(now));
        let b = self.barriers.entry(id).or_default();
        if b.len() < MAX_EPISODES {
            b.push((a, d));
        }
        self.barrier_wait_ns += dt;
        if let Some(t) = &mut self.trace {
            t.push(Ev::Barrier {
                id,
                start: t0,
                dur: dt,
            });
        }
    }

    /// Compares every page still held writable with its snapshot.
    pub(super) fn flush_writes(&mut self, read: &mut dyn FnMut(PageId, &mut [u8])) {
        let pages: Vec<PageId> = self.snaps.keys().copied().collect();
        for page in pages {
            self.compare(page, &mut |buf| read(page, buf));
        }
    }

    /// This node's part of the report (call sites and static symbols resolved here), and its
    /// trace events.
    pub(super) fn into_parts(
        self,
        stats: &crate::stats::Stats,
        space: &crate::space::Space,
    ) -> (NodePart, Option<TraceBuf>) {
        let wall_ns = crate::sys::segv::now_ns().saturating_sub(self.clock.mono0_ns);
        let statics: Vec<(PageId, usize)> = self
            .pages
            .keys()
            .filter(|p| **p >= crate::space::STATIC_PAGE_BASE)
            .map(|p| (*p, space.page_addr(*p)))
            .collect();
        let symbols = sites::static_symbols(&statics, self.page_size);
        let mut pages: Vec<PagePart> = self
            .pages
            .into_iter()
            .map(|(page, r)| PagePart {
                page,
                addr: space.page_addr(page),
                home: space.home(page),
                read_faults: r.read_faults,
                write_faults: r.write_faults,
                upgrades: r.upgrades,
                locked_writes: r.locked_writes,
                remote_faults: r.remote_faults,
                fault_ns: r.fault_ns,
                fetches: r.fetches,
                invalidations: r.invalidations,
                diff_sent: r.diff_sent,
                diff_applied: r.diff_applied,
                written: r.written.map(|m| ranges(&m)).unwrap_or_default(),
                symbols: symbols.get(&page).cloned().unwrap_or_default(),
            })
            .collect();
        pages.sort_by_key(|p| p.page);
        let mut locks: Vec<LockPart> = self
            .locks
            .into_iter()
            .map(|(id, l)| LockPart {
                id,
                acquisitions: l.acquisitions,
                wait_ns: l.wait_ns,
                hist: l.hist,
                grants: l.grants,
            })
            .collect();
        locks.sort_by_key(|l| l.id);
        let mut barriers: Vec<BarrierPart> = self
            .barriers
            .into_iter()
            .map(|(id, episodes)| BarrierPart { id, episodes })
            .collect();
        barriers.sort_by_key(|b| b.id);
        let sites = sites::resolve(&self.sites);
        let totals = Totals {
            read_faults: stats.read_faults,
            write_faults: stats.write_faults,
            local_faults: stats.local_faults,
            remote_faults: stats.remote_faults,
            pages_fetched: stats.pages_fetched,
            pages_served: stats.pages_served,
            invalidations: stats.invalidations,
            diffs_created: stats.diffs_created,
            diff_bytes_sent: stats.diff_bytes_sent,
            diff_bytes_applied: stats.diff_bytes_applied,
            messages_sent: stats.messages.values().map(|m| m.sent).sum(),
            message_bytes_sent: stats.messages.values().map(|m| m.sent_bytes).sum(),
            lock_acquisitions: locks.iter().map(|l| l.acquisitions).sum(),
            barrier_waits: barriers.iter().map(|b| b.episodes.len() as u64).sum(),
            page_wait_ns: self.page_wait_ns,
            lock_wait_ns: self.lock_wait_ns,
            barrier_wait_ns: self.barrier_wait_ns,
            wall_ns,
        };
        let part = NodePart {
            rank: self.me,
            nodes: self.nodes,
            page_size: self.page_size,
            protocol: stats.protocol.clone(),
            fault_backend: stats.fault_backend.clone(),
            clock: self.clock.clone(),
            totals,
            pages,
            locks,
            barriers,
            sites,
        };
        (part, self.trace)
    }
}

/// The set bits of a byte mask as `[start, end)` ranges.
fn ranges(mask: &[u64]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for (w, bits) in mask.iter().enumerate() {
        if *bits == 0 {
            continue;
        }
        for b in 0..64 {
            if bits & (1 << b) != 0 {
                let i = (w * 64 + b) as u32;
                match out.last_mut() {
                    Some(r) if r.1 == i => r.1 = i + 1,
                    _ => out.push((i, i + 1)),
                }
            }
        }
    }
    out
}

/// A node's totals.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Totals {
    pub read_faults: u64,
    pub write_faults: u64,
    pub local_faults: u64,
    pub remote_faults: u64,
    pub pages_fetched: u64,
    pub pages_served: u64,
    pub invalidations: u64,
    pub diffs_created: u64,
    pub diff_bytes_sent: u64,
    pub diff_bytes_applied: u64,
    pub messages_sent: u64,
    pub message_bytes_sent: u64,
    pub lock_acquisitions: u64,
    pub barrier_waits: u64,
    /// Time application threads spent waiting for pages (fault service), locks, barriers.
    pub page_wait_ns: u64,
    pub lock_wait_ns: u64,
    pub barrier_wait_ns: u64,
    /// From the start of the node's runtime to its finish.
    pub wall_ns: u64,
}

/// One page in one node's part.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PagePart {
    pub page: PageId,
    pub addr: usize,
    pub home: NodeId,
    pub read_faults: u64,
    pub write_faults: u64,
    pub upgrades: u64,
    /// Write faults taken while a thread of this node held a lock (and not upgrades).
    #[serde(default)]
    pub locked_writes: u64,
    pub remote_faults: u64,
    pub fault_ns: u64,
    pub fetches: u64,
    pub invalidations: u64,
    pub diff_sent: u64,
    pub diff_applied: u64,
    /// Byte ranges `[start, end)` of the page this node changed.
    pub written: Vec<(u32, u32)>,
    /// Symbols of the executable's static data on this page (static pages only).
    pub symbols: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LockPart {
    pub id: u64,
    pub acquisitions: u64,
    pub wait_ns: u64,
    pub hist: Histogram,
    /// CLOCK_REALTIME ns of each grant (the first `MAX_GRANTS`).
    pub grants: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BarrierPart {
    pub id: u64,
    /// (arrival, departure) in CLOCK_REALTIME ns, in call order.
    pub episodes: Vec<(u64, u64)>,
}

/// One node's part file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodePart {
    pub rank: NodeId,
    pub nodes: NodeId,
    pub page_size: usize,
    pub protocol: String,
    pub fault_backend: String,
    /// The node's clocks at its start: the merge puts its times on the job's one clock by
    /// them (`clock::align_starts`).
    #[serde(flatten)]
    pub clock: ClockStart,
    pub totals: Totals,
    pub pages: Vec<PagePart>,
    pub locks: Vec<LockPart>,
    pub barriers: Vec<BarrierPart>,
    pub sites: Vec<sites::Site>,
}

/// Writes `part` as `FILE.node<RANK>.part`.
pub fn write_part(file: &Path, part: &NodePart) -> Result<(), String> {
    let bytes = serde_json::to_vec(part).map_err(|e| format!("encoding the part: {e}"))?;
    let path = super::part_path(file, part.rank);
    super::write_atomic(&path, &bytes).map_err(|e| {
        format!(
            "cannot write {}: {e} (is the directory of the profile file writable?)",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_bytes_become_ranges() {
        let mut r = Recorder::new(0, 2, 64, None, None);
        let old = vec![0u8; 64];
        let mut cur = old.clone();
        cur[3] = 1;
        cur[4] = 1;
        cur[40] = 9;
        r.mark_written(7, &old, &cur);
        let m = r.pages[&7].written.as_ref().unwrap();
        assert_eq!(ranges(m), vec![(3, 5), (40, 41)]);
    }

    #[test]
    fn snapshot_excludes_diffs_of_others() {
        let mut r = Recorder::new(0, 2, 16, None, None);
        let mut page = vec![0u8; 16];
        r.access_change(1, Access::Read, Access::Write, &mut |b| {
            b.copy_from_slice(&page)
        });
        // Another node's diff lands in place, then this node writes byte 0.
        r.diff_applied(1, &[(8, &[5, 5][..])]);
        page[8] = 5;
        page[9] = 5;
        page[0] = 1;
        r.access_change(1, Access::Write, Access::None, &mut |b| {
            b.copy_from_slice(&page)
        });
        let p = &r.pages[&1];
        assert_eq!(ranges(p.written.as_ref().unwrap()), vec![(0, 1)]);
        assert_eq!(p.invalidations, 1);
    }
}
