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

mod memory;
mod sync;
pub use memory::*;
pub use sync::*;

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
        grant_around: cfg.grant_around,
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
    // Write scanning serves `scope` homes (`Node::scan_home_writes`); set up only in a job
    // whose default protocol is scope, since it puts a second userfaultfd, and an epoll of
    // the two, before every fault the engine reads.
    let scan_writes = cfg.write_scan && cfg.protocol == "scope" && boot.size > 1;
    let backend: Box<dyn FaultBackend> = match kind {
        FaultKind::Uffd => Box::new(
            UffdBackend::new(window, cfg.page_size, scan_writes).map_err(|e| {
                sys_err(match e {
                    SysError::Call { call, errno } => SysError::Call { call, errno },
                    other => other,
                })
            })?,
        ),
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
