//! The simulated cluster's scheduler: each step delivers one message or runs one instruction of
//! one thread, chosen by the seeded RNG (see the module docs of `sim.rs`).

use super::*;

impl Cluster {
    /// Arms a lock timer of `node` (once: a timer already armed stays as it is).
    pub(super) fn arm(&mut self, kind: LockTimerKind, node: NodeId, lock: u64) {
        let t = LockTimer { kind, node, lock };
        if !self.lock_timers.contains(&t) {
            self.lock_timers.push(t);
        }
    }

    pub(super) fn run_inner(&mut self) -> SimResult {
        loop {
            self.choices.clear();
            for (i, c) in self.chans.iter().enumerate() {
                if !c.is_empty() {
                    self.choices.push(Choice::Channel(i));
                }
            }
            for &t in &self.lock_timers {
                if self.crashed != Some(t.node) {
                    self.choices.push(Choice::LockTimer(t));
                }
            }
            for (i, nd) in self.nodes.iter().enumerate() {
                if self.crashed != Some(i as NodeId) && nd.proto.next_timer().is_some() {
                    self.choices.push(Choice::Timer(i as NodeId));
                }
            }
            let mut unfinished = false;
            for (i, t) in self.threads.iter().enumerate() {
                match t.state {
                    ThreadState::Runnable => self.choices.push(Choice::Thread(i)),
                    ThreadState::Finished => {}
                    _ => unfinished = true,
                }
            }
            if let Some(dead) = self.crashed {
                let pending =
                    (0..self.n).any(|to| !self.chans[dead as usize * self.n + to].is_empty());
                if !pending {
                    return Err(SimErrorKind::NodeLost {
                        node: dead,
                        tokens: self.nodes[dead as usize].sync.tokens_held(),
                    });
                }
            }
            if self.choices.is_empty() {
                return if unfinished {
                    Err(SimErrorKind::Deadlock)
                } else {
                    Ok(())
                };
            }
            if self.stats.steps >= self.cfg.max_steps {
                return Err(SimErrorKind::StepLimit(self.stats.steps));
            }
            self.stats.steps += 1;
            let pick = self.choices[self.rng.gen_range(0..self.choices.len())];
            self.touched.clear();
            match pick {
                Choice::Channel(c) => self.deliver(c)?,
                Choice::Thread(t) => self.step_thread(t)?,
                Choice::LockTimer(t) => {
                    self.lock_timers.retain(|&x| x != t);
                    let mut ev = Vec::new();
                    let sync = &mut self.nodes[t.node as usize].sync;
                    match t.kind {
                        LockTimerKind::Linger => sync.linger_expired(t.lock, &mut ev),
                        LockTimerKind::Quantum => sync.quantum_expired(t.lock, &mut ev),
                    }
                    self.sync_events(t.node, ev)?;
                }
                Choice::Timer(node) => {
                    let nd = &mut self.nodes[node as usize];
                    if let Some(due) = nd.proto.next_timer() {
                        nd.ctx.now = nd.ctx.now.max(due);
                    }
                    let mut out = Vec::new();
                    nd.proto.on_timer(&nd.ctx, &mut out);
                    self.exec(node, out, None)?;
                }
            }
            if self.cfg.check_single_writer {
                self.check_single_writer()?;
            }
        }
    }

    pub(super) fn record(&mut self, ev: TraceEv) {
        if self.cfg.trace_len == 0 {
            return;
        }
        if self.trace.len() >= self.cfg.trace_len {
            self.trace.pop_front();
        }
        self.trace.push_back(ev);
    }

    pub(super) fn deliver(&mut self, c: usize) -> SimResult {
        let (from, to) = ((c / self.n) as NodeId, (c % self.n) as NodeId);
        let payload = self.chans[c]
            .pop_front()
            .expect("chosen channel is non-empty");
        if self.crashed == Some(to) {
            return Ok(());
        }
        match payload {
            Payload::Proto { msg, data } => {
                self.record(TraceEv::Proto {
                    from,
                    to,
                    msg: msg.clone(),
                    data: data.is_some(),
                });
                let mut out = Vec::new();
                let nd = &mut self.nodes[to as usize];
                nd.proto.on_message(
                    &nd.ctx,
                    from,
                    &msg,
                    data.as_ref().map_or(0, Vec::len),
                    &mut out,
                );
                self.exec(to, out, data.as_deref())
            }
            Payload::Sync(msg) => {
                self.record(TraceEv::Sync {
                    from,
                    to,
                    msg: msg.clone(),
                });
                if let SyncMsg::LockForward {
                    lock,
                    to: waiting,
                    try_only: false,
                } = msg
                {
                    self.lock_waits.insert((lock, waiting), 0);
                }
                let mut ev = Vec::new();
                self.nodes[to as usize].sync.on_message(from, &msg, &mut ev);
                let held: usize = self
                    .nodes
                    .iter()
                    .map(|nd| nd.sync.lock_notice_count())
                    .sum();
                self.stats.peak_lock_notices = self.stats.peak_lock_notices.max(held as u64);
                self.sync_events(to, ev)
            }
        }
    }

    pub(super) fn step_thread(&mut self, tid: ThreadId) -> SimResult {
        let t = &self.threads[tid];
        let (node, pc, op) = (t.node, t.pc, t.prog[t.pc]);
        self.record(TraceEv::Thread { tid, node, pc, op });
        self.nodes[node as usize]
            .ctx
            .unused
            .retain(|&(_, t, _)| t != tid);
        match op {
            Op::Load { addr, reg } => {
                if let Some(v) = self.access_word(tid, addr, None)? {
                    let t = &mut self.threads[tid];
                    set_reg(&mut t.regs, reg, v);
                    t.log.push(v);
                    self.advance(tid);
                }
            }
            Op::Store { addr, value } => {
                if self.access_word(tid, addr, Some(value))?.is_some() {
                    self.advance(tid);
                }
            }
            Op::StoreReg { addr, reg } => {
                let value = reg_of(&self.threads[tid].regs, reg);
                if self.access_word(tid, addr, Some(value))?.is_some() {
                    self.advance(tid);
                }
            }
            Op::AddImm { reg, imm } => {
                let t = &mut self.threads[tid];
                let v = reg_of(&t.regs, reg).wrapping_add(imm);
                set_reg(&mut t.regs, reg, v);
                self.advance(tid);
            }
            Op::SpinUntilEq {
                addr,
                value,
                max_loads,
            } => {
                if let Some(v) = self.access_word(tid, addr, None)? {
                    let t = &mut self.threads[tid];
                    if v == value {
                        t.spins = 0;
                        self.advance(tid);
                    } else {
                        t.spins += 1;
                        if t.spins > max_loads {
                            return Err(SimErrorKind::SpinBound { thread: tid, addr });
                        }
                    }
                }
            }
            Op::Lock(lock) | Op::TryLock { lock, .. }
                if self.cfg.fast_locks
                    && self.nodes[node as usize].sync.token_idle(lock)
                    && self.nodes[node as usize].proto.quiescent() =>
            {
                let try_only = matches!(op, Op::TryLock { .. });
                let mut ev = Vec::new();
                self.nodes[node as usize]
                    .sync
                    .lock_acquire(lock, tid as u64, try_only, &mut ev);
                if !matches!(ev.as_slice(), [SyncEvent::Granted { .. }]) {
                    return Err(SimErrorKind::Sync(format!(
                        "node {node}: an idle token of lock {lock} gave {ev:?}"
                    )));
                }
                if let Some(h) = self.lock_holders.insert(lock, tid) {
                    return Err(SimErrorKind::Invariant(format!(
                        "mutual exclusion: lock {lock} taken by thread {tid} (fast path) while thread {h} holds it"
                    )));
                }
                self.stats.fast_lock_ops += 1;
                self.fast_holders.insert(tid, (lock, false));
                let t = &mut self.threads[tid];
                if let Op::TryLock { reg, .. } = op {
                    set_reg(&mut t.regs, reg, 1);
                }
                self.advance(tid);
            }
            Op::Lock(lock) | Op::TryLock { lock, .. } => {
                let try_only = matches!(op, Op::TryLock { .. });
                self.threads[tid].state = ThreadState::Lock(lock);
                let mut ev = Vec::new();
                self.nodes[node as usize]
                    .sync
                    .lock_acquire(lock, tid as u64, try_only, &mut ev);
                self.sync_events(node, ev)?;
            }
            Op::Unlock(lock) => {
                if let Some((held, hooks_ran)) = self.fast_holders.remove(&tid) {
                    if held != lock {
                        self.fast_holders.insert(tid, (held, hooks_ran));
                    } else {
                        let nd = &self.nodes[node as usize];
                        if !hooks_ran && nd.proto.quiescent() && !nd.sync.lock_wanted(lock) {
                            self.lock_holders.remove(&lock);
                            let mut ev = Vec::new();
                            self.nodes[node as usize]
                                .sync
                                .lock_release(lock, tid as u64, Vec::new(), &mut ev)
                                .map_err(|e| SimErrorKind::Sync(format!("node {node}: {e}")))?;
                            self.stats.fast_lock_ops += 1;
                            self.advance(tid);
                            return self.sync_events(node, ev);
                        }
                        if !hooks_ran {
                            self.late_acquire(node)?;
                        }
                    }
                }
                self.start_release(tid, Pending::Unlock { tid, lock })?
            }
            Op::Crash => {
                self.crashed = Some(node);
                for t in self.threads.iter_mut().filter(|t| t.node == node) {
                    t.state = ThreadState::Finished;
                }
            }
            Op::Barrier { id, count } => self.start_release(
                tid,
                Pending::Arrive {
                    tid,
                    barrier: id,
                    count: Some(count),
                },
            )?,
            Op::BarrierAll(id) => self.start_release(
                tid,
                Pending::Arrive {
                    tid,
                    barrier: id,
                    count: None,
                },
            )?,
        }
        Ok(())
    }

    pub(super) fn advance(&mut self, tid: ThreadId) {
        let t = &mut self.threads[tid];
        t.pc += 1;
        t.state = if t.pc >= t.prog.len() {
            ThreadState::Finished
        } else {
            ThreadState::Runnable
        };
    }

    pub(super) fn start_release(&mut self, tid: ThreadId, p: Pending) -> SimResult {
        let node = self.threads[tid].node;
        let nd = &mut self.nodes[node as usize];
        let barrier = match p {
            Pending::Arrive { count, .. } => Some(count.is_none()),
            _ => None,
        };
        let token = nd.token(p);
        self.threads[tid].state = ThreadState::Release(token);
        let mut out = Vec::new();
        match barrier {
            Some(true) => nd
                .proto
                .on_all_nodes_barrier_arrive(&nd.ctx, token, &mut out),
            Some(false) => nd.proto.on_barrier_arrive(&nd.ctx, token, &mut out),
            None => nd.proto.on_release(&nd.ctx, token, &mut out),
        }
        self.exec(node, out, None)
    }

    /// Loads (`store = None`) or stores a word for thread `tid`. Returns `None` if the access
    /// faulted: the thread is then blocked and the protocol has been told.
    pub(super) fn access_word(
        &mut self,
        tid: ThreadId,
        addr: u64,
        store: Option<u64>,
    ) -> SimResult<Option<u64>> {
        let ps = self.cfg.page_size as u64;
        if addr & 7 != 0 {
            return Err(SimErrorKind::BadProgram(format!(
                "thread {tid}: address {addr:#x} is not 8-byte aligned"
            )));
        }
        let (page, off) = (addr / ps, (addr % ps) as usize);
        let node = self.threads[tid].node;
        let need = if store.is_some() {
            Access::Write
        } else {
            Access::Read
        };
        if self.access(node, page) < need {
            self.threads[tid].state = ThreadState::Fault { page, need };
            let mut out = Vec::new();
            let nd = &mut self.nodes[node as usize];
            nd.proto.on_fault(&nd.ctx, page, need, &mut out);
            self.exec(node, out, None)?;
            return Ok(None);
        }
        let mem = self.nodes[node as usize]
            .ctx
            .mem
            .entry(page)
            .or_insert_with(|| vec![0; ps as usize]);
        let word = &mut mem[off..off + 8];
        match store {
            Some(v) => {
                word.copy_from_slice(&v.to_le_bytes());
                self.touched.push((node, page));
                Ok(Some(v))
            }
            None => Ok(Some(u64::from_le_bytes(
                (&*word).try_into().expect("8 bytes"),
            ))),
        }
    }
}
