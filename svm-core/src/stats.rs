//! Per-node counters and latency histograms, printed at exit with `SVM_STATS=1` (text) or
//! `SVM_STATS=json` (one JSON object per node).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Log-linear latency histogram in nanoseconds: 8 sub-buckets per power of two (≤ 12.5% error).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Histogram {
    counts: BTreeMap<u32, u64>,
    total: u64,
    sum_ns: u128,
}

const SUB: u32 = 8;

fn bucket(ns: u64) -> u32 {
    if ns < SUB as u64 {
        return ns as u32;
    }
    let log = 63 - ns.leading_zeros();
    let sub = ((ns >> (log - 3)) & (SUB as u64 - 1)) as u32;
    (log - 2) * SUB + sub
}

fn bucket_floor(b: u32) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let log = b / SUB + 2;
    let sub = (b % SUB) as u64;
    (1u64 << log) | (sub << (log - 3))
}

impl Histogram {
    pub fn record(&mut self, ns: u64) {
        *self.counts.entry(bucket(ns)).or_default() += 1;
        self.total += 1;
        self.sum_ns += ns as u128;
    }
    pub fn count(&self) -> u64 {
        self.total
    }
    /// Adds every sample of `other` (histograms of several nodes merged).
    pub fn merge(&mut self, other: &Histogram) {
        for (b, c) in &other.counts {
            *self.counts.entry(*b).or_default() += c;
        }
        self.total += other.total;
        self.sum_ns += other.sum_ns;
    }
    pub fn mean_ns(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.total as f64
        }
    }
    /// Value below which `q` (0..1) of the samples fall (bucket lower bound).
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let target = ((self.total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, c) in &self.counts {
            seen += c;
            if seen >= target {
                return bucket_floor(*b);
            }
        }
        0
    }
    fn summary(&self) -> LatencySummary {
        LatencySummary {
            count: self.total,
            mean_us: self.mean_ns() / 1e3,
            p50_us: self.quantile_ns(0.5) as f64 / 1e3,
            p90_us: self.quantile_ns(0.9) as f64 / 1e3,
            p99_us: self.quantile_ns(0.99) as f64 / 1e3,
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct MsgCount {
    pub sent: u64,
    pub sent_bytes: u64,
    pub received: u64,
    pub received_bytes: u64,
}

/// Raw counters, owned by the engine state.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    pub read_faults: u64,
    pub write_faults: u64,
    /// Faults resolved without any message to another node.
    pub local_faults: u64,
    /// Faults that needed another node.
    pub remote_faults: u64,
    pub read_fault_ns: Histogram,
    pub write_fault_ns: Histogram,
    pub pages_fetched: u64,
    pub bytes_fetched: u64,
    pub pages_served: u64,
    /// Pages made accessible by fault-around runs (no fault of their own).
    pub pages_faulted_around: u64,
    pub invalidations: u64,
    pub msgs: BTreeMap<&'static str, MsgCount>,
    pub lock_acquire_ns: Histogram,
    pub barrier_wait_ns: Histogram,
    pub twins_made: u64,
    pub diffs_created: u64,
    pub diffs_applied: u64,
    pub diff_bytes_sent: u64,
    pub diff_bytes_applied: u64,
    pub notices_sent: u64,
    pub notice_invalidations: u64,
    /// Pages requested unasked behind a sequential scan (home-based read-ahead).
    pub pages_read_ahead: u64,
    /// Home pages made writable unasked: behind sequential write faults (home-based
    /// write-ahead), or once every pushed copy was dropped (sc-sw).
    pub pages_written_ahead: u64,
    /// Write faults served without a message: the page came exclusive after a read (sc-sw's
    /// migratory pages).
    pub migratory_upgrades: u64,
    /// Pages asked for along with the page before them (sc-sw's remembered pairs).
    pub pages_paired: u64,
    /// Pages this node, as a manager waiting at a barrier, granted a node around its write
    /// request (sc-sw, `SVM_GRANT_AROUND`).
    pub pages_granted_around: u64,
    /// Of those, pages given back unwritten (sc-sw, `SVM_GRANT_AROUND`).
    pub granted_around_unwritten: u64,
    /// Remembered pairs forgotten: the page asked for early was taken unwritten.
    pub pairs_dropped: u64,
    /// Requests for a page kept waiting by its holder's minimum hold (sc-sw, `SVM_HOLD_US`).
    pub requests_held: u64,
    /// Write faults on held pages lowered by their write probe, raised again here (sc-sw).
    pub hold_probe_rewrites: u64,
    /// Holds ended early: the page went unwritten for a probe interval (sc-sw).
    pub holds_ended_unwritten: u64,
    /// Requests for a page kept waiting because the thread it was fetched for had not run
    /// yet (sc-sw).
    pub requests_kept_unused: u64,
    /// Requests for a page kept waiting while the token of a lock that uses the page was
    /// here and wanted elsewhere (sc-sw, `SVM_LOCK_PAGES`).
    pub requests_kept_for_lock: u64,
    /// Pages asked for along with a lock, because the lock's critical sections here asked
    /// for them before (`SVM_LOCK_PAGES`).
    pub lock_pages_asked: u64,
    /// Read copies pushed to consumers at barrier arrivals (sc-sw, `SVM_PUSH`).
    pub pages_pushed: u64,
    /// Pushed copies dropped after a phase of use (sc-sw, `SVM_PUSH`).
    pub copies_dropped: u64,
    /// Flushes of writes no release had flushed (sc-mw, `SVM_FLUSH_AFTER_US`).
    pub timed_flushes: u64,
    /// Pages handed to a new home (sc-mw, `SVM_HOME_MIGRATION`).
    pub homes_moved: u64,
    /// Home pages found written by a scan (scope, `SVM_WRITE_SCAN`).
    pub writes_scanned: u64,
    /// Lock releases whose flush waited for a later release (sc-mw, two nodes).
    pub releases_deferred: u64,
    /// Fault detection times measured by a probe (`api::measure_fault_detection`).
    pub fault_detect_ns: Histogram,
    /// Lock acquires through the application-thread fast path (not in `lock_acquire_ns`).
    pub fast_locks: u64,
    /// Times a thread that started waiting woke the engine from its sleep to spin
    /// (`SVM_SPIN_WAKE`).
    pub spin_wakes: u64,
    /// The engine's empty non-blocking polls while it spun (`SVM_SPIN`).
    pub spin_polls: u64,
    /// Messages from other nodes held back because they name collective pages this node has
    /// not allocated yet, or whose home it has asked its directory for.
    pub msgs_held_back: u64,
    /// Messages taken while messages of their sender were held back, all of them for pages
    /// this node has not allocated yet (`docs/c-api.md`, collective calls).
    pub msgs_past_held_back: u64,
}

/// A snapshot of one node's statistics.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stats {
    pub node: u16,
    pub nodes: u16,
    pub protocol: String,
    pub fault_backend: String,
    pub read_faults: u64,
    pub write_faults: u64,
    pub local_faults: u64,
    pub remote_faults: u64,
    pub read_fault_latency: LatencySummary,
    pub write_fault_latency: LatencySummary,
    pub pages_fetched: u64,
    pub bytes_fetched: u64,
    pub pages_served: u64,
    pub pages_faulted_around: u64,
    pub invalidations: u64,
    pub messages: BTreeMap<&'static str, MsgCount>,
    pub lock_acquire_latency: LatencySummary,
    /// Lock acquires through the application-thread fast path (`docs/sync.md`); they are not
    /// in `lock_acquire_latency`.
    pub fast_locks: u64,
    /// Times a thread that started waiting woke the engine from its sleep in epoll so that it
    /// spins while the thread waits (`SVM_SPIN_WAKE`).
    pub spin_wakes: u64,
    /// The engine's empty non-blocking polls while it spun for a waiting thread (`SVM_SPIN`);
    /// each yields the CPU.
    pub spin_polls: u64,
    /// Messages from other nodes held back: they name collective pages this node has not
    /// allocated yet (it is behind in the collective call sequence), or pages whose home it
    /// has asked its directory for.
    pub msgs_held_back: u64,
    /// Messages taken ahead of held-back ones of the same sender, all of which named pages
    /// this node had not allocated yet (`docs/c-api.md`, collective calls).
    pub msgs_past_held_back: u64,
    pub barrier_wait: LatencySummary,
    pub twins_made: u64,
    pub diffs_created: u64,
    pub diffs_applied: u64,
    pub diff_bytes_sent: u64,
    pub diff_bytes_applied: u64,
    pub notices_sent: u64,
    pub notice_invalidations: u64,
    /// Pages this node requested unasked behind a sequential scan (home-based protocols'
    /// read-ahead; sc-sw's read-ahead is the home's and shows in `pages_fetched` only).
    pub pages_read_ahead: u64,
    /// Home pages this node made writable unasked: behind sequential write faults (home-based
    /// protocols' write-ahead), or at a barrier departure once every copy it pushed was
    /// dropped (sc-sw).
    pub pages_written_ahead: u64,
    /// Write faults this node served without a message because the page came exclusive
    /// after its read (sc-sw's migratory pages).
    pub migratory_upgrades: u64,
    /// Pages this node asked for along with the page before them, because it had asked for
    /// the two one after the other before (sc-sw's remembered pairs).
    pub pages_paired: u64,
    /// Pages granted around a write request at a barrier (sc-sw, `SVM_GRANT_AROUND`).
    pub pages_granted_around: u64,
    /// Pages granted around and given back unwritten.
    pub granted_around_unwritten: u64,
    /// Remembered pairs this node forgot because the page it asked for early was taken by
    /// another node before it wrote it.
    pub pairs_dropped: u64,
    /// Requests for a page this node kept waiting until its minimum hold ended or it
    /// released (sc-sw, `SVM_HOLD_US`).
    pub requests_held: u64,
    /// Write faults on held pages lowered by their write probe, raised again without a
    /// message (sc-sw).
    pub hold_probe_rewrites: u64,
    /// Holds this node ended early because the page went unwritten for a probe interval while
    /// a request waited (sc-sw).
    pub holds_ended_unwritten: u64,
    /// Requests for a page this node kept waiting because the thread it had fetched the
    /// page for had not run since it was woken (sc-sw; `Context::install_unused`).
    pub requests_kept_unused: u64,
    /// Requests for a page this node kept waiting while the token of a lock whose critical
    /// sections use the page was here and wanted by another node (sc-sw, `SVM_LOCK_PAGES`;
    /// `Context::kept_for_lock`).
    pub requests_kept_for_lock: u64,
    /// Pages this node asked for along with a lock, because that lock's critical sections
    /// here had asked other nodes for them before (`SVM_LOCK_PAGES`).
    pub lock_pages_asked: u64,
    /// Read copies this node pushed, as a home, to the readers of pages it wrote, at its
    /// barrier arrivals (sc-sw, `SVM_PUSH`).
    pub pages_pushed: u64,
    /// Pushed copies this node dropped at its barrier arrivals after a phase of use, so
    /// their homes could write them again without an invalidation (sc-sw, `SVM_PUSH`).
    pub copies_dropped: u64,
    /// Flushes of writes no release had flushed after `SVM_FLUSH_AFTER_US` (sc-mw's bounded
    /// visibility).
    pub timed_flushes: u64,
    /// Pages this node was home of and handed to the node that alone wrote them between two
    /// barriers (sc-mw in a job of two nodes, `SVM_HOME_MIGRATION`).
    pub homes_moved: u64,
    /// Home pages whose writes a release found by scanning the page tables, not by a write
    /// fault each (`scope`, `SVM_WRITE_SCAN`).
    pub writes_scanned: u64,
    /// Lock releases of this node whose flush waited for its next release that could tell
    /// the other node anything (sc-mw in a job of two nodes).
    pub releases_deferred: u64,
}

impl Stats {
    pub fn from_counters(
        c: &Counters,
        node: u16,
        nodes: u16,
        protocol: &str,
        fault_backend: &str,
    ) -> Stats {
        Stats {
            node,
            nodes,
            protocol: protocol.to_string(),
            fault_backend: fault_backend.to_string(),
            read_faults: c.read_faults,
            write_faults: c.write_faults,
            local_faults: c.local_faults,
            remote_faults: c.remote_faults,
            read_fault_latency: c.read_fault_ns.summary(),
            write_fault_latency: c.write_fault_ns.summary(),
            pages_fetched: c.pages_fetched,
            bytes_fetched: c.bytes_fetched,
            pages_served: c.pages_served,
            pages_faulted_around: c.pages_faulted_around,
            invalidations: c.invalidations,
            messages: c.msgs.clone(),
            lock_acquire_latency: c.lock_acquire_ns.summary(),
            fast_locks: c.fast_locks,
            spin_wakes: c.spin_wakes,
            spin_polls: c.spin_polls,
            msgs_held_back: c.msgs_held_back,
            msgs_past_held_back: c.msgs_past_held_back,
            barrier_wait: c.barrier_wait_ns.summary(),
            twins_made: c.twins_made,
            diffs_created: c.diffs_created,
            diffs_applied: c.diffs_applied,
            diff_bytes_sent: c.diff_bytes_sent,
            diff_bytes_applied: c.diff_bytes_applied,
            notices_sent: c.notices_sent,
            notice_invalidations: c.notice_invalidations,
            pages_read_ahead: c.pages_read_ahead,
            pages_written_ahead: c.pages_written_ahead,
            migratory_upgrades: c.migratory_upgrades,
            pages_paired: c.pages_paired,
            pages_granted_around: c.pages_granted_around,
            granted_around_unwritten: c.granted_around_unwritten,
            pairs_dropped: c.pairs_dropped,
            requests_held: c.requests_held,
            hold_probe_rewrites: c.hold_probe_rewrites,
            holds_ended_unwritten: c.holds_ended_unwritten,
            requests_kept_unused: c.requests_kept_unused,
            requests_kept_for_lock: c.requests_kept_for_lock,
            lock_pages_asked: c.lock_pages_asked,
            pages_pushed: c.pages_pushed,
            copies_dropped: c.copies_dropped,
            timed_flushes: c.timed_flushes,
            homes_moved: c.homes_moved,
            writes_scanned: c.writes_scanned,
            releases_deferred: c.releases_deferred,
        }
    }

    /// One JSON object (one line).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

fn lat(f: &mut fmt::Formatter<'_>, name: &str, l: &LatencySummary) -> fmt::Result {
    writeln!(
        f,
        "  {name:<22} n={} mean={:.1}us p50={:.1}us p90={:.1}us p99={:.1}us",
        l.count, l.mean_us, l.p50_us, l.p90_us, l.p99_us
    )
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "svm stats: node {} of {} (protocol {}, fault backend {})",
            self.node, self.nodes, self.protocol, self.fault_backend
        )?;
        writeln!(
            f,
            "  faults                 read={} write={} local={} remote={}",
            self.read_faults, self.write_faults, self.local_faults, self.remote_faults
        )?;
        lat(f, "read fault service", &self.read_fault_latency)?;
        lat(f, "write fault service", &self.write_fault_latency)?;
        writeln!(
            f,
            "  pages                  fetched={} ({} bytes) served={} invalidations={} faulted_around={} read_ahead={} written_ahead={} migratory={} paired={} pairs_dropped={} granted_around={} around_unwritten={} held={} kept_unused={} pushed={} dropped={} lock_pages={} kept_for_lock={} hold_rewrites={} holds_unwritten={}",
            self.pages_fetched,
            self.bytes_fetched,
            self.pages_served,
            self.invalidations,
            self.pages_faulted_around,
            self.pages_read_ahead,
            self.pages_written_ahead,
            self.migratory_upgrades,
            self.pages_paired,
            self.pairs_dropped,
            self.pages_granted_around,
            self.granted_around_unwritten,
            self.requests_held,
            self.requests_kept_unused,
            self.pages_pushed,
            self.copies_dropped,
            self.lock_pages_asked,
            self.requests_kept_for_lock,
            self.hold_probe_rewrites,
            self.holds_ended_unwritten
        )?;
        writeln!(
            f,
            "  diffs                  twins={} created={} ({} B) applied={} ({} B) timed_flushes={} releases_deferred={} homes_moved={} writes_scanned={}",
            self.twins_made,
            self.diffs_created,
            self.diff_bytes_sent,
            self.diffs_applied,
            self.diff_bytes_applied,
            self.timed_flushes,
            self.releases_deferred,
            self.homes_moved,
            self.writes_scanned
        )?;
        writeln!(
            f,
            "  write notices          sent={} invalidations caused={}",
            self.notices_sent, self.notice_invalidations
        )?;
        lat(f, "lock acquire", &self.lock_acquire_latency)?;
        writeln!(f, "  lock fast path         acquires={}", self.fast_locks)?;
        writeln!(
            f,
            "  engine                 spin_wakes={} spin_polls={} held_back={} past_held_back={}",
            self.spin_wakes, self.spin_polls, self.msgs_held_back, self.msgs_past_held_back
        )?;
        lat(f, "barrier wait", &self.barrier_wait)?;
        for (k, m) in &self.messages {
            writeln!(
                f,
                "  msg {k:<18} sent={} ({} B) received={} ({} B)",
                m.sent, m.sent_bytes, m.received, m.received_bytes
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_within_a_bucket() {
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile_ns(0.5) as f64;
        assert!((430_000.0..=500_000.0).contains(&p50), "{p50}");
        let p99 = h.quantile_ns(0.99) as f64;
        assert!((860_000.0..=990_000.0).contains(&p99), "{p99}");
        assert_eq!(h.count(), 1000);
        for v in [0u64, 1, 7, 8, 9, 100, 12345, u32::MAX as u64] {
            assert!(bucket_floor(bucket(v)) <= v, "{v}");
        }
    }
}
