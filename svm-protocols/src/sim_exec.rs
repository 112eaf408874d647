//! The simulated cluster as the engine: it executes protocol actions and sync events, keeps
//! page access and contents, and checks the single-writer invariant (see the module docs of
//! `sim.rs`).

use super::*;

impl Cluster {
    pub(super) fn exec(
        &mut self,
        node: NodeId,
        actions: Vec<Action>,
        incoming: Option<&[u8]>,
    ) -> SimResult {
        self.convert_fast(node)?;
        for a in actions {
            match a {
                Action::Send { to, msg, attach } => {
                    if to as usize >= self.n {
                        return Err(SimErrorKind::Protocol(format!("node {node} sent {msg:?} to unknown node {to}")));
                    }
                    let data = attach.map(|p| {
                        self.nodes[node as usize].ctx.mem.get(&p).cloned().unwrap_or_else(|| self.zero_page.clone())
                    });
                    self.stats.proto_messages += 1;
                    self.stats.pages_sent += data.is_some() as u64;
                    if to != node {
                        let m = svm_comm::wire::Msg::Proto { proto: 0, msg: msg.clone() };
                        self.stats.wire_bytes += wire_len(&m, data.as_ref().map_or(0, |d| d.len()));
                        self.stats.wire_messages += 1;
                    }
                    self.chans[node as usize * self.n + to as usize].push_back(Payload::Proto { msg, data });
                }
                Action::SetAccess { page, access } => {
                    if access == Access::None && self.nodes[node as usize].twins.contains_key(&page) {
                        return Err(SimErrorKind::Protocol(format!(
                            "node {node}: SetAccess None on page {page}, which has a twin (its writes would be lost)"
                        )));
                    }
                    self.set_access(node, page, access)
                }
                Action::MakeTwin { page } => {
                    let nd = &mut self.nodes[node as usize];
                    let cur = nd.ctx.mem.get(&page).cloned().unwrap_or_else(|| self.zero_page.clone());
                    if nd.twins.insert(page, cur).is_some() {
                        return Err(SimErrorKind::Protocol(format!("node {node}: MakeTwin of page {page}, which already has a twin")));
                    }
                    self.stats.twins += 1;
                }
                Action::DropTwin { page } => {
                    if self.nodes[node as usize].twins.remove(&page).is_none() {
                        return Err(SimErrorKind::Protocol(format!("node {node}: DropTwin of page {page}, which has no twin")));
                    }
                }
                Action::SendDiffs { to, msg, pages } => {
                    if to as usize >= self.n {
                        return Err(SimErrorKind::Protocol(format!("node {node} sent {msg:?} to unknown node {to}")));
                    }
                    let nd = &mut self.nodes[node as usize];
                    let mut data = Vec::new();
                    for &p in &pages {
                        let Some(twin) = nd.twins.remove(&p) else {
                            return Err(SimErrorKind::Protocol(format!(
                                "node {node}: SendDiffs {msg:?} names page {p}, which has no twin"
                            )));
                        };
                        let cur = nd.ctx.mem.get(&p).unwrap_or(&self.zero_page);
                        svm_core::diff::encode(p, &twin, cur, &mut data);
                    }
                    self.stats.proto_messages += 1;
                    self.stats.diff_messages += 1;
                    self.stats.diff_bytes_sent += data.len() as u64;
                    if to != node {
                        let m = svm_comm::wire::Msg::Proto { proto: 0, msg: msg.clone() };
                        self.stats.wire_bytes += wire_len(&m, data.len());
                        self.stats.wire_messages += 1;
                    }
                    let data = if pages.is_empty() { None } else { Some(data) };
                    self.chans[node as usize * self.n + to as usize].push_back(Payload::Proto { msg, data });
                }
                Action::ApplyIncomingDiffs => {
                    let Some(d) = incoming else {
                        // No data came with the message: nothing to apply.
                        continue;
                    };
                    let ps = self.cfg.page_size;
                    let nd = &mut self.nodes[node as usize];
                    let mut touched = Vec::new();
                    let r = svm_core::diff::apply(d, ps, |p, off, bytes| {
                        let m = nd.ctx.mem.entry(p).or_insert_with(|| vec![0; ps]);
                        m[off..off + bytes.len()].copy_from_slice(bytes);
                        touched.push((node, p));
                    });
                    match r {
                        Ok(sum) => self.stats.diff_bytes_applied += sum.bytes as u64,
                        Err(e) => return Err(SimErrorKind::Protocol(format!("node {node}: bad incoming diffs: {e}"))),
                    }
                    self.touched.extend(touched);
                }
                Action::InstallIncoming { page, access } => match incoming {
                    Some(d) if d.len() == self.cfg.page_size => {
                        self.nodes[node as usize].ctx.mem.insert(page, d.to_vec());
                        self.set_access(node, page, access);
                    }
                    Some(d) => {
                        return Err(SimErrorKind::Protocol(format!(
                            "node {node}: InstallIncoming of page {page} with {} bytes of data (page size {})",
                            d.len(),
                            self.cfg.page_size
                        )))
                    }
                    None => {
                        return Err(SimErrorKind::Protocol(format!(
                            "node {node}: InstallIncoming of page {page} without incoming data"
                        )))
                    }
                },
                Action::ReleaseDone { token, notices } => {
                    let mut ev = Vec::new();
                    let sync = |e| SimErrorKind::Sync(format!("node {node}: {e}"));
                    match self.nodes[node as usize].pending.remove(&token) {
                        Some(Pending::Unlock { tid, lock }) => {
                            self.lock_holders.remove(&lock);
                            self.nodes[node as usize].sync.lock_release(lock, tid as u64, notices, &mut ev).map_err(sync)?;
                            self.advance(tid);
                        }
                        Some(Pending::Arrive { tid, barrier, count }) => {
                            let sync_state = &mut self.nodes[node as usize].sync;
                            match count {
                                Some(count) => sync_state.barrier_arrive(barrier, count, tid as u64, notices, &mut ev),
                                None => sync_state.barrier_all_arrive(barrier, tid as u64, notices, &mut ev),
                            }
                            .map_err(sync)?;
                            self.threads[tid].state = ThreadState::Barrier(barrier);
                        }
                        other => {
                            return Err(SimErrorKind::Protocol(format!(
                                "node {node}: ReleaseDone for token {token}, which is {other:?}"
                            )))
                        }
                    }
                    self.sync_events(node, ev)?;
                }
                Action::AcquireDone { token } => match self.nodes[node as usize].pending.remove(&token) {
                    Some(Pending::Acquire { tids }) => {
                        for tid in tids {
                            let t = &mut self.threads[tid];
                            if let Op::TryLock { reg, .. } = t.prog[t.pc] {
                                set_reg(&mut t.regs, reg, 1);
                            }
                            self.advance(tid);
                        }
                    }
                    other => {
                        return Err(SimErrorKind::Protocol(format!(
                            "node {node}: AcquireDone for token {token}, which is {other:?}"
                        )))
                    }
                },
            }
        }
        Ok(())
    }

    pub(super) fn set_access(&mut self, node: NodeId, page: PageId, access: Access) {
        let nd = &mut self.nodes[node as usize];
        let discard = match self.cfg.discard {
            Discard::Never => false,
            Discard::NotHome => nd.ctx.home(page) != node,
            Discard::Always => true,
        };
        if access == Access::None && discard {
            nd.ctx.mem.remove(&page);
        }
        nd.access.insert(page, access);
        self.touched.push((node, page));
        if access == Access::None {
            return;
        }
        let ctx = &mut self.nodes[node as usize].ctx;
        for (tid, t) in self.threads.iter_mut().enumerate() {
            if t.node != node {
                continue;
            }
            if let ThreadState::Fault { page: p, need } = t.state {
                if p == page && need <= access {
                    t.state = ThreadState::Runnable;
                    ctx.unused.retain(|&(_, u, _)| u != tid);
                    ctx.unused.push((page, tid, ctx.now));
                }
            }
        }
    }

    pub(super) fn check_waiter(&self, node: NodeId, waiter: u64) -> SimResult<ThreadId> {
        match self.threads.get(waiter as usize) {
            Some(t) if t.node == node => Ok(waiter as usize),
            _ => Err(SimErrorKind::Sync(format!(
                "node {node}: sync event for unknown waiter {waiter}"
            ))),
        }
    }

    pub(super) fn sync_events(&mut self, node: NodeId, events: Vec<SyncEvent>) -> SimResult {
        for ev in events {
            match ev {
                SyncEvent::Send { to, msg } => {
                    if to != node && matches!(msg, SyncMsg::LockGrant { .. }) {
                        // The token leaves: as the engine does, the protocol lets go of what
                        // it kept back until then, before the grant on the same link.
                        let nd = &mut self.nodes[node as usize];
                        let mut out = Vec::new();
                        nd.proto.on_token_leaves(&nd.ctx, &mut out);
                        self.exec(node, out, None)?;
                    }
                    self.stats.sync_messages += 1;
                    if to != node {
                        self.stats.wire_bytes +=
                            wire_len(&svm_comm::wire::Msg::Sync(msg.clone()), 0);
                        self.stats.wire_messages += 1;
                    }
                    self.chans[node as usize * self.n + to as usize].push_back(Payload::Sync(msg));
                }
                SyncEvent::Granted {
                    waiter,
                    notices,
                    lock,
                } => {
                    let tid = self.check_waiter(node, waiter)?;
                    if let Some(h) = self.lock_holders.insert(lock, tid) {
                        return Err(SimErrorKind::Invariant(format!(
                            "mutual exclusion: lock {lock} granted to thread {tid} (node {node}) while thread {h} holds it"
                        )));
                    }
                    self.lock_waits.remove(&(lock, node));
                    for (_, n) in self.lock_waits.iter_mut().filter(|((l, _), _)| *l == lock) {
                        *n += 1;
                        self.stats.max_lock_overtakes = self.stats.max_lock_overtakes.max(*n);
                    }
                    self.start_acquire(node, vec![tid], &notices)?;
                }
                SyncEvent::BarrierDone {
                    waiters,
                    notices,
                    all_nodes,
                    nodes: took_part,
                    ..
                } => {
                    let tids = waiters
                        .iter()
                        .map(|&w| self.check_waiter(node, w))
                        .collect::<SimResult<Vec<_>>>()?;
                    let all = self.threads.len();
                    let global = tids.first().is_some_and(|&t| {
                        let t = &self.threads[t];
                        match t.prog[t.pc] {
                            Op::Barrier { count, .. } => count as usize == all,
                            Op::BarrierAll(_) => self.nodes.len() == all,
                            _ => false,
                        }
                    });
                    if global {
                        self.nodes[node as usize].sync.clear_lock_notices();
                    }
                    let departure = BarrierDeparture::of(all_nodes, took_part, self.nodes.len());
                    self.start_barrier_depart(node, tids, &notices, departure)?;
                }
                SyncEvent::Linger { lock } => self.arm(LockTimerKind::Linger, node, lock),
                SyncEvent::Quantum { lock } => self.arm(LockTimerKind::Quantum, node, lock),
                SyncEvent::TryFailed { waiter, .. } => {
                    let tid = self.check_waiter(node, waiter)?;
                    let t = &mut self.threads[tid];
                    if let Op::TryLock { reg, .. } = t.prog[t.pc] {
                        set_reg(&mut t.regs, reg, 0);
                    }
                    self.advance(tid);
                }
                SyncEvent::BarrierMismatch {
                    barrier,
                    waiter,
                    expected,
                    got,
                } => {
                    return Err(SimErrorKind::Sync(format!(
                        "node {node}: thread {waiter} arrived at barrier {barrier} with count {got}, the round's count is {expected}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The engine's fast-path conversion: a protocol hook just ran on `node`; if the protocol
    /// is no longer quiescent, the acquire hooks run late for every fast-path holder there.
    pub(super) fn convert_fast(&mut self, node: NodeId) -> SimResult {
        if self.fast_holders.is_empty() || self.nodes[node as usize].proto.quiescent() {
            return Ok(());
        }
        let mut late = 0;
        for (tid, (_, hooks_ran)) in self.fast_holders.iter_mut() {
            if self.threads[*tid].node == node && !*hooks_ran {
                *hooks_ran = true;
                late += 1;
            }
        }
        for _ in 0..late {
            self.late_acquire(node)?;
        }
        Ok(())
    }

    /// `on_acquire` with no notices for a critical section entered through the fast path.
    pub(super) fn late_acquire(&mut self, node: NodeId) -> SimResult {
        let nd = &mut self.nodes[node as usize];
        let token = nd.token(Pending::Acquire { tids: Vec::new() });
        let mut out = Vec::new();
        nd.proto.on_acquire(&nd.ctx, token, &[], &mut out);
        self.exec(node, out, None)
    }

    pub(super) fn start_acquire(
        &mut self,
        node: NodeId,
        tids: Vec<ThreadId>,
        notices: &[PageId],
    ) -> SimResult {
        let nd = &mut self.nodes[node as usize];
        let token = nd.token(Pending::Acquire { tids: tids.clone() });
        for tid in tids {
            self.threads[tid].state = ThreadState::Acquire(token);
        }
        let mut out = Vec::new();
        nd.proto.on_acquire(&nd.ctx, token, notices, &mut out);
        self.exec(node, out, None)
    }

    pub(super) fn start_barrier_depart(
        &mut self,
        node: NodeId,
        tids: Vec<ThreadId>,
        notices: &[PageId],
        departure: BarrierDeparture,
    ) -> SimResult {
        let nd = &mut self.nodes[node as usize];
        let token = nd.token(Pending::Acquire { tids: tids.clone() });
        for tid in tids {
            self.threads[tid].state = ThreadState::Acquire(token);
        }
        let mut out = Vec::new();
        departure.run(nd.proto.as_mut(), &nd.ctx, token, notices, &mut out);
        self.exec(node, out, None)
    }

    // ---------------- invariant and diagnostics ----------------

    pub(super) fn page_bytes(&self, node: NodeId, page: PageId) -> &[u8] {
        self.nodes[node as usize]
            .ctx
            .mem
            .get(&page)
            .map_or(&self.zero_page[..], |m| &m[..])
    }

    pub(super) fn check_single_writer(&mut self) -> SimResult {
        let mut pages: Vec<PageId> = self.touched.iter().map(|&(_, p)| p).collect();
        pages.sort_unstable();
        pages.dedup();
        for page in pages {
            let mut writers = Vec::new();
            let mut readers = Vec::new();
            for n in 0..self.cfg.nodes {
                match self.access(n, page) {
                    Access::Write => writers.push(n),
                    Access::Read => readers.push(n),
                    Access::None => {}
                }
            }
            if writers.len() > 1 || (!writers.is_empty() && !readers.is_empty()) {
                return Err(SimErrorKind::Invariant(format!(
                    "page {page}: writers {writers:?} and readers {readers:?} at once"
                )));
            }
            if let Some((&first, rest)) = readers.split_first() {
                for &r in rest {
                    if self.page_bytes(first, page) != self.page_bytes(r, page) {
                        return Err(SimErrorKind::Invariant(format!(
                            "page {page}: read copies of nodes {first} and {r} differ"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn dump(&self, kind: &SimErrorKind) -> String {
        let mut s = format!(
            "seed {}, {} nodes, step {}\nthreads:\n",
            self.cfg.seed, self.n, self.stats.steps
        );
        let mut pages: Vec<PageId> = Vec::new();
        let mut locks = Vec::new();
        let mut barriers = Vec::new();
        for (i, t) in self.threads.iter().enumerate() {
            let op = t
                .prog
                .get(t.pc)
                .map_or("-".to_string(), |o| format!("{o:?}"));
            let _ = writeln!(
                s,
                "  thread {i} on node {}: pc {}/{} {op}, state {:?}",
                t.node,
                t.pc,
                t.prog.len(),
                t.state
            );
            match t.state {
                ThreadState::Fault { page, .. } => pages.push(page),
                ThreadState::Lock(l) => locks.push(l),
                ThreadState::Barrier(b) => barriers.push(b),
                _ => {}
            }
            if let Some(
                Op::Load { addr, .. }
                | Op::Store { addr, .. }
                | Op::StoreReg { addr, .. }
                | Op::SpinUntilEq { addr, .. },
            ) = t.prog.get(t.pc)
            {
                pages.push(addr / self.cfg.page_size as u64);
            }
        }
        if let SimErrorKind::SpinBound { addr, .. } = kind {
            pages.push(addr / self.cfg.page_size as u64);
        }
        for ev in &self.trace {
            if let TraceEv::Proto { msg, .. } = ev {
                pages.push(msg.page());
            }
        }
        pages.sort_unstable();
        pages.dedup();
        locks.sort_unstable();
        locks.dedup();
        barriers.sort_unstable();
        barriers.dedup();
        for p in pages {
            s += &self.describe(p);
        }
        for l in locks {
            for nd in &self.nodes {
                let _ = writeln!(s, "node {}: {}", nd.ctx.me, nd.sync.describe_lock(l));
            }
        }
        for b in barriers {
            for nd in &self.nodes {
                let _ = writeln!(s, "node {}: {}", nd.ctx.me, nd.sync.describe_barrier(b));
            }
        }
        for (i, c) in self.chans.iter().enumerate() {
            if !c.is_empty() {
                let _ = writeln!(
                    s,
                    "channel {} -> {}: {} queued",
                    i / self.n,
                    i % self.n,
                    c.len()
                );
            }
        }
        s += "recent events (oldest first):\n";
        for ev in &self.trace {
            let _ = writeln!(s, "  {ev}");
        }
        s
    }
}
