//! The profiler (`SVM_PROFILE=FILE`, `svmrun --profile FILE`) and the trace
//! (`SVM_TRACE=FILE`, `svmrun --trace FILE`); `docs/profiling.md` describes both.
//!
//! The engine and the API call the hooks below; each hook first looks at one relaxed atomic
//! ([`on`]), so a run without `--profile`/`--trace` pays a load and a branch per hook. When on,
//! the hooks record into one per-process [`Recorder`] under its own mutex. At `finish` every
//! node resolves what only it can (allocation call sites, static symbols, the bytes it wrote
//! into pages it still holds) and writes a part file beside FILE; rank 0 waits for every part
//! and merges them into the one report ([`report`]) and the one trace ([`trace`]).
//!
//! - `record.rs`: what one node records (pages, locks, barriers, waits) and its part format;
//! - `sites.rs`: allocation sites (`#[track_caller]` locations, return addresses of C
//!   callers, the executable's symbol table for static data), symbolised at finish;
//! - `report.rs`: the merge, the page classification and the Markdown/JSON report;
//! - `trace.rs`: Chrome trace events, per-node parts and their merge.

mod fault_steps;
pub mod record;
pub mod report;
pub mod sites;
pub mod trace;

use std::panic::Location;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::sys::segv::now_ns;
use crate::{Access, NodeId, PageId};

pub use fault_steps::REMOTE_FAULT_STEPS;
pub use record::Recorder;

/// True while a profile or a trace is being recorded in this process.
static ON: AtomicBool = AtomicBool::new(false);
static REC: Mutex<Option<Recorder>> = Mutex::new(None);

/// Whether the hooks record anything (one relaxed load: the whole cost when off).
#[inline(always)]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

fn with<R>(f: impl FnOnce(&mut Recorder) -> R) -> Option<R> {
    let mut g = REC.lock().unwrap_or_else(|p| p.into_inner());
    g.as_mut().map(f)
}

/// Nanoseconds of CLOCK_REALTIME.
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// CLOCK_MONOTONIC and CLOCK_REALTIME (ns) at one instant, as closely as two clocks can be
/// read together: of a few tries, the monotonic read whose two realtime reads around it lie
/// closest, with their midpoint. A thread preempted between two plain reads would carry the
/// preemption into every time the merge places by this pair (a 22 µs skew between the two
/// nodes of a SPLASH-2 cholesky trace: messages received 19 µs before they were sent).
pub fn clock_pair() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..8 {
        let r1 = realtime_ns();
        let m = now_ns();
        let r2 = realtime_ns();
        let gap = r2.saturating_sub(r1);
        if gap < best.0 {
            best = (gap, m, r1 + gap / 2);
        }
    }
    (best.1, best.2)
}

/// Which CLOCK_MONOTONIC this process reads: the kernel's boot id
/// (`/proc/sys/kernel/random/boot_id`) and its time namespace (`/proc/self/ns/time`, which
/// may offset the monotonic clock; absent before Linux 5.6, where there are none). Nodes that
/// report the same domain read one monotonic clock — network namespaces, as in the
/// multi-host tests, share it. None where the boot id cannot be read.
pub fn clock_domain() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    if id.is_empty() {
        return None;
    }
    let time_ns = std::fs::read_link("/proc/self/ns/time")
        .map(|l| l.to_string_lossy().into_owned())
        .unwrap_or_default();
    Some(format!("{id} {time_ns}"))
}

/// What to add (ns) to each node's CLOCK_REALTIME-based times so that all are on one clock,
/// given each node's clock pair at its start (`clock_pair`: monotonic, realtime) and clock
/// domain (`clock_domain`). Nodes of one domain share CLOCK_MONOTONIC, which no clock step or
/// slew of CLOCK_REALTIME moves between their starts: their times are placed by it, exactly,
/// on the first node's realtime. Nodes of several hosts keep their own realtime (as good as
/// their NTP): no correction.
pub fn realtime_corrections(clocks: &[(u64, u64, Option<&str>)]) -> Vec<i64> {
    let one_clock = clocks
        .first()
        .is_some_and(|first| first.2.is_some() && clocks.iter().all(|c| c.2 == first.2));
    if !one_clock {
        return vec![0; clocks.len()];
    }
    let offset = |&(mono, real, _): &(u64, u64, Option<&str>)| real as i128 - mono as i128;
    let base = offset(&clocks[0]);
    clocks.iter().map(|c| (base - offset(c)) as i64).collect()
}

/// `t` moved by `by` ns (saturating at 0).
pub(crate) fn shifted(t: u64, by: i64) -> u64 {
    (t as i128 + by as i128).max(0) as u64
}

/// What a node profiles: from `Config::profile` / `Config::trace`.
pub struct Setup<'a> {
    pub profile: Option<&'a Path>,
    pub trace: Option<&'a Path>,
    pub me: NodeId,
    pub nodes: NodeId,
    pub page_size: usize,
}

/// Starts recording (called once when the node starts) if a profile or a trace was asked for.
pub fn start(s: Setup<'_>) {
    if s.profile.is_none() && s.trace.is_none() {
        return;
    }
    let rec = Recorder::new(
        s.me,
        s.nodes,
        s.page_size,
        s.profile.map(Path::to_path_buf),
        s.trace.map(Path::to_path_buf),
    );
    *REC.lock().unwrap_or_else(|p| p.into_inner()) = Some(rec);
    ON.store(true, Ordering::Release);
}

// ---------------------------------------------------------------------------------------------
// Hooks of the engine (called under the engine state lock)

/// A fault on `page` was taken; `before` is the page's access at that moment.
pub fn fault(page: PageId, write: bool, before: Access) {
    with(|r| r.fault(page, write, before));
}

/// A fault on `page` taken at `since_ns` (monotonic) by thread `tid` (0 = unknown) was served
/// now; `remote` if it needed
/// another node.
pub fn fault_served(page: PageId, write: bool, since_ns: u64, tid: u32, remote: bool) {
    let now = now_ns();
    with(|r| r.fault_served(page, write, since_ns, now, tid, remote));
}

/// The access of `page` is about to change from `old` to `new` (before the backend changes
/// the protection, while the contents are still readable); `read` copies the page's current
/// local contents.
pub fn access_change(page: PageId, old: Access, new: Access, read: &mut dyn FnMut(&mut [u8])) {
    with(|r| r.access_change(page, old, new, read));
}

/// A page grant is about to replace the local contents of `page` (access `old`) with `data`,
/// readable with `new`.
pub fn install(
    page: PageId,
    old: Access,
    new: Access,
    data: &[u8],
    read: &mut dyn FnMut(&mut [u8]),
) {
    with(|r| r.install(page, old, new, data, read));
}

/// A diff for `page` with these runs was applied to the local contents.
pub fn diff_applied(page: PageId, runs: &[(usize, &[u8])]) {
    with(|r| r.diff_applied(page, runs));
}

/// This node sent a diff of `bytes` bytes for `page`.
pub fn diff_sent(page: PageId, bytes: usize) {
    with(|r| r.diff_sent(page, bytes));
}

/// A message was sent (`out`) to or received from `peer`; `seq` is its frame's sequence
/// number on that link (what matches a receive with its send in the trace).
pub fn message(kind: &'static str, peer: NodeId, bytes: u64, out: bool, seq: u32) {
    with(|r| r.message(kind, peer, bytes, out, seq));
}

// ---------------------------------------------------------------------------------------------
// Hooks of application threads

/// The calling thread waited from `t0` (monotonic ns) until now for lock `id` and got it.
pub fn lock_acquired(id: u64, t0: u64) {
    let now = now_ns();
    with(|r| r.lock_acquired(id, t0, now));
}

/// A thread of this node released a lock.
pub fn lock_released() {
    with(|r| r.locks_held = r.locks_held.saturating_sub(1));
}

/// The calling thread waited at barrier `id` from `t0` (monotonic ns) until now.
pub fn barrier_passed(id: u64, t0: u64) {
    let now = now_ns();
    with(|r| r.barrier_passed(id, t0, now));
}

/// A shared allocation of `len` bytes at `addr`: records where it was made.
pub fn allocated(addr: usize, len: usize, collective: bool, loc: &'static Location<'static>) {
    let site = sites::Captured::here(addr, len, collective, loc);
    with(|r| r.sites.push(site));
}

// ---------------------------------------------------------------------------------------------
// The end

/// The end of this node's part, first step (engine stopped, memory still managed): compares
/// the pages this node still holds writable with their snapshots; `read(page, buf)` reads a
/// page's local contents.
pub fn flush_writes(read: &mut dyn FnMut(PageId, &mut [u8])) {
    if on() {
        with(|r| r.flush_writes(read));
    }
}

/// The end of this node's part, second step: writes this node's parts; rank 0 then merges
/// every node's parts into the report and the trace. Errors go to stderr (a profile never
/// fails the job).
pub fn finish(stats: &crate::stats::Stats, space: &crate::space::Space) {
    if !on() {
        return;
    }
    ON.store(false, Ordering::Release);
    let Some(rec) = REC.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        return;
    };
    let me = rec.me;
    let nodes = rec.nodes;
    let profile = rec.profile_path.clone();
    let trace = rec.trace_path.clone();
    let (part, events) = rec.into_parts(stats, space);
    if let Some(p) = &profile {
        if let Err(e) = record::write_part(p, &part) {
            eprintln!("svm: node {me}: profile: {e}");
        }
    }
    if let Some(t) = &trace {
        if let Err(e) = trace::write_part(t, me, &part, &events) {
            eprintln!("svm: node {me}: trace: {e}");
        }
    }
    if me != 0 {
        return;
    }
    let wait = Duration::from_secs(60);
    if let Some(p) = &profile {
        match report::merge_files(p, nodes, wait) {
            Ok(missing) if !missing.is_empty() => eprintln!(
                "svm: node 0: profile {}: no part from nodes {missing:?} (they did not finish); the report covers the others",
                p.display()
            ),
            Ok(_) => {}
            Err(e) => eprintln!("svm: node 0: profile {}: {e}", p.display()),
        }
    }
    if let Some(t) = &trace {
        if let Err(e) = trace::merge_files(t, nodes, wait) {
            eprintln!("svm: node 0: trace {}: {e}", t.display());
        }
    }
}

/// The part file of node `rank` beside `file` (`FILE.node<RANK>.part`).
pub fn part_path(file: &Path, rank: NodeId) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(format!(".node{rank}.part"));
    PathBuf::from(s)
}

/// Writes `bytes` to `path` atomically (a temporary file, then a rename), so a reader never
/// sees half a file.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Waits until the part files of all `nodes` exist or `wait` passes; returns the ranks whose
/// part is missing.
pub(crate) fn wait_parts(file: &Path, nodes: NodeId, wait: Duration) -> Vec<NodeId> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        let missing: Vec<NodeId> = (0..nodes)
            .filter(|r| !part_path(file, *r).exists())
            .collect();
        if missing.is_empty() || std::time::Instant::now() >= deadline {
            return missing;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_of_one_clock_domain_are_placed_by_their_monotonic_clock() {
        // Node 1's realtime read came 22 µs after its monotonic one (its thread preempted in
        // between), so its pair's offset is 22 µs off node 0's.
        let domain = Some("one-boot");
        let clocks = [
            (1_000_000, 5_000_000_000, domain),
            (1_500_000, 5_000_522_000, domain),
        ];
        let by = realtime_corrections(&clocks);
        assert_eq!(by, vec![0, -22_000]);
        // A frame sent by node 0 at monotonic 2,000,000 ns and read by node 1 3 µs later.
        let placed = |i: usize, mono: u64| shifted(clocks[i].1 + (mono - clocks[i].0), by[i]);
        assert_eq!(placed(1, 2_003_000) - placed(0, 2_000_000), 3_000);
    }

    #[test]
    fn nodes_of_several_clock_domains_keep_their_realtime() {
        let two = [(1, 10, Some("a")), (2, 30, Some("b"))];
        assert_eq!(realtime_corrections(&two), vec![0, 0]);
        let unknown = [(1, 10, Some("a")), (2, 30, None)];
        assert_eq!(realtime_corrections(&unknown), vec![0, 0]);
        assert_eq!(
            realtime_corrections(&[(1, 10, None), (2, 30, None)]),
            vec![0, 0]
        );
        assert!(realtime_corrections(&[]).is_empty());
    }

    #[test]
    fn a_clock_pair_is_one_instant_of_both_clocks() {
        let (m1, r1) = clock_pair();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (m2, r2) = clock_pair();
        // Both clocks advanced by the same time between the two pairs (NTP slews both alike);
        // a pair of reads taken apart, or the two clocks swapped, would show here.
        let (dm, dr) = (m2 as i128 - m1 as i128, r2 as i128 - r1 as i128);
        assert!(dm >= 20_000_000, "monotonic advanced {dm} ns");
        assert!(
            (dr - dm).abs() < 2_000_000,
            "realtime {dr} ns, monotonic {dm} ns"
        );
        let domain = clock_domain().expect("/proc/sys/kernel/random/boot_id is readable");
        assert_eq!(
            clock_domain(),
            Some(domain),
            "one process, one clock domain"
        );
    }
}
