//! Pages: running the protocols' actions (protection changes, installs, diffs, twins) and
//! turning faults into protocol calls.

use super::*;

impl Node {
    // ----------------------------------------------------------------------------------------
    // Protocol actions

    /// Runs the actions protocol `proto` emitted, in order.
    pub(super) fn run_actions(
        &self,
        st: &mut EngineState,
        proto: u8,
        actions: Vec<Action>,
        incoming: &[u8],
    ) -> Result<(), EngineError> {
        // A protocol hook just ran: before any action can wake a thread, tell the lock fast
        // path whether the protocols are still quiescent.
        self.note_protocols(st)?;
        if let Some(due) = st.protocols[proto as usize]
            .as_ref()
            .and_then(|p| p.next_timer())
        {
            self.arm_timer(due);
        }
        let ps = self.space.page_size();
        let mut actions = actions.into_iter().peekable();
        while let Some(a) = actions.next() {
            match a {
                Action::Send { to, msg, attach } => match attach {
                    None => self.send(st, to, Msg::Proto { proto, msg }, &[])?,
                    Some(page) => {
                        let mut buf = std::mem::take(&mut st.page_buf);
                        let read = self.read_local(st, page, &mut buf);
                        if let Err(e) = read {
                            st.page_buf = buf;
                            return Err(e);
                        }
                        st.counters.pages_served += 1;
                        let sent = self.send(st, to, Msg::Proto { proto, msg }, &buf);
                        st.page_buf = buf;
                        sent?;
                    }
                },
                Action::SetAccess { page, access } if self.blank(st, page, access) => {
                    // A run of blank pages raised together (fault-around): one backend call.
                    let n = take_run(&mut actions, page, access, |q| self.blank(st, q, access));
                    let addr = self.space.page_addr(page);
                    let present = self
                        .backend
                        .set_access(addr, n as usize * ps, Access::None, access, false, None)
                        .map_err(EngineError::system(|| {
                            format!("setting pages {page}..{} to {access:?}", page + n)
                        }))?;
                    st.counters.pages_faulted_around += n;
                    for q in page..page + n {
                        if crate::profile::on() {
                            crate::profile::access_change(q, Access::None, access, &mut |b| {
                                b.fill(0)
                            });
                        }
                        self.apply_access(st, q, access, present)?;
                    }
                }
                Action::SetAccess { page, access } => {
                    let addr = self.space.page_addr(page);
                    if let Some(old) = self.lowers_present(st, page, access) {
                        // A run of present pages lowered together (sc-sw's grants around a
                        // request, each page lowered to read-only, read into its grant, then
                        // dropped): one backend call, so one TLB shoot-down, for the run.
                        let n = take_run(&mut actions, page, access, |q| {
                            self.lowers_present(st, q, access) == Some(old)
                        });
                        let present = self
                            .backend
                            .set_access(addr, n as usize * ps, old, access, true, None)
                            .map_err(EngineError::system(|| {
                                format!("setting pages {page}..{} to {access:?}", page + n)
                            }))?;
                        for q in page..page + n {
                            self.apply_access(st, q, access, present)?;
                        }
                        continue;
                    }
                    let old = st.pages.access(page);
                    if crate::profile::on() {
                        crate::profile::access_change(page, old, access, &mut |b| {
                            self.read_local_for_profile(st, page, b)
                        });
                    }
                    let (present, initial) = self.materialize_source(st, page);
                    let present = self
                        .backend
                        .set_access(addr, ps, old, access, present, initial)
                        .map_err(EngineError::system(|| {
                            format!("setting page {page} to {access:?}")
                        }))?;
                    if present {
                        st.shadows.remove(&page);
                    }
                    self.apply_access(st, page, access, present)?;
                }
                Action::InstallIncoming { page, access } => {
                    if incoming.len() != ps {
                        return Err(EngineError::GrantSize {
                            page,
                            got: incoming.len(),
                            expected: ps,
                        });
                    }
                    let addr = self.space.page_addr(page);
                    if crate::profile::on() {
                        let old = st.pages.access(page);
                        crate::profile::install(page, old, access, incoming, &mut |b| {
                            self.read_local_for_profile(st, page, b)
                        });
                    }
                    let present = st.pages.get(page).is_some_and(|e| e.present);
                    let present = self
                        .backend
                        .install(addr, incoming, access, present)
                        .map_err(EngineError::system(|| format!("installing page {page}")))?;
                    st.shadows.remove(&page);
                    st.counters.pages_fetched += 1;
                    st.counters.bytes_fetched += ps as u64;
                    self.apply_access(st, page, access, present)?;
                }
                Action::ReleaseDone { token, notices } => {
                    if let Some(notices) = Self::fan_in(st, token, notices) {
                        self.release_done(st, token, notices)?;
                    }
                }
                Action::AcquireDone { token } => {
                    if Self::fan_in(st, token, Vec::new()).is_some() {
                        if let Some(c) = st.acquires.remove(&token) {
                            for w in c.waiters {
                                self.complete(st, w, c.result.clone());
                            }
                        }
                    }
                }
                Action::MakeTwin { page } => {
                    if st.twins.contains_key(&page) {
                        return Err(EngineError::Protocol(format!(
                            "page {page} already has a twin"
                        )));
                    }
                    let mut twin = vec![0u8; ps];
                    self.read_local(st, page, &mut twin)?;
                    st.twins.insert(page, twin);
                    st.counters.twins_made += 1;
                }
                Action::DropTwin { page } => {
                    if st.twins.remove(&page).is_none() {
                        return Err(EngineError::Protocol(format!(
                            "page {page} has no twin to drop"
                        )));
                    }
                }
                Action::SendDiffs { to, msg, pages } => {
                    let mut data = Vec::new();
                    let mut cur = std::mem::take(&mut st.page_buf);
                    for page in pages {
                        let Some(twin) = st.twins.remove(&page) else {
                            st.page_buf = cur;
                            return Err(EngineError::Protocol(format!(
                                "diff of page {page}, which has no twin"
                            )));
                        };
                        if let Err(e) = self.read_local(st, page, &mut cur) {
                            st.page_buf = cur;
                            return Err(e);
                        }
                        let before = data.len();
                        crate::diff::encode(page, &twin, &cur, &mut data);
                        if crate::profile::on() {
                            crate::profile::diff_sent(page, data.len() - before);
                        }
                        st.counters.diffs_created += 1;
                    }
                    st.page_buf = cur;
                    st.counters.diff_bytes_sent += data.len() as u64;
                    self.send(st, to, Msg::Proto { proto, msg }, &data)?;
                }
                Action::ApplyIncomingDiffs => {
                    if !incoming.is_empty() {
                        self.apply_diffs(st, incoming)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The access `page` has now, if setting it to `access` lowers a page present in the
    /// application mapping (write to read-only, or any access to none) with nothing else to
    /// do: no contents held aside, no profile to record. Pages with the same access before
    /// may join a run lowered with one backend call.
    fn lowers_present(&self, st: &EngineState, page: PageId, access: Access) -> Option<Access> {
        if access == Access::Write || crate::profile::on() {
            return None;
        }
        let e = st.pages.get(page).filter(|e| e.present)?;
        let old = e.access;
        let lowers = match access {
            Access::None => old != Access::None,
            _ => old == Access::Write,
        };
        (lowers && !st.shadows.contains_key(&page)).then_some(old)
    }

    /// Whether raising `page` to `access` only materializes a zero page nobody waits for (it
    /// may then join a run of such pages raised with one backend call). A page a thread waits
    /// on is left to the one-page path, which gives it its own frame at once.
    pub(super) fn blank(&self, st: &EngineState, page: PageId, access: Access) -> bool {
        access != Access::None
            && !st.shadows.contains_key(&page)
            && match st.pages.get(page) {
                Some(e) => e.access == Access::None && !e.present && e.waiters().is_empty(),
                None => true,
            }
            && match self.materialize_source(st, page) {
                (false, None) => true,
                (false, Some(init)) => init.iter().all(|&b| b == 0),
                (true, _) => false,
            }
    }

    /// Copies the local contents of `page` (present, held by the engine, or initial/zeros).
    pub(super) fn read_local(
        &self,
        st: &EngineState,
        page: PageId,
        dst: &mut [u8],
    ) -> Result<(), EngineError> {
        self.contents(st)
            .read(page, dst)
            .map_err(EngineError::system(|| format!("reading page {page}")))
    }

    /// The parts of this node and `st` that page contents are read from.
    fn contents<'a>(&'a self, st: &'a EngineState) -> super::PageContents<'a> {
        self.page_contents(&st.pages, &st.shadows)
    }

    /// [`Node::read_local`] for the profiler's snapshots, which cannot fail the engine: a page
    /// that cannot be read is recorded as zeros (the profile's written-bytes count of that
    /// page is then off; the run is not).
    pub(super) fn read_local_for_profile(&self, st: &EngineState, page: PageId, dst: &mut [u8]) {
        if self.read_local(st, page, dst).is_err() {
            dst.fill(0);
        }
    }

    /// Applies a diff message to local contents without changing protections: in place where
    /// the backend can, otherwise to the engine-held copy the page will be materialized from.
    pub(super) fn apply_diffs(&self, st: &mut EngineState, data: &[u8]) -> Result<(), EngineError> {
        let ps = self.space.page_size();
        let mut patches: Vec<(PageId, usize, Vec<u8>)> = Vec::new();
        crate::diff::apply(data, ps, |page, off, bytes| {
            patches.push((page, off, bytes.to_vec()))
        })?;
        st.counters.diff_bytes_applied += data.len() as u64;
        let mut i = 0;
        while i < patches.len() {
            let page = patches[i].0;
            let mut j = i;
            while j < patches.len() && patches[j].0 == page {
                j += 1;
            }
            st.counters.diffs_applied += 1;
            let runs: Vec<(usize, &[u8])> =
                patches[i..j].iter().map(|(_, o, b)| (*o, &b[..])).collect();
            if crate::profile::on() {
                crate::profile::diff_applied(page, &runs);
            }
            let addr = self.space.page_addr(page);
            let (access, present) = st
                .pages
                .get(page)
                .map(|e| (e.access, e.present))
                .unwrap_or_default();
            let in_place = !st.shadows.contains_key(&page)
                && self
                    .backend
                    .patch(addr, ps, access, present, &runs)
                    .map_err(EngineError::system(|| {
                        format!("applying a diff to page {page}")
                    }))?;
            if !in_place {
                if !st.shadows.contains_key(&page) {
                    let mut sh = vec![0u8; ps];
                    self.read_local(st, page, &mut sh)?;
                    st.shadows.insert(page, sh);
                }
                let sh = st.shadows.get_mut(&page).expect("inserted above");
                for (off, b) in runs {
                    sh[off..off + b.len()].copy_from_slice(b);
                }
            }
            i = j;
        }
        Ok(())
    }

    /// Whether `page` has local contents, and if not, what materializing it must install
    /// (`PageContents::source`).
    pub(super) fn materialize_source<'a>(
        &'a self,
        st: &'a EngineState,
        page: PageId,
    ) -> (bool, Option<&'a [u8]>) {
        self.contents(st).source(page)
    }

    pub(super) fn apply_access(
        &self,
        st: &mut EngineState,
        page: PageId,
        access: Access,
        present: bool,
    ) -> Result<(), EngineError> {
        let mut woken: Vec<PageWaiter> = Vec::new();
        st.pages.set_access(page, access, present, &mut woken);
        if woken.is_empty() {
            return Ok(());
        }
        let now = st.now;
        let addr = self.space.page_addr(page);
        for w in woken {
            if let WaiterRef::Slot(_) = w.waiter {
                self.backend
                    .wake(addr, self.space.page_size(), w.waiter)
                    .map_err(EngineError::system(|| {
                        format!("waking a thread on page {page}")
                    }))?;
            }
            if st.handling_remote {
                // Only a page that came from another node is worth keeping for its thread
                // (and a local fault, a first touch say, pays no clock read).
                st.installs.woke(w.tid, page, now);
            }
            let dt = now.saturating_sub(w.since_ns);
            if w.need == Access::Write {
                st.counters.write_fault_ns.record(dt);
            } else {
                st.counters.read_fault_ns.record(dt);
            }
            if st.handling_remote {
                st.counters.remote_faults += 1;
            } else {
                st.counters.local_faults += 1;
            }
            if crate::profile::on() {
                let write = w.need == Access::Write;
                crate::profile::fault_served(page, write, w.since_ns, w.tid, st.handling_remote);
            }
        }
        Ok(())
    }

    pub(super) fn on_fault(&self, st: &mut EngineState, f: Fault) -> Result<(), EngineError> {
        if !self.space.contains(f.addr) {
            return Ok(());
        }
        // A plain load first: the swap (a locked RMW) only when a probe is under way.
        let probe = match PROBE_T0.load(Ordering::Acquire) {
            0 => 0,
            _ => PROBE_T0.swap(0, Ordering::AcqRel),
        };
        if probe != 0 {
            st.counters
                .fault_detect_ns
                .record(f.since_ns.saturating_sub(probe));
        }
        let page = self.space.page_of(f.addr);
        let need = if f.write { Access::Write } else { Access::Read };
        if f.write {
            st.counters.write_faults += 1;
        } else {
            st.counters.read_faults += 1;
        }
        if crate::profile::on() {
            crate::profile::fault(page, f.write, st.pages.access(page));
        }
        let e = st.pages.entry(page);
        if e.access >= need {
            // Raced with a resolution that happened after the kernel queued this fault.
            self.backend
                .wake(f.addr, self.space.page_size(), f.waiter)
                .map_err(EngineError::system(|| {
                    format!("waking a thread on page {page}")
                }))?;
            st.counters.local_faults += 1;
            return Ok(());
        }
        st.pages.add_waiter(
            page,
            PageWaiter {
                waiter: f.waiter,
                need,
                since_ns: f.since_ns,
                tid: f.tid,
            },
        );
        let (proto, unresolved) = self.space.fault_route(page);
        if unresolved {
            let directory = self.space.directory(page);
            if directory == self.me {
                // This node decides the page's home: no message to itself.
                self.space.assign_first_touch(page, self.me);
            } else {
                // A first-touch page this node has never dealt with: learn (or become) its
                // home first; the fault goes to the protocol when the directory answers.
                if st.home_queries.insert(page) {
                    self.send(st, directory, Msg::HomeQuery { page }, &[])?;
                }
                return Ok(());
            }
        }
        self.fault_to_protocol(st, page, proto, need)?;
        self.learn_lock_page(st, page, proto, need);
        Ok(())
    }

    /// Asks the protocol, for every page of `[addr, addr + len)` this node cannot yet access
    /// as `write` needs and no thread waits for, for that page as a fault there would, but
    /// with no thread waiting: a thread about to copy the range then finds its pages coming
    /// in together, several requests in flight, instead of faulting on one after the other.
    /// Sequential consistency is unaffected: what a thread reads depends on the copies that
    /// exist when it accesses a page, never on why they were asked for (as for read-ahead).
    /// A range within one page is left to its fault (nothing to overlap), as are first-touch
    /// pages whose home is not known yet, and everything after a page whose request fails:
    /// the thread's own fault meets the same failure and reports it.
    pub fn prefetch(&self, addr: usize, len: usize, write: bool) {
        if len == 0 || !self.space.contains(addr) || !self.space.contains(addr + len - 1) {
            return;
        }
        let (first, last) = (self.space.page_of(addr), self.space.page_of(addr + len - 1));
        if first == last {
            return;
        }
        let need = if write { Access::Write } else { Access::Read };
        let mut st = self.lock_state();
        for page in first..=last {
            if self.ask_early(&mut st, page, need, |_, _| true).is_err() {
                break;
            }
        }
    }

    /// Asks `page`'s protocol for `need` as a fault would, with no thread waiting — unless
    /// this node has that access already, a thread waits for the page (its fault asked), the
    /// page is a first-touch page whose home is not known yet, or `wanted` refuses the page's
    /// protocol. Returns whether it asked. Bulk copies (`prefetch`) and lock requests
    /// (`lock_pages.rs`) ask for their pages this way.
    pub(super) fn ask_early(
        &self,
        st: &mut EngineState,
        page: PageId,
        need: Access,
        wanted: impl Fn(&EngineState, u8) -> bool,
    ) -> Result<bool, EngineError> {
        if let Some(e) = st.pages.get(page) {
            if e.access >= need || !e.waiters().is_empty() {
                return Ok(false);
            }
        }
        let (proto, unresolved) = self.space.fault_route(page);
        if unresolved || !wanted(st, proto) {
            return Ok(false);
        }
        self.fault_to_protocol(st, page, proto, need)?;
        Ok(true)
    }

    /// Hands a fault the page table could not satisfy to the page's protocol `proto`.
    pub(super) fn fault_to_protocol(
        &self,
        st: &mut EngineState,
        page: PageId,
        proto: u8,
        need: Access,
    ) -> Result<(), EngineError> {
        let mut acts = Vec::new();
        let ctx = node_ctx!(self, st);
        match st
            .protocols
            .get_mut(proto as usize)
            .and_then(|p| p.as_mut())
        {
            Some(p) => p.on_fault(&ctx, page, need, &mut acts),
            None => return Err(EngineError::MissingProtocol { page, proto }),
        }
        self.run_actions(st, proto, acts, &[])
    }
}

/// After an `Action::SetAccess` of `page` to `access`: takes the actions that follow it
/// setting the next pages to the same access, while `joins` accepts each; returns the run's
/// length in pages, `page` included.
fn take_run(
    actions: &mut std::iter::Peekable<impl Iterator<Item = Action>>,
    page: PageId,
    access: Access,
    joins: impl Fn(PageId) -> bool,
) -> u64 {
    let mut n = 1;
    while let Some(Action::SetAccess { page: q, access: a }) = actions.peek() {
        if *q != page + n || *a != access || !joins(*q) {
            break;
        }
        n += 1;
        actions.next();
    }
    n
}
