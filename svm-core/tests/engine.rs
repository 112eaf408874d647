//! Engine tests: the real engine of several nodes in one process, over loopback links
//! (`svm_comm::loopback`) and the in-memory fault backend (`svm_core::fault::mem`). No window,
//! no page faults, no other processes: what is tested is the engine's fault service, message
//! dispatch, synchronisation and failure handling with every protocol of the build.
//!
//! Deadlines: every access and wait has one (the backend's access timeout, `SVM_TIMEOUT` for
//! the nodes' waits), so a hang fails the test with the name of what was waited for.

use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use svm_comm::deck::sci::HostBarrier;
use svm_comm::loopback::{self, LoopbackTap};
use svm_comm::transport::{Link, RecvBuf};
use svm_comm::wire::{self, Msg, ProtoMsg};
use svm_core::fault::mem::MemBackend;
use svm_core::node::{FailureMode, Node, WaitResult};
use svm_core::protocol::{protocol_id, Access, Action, Context, PageId, Protocol};
use svm_core::NodeId;

/// How long one access may wait for the engines (the nodes' own waits end the test process
/// with a diagnostic after `SVM_TIMEOUT`, 20 s).
const ACCESS: Duration = Duration::from_secs(20);

struct TestJob {
    nodes: Vec<Arc<Node>>,
    mems: Vec<MemBackend>,
    /// `taps[i][j]`: node i's end of its link to node j.
    taps: Vec<Vec<Option<LoopbackTap>>>,
}

fn start_job(n: NodeId, protocol: &str, failure_mode: FailureMode) -> TestJob {
    let cfg = common::config(protocol, 20);
    let (links, taps) = loopback::mesh(n).expect("loopback links");
    let mut nodes = Vec::new();
    let mut mems = Vec::new();
    for (me, links) in links.into_iter().enumerate() {
        let mem = MemBackend::new(cfg.page_size).expect("in-memory backend");
        let parts = common::node_parts(
            &cfg,
            me as NodeId,
            n,
            Box::new(mem.clone()),
            links,
            failure_mode,
        );
        nodes.push(Node::start(parts).expect("node starts"));
        mems.push(mem);
    }
    TestJob { nodes, mems, taps }
}

impl TestJob {
    /// Runs `body` on every node, each in its own thread (as each node's application would
    /// run in its own process), then ends the job in order (`Node::finish`).
    fn run(&self, body: impl Fn(&Node, &MemBackend) + Sync) {
        std::thread::scope(|s| {
            for (node, mem) in self.nodes.iter().zip(&self.mems) {
                let body = &body;
                s.spawn(move || {
                    body(node, mem);
                    node.finish();
                });
            }
        });
    }

    /// Waits until node `i`'s engine stops with an error and returns its message.
    fn engine_failure(&self, i: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(e) = self.nodes[i].engine_failure() {
                return e;
            }
            assert!(
                Instant::now() < deadline,
                "node {i}'s engine did not fail within 20 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn load_u64(mem: &MemBackend, addr: usize) -> u64 {
    let b = mem.load(addr, 8, ACCESS).expect("load served");
    u64::from_le_bytes(b.try_into().expect("8 bytes"))
}

fn store_u64(mem: &MemBackend, addr: usize, v: u64) {
    mem.store(addr, &v.to_le_bytes(), ACCESS)
        .expect("store served");
}

const PROTOCOLS: [&str; 3] = ["sc-sw", "sc-mw", "scope"];

#[test]
fn a_counter_under_a_lock_counts_every_increment_of_both_nodes() {
    const ROUNDS: u64 = 150;
    for proto in PROTOCOLS {
        let job = start_job(2, proto, FailureMode::EndJob);
        // A page homed at node 0 (its local arena): node 1 fetches it through the engines.
        let counter = job.nodes[0].space.alloc_local(4096).expect("allocation");
        job.run(|node, mem| {
            for _ in 0..ROUNDS {
                assert!(node.lock(1, false), "{proto}: lock granted");
                let v = load_u64(mem, counter);
                store_u64(mem, counter, v + 1);
                assert!(node.unlock(1), "{proto}: unlock by the holder");
            }
            assert_eq!(
                node.barrier(2, 2),
                WaitResult::BarrierDone,
                "{proto}: barrier"
            );
            assert!(node.lock(1, false));
            assert_eq!(
                load_u64(mem, counter),
                2 * ROUNDS,
                "{proto}: node {} sees every increment",
                node.me
            );
            assert!(node.unlock(1));
        });
        // The page went through the engines: node 1, which is not its home, fetched it.
        let s1 = job.nodes[1].stats();
        assert!(s1.pages_fetched > 0, "{proto}: node 1 fetched the page");
        assert_eq!(s1.fault_backend, "mem");
    }
}

#[test]
fn threads_contending_for_a_lock_while_their_engine_serves_faults_lose_no_operation() {
    // Lock and unlock operations that find the engine state taken (fault service, another
    // thread's operation) are handed to its holder (`node/step.rs`): none may be lost or run
    // twice, under any protocol.
    const ROUNDS: u64 = 120;
    const LOCKERS: u64 = 3;
    const PAGES: usize = 48;
    for proto in PROTOCOLS {
        let job = start_job(2, proto, FailureMode::EndJob);
        let counter = job.nodes[1].space.alloc_local(4096).expect("allocation");
        // Pages homed at node 1 that a thread of node 0 reads while its lockers run, so
        // node 0's engine serves faults all along.
        let pages = job.nodes[1]
            .space
            .alloc_local(PAGES * 4096)
            .expect("allocation");
        std::thread::scope(|s| {
            for (node, mem) in job.nodes.iter().zip(&job.mems) {
                let lockers = if node.me == 0 { LOCKERS } else { 1 };
                let threads: Vec<_> = (0..lockers)
                    .map(|_| {
                        s.spawn(move || {
                            for _ in 0..ROUNDS {
                                assert!(node.lock(3, false), "{proto}: lock granted");
                                let v = load_u64(mem, counter);
                                store_u64(mem, counter, v + 1);
                                assert!(node.unlock(3), "{proto}: unlock by the holder");
                            }
                        })
                    })
                    .collect();
                let reader = (node.me == 0).then(|| {
                    s.spawn(move || {
                        for i in 0..PAGES {
                            assert_eq!(load_u64(mem, pages + i * 4096), 0, "{proto}: zeros");
                        }
                    })
                });
                s.spawn(move || {
                    for t in threads {
                        t.join().expect("locker");
                    }
                    if let Some(r) = reader {
                        r.join().expect("reader");
                    }
                    assert_eq!(node.barrier(4, 2), WaitResult::BarrierDone);
                    assert!(node.lock(3, false));
                    assert_eq!(
                        load_u64(mem, counter),
                        (LOCKERS + 1) * ROUNDS,
                        "{proto}: node {} sees every increment",
                        node.me
                    );
                    assert!(node.unlock(3));
                    node.finish();
                });
            }
        });
    }
}

#[test]
fn values_written_before_a_barrier_are_read_after_it_on_every_node() {
    const NODES: NodeId = 3;
    for proto in PROTOCOLS {
        let job = start_job(NODES, proto, FailureMode::EndJob);
        // One page per node, homed at that node.
        let slots: Vec<usize> = job
            .nodes
            .iter()
            .map(|n| n.space.alloc_local(4096).expect("allocation"))
            .collect();
        job.run(|node, mem| {
            let me = node.me as usize;
            for round in 0..5u64 {
                store_u64(mem, slots[me], round * 10 + me as u64);
                assert_eq!(node.barrier(9, NODES as u32), WaitResult::BarrierDone);
                for (k, &slot) in slots.iter().enumerate() {
                    assert_eq!(
                        load_u64(mem, slot),
                        round * 10 + k as u64,
                        "{proto}: node {me}, round {round}, slot of node {k}"
                    );
                }
                assert_eq!(node.barrier(9, NODES as u32), WaitResult::BarrierDone);
            }
        });
    }
}

#[test]
fn a_page_written_at_one_node_is_read_at_another_under_sequential_consistency() {
    let job = start_job(2, "sc-sw", FailureMode::EndJob);
    let page = job.nodes[1].space.alloc_local(4096).expect("allocation");
    let flag = page + 2048;
    job.run(|node, mem| {
        if node.me == 0 {
            // Written here, homed at node 1: ownership moves to node 0 and back.
            store_u64(mem, page, 0xfeed);
            store_u64(mem, flag, 1);
        } else {
            let deadline = Instant::now() + ACCESS;
            while load_u64(mem, flag) != 1 {
                assert!(Instant::now() < deadline, "the flag never turned 1");
                std::thread::yield_now();
            }
            assert_eq!(load_u64(mem, page), 0xfeed, "the datum before the flag");
        }
    });
}

#[test]
fn under_scope_a_node_keeps_the_pages_only_it_wrote_across_barriers_and_lock_grants() {
    const ROUNDS: u64 = 6;
    let job = start_job(2, "scope", FailureMode::EndJob);
    // Both pages homed at node 0: node 1 writes `mine` (under lock 1), node 0 `theirs`.
    let mine = job.nodes[0].space.alloc_local(4096).expect("allocation");
    let theirs = job.nodes[0].space.alloc_local(4096).expect("allocation");
    job.run(|node, mem| {
        let me = node.me;
        for round in 1..=ROUNDS {
            if me == 0 {
                store_u64(mem, theirs, round);
            } else {
                assert!(node.lock(1, false));
                store_u64(mem, mine, round);
                assert!(node.unlock(1));
            }
            // Both barrier kinds: a managed one and the dissemination barrier of all nodes.
            let done = if round % 2 == 0 {
                node.barrier(3, 2)
            } else {
                node.barrier_all_nodes(4)
            };
            assert_eq!(done, WaitResult::BarrierDone);
            // Node 0 takes the lock (its token then carries node 1's notice of `mine` back
            // to node 1).
            if me == 0 {
                assert!(node.lock(1, false));
                assert!(node.unlock(1));
            }
            assert_eq!(node.barrier(3, 2), WaitResult::BarrierDone);
            if me == 1 {
                assert!(node.lock(1, false));
            }
            assert_eq!(load_u64(mem, mine), round, "node {me}, round {round}");
            assert_eq!(load_u64(mem, theirs), round, "node {me}, round {round}");
            if me == 1 {
                assert!(node.unlock(1));
            }
            assert_eq!(node.barrier(3, 2), WaitResult::BarrierDone);
        }
    });
    // Node 1 fetched `mine` once (its first write) and `theirs` once per round (node 0
    // wrote it); neither barrier nor lock grant named `mine` back to it.
    let s1 = job.nodes[1].stats();
    assert_eq!(
        s1.pages_fetched,
        1 + ROUNDS,
        "node 1 fetched `mine` once and `theirs` once per round"
    );
}

/// Barrier messages (`barrier_arrive`, `barrier_release`, `barrier_round`) a node sent.
fn barrier_messages_sent(node: &Node) -> u64 {
    let stats = node.stats();
    ["barrier_arrive", "barrier_release", "barrier_round"]
        .iter()
        .filter_map(|m| stats.messages.get(m).map(|c| c.sent))
        .sum()
}

/// Shared-memory barrier slots in a fresh file named after `what`, used by every node of
/// `job`; the slots and the file's path (to remove at the end).
fn use_host_barrier(job: &TestJob, what: &str) -> (HostBarrier, std::path::PathBuf) {
    host_barrier_for(&job.nodes, what)
}

/// [`use_host_barrier`] for any set of nodes.
fn host_barrier_for(nodes: &[Arc<Node>], what: &str) -> (HostBarrier, std::path::PathBuf) {
    let path = std::env::temp_dir().join(format!(
        "svm-engine-host-barrier-{what}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    let hb = HostBarrier::in_new_file(&path).expect("barrier slots");
    for node in nodes {
        node.use_host_barrier(hb.clone());
    }
    (hb, path)
}

#[test]
fn shared_memory_barriers_exchange_values_refuse_a_wrong_count_and_carry_notices_by_message() {
    for proto in PROTOCOLS {
        let job = start_job(2, proto, FailureMode::EndJob);
        let (hb, path) = use_host_barrier(&job, proto);
        // One page homed at node 0; each node writes its own word of it.
        let page = job.nodes[0].space.alloc_local(4096).expect("allocation");
        job.run(|node, mem| {
            let me = node.me as usize;
            for round in 1..=5u64 {
                store_u64(mem, page + 8 * me, round);
                let done = if round % 2 == 0 {
                    node.barrier(7, 2)
                } else {
                    node.barrier_all_nodes(8)
                };
                assert_eq!(done, WaitResult::BarrierDone, "{proto}");
                assert_eq!(
                    load_u64(mem, page + 8 * (1 - me)),
                    round,
                    "{proto}: node {me}, round {round}"
                );
                assert_eq!(node.barrier(7, 2), WaitResult::BarrierDone, "{proto}");
            }
            // Node 1 arrives with another count while node 0 waits: refused, not counted.
            if me == 0 {
                assert_eq!(node.barrier(9, 2), WaitResult::BarrierDone, "{proto}");
            } else {
                let deadline = Instant::now() + ACCESS;
                while hb.arrivals(9) != Some((2, 1)) {
                    assert!(Instant::now() < deadline, "node 0 never arrived");
                    std::thread::yield_now();
                }
                assert_eq!(
                    node.barrier(9, 3),
                    WaitResult::BarrierMismatch {
                        expected: 2,
                        got: 3
                    },
                    "{proto}"
                );
                assert_eq!(node.barrier(9, 2), WaitResult::BarrierDone, "{proto}");
            }
        });
        let sent: u64 = job.nodes.iter().map(|n| barrier_messages_sent(n)).sum();
        if proto == "sc-sw" {
            // Nothing to hand over at any barrier: all of them in shared memory.
            assert_eq!(sent, 0, "{proto}: barrier messages");
        } else {
            // The writes before each first barrier of a round are flushed and announced by
            // the message barrier.
            assert!(sent > 0, "{proto}: no barrier message");
        }
        let _ = std::fs::remove_file(&path);
    }
}

/// scope over the shared-memory barrier: a page its home wrote and released under a lock is
/// still announced at the next barrier (scope keeps the page for the barrier's notices after
/// the lock's flush), so that barrier goes through the messages instead of passing in shared
/// memory and leaving the other node's copy stale.
#[test]
fn a_write_released_under_a_lock_is_announced_at_the_next_shared_memory_barrier() {
    let job = start_job(2, "scope", FailureMode::EndJob);
    let (_hb, path) = use_host_barrier(&job, "lock");
    let page = job.nodes[0].space.alloc_local(4096).expect("allocation");
    job.run(|node, mem| {
        for round in 1..=3u64 {
            if node.me == 1 {
                // A read copy, fetched from the home (node 0).
                assert_eq!(load_u64(mem, page), round - 1);
            }
            assert_eq!(node.barrier_all_nodes(8), WaitResult::BarrierDone);
            if node.me == 0 {
                assert!(node.lock(1, false));
                store_u64(mem, page, round);
                assert!(node.unlock(1));
            }
            assert_eq!(node.barrier_all_nodes(8), WaitResult::BarrierDone);
            if node.me == 1 {
                assert_eq!(load_u64(mem, page), round, "round {round}: stale copy");
            }
            assert_eq!(node.barrier_all_nodes(8), WaitResult::BarrierDone);
        }
    });
    let _ = std::fs::remove_file(&path);
}

/// scope over the shared-memory barrier, 3 nodes: node 0 writes a page and meets node 1
/// alone; node 1, which has nothing of its own to hand over, then meets node 2 alone. That
/// barrier must still go through the messages (node 1 passed a barrier of some nodes, so it
/// may have heard of writes node 2 has not), or node 2 keeps its stale copy.
#[test]
fn a_barrier_of_some_nodes_after_another_goes_through_the_messages() {
    let job = start_job(3, "scope", FailureMode::EndJob);
    let (_hb, path) = use_host_barrier(&job, "subsets");
    let page = job.nodes[0].space.alloc_local(4096).expect("allocation");
    job.run(|node, mem| {
        for round in 1..=3u64 {
            // Every node holds a copy (node 0 is the page's home).
            assert_eq!(load_u64(mem, page), round - 1, "node {}", node.me);
            assert_eq!(node.barrier(10, 3), WaitResult::BarrierDone);
            match node.me {
                0 => {
                    store_u64(mem, page, round);
                    assert_eq!(node.barrier(11, 2), WaitResult::BarrierDone);
                }
                1 => {
                    assert_eq!(node.barrier(11, 2), WaitResult::BarrierDone);
                    assert_eq!(node.barrier(13, 2), WaitResult::BarrierDone);
                }
                _ => {
                    assert_eq!(node.barrier(13, 2), WaitResult::BarrierDone);
                    assert_eq!(load_u64(mem, page), round, "round {round}: stale copy");
                }
            }
            assert_eq!(node.barrier(10, 3), WaitResult::BarrierDone);
        }
    });
    let _ = std::fs::remove_file(&path);
}

/// A protocol that breaks the shared-memory barrier's contract: it asks for the barrier hooks
/// without messages and still names a page at its arrival.
struct NoticesAtHostBarrier;

impl Protocol for NoticesAtHostBarrier {
    fn name(&self) -> &'static str {
        "sc-sw"
    }
    fn on_fault(&mut self, _: &dyn Context, _: PageId, _: Access, _: &mut Vec<Action>) {}
    fn on_message(
        &mut self,
        _: &dyn Context,
        _: NodeId,
        _: &ProtoMsg,
        _: usize,
        _: &mut Vec<Action>,
    ) {
    }
    fn on_release(&mut self, _: &dyn Context, token: u64, out: &mut Vec<Action>) {
        out.push(Action::ReleaseDone {
            token,
            notices: Vec::new(),
        });
    }
    fn on_acquire(&mut self, _: &dyn Context, token: u64, _: &[PageId], out: &mut Vec<Action>) {
        out.push(Action::AcquireDone { token });
    }
    fn on_barrier_arrive(&mut self, _: &dyn Context, token: u64, out: &mut Vec<Action>) {
        out.push(Action::ReleaseDone {
            token,
            notices: vec![3],
        });
    }
    fn barrier_hooks_without_messages(&self) -> bool {
        true
    }
    fn quiescent(&self) -> bool {
        true
    }
    fn barrier_quiescent(&self) -> bool {
        true
    }
    fn describe(&self, page: PageId) -> String {
        format!("page {page}: a test protocol")
    }
}

/// Notices a protocol returns at an arrival at a barrier through shared memory would be lost
/// (that barrier carries none): the node ends with an error saying so. A failed engine ends
/// the process of a thread waiting on it, so the job runs in a child process (this test
/// binary, asked for this test alone with `SVM_ENGINE_TEST_CHILD` set).
#[test]
fn notices_at_a_shared_memory_barrier_arrival_end_the_node() {
    const TEST: &str = "notices_at_a_shared_memory_barrier_arrival_end_the_node";
    if std::env::var_os("SVM_ENGINE_TEST_CHILD").is_some() {
        return notices_at_a_shared_memory_barrier_arrival_child();
    }
    let exe = std::env::current_exe().expect("the test binary");
    let mut child = std::process::Command::new(exe)
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env("SVM_ENGINE_TEST_CHILD", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("child starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("child status").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the child did not end within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("child output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(70), "{stderr}");
    assert!(
        stderr.contains("node 0: protocol error: a protocol returned 1 write notices at an arrival at a barrier through shared memory"),
        "{stderr}"
    );
}

fn notices_at_a_shared_memory_barrier_arrival_child() {
    let cfg = common::config("sc-sw", 20);
    let (links, _taps) = loopback::mesh(2).expect("loopback links");
    let nodes: Vec<Arc<Node>> = links
        .into_iter()
        .enumerate()
        .map(|(me, links)| {
            let mem = MemBackend::new(cfg.page_size).expect("in-memory backend");
            let mut parts = common::node_parts(
                &cfg,
                me as NodeId,
                2,
                Box::new(mem),
                links,
                FailureMode::Keep,
            );
            let id = protocol_id("sc-sw").expect("sc-sw") as usize;
            parts.protocols[id] = Some(Box::new(NoticesAtHostBarrier));
            Node::start(parts).expect("node starts")
        })
        .collect();
    let (_hb, path) = host_barrier_for(&nodes, "contract");
    let _ = std::fs::remove_file(&path);
    // The arrival hook runs before the barrier: node 0's engine fails, which ends this
    // process (status 70) while the thread waits.
    nodes[0].barrier(7, 2);
    panic!("the barrier returned although the engine should have failed");
}

/// A frame from `from` to the tapped node, as `from`'s engine would send it.
fn frame(msg: &Msg, from: NodeId) -> Vec<u8> {
    wire::encode(msg, from, 0, &[]).expect("encodes")
}

#[test]
fn garbage_on_a_link_is_an_engine_error_naming_the_sender_and_closes_the_link() {
    let job = start_job(2, "sc-sw", FailureMode::Keep);
    let tap = job.taps[0][1].as_ref().expect("link 0-1");
    tap.inject(&[0xff; 64]);
    let e = job.engine_failure(0);
    assert!(e.contains("malformed frame from node 1"), "{e}");
    assert!(e.contains("connection closed"), "{e}");
    // Node 1 sees the connection close: for it, node 0 is lost.
    let e1 = job.engine_failure(1);
    assert!(e1.contains("lost node 0"), "{e1}");
}

#[test]
fn a_message_of_a_protocol_the_build_lacks_is_an_engine_error() {
    let job = start_job(2, "sc-sw", FailureMode::Keep);
    // A page of node 0's own arena (a page of a collective allocation node 0 has not made
    // yet would be held back until it has).
    let space = &job.nodes[0].space;
    let page = space.page_of(space.alloc_local(4096).expect("allocation"));
    let msg = Msg::Proto {
        proto: 250,
        msg: ProtoMsg::ReadReq { page },
    };
    job.taps[0][1]
        .as_ref()
        .expect("link")
        .inject(&frame(&msg, 1));
    let e = job.engine_failure(0);
    assert_eq!(e, "node 1 sent a message of unknown protocol 250");
}

#[test]
fn a_cut_connection_is_a_lost_node() {
    let job = start_job(3, "sc-sw", FailureMode::Keep);
    job.taps[0][2].as_ref().expect("link 0-2").cut();
    let e = job.engine_failure(0);
    assert!(e.starts_with("lost node 2 (connection closed)"), "{e}");
    let e2 = job.engine_failure(2);
    assert!(e2.starts_with("lost node 0 (connection closed)"), "{e2}");
    assert_eq!(
        job.nodes[1].engine_failure(),
        None,
        "node 1's links are whole"
    );
}

#[test]
fn an_abort_from_a_peer_ends_the_engine_with_its_reason_and_status() {
    let job = start_job(2, "sc-sw", FailureMode::Keep);
    let abort = Msg::Abort {
        reason: "node 1: the program called exit(3)".into(),
        code: 3,
    };
    job.taps[0][1]
        .as_ref()
        .expect("link")
        .inject(&frame(&abort, 1));
    assert_eq!(
        job.engine_failure(0),
        "the job was ended by node 1: the program called exit(3) (status 3)"
    );
}

/// A batch of requests read at once is answered grant by grant: the home's engine writes
/// each grant out as soon as it is made, so the first page of a reader's batch (its fault's,
/// the others asked for with it) is on its way before the home handles the rest.
#[test]
fn each_grant_of_a_batch_of_requests_read_at_once_leaves_in_a_write_of_its_own() {
    const PAGES: u64 = 4;
    let cfg = common::config("sc-sw", 20);
    let (home_end, peer_end) = loopback::pair(0, 1).expect("loopback pair");
    let tap = home_end.tap();
    let mem = MemBackend::new(cfg.page_size).expect("in-memory backend");
    let parts = common::node_parts(
        &cfg,
        0,
        2,
        Box::new(mem.clone()),
        vec![None, Some(Box::new(home_end))],
        FailureMode::Keep,
    );
    let node = Node::start(parts).expect("node starts");
    let page_size = cfg.page_size;
    // Every other page of node 0's own allocation, written there first (node 0 owns them):
    // pages not in a row, so the home sends nothing ahead.
    let base = node
        .space
        .alloc_local(2 * PAGES as usize * page_size)
        .expect("allocation");
    let pages: Vec<PageId> = (0..PAGES)
        .map(|i| {
            let addr = base + 2 * i as usize * page_size;
            store_u64(&mem, addr, 100 + i);
            node.space.page_of(addr)
        })
        .collect();
    let proto = protocol_id("sc-sw").expect("sc-sw");
    let batch: Vec<u8> = pages
        .iter()
        .flat_map(|&page| {
            frame(
                &Msg::Proto {
                    proto,
                    msg: ProtoMsg::ReadReq { page },
                },
                1,
            )
        })
        .collect();
    let sends_before = tap.sends();
    peer_end
        .send(&[&batch])
        .expect("the batch is sent in one write");
    let mut buf = RecvBuf::new();
    let mut granted = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while granted.len() < pages.len() {
        assert!(
            Instant::now() < deadline,
            "node 0 granted {granted:?} of {pages:?} within 20 s"
        );
        assert!(
            peer_end.recv_available(&mut buf).expect("reads"),
            "link open"
        );
        while let Some(bytes) = buf.next_frame().expect("whole frames") {
            let f = wire::decode(bytes).expect("a frame node 0 sent");
            if let Msg::Proto {
                msg: ProtoMsg::Grant { page, access, .. },
                ..
            } = f.msg
            {
                assert_eq!(access, Access::Read, "page {page}");
                granted.push(page);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(granted, pages, "granted in the order asked");
    let sends = tap.sends() - sends_before;
    assert_eq!(
        sends, PAGES,
        "each grant is written as soon as it is made, not all of them after the last"
    );
    tap.cut();
}
