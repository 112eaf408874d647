//! The engine driven step by step with the time given by its driver (`Node::start_driven`):
//! no engine thread, no clock. Its timers — a lock token's linger, the deadline of a waiting
//! fault — fire exactly when the driver's time reaches them, never by the wall clock; writes
//! to links happen after a step lets go of the engine state, never under it; and a lock
//! operation started while a step holds the state is handed to that step instead of waiting.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

mod common;

use svm_comm::loopback::{self, LoopbackTap};
use svm_comm::transport::{CommError, Link, RecvBuf};
use svm_core::fault::mem::{Attempt, FaultTicket, MemBackend};
use svm_core::fault::{Fault, FaultBackend, WaiterRef};
use svm_core::node::{EngineError, FailureMode, Node, SyncOp, WaitResult};
use svm_core::sync::Waiter;
use svm_core::sys::SysError;
use svm_core::Access;
use svm_core::NodeId;

/// The driver's clock at the start (ns; any origin).
const T0: u64 = 5_000_000_000;
/// The nodes' `SVM_TIMEOUT`.
const TIMEOUT_S: u64 = 7;

/// A blocking lock operation on lock `id`.
fn lock_op(id: u64) -> SyncOp {
    SyncOp::Lock {
        id,
        try_only: false,
    }
}

struct DrivenJob {
    nodes: Vec<Arc<Node>>,
    mems: Vec<MemBackend>,
    /// `taps[to][from]`: node `to`'s end of its link from `from`.
    taps: Vec<Vec<Option<LoopbackTap>>>,
    bufs: Vec<Vec<RecvBuf>>,
}

fn driven_job(n: NodeId) -> DrivenJob {
    driven_job_of("sc-sw", n)
}

fn driven_job_of(protocol: &str, n: NodeId) -> DrivenJob {
    let cfg = common::config(protocol, TIMEOUT_S);
    let (links, taps) = loopback::mesh(n).expect("loopback links");
    let mut nodes = Vec::new();
    let mut mems = Vec::new();
    for (me, links) in links.into_iter().enumerate() {
        let mem = MemBackend::new(cfg.page_size).expect("in-memory backend");
        mem.set_time(T0);
        let parts = common::node_parts(
            &cfg,
            me as NodeId,
            n,
            Box::new(mem.clone()),
            links,
            FailureMode::Keep,
        );
        nodes.push(Node::start_driven(parts).expect("driven node"));
        mems.push(mem);
    }
    let bufs = (0..n)
        .map(|_| (0..n).map(|_| RecvBuf::new()).collect())
        .collect();
    DrivenJob {
        nodes,
        mems,
        taps,
        bufs,
    }
}

impl DrivenJob {
    /// Delivers, at time `now`, every frame in flight (and those the deliveries send) until
    /// none is left; returns how many were delivered.
    fn pump(&mut self, now: u64) -> usize {
        let n = self.nodes.len();
        let mut delivered = 0;
        loop {
            let mut moved = false;
            for to in 0..n {
                for from in 0..n {
                    if !self.taps[to][from].as_ref().is_some_and(|t| t.pending()) {
                        continue;
                    }
                    let k = self.deliver_link(now, from, to);
                    delivered += k;
                    moved |= k > 0;
                }
            }
            if !moved {
                return delivered;
            }
        }
    }

    /// Delivers, at time `now`, the frames in flight on the link from `from` to `to` only;
    /// returns how many.
    fn deliver_link(&mut self, now: u64, from: usize, to: usize) -> usize {
        let tap = self.taps[to][from].as_ref().expect("a link");
        let buf = &mut self.bufs[to][from];
        tap.receive(buf);
        let mut frames = Vec::new();
        while let Ok(Some(f)) = buf.next_frame() {
            frames.push(f.to_vec());
        }
        for f in &frames {
            self.nodes[to]
                .deliver(now, from as NodeId, f)
                .expect("frame handled");
        }
        frames.len()
    }

    /// Waiter `w` of `node` releases lock `id` at `now` (and the job delivers what that sent).
    fn release_lock(&mut self, node: usize, w: svm_core::sync::Waiter, id: u64, now: u64) {
        let rel = self.nodes[node]
            .submit(now, w, SyncOp::Unlock(id))
            .expect("unlock starts");
        self.pump(now);
        assert_eq!(rel.result(), Some(WaitResult::Released));
    }

    /// Waiter `w` of `node` releases lock `id` at `now` and the driver's time passes the
    /// released token's linger; returns that time.
    fn release_and_let_linger(
        &mut self,
        node: usize,
        w: svm_core::sync::Waiter,
        id: u64,
        now: u64,
    ) -> u64 {
        self.release_lock(node, w, id, now);
        let after = now + svm_core::sync::LOCK_LINGER.as_nanos() as u64;
        self.nodes[node].poll_timers(after).expect("timers");
        self.pump(after);
        after
    }

    /// Waiter `w` of `node`, holding lock `id`, releases it and takes it again, 1 µs apart,
    /// `MIN_LOCAL_HANDOFFS` + 8 times from `now` on; every time it gets it back at once while
    /// `remote` (another node's request for it) still waits. Returns the time after the last.
    fn take_again_beyond_the_minimum_share(
        &mut self,
        node: usize,
        w: svm_core::sync::Waiter,
        id: u64,
        remote: &svm_core::node::Pending,
        mut now: u64,
    ) -> u64 {
        for _ in 0..svm_core::sync::MIN_LOCAL_HANDOFFS + 8 {
            now += 1_000;
            self.release_lock(node, w, id, now);
            now += 1_000;
            self.take_lock(node, w, id, now);
            assert_eq!(remote.result(), None, "the other node still waits");
        }
        now
    }

    /// Node 0 takes lock 1 (managed by node 1) at T0, a waiter of node 1 asks for it, and
    /// node 0 releases it through the engine at T0 + 1 µs: the token lingers at node 0 for its
    /// threads while node 1 waits. Returns node 0's and node 1's waiters and node 1's
    /// acquisition.
    fn linger_while_node_1_waits(&mut self) -> (Waiter, Waiter, svm_core::node::Pending) {
        let w0 = self.take_free_lock(0, 1, T0);
        let w1 = self.nodes[1].new_waiter();
        let want = self.ask_for_lock(1, w1, 1, T0);
        self.release_lock(0, w0, 1, T0 + 1_000);
        assert_eq!(want.result(), None, "the token lingers at node 0");
        (w0, w1, want)
    }

    /// Node 0's next timer is due at `at` (`what`): the driver's time reaches it; returns how
    /// many frames that sent.
    fn reach_timer_of_node_0(&mut self, at: u64, what: &str) -> usize {
        assert_eq!(self.nodes[0].poll_at(), Some(at), "{what}");
        self.nodes[0].poll_timers(at).expect("timers");
        self.pump(at)
    }

    /// Waiter `w` of node 0 takes lock 1 without the engine and releases it, at `now`;
    /// returns the release if it went through the engine.
    fn fast_take_then_release(
        &mut self,
        w: svm_core::sync::Waiter,
        now: u64,
    ) -> Option<svm_core::node::Pending> {
        let take = self.nodes[0]
            .begin(now, w, lock_op(1))
            .expect("lock starts");
        assert!(take.is_none(), "a take without the engine");
        self.nodes[0]
            .begin(now, w, SyncOp::Unlock(1))
            .expect("unlock starts")
    }

    /// [`DrivenJob::fast_take_then_release`], the release too without the engine.
    fn fast_take_and_release(&mut self, w: svm_core::sync::Waiter, now: u64) {
        let give = self.fast_take_then_release(w, now);
        assert!(give.is_none(), "a release without the engine");
    }

    /// A fresh waiter of `node` takes lock `id`, which no other node holds or wants, at `now`
    /// (through its manager); returns the waiter.
    fn take_free_lock(&mut self, node: usize, id: u64, now: u64) -> svm_core::sync::Waiter {
        let w = self.nodes[node].new_waiter();
        self.take_lock(node, w, id, now);
        w
    }

    /// Waiter `w` of `node` asks for lock `id` at `now`; the job delivers what that sent.
    /// Returns the pending acquisition.
    fn ask_for_lock(
        &mut self,
        node: usize,
        w: svm_core::sync::Waiter,
        id: u64,
        now: u64,
    ) -> svm_core::node::Pending {
        let ask = self.nodes[node]
            .submit(now, w, lock_op(id))
            .expect("lock starts");
        self.pump(now);
        ask
    }

    /// Waiter `w` of `node` asks for lock `id` at `now` and, once the job delivered what that
    /// sent, holds it.
    fn take_lock(&mut self, node: usize, w: svm_core::sync::Waiter, id: u64, now: u64) {
        let take = self.ask_for_lock(node, w, id, now);
        assert_eq!(
            take.result(),
            Some(WaitResult::Granted),
            "node {node} holds lock {id}"
        );
    }

    /// `reader` reads a fresh page of `home`'s at `now`: the fault goes to `reader`'s engine,
    /// which sends the request (not delivered here); returns the fault's ticket.
    fn read_a_page_of(&mut self, reader: usize, home: usize, now: u64) -> FaultTicket {
        let page = self.nodes[home]
            .space
            .alloc_local(4096)
            .expect("allocation");
        self.mems[reader].set_time(now);
        let ticket = match self.mems[reader].try_load(page, 8).expect("an access") {
            Attempt::Faulted(t) => t,
            Attempt::Done(_) => panic!("node {reader} has no copy of node {home}'s page yet"),
        };
        self.nodes[reader].serve_faults(now).expect("fault served");
        ticket
    }

    /// Runs `op` of a fresh waiter on `node` at `now` and delivers what it sent; returns its
    /// result if it is done.
    fn op(&mut self, node: usize, now: u64, op: SyncOp) -> Option<svm_core::node::Pending> {
        let w = self.nodes[node].new_waiter();
        let p = self.nodes[node]
            .begin(now, w, op)
            .expect("operation starts");
        self.pump(now);
        p
    }
}

#[test]
fn a_remote_requests_quantum_ends_the_holders_share_at_the_drivers_time() {
    let mut job = driven_job(2);
    // Node 0 takes lock 1 (managed by node 1); node 1 asks for it at T0.
    let w0 = job.take_free_lock(0, 1, T0);
    let want = job
        .op(1, T0, lock_op(1))
        .expect("node 1 waits for the token");
    let quantum = T0 + svm_core::sync::LOCK_QUANTUM.as_nanos() as u64;
    assert_eq!(
        job.nodes[0].poll_at(),
        Some(quantum),
        "the request's quantum"
    );

    // Within the quantum node 0's thread releases and takes the lock again more often than
    // the minimum share, a microsecond apart: the token stays.
    let now = job.take_again_beyond_the_minimum_share(0, w0, 1, &want, T0);
    assert!(now < quantum);

    // The driver's time reaches the quantum's end while node 0 holds the lock: nothing moves
    // then, and the next release hands the token over at once (no linger).
    job.nodes[0].poll_timers(quantum).expect("timers");
    assert_eq!(
        job.pump(quantum),
        0,
        "the holder keeps its critical section"
    );
    assert_eq!(want.result(), None);
    let rel = job.nodes[0]
        .submit(quantum, w0, SyncOp::Unlock(1))
        .expect("unlock starts");
    assert!(job.pump(quantum) > 0, "the token moves at the release");
    assert_eq!(rel.result(), Some(WaitResult::Released));
    assert_eq!(want.result(), Some(WaitResult::Granted), "node 1 got it");
}

#[test]
fn a_quantum_from_an_earlier_stay_of_the_token_does_not_cut_a_later_one_short() {
    let mut job = driven_job(2);
    let q = svm_core::sync::LOCK_QUANTUM.as_nanos() as u64;
    // Node 0 holds lock 1 (managed by node 1); node 1's request at T0 starts a quantum at
    // node 0 that would end at T0 + q.
    let w0 = job.take_free_lock(0, 1, T0);
    let w1 = job.nodes[1].new_waiter();
    let want = job.ask_for_lock(1, w1, 1, T0);
    assert_eq!(job.nodes[0].poll_at(), Some(T0 + q), "the first quantum");

    // The token goes to node 1 when node 0's released token has lingered, and comes back
    // the same way.
    let mut now = job.release_and_let_linger(0, w0, 1, T0 + 1_000);
    assert_eq!(want.result(), Some(WaitResult::Granted), "node 1 got it");
    now += 1_000;
    let back = job.ask_for_lock(0, w0, 1, now);
    now = job.release_and_let_linger(1, w1, 1, now + 1_000);
    assert_eq!(
        back.result(),
        Some(WaitResult::Granted),
        "node 0 has it again"
    );
    assert!(now < T0 + q - 1_000);

    // Node 1 asks again shortly before the first quantum's time: a new quantum, ending at
    // `second`. The first one's time passes meanwhile.
    now = T0 + q - 1_000;
    let want = job.ask_for_lock(1, w1, 1, now);
    let second = now + q;
    assert_eq!(job.nodes[0].poll_at(), Some(second), "only the new quantum");
    job.nodes[0].poll_timers(T0 + q).expect("timers");
    job.pump(T0 + q);

    // Until `second`, node 0's thread may take the lock more often than the minimum share.
    now = job.take_again_beyond_the_minimum_share(0, w0, 1, &want, T0 + q);
    assert!(now < second);
    job.nodes[0].poll_timers(second).expect("timers");
    let rel = job.nodes[0]
        .submit(second, w0, SyncOp::Unlock(1))
        .expect("unlock starts");
    assert!(job.pump(second) > 0, "the token moves at the release");
    assert_eq!(rel.result(), Some(WaitResult::Released));
    assert_eq!(want.result(), Some(WaitResult::Granted), "node 1 got it");
}

#[test]
fn a_released_token_lingers_until_the_drivers_time_reaches_its_end() {
    let mut job = driven_job(2);
    // Lock 1 is managed by node 1; node 0 takes it (through its manager) and holds it.
    let w0 = job.take_free_lock(0, 1, T0);
    // Node 1 asks for it while node 0 holds it.
    let want = job
        .op(1, T0, lock_op(1))
        .expect("node 1 waits for the token");
    assert_eq!(want.result(), None, "node 1 waits while node 0 holds it");
    // The request starts its quantum at node 0; its end changes nothing while node 0's thread
    // has had fewer than the minimum share of hand-offs.
    let quantum = T0 + svm_core::sync::LOCK_QUANTUM.as_nanos() as u64;
    assert_eq!(
        job.nodes[0].poll_at(),
        Some(quantum),
        "the request's quantum"
    );
    job.nodes[0].poll_timers(quantum).expect("timers");
    assert_eq!(job.pump(quantum), 0, "the quantum's end moves nothing");
    assert_eq!(job.nodes[0].poll_at(), None, "no timer before the release");

    // Node 0 releases at T1: the token lingers there for a local re-acquire.
    let t1 = T0 + 3_000_000;
    job.release_lock(0, w0, 1, t1);
    let due = job.nodes[0].poll_at().expect("the token lingers");
    assert!(
        due > t1,
        "the linger ends after the release ({due} vs {t1})"
    );
    assert_eq!(
        Duration::from_nanos(due - t1),
        svm_core::sync::LOCK_LINGER,
        "the linger is timed from the release's step"
    );

    // However much wall-clock time passes, nothing moves before the driver's time does.
    std::thread::sleep(svm_core::sync::LOCK_LINGER * 3);
    job.nodes[0].poll_timers(due - 1).expect("timers");
    assert_eq!(job.pump(due - 1), 0, "nothing sent a nanosecond early");
    assert_eq!(want.result(), None, "node 1 still waits");
    assert_eq!(job.nodes[0].poll_at(), Some(due));

    job.nodes[0].poll_timers(due).expect("timers");
    assert!(job.pump(due) > 0, "the token moves at its time");
    assert_eq!(want.result(), Some(WaitResult::Granted), "node 1 got it");
    assert_eq!(job.nodes[0].poll_at(), None, "no timer left");
}

#[test]
fn a_lingering_token_waits_for_its_nodes_page_fault_until_the_quantum_ends() {
    let mut job = driven_job(2);
    let q = svm_core::sync::LOCK_QUANTUM.as_nanos() as u64;
    let linger = svm_core::sync::LOCK_LINGER.as_nanos() as u64;
    // Node 0 holds lock 1 (managed by node 1); node 1's request at T0 starts a quantum at
    // node 0 that ends at T0 + q.
    let w0 = job.take_free_lock(0, 1, T0);
    let want = job
        .op(1, T0, lock_op(1))
        .expect("node 1 waits for the token");
    assert_eq!(want.result(), None);

    // Node 0's thread releases, then faults on a page of node 1's whose request is not
    // delivered: its page stays on its way.
    let t1 = T0 + 1_000;
    job.release_lock(0, w0, 1, t1);
    let ticket = job.read_a_page_of(0, 1, t1 + 1_000);

    // Each time its linger ends before the quantum does, the token lingers on: nothing but
    // the page request reaches node 1.
    let mut ends = Vec::new();
    let moved_at = loop {
        let due = job.nodes[0].poll_at().expect("a timer at node 0");
        assert!(
            due <= t1 + q + 2 * linger,
            "the token lingers past the bound"
        );
        job.nodes[0].poll_timers(due).expect("timers");
        job.deliver_link(due, 0, 1);
        if want.result().is_some() {
            break due;
        }
        ends.push(due);
    };
    assert_eq!(want.result(), Some(WaitResult::Granted), "node 1 got it");
    assert!(
        ends.contains(&(t1 + linger)),
        "the first linger's end kept the token: {ends:?}"
    );
    assert!(
        moved_at > T0 + q,
        "the token stayed until the quantum ended ({moved_at} vs {})",
        T0 + q
    );
    assert!(
        !job.mems[0].is_served(&ticket),
        "the page is still on its way"
    );
}

#[test]
fn a_fault_nobody_answers_fails_at_the_drivers_deadline_not_the_wall_clocks() {
    let mut job = driven_job(2);
    // A page homed at node 0; node 1 reads it, and its request is never delivered.
    let t1 = T0 + 1_000;
    let ticket = job.read_a_page_of(1, 0, t1);
    assert!(!job.mems[1].is_served(&ticket), "the page has not come");
    let timeout = TIMEOUT_S * 1_000_000_000;
    job.nodes[1]
        .poll_timers(t1 + timeout)
        .expect("exactly the deadline is not past it");
    match job.nodes[1].poll_timers(t1 + timeout + 1) {
        Err(EngineError::FaultTimeout(after)) => {
            assert_eq!(after, Duration::from_secs(TIMEOUT_S))
        }
        other => panic!("expected the fault deadline, got {other:?}"),
    }
    // The driver's clock, not the backend's, stamped the fault: delivering the request late
    // still serves it.
    assert!(
        job.pump(t1 + timeout + 2) > 0,
        "request and reply delivered"
    );
    assert!(job.mems[1].is_served(&ticket), "the page came");
}

/// A link whose sends wait at a gate the test opens: a write to it takes as long as the test
/// wants, like a write to a slow connection.
struct GatedLink {
    inner: Box<dyn Link>,
    gate: Arc<Gate>,
}

#[derive(Default)]
struct Gate {
    /// (sends waiting at the gate, the gate is open)
    state: Mutex<(u32, bool)>,
    changed: Condvar,
}

impl Gate {
    /// Waits until some thread waits at the gate.
    fn wait_for_a_waiter(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut g = self.state.lock().unwrap();
        while g.0 == 0 {
            assert!(
                Instant::now() < deadline,
                "no send reached the gate in 20 s"
            );
            g = self
                .changed
                .wait_timeout(g, Duration::from_millis(50))
                .unwrap()
                .0;
        }
    }

    /// Counts the caller as waiting at the gate until the test opens it (at most 20 s).
    fn pass(&self) {
        let mut g = self.state.lock().unwrap();
        g.0 += 1;
        self.changed.notify_all();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !g.1 && Instant::now() < deadline {
            g = self
                .changed
                .wait_timeout(g, Duration::from_millis(50))
                .unwrap()
                .0;
        }
        g.0 -= 1;
    }

    fn open(&self) {
        self.state.lock().unwrap().1 = true;
        self.changed.notify_all();
    }
}

impl Link for GatedLink {
    fn send(&self, parts: &[&[u8]]) -> Result<(), CommError> {
        self.gate.pass();
        self.inner.send(parts)
    }
    fn poll_fd(&self) -> std::os::fd::RawFd {
        self.inner.poll_fd()
    }
    fn recv_available(&self, buf: &mut RecvBuf) -> Result<bool, CommError> {
        self.inner.recv_available(buf)
    }
    fn kind(&self) -> &'static str {
        "gated"
    }
    fn close(&self) {
        self.inner.close()
    }
}

#[test]
fn a_slow_write_to_a_peer_does_not_hold_the_engine_state() {
    let cfg = common::config("sc-sw", TIMEOUT_S);
    let (mut links, _taps) = loopback::mesh(2).expect("loopback links");
    let gate = Arc::new(Gate::default());
    let mut links0 = std::mem::take(&mut links[0]);
    let to_1 = links0[1].take().expect("node 0's link to node 1");
    links0[1] = Some(Box::new(GatedLink {
        inner: to_1,
        gate: gate.clone(),
    }));
    let backend = Box::new(MemBackend::new(cfg.page_size).expect("in-memory backend"));
    let parts = common::node_parts(&cfg, 0, 2, backend, links0, FailureMode::Keep);
    let node = Node::start_driven(parts).expect("driven node");

    std::thread::scope(|s| {
        // Lock 1 is managed by node 1: asking for it sends a request over the gated link.
        let asker = s.spawn(|| {
            let w = node.new_waiter();
            node.submit(T0, w, lock_op(1)).expect("lock starts")
        });
        gate.wait_for_a_waiter();
        // The request is being written: the state must be free meanwhile (another thread's
        // step, here a read of the timers, goes through at once).
        let (tx, rx) = std::sync::mpsc::channel();
        let node_ref = &node;
        s.spawn(move || {
            let _ = node_ref.poll_at();
            let _ = tx.send(());
        });
        let free = rx.recv_timeout(Duration::from_secs(10)).is_ok();
        gate.open();
        let pending = asker.join().expect("asker");
        assert!(
            free,
            "another thread could not take the engine state while a write waited"
        );
        assert_eq!(pending.result(), None, "the lock waits for node 1's grant");
    });
}

/// The in-memory backend, with its page changes (`set_access`, `install`) held at a gate the
/// test opens: fault service that takes as long as the test wants.
struct GatedBackend {
    inner: MemBackend,
    gate: Arc<Gate>,
}

impl FaultBackend for GatedBackend {
    fn name(&self) -> &'static str {
        "gated"
    }
    fn poll_fd(&self) -> std::os::fd::RawFd {
        self.inner.poll_fd()
    }
    fn take_faults(&self, out: &mut Vec<Fault>) -> Result<(), SysError> {
        self.inner.take_faults(out)
    }
    fn set_access(
        &self,
        addr: usize,
        len: usize,
        old: Access,
        new: Access,
        present: bool,
        initial: Option<&[u8]>,
    ) -> Result<bool, SysError> {
        self.gate.pass();
        self.inner.set_access(addr, len, old, new, present, initial)
    }
    fn install(
        &self,
        addr: usize,
        data: &[u8],
        access: Access,
        present: bool,
    ) -> Result<bool, SysError> {
        self.gate.pass();
        self.inner.install(addr, data, access, present)
    }
    fn read(
        &self,
        addr: usize,
        dst: &mut [u8],
        present: bool,
        initial: Option<&[u8]>,
    ) -> Result<(), SysError> {
        self.inner.read(addr, dst, present, initial)
    }
    fn patch(
        &self,
        addr: usize,
        len: usize,
        access: Access,
        present: bool,
        runs: &[(usize, &[u8])],
    ) -> Result<bool, SysError> {
        self.inner.patch(addr, len, access, present, runs)
    }
    fn drop_range(&self, addr: usize, len: usize) -> Result<(), SysError> {
        self.inner.drop_range(addr, len)
    }
    fn wake(&self, addr: usize, len: usize, waiter: WaiterRef) -> Result<(), SysError> {
        self.inner.wake(addr, len, waiter)
    }
    fn shutdown(&self) {
        self.inner.shutdown()
    }
}

#[test]
fn a_lock_taken_while_the_engine_serves_a_fault_does_not_wait_for_it() {
    let cfg = common::config("sc-sw", TIMEOUT_S);
    let (mut links, _taps) = loopback::mesh(1).expect("loopback links");
    let gate = Arc::new(Gate::default());
    let mem = MemBackend::new(cfg.page_size).expect("in-memory backend");
    let backend = Box::new(GatedBackend {
        inner: mem.clone(),
        gate: gate.clone(),
    });
    let links0 = std::mem::take(&mut links[0]);
    let parts = common::node_parts(&cfg, 0, 1, backend, links0, FailureMode::Keep);
    let node = Node::start_driven(parts).expect("driven node");
    let page = node.space.alloc_local(4096).expect("allocation");
    let ticket = match mem.try_store(page, &[1; 8]).expect("an access") {
        Attempt::Faulted(t) => t,
        Attempt::Done(()) => panic!("a fresh page faults first"),
    };

    std::thread::scope(|s| {
        // The engine serves the fault and is held at the gate, in the middle of its step.
        let server = s.spawn(|| node.serve_faults(T0).expect("fault served"));
        gate.wait_for_a_waiter();
        // Meanwhile an application thread takes a lock through the engine.
        let (tx, rx) = std::sync::mpsc::channel();
        let node_ref = &node;
        s.spawn(move || {
            let w = node_ref.new_waiter();
            let p = node_ref.submit(T0, w, lock_op(0)).expect("lock starts");
            let _ = tx.send(p);
        });
        let started = rx.recv_timeout(Duration::from_secs(10));
        gate.open();
        server.join().expect("server");
        let pending = started.expect("the lock operation waited for fault service to end");
        // The fault's step ran the posted operation before it let go of the state.
        assert_eq!(pending.result(), Some(WaitResult::Granted));
    });
    assert!(mem.is_served(&ticket), "the fault was served");
    assert_eq!(node.engine_failure(), None);
}

/// Three nodes, a first-touch page (scope, as `cvm_alloc` makes them) whose directory is
/// node 0: node 1 touches it first and node 2 next, and node 2 hears from the directory that
/// node 1 is the home before node 1 does. Node 2's request reaches node 1 while node 1 still
/// waits for the directory's answer; node 1 holds it back until it knows it is the home, then
/// serves it (taken at once, the request met a protocol that did not know the page was its
/// own: a stray request dropped, and node 2 waiting for ever).
#[test]
fn a_request_that_overtakes_the_directorys_answer_waits_for_it() {
    let mut job = driven_job_of("scope", 3);
    let ps = 4096;
    let base = job.nodes[1]
        .space
        .alloc_local_first_touch(3 * ps)
        .expect("first-touch allocation");
    let addr = (0..3)
        .map(|i| base + i * ps)
        .find(|a| job.nodes[1].space.directory(job.nodes[1].space.page_of(*a)) == 0)
        .expect("one of three pages has directory 0");
    let page = job.nodes[1].space.page_of(addr);

    let t1 = T0 + 1_000;
    for m in &job.mems {
        m.set_time(t1);
    }
    let write1 = match job.mems[1].try_store(addr, &[7; 8]).expect("an access") {
        Attempt::Faulted(t) => t,
        Attempt::Done(_) => panic!("node 1 has not touched the page"),
    };
    job.nodes[1].serve_faults(t1).expect("node 1's fault");
    let read2 = match job.mems[2].try_load(addr, 8).expect("an access") {
        Attempt::Faulted(t) => t,
        Attempt::Done(_) => panic!("node 2 has not touched the page"),
    };
    job.nodes[2].serve_faults(t1).expect("node 2's fault");

    // The directory hears node 1 first, then node 2, and answers both.
    assert_eq!(job.deliver_link(t1, 1, 0), 1, "node 1's question");
    assert_eq!(job.deliver_link(t1, 2, 0), 1, "node 2's question");
    assert_eq!(
        job.nodes[0].space.home(page),
        1,
        "the first toucher is the home"
    );
    // Node 2 hears the answer and asks node 1 for the page, before node 1 hears it.
    assert_eq!(job.deliver_link(t1, 0, 2), 1, "the answer to node 2");
    assert!(job.deliver_link(t1, 2, 1) >= 1, "node 2's request");
    assert!(!job.mems[2].is_served(&read2), "node 1 cannot serve it yet");
    assert!(
        !job.mems[1].is_served(&write1),
        "node 1 waits for the directory"
    );

    job.pump(t1);
    assert_eq!(job.nodes[1].space.home(page), 1);
    assert_eq!(job.nodes[2].space.home(page), 1);
    assert!(job.mems[1].is_served(&write1), "node 1 writes its own page");
    assert!(job.mems[2].is_served(&read2), "node 2's request was served");
    job.mems[2].retire(&read2);
    assert_eq!(
        job.mems[2].try_load(addr, 8).expect("an access"),
        Attempt::Done(vec![0; 8]),
        "node 2 reads the page as it was before node 1's store"
    );
    // Node 1's store: its copy went out, so the home's write faults once more (to be seen
    // from now on) and is served locally.
    job.mems[1].retire(&write1);
    if let Attempt::Faulted(again) = job.mems[1].try_store(addr, &[7; 8]).expect("an access") {
        job.nodes[1].serve_faults(t1).expect("node 1's fault");
        job.pump(t1);
        assert!(job.mems[1].is_served(&again), "served at the home");
        job.mems[1].retire(&again);
        assert_eq!(
            job.mems[1].try_store(addr, &[7; 8]).expect("an access"),
            Attempt::Done(())
        );
    }
    assert_eq!(job.mems[1].contents(addr).expect("present")[..8], [7; 8]);
}

#[test]
fn a_lingering_tokens_local_takes_skip_the_engine_until_the_fairness_bound() {
    let mut job = driven_job(2);
    let (w0, _, want) = job.linger_while_node_1_waits();

    // Node 0's thread now takes and releases it without the engine, up to the fairness
    // bound: the last take's release goes through the engine, which passes the token on.
    let bound = svm_core::sync::MAX_LOCAL_HANDOFFS;
    let now = T0 + 2_000;
    for _ in 1..bound {
        job.fast_take_and_release(w0, now);
        assert_eq!(job.pump(now), 0, "nothing is sent within the share");
    }
    let give = job
        .fast_take_then_release(w0, now)
        .expect("the share's last release goes through the engine");
    assert!(job.pump(now) > 0, "the token moves at once");
    assert_eq!(give.result(), Some(WaitResult::Released));
    assert_eq!(want.result(), Some(WaitResult::Granted), "node 1 got it");
    assert_eq!(
        job.nodes[0].inspect_sync(|s| s.max_overtakes()),
        bound,
        "every take counted against the bound"
    );
    // The token is node 1's: node 0's next take waits for it.
    let again = job.nodes[0]
        .begin(now, w0, lock_op(1))
        .expect("lock starts")
        .expect("the token is elsewhere: through the engine");
    job.pump(now);
    assert_eq!(again.result(), None, "node 0 waits");
}

#[test]
fn a_lingering_token_open_to_its_threads_still_moves_at_its_linger_and_quantum() {
    let mut job = driven_job(2);
    let linger = svm_core::sync::LOCK_LINGER.as_nanos() as u64;
    let quantum = svm_core::sync::LOCK_QUANTUM.as_nanos() as u64;

    // Node 0's thread takes the lingering token a few times: it lingers once more, and moves
    // when a whole linger passes without a take, while nobody of node 0 holds the lock; the
    // fast path is closed then.
    let (w0, w1, want) = job.linger_while_node_1_waits();
    for _ in 0..3 {
        job.fast_take_and_release(w0, T0 + 2_000);
    }
    let first = T0 + 1_000 + linger;
    let sent = job.reach_timer_of_node_0(first, "the linger of the release");
    assert_eq!(sent, 0, "taken during its linger: it stays");
    let sent = job.reach_timer_of_node_0(first + linger, "one more linger");
    assert!(sent > 0, "the token moves at the idle linger's end");
    let due = first + linger;
    assert_eq!(want.result(), Some(WaitResult::Granted), "node 1 got it");
    let back = job.nodes[0]
        .begin(due, w0, lock_op(1))
        .expect("lock starts")
        .expect("closed: through the engine");
    job.pump(due);

    // The token comes back to node 0, whose thread holds it when node 1 asks again at `t`.
    let t = job.release_and_let_linger(1, w1, 1, due + 1_000);
    assert_eq!(
        back.result(),
        Some(WaitResult::Granted),
        "node 0 has it again"
    );
    let want = job.ask_for_lock(1, w1, 1, t);
    job.release_lock(0, w0, 1, t + 1_000);
    for _ in 0..svm_core::sync::MIN_LOCAL_HANDOFFS {
        job.fast_take_and_release(w0, t + 2_000);
    }
    // Held through the fast path when the quantum ends: the engine adopts the holder, and
    // its release moves the token at once.
    let take = job.nodes[0].begin(t + 3_000, w0, lock_op(1)).expect("lock");
    assert!(take.is_none(), "taken without the engine");
    job.nodes[0].poll_timers(t + quantum).expect("timers");
    assert_eq!(
        job.pump(t + quantum),
        0,
        "the holder keeps its critical section"
    );
    let rel = job.nodes[0]
        .begin(t + quantum, w0, SyncOp::Unlock(1))
        .expect("unlock starts")
        .expect("adopted: the release goes through the engine");
    assert!(job.pump(t + quantum) > 0, "the token moves at the release");
    assert_eq!(rel.result(), Some(WaitResult::Released));
    assert_eq!(want.result(), Some(WaitResult::Granted), "node 1 got it");
}

#[test]
fn a_token_taken_often_lingers_until_the_quantum_and_one_taken_rarely_only_while_used() {
    let linger = svm_core::sync::LOCK_LINGER.as_nanos() as u64;
    let quantum = svm_core::sync::LOCK_QUANTUM.as_nanos() as u64;
    assert!(
        3 * linger >= quantum,
        "the test's timeline needs quantum <= 3 lingers"
    );
    for (takes, moves_at) in [
        // The minimum share taken: the token stays however idle until the quantum ends.
        (svm_core::sync::MIN_LOCAL_HANDOFFS, T0 + quantum),
        // Taken twice: one more linger, then it moves.
        (2, T0 + 1_000 + 2 * linger),
    ] {
        let mut job = driven_job(2);
        let (w0, _, want) = job.linger_while_node_1_waits();
        for _ in 0..takes {
            job.fast_take_and_release(w0, T0 + 2_000);
        }
        // No take after T0 + 2 µs: the driver's time walks on, a microsecond before each
        // timer and at it.
        let mut now = T0 + 2_000;
        while let Some(at) = job.nodes[0].poll_at() {
            assert!(
                at <= moves_at,
                "{takes} takes: a timer after the move ({at})"
            );
            job.nodes[0].poll_timers(at - 1_000).expect("timers");
            job.pump(at - 1_000);
            assert_eq!(want.result(), None, "{takes} takes: still here before {at}");
            job.nodes[0].poll_timers(at).expect("timers");
            job.pump(at);
            now = at;
            if want.result().is_some() {
                break;
            }
        }
        assert_eq!(now, moves_at, "{takes} takes: when the token moved");
        assert_eq!(want.result(), Some(WaitResult::Granted), "node 1 got it");
    }
}
