//! Sending frames to peers (queued for the shell to write, `outbox.rs`; to this node through
//! the loopback queue) and dispatching the messages that arrive: protocol, synchronisation,
//! user and control messages.

use super::*;

impl Node {
    // ----------------------------------------------------------------------------------------
    // Sending

    pub(super) fn send(
        &self,
        st: &mut EngineState,
        to: NodeId,
        msg: Msg,
        data: &[u8],
    ) -> Result<(), EngineError> {
        let name = msg.stat_name();
        if to == self.me {
            st.loopback.push_back((msg, data.to_vec()));
            return Ok(());
        }
        let seq = st.seq[to as usize];
        st.seq[to as usize] = seq.wrapping_add(1);
        wire::encode_head(&msg, self.me, seq, data.len(), &mut st.frame).map_err(|e| {
            EngineError::Encode {
                kind: name,
                why: e.to_string(),
            }
        })?;
        let bytes = (st.frame.len() + data.len()) as u64;
        let m = st.counters.msgs.entry(name).or_default();
        m.sent += 1;
        m.sent_bytes += bytes;
        if crate::profile::on() {
            crate::profile::message(name, to, bytes, true, seq);
        }
        if self.links.get(to as usize).is_none_or(|l| l.is_none()) {
            return Err(EngineError::NoLink(to));
        }
        if st.send_lost[to as usize].is_none() {
            // Written by the shell once the step lets go of the state (`outbox.rs`).
            self.queue_frame(to, &st.frame, data);
        }
        Ok(())
    }

    // ----------------------------------------------------------------------------------------
    // Messages

    pub(super) fn handle_msg(
        &self,
        st: &mut EngineState,
        from: NodeId,
        msg: Msg,
        data: &[u8],
    ) -> Result<(), EngineError> {
        // A directory's question and answer never wait behind held-back messages: a held-back
        // message may itself wait for an answer (`held_back`), and neither depends on the order
        // of what else the two nodes sent.
        let directory = matches!(msg, Msg::HomeQuery { .. } | Msg::HomeIs { .. });
        if from != self.me && !directory {
            let held = self.held_back(st, &msg);
            if held || !self.may_pass_held_back(st, from, &msg) {
                st.counters.msgs_held_back += 1;
                st.deferred[from as usize].push_back((msg, data.to_vec()));
                return Ok(());
            }
            if !st.deferred[from as usize].is_empty() {
                st.counters.msgs_past_held_back += 1;
            }
        }
        self.dispatch(st, from, msg, data)
    }

    /// Whether `msg` (not held back itself) may be taken although messages of its sender are
    /// held back: yes if none is, or if every one of them names a page of a collective
    /// allocation this node has not made yet. No thread of this node can touch such a page
    /// before this node makes that allocation, and making it takes every held-back message
    /// first (`retry_deferred`), in the order they came; so what this node does in between
    /// cannot tell that they came before `msg`. Without this, a lock grant or a page a thread
    /// here waits for, sent after such a request of a node that ran ahead into the new
    /// allocation, would wait for this node to make it — which its thread may do only once
    /// it has that lock or page (`docs/c-api.md`, collective calls). A message held back for a
    /// directory's answer keeps everything behind it (the page is allocated here, and a thread
    /// may be using it), and so does the sender's goodbye (nothing comes after it).
    fn may_pass_held_back(&self, st: &EngineState, from: NodeId, msg: &Msg) -> bool {
        let queue = &st.deferred[from as usize];
        queue.is_empty()
            || (!matches!(msg, Msg::Goodbye)
                && queue.iter().all(|(m, _)| match m {
                    Msg::Proto { msg: pm, .. } => self.space.is_unknown_collective(pm.page()),
                    _ => false,
                }))
    }

    /// Whether a protocol message from another node must wait (with what that node sends after
    /// it, except what [`Node::may_pass_held_back`] lets through) before the protocol sees it:
    /// its page lies in a collective allocation this node has not made yet, or is a
    /// first-touch page whose home this node has asked its directory for and not yet heard.
    /// The second happens in jobs of three or more nodes: the directory tells this node and a
    /// third that this node is the home, and the third's request can arrive before the
    /// directory's answer; taken at once, it would reach a protocol that does not yet know it
    /// is the page's home.
    fn held_back(&self, st: &EngineState, msg: &Msg) -> bool {
        let Msg::Proto { msg: pm, .. } = msg else {
            return false;
        };
        let page = pm.page();
        self.space.is_unknown_collective(page)
            || (!st.home_queries.is_empty() && st.home_queries.contains(&page))
    }

    pub(super) fn dispatch(
        &self,
        st: &mut EngineState,
        from: NodeId,
        msg: Msg,
        data: &[u8],
    ) -> Result<(), EngineError> {
        st.handling_remote = from != self.me;
        match msg {
            Msg::Proto { proto, msg } => {
                let mut acts = Vec::new();
                let ctx = node_ctx!(self, st);
                match st
                    .protocols
                    .get_mut(proto as usize)
                    .and_then(|p| p.as_mut())
                {
                    Some(p) => p.on_message(&ctx, from, &msg, data.len(), &mut acts),
                    None => return Err(EngineError::UnknownProtocol { from, proto }),
                }
                self.run_actions(st, proto, acts, data)?;
            }
            Msg::Sync(m) => {
                if let wire::SyncMsg::LockForward { lock, .. } = m {
                    self.reclaim_fast(st, lock);
                }
                let mut evs = Vec::new();
                if !st.sems.on_message(from, &m, &mut evs) {
                    st.sync.on_message(from, &m, &mut evs);
                }
                self.run_sync_events(st, evs)?;
                if let wire::SyncMsg::LockForward { lock, .. }
                | wire::SyncMsg::LockAcquire { lock } = m
                {
                    self.keep_lock_pages(st, lock);
                }
            }
            Msg::Goodbye => {
                st.goodbye_from[from as usize] = true;
                if st.goodbye_from.iter().all(|g| *g) {
                    if let Some(w) = st.finish_waiter.take() {
                        self.complete(st, w, WaitResult::Finished);
                    }
                }
            }
            Msg::Abort { reason, code } => return Err(EngineError::Aborted { reason, code }),
            Msg::HomeQuery { page } => {
                let home = self.space.assign_first_touch(page, from);
                self.send(st, from, Msg::HomeIs { page, home }, &[])?;
            }
            Msg::HomeIs { page, home } => {
                self.space.learn_first_touch(page, home);
                st.home_queries.remove(&page);
                let e = st.pages.entry(page);
                let need = e.waiters().iter().map(|w| w.need).max();
                if let Some(need) = need.filter(|n| *n > e.access) {
                    let proto = self.space.proto_of(page);
                    self.fault_to_protocol(st, page, proto, need)?;
                }
                if st.deferred.iter().any(|q| !q.is_empty()) {
                    self.retry_deferred_in(st)?;
                }
            }
            Msg::User { tag } => {
                let mut b = self.user_box.lock().unwrap_or_else(|p| p.into_inner());
                b.push_back(UserMessage {
                    from,
                    tag,
                    data: data.to_vec(),
                });
                self.user_cv.notify_all();
            }
            Msg::Hello { .. } | Msg::PeerTable { .. } => {
                return Err(EngineError::LateHandshake { from })
            }
        }
        st.handling_remote = false;
        Ok(())
    }

    pub(super) fn drain_loopback(&self, st: &mut EngineState) -> Result<(), EngineError> {
        while let Some((msg, data)) = st.loopback.pop_front() {
            self.dispatch(st, self.me, msg, &data)?;
        }
        Ok(())
    }

    /// Re-examines the messages held back (`held_back`): after a collective allocation, or
    /// once the directory told this node a page's home.
    pub fn retry_deferred(&self) {
        let mut st = self.lock_state();
        if let Err(e) = self.retry_deferred_in(&mut st) {
            self.fail(Some(&st), e)
        }
    }

    fn retry_deferred_in(&self, st: &mut EngineState) -> Result<(), EngineError> {
        for from in 0..self.nodes as usize {
            while let Some((msg, _)) = st.deferred[from].front() {
                if self.held_back(st, msg) {
                    break;
                }
                let (msg, data) = st.deferred[from].pop_front().expect("front exists");
                self.dispatch(st, from as NodeId, msg, &data)?;
            }
        }
        self.drain_loopback(st)
    }
}
