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
//! - `clock.rs`: each node's clocks at its start and how the merge puts them on one clock;
//! - `record.rs`: what one node records (pages, locks, barriers, waits) and its part format;
//! - `sites.rs`: allocation sites (`#[track_caller]` locations, return addresses of C
//!   callers, the executable's symbol table for static data), symbolised at finish;
//! - `report.rs`: the merge, the page classification and the Markdown/JSON report;
//! - `trace.rs`: Chrome trace events, per-node parts and their merge.

pub mod clock;
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
