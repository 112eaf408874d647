//! Starting, watching and stopping the nodes of one job.

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg};
use nix::sys::personality::{self, Persona};
use nix::sys::signal::{kill, Signal};
use nix::sys::socket::{listen, Backlog};
use nix::sys::wait::{waitid, Id, WaitPidFlag};
use nix::unistd::Pid;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use svm_comm::placement;

use crate::cli::{BindArg, Cli};
use crate::output::{spawn_forwarder, Drain, Sink, THREAD_STACK};

/// After the first node fails, the others get SIGTERM and, this much later, SIGKILL.
pub const FAILURE_GRACE: Duration = Duration::from_secs(1);
/// After a forwarded SIGINT/SIGTERM/SIGHUP, nodes still alive this much later get SIGKILL.
pub const SIGNAL_GRACE: Duration = Duration::from_secs(3);
/// Exit status of svmrun when the job cannot be started.
pub const EXIT_LAUNCH: i32 = 2;

/// Errors that stop svmrun before any node runs.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot bind the rendezvous listener on 127.0.0.1: {0}")]
    Bind(io::Error),
    #[error("cannot pass the rendezvous listener to the nodes: {0}")]
    InheritFd(Errno),
    #[error("cannot read the job key from the OS random generator: {0}")]
    Random(getrandom::Error),
    #[error("cannot watch signals: {0}")]
    Signals(io::Error),
    #[error("cannot set up output forwarding: {0}")]
    Threads(io::Error),
}

/// Turns address-space randomization off for svmrun; the nodes inherit it across fork/exec, so
/// every node maps the program and its libraries at the same addresses.
pub fn disable_aslr() -> nix::Result<()> {
    let current = personality::get()?;
    if !current.contains(Persona::ADDR_NO_RANDOMIZE) {
        personality::set(current | Persona::ADDR_NO_RANDOMIZE)?;
    }
    Ok(())
}

/// A fresh job key: 32 bytes from the OS random generator as 64 lowercase hex digits.
pub fn new_job_key() -> Result<String, LaunchError> {
    let mut key = [0u8; 32];
    getrandom::getrandom(&mut key).map_err(LaunchError::Random)?;
    Ok(key.iter().map(|b| format!("{b:02x}")).collect())
}

/// A descriptor without close-on-exec, so the nodes inherit it. Closed on drop.
#[derive(Debug)]
struct InheritedFd(RawFd);

impl Drop for InheritedFd {
    fn drop(&mut self) {
        // Nothing to do about a failing close of our own copy.
        let _ = nix::unistd::close(self.0);
    }
}

/// The rendezvous listener bound by svmrun: the listener itself and the inheritable duplicate.
#[derive(Debug)]
struct Rendezvous {
    _listener: TcpListener,
    fd: InheritedFd,
    addr: String,
}

impl Rendezvous {
    fn bind() -> Result<Self, LaunchError> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(LaunchError::Bind)?;
        // Re-listen with the largest backlog, so up to N-1 nodes can queue before rank 0 accepts.
        listen(&listener, Backlog::MAXCONN).map_err(|e| LaunchError::Bind(e.into()))?;
        let port = listener.local_addr().map_err(LaunchError::Bind)?.port();
        // F_DUPFD (unlike F_DUPFD_CLOEXEC) leaves close-on-exec off; >= 3 keeps it clear of the
        // stdio descriptors the children get.
        let fd =
            fcntl(listener.as_raw_fd(), FcntlArg::F_DUPFD(3)).map_err(LaunchError::InheritFd)?;
        Ok(Rendezvous {
            _listener: listener,
            fd: InheritedFd(fd),
            addr: format!("127.0.0.1:{port}"),
        })
    }
}

/// How one node ended.
#[derive(Debug)]
enum NodeEnd {
    Status(ExitStatus),
    Lost(io::Error),
}

enum Event {
    Exited { rank: u32, end: NodeEnd },
    Signal(i32),
}

#[derive(Debug)]
struct Slot {
    pid: Pid,
    alive: bool,
}

/// The pids of the started nodes. A waiter marks its node dead while holding the lock, in the
/// same critical section that reaps it, and signals are sent under the lock only to nodes not
/// yet reaped: a signal can never reach a recycled pid.
#[derive(Debug, Default, Clone)]
struct Table(Arc<Mutex<Vec<Slot>>>);

impl Table {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn signal_all(&self, sig: Signal) {
        for slot in self.lock().iter().filter(|s| s.alive) {
            // ESRCH cannot happen for an unreaped child; nothing to do about other errors.
            let _ = kill(slot.pid, sig);
        }
    }
}

fn os_error_text(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => Errno::from_raw(code).desc().to_owned(),
        None => e.to_string(),
    }
}

fn signal_name(sig: i32) -> String {
    match Signal::try_from(sig) {
        Ok(s) => s.as_str().to_owned(),
        Err(_) => format!("{sig}"),
    }
}

/// Blocks until the node exits, reaps it and reports it.
fn wait_node(rank: u32, mut child: Child, pid: Pid, table: &Table, events: &Sender<Event>) {
    // Wait without reaping, so the pid stays ours until the table says the node is gone.
    // EINVAL means the node died of a signal nix has no name for: it is still a zombie.
    while let Err(Errno::EINTR) = waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT)
    {
    }
    let end = {
        let mut slots = table.lock();
        let end = match child.wait() {
            Ok(status) => NodeEnd::Status(status),
            Err(e) => NodeEnd::Lost(e),
        };
        slots[rank as usize].alive = false;
        end
    };
    // The main loop outlives every waiter; a send error means it is already gone.
    let _ = events.send(Event::Exited { rank, end });
}

fn earliest(current: Option<Instant>, candidate: Instant) -> Option<Instant> {
    Some(current.map_or(candidate, |c| c.min(candidate)))
}

/// Where DECK-SCI nodes make their segment files and pipes.
const DECK_DIR: &str = "/dev/shm";

/// Runs the job described by `cli`; returns svmrun's exit status.
pub fn run(cli: &Cli) -> Result<i32, LaunchError> {
    if let Err(e) = disable_aslr() {
        eprintln!("svmrun: warning: cannot turn off address-space randomization: {e}");
    }

    let job_key = match std::env::var_os("SVM_JOB_KEY") {
        Some(k) if !k.is_empty() => None,
        _ => Some(new_job_key()?),
    };
    let user_coord =
        cli.coord.is_some() || std::env::var_os("SVM_COORD").is_some_and(|c| !c.is_empty());
    let rendezvous = if user_coord {
        None
    } else {
        Some(Rendezvous::bind()?)
    };
    let flag_env = cli.flag_env();
    let launcher_pid = std::process::id().to_string();
    let size = cli.nodes.to_string();
    let program = cli.program().to_string_lossy().into_owned();

    // The CPUs svmrun may use, shared out among the nodes (`svm_comm::placement`).
    let bind_cpus = match cli.bind {
        BindArg::None => None,
        BindArg::Cpus => match placement::allowed_cpus() {
            Ok(cpus) => Some(cpus),
            Err(e) => {
                eprintln!("svmrun: warning: not binding the nodes to CPUs: {e}");
                None
            }
        },
    };

    let (tx, rx) = mpsc::channel::<Event>();
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).map_err(LaunchError::Signals)?;
    {
        let tx = tx.clone();
        std::thread::Builder::new()
            .name("svmrun-signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    if tx.send(Event::Signal(sig)).is_err() {
                        break;
                    }
                }
            })
            .map_err(LaunchError::Signals)?;
    }

    if cli.verbose {
        let coord = match (&rendezvous, &cli.coord) {
            (Some(r), _) => format!("{} (bound by svmrun)", r.addr),
            (None, Some(c)) => c.clone(),
            (None, None) => std::env::var("SVM_COORD").unwrap_or_default(),
        };
        eprintln!(
            "svmrun: starting {} node(s) of {program}, rendezvous {coord}",
            cli.nodes
        );
    }

    let table = Table::default();
    let drain = Drain::new().map_err(LaunchError::Threads)?;
    let mut forwarders: Vec<JoinHandle<()>> = Vec::new();
    let mut failure: Option<i32> = None;
    let mut kill_at: Option<Instant> = None;
    let mut running = 0usize;

    for rank in 0..cli.nodes {
        let mut cmd = Command::new(cli.program());
        cmd.args(cli.args())
            .env("SVM_RANK", rank.to_string())
            .env("SVM_SIZE", &size)
            .env("SVM_LAUNCHER_PID", &launcher_pid)
            .stdin(if rank == 0 {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(key) = &job_key {
            cmd.env("SVM_JOB_KEY", key);
        }
        match (&rendezvous, &cli.coord) {
            (Some(r), _) => {
                cmd.env("SVM_COORD", &r.addr)
                    .env("SVM_COORD_FD", r.fd.0.to_string());
            }
            (None, coord) => {
                if let Some(c) = coord {
                    cmd.env("SVM_COORD", c);
                }
                cmd.env_remove("SVM_COORD_FD");
            }
        }
        for (k, v) in &flag_env {
            cmd.env(k, v);
        }
        if let Some(cpus) = &bind_cpus {
            let mine = placement::node_cpus(cpus, cli.nodes as usize, rank as usize);
            cmd.env("SVM_CPUS", placement::format_cpu_list(&mine));
        }

        let started = cmd.spawn().and_then(|mut child| {
            let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
            table.lock().push(Slot { pid, alive: true });
            let io = (|| {
                if let Some(out) = child.stdout.take() {
                    let f =
                        spawn_forwarder(rank, out, Sink::Stdout, !cli.no_prefix, drain.clone())?;
                    forwarders.push(f);
                }
                if let Some(err) = child.stderr.take() {
                    let f =
                        spawn_forwarder(rank, err, Sink::Stderr, !cli.no_prefix, drain.clone())?;
                    forwarders.push(f);
                }
                Ok::<(), io::Error>(())
            })();
            let waiter = io.and_then(|()| {
                let table = table.clone();
                let tx = tx.clone();
                std::thread::Builder::new()
                    .name(format!("svmrun-wait-{rank}"))
                    .stack_size(THREAD_STACK)
                    .spawn(move || wait_node(rank, child, pid, &table, &tx))
            });
            if let Err(e) = waiter {
                // No thread reaps this node (`running` does not count it): kill it and stop the
                // job. It stays a zombie, so its pid cannot be recycled while svmrun runs.
                table.signal_all(Signal::SIGKILL);
                return Err(e);
            }
            Ok(())
        });
        match started {
            Ok(()) => running += 1,
            Err(e) => {
                eprintln!("svmrun: cannot start {program}: {}", os_error_text(&e));
                failure = Some(EXIT_LAUNCH);
                table.signal_all(Signal::SIGTERM);
                kill_at = Some(Instant::now() + FAILURE_GRACE);
                break;
            }
        }
    }
    // The nodes hold their own copies of the rendezvous listener now.
    drop(rendezvous);

    let mut signalled = false;
    while running > 0 {
        let event = match kill_at {
            Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match event {
            Ok(Event::Exited { rank, end }) => {
                running -= 1;
                let (code, message) = match end {
                    NodeEnd::Status(st) => match (st.code(), st.signal()) {
                        (Some(0), _) => (0, format!("node {rank} exited with status 0")),
                        (Some(c), _) => (c, format!("node {rank} exited with status {c}")),
                        (None, Some(sig)) => {
                            let core = if st.core_dumped() {
                                " (core dumped)"
                            } else {
                                ""
                            };
                            (
                                128 + sig,
                                format!(
                                    "node {rank} was killed by signal {}{core}",
                                    signal_name(sig)
                                ),
                            )
                        }
                        (None, None) => (EXIT_LAUNCH, format!("node {rank} ended with {st}")),
                    },
                    NodeEnd::Lost(e) => (EXIT_LAUNCH, format!("cannot wait for node {rank}: {e}")),
                };
                if code != 0 && failure.is_none() {
                    crate::output::say(&message);
                    failure = Some(code);
                    table.signal_all(Signal::SIGTERM);
                    kill_at = earliest(kill_at, Instant::now() + FAILURE_GRACE);
                } else if cli.verbose {
                    eprintln!("svmrun: {message}");
                }
            }
            Ok(Event::Signal(sig)) => {
                signalled = true;
                if let Ok(s) = Signal::try_from(sig) {
                    if cli.verbose {
                        eprintln!("svmrun: forwarding {} to the nodes", s.as_str());
                    }
                    table.signal_all(s);
                }
                kill_at = earliest(kill_at, Instant::now() + SIGNAL_GRACE);
            }
            Err(RecvTimeoutError::Timeout) => {
                if cli.verbose {
                    eprintln!("svmrun: killing the remaining node(s)");
                }
                table.signal_all(Signal::SIGKILL);
                kill_at = None;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }

    // Every node has ended: whatever DECK-SCI files a node killed during set-up left behind
    // (named after the job key) go now.
    let key = job_key
        .clone()
        .or_else(|| std::env::var("SVM_JOB_KEY").ok())
        .and_then(|k| svm_comm::bootstrap::parse_key(&k).ok());
    if let Some(key) = key {
        let removed = svm_comm::deck::sci::remove_job_files(std::path::Path::new(DECK_DIR), &key);
        if removed > 0 && cli.verbose {
            eprintln!("svmrun: removed {removed} file(s) the job left in {DECK_DIR}");
        }
    }

    drain.start(failure.is_some() || signalled);
    for f in forwarders {
        // A forwarder that panicked has nothing left to forward.
        let _ = f.join();
    }
    if failure.is_some() {
        crate::output::end_open_lines();
    }
    Ok(failure.unwrap_or(0))
}
