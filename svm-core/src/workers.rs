//! Master/worker processes for the C personalities whose programs run `main` on one node only
//! (SPLASH-2 macros, CVM): the master ships function addresses to idle nodes, which run them in
//! threads; the job ends when the master ends it or any process exits with an error.
//!
//! Every node runs the same executable at the same addresses (checked at start with a layout
//! fingerprint), so a function address means the same function everywhere.

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::api::{self, Home, InitOptions, ProtocolFactory, SharedSlice, Svm};
use crate::sys;

/// Task queue entries per node (each entry: function address, argument).
const QUEUE: usize = 1024;
/// Queue entry meaning "leave the worker loop".
const STOP: u64 = u64::MAX;
/// Runtime-owned sync ids (below svm-core's reserved range, far above what programs use).
const ID_BASE: u64 = 1 << 62;
const TASK_SEM: u64 = ID_BASE;
const DONE_SEM: u64 = ID_BASE + 4096;
const QUEUE_LOCK: u64 = ID_BASE + 8192;
/// First id the personalities may use for their own runtime locks (pause flags, ...).
pub const PERSONALITY_IDS: u64 = ID_BASE + (1 << 40);
/// Exit status when the runtime itself fails.
pub const EXIT_RUNTIME: i32 = 70;

/// Runs a task: `f` is the shipped function address, `arg` its argument.
pub type TaskRunner = fn(f: usize, arg: u64);

/// The master/worker machinery of one process.
pub struct Procs {
    pub me: usize,
    pub nodes: usize,
    svm: Mutex<Option<Svm>>,
    /// Per node: [head, tail, (f, arg) × QUEUE] homed on that node.
    queues: Vec<SharedSlice<u64>>,
    /// Master's monotonic clock at start (ns): the job's time base.
    clock_base_ns: u64,
    next_target: AtomicU64,
    /// Set once the runtime itself is ending the process (the exit hook stands aside).
    ending: AtomicBool,
    runner: TaskRunner,
}

static PROCS: OnceLock<Procs> = OnceLock::new();

/// Prints `what` and ends the job with the runtime's failure status.
pub fn fail(what: &str) -> ! {
    eprintln!("svm: {what}");
    api::abort_job(EXIT_RUNTIME, what)
}

/// Unwraps or ends the job with the error.
pub fn or_fail<T, E: std::fmt::Display>(r: std::result::Result<T, E>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => fail(&e.to_string()),
    }
}

/// Runs `f`, turning a panic into the end of the job (no panic crosses a C ABI).
pub fn guard<T>(what: &str, f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(p) => {
            let msg = crate::sys::cabi::panic_message(&*p);
            fail(&format!("{what}: {msg}"))
        }
    }
}

/// A fingerprint of the executable and where its code is mapped: nodes must agree, since
/// function and data addresses travel between them.
fn layout_fingerprint() -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    if let Ok(exe) = std::fs::read_link("/proc/self/exe") {
        exe.hash(&mut h);
        if let Ok(md) = std::fs::metadata(&exe) {
            md.len().hash(&mut h);
        }
    }
    if let Ok(maps) = std::fs::read_to_string("/proc/self/maps") {
        for line in maps.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 6 && f[1].contains('x') && f[5].starts_with('/') {
                f[0].hash(&mut h);
                f[5].hash(&mut h);
            }
        }
    }
    h.finish()
}

/// The process's machinery (after [`start`]).
pub fn procs() -> Option<&'static Procs> {
    PROCS.get()
}

/// Joins the job (collective): initializes svm with `opts`, allocates the task queues, checks
/// that every node runs the same executable at the same addresses, agrees on a time base, and
/// installs the exit hook. Idempotent.
pub fn start(factory: ProtocolFactory, opts: InitOptions, runner: TaskRunner) -> &'static Procs {
    if let Some(p) = PROCS.get() {
        return p;
    }
    let svm = or_fail(api::init_with_options(factory, opts));
    let (me, nodes) = (api::node_id(), api::nodes());
    let prints = or_fail(api::alloc_collective::<u64>(nodes));
    let base = or_fail(api::alloc_collective::<u64>(1));
    prints.set(me, layout_fingerprint());
    if me == 0 {
        base.set(0, sys::segv::now_ns());
    }
    let mut queues = Vec::with_capacity(nodes);
    for k in 0..nodes {
        queues.push(or_fail(api::alloc_collective_with::<u64>(
            2 + 2 * QUEUE,
            Home::Node(k as u16),
        )));
    }
    or_fail(api::barrier());
    if prints.get(me) != prints.get(0) {
        fail(&format!(
            "node {me} runs a different executable or maps it at other addresses than node 0: run every \
             node with the same binary and address randomization off (svmrun does this)"
        ));
    }
    let p = Procs {
        me,
        nodes,
        svm: Mutex::new(Some(svm)),
        queues,
        clock_base_ns: base.get(0),
        next_target: AtomicU64::new(0),
        ending: AtomicBool::new(false),
        runner,
    };
    let _ = PROCS.set(p);
    sys::on_process_exit(on_process_exit);
    PROCS.get().expect("just set")
}

/// The exit path (`exit(status)` anywhere, or a return from `main`): a failure ends the whole
/// job with that status; a clean exit of the master ends the job in order; a clean exit of a
/// worker process ends the job with 0.
fn on_process_exit(status: i32) {
    let Some(p) = PROCS.get() else { return };
    if p.ending.swap(true, Ordering::AcqRel) {
        return;
    }
    if status != 0 {
        api::abort_job(status, &format!("node {} called exit({status})", p.me));
    }
    if p.me == 0 {
        p.end_job();
    } else {
        api::abort_job(0, &format!("node {} called exit(0)", p.me));
    }
}

impl Procs {
    /// Microseconds since the master started (one time base for the job on one host).
    pub fn clock_us(&self) -> u64 {
        sys::segv::now_ns().saturating_sub(self.clock_base_ns) / 1000
    }

    /// Marks that the runtime is ending the process itself; returns true the first time.
    pub fn begin_ending(&self) -> bool {
        !self.ending.swap(true, Ordering::AcqRel)
    }

    /// Next node for a task: the workers round-robin, then the master's node (1, .., N-1, 0).
    pub fn next_target(&self) -> usize {
        if self.nodes == 1 {
            return 0;
        }
        let i = self.next_target.fetch_add(1, Ordering::Relaxed) as usize % self.nodes;
        (i + 1) % self.nodes
    }

    /// Runs task (`f`, `arg`) on node `target` (in a new thread there; on this node directly).
    ///
    /// Only real functions can be shipped (`f`, sent as its address from [`sys::fn_addr`]):
    /// that is what [`run_c_fn`] on the receiving node relies on.
    pub fn dispatch(&self, target: usize, f: extern "C" fn(), arg: u64) {
        let f = sys::fn_addr(f);
        if target == self.me {
            self.spawn(f, arg);
            return;
        }
        self.enqueue(target, f as u64, arg);
    }

    fn enqueue(&self, node: usize, f: u64, arg: u64) {
        let q = self.queues[node];
        or_fail(api::lock_id(QUEUE_LOCK));
        let (head, tail) = (q.get(0), q.get(1));
        if tail - head >= QUEUE as u64 {
            fail(&format!("more than {QUEUE} tasks queued for node {node}"));
        }
        let slot = 2 + 2 * (tail as usize % QUEUE);
        q.set(slot, f);
        q.set(slot + 1, arg);
        q.set(1, tail + 1);
        or_fail(api::unlock_id(QUEUE_LOCK));
        or_fail(api::sem_post(TASK_SEM + node as u64));
    }

    fn spawn(&self, f: usize, arg: u64) {
        let runner = self.runner;
        let r = std::thread::Builder::new()
            .name("svm-task".into())
            .spawn(move || {
                guard("a task", || runner(f, arg));
                or_fail(api::sem_post(DONE_SEM));
            });
        if let Err(e) = r {
            fail(&format!("cannot start a task thread: {e}"));
        }
    }

    /// Waits until `n` dispatched tasks have returned (an acquire).
    pub fn wait_done(&self, n: usize) {
        for _ in 0..n {
            or_fail(api::sem_wait(DONE_SEM));
        }
    }

    /// The worker side: runs every task shipped to this node until the master ends the job.
    pub fn worker_loop(&self) -> ! {
        let q = self.queues[self.me];
        loop {
            or_fail(api::sem_wait(TASK_SEM + self.me as u64));
            or_fail(api::lock_id(QUEUE_LOCK));
            let head = q.get(0);
            let slot = 2 + 2 * (head as usize % QUEUE);
            let (f, arg) = (q.get(slot), q.get(slot + 1));
            q.set(0, head + 1);
            or_fail(api::unlock_id(QUEUE_LOCK));
            if f == STOP {
                self.ending.store(true, Ordering::Release);
                sys::flush_stdio();
                self.finish();
                sys::exit_process(0);
            }
            self.spawn(f as usize, arg);
        }
    }

    fn finish(&self) {
        let svm = self.svm.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(svm) = svm {
            or_fail(svm.finish());
        }
    }

    /// Master: flushes stdio, stops every worker and ends this node's part in order.
    pub fn end_job(&self) {
        sys::flush_stdio();
        for k in 1..self.nodes {
            self.enqueue(k, STOP, 0);
        }
        self.finish();
    }
}

/// A C program's `main`.
pub type CMain = extern "C" fn(c_int, *mut *mut c_char) -> c_int;

/// After [`start`], from the `main` wrapper: workers enter the worker loop (never returning);
/// the master runs the program's `main`, then ends the job with its status (0: in order,
/// stopping the workers; otherwise every node exits with that status). Returns the status.
pub fn run_main(p: &Procs, argc: c_int, argv: *mut *mut c_char, real_main: CMain) -> c_int {
    if p.me != 0 {
        p.worker_loop();
    }
    let status = real_main(argc, argv);
    guard("ending the job", || {
        if p.begin_ending() {
            if status != 0 {
                sys::flush_stdio();
                api::abort_job(status, &format!("main returned {status}"));
            }
            p.end_job();
        }
    });
    status
}

/// The personalities' job-wide `malloc` (`G_MALLOC`, `cvm_alloc`): `bytes` (at least 1) of
/// this node's arena. Their masters allocate what the workers then initialise and mostly
/// write themselves (ocean's partitions); under a home-based protocol every write goes to its
/// page's home, so such pages are homed where they are first touched
/// ([`api::first_touch_allocations`]). Under sc-sw pages move to their writers anyway, and
/// first touch would only add a home query per page; in a job of one node there is nobody
/// else to home them on.
pub fn alloc_shared(bytes: usize) -> usize {
    let bytes = bytes.max(1);
    let s = if api::first_touch_allocations() {
        or_fail(api::alloc_local_first_touch::<u8>(bytes))
    } else {
        or_fail(api::alloc_local::<u8>(bytes))
    };
    s.addr()
}

/// Reads the task's function address as a C function of no arguments and runs it.
pub fn run_c_fn(f: usize, _arg: u64) {
    // SAFETY: task addresses come only from `Procs::dispatch`, which takes a real
    // `extern "C" fn()` and sends `sys::fn_addr` of it, on a node that runs this executable at
    // the same addresses (every personality checks that at start). (The queue lives in the
    // shared window, so a program that scribbles over the runtime's memory could forge one,
    // as it could break any runtime structure it overwrites.)
    match unsafe { sys::c_fn_at(f) } {
        Some(func) => func(),
        None => api::abort_job(
            70,
            &format!(
                "a task names the function address {f:#x}, which is not code of this program \
                 (do all nodes run the same executable?)"
            ),
        ),
    }
}

/// Convenience: the first queued user message with `tag`.
pub fn recv_tagged(tag: u64) -> Vec<u8> {
    match or_fail(api::recv_message(|m| m.tag == tag, None)) {
        Some(m) => m.data,
        None => fail("no message arrived"),
    }
}
