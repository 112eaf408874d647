//! The other application-facing operations: fault-detection probe, forgetting destroyed
//! regions, user messages, the orderly end, statistics.

use super::*;

/// The fewest pages homed here in one run of a region that `Node::scan_home_writes` scans:
/// each run is registered apart, and splits the kernel's mapping of the window.
const MIN_SCANNED_RUN: u64 = 16;

/// The most such runs of one region (a cyclic home policy gives none long enough anyway).
const MAX_SCANNED_RUNS: usize = 8;

impl Node {
    /// Measures fault detection — from a thread touching a page it has no access to, to the
    /// runtime seeing the fault (SIGSEGV handler entry, or the engine reading the userfaultfd
    /// event) — over `pages` untouched local pages starting at `addr`. Returns the histogram.
    pub fn probe_fault_detection(&self, addr: usize, pages: usize) -> crate::stats::Histogram {
        let ps = self.space.page_size();
        self.lock_state().counters.fault_detect_ns = crate::stats::Histogram::default();
        for i in 0..pages {
            PROBE_T0.store(crate::sys::segv::now_ns(), Ordering::Release);
            let _: u8 = crate::sys::app_load((addr, pages * ps), addr + i * ps);
        }
        PROBE_T0.store(0, Ordering::Release);
        self.lock_state().counters.fault_detect_ns.clone()
    }

    /// Forgets every local trace of the pages `pages` of a destroyed region — protocol state,
    /// protections, twins, engine-held copies, and the memory itself — so the range can be
    /// allocated again and start as zeros. Called on every node while no thread uses the pages
    /// and no message about them is in flight (`api::free_collective` makes sure).
    pub fn forget_pages(&self, pages: std::ops::Range<PageId>) -> Result<(), String> {
        let mut st = self.lock_state();
        if let Some(p) = st.pages.forget(pages.clone()) {
            return Err(format!(
                "a thread still waits for page {p} of the region being destroyed"
            ));
        }
        for p in st.protocols.iter_mut().flatten() {
            if !p.forget(pages.clone()) {
                return Err(format!(
                    "protocol {} cannot forget pages: destroying regions is not supported with it",
                    p.name()
                ));
            }
        }
        let gone = |p: &PageId| pages.contains(p);
        st.twins.retain(|p, _| !gone(p));
        st.shadows.retain(|p, _| !gone(p));
        st.home_queries.retain(|p| !gone(p));
        st.lock_pages.forget(&pages);
        let ps = self.space.page_size();
        let addr = self.space.page_addr(pages.start);
        let len = (pages.end - pages.start) as usize * ps;
        self.backend
            .drop_range(addr, len)
            .map_err(|e| format!("dropping the memory of {addr:#x}+{len:#x}: {e}"))
    }

    /// Under `scope`, has the runs of a new collective region's pages homed at this node found
    /// written by scanning instead of by write faults (`FaultBackend::scan_writes`,
    /// `SVM_WRITE_SCAN`): a home lowers the pages others fetched to read-only at each release
    /// so that its next write is seen, and with scanning that write costs no fault, no engine
    /// wake-up and no switch back (Jacobi's boundary rows: four such faults per iteration on an
    /// inner node). Only runs of [`MIN_SCANNED_RUN`] pages and more (each is a mapping of its
    /// own in the kernel), and only where the engine has no state for any of their pages yet
    /// (checked under the state, which the engine's own calls on the range also hold).
    pub(crate) fn scan_home_writes(&self, addr: usize, len: usize) {
        let Some(scope) = crate::protocol::protocol_id("scope") else {
            return;
        };
        let ps = self.space.page_size();
        let first = self.space.page_of(addr);
        let end = first + (len / ps) as u64;
        if !self.cfg.write_scan
            || self.nodes < 2
            || first >= end
            || self.space.proto_of(first) != scope
            || self.space.home_unresolved(first)
        {
            return;
        }
        let mut runs: Vec<std::ops::Range<PageId>> = Vec::new();
        let mut run_start = None;
        for p in first..=end {
            let mine = p < end && self.space.home(p) == self.me;
            match (mine, run_start) {
                (true, None) => run_start = Some(p),
                (false, Some(s)) => {
                    runs.push(s..p);
                    run_start = None;
                }
                _ => {}
            }
        }
        runs.retain(|r| r.end - r.start >= MIN_SCANNED_RUN);
        if runs.is_empty() || runs.len() > MAX_SCANNED_RUNS {
            return;
        }
        let st = self.lock_state();
        for r in runs {
            if r.clone().any(|p| st.pages.get(p).is_some()) {
                continue;
            }
            let (a, l) = (
                self.space.page_addr(r.start),
                (r.end - r.start) as usize * ps,
            );
            if let Err(e) = self.backend.scan_writes(a, l) {
                tracing::warn!(
                    node = self.me,
                    "write scanning of {a:#x}+{l:#x} not set up, writes fault instead: {e}"
                );
            }
        }
    }

    /// Sends a user message to node `to` (this node included). Messages from one sender to one
    /// receiver arrive in order.
    pub fn send_user(&self, to: NodeId, tag: u64, data: &[u8]) {
        if to == self.me {
            let mut b = self.user_box.lock().unwrap_or_else(|p| p.into_inner());
            b.push_back(UserMessage {
                from: to,
                tag,
                data: data.to_vec(),
            });
            self.user_cv.notify_all();
            return;
        }
        let mut st = self.lock_state();
        let sent = self
            .flush_deferred_releases(&mut st)
            .and_then(|()| self.send(&mut st, to, Msg::User { tag }, data));
        if let Err(e) = sent {
            self.fail(Some(&st), e);
        }
    }

    /// Takes the first queued user message accepted by `filter`, waiting up to `timeout`
    /// (None: until `SVM_TIMEOUT` ends the node with a diagnostic). Returns None on timeout.
    pub fn recv_user(
        &self,
        mut filter: impl FnMut(&UserMessage) -> bool,
        timeout: Option<Duration>,
    ) -> Option<UserMessage> {
        let deadline = Instant::now() + timeout.unwrap_or(self.cfg.timeout);
        let _asleep = self.asleep();
        let mut b = self.user_box.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(i) = b.iter().position(&mut filter) {
                return b.remove(i);
            }
            let now = Instant::now();
            if now >= deadline {
                if timeout.is_some() {
                    return None;
                }
                drop(b);
                let st = self.lock_state();
                let err = EngineError::Timeout {
                    after: self.cfg.timeout,
                    what: "a message".into(),
                };
                self.fail(Some(&st), err);
            }
            b = self
                .user_cv
                .wait_timeout(b, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Orderly end: tells every node this one is done and waits until all are, serving
    /// requests meanwhile; then stops the engine and prints statistics if asked.
    pub fn finish(&self) {
        {
            let st = self.lock_state();
            if st.goodbye_sent {
                return;
            }
        }
        self.wait_op(Blocked::Finish, |n, st, w| {
            st.goodbye_sent = true;
            for peer in 0..n.nodes {
                if peer != n.me {
                    n.send(st, peer, Msg::Goodbye, &[])?;
                }
            }
            if st.goodbye_from.iter().all(|g| *g) {
                n.complete(st, w, WaitResult::Finished);
            } else {
                st.finish_waiter = Some(w);
            }
            Ok(())
        });
        self.stop.store(true, Ordering::Release);
        self.wake.signal();
        if let Some(h) = self.engine.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = h.join();
        }
        if crate::profile::on() {
            let st = self.lock_state();
            crate::profile::flush_writes(&mut |page, b| self.read_local_for_profile(&st, page, b));
        }
        self.backend.shutdown();
        match self.cfg.stats {
            StatsMode::Off => {}
            StatsMode::Text => eprint!("{}", self.stats()),
            StatsMode::Json => eprintln!("{}", self.stats().to_json()),
        }
        for l in self.links.iter().flatten() {
            // What is still queued (this node's own Goodbye, last replies) goes out first.
            l.finish_sending();
            l.close();
        }
        if crate::profile::on() {
            crate::profile::finish(&self.stats(), &self.space);
        }
    }

    /// Sends an abort to every peer and ends this node (used when the application panics).
    pub fn abort(&self, why: &str) -> ! {
        let st = self.state.try_lock().ok();
        self.fail(st.as_deref(), EngineError::Application(why.to_string()))
    }

    pub fn stats(&self) -> Stats {
        let st = self.lock_state();
        let mut c = st.counters.clone();
        {
            let waits = locked(&self.wait_times);
            c.lock_acquire_ns.merge(&waits.lock_acquire_ns);
            c.barrier_wait_ns.merge(&waits.barrier_wait_ns);
        }
        c.fast_locks = st.fast_locks.values().map(|f| f.taken()).sum();
        c.spin_wakes = self.spin_wakes.load(Ordering::Relaxed);
        c.spin_polls = self.spin_polls.load(Ordering::Relaxed);
        for p in st.protocols.iter().flatten() {
            let ps = p.stats();
            c.invalidations += ps.invalidations;
            c.notices_sent += ps.notices_sent;
            c.notice_invalidations += ps.notice_invalidations;
            c.pages_read_ahead += ps.pages_read_ahead;
            c.pages_written_ahead += ps.pages_written_ahead;
            c.migratory_upgrades += ps.migratory_upgrades;
            c.pages_paired += ps.pages_paired;
            c.pages_granted_around += ps.pages_granted_around;
            c.granted_around_unwritten += ps.granted_around_unwritten;
            c.pairs_dropped += ps.pairs_dropped;
            c.requests_held += ps.requests_held;
            c.hold_probe_rewrites += ps.hold_probe_rewrites;
            c.holds_ended_unwritten += ps.holds_ended_unwritten;
            c.requests_kept_unused += ps.requests_kept_unused;
            c.requests_kept_for_lock += ps.requests_kept_for_lock;
            c.pages_pushed += ps.pages_pushed;
            c.copies_dropped += ps.copies_dropped;
            c.timed_flushes += ps.timed_flushes;
            c.homes_moved += ps.homes_moved;
            c.writes_scanned += ps.writes_scanned;
        }
        Stats::from_counters(
            &c,
            self.me,
            self.nodes,
            self.protocol_name,
            self.backend.name(),
        )
    }
}
