//! Synchronisation: releases and acquires fanned in over every protocol, and the locks,
//! barriers and semaphores the application threads wait on.

use super::*;

impl Node {
    // ----------------------------------------------------------------------------------------
    // Synchronization

    pub(super) fn new_token(st: &mut EngineState) -> u64 {
        let t = st.next_token;
        st.next_token += 1;
        t
    }

    pub(super) fn complete(&self, st: &mut EngineState, w: Waiter, r: WaitResult) {
        st.blocked.remove(&w);
        if let Some(c) = st.cells.get(&w) {
            c.complete(r);
        }
    }

    /// Arms the engine timer that ends `lock`'s linger or its remote request's quantum.
    pub(super) fn arm_lock_timer(&self, st: &mut EngineState, lock: u64, which: LockTimer) {
        let after = match which {
            LockTimer::Linger => crate::sync::LOCK_LINGER,
            LockTimer::Quantum => crate::sync::LOCK_QUANTUM,
        };
        let until = st.now + after.as_nanos() as u64;
        st.lock_timers.push((until, lock, which));
        self.arm_timer(until);
    }

    pub(super) fn run_sync_events(
        &self,
        st: &mut EngineState,
        evs: Vec<SyncEvent>,
    ) -> Result<(), EngineError> {
        for ev in evs {
            match ev {
                SyncEvent::Send {
                    to,
                    msg: msg @ wire::SyncMsg::LockGrant { lock, .. },
                } if to != self.me => {
                    // The token leaves: its linger and its remote request's quantum end with
                    // its stay. Left armed, they would fire during a later stay of the token
                    // and cut that stay's linger or quantum short.
                    st.lock_timers.retain(|&(_, l, _)| l != lock);
                    // Every path that moves a token on takes its fast-path word back first;
                    // a word still open here would let a thread of this node into the
                    // critical section while another node holds the lock.
                    if st.fast_locks.get(&lock).is_some_and(|f| !f.is_slow()) {
                        return Err(EngineError::Protocol(format!(
                            "lock {lock}: the token left for node {to} while its fast path was open"
                        )));
                    }
                    self.flush_deferred_releases(st)?;
                    self.lock_pages_let_go(st, lock)?;
                    self.token_leaves(st)?;
                    self.send(st, to, Msg::Sync(msg), &[])?;
                }
                SyncEvent::Send { to, msg } => self.send(st, to, Msg::Sync(msg), &[])?,
                SyncEvent::Granted {
                    lock,
                    waiter,
                    notices,
                } => {
                    self.lock_taken(lock);
                    self.start_acquire(st, vec![waiter], WaitResult::Granted, &notices)?
                }
                SyncEvent::TryFailed { waiter, .. } => {
                    self.complete(st, waiter, WaitResult::TryFailed)
                }
                SyncEvent::Linger { lock } => self.arm_lock_timer(st, lock, LockTimer::Linger),
                SyncEvent::Quantum { lock } => self.arm_lock_timer(st, lock, LockTimer::Quantum),
                SyncEvent::BarrierDone {
                    barrier,
                    waiters,
                    notices,
                    all_nodes,
                    nodes,
                } => {
                    if barrier == GLOBAL_BARRIER {
                        // Every node takes part in the global barrier: notices kept for locks
                        // and semaphores from before it are now redundant (see SyncState).
                        st.sync.clear_lock_notices();
                        st.sems.clear_notices();
                    }
                    let token = Self::new_token(st);
                    st.acquires.insert(
                        token,
                        AcquireCont {
                            waiters,
                            result: WaitResult::BarrierDone,
                        },
                    );
                    let departure = BarrierDeparture::of(all_nodes, nodes, self.nodes as usize);
                    self.acquire_all(st, token, &notices, Some(departure))?;
                }
                SyncEvent::BarrierMismatch {
                    waiter,
                    expected,
                    got,
                    ..
                } => self.complete(st, waiter, WaitResult::BarrierMismatch { expected, got }),
            }
        }
        Ok(())
    }

    /// The protocol instance of `page`.
    pub(super) fn protocol_of<'a>(
        &self,
        st: &'a EngineState,
        page: PageId,
    ) -> Option<&'a dyn Protocol> {
        st.protocols
            .get(self.space.proto_of(page) as usize)
            .and_then(|p| p.as_deref())
    }

    /// Records one protocol's answer for `token`; returns the gathered notices once every
    /// protocol has answered.
    pub(super) fn fan_in(
        st: &mut EngineState,
        token: u64,
        notices: Vec<PageId>,
    ) -> Option<Vec<PageId>> {
        let e = st.fanin.get_mut(&token)?;
        e.0 -= 1;
        e.1.extend(notices);
        if e.0 > 0 {
            return None;
        }
        st.fanin.remove(&token).map(|(_, n)| n)
    }

    /// Runs a release (lock release, semaphore post, barrier arrival) in every protocol; it
    /// completes when all have answered.
    pub(super) fn release_all(
        &self,
        st: &mut EngineState,
        token: u64,
        kind: SyncKind,
    ) -> Result<(), EngineError> {
        st.release_deferred = None;
        self.in_every_protocol(st, token, |p, ctx, acts| match kind {
            SyncKind::LockOrSem => p.on_release(ctx, token, acts),
            SyncKind::Barrier => p.on_barrier_arrive(ctx, token, acts),
            SyncKind::AllNodesBarrier => p.on_all_nodes_barrier_arrive(ctx, token, acts),
        })
    }

    /// A lock release in a job of two nodes: runs it in the protocols whose releases cannot
    /// wait, and records that the others owe one (`Protocol::release_can_wait`). Until the
    /// token leaves, nothing can tell the other node of this release, so its flush may wait
    /// for the next one — SPLASH-2 radiosity under sc-mw takes and releases its task locks
    /// ~250,000 times, mostly on the node that holds the token, and each flush lowered the
    /// pages written to read-only, sent their diffs and took the write faults again.
    fn release_lock_locally(&self, st: &mut EngineState, token: u64) -> Result<(), EngineError> {
        // A protocol with nothing to flush releases now: it costs nothing, and no timer runs
        // for it (every protocol has an instance, used by some region or not).
        let waits = |p: &dyn Protocol| p.release_can_wait() && !p.quiescent();
        let mut deferred = false;
        let mut others = false;
        for p in st.protocols.iter().flatten() {
            if waits(p.as_ref()) {
                deferred = true;
            } else {
                others = true;
            }
        }
        if deferred {
            st.counters.releases_deferred += 1;
            if st.release_deferred.is_none() {
                let due = st.now + self.cfg.release_delay_us * 1000;
                st.release_deferred = Some(due);
                self.arm_timer(due);
            }
        }
        if !others {
            return self.release_done(st, token, Vec::new());
        }
        self.in_protocols(
            st,
            token,
            |p| !waits(p),
            |p, ctx, acts| p.on_release(ctx, token, acts),
        )
    }

    /// A lock's token is about to leave: every protocol lets go of what it kept back until
    /// then ([`Protocol::on_token_leaves`]), before the grant on the same links.
    fn token_leaves(&self, st: &mut EngineState) -> Result<(), EngineError> {
        for proto in 0..st.protocols.len() {
            let mut acts = Vec::new();
            let ctx = node_ctx!(self, st);
            let Some(p) = st.protocols[proto].as_mut() else {
                continue;
            };
            p.on_token_leaves(&ctx, &mut acts);
            if !acts.is_empty() {
                self.run_actions(st, proto as u8, acts, &[])?;
            }
        }
        // Holds that end with no request waiting emit nothing, yet a barrier through shared
        // memory may now pass without the hooks. Ending them only makes the state quieter and
        // timers later: no fast-path holder to convert, no timer to arm.
        self.record_quiescence(st);
        Ok(())
    }

    /// Before anything that tells the other node of this node's releases (the token of a
    /// lock leaving, a user message): the flush that lock releases left to later
    /// ([`Node::release_lock_locally`]). In a job of two nodes its diffs and invalidations go
    /// out on the one link ahead of what follows, so the other node applies them first.
    pub(super) fn flush_deferred_releases(&self, st: &mut EngineState) -> Result<(), EngineError> {
        if st.release_deferred.take().is_none() {
            return Ok(());
        }
        let token = Self::new_token(st);
        self.in_protocols(
            st,
            token,
            |p| p.release_can_wait(),
            |p, ctx, acts| p.on_release(ctx, token, acts),
        )
    }

    /// Runs an acquire in every protocol: a lock or semaphore grant (`departure` None) or a
    /// barrier departure; the waiters wake when all have answered.
    pub(super) fn acquire_all(
        &self,
        st: &mut EngineState,
        token: u64,
        notices: &[PageId],
        departure: Option<BarrierDeparture>,
    ) -> Result<(), EngineError> {
        self.in_every_protocol(st, token, |p, ctx, acts| match departure {
            None => p.on_acquire(ctx, token, notices, acts),
            Some(d) => d.run(p, ctx, token, notices, acts),
        })
    }

    /// Calls `hook` on every protocol instance for the fanned-in operation `token`, running
    /// each one's actions as it returns.
    pub(super) fn in_every_protocol(
        &self,
        st: &mut EngineState,
        token: u64,
        hook: impl FnMut(&mut dyn Protocol, &dyn Context, &mut Vec<Action>),
    ) -> Result<(), EngineError> {
        self.in_protocols(st, token, |_| true, hook)
    }

    /// [`Node::in_every_protocol`] for the protocol instances `which` accepts only.
    pub(super) fn in_protocols(
        &self,
        st: &mut EngineState,
        token: u64,
        which: impl Fn(&dyn Protocol) -> bool,
        mut hook: impl FnMut(&mut dyn Protocol, &dyn Context, &mut Vec<Action>),
    ) -> Result<(), EngineError> {
        let ids: Vec<u8> = (0..st.protocols.len() as u8)
            .filter(|i| st.protocols[*i as usize].as_deref().is_some_and(&which))
            .collect();
        st.fanin.insert(token, (ids.len(), Vec::new()));
        for id in ids {
            let mut acts = Vec::new();
            let ctx = node_ctx!(self, st);
            if let Some(p) = st.protocols[id as usize].as_mut() {
                hook(p.as_mut(), &ctx, &mut acts);
            }
            self.run_actions(st, id, acts, &[])?;
        }
        Ok(())
    }

    pub(super) fn start_acquire(
        &self,
        st: &mut EngineState,
        waiters: Vec<Waiter>,
        result: WaitResult,
        notices: &[PageId],
    ) -> Result<(), EngineError> {
        let token = Self::new_token(st);
        st.acquires.insert(token, AcquireCont { waiters, result });
        self.acquire_all(st, token, notices, None)
    }

    pub(super) fn release_done(
        &self,
        st: &mut EngineState,
        token: u64,
        notices: Vec<PageId>,
    ) -> Result<(), EngineError> {
        let Some(c) = st.releases.remove(&token) else {
            return Ok(());
        };
        let mut evs = Vec::new();
        match c {
            ReleaseCont::Unlock { lock, waiter } => {
                match st.sync.lock_release(lock, waiter, notices, &mut evs) {
                    Ok(()) => {
                        self.run_sync_events(st, evs)?;
                        self.publish_fast(st, lock);
                        self.complete(st, waiter, WaitResult::Released);
                    }
                    Err(_) => self.complete(st, waiter, WaitResult::NotHolder),
                }
            }
            ReleaseCont::SemPost { sem, waiter } => {
                st.sems.post(sem, notices, &mut evs);
                self.run_sync_events(st, evs)?;
                self.complete(st, waiter, WaitResult::Released);
            }
            ReleaseCont::Barrier {
                barrier,
                count,
                waiter,
            } => {
                // The arrival ends every linger here (`SyncState::barrier_arrive`): take
                // back the words of the lingering tokens first.
                self.reclaim_lingering_fast(st);
                let arrived = match count {
                    Some(count) => st
                        .sync
                        .barrier_arrive(barrier, count, waiter, notices, &mut evs),
                    None => st
                        .sync
                        .barrier_all_arrive(barrier, waiter, notices, &mut evs),
                };
                match arrived {
                    Ok(()) => self.run_sync_events(st, evs)?,
                    Err(SyncError::BarrierBusy { .. }) => {
                        self.complete(st, waiter, WaitResult::BarrierBusy)
                    }
                    Err(_) => self.complete(st, waiter, WaitResult::ZeroCount),
                }
            }
            ReleaseCont::HostBarrierArrive { waiter } => {
                // A barrier through shared memory carries no notices: the protocols whose
                // hooks run around it promise to return none
                // (`Protocol::barrier_hooks_without_messages`). Dropping them would lose
                // writes, so a protocol that breaks the promise ends the job.
                if !notices.is_empty() {
                    return Err(EngineError::Protocol(format!(
                        "a protocol returned {} write notices at an arrival at a barrier through shared memory, which carries none (it asks for barrier_hooks_without_messages); run with SVM_HOST_BARRIER=0 and report this",
                        notices.len()
                    )));
                }
                self.complete(st, waiter, WaitResult::Released)
            }
        }
        Ok(())
    }

    /// The calling thread's waiter id (made on first use).
    pub(super) fn thread_waiter(&self) -> Waiter {
        lockfast::THREAD.with(|t| self.waiter_of(t))
    }

    /// The waiter id kept in a thread's `ThreadLocks` (made on first use).
    pub(super) fn waiter_of(&self, t: &lockfast::ThreadLocks) -> Waiter {
        let mut w = t.waiter.get();
        if w == 0 {
            w = self.next_waiter.fetch_add(1, Ordering::Relaxed);
            t.waiter.set(w);
        }
        w
    }

    /// Runs `op` under the state lock for the calling thread, then sleeps until the engine
    /// completes the thread's wait. A failure of `op` or the deadline ends the node (this
    /// thread's exit point, `Node::fail`).
    pub(super) fn wait_op(
        &self,
        what: Blocked,
        op: impl FnOnce(&Node, &mut EngineState, Waiter) -> Result<(), EngineError>,
    ) -> WaitResult {
        let cell = Arc::new(WaitCell::new());
        {
            let mut st = self.lock_state();
            let w = self.thread_waiter();
            if let Err(e) = self.begin_op(&mut st, w, what.clone(), &cell, op) {
                self.fail(Some(&st), e)
            }
        }
        self.wait_cell(&cell, what)
    }

    /// Starts the calling thread's synchronisation operation `op` — under the state if it is
    /// free, else posted for its holder (`step.rs`) — and sleeps until the engine completes
    /// it. A failure of `op` or the deadline ends the node (`Node::fail`).
    pub(super) fn wait_sync_op(&self, op: SyncOp) -> WaitResult {
        let w = self.thread_waiter();
        match self.start_sync_op(None, w, op) {
            Ok(cell) => self.wait_cell(&cell, op.blocked()),
            Err(e) => {
                let st = self.lock_state();
                self.fail(Some(&st), e)
            }
        }
    }

    /// Sleeps until the engine completes `cell` (waiting for `what`), at most `SVM_TIMEOUT`.
    fn wait_cell(&self, cell: &WaitCell, what: Blocked) -> WaitResult {
        let deadline = Instant::now() + self.cfg.timeout;
        if cell.state.load(Ordering::Acquire) != 1 {
            self.engine_watch();
        }
        if !futex::wait_until(&cell.state, |v| v == 1, Some(deadline)) {
            let st = self.lock_state();
            let err = EngineError::Timeout {
                after: self.cfg.timeout,
                what: format!("{what:?}"),
            };
            self.fail(Some(&st), err);
        }
        let r = cell.result.lock().unwrap_or_else(|p| p.into_inner()).take();
        r.unwrap_or(WaitResult::Finished)
    }

    /// Starts waiter `w`'s operation `op` under the state lock: records `cell` (fresh) as the
    /// cell the engine completes for `w` and what `w` waits for, runs `op` and the messages it
    /// sent to this node.
    pub(super) fn begin_op(
        &self,
        st: &mut EngineState,
        w: Waiter,
        what: Blocked,
        cell: &Arc<WaitCell>,
        op: impl FnOnce(&Node, &mut EngineState, Waiter) -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
        st.cells.insert(w, cell.clone());
        st.blocked.insert(w, (what, st.now));
        op(self, st, w)?;
        self.drain_loopback(st)
    }

    /// The slow path of a synchronisation operation of waiter `w`, run under the state lock:
    /// it completes `w`'s wait cell, now or when messages arrive.
    pub(super) fn run_sync_op(
        &self,
        st: &mut EngineState,
        w: Waiter,
        op: SyncOp,
    ) -> Result<(), EngineError> {
        match op {
            SyncOp::Lock { id, try_only } => {
                self.reclaim_fast(st, id);
                let mut evs = Vec::new();
                st.sync.lock_acquire(id, w, try_only, &mut evs);
                self.run_sync_events(st, evs)?;
                if try_only {
                    return Ok(());
                }
                self.ask_for_lock_pages(st, id)
            }
            SyncOp::Unlock(id) => {
                self.take_back_fast(st, id, w)?;
                self.judge_lock_pages(st, id);
                self.lock_given_back(id);
                if !st.sync.is_holder(id, w) {
                    self.complete(st, w, WaitResult::NotHolder);
                    return Ok(());
                }
                let token = Self::new_token(st);
                st.releases.insert(
                    token,
                    ReleaseCont::Unlock {
                        lock: id,
                        waiter: w,
                    },
                );
                if self.nodes == 2 && self.cfg.release_delay_us > 0 {
                    return self.release_lock_locally(st, token);
                }
                self.release_all(st, token, SyncKind::LockOrSem)
            }
            SyncOp::SemPost(id) => {
                let token = Self::new_token(st);
                st.releases
                    .insert(token, ReleaseCont::SemPost { sem: id, waiter: w });
                self.release_all(st, token, SyncKind::LockOrSem)
            }
            SyncOp::SemWait(id) => {
                let mut evs = Vec::new();
                st.sems.wait(id, w, &mut evs);
                self.run_sync_events(st, evs)
            }
            SyncOp::Barrier { id, count } => {
                if count == Some(0) {
                    self.complete(st, w, WaitResult::ZeroCount);
                    return Ok(());
                }
                let token = Self::new_token(st);
                st.releases.insert(
                    token,
                    ReleaseCont::Barrier {
                        barrier: id,
                        count,
                        waiter: w,
                    },
                );
                let kind = match count {
                    None => SyncKind::AllNodesBarrier,
                    Some(_) => SyncKind::Barrier,
                };
                self.release_all(st, token, kind)
            }
        }
    }

    /// Acquires lock `id`; with `try_only`, returns false instead of waiting when it is held.
    pub fn lock(&self, id: u64, try_only: bool) -> bool {
        let p0 = if crate::profile::on() { now_ns() } else { 0 };
        if self.fast_lock(id) {
            if p0 != 0 {
                crate::profile::lock_acquired(id, p0);
            }
            return true;
        }
        let t0 = Instant::now();
        let op = SyncOp::Lock { id, try_only };
        let r = self.wait_sync_op(op);
        let ok = r == WaitResult::Granted;
        if ok && p0 != 0 {
            crate::profile::lock_acquired(id, p0);
        }
        if ok {
            locked(&self.wait_times)
                .lock_acquire_ns
                .record(t0.elapsed().as_nanos() as u64);
        }
        ok
    }

    /// Releases lock `id`. Returns false if the calling thread does not hold it.
    pub fn unlock(&self, id: u64) -> bool {
        if self.fast_unlock(id) {
            if crate::profile::on() {
                crate::profile::lock_released();
            }
            return true;
        }
        let op = SyncOp::Unlock(id);
        let r = self.wait_sync_op(op);
        if r == WaitResult::Released && crate::profile::on() {
            crate::profile::lock_released();
        }
        r == WaitResult::Released
    }

    /// Posts semaphore `id` (a release).
    pub fn sem_post(&self, id: u64) {
        let op = SyncOp::SemPost(id);
        self.wait_sync_op(op);
    }

    /// Waits on semaphore `id` (an acquire once granted).
    pub fn sem_wait(&self, id: u64) {
        let op = SyncOp::SemWait(id);
        self.wait_sync_op(op);
    }

    /// Waits at barrier `id` until `count` threads (over all nodes) have arrived.
    pub fn barrier(&self, id: u64, count: u32) -> WaitResult {
        if let Some(r) = self.host_barrier_wait(id, count) {
            return r;
        }
        self.barrier_of(id, Some(count))
    }

    /// Uses `hb` for this node's barriers from now on: every node of the job runs on this
    /// host and maps the same slots (DECK-SCI). Every node of the job must call it, before
    /// its first barrier, or none. A second call is ignored.
    pub fn use_host_barrier(&self, hb: svm_comm::deck::sci::HostBarrier) {
        let hooks = {
            let st = self.lock_state();
            let mut ps = st.protocols.iter().flatten();
            ps.any(|p| p.barrier_hooks_without_messages())
        };
        self.host_barrier_hooks.store(hooks, Ordering::Relaxed);
        let _ = self.host_barrier.set(hb);
    }

    /// Runs, for the calling thread, the barrier arrival hook (`arrive`; it is about to enter
    /// barrier `id` through shared memory) or departure hook (no notices; it has left it) of
    /// the protocols that want them at such barriers (`Protocol::barrier_hooks_without_messages`;
    /// the others must not see a barrier they take no part in); returns once they answered.
    fn host_barrier_hooks(&self, id: u64, arrive: bool) {
        self.wait_op(Blocked::Barrier(id), |n, st, w| {
            let token = Self::new_token(st);
            if arrive {
                st.releases
                    .insert(token, ReleaseCont::HostBarrierArrive { waiter: w });
            } else {
                let cont = AcquireCont {
                    waiters: vec![w],
                    result: WaitResult::BarrierDone,
                };
                st.acquires.insert(token, cont);
            }
            n.in_protocols(
                st,
                token,
                |p| p.barrier_hooks_without_messages(),
                |p, ctx, acts| match arrive {
                    true => p.on_barrier_arrive(ctx, token, acts),
                    false => p.on_barrier_depart(ctx, token, &[], acts),
                },
            )
        });
    }

    /// The shared-memory barrier (`use_host_barrier`): Some(result) when the barrier is done
    /// with, None when the caller must go through the message barrier — no slot for `id`, or
    /// some arrival of the episode had what only the message barrier carries: write notices
    /// or flushes to wait for (a protocol that is not barrier-quiescent), or, at the global
    /// barrier, lock and semaphore notices to collect. Then every participant goes through
    /// the message barrier after this one, so all make the same choice.
    fn host_barrier_wait(&self, id: u64, count: u32) -> Option<WaitResult> {
        use svm_comm::deck::sci::Arrival;
        let hb = self.host_barrier.get()?;
        let t0 = Instant::now();
        let p0 = if crate::profile::on() { now_ns() } else { 0 };
        let mut slow = self.barrier_dirty.load(Ordering::SeqCst);
        if !slow && id == GLOBAL_BARRIER {
            let st = self.lock_state();
            slow = st.sync.lock_notice_count() > 0 || st.sems.notice_count() > 0;
        }
        // Hooks that do work without barrier messages run around the shared-memory barrier;
        // if another node's arrival sends everyone through the message barrier after all,
        // that barrier runs them again (a phase of no work for them).
        let hooks = !slow && self.host_barrier_hooks.load(Ordering::Relaxed);
        if hooks {
            self.host_barrier_hooks(id, true);
        }
        let deadline = t0 + self.cfg.timeout;
        let asleep = self.asleep();
        let got = hb.wait(id, count, slow, Duration::from_millis(100), || {
            Instant::now() < deadline
        });
        drop(asleep);
        match got {
            Arrival::Done { slow: false } => {
                if hooks {
                    self.read_inbound_now();
                    self.host_barrier_hooks(id, false);
                }
                self.barrier_passed(id, t0, p0);
                Some(WaitResult::BarrierDone)
            }
            Arrival::Done { slow: true } | Arrival::NoSlot => None,
            Arrival::Mismatch { expected } => Some(WaitResult::BarrierMismatch {
                expected,
                got: count,
            }),
            Arrival::Abandoned => {
                let st = self.lock_state();
                let state = match hb.arrivals(id) {
                    Some((count, arrived)) => format!("{arrived} of {count} arrived"),
                    None => "no slot".into(),
                };
                let err = EngineError::Timeout {
                    after: self.cfg.timeout,
                    what: format!(
                        "{} in shared memory ({state})",
                        crate::sync::BarrierName(id)
                    ),
                };
                self.fail(Some(&st), err)
            }
        }
    }

    /// Barrier `id` of every node of the job, exactly one thread of each (the global barrier,
    /// and personalities' barriers known to have one participant per node). Every node must
    /// call this form for `id`, never [`Node::barrier`].
    ///
    /// Up to [`DISSEMINATION_MAX_NODES`] nodes it is a dissemination barrier without a manager
    /// (`sync/dissemination.rs`: at 2 nodes each node sends one message and leaves when the
    /// other's arrives — one message delay instead of the manager's two); beyond, the counting
    /// barrier with its manager. The choice depends on the job's node count only, so every
    /// node makes the same one.
    pub fn barrier_all_nodes(&self, id: u64) -> WaitResult {
        if self.host_barrier.get().is_some() {
            if !self
                .host_barrier_busy
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id)
            {
                return WaitResult::BarrierBusy;
            }
            let r = self.host_barrier_wait(id, self.nodes as u32);
            self.host_barrier_busy
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            if let Some(r) = r {
                return r;
            }
        }
        if self.nodes as usize <= DISSEMINATION_MAX_NODES {
            self.barrier_of(id, None)
        } else {
            self.barrier_of(id, Some(self.nodes as u32))
        }
    }

    pub(super) fn barrier_of(&self, id: u64, count: Option<u32>) -> WaitResult {
        let t0 = Instant::now();
        let p0 = if crate::profile::on() { now_ns() } else { 0 };
        let op = SyncOp::Barrier { id, count };
        let r = self.wait_sync_op(op);
        self.barrier_passed(id, t0, p0);
        r
    }

    /// Records a barrier wait that began at `t0` (and at `p0` on the profile's clock, 0 when
    /// not profiling) in the statistics and the profile.
    fn barrier_passed(&self, id: u64, t0: Instant, p0: u64) {
        locked(&self.wait_times)
            .barrier_wait_ns
            .record(t0.elapsed().as_nanos() as u64);
        if p0 != 0 {
            crate::profile::barrier_passed(id, p0);
        }
    }
}
