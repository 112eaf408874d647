//! The native Rust API (re-exported by the `svm` facade crate).
//!
//! ```no_run
//! # fn main() -> Result<(), svm_core::api::SvmError> {
//! # let factory: svm_core::api::ProtocolFactory = |_| None;
//! let svm = svm_core::api::init_with(factory)?;
//! let counter = svm_core::api::alloc_collective::<u64>(1)?;
//! let m = svm_core::api::Mutex::new(0);
//! {
//!     let _g = m.lock()?;
//!     counter.set(0, counter.get(0) + 1);
//! }
//! svm_core::api::barrier()?;
//! svm.finish()?;
//! # Ok(()) }
//! ```

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use svm_comm::bootstrap::{Bootstrap, BootstrapError, Launcher};
use svm_comm::tcp;
use svm_comm::transport::{CommError, Link};

use crate::config::{Config, ConfigError, FaultKind};
use crate::fault::segv::SegvBackend;
use crate::fault::uffd::UffdBackend;
use crate::fault::FaultBackend;
use crate::node::{Node, WaitResult};
use crate::protocol::Protocol;
use crate::space::{Home as SpaceHome, Space, SpaceError};
use crate::stats::Stats;
use crate::sys::{self, Backing, SysError, Window};
use crate::NodeId;

pub use crate::space::Home;

/// Builds the protocol named by `SVM_PROTOCOL` (`None` if unknown).
pub type ProtocolFactory = fn(&str) -> Option<Box<dyn Protocol>>;

/// Everything that can go wrong through the API.
#[derive(Debug, thiserror::Error)]
pub enum SvmError {
    #[error("svm: configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("svm: bootstrap: {0}")]
    Bootstrap(#[from] BootstrapError),
    #[error("svm: node {node}: {err}")]
    Sys { node: NodeId, err: SysError },
    #[error("svm: {0}")]
    Comm(#[from] CommError),
    #[error("svm: node {node}: allocation failed: {err}")]
    Space { node: NodeId, err: SpaceError },
    #[error("svm: init() was called twice in this process")]
    AlreadyInitialized,
    #[error("svm: the runtime is not initialized: call svm::init() first")]
    NotInitialized,
    #[error("svm: unknown protocol {0:?} (SVM_PROTOCOL / --protocol)")]
    UnknownProtocol(String),
    #[error("svm: node {node}: unlock of lock {lock} by a thread that does not hold it")]
    NotLockHolder { node: NodeId, lock: u64 },
    #[error("svm: node {node}: {} called with count {got}, but this round's count is {expected}", BarrierName(*barrier))]
    BarrierMismatch {
        node: NodeId,
        barrier: u64,
        expected: u32,
        got: u32,
    },
    #[error("svm: node {node}: {} called with a participant count of 0", BarrierName(*barrier))]
    ZeroCount { node: NodeId, barrier: u64 },
    #[error("svm: node {node}: {} called by a second thread of this node while the first waits in it; it takes exactly one calling thread per node (for several threads of a node use svm::Barrier::new(id, count))", BarrierName(*barrier))]
    BarrierBusy { node: NodeId, barrier: u64 },
    #[error("svm: node {node}: there is no node {to} in a job of {nodes} nodes")]
    BadNode {
        node: NodeId,
        to: usize,
        nodes: NodeId,
    },
    #[error("svm: node {node}: cannot share the program's data {start:#x}..{end:#x}: {why}")]
    Static {
        node: NodeId,
        start: usize,
        end: usize,
        why: String,
    },
    #[error("svm: node {node}: {id} is not a live region (never created, or destroyed)")]
    BadRegion { node: NodeId, id: u32 },
    #[error("svm: node {node}: cannot destroy the region at {addr:#x}: {why}")]
    Destroy {
        node: NodeId,
        addr: usize,
        why: String,
    },
    #[error(
        "svm: node {node}: {what} id {id} is reserved for the runtime (ids must be below 2^63)"
    )]
    ReservedId {
        node: NodeId,
        what: &'static str,
        id: u64,
    },
}

pub type Result<T> = std::result::Result<T, SvmError>;

static RUNTIME: OnceLock<Arc<Node>> = OnceLock::new();

/// Ids at or above this are reserved for the runtime's own locks and barriers.
pub const RESERVED_IDS: u64 = 1 << 63;
use crate::node::GLOBAL_BARRIER;
use crate::sync::BarrierName;

pub(crate) fn node() -> Result<&'static Arc<Node>> {
    RUNTIME.get().ok_or(SvmError::NotInitialized)
}

/// The runtime handle: keep it alive until the end of `main`. Dropping it (or calling
/// [`Svm::finish`]) ends this node's part in the job in order: it waits until every node has
/// finished, serving their requests meanwhile.
pub struct Svm {
    _private: (),
}

impl Svm {
    /// Orderly end of this node's part in the job (also done on drop). Failures of the job
    /// during the shutdown end the process with a diagnostic, so this returns only on success.
    pub fn finish(self) -> Result<()> {
        node()?;
        drop(self);
        Ok(())
    }
}

impl Drop for Svm {
    fn drop(&mut self) {
        if let Some(n) = RUNTIME.get() {
            if std::thread::panicking() {
                n.abort("the application panicked");
            }
            n.finish();
        }
    }
}

fn die_with_launcher() {
    // Nodes started by svmrun die with it, so a killed launcher never leaves nodes behind.
    if let Ok(pid) = std::env::var("SVM_LAUNCHER_PID") {
        if let Ok(pid) = pid.trim().parse::<i32>() {
            let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
            if nix::unistd::getppid().as_raw() != pid {
                eprintln!("svm: the launcher (pid {pid}) is gone; exiting");
                sys::exit_now(crate::node::EXIT_FAILURE);
            }
        }
    }
}

/// Options of [`init_with_options`].
#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    /// Ranges `(start, end)` of this process's own writable memory (the program's data
    /// segment) to share like the window: homed on node 0, whose contents at init every node
    /// sees, fetched page by page on first touch. Rounded outwards to whole pages, which must
    /// all be writable private memory of the program.
    pub statics: Vec<(usize, usize)>,
    /// Protocol of the default region when `SVM_PROTOCOL` is not set (a personality's
    /// default: SPLASH `sc-sw`, SMI `sc-mw`, CVM `scope`).
    pub default_protocol: Option<String>,
}

/// Joins the job described by the environment (`svmrun`, Slurm, Open MPI, or a single node
/// without any of them), with protocols built by `factory`.
pub fn init_with(factory: ProtocolFactory) -> Result<Svm> {
    init_with_options(factory, InitOptions::default())
}

/// Checks that `[start, end)` lies in writable mappings of this process that are not the stack
/// or a special mapping, using /proc/self/maps.
fn writable_private(start: usize, end: usize) -> std::result::Result<(), String> {
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| format!("reading /proc/self/maps: {e}"))?;
    let mut covered = start;
    let mut spans: Vec<(usize, usize, String)> = Vec::new();
    for line in maps.lines() {
        let mut it = line.split_whitespace();
        let (Some(range), Some(perms)) = (it.next(), it.next()) else {
            continue;
        };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else {
            continue;
        };
        spans.push((a, b, perms.to_string()));
    }
    spans.sort();
    for (a, b, perms) in spans {
        if b <= covered || a > covered {
            continue;
        }
        if !perms.starts_with("rw") {
            return Err(format!("{a:#x}-{b:#x} is not writable ({perms})"));
        }
        covered = b;
        if covered >= end {
            return Ok(());
        }
    }
    Err(format!("{covered:#x} is not mapped"))
}

/// [`init_with`] with options (static segments for the C personalities).
pub fn init_with_options(factory: ProtocolFactory, opts: InitOptions) -> Result<Svm> {
    if RUNTIME.get().is_some() {
        return Err(SvmError::AlreadyInitialized);
    }
    let mut joining = false;
    let r = start_node(factory, opts, &mut joining);
    if let (Err(e), false) = (&r, joining) {
        tell_the_job(e);
    }
    r
}

/// A node that fails before it joins the mesh (a bad setting, a window that cannot be
/// reserved) tells rank 0, which fails the job at once naming it, instead of letting the others
/// wait for it until their set-up deadline.
fn tell_the_job(e: &SvmError) {
    let Ok(boot) = Bootstrap::from_env() else {
        return;
    };
    if boot.size < 2 || std::env::var("SVM_TRANSPORT").is_ok_and(|t| t == "deck") {
        return;
    }
    let inherited = match (boot.rank, boot.coord_fd) {
        (0, Some(fd)) => sys::inherited_listener(fd).ok(),
        (_, Some(fd)) => {
            sys::close_inherited(fd);
            None
        }
        _ => None,
    };
    tcp::report_failure(&boot, inherited, &e.to_string());
}

fn start_node(factory: ProtocolFactory, opts: InitOptions, joining: &mut bool) -> Result<Svm> {
    let mut cfg = Config::from_env()?;
    if let (false, Some(p)) = (cfg.protocol_given, &opts.default_protocol) {
        cfg.protocol = p.clone();
    }
    let boot = Bootstrap::from_env()?;
    let me = boot.rank;
    let nodes = boot.size as usize;
    cfg.spin_polls
        .get_or_insert_with(|| crate::node::engine::default_spin_polls(nodes));
    // The engine's nice default compares the job's nodes with the CPUs the job may use: the
    // ones this process inherited from its launcher (`taskset -c 0 svmrun -n 2`: one), before
    // it binds itself to its share of them.
    if cfg.engine_nice.is_none() {
        let job_cpus = svm_comm::placement::allowed_cpus()
            .map_or_else(|_| svm_comm::placement::online_cpus(), |c| c.len());
        cfg.engine_nice = crate::node::engine::default_engine_nice(nodes, job_cpus);
    }
    // Before this node starts any thread (the engine, link senders), so that they all run on
    // the node's CPUs.
    if let Some(cpus) = &cfg.cpus {
        svm_comm::placement::bind_current_thread(cpus).map_err(|why| {
            SvmError::Config(ConfigError::Invalid {
                var: "SVM_CPUS",
                value: svm_comm::placement::format_cpu_list(cpus),
                why: format!(
                    "node {me} cannot run there: {why}; list CPUs this process may use, or \
                     unset SVM_CPUS (svmrun --bind none)"
                ),
            })
        })?;
    }
    if boot.launcher == Launcher::Svmrun {
        die_with_launcher();
    }
    // One instance of every protocol this build has: regions may use any of them; the default
    // region uses SVM_PROTOCOL.
    let popts = crate::protocol::ProtocolOptions {
        read_ahead: cfg.prefetch,
        fault_around: cfg.fault_around,
        hold_ns: cfg.hold_us * 1000,
        flush_after_ns: cfg.flush_after_us * 1000,
        push: cfg.push,
        home_migration: cfg.home_migration,
    };
    let protocols: Vec<Option<Box<dyn Protocol>>> = crate::protocol::PROTOCOL_NAMES
        .iter()
        .map(|name| {
            factory(name).map(|mut p| {
                p.configure(&popts);
                p
            })
        })
        .collect();
    let default_proto = crate::protocol::protocol_id(&cfg.protocol)
        .filter(|id| protocols[*id as usize].is_some())
        .ok_or_else(|| SvmError::UnknownProtocol(cfg.protocol.clone()))?;
    let sys_err = |err| SvmError::Sys { node: me, err };
    let kind = match cfg.fault {
        Some(k) => k,
        None if sys::uffd::available() => FaultKind::Uffd,
        None => FaultKind::Segv,
    };
    let backing = match kind {
        FaultKind::Uffd => Backing::Anonymous,
        FaultKind::Segv if sys::forced_access_works() => Backing::AnonymousForced,
        FaultKind::Segv => Backing::MemfdWithAlias,
    };
    let mut window = Window::map(cfg.space_base, cfg.space_size, backing).map_err(sys_err)?;
    let mut space = Space::new(cfg.space_base, cfg.space_size, cfg.page_size, me, boot.size);
    space.set_default_protocol(default_proto);
    for &(start, end) in &opts.statics {
        let ps = cfg.page_size;
        let (base, top) = (start / ps * ps, end.div_ceil(ps) * ps);
        if top <= base {
            continue;
        }
        writable_private(base, top).map_err(|why| SvmError::Static {
            node: me,
            start,
            end,
            why,
        })?;
        let saved = window.take_over_static(base, top - base).map_err(sys_err)?;
        space.add_static(base, top - base, 0, saved);
    }
    let backend: Box<dyn FaultBackend> = match kind {
        FaultKind::Uffd => Box::new(UffdBackend::new(window, cfg.page_size).map_err(|e| {
            sys_err(match e {
                SysError::Call { call, errno } => SysError::Call { call, errno },
                other => other,
            })
        })?),
        FaultKind::Segv => Box::new(SegvBackend::new(window, cfg.page_size).map_err(sys_err)?),
    };
    let space = Arc::new(space);
    let mut links: Vec<Option<Box<dyn Link>>> = (0..boot.size).map(|_| None).collect();
    // Barriers in shared memory: only when every node is on this host over DECK-SCI.
    let mut host_barrier = None;
    *joining = true;
    if boot.size > 1 {
        let inherited = match (me, boot.coord_fd) {
            (0, Some(fd)) => Some(sys::inherited_listener(fd).map_err(|e| CommError::Setup {
                me,
                what: format!("SVM_COORD_FD={fd} is not a usable listening socket: {e}"),
            })?),
            (_, Some(fd)) => {
                sys::close_inherited(fd);
                None
            }
            _ => None,
        };
        let setup_timeout = cfg.timeout.min(std::time::Duration::from_secs(120));
        let deck_cfg = || {
            svm_comm::deck::sci::DeckConfig::for_dsm_from_env()
                .map_err(|what| CommError::Setup { me, what })
        };
        if cfg.transport == "deck" {
            // Every node on this host, over shared memory only (no TCP rendezvous needed).
            drop(inherited);
            let deck = svm_comm::deck::sci::establish(&boot, &deck_cfg()?, setup_timeout)?;
            if cfg.host_barrier {
                host_barrier = svm_comm::deck::sci::host_barrier(me, &deck);
            }
            for (i, l) in deck.into_iter().enumerate() {
                links[i] = l.map(|l| Box::new(l) as Box<dyn Link>);
            }
        } else {
            let mesh = tcp::establish(&boot, inherited, setup_timeout)?;
            // auto: DECK-SCI to the nodes on this host, TCP to the others.
            let local = if cfg.transport == "auto" {
                mesh.same_host(me)
            } else {
                vec![false; boot.size as usize]
            };
            // tcp: Unix-domain sockets to the nodes on this host (`SVM_UNIX_SOCKETS`).
            let mut unix = if cfg.transport == "tcp" && cfg.unix_sockets {
                tcp::establish_local(&boot, &mesh.same_host(me), setup_timeout)?
            } else {
                (0..boot.size).map(|_| None).collect()
            };
            let mut deck = if local
                .iter()
                .enumerate()
                .any(|(i, l)| *l && i != me as usize)
            {
                svm_comm::deck::sci::establish_with(&boot, &deck_cfg()?, setup_timeout, &local)?
            } else {
                (0..boot.size).map(|_| None).collect()
            };
            let addrs = mesh.addrs.clone();
            tcp::refuse_strangers(me, mesh.listener, boot.job_key, boot.size);
            for (i, l) in mesh.links.into_iter().enumerate() {
                links[i] = match deck[i].take() {
                    Some(d) => Some(Box::new(d) as Box<dyn Link>),
                    // The TCP connection to this peer closes unused.
                    None => unix[i].take().or(l).map(|mut l| {
                        // The engine sends under its state: queue, never wait (docs/architecture.md).
                        l.queue_sends();
                        Box::new(l) as Box<dyn Link>
                    }),
                };
            }
            if cfg.verbose {
                let kinds: Vec<String> = links
                    .iter()
                    .enumerate()
                    .map(|(i, l)| {
                        format!(
                            "{i}:{}@{}",
                            l.as_ref().map(|l| l.kind()).unwrap_or("self"),
                            addrs[i]
                        )
                    })
                    .collect();
                eprintln!("svm: node {me}: transports per peer: {}", kinds.join(" "));
            }
        }
    } else if let Some(fd) = boot.coord_fd {
        sys::close_inherited(fd);
    }
    let verbose = cfg.verbose;
    let parts = crate::node::NodeParts {
        cfg,
        me,
        nodes: boot.size,
        space,
        backend,
        links,
        protocols,
        default_proto,
        failure_mode: crate::node::FailureMode::EndJob,
    };
    let node = Node::start(parts).map_err(sys_err)?;
    if let Some(hb) = host_barrier {
        node.use_host_barrier(hb);
    }
    if verbose {
        eprintln!(
            "svm: node {me} of {}: protocol {}, fault backend {}, window {:#x}+{:#x}, page {} B",
            boot.size,
            node.protocol_name(),
            node.fault_backend_name(),
            node.cfg.space_base,
            node.cfg.space_size,
            node.cfg.page_size
        );
    }
    RUNTIME
        .set(node)
        .map_err(|_| SvmError::AlreadyInitialized)?;
    Ok(Svm { _private: () })
}

/// This node's rank (0-based). 0 before `init`.
pub fn node_id() -> usize {
    RUNTIME.get().map(|n| n.me as usize).unwrap_or(0)
}

/// Number of nodes in the job. 1 before `init`.
pub fn nodes() -> usize {
    RUNTIME.get().map(|n| n.nodes as usize).unwrap_or(1)
}

/// Size of the coherence unit in bytes.
pub fn page_size() -> usize {
    RUNTIME.get().map(|n| n.space.page_size()).unwrap_or(4096)
}

/// Fault detection time of this node's fault backend, in microseconds: from a thread touching
/// a page it may not access to the runtime seeing the fault (SIGSEGV handler entry, or the
/// engine reading the userfaultfd event), without any network. Touches `pages` fresh local
/// pages. Returns (mean, p50, p90).
pub fn measure_fault_detection(pages: usize) -> Result<(f64, f64, f64)> {
    let n = node()?;
    let ps = n.space.page_size();
    let addr = n
        .space
        .alloc_local(pages.max(1) * ps)
        .map_err(|err| SvmError::Space { node: n.me, err })?;
    // The pages stay allocated: freed local memory keeps its contents when reused, and a
    // second probe must again touch pages this node never had.
    let h = n.probe_fault_detection(addr, pages.max(1));
    Ok((
        h.mean_ns() / 1e3,
        h.quantile_ns(0.5) as f64 / 1e3,
        h.quantile_ns(0.9) as f64 / 1e3,
    ))
}

/// Whether allocations made for all nodes by one (the C personalities' `G_MALLOC`,
/// `cvm_alloc`) should be homed by first touch ([`alloc_local_first_touch`]): in a job of
/// more than one node whose default protocol is home-based (`sc-mw`, `scope`: every write ends
/// up at its page's home, so data placement decides what releases cost), unless
/// `SVM_FIRST_TOUCH=0`. False outside a job.
pub fn first_touch_allocations() -> bool {
    RUNTIME
        .get()
        .is_some_and(|n| n.home_based() && n.cfg.first_touch && n.nodes > 1)
}

/// Home node of the shared address `addr` as this node knows it: None outside shared memory,
/// and for a first-touch page this node has not touched yet.
pub fn home_of(addr: usize) -> Option<usize> {
    let n = RUNTIME.get()?;
    if !n.space.contains(addr) {
        return None;
    }
    let page = n.space.page_of(addr);
    (!n.space.home_unresolved(page)).then(|| n.space.home(page) as usize)
}

/// A statistics snapshot of this node.
pub fn stats() -> Stats {
    match RUNTIME.get() {
        Some(n) => n.stats(),
        None => Stats::from_counters(&Default::default(), 0, 1, "none", "none"),
    }
}

/// A slice of `T` in the shared window. Copyable; the same address means the same data on every
/// node. Element access is volatile (another node may change the data between two reads).
pub struct SharedSlice<T: bytemuck::Pod> {
    addr: usize,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: bytemuck::Pod> Clone for SharedSlice<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: bytemuck::Pod> Copy for SharedSlice<T> {}

impl<T: bytemuck::Pod> std::fmt::Debug for SharedSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SharedSlice<{}>({:#x}, len {})",
            std::any::type_name::<T>(),
            self.addr,
            self.len
        )
    }
}

impl<T: bytemuck::Pod> SharedSlice<T> {
    fn bounds(&self) -> (usize, usize) {
        (self.addr, self.len * std::mem::size_of::<T>())
    }

    /// Rebuilds a slice from an address and length another node published (e.g. stored in
    /// shared memory). The range must lie in the shared window.
    pub fn from_raw_parts(addr: usize, len: usize) -> Result<Self> {
        let n = node()?;
        let bytes = len.saturating_mul(std::mem::size_of::<T>());
        if !n.space.contains(addr)
            || bytes == usize::MAX
            || !n.space.contains(addr + bytes.max(1) - 1)
        {
            return Err(SvmError::Space {
                node: n.me,
                err: SpaceError::BadFree { addr },
            });
        }
        Ok(SharedSlice {
            addr,
            len,
            _t: PhantomData,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Address of element 0 in the shared window.
    pub fn addr(&self) -> usize {
        self.addr
    }

    fn at(&self, i: usize) -> usize {
        assert!(
            i < self.len,
            "index {i} out of bounds of a shared slice of length {}",
            self.len
        );
        self.addr + i * std::mem::size_of::<T>()
    }

    pub fn get(&self, i: usize) -> T {
        sys::app_load(self.bounds(), self.at(i))
    }

    pub fn set(&self, i: usize, v: T) {
        sys::app_store(self.bounds(), self.at(i), v)
    }

    /// Copies `dst.len()` elements starting at `start` out of shared memory.
    pub fn read_into(&self, start: usize, dst: &mut [T]) {
        assert!(
            start.checked_add(dst.len()).is_some_and(|e| e <= self.len),
            "range out of bounds"
        );
        for (addr, r) in self.copy_chunks(start, dst.len(), false) {
            sys::app_copy_out(self.bounds(), addr, &mut dst[r]);
        }
    }

    /// Copies `src` into shared memory starting at element `start`.
    pub fn write_from(&self, start: usize, src: &[T]) {
        assert!(
            start.checked_add(src.len()).is_some_and(|e| e <= self.len),
            "range out of bounds"
        );
        for (addr, r) in self.copy_chunks(start, src.len(), true) {
            sys::app_copy_in(self.bounds(), addr, &src[r]);
        }
    }

    /// The chunks of a bulk copy of `len` elements from element `start` on: each chunk's
    /// address and its elements' range within the copy, at most [`COPY_CHUNK_BYTES`] each.
    /// Before a chunk is yielded its pages are asked for at once (`Node::prefetch`, for
    /// writing if `write`), so their transfers overlap; a longer copy goes chunk by chunk, so
    /// a copy of a large range does not put a request for every page of it in flight at once.
    fn copy_chunks(
        &self,
        start: usize,
        len: usize,
        write: bool,
    ) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> + '_ {
        let elem = std::mem::size_of::<T>();
        let per_chunk = (COPY_CHUNK_BYTES / elem.max(1)).max(1);
        (0..len).step_by(per_chunk).map(move |from| {
            let to = (from + per_chunk).min(len);
            let addr = self.addr + (start + from) * elem;
            if let Ok(n) = node() {
                n.prefetch(addr, (to - from) * elem, write);
            }
            (addr, from..to)
        })
    }

    /// The elements in place, as cells: read with `get`, write with `set`, no copy. Faults
    /// on pages this node does not hold are served as for any access. Like `Cell`, the view
    /// stays on this thread; threads or nodes must synchronise (locks, barriers) before reading
    /// what others write, as with every accessor. Reads are not volatile: a loop waiting for
    /// another node to change an element must use [`SharedSlice::get`].
    pub fn cells(&self) -> &[std::cell::Cell<T>] {
        sys::app_cells(self.bounds(), self.addr, self.len)
    }

    /// A sub-slice `[start, start+len)`.
    pub fn slice(&self, start: usize, len: usize) -> SharedSlice<T> {
        assert!(
            start.checked_add(len).is_some_and(|e| e <= self.len),
            "sub-slice out of bounds"
        );
        SharedSlice {
            addr: self.addr + start * std::mem::size_of::<T>(),
            len,
            _t: PhantomData,
        }
    }
}

fn bytes_of<T>(len: usize, n: &Node) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .filter(|b| *b > 0)
        .ok_or(SvmError::Space {
            node: n.me,
            err: SpaceError::Empty,
        })
}

/// Bytes of a bulk copy whose pages are asked for at once ([`SharedSlice::copy_chunks`]).
const COPY_CHUNK_BYTES: usize = 256 * 1024;

/// Collective allocation homed on node 0: every node calls it in the same order and gets the
/// same address. Zero-initialised.
#[track_caller]
pub fn alloc_collective<T: bytemuck::Pod>(len: usize) -> Result<SharedSlice<T>> {
    alloc_collective_with(len, Home::Node(0))
}

/// Collective allocation with a home policy.
#[track_caller]
pub fn alloc_collective_with<T: bytemuck::Pod>(
    len: usize,
    home: SpaceHome,
) -> Result<SharedSlice<T>> {
    let n = node()?;
    let bytes = bytes_of::<T>(len, n)?;
    let addr = n
        .space
        .alloc_collective(bytes, home)
        .map_err(|err| SvmError::Space { node: n.me, err })?;
    if crate::profile::on() {
        crate::profile::allocated(addr, bytes, true, std::panic::Location::caller());
    }
    n.retry_deferred();
    Ok(SharedSlice {
        addr,
        len,
        _t: PhantomData,
    })
}

/// Collective allocation of a region with its own home policy and coherence protocol
/// (`"sc-sw"`, `"sc-mw"`, `"scope"`): different regions may use different protocols in one
/// run.
#[track_caller]
pub fn alloc_collective_in<T: bytemuck::Pod>(
    len: usize,
    home: SpaceHome,
    protocol: &str,
) -> Result<SharedSlice<T>> {
    let n = node()?;
    let proto = crate::protocol::protocol_id(protocol)
        .ok_or_else(|| SvmError::UnknownProtocol(protocol.to_string()))?;
    let bytes = bytes_of::<T>(len, n)?;
    let addr = n
        .space
        .alloc_collective_proto(bytes, home, proto)
        .map_err(|err| SvmError::Space { node: n.me, err })?;
    if crate::profile::on() {
        crate::profile::allocated(addr, bytes, true, std::panic::Location::caller());
    }
    n.retry_deferred();
    Ok(SharedSlice {
        addr,
        len,
        _t: PhantomData,
    })
}

/// Allocation in this node's arena: no messages; homed on this node. Other nodes may use it
/// once they learn its address (e.g. through a collective slice).
#[track_caller]
pub fn alloc_local<T: bytemuck::Pod>(len: usize) -> Result<SharedSlice<T>> {
    local_slice(len, Space::alloc_local, std::panic::Location::caller())
}

/// Allocation in this node's arena whose pages are each homed on the first node that touches
/// them (no messages at allocation; the first touch of a page asks its directory node, one
/// round trip). For data one node allocates and others initialise and then mostly write
/// themselves — a master allocating for its workers — under the home-based protocols
/// (`sc-mw`, `scope`), whose homes receive every diff. Free it with [`free_local`].
#[track_caller]
pub fn alloc_local_first_touch<T: bytemuck::Pod>(len: usize) -> Result<SharedSlice<T>> {
    local_slice(
        len,
        Space::alloc_local_first_touch,
        std::panic::Location::caller(),
    )
}

/// A slice of `len` elements from one of this node's local allocators.
fn local_slice<T: bytemuck::Pod>(
    len: usize,
    alloc: fn(&Space, usize) -> std::result::Result<usize, SpaceError>,
    caller: &'static std::panic::Location<'static>,
) -> Result<SharedSlice<T>> {
    let n = node()?;
    let bytes = bytes_of::<T>(len, n)?;
    let addr = alloc(&n.space, bytes).map_err(|err| SvmError::Space { node: n.me, err })?;
    if crate::profile::on() {
        crate::profile::allocated(addr, bytes, false, caller);
    }
    Ok(SharedSlice {
        addr,
        len,
        _t: PhantomData,
    })
}

/// Frees a slice from [`alloc_local`] or [`alloc_local_first_touch`] (only on the node that
/// allocated it).
pub fn free_local<T: bytemuck::Pod>(s: SharedSlice<T>) -> Result<()> {
    let n = node()?;
    n.space
        .free_local(s.addr)
        .map_err(|err| SvmError::Space { node: n.me, err })
}

fn check_id(n: &Node, what: &'static str, id: u64) -> Result<()> {
    if id >= RESERVED_IDS {
        return Err(SvmError::ReservedId {
            node: n.me,
            what,
            id,
        });
    }
    Ok(())
}

/// A job-wide mutex named by an id (the same id is the same lock on every node). Acquiring it
/// is an acquire and releasing it a release for the coherence protocol.
#[derive(Debug, Clone, Copy)]
pub struct Mutex {
    id: u64,
}

/// Holds a [`Mutex`]; unlocks on drop.
pub struct MutexGuard<'a> {
    m: &'a Mutex,
    done: bool,
}

impl Mutex {
    pub const fn new(id: u64) -> Mutex {
        Mutex { id }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn lock(&self) -> Result<MutexGuard<'_>> {
        let n = node()?;
        check_id(n, "lock", self.id)?;
        n.lock(self.id, false);
        Ok(MutexGuard {
            m: self,
            done: false,
        })
    }

    /// Takes the lock only if no one holds it.
    pub fn try_lock(&self) -> Result<Option<MutexGuard<'_>>> {
        let n = node()?;
        check_id(n, "lock", self.id)?;
        Ok(n.lock(self.id, true).then_some(MutexGuard {
            m: self,
            done: false,
        }))
    }

    fn unlock_id(&self) -> Result<()> {
        let n = node()?;
        if n.unlock(self.id) {
            Ok(())
        } else {
            Err(SvmError::NotLockHolder {
                node: n.me,
                lock: self.id,
            })
        }
    }
}

impl MutexGuard<'_> {
    /// Unlocks and reports errors (drop unlocks too but cannot report).
    pub fn unlock(mut self) -> Result<()> {
        self.done = true;
        self.m.unlock_id()
    }
}

impl Drop for MutexGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.m.unlock_id();
        }
    }
}

/// Low-level lock calls by id, for personalities that lock and unlock in separate calls.
pub fn lock_id(id: u64) -> Result<()> {
    let n = node()?;
    check_id(n, "lock", id)?;
    n.lock(id, false);
    Ok(())
}

/// Try-lock by id: `Ok(true)` if taken.
pub fn try_lock_id(id: u64) -> Result<bool> {
    let n = node()?;
    check_id(n, "lock", id)?;
    Ok(n.lock(id, true))
}

/// Unlock by id; an error if the calling thread does not hold it.
pub fn unlock_id(id: u64) -> Result<()> {
    Mutex::new(id).unlock_id()
}

/// A job-wide barrier for `count` threads (over all nodes), named by an id.
#[derive(Debug, Clone, Copy)]
pub struct Barrier {
    id: u64,
    count: u32,
}

impl Barrier {
    pub const fn new(id: u64, count: u32) -> Barrier {
        Barrier { id, count }
    }

    pub fn wait(&self) -> Result<()> {
        let n = node()?;
        check_id(n, "barrier", self.id)?;
        barrier_raw(n, self.id, self.count)
    }
}

/// Barrier `id` of every node of the job with exactly one calling thread on each node — what a
/// personality knows of its barriers when each of its processes is a node. It needs no
/// manager: a dissemination barrier of ⌈log2 N⌉ rounds (`docs/sync.md`). Every node must use
/// this form for `id` (never [`Barrier`] with the same id); a second thread of a node arriving
/// while the first waits gets [`SvmError::BarrierBusy`].
pub fn barrier_nodes(id: u64) -> Result<()> {
    let n = node()?;
    check_id(n, "barrier", id)?;
    barrier_result(n, id, n.barrier_all_nodes(id))
}

fn barrier_raw(n: &Node, id: u64, count: u32) -> Result<()> {
    barrier_result(n, id, n.barrier(id, count))
}

/// The global barrier: every node, one thread each, no manager (`Node::barrier_all_nodes`).
fn global_barrier(n: &Node) -> Result<()> {
    barrier_result(n, GLOBAL_BARRIER, n.barrier_all_nodes(GLOBAL_BARRIER))
}

fn barrier_result(n: &Node, id: u64, r: WaitResult) -> Result<()> {
    match r {
        WaitResult::BarrierBusy => Err(SvmError::BarrierBusy {
            node: n.me,
            barrier: id,
        }),
        WaitResult::BarrierMismatch { expected, got } => Err(SvmError::BarrierMismatch {
            node: n.me,
            barrier: id,
            expected,
            got,
        }),
        WaitResult::ZeroCount => Err(SvmError::ZeroCount {
            node: n.me,
            barrier: id,
        }),
        _ => Ok(()),
    }
}

/// Posts job-wide counting semaphore `id` (a release: writes before it are visible to the
/// thread whose wait it satisfies).
pub fn sem_post(id: u64) -> Result<()> {
    let n = node()?;
    check_id(n, "semaphore", id)?;
    n.sem_post(id);
    Ok(())
}

/// Waits on job-wide counting semaphore `id` until a post is available (an acquire).
pub fn sem_wait(id: u64) -> Result<()> {
    let n = node()?;
    check_id(n, "semaphore", id)?;
    n.sem_wait(id);
    Ok(())
}

/// A job-wide counting semaphore named by an id, initially 0.
#[derive(Debug, Clone, Copy)]
pub struct Semaphore {
    id: u64,
}

impl Semaphore {
    pub const fn new(id: u64) -> Semaphore {
        Semaphore { id }
    }
    pub fn post(&self) -> Result<()> {
        sem_post(self.id)
    }
    pub fn wait(&self) -> Result<()> {
        sem_wait(self.id)
    }
}

pub use crate::node::UserMessage;

/// Sends a message to node `to` (messages from one sender to one receiver arrive in order).
/// `tag` lets receivers select what they take.
pub fn send_message(to: usize, tag: u64, data: &[u8]) -> Result<()> {
    let n = node()?;
    if to >= n.nodes as usize {
        return Err(SvmError::BadNode {
            node: n.me,
            to,
            nodes: n.nodes,
        });
    }
    check_id(n, "message tag", tag)?;
    n.send_user(to as NodeId, tag, data);
    Ok(())
}

/// Receives the first queued message accepted by `filter`, waiting up to `timeout` (None:
/// until `SVM_TIMEOUT`, which ends the node with a diagnostic). `Ok(None)` on timeout.
pub fn recv_message(
    mut filter: impl FnMut(&UserMessage) -> bool,
    timeout: Option<std::time::Duration>,
) -> Result<Option<UserMessage>> {
    let n = node()?;
    Ok(n.recv_user(|m| m.tag < RESERVED_IDS && filter(m), timeout))
}

/// Tag of the runtime's messages that flush the links before a region is destroyed.
const DESTROY_TAG: u64 = u64::MAX;

/// Collective destroy of the collective allocation starting at `addr` (every node calls it in
/// the same order, with no thread using the region any more): every node forgets the
/// region's pages and drops their memory, and the address range goes back to the collective
/// arena, where later collective allocations reuse it. Costs two barriers and one message
/// between every pair of nodes.
pub fn free_collective(addr: usize) -> Result<()> {
    let n = node()?;
    let pages = n
        .space
        .collective_pages(addr)
        .map_err(|err| SvmError::Space { node: n.me, err })?;
    let err = |why: String| SvmError::Destroy {
        node: n.me,
        addr,
        why,
    };
    global_barrier(n)?;
    // Every node has stopped using the region; messages about it sent before the barrier may
    // still be on their way. One message on every link pushes them through (links are FIFO).
    // A second round pushes through the answers to requests the first round pushed through
    // (a fetch asked for at the barrier's departure: sc-mw and scope).
    let me = n.me as usize;
    for _round in 0..2 {
        for to in (0..n.nodes as usize).filter(|&to| to != me) {
            n.send_user(to as NodeId, DESTROY_TAG, &(addr as u64).to_le_bytes());
        }
        for from in (0..n.nodes as usize).filter(|&f| f != me) {
            let m = n
                .recv_user(|m| m.tag == DESTROY_TAG && m.from as usize == from, None)
                .ok_or_else(|| err("no flush message".into()))?;
            let theirs = m.data.try_into().map(u64::from_le_bytes).unwrap_or(0) as usize;
            if theirs != addr {
                return Err(err(format!(
                    "node {from} destroys the region at {theirs:#x} at the same point: every \
                     node must destroy the same regions in the same order"
                )));
            }
        }
    }
    n.forget_pages(pages).map_err(err)?;
    n.space
        .free_collective(addr)
        .map_err(|err| SvmError::Space { node: n.me, err })?;
    // No node reuses the range before every node has forgotten it.
    global_barrier(n)
}

/// Ends the whole job: every node exits with `code` (this one too). For personalities whose
/// programs end the job from any process (`exit(status)`).
pub fn abort_job(code: i32, why: &str) -> ! {
    match RUNTIME.get() {
        Some(n) => n.end_job(code, why),
        None => sys::exit_now(code),
    }
}

/// Frees an allocation of [`alloc_local`] or [`alloc_local_first_touch`] by address (only on
/// the node that made it).
pub fn free_local_addr(addr: usize) -> Result<()> {
    let n = node()?;
    n.space
        .free_local(addr)
        .map_err(|err| SvmError::Space { node: n.me, err })
}

/// Barrier of all nodes (one calling thread per node).
pub fn barrier() -> Result<()> {
    let n = node()?;
    global_barrier(n)
}
