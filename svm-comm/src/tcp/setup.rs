//! Building the TCP mesh: rendezvous at rank 0, address discovery, concurrent handshakes, and
//! one verdict for the whole job (every node joins, or every node learns who did not).
//!
//! 1. Rank i > 0 connects to `SVM_COORD`, binds its mesh listener — by default on the local
//!    address of that connection, the address the cluster reaches it on — and sends
//!    `Hello { listen: its advertised address }`. A node that cannot go on sends
//!    `Hello { listen: "" }` followed by `Abort { reason }` instead.
//! 2. Rank 0 handshakes every incoming connection in a thread of its own with a deadline of
//!    [`HANDSHAKE_DEADLINE`]: a connection without the job key is refused and logged and never
//!    delays the others. Once every rank has said Hello, rank 0 sends the `PeerTable`.
//! 3. Rank i connects to every 0 < j < i and accepts from every j > i (handshaking concurrently
//!    as well), then says `Hello` again on its coordinator connection: "my links are up".
//! 4. Rank 0 waits for that second Hello from every node, then sends the `PeerTable` again:
//!    "start". Until then the coordinator connections carry only set-up frames, so an `Abort`
//!    may arrive on them at any moment: a node that fails reports to rank 0, and rank 0 forwards
//!    the reason to every node, which fails with it.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::addr::{advertised, canonical, coordinator_listener, node_listener, with_port};
use super::{check_hello, io_why, log_refusal, read_frame, write_msg, Mesh, TcpLink};
use crate::bootstrap::{split_host_port, Bootstrap};
use crate::transport::CommError;
use crate::wire::{Msg, NodeId, KEY_LEN};

/// How long a new connection may take to present its `Hello`.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(2);
/// Handshakes in progress at once; connections beyond are closed at once (a node of the job
/// whose connection is closed before it is answered tries again).
const MAX_HANDSHAKES: usize = 256;
/// How long a failing rank 0 keeps answering late nodes with the reason.
const LINGER: Duration = Duration::from_secs(2);
/// How long a node tries to reach a peer whose listener is known to be up.
const PEER_CONNECT: Duration = Duration::from_secs(5);
/// Attempts at the rendezvous when rank 0 closes the connection without an answer.
const JOIN_ATTEMPTS: u32 = 4;

fn setup(me: NodeId, what: impl Into<String>) -> CommError {
    CommError::Setup {
        me,
        what: what.into(),
    }
}

fn list(ranks: &[NodeId]) -> String {
    let v: Vec<String> = ranks.iter().map(|r| r.to_string()).collect();
    v.join(", ")
}

/// What a handshake thread found on a new connection.
enum Joined {
    Peer {
        rank: NodeId,
        listen: String,
        stream: TcpStream,
    },
    Failed {
        rank: NodeId,
        reason: String,
    },
}

fn handshake(mut stream: TcpStream, key: &[u8; KEY_LEN], size: NodeId) -> Result<Joined, String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(HANDSHAKE_DEADLINE))
        .map_err(|e| e.to_string())?;
    let (msg, _) = read_frame(&mut stream)?;
    let (rank, listen) = check_hello(&msg, key, size)?;
    if !listen.is_empty() {
        return Ok(Joined::Peer {
            rank,
            listen,
            stream,
        });
    }
    match read_frame(&mut stream)? {
        (Msg::Abort { reason, .. }, _) => Ok(Joined::Failed { rank, reason }),
        (m, _) => Err(format!(
            "node {rank} announced a failure but then sent {}",
            m.stat_name()
        )),
    }
}

/// Handshakes running concurrently, one thread each, reporting through a channel.
struct Handshakes {
    me: NodeId,
    key: [u8; KEY_LEN],
    size: NodeId,
    tx: mpsc::Sender<Joined>,
    rx: mpsc::Receiver<Joined>,
    running: Arc<AtomicUsize>,
}

impl Handshakes {
    fn new(boot: &Bootstrap) -> Handshakes {
        let (tx, rx) = mpsc::channel();
        Handshakes {
            me: boot.rank,
            key: boot.job_key,
            size: boot.size,
            tx,
            rx,
            running: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn start(&self, stream: TcpStream, from: SocketAddr) {
        // Relaxed: the count is a soft limit; nothing else is published through it.
        if self.running.load(Ordering::Relaxed) >= MAX_HANDSHAKES {
            log_refusal(self.me, Some(from), "too many handshakes in progress");
            return;
        }
        self.running.fetch_add(1, Ordering::Relaxed);
        let (tx, running, me, key, size) = (
            self.tx.clone(),
            self.running.clone(),
            self.me,
            self.key,
            self.size,
        );
        let spawned = std::thread::Builder::new()
            .name("svm-handshake".into())
            .spawn(move || {
                let r = handshake(stream, &key, size);
                running.fetch_sub(1, Ordering::Relaxed);
                match r {
                    Ok(j) => {
                        let _ = tx.send(j);
                    }
                    Err(why) => log_refusal(me, Some(from), &why),
                }
            });
        if let Err(e) = spawned {
            self.running.fetch_sub(1, Ordering::Relaxed);
            log_refusal(
                self.me,
                Some(from),
                &format!("cannot start a handshake thread: {e}"),
            );
        }
    }

    /// Accepts connections (handshaking each concurrently) until a handshake completes
    /// (`Some`) or `until` passes (`None`). With `watch`, a frame from rank 0 on that connection
    /// (an `Abort`) or its loss ends the wait with an error.
    fn wait(
        &self,
        listener: &TcpListener,
        until: Instant,
        mut watch: Option<&mut TcpStream>,
    ) -> Result<Option<Joined>, CommError> {
        let me = self.me;
        loop {
            if let Ok(j) = self.rx.try_recv() {
                return Ok(Some(j));
            }
            match listener.accept() {
                Ok((s, from)) => {
                    self.start(s, from);
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(setup(me, format!("accepting connections failed: {e}"))),
            }
            if let Some(w) = watch.as_deref_mut() {
                check_coordinator(me, w)?;
            }
            if Instant::now() >= until {
                return Ok(None);
            }
            let mut fds = vec![PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
            if let Some(w) = watch.as_deref() {
                fds.push(PollFd::new(w.as_fd(), PollFlags::POLLIN));
            }
            // Short, so that finished handshakes (reported through the channel) are seen soon.
            let _ = poll(&mut fds, PollTimeout::from(5u8));
        }
    }
}

/// Fails if rank 0 said something (an `Abort`) or went away on the coordinator connection.
fn check_coordinator(me: NodeId, s0: &mut TcpStream) -> Result<(), CommError> {
    let mut fds = [PollFd::new(s0.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(0) | Err(_) => return Ok(()),
        Ok(_) => {}
    }
    let _ = s0.set_read_timeout(Some(HANDSHAKE_DEADLINE));
    match read_frame(s0) {
        Ok((Msg::Abort { reason, .. }, _)) => Err(setup(me, reason)),
        Ok((m, _)) => Err(setup(
            me,
            format!("rank 0 sent {} during set-up", m.stat_name()),
        )),
        Err(e) => Err(setup(
            me,
            format!("rank 0 closed the connection during set-up ({e}); see rank 0's output"),
        )),
    }
}

/// Sends `reason` to every node in `streams`, then answers nodes that connect later with it
/// for up to `linger` (until every node but `failed`, which knows, has been told). Returns the error for this node.
fn fail_all(
    boot: &Bootstrap,
    listener: &TcpListener,
    hs: &Handshakes,
    streams: &mut [Option<TcpStream>],
    failed: Option<NodeId>,
    reason: String,
    linger: Duration,
) -> CommError {
    let me = boot.rank;
    let abort = Msg::Abort {
        reason: reason.clone(),
        code: 1,
    };
    let mut told = vec![false; boot.size as usize];
    told[me as usize] = true;
    if let Some(f) = failed {
        told[f as usize] = true;
    }
    for (rank, s) in streams.iter_mut().enumerate() {
        if let Some(s) = s {
            let _ = write_msg(s, me, &abort);
            told[rank] = true;
        }
    }
    let until = Instant::now() + linger;
    while told.iter().any(|t| !t) {
        match hs.wait(listener, until, None) {
            Ok(Some(Joined::Peer {
                rank, mut stream, ..
            })) => {
                let _ = write_msg(&mut stream, me, &abort);
                told[rank as usize] = true;
            }
            Ok(Some(Joined::Failed { rank, .. })) => told[rank as usize] = true,
            _ => break,
        }
    }
    setup(me, reason)
}

/// Builds the full mesh for this node. `timeout` bounds the whole set-up.
///
/// `inherited` is rank 0's rendezvous listener when the launcher passed one (`SVM_COORD_FD`;
/// turning the raw descriptor into a listener is the caller's job, in svm-core's `sys`).
pub fn establish(
    boot: &Bootstrap,
    inherited: Option<TcpListener>,
    timeout: Duration,
) -> Result<Mesh, CommError> {
    let me = boot.rank;
    let deadline = Instant::now() + timeout;
    let coord = boot.coord.clone().unwrap_or_default();
    let listener = match (me, inherited) {
        (0, Some(l)) => l,
        (0, None) => coordinator_listener(boot, &coord).map_err(|e| setup(me, e))?,
        _ => {
            return join(boot, &coord, deadline, timeout);
        }
    };
    listener
        .set_nonblocking(true)
        .map_err(|e| setup(me, format!("listener: {e}")))?;
    let (links, addrs) = coordinate(boot, &listener, deadline, timeout)?;
    listener
        .set_nonblocking(false)
        .map_err(|e| setup(me, format!("listener: {e}")))?;
    Ok(Mesh {
        links,
        listener,
        addrs,
    })
}

/// Rank 0's side of [`establish`].
fn coordinate(
    boot: &Bootstrap,
    listener: &TcpListener,
    deadline: Instant,
    timeout: Duration,
) -> Result<(Vec<Option<TcpLink>>, Vec<String>), CommError> {
    let me = boot.rank;
    let n = boot.size as usize;
    let hs = Handshakes::new(boot);
    let mut streams: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    let mut addrs = vec![String::new(); n];
    let missing = |streams: &[Option<TcpStream>]| -> Vec<NodeId> {
        (1..n)
            .filter(|&r| streams[r].is_none())
            .map(|r| r as NodeId)
            .collect()
    };
    while streams.iter().skip(1).any(|s| s.is_none()) {
        match hs.wait(listener, deadline, None)? {
            None => {
                let why = format!(
                    "node(s) {} did not join within {:.1} s (are they running? same SVM_COORD and \
                     SVM_JOB_KEY? see their output)",
                    list(&missing(&streams)),
                    timeout.as_secs_f64()
                );
                return Err(fail_all(
                    boot,
                    listener,
                    &hs,
                    &mut streams,
                    None,
                    why,
                    LINGER,
                ));
            }
            Some(Joined::Failed { rank, reason }) => {
                let why = format!("node {rank} could not join the job: {reason}");
                return Err(fail_all(
                    boot,
                    listener,
                    &hs,
                    &mut streams,
                    Some(rank),
                    why,
                    LINGER,
                ));
            }
            Some(Joined::Peer {
                rank,
                listen,
                stream,
            }) => {
                if streams[rank as usize].is_some() {
                    let from = stream.peer_addr().ok();
                    log_refusal(
                        me,
                        from,
                        &format!("a second connection claiming rank {rank}"),
                    );
                } else {
                    addrs[rank as usize] = listen;
                    streams[rank as usize] = Some(stream);
                }
            }
        }
    }
    // Rank 0's own address, as the others reach it (preferring one that is not loopback).
    let bound = listener
        .local_addr()
        .map_err(|e| setup(me, e.to_string()))?;
    let seen = streams
        .iter()
        .flatten()
        .filter_map(|s| s.local_addr().ok())
        .map(canonical)
        .max_by_key(|a| !a.ip().is_loopback());
    addrs[0] = match (&boot.advertise, seen) {
        (Some(a), _) => with_port(a, bound.port()),
        (None, Some(s)) if bound.ip().is_unspecified() => {
            SocketAddr::new(s.ip(), bound.port()).to_string()
        }
        _ => bound.to_string(),
    };
    // Nodes that reached rank 0 over loopback listen on every address of rank 0's host and
    // advertised an unspecified address: they are reached where rank 0 is.
    let host0 = split_host_port(&addrs[0])
        .map(|(h, _)| h)
        .unwrap_or_default();
    for a in addrs.iter_mut().skip(1) {
        if let Ok(sa) = a.parse::<SocketAddr>() {
            if sa.ip().is_unspecified() {
                *a = with_port(&host0, sa.port());
            }
        }
    }
    let table = Msg::PeerTable {
        addrs: addrs.clone(),
    };
    for rank in 1..n {
        let sent = match streams[rank].as_mut() {
            Some(s) => write_msg(s, me, &table),
            None => Ok(()),
        };
        if let Err(e) = sent {
            let why = format!("node {rank} left during set-up (sending it the peer table: {e})");
            streams[rank] = None;
            let failed = Some(rank as NodeId);
            return Err(fail_all(
                boot,
                listener,
                &hs,
                &mut streams,
                failed,
                why,
                Duration::ZERO,
            ));
        }
    }
    // Every node connects to its peers and says Hello again when done.
    let mut ready = vec![false; n];
    ready[0] = true;
    while ready.iter().any(|r| !r) {
        let waiting: Vec<usize> = (1..n).filter(|&r| !ready[r]).collect();
        let now = Instant::now();
        if now >= deadline {
            let who: Vec<NodeId> = waiting.iter().map(|&r| r as NodeId).collect();
            let why = format!(
                "node(s) {} did not finish connecting to their peers within {:.1} s",
                list(&who),
                timeout.as_secs_f64()
            );
            return Err(fail_all(
                boot,
                listener,
                &hs,
                &mut streams,
                None,
                why,
                Duration::ZERO,
            ));
        }
        let wait_ms = (deadline - now).as_millis().clamp(1, 100) as u8;
        let readable: Vec<usize> = {
            let mut fds: Vec<PollFd> = waiting
                .iter()
                .map(|&r| {
                    let s = streams[r].as_ref().expect("joined");
                    PollFd::new(s.as_fd(), PollFlags::POLLIN)
                })
                .collect();
            match poll(&mut fds, PollTimeout::from(wait_ms)) {
                Ok(_) => waiting
                    .iter()
                    .zip(&fds)
                    .filter(|(_, p)| p.revents().is_some_and(|r| !r.is_empty()))
                    .map(|(&r, _)| r)
                    .collect(),
                Err(nix::errno::Errno::EINTR) => Vec::new(),
                Err(e) => return Err(setup(me, format!("poll failed: {}", e.desc()))),
            }
        };
        for rank in readable {
            let s = streams[rank].as_mut().expect("joined");
            let _ = s.set_read_timeout(Some(HANDSHAKE_DEADLINE));
            let why = match read_frame(s) {
                Ok((Msg::Hello { .. }, _)) => {
                    ready[rank] = true;
                    continue;
                }
                Ok((Msg::Abort { reason, .. }, _)) => reason,
                Ok((m, _)) => format!("node {rank} sent {} during set-up", m.stat_name()),
                Err(e) => format!("node {rank} left during set-up ({e})"),
            };
            streams[rank] = None;
            let failed = Some(rank as NodeId);
            return Err(fail_all(
                boot,
                listener,
                &hs,
                &mut streams,
                failed,
                why,
                Duration::ZERO,
            ));
        }
    }
    // Start.
    let mut links: Vec<Option<TcpLink>> = (0..n).map(|_| None).collect();
    for (rank, s) in streams.iter_mut().enumerate() {
        if let Some(mut s) = s.take() {
            write_msg(&mut s, me, &table)
                .map_err(|e| setup(me, format!("starting node {rank}: {e}")))?;
            links[rank] =
                Some(TcpLink::new(me, rank as NodeId, s).map_err(|e| setup(me, e.to_string()))?);
        }
    }
    Ok((links, addrs))
}

/// Sends `Hello { listen: "" }` and `Abort { reason }`: this node cannot take part.
fn report(me: NodeId, boot: &Bootstrap, s0: &mut TcpStream, reason: &str) {
    let hello = Msg::Hello {
        rank: me,
        size: boot.size,
        key: boot.job_key,
        listen: String::new(),
    };
    let _ = write_msg(s0, me, &hello);
    let abort = Msg::Abort {
        reason: reason.to_string(),
        code: 1,
    };
    let _ = write_msg(s0, me, &abort);
}

/// Sends an `Abort` on the coordinator connection after the first Hello (rank 0 is then
/// reading frames from it), and returns the error for this node.
fn abort_joined(me: NodeId, s0: &mut TcpStream, reason: String) -> CommError {
    let abort = Msg::Abort {
        reason: reason.clone(),
        code: 1,
    };
    let _ = write_msg(s0, me, &abort);
    setup(me, reason)
}

/// How long past the set-up deadline a joined node waits for rank 0's verdict.
const RANK0_VERDICT_GRACE: Duration = Duration::from_secs(2);

/// Waits for rank 0's next frame: the peer table (its first or its "start" copy).
fn await_table(
    me: NodeId,
    n: usize,
    s0: &mut TcpStream,
    deadline: Instant,
) -> Result<Vec<String>, (CommError, bool)> {
    // Rank 0 gives up on missing nodes at the same deadline and then tells every joined node
    // who is missing: wait a little longer than the deadline so that verdict, not a bare read
    // time-out, is what this node reports.
    let deadline = deadline + RANK0_VERDICT_GRACE;
    let left = deadline.saturating_duration_since(Instant::now());
    let _ = s0.set_read_timeout(Some(left.max(Duration::from_millis(1))));
    match read_frame(s0) {
        Ok((Msg::PeerTable { addrs }, _)) if addrs.len() == n => Ok(addrs),
        Ok((Msg::Abort { reason, .. }, _)) => Err((setup(me, reason), false)),
        Ok((m, _)) => Err((
            setup(
                me,
                format!(
                    "rank 0 answered with {} instead of the peer table",
                    m.stat_name()
                ),
            ),
            false,
        )),
        Err(e) if Instant::now() >= deadline => Err((
            setup(
                me,
                format!(
                    "rank 0 did not answer before the set-up deadline ({e}); some nodes did not \
                     join — see rank 0's output"
                ),
            ),
            false,
        )),
        Err(e) => Err((
            setup(
                me,
                format!(
                    "rank 0 closed the connection without answering ({e}): wrong SVM_JOB_KEY, or \
                     rank 0 failed — see its output"
                ),
            ),
            true,
        )),
    }
}

/// A node's side of [`establish`] (rank > 0).
fn join(
    boot: &Bootstrap,
    coord: &str,
    deadline: Instant,
    timeout: Duration,
) -> Result<Mesh, CommError> {
    let me = boot.rank;
    let n = boot.size as usize;
    let mut listener: Option<(TcpListener, String)> = None;
    let mut attempt = 0;
    let (mut s0, addrs) = loop {
        attempt += 1;
        let mut s0 = connect_retry(me, coord, deadline, "rank 0")?;
        if listener.is_none() {
            let local = s0
                .local_addr()
                .map(|a| canonical(a).ip())
                .map_err(|e| setup(me, e.to_string()))?;
            match node_listener(boot, local).and_then(|l| {
                let bound = l.local_addr().map_err(|e| e.to_string())?;
                Ok((l, advertised(boot, bound, local)))
            }) {
                Ok(l) => listener = Some(l),
                Err(why) => {
                    report(me, boot, &mut s0, &why);
                    return Err(setup(me, format!("could not join the job: {why}")));
                }
            }
        }
        let advert = listener.as_ref().map(|l| l.1.clone()).unwrap_or_default();
        let hello = Msg::Hello {
            rank: me,
            size: boot.size,
            key: boot.job_key,
            listen: advert,
        };
        write_msg(&mut s0, me, &hello)
            .map_err(|e| setup(me, format!("greeting rank 0 at {coord}: {}", io_why(&e))))?;
        match await_table(me, n, &mut s0, deadline) {
            Ok(addrs) => break (s0, addrs),
            Err((_, true)) if attempt < JOIN_ATTEMPTS => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err((e, _)) => return Err(e),
        }
    };
    let (listener, _) = listener.expect("bound before the first Hello");
    let mut links: Vec<Option<TcpLink>> = (0..n).map(|_| None).collect();
    let link = |peer: NodeId, s: TcpStream| {
        TcpLink::new(me, peer, s).map_err(|e| setup(me, e.to_string()))
    };
    let hello = Msg::Hello {
        rank: me,
        size: boot.size,
        key: boot.job_key,
        listen: addrs[me as usize].clone(),
    };
    for (j, addr) in addrs.iter().enumerate().take(me as usize).skip(1) {
        let until = deadline.min(Instant::now() + PEER_CONNECT);
        let connected = connect_retry(me, addr, until, &format!("node {j}")).and_then(|mut s| {
            write_msg(&mut s, me, &hello)
                .map_err(|e| setup(me, format!("greeting node {j}: {}", io_why(&e))))?;
            Ok(s)
        });
        match connected {
            Ok(s) => links[j] = Some(link(j as NodeId, s)?),
            Err(e) => {
                let why = format!(
                    "node {me} cannot reach node {j} at {addr}: {e} (set SVM_LISTEN or \
                     SVM_ADVERTISE on node {j} to an address the other hosts can reach)"
                );
                return Err(abort_joined(me, &mut s0, why));
            }
        }
    }
    listener
        .set_nonblocking(true)
        .map_err(|e| setup(me, format!("listener: {e}")))?;
    let hs = Handshakes::new(boot);
    let mut expected: Vec<NodeId> = ((me + 1)..boot.size).collect();
    while !expected.is_empty() {
        match hs.wait(&listener, deadline, Some(&mut s0))? {
            None => {
                let why = format!(
                    "node {me}: node(s) {} did not connect within {:.1} s",
                    list(&expected),
                    timeout.as_secs_f64()
                );
                return Err(abort_joined(me, &mut s0, why));
            }
            Some(Joined::Peer { rank, stream, .. }) if expected.contains(&rank) => {
                expected.retain(|r| *r != rank);
                links[rank as usize] = Some(link(rank, stream)?);
            }
            Some(Joined::Peer { rank, stream, .. }) => {
                let from = stream.peer_addr().ok();
                log_refusal(me, from, &format!("unexpected or duplicate rank {rank}"));
            }
            Some(Joined::Failed { rank, .. }) => {
                log_refusal(
                    me,
                    None,
                    &format!("node {rank} reported a failure to the wrong node"),
                );
            }
        }
    }
    listener
        .set_nonblocking(false)
        .map_err(|e| setup(me, format!("listener: {e}")))?;
    // Links up: tell rank 0, and wait for its word to start.
    write_msg(&mut s0, me, &hello).map_err(|e| {
        setup(
            me,
            format!("telling rank 0 this node is ready: {}", io_why(&e)),
        )
    })?;
    await_table(me, n, &mut s0, deadline).map_err(|(e, _)| e)?;
    links[0] = Some(link(0, s0)?);
    Ok(Mesh {
        links,
        listener,
        addrs,
    })
}

fn connect_retry(
    me: NodeId,
    addr: &str,
    deadline: Instant,
    whom: &str,
) -> Result<TcpStream, CommError> {
    let mut last = String::new();
    loop {
        let addrs: Vec<SocketAddr> = match addr.to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => return Err(setup(me, format!("cannot resolve {addr}: {e}"))),
        };
        for a in &addrs {
            match TcpStream::connect_timeout(a, Duration::from_secs(2)) {
                Ok(s) => return Ok(s),
                Err(e) => last = io_why(&e),
            }
        }
        if Instant::now() >= deadline {
            let hint = if whom == "rank 0" {
                " (is rank 0 running? check SVM_COORD)"
            } else {
                ""
            };
            return Err(setup(
                me,
                format!("could not connect to {whom} at {addr}: {last}{hint}"),
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Tells the job that this node cannot take part (a bad setting, no memory, ...), so that the
/// other nodes fail within seconds naming it instead of waiting for it. Best effort, bounded
/// by a few seconds; for rank 0, `inherited` is the rendezvous listener from the launcher.
pub fn report_failure(boot: &Bootstrap, inherited: Option<TcpListener>, reason: &str) {
    let me = boot.rank;
    let Some(coord) = boot.coord.as_deref().filter(|_| boot.size > 1) else {
        return;
    };
    if me != 0 {
        let until = Instant::now() + LINGER;
        if let Ok(mut s0) = connect_retry(me, coord, until, "rank 0") {
            report(me, boot, &mut s0, reason);
        }
        return;
    }
    let reason = format!("node 0 could not join the job: {reason}");
    let listener = match inherited {
        Some(l) => l,
        None => match coordinator_listener(boot, coord) {
            Ok(l) => l,
            Err(_) => return,
        },
    };
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let hs = Handshakes::new(boot);
    let mut none: Vec<Option<TcpStream>> = Vec::new();
    let _ = fail_all(boot, &listener, &hs, &mut none, None, reason, LINGER);
}
