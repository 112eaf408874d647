//! The engine thread: polling links, faults and wake-ups, sleeping after a short spin, and
//! running timers (lock lingers, protocol timers).

use super::*;
use std::sync::atomic::fence;

/// Non-blocking polls after activity before the engine sleeps in epoll, unless `SVM_SPIN`
/// says otherwise. Every empty poll yields the CPU, so a spinning engine gives way to the
/// threads that have work; what it saves is the wake-up from epoll, which on a loaded host
/// costs up to a scheduler slice. Measurements: docs/configuration.md and the commit message.
pub(super) const DEFAULT_SPIN_POLLS: u32 = 2048;

/// The same for a job of one node: no peer can send anything, and an engine spinning on a
/// second CPU turns every page-table change of the application (a first write to a zero page)
/// into an inter-processor TLB flush.
pub(super) const DEFAULT_SPIN_POLLS_ALONE: u32 = 64;

/// The default of `SVM_SPIN` for a job of `nodes` nodes, whatever the CPUs. With more nodes
/// than CPUs the engines spin too: the yielding polls take CPU time only when no
/// thread there has work, and a page a spinning engine fetches quickly no longer leaves
/// before its thread has run (sc-sw's wait for the faulting thread, `node/installs.rs`).
/// Without that wait the MP-MPICH SMI example `strided` (three writers, 4 nodes on 2 cores)
/// took 9–40 s spinning against 3–4 s without; with it, 4 nodes on 2 CPUs, spinning against
/// not: `strided` 2.6–2.9 → 1.1–1.5 s, `alltoall` 13.2–16.0 → 8.2 s, SPLASH-2 at p = 4
/// raytrace 3.5–4.6 → 1.4–1.8 s, radix 14.4–17.7 → 6.7–8.0 s (docs/configuration.md).
pub(crate) fn default_spin_polls(nodes: usize) -> u32 {
    if nodes == 1 {
        DEFAULT_SPIN_POLLS_ALONE
    } else {
        DEFAULT_SPIN_POLLS
    }
}

/// The default of `SVM_ENGINE_NICE` for a job of `nodes` nodes on `cpus` CPUs (None: the
/// process's own), like the spin's: with more nodes than CPUs an engine that preempts at once
/// takes the CPU from other nodes' computing threads too. SPLASH-2 at p = 4 on 2 CPUs, nice
/// -10 against the process's, alternated (3 rounds over 7–8 programs): water-spatial
/// 1.43–2.33 s against 1.23–1.39 s, ocean-contiguous 2.11–2.15 against 1.87–1.91 s, but
/// cholesky 3.1–3.3 against 3.7–3.8 s; the rest within their spread (docs/configuration.md).
pub(crate) fn default_engine_nice(nodes: usize, cpus: usize) -> Option<i32> {
    (nodes <= cpus).then_some(crate::config::DEFAULT_ENGINE_NICE)
}

/// Whether a thread that starts waiting wakes its sleeping engine to spin (`SVM_SPIN_WAKE`):
/// where the engine spins at all and a peer can answer — with more nodes than CPUs too, where
/// the woken engine's yielding polls share the CPU with another node's computing thread.
/// SPLASH-2 at p = 4 on 2 CPUs (`svm-bench splash --nodes 4`, off and on alternated, 2
/// rounds): svm times geomean 0.89 of off (radiosity 12.6–15.3 → 9.4–10.1 s, raytrace
/// 1.55–1.63 → 1.20–1.26 s, radix 7.7–8.0 → 5.9–6.2 s; barnes 6.8–7.5 → 7.3–8.7 s); Jacobi
/// 1024² × 400 at 4 nodes, 6 rounds: median 0.320 → 0.300 s.
pub(crate) fn wakes_to_spin(spin_wake: bool, spin_polls: u32, nodes: usize) -> bool {
    spin_wake && spin_polls > 0 && nodes > 1
}

/// The engine's longest sleep in epoll without a timer: a whole sleep without a wake-up makes
/// it look at every link anyway (a lost wake-up costs this much, never a stuck job).
const IDLE_SLEEP: Duration = Duration::from_millis(100);

/// How often (ns) the engine thread checks the deadlines of failed sends and waiting faults
/// (`Node::check_deadlines`).
const DEADLINE_CHECK_NS: u64 = 100_000_000;

/// What [`Node::on_received`] left in the receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frames {
    /// A page request queued frames to send and more whole frames may follow: write out,
    /// then go on.
    More,
    /// Every whole frame was handled.
    Handled,
}

impl Node {
    // ----------------------------------------------------------------------------------------
    // The engine thread

    /// Gives the calling (engine) thread the short time slice of `SVM_ENGINE_SLICE_US` and the
    /// nice value of `SVM_ENGINE_NICE`. A node bound to one CPU shares it with its engine; a
    /// woken engine preempts the computing thread only with a shorter slice (Linux 6.12) and
    /// if it is eligible, i.e. has not used more than its share of the CPU lately, which a
    /// busy engine often has. Otherwise the page request or lock hand-over that woke it waits
    /// for the computing thread's slice or the next tick: Laplace at 2 nodes, 140–200 µs per
    /// remote fault with neither, 55–70 µs with the slice; SPLASH-2 fmm, lock requests of one
    /// node sat ~4 ms at the other 1,000 times per run with the slice alone (5.3–5.5 s),
    /// not with nice -10 too (2.4–2.7 s). Failing costs only that latency: it is logged,
    /// the node runs on; a nice value the process may not take is left out (`RLIMIT_NICE`).
    pub(super) fn ask_for_engine_priority(&self) {
        // The engine sleeps until its next timer (a linger of 100 µs, a hold of 3 ms): with
        // the default timer slack of 50 µs each such sleep could overrun by half a linger.
        if let Err(e) = nix::sys::prctl::set_timerslack(1) {
            tracing::debug!(
                node = self.me,
                "could not set the engine's timer slack: {e}"
            );
        }
        // `api::start_node` resolves the default from the CPUs the job may use (None there:
        // the process's own); a node built otherwise (engine tests) keeps the process's.
        let nice = self.cfg.engine_nice;
        let us = self.cfg.engine_slice_us;
        match crate::sys::sched::set_current_thread_sched(us * 1000, nice) {
            Ok(crate::sys::sched::Applied::Both) => {}
            Ok(crate::sys::sched::Applied::SliceOnly) => tracing::debug!(
                node = self.me,
                "the engine thread may not take nice {nice:?} (needs CAP_SYS_NICE or \
                 RLIMIT_NICE); it keeps the process's"
            ),
            Err(e) => tracing::warn!(
                node = self.me,
                "could not set the engine thread's time slice ({us} µs) and nice value \
                 ({nice:?}): {e}; its wake-ups may wait for the computing thread's slice"
            ),
        }
    }

    /// Serves faults, frames and wake-ups until the node stops; returns the error that ends
    /// the engine (handled at one exit point, `Node::engine_failed`).
    pub(super) fn engine_loop(&self) -> Result<(), EngineError> {
        let poller = &self.poller;
        let mut tokens = Vec::new();
        let mut faults: Vec<Fault> = Vec::new();
        let mut closed = vec![false; self.nodes as usize];
        let mut idle_polls = 0u32;
        let spin_polls = self
            .cfg
            .spin_polls
            .unwrap_or_else(|| default_spin_polls(self.nodes as usize));
        let mut last_check = now_ns();
        let nudgeable = wakes_to_spin(self.cfg.spin_wake, spin_polls, self.nodes as usize);
        loop {
            // Spin on a non-blocking poll for a short while after activity (a reply usually
            // follows within tens of microseconds) while a thread of this node waits for the
            // engine, then sleep in epoll.
            //
            // With a timer armed and nothing to spin for, sleep until the timer is due, not
            // poll and yield: a yielding engine is not woken by the next message but runs when
            // the scheduler next looks, up to the next tick (4 ms) while its node's thread
            // computes on the same CPU. (SPLASH-2 fmm's lock requests that sat ~4 ms unread
            // were not this but the woken engine's eligibility: `ask_for_engine_priority`.)
            let due = self.timer_due.load(Ordering::Acquire);
            let mut spinning = idle_polls < spin_polls && self.threads_wait();
            if !spinning && nudgeable {
                // About to sleep: said before a second look at the waiting threads (a
                // store-load pair with `engine_watch`), so a thread that starts waiting after
                // that look wakes the sleep. Spinning polls pay for neither.
                self.engine_sleeps.store(true, Ordering::Relaxed);
                fence(Ordering::SeqCst);
                spinning = idle_polls < spin_polls && self.threads_wait();
            }
            let timeout = if spinning {
                Duration::ZERO
            } else if due != u64::MAX {
                Duration::from_nanos(due.saturating_sub(now_ns())).min(IDLE_SLEEP)
            } else {
                IDLE_SLEEP
            };
            poller
                .wait_for(&mut tokens, timeout)
                .map_err(EngineError::Poll)?;
            self.engine_sleeps.store(false, Ordering::Relaxed);
            if self.stop.load(Ordering::Acquire) {
                return Ok(());
            }
            if tokens.is_empty() {
                idle_polls = idle_polls.saturating_add(1);
                if spinning {
                    self.spin_polls.fetch_add(1, Ordering::Relaxed);
                    std::thread::yield_now();
                } else if due == u64::MAX {
                    // A whole sleep passed without a wake-up: look at every link anyway, so a
                    // wake-up a transport lost costs one sleep period, never a stuck job.
                    tokens.extend(
                        (0..self.nodes)
                            .filter(|&p| self.links[p as usize].is_some())
                            .map(|p| PollToken::Peer(p).key()),
                    );
                }
            } else {
                idle_polls = 0;
            }
            for &key in &tokens {
                let Some(token) = PollToken::of_key(key) else {
                    continue;
                };
                // Each event is a step of its own, with its own time (what it times, fault
                // service, is measured from its start). The shell reads the event's input before
                // it takes the state and writes the frames the step produced after it lets go
                // (`outbox.rs`): no system call on a link or the fault descriptor under the state.
                match token {
                    PollToken::Faults => {
                        self.backend
                            .take_faults(&mut faults)
                            .map_err(EngineError::Faults)?;
                        let mut st = self.lock_state();
                        for f in faults.drain(..) {
                            self.on_fault(&mut st, f)?;
                        }
                        self.drain_loopback(&mut st)?;
                    }
                    PollToken::Wake => self.wake.drain(),
                    PollToken::Peer(peer) => {
                        if closed[peer as usize] {
                            continue;
                        }
                        if self.link_backlogged(peer) {
                            self.flush_link(peer)?;
                        }
                        if let Some(link) = self.links[peer as usize].as_ref() {
                            if !self.read_link(peer, link.as_ref())? {
                                closed[peer as usize] = true;
                                poller.remove(link.poll_fd());
                            }
                        }
                    }
                }
            }
            let now = now_ns();
            let check = now.saturating_sub(last_check) >= DEADLINE_CHECK_NS;
            // The due time read before the poll: a timer armed since then woke the poll.
            let timers_due = due <= now;
            if timers_due || check {
                let mut st = self.lock_state();
                if timers_due {
                    self.run_timers(&mut st)?;
                }
                if check {
                    last_check = st.now;
                    self.check_deadlines(&st)?;
                }
            }
        }
    }

    /// Whether some application thread of this node waits: for a page, in a synchronisation
    /// operation (as the last step left the state), for a user message. Only then does the
    /// engine spin: its node's threads are not computing, so the spin takes no CPU from them
    /// (each node on CPUs of its own, `SVM_CPUS`); while they compute, a spinning engine
    /// would take their CPU (Mandelbrot at 2 nodes: 0.20 s spinning after every slice handed
    /// out, 0.14 s without).
    ///
    /// Spinning only while *every* thread of the node waits (a SPLASH-2 worker's main thread
    /// waits for tasks while its task computes) was measured and not kept: the seven slowest
    /// SPLASH-2 programs at p = 2, geomean ratio 45.5 → 104 (docs/configuration.md).
    ///
    /// Read from atomics only: holding the state here, even for a moment, could make an
    /// application thread post its operation (`step.rs`) to a holder that runs no posts.
    fn threads_wait(&self) -> bool {
        self.asleep.load(Ordering::Relaxed) > 0
            || self.waiting_in_engine.load(Ordering::Relaxed) > 0
    }

    /// Counts the calling thread as asleep (see [`Node::threads_wait`]) until the guard drops.
    pub(super) fn asleep(&self) -> Asleep<'_> {
        self.asleep.fetch_add(1, Ordering::Relaxed);
        self.engine_watch();
        Asleep(self)
    }

    /// The calling application thread starts waiting (its step left it counted in
    /// `waiting_in_engine`, or [`Node::asleep`] counted it): if the engine sleeps in epoll,
    /// wake it so that it spins while the thread waits. A thread that sent a lock request or
    /// a barrier arrival itself and then sleeps leaves an engine that nobody woke: the answer
    /// then had to wake it, from another CPU, on a CPU gone idle — 100 µs from the send of the
    /// last barrier arrival to its reading at the other node (median, Jacobi at 2 nodes,
    /// `svmrun --trace`) against ~30 µs where the waiting node's engine was already up.
    pub(super) fn engine_watch(&self) {
        fence(Ordering::SeqCst);
        if self.engine_sleeps.load(Ordering::Relaxed) {
            self.wake.signal();
            self.spin_wakes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reads what `peer`'s link has and handles every whole frame of it. Returns whether the
    /// link stays open (see [`Node::on_received`]).
    ///
    /// A page request whose handling queued frames to send ends a step: the state is let go,
    /// which writes them out, and the next frame starts a step of its own. A home that read a
    /// batch of requests (a reader's fault and the pages it asked for with it) so sends each
    /// grant as soon as it is made, not all of them after the last: SPLASH-2 lu-noncontiguous
    /// at p = 2 (`svmrun --trace`), the faulting page's grant of a batch of eight read 124 µs
    /// after it was queued, behind seven grants made after it.
    fn read_link(&self, peer: NodeId, link: &dyn Link) -> Result<bool, EngineError> {
        let mut buf = locked(&self.recv_bufs[peer as usize]);
        let received = link.recv_available(&mut buf);
        // One hold of the state for the whole read unless a page request's answer has to
        // leave before the rest (the read's result is looked at under the first).
        let mut received = Some(received);
        let mut alive = false;
        loop {
            let mut st = self.lock_state();
            if let Some(received) = received.take() {
                alive = self.link_still_open(&mut st, peer, received)?;
            }
            if self.on_received(&mut st, peer, link, alive, &mut buf)? == Frames::Handled {
                return Ok(alive);
            }
        }
    }

    /// Handles, in the calling thread, every frame the links show as written and not yet
    /// read (links that can tell without a system call: DECK-SCI), or waits until the engine
    /// has handled them. An application thread leaving a barrier through shared memory calls
    /// it: what the other nodes sent before they arrived is then in effect before this
    /// node's departure, as the message barrier (links in order) guarantees.
    pub(super) fn read_inbound_now(&self) {
        for (peer, link) in self.links.iter().enumerate() {
            let Some(link) = link else { continue };
            if !link.has_inbound() {
                // Read already, by the engine: handled once it lets go of the buffer.
                drop(locked(&self.recv_bufs[peer]));
                continue;
            }
            if let Err(e) = self.read_link(peer as NodeId, link.as_ref()) {
                let st = self.lock_state();
                self.fail(Some(&st), e);
            }
        }
    }

    /// Whether `peer`'s link is still open after a read (`received`: open, or the error):
    /// false once the peer closed it after its Goodbye; a link lost without one fails the
    /// engine.
    fn link_still_open(
        &self,
        st: &mut EngineState,
        peer: NodeId,
        received: Result<bool, svm_comm::transport::CommError>,
    ) -> Result<bool, EngineError> {
        match received {
            Ok(a) => Ok(a),
            Err(_) if st.goodbye_from[peer as usize] => Ok(false),
            Err(e) => {
                let why = match e {
                    svm_comm::transport::CommError::Lost { why, .. } => why,
                    other => other.to_string(),
                };
                Err(self.lost(st, peer, &why))
            }
        }
    }

    /// Handles the whole frames a read from `peer`'s link put into `buf`, in order, up to
    /// and including the first page request whose handling queued frames to send while more
    /// follow ([`Frames::More`]: the caller lets go of the state to write them out, then
    /// calls again). Other frames' answers go with what follows them in the read: a lock
    /// grant leaves together with the grants of the pages the acquirer asked for along with
    /// the lock (`SVM_LOCK_PAGES`, whose requests it sends right behind the lock's), so the
    /// acquirer's engine installs them in the step that wakes its thread (test
    /// `a_lock_takes_its_page_along`). Once every frame is handled, a link the peer closed
    /// (`alive` false) is closed here too ([`Frames::Handled`]).
    fn on_received(
        &self,
        st: &mut EngineState,
        peer: NodeId,
        link: &dyn Link,
        alive: bool,
        buf: &mut RecvBuf,
    ) -> Result<Frames, EngineError> {
        loop {
            let handled = match buf.next_frame() {
                Ok(Some(frame)) => self.on_frame(st, peer, frame).map(|request| {
                    request && self.out_pending.load(Ordering::Acquire) && buf.pending() != 0
                }),
                Ok(None) => break,
                Err(e) => Err(EngineError::MalformedFrame {
                    peer,
                    why: e.to_string(),
                }),
            };
            match handled {
                Ok(false) => {}
                Ok(true) => {
                    self.drain_loopback(st)?;
                    return Ok(Frames::More);
                }
                Err(e) => {
                    // A sender of garbage (a bad header or a bad message) is cut off.
                    if matches!(e, EngineError::MalformedFrame { .. }) {
                        link.close();
                    }
                    return Err(e);
                }
            }
        }
        self.drain_loopback(st)?;
        if !alive {
            if buf.pending() != 0 {
                return Err(self.lost(st, peer, "connection closed"));
            }
            self.peer_closed(st, peer)?;
        }
        Ok(Frames::Handled)
    }

    /// Fails the engine if, by the step's time, a send to a peer failed longer ago than
    /// [`SEND_LOST_GRACE`] without that peer's Goodbye, or a thread has waited for a page
    /// longer than the job's deadline.
    pub(super) fn check_deadlines(&self, st: &EngineState) -> Result<(), EngineError> {
        let grace = SEND_LOST_GRACE.as_nanos() as u64;
        let lost_send = st
            .send_lost
            .iter()
            .enumerate()
            .find_map(|(peer, l)| match l {
                Some((at, why)) if !st.goodbye_from[peer] && st.now.saturating_sub(*at) > grace => {
                    Some(why.clone())
                }
                _ => None,
            });
        if let Some(why) = lost_send {
            return Err(EngineError::SendFailed(why));
        }
        if let Some((_, w)) = st.pages.oldest_waiter() {
            let waited = Duration::from_nanos(st.now.saturating_sub(w.since_ns));
            if waited > self.cfg.timeout {
                return Err(EngineError::FaultTimeout(self.cfg.timeout));
            }
        }
        Ok(())
    }

    /// Handles one whole frame from `from`: decodes it, counts it, and dispatches its message.
    /// Returns whether it was a page request ([`ProtoMsg::is_page_request`]).
    pub(super) fn on_frame(
        &self,
        st: &mut EngineState,
        from: NodeId,
        frame: &[u8],
    ) -> Result<bool, EngineError> {
        let f = wire::decode(frame).map_err(|e| EngineError::MalformedFrame {
            peer: from,
            why: e.to_string(),
        })?;
        let m = st.counters.msgs.entry(f.msg.stat_name()).or_default();
        m.received += 1;
        m.received_bytes += frame.len() as u64;
        if crate::profile::on() {
            crate::profile::message(
                f.msg.stat_name(),
                from,
                frame.len() as u64,
                false,
                f.header.seq,
            );
        }
        let request = matches!(&f.msg, Msg::Proto { msg, .. } if msg.is_page_request());
        self.handle_msg(st, from, f.msg, f.data)?;
        Ok(request)
    }

    /// A linger or a protocol timer due at `due` (ns, as `now`) was just set (under the state
    /// lock). The engine may be asleep in epoll until a later time: if this is the earliest
    /// timer, it is woken to sleep until this one instead.
    pub(super) fn arm_timer(&self, due: u64) {
        // Called after every hook while a timer is set: look before the read-modify-write.
        if due < self.timer_due.load(Ordering::Acquire)
            && due < self.timer_due.fetch_min(due, Ordering::AcqRel)
        {
            self.wake.signal();
        }
    }

    /// The earliest armed timer: a lock timer's end (a linger, a quantum), a protocol's
    /// `next_timer` or the deferred releases' flush (ns, as `now`).
    pub(super) fn next_timer(st: &EngineState) -> Option<u64> {
        let lock_timers = st.lock_timers.iter().map(|&(t, _, _)| t);
        let protocols = st.protocols.iter().flatten().filter_map(|p| p.next_timer());
        lock_timers
            .chain(protocols)
            .chain(st.release_deferred)
            .min()
    }

    /// Runs the timers due by the step's time: moves on the lock tokens whose linger has
    /// passed, and calls `on_timer` of each protocol whose `next_timer` has come.
    pub(super) fn run_timers(&self, st: &mut EngineState) -> Result<(), EngineError> {
        let mut ended = Vec::new();
        let now = st.now;
        st.lock_timers.retain(|&(t, lock, which)| {
            if t <= now {
                ended.push((lock, which));
                false
            } else {
                true
            }
        });
        for (lock, which) in ended {
            let mut evs = Vec::new();
            match which {
                // A later release armed a later linger: that one decides.
                LockTimer::Linger
                    if st
                        .lock_timers
                        .iter()
                        .any(|&(_, l, w)| l == lock && w == LockTimer::Linger) => {}
                // The token may move on: take back the word its threads may be using
                // meanwhile (a limited one, `publish_fast`) and count their takes first; a
                // token in use, or one a thread of this node may take again once its page
                // comes, lingers once more (`SyncState::linger_stays`).
                LockTimer::Linger => {
                    let takes = self.reclaim_fast(st, lock);
                    let in_use = takes > 0 || st.pages.waiter_count() > 0;
                    if st.sync.linger_stays(lock, in_use) {
                        self.arm_lock_timer(st, lock, LockTimer::Linger);
                    } else {
                        st.sync.linger_expired(lock, &mut evs);
                    }
                }
                LockTimer::Quantum => {
                    self.reclaim_fast(st, lock);
                    st.sync.quantum_expired(lock, &mut evs);
                }
            }
            self.run_sync_events(st, evs)?;
            self.publish_fast(st, lock);
        }
        if st.release_deferred.is_some_and(|t| t <= now) {
            self.flush_deferred_releases(st)?;
        }
        for id in 0..st.protocols.len() {
            let ctx = node_ctx!(self, st);
            let mut acts = Vec::new();
            match st.protocols[id].as_mut() {
                Some(p) if p.next_timer().is_some_and(|t| t <= now) => p.on_timer(&ctx, &mut acts),
                _ => continue,
            }
            self.run_actions(st, id as u8, acts, &[])?;
        }
        self.drain_loopback(st)?;
        self.timer_due
            .store(Self::next_timer(st).unwrap_or(u64::MAX), Ordering::Release);
        Ok(())
    }
}

/// A thread counted as asleep ([`Node::asleep`]).
pub(super) struct Asleep<'a>(&'a Node);

impl Drop for Asleep<'_> {
    fn drop(&mut self) {
        self.0.asleep.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_spin_less_alone_and_preempt_only_while_every_node_can_have_a_cpu() {
        assert_eq!(default_spin_polls(1), DEFAULT_SPIN_POLLS_ALONE);
        assert_eq!(default_spin_polls(2), DEFAULT_SPIN_POLLS);
        assert_eq!(default_spin_polls(8), DEFAULT_SPIN_POLLS);
        assert_eq!(
            default_engine_nice(2, 2),
            Some(crate::config::DEFAULT_ENGINE_NICE)
        );
        assert_eq!(
            default_engine_nice(1, 1),
            Some(crate::config::DEFAULT_ENGINE_NICE)
        );
        assert_eq!(default_engine_nice(3, 2), None);
        // A waiting thread wakes its engine to spin only where a peer can answer.
        assert!(wakes_to_spin(true, DEFAULT_SPIN_POLLS, 2) && wakes_to_spin(true, 2048, 4));
        assert!(
            !wakes_to_spin(true, DEFAULT_SPIN_POLLS_ALONE, 1),
            "alone: nothing to wait for"
        );
        assert!(!wakes_to_spin(false, 2048, 2) && !wakes_to_spin(true, 0, 2));
    }
}
