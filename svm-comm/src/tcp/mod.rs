//! TCP transport: a full mesh with one connection per pair of nodes.
//!
//! Setup: rank 0 listens at `SVM_COORD` (or on the socket inherited through `SVM_COORD_FD`);
//! every other rank connects to rank 0, listens on an ephemeral port of the address it reached
//! rank 0 from (or of `SVM_LISTEN`) and sends `Hello` with the job key and its address. Rank 0
//! answers every node with the `PeerTable`; then rank i connects to every rank 0 < j < i and
//! accepts from every j > i. Every connection starts with a `Hello` whose job key is compared in
//! constant time; a stranger is refused, logged, and does not disturb the job. The set-up itself
//! is in [`setup`].

mod addr;
mod local;
mod setup;
pub use local::establish_local;
pub use setup::{establish, report_failure, HANDSHAKE_DEADLINE};

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use std::io::IoSlice;

use nix::sys::socket::{recv, sendmsg, setsockopt, shutdown, sockopt, MsgFlags, Shutdown};
use subtle::ConstantTimeEq;

use crate::transport::{CommError, Link, RecvBuf};
use crate::wire::{self, Msg, NodeId, KEY_LEN};

/// A stream connection to one peer: TCP, or a Unix-domain socket to a peer on this host
/// ([`establish_local`]; the same frames, without the TCP stack's work per segment).
///
/// With [`TcpLink::queue_sends`] (the DSM engine's links) sending never blocks: what the
/// socket does not take at once waits in the link's backlog (in order, behind nothing else),
/// and the engine writes it out when the socket becomes writable ([`Link::flush`]). A sender
/// that blocked instead could hold its node's state while every node of a cycle does the same
/// to it, each waiting for a peer that no longer reads (all nodes flushing megabytes of diffs
/// to each other at one barrier). Without it (µDECK, which has nobody to call `flush`) a send
/// waits until the socket has taken the whole frame.
pub struct TcpLink {
    me: NodeId,
    peer: NodeId,
    stream: OwnedFd,
    /// `tcp` or `unix` ([`Link::kind`]).
    kind: &'static str,
    backlog: Mutex<Backlog>,
    /// Bytes in the backlog (read without its lock by [`Link::backlog`]).
    queued: AtomicUsize,
    /// Sends queue instead of waiting ([`TcpLink::queue_sends`]).
    queue_sends: bool,
}

/// Bytes sent but not yet taken by the socket: `buf[start..]`.
#[derive(Default)]
struct Backlog {
    buf: Vec<u8>,
    start: usize,
}

impl Backlog {
    fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Appends the parts, skipping their first `skip` bytes (those the socket already took).
    fn push(&mut self, parts: &[&[u8]], mut skip: usize) {
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        for p in parts {
            let taken = skip.min(p.len());
            self.buf.extend_from_slice(&p[taken..]);
            skip -= taken;
        }
    }

    /// Writes as much as the socket takes without blocking; `Ok(true)` when empty.
    fn write_out(&mut self, stream: &impl AsRawFd) -> std::io::Result<bool> {
        while self.start < self.buf.len() {
            let n = send_now(stream, &[&self.buf[self.start..]])?;
            if n == 0 {
                return Ok(false);
            }
            self.start += n;
        }
        self.buf.clear();
        self.start = 0;
        if self.buf.capacity() > 1 << 20 {
            self.buf.shrink_to(1 << 20);
        }
        Ok(true)
    }
}

impl TcpLink {
    fn new(me: NodeId, peer: NodeId, stream: TcpStream) -> std::io::Result<TcpLink> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(None)?;
        stream.set_write_timeout(None)?;
        Ok(Self::of_socket(me, peer, stream.into(), "tcp"))
    }

    /// A link over a connected Unix-domain stream socket (a peer on this host).
    pub fn from_unix(me: NodeId, peer: NodeId, stream: UnixStream) -> std::io::Result<TcpLink> {
        stream.set_read_timeout(None)?;
        stream.set_write_timeout(None)?;
        Ok(Self::of_socket(me, peer, stream.into(), "unix"))
    }

    fn of_socket(me: NodeId, peer: NodeId, stream: OwnedFd, kind: &'static str) -> TcpLink {
        // Large buffers keep a sender from blocking while the peer is busy sending to us.
        let _ = setsockopt(&stream, sockopt::SndBuf, &(4 << 20));
        let _ = setsockopt(&stream, sockopt::RcvBuf, &(4 << 20));
        TcpLink {
            me,
            peer,
            stream,
            kind,
            backlog: Mutex::new(Backlog::default()),
            queued: AtomicUsize::new(0),
            queue_sends: false,
        }
    }

    /// From now on, sends never wait for the peer: what the socket does not take is queued for
    /// [`Link::flush`], which the owner must call when [`Link::poll_fd`] is writable (the DSM
    /// engine does).
    pub fn queue_sends(&mut self) {
        self.queue_sends = true;
    }

    fn lost(&self, what: &str, e: std::io::Error) -> CommError {
        CommError::Lost {
            me: self.me,
            peer: self.peer,
            why: format!("{what} failed: {e}"),
        }
    }

    fn lock_backlog(&self) -> std::sync::MutexGuard<'_, Backlog> {
        self.backlog.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Writes what the socket takes now of the parts (`MSG_DONTWAIT | MSG_NOSIGNAL`, looping over
/// short writes); returns the bytes written, fewer than the total when the socket is full.
fn send_now(stream: &impl AsRawFd, parts: &[&[u8]]) -> std::io::Result<usize> {
    let mut slices: Vec<IoSlice> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| IoSlice::new(p))
        .collect();
    let mut bufs = &mut slices[..];
    let mut sent = 0;
    let flags = MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT;
    while !bufs.is_empty() {
        match sendmsg::<()>(stream.as_raw_fd(), bufs, &[], flags, None) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                sent += n;
                IoSlice::advance_slices(&mut bufs, n);
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(sent)
}

/// How long [`Link::finish_sending`] keeps writing a backlog the peer is slow to read.
const FINISH_FLUSH_DEADLINE: Duration = Duration::from_secs(5);

/// Sleeps until the socket takes more bytes or `deadline` passes.
fn wait_writable(stream: &impl AsFd, deadline: Instant) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let left = deadline.saturating_duration_since(Instant::now());
    let ms = PollTimeout::try_from(left.as_millis().min(1000) as i32).unwrap_or(PollTimeout::ZERO);
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLOUT)];
    let _ = poll(&mut fds, ms);
}

/// Sends all parts, looping over short writes, with `MSG_NOSIGNAL`: a peer that has gone
/// gives `EPIPE`, never a SIGPIPE (C programs that load svm keep SIGPIPE's default action,
/// which would kill the node; `writev` has no such flag).
fn send_all_parts(stream: &impl AsRawFd, parts: &[&[u8]]) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| IoSlice::new(p))
        .collect();
    let mut bufs = &mut slices[..];
    while !bufs.is_empty() {
        match sendmsg::<()>(stream.as_raw_fd(), bufs, &[], MsgFlags::MSG_NOSIGNAL, None) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

impl Link for TcpLink {
    fn send(&self, parts: &[&[u8]]) -> Result<(), CommError> {
        let mut q = self.lock_backlog();
        if !self.queue_sends {
            return send_all_parts(&self.stream, parts).map_err(|e| self.lost("send", e));
        }
        if q.len() == 0 {
            let total: usize = parts.iter().map(|p| p.len()).sum();
            let n = send_now(&self.stream, parts).map_err(|e| self.lost("send", e))?;
            if n < total {
                q.push(parts, n);
            }
        } else {
            // Behind what is already queued, so frames keep their order.
            q.push(parts, 0);
            q.write_out(&self.stream)
                .map_err(|e| self.lost("send", e))?;
        }
        self.queued.store(q.len(), Ordering::Release);
        Ok(())
    }

    fn flush(&self) -> Result<bool, CommError> {
        let mut q = self.lock_backlog();
        let done = q
            .write_out(&self.stream)
            .map_err(|e| self.lost("send", e))?;
        self.queued.store(q.len(), Ordering::Release);
        Ok(done)
    }

    fn backlog(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    fn poll_fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    fn recv_available(&self, buf: &mut RecvBuf) -> Result<bool, CommError> {
        loop {
            let spare = buf.spare(64 << 10);
            let want = spare.len();
            match recv(self.stream.as_raw_fd(), spare, MsgFlags::MSG_DONTWAIT) {
                Ok(0) => {
                    buf.commit(0);
                    return Ok(false);
                }
                Ok(n) => {
                    buf.commit(n);
                    if n < want {
                        return Ok(true);
                    }
                }
                Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EINTR) => {
                    buf.commit(0);
                    return Ok(true);
                }
                Err(e) => {
                    buf.commit(0);
                    return Err(CommError::Lost {
                        me: self.me,
                        peer: self.peer,
                        why: format!("receive failed: {e}"),
                    });
                }
            }
        }
    }

    fn kind(&self) -> &'static str {
        self.kind
    }

    fn close(&self) {
        let _ = shutdown(self.stream.as_raw_fd(), Shutdown::Both);
    }

    fn finish_sending(&self) {
        // Everything queued goes first: the peer reads until it sees the end of the stream.
        let deadline = Instant::now() + FINISH_FLUSH_DEADLINE;
        let mut q = self.lock_backlog();
        while q.len() > 0 && Instant::now() < deadline {
            match q.write_out(&self.stream) {
                Ok(true) | Err(_) => break,
                Ok(false) => wait_writable(&self.stream, deadline),
            }
        }
        self.queued.store(q.len(), Ordering::Release);
        let _ = shutdown(self.stream.as_raw_fd(), Shutdown::Write);
    }
}

/// The established mesh: one link per other node, and the listener kept open to refuse (and
/// log) strangers for the rest of the job.
pub struct Mesh {
    pub links: Vec<Option<TcpLink>>,
    pub listener: TcpListener,
    /// Every rank's mesh listen address (`host:port`), as the coordinator published them.
    pub addrs: Vec<String>,
}

impl Mesh {
    /// Which ranks run on the same host as `me`, judged from their listen addresses: the same
    /// IP, or both on loopback. Symmetric, so every node derives the same pairs.
    pub fn same_host(&self, me: NodeId) -> Vec<bool> {
        let ip = |a: &String| a.parse::<SocketAddr>().ok().map(|s| s.ip());
        let mine = ip(&self.addrs[me as usize]);
        self.addrs
            .iter()
            .map(|a| match (mine, ip(a)) {
                (Some(m), Some(o)) => m == o || (m.is_loopback() && o.is_loopback()),
                _ => false,
            })
            .collect()
    }
}

/// Reads one whole frame from a blocking stream (handshake only), with the stream's timeout.
fn read_frame(stream: &mut impl Read) -> Result<(Msg, Vec<u8>), String> {
    let mut hdr = [0u8; wire::HEADER_LEN];
    stream
        .read_exact(&mut hdr)
        .map_err(|e| format!("reading the handshake: {}", io_why(&e)))?;
    let h = wire::Header::parse(&hdr).map_err(|e| e.to_string())?;
    if h.frame_len() > wire::HEADER_LEN + (1 << 20) {
        return Err(format!(
            "handshake frame of {} bytes is too large",
            h.frame_len()
        ));
    }
    let mut frame = hdr.to_vec();
    frame.resize(h.frame_len(), 0);
    stream
        .read_exact(&mut frame[wire::HEADER_LEN..])
        .map_err(|e| format!("reading the handshake: {}", io_why(&e)))?;
    let f = wire::decode(&frame).map_err(|e| e.to_string())?;
    Ok((f.msg, f.data.to_vec()))
}

/// An I/O error in words: a read that timed out says so (the kernel reports it as `EAGAIN`,
/// "Resource temporarily unavailable"), a closed connection says that.
pub(crate) fn io_why(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            "no answer in time (timed out)".to_string()
        }
        std::io::ErrorKind::UnexpectedEof => "the connection was closed".to_string(),
        _ => e.to_string(),
    }
}

/// Sends one set-up frame (with `MSG_NOSIGNAL`, like every send: a peer that has gone must not
/// kill this node with SIGPIPE).
fn write_msg(stream: &mut impl AsRawFd, me: NodeId, msg: &Msg) -> std::io::Result<()> {
    let frame = wire::encode(msg, me, 0, &[]).map_err(|e| std::io::Error::other(e.to_string()))?;
    send_all_parts(stream, &[&frame])
}

/// Checks a Hello against the job. Returns the peer's rank and listen address.
pub fn check_hello(
    msg: &Msg,
    key: &[u8; KEY_LEN],
    size: NodeId,
) -> Result<(NodeId, String), String> {
    match msg {
        Msg::Hello {
            rank,
            size: s,
            key: k,
            listen,
        } => {
            if !bool::from(k.ct_eq(key)) {
                return Err("wrong job key".into());
            }
            if *s != size || *rank >= size {
                return Err(format!(
                    "rank {rank} of {s} does not fit this job of {size} nodes"
                ));
            }
            Ok((*rank, listen.clone()))
        }
        other => Err(format!("expected a Hello, got {}", other.stat_name())),
    }
}

fn log_refusal(me: NodeId, from: Option<SocketAddr>, why: &str) {
    let from = from
        .map(|a| a.to_string())
        .unwrap_or_else(|| "unknown".into());
    eprintln!("svm: node {me}: refused a connection from {from}: {why}");
}

/// After setup: refuses and logs every further connection attempt until the process exits.
pub fn refuse_strangers(me: NodeId, listener: TcpListener, key: [u8; KEY_LEN], size: NodeId) {
    let _ = std::thread::Builder::new()
        .name("svm-refuse".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut s) = conn else { continue };
                let addr = s.peer_addr().ok();
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let why = match read_frame(&mut s).and_then(|(m, _)| check_hello(&m, &key, size)) {
                    Ok((rank, _)) => format!(
                        "the job is already running (a second connection claiming rank {rank})"
                    ),
                    Err(why) => why,
                };
                log_refusal(me, addr, &why);
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Header, HEADER_LEN};

    fn pair() -> (TcpLink, TcpLink) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let a = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (b, _) = listener.accept().expect("accept");
        let (mut a, mut b) = (
            TcpLink::new(0, 1, a).expect("link"),
            TcpLink::new(1, 0, b).expect("link"),
        );
        a.queue_sends();
        b.queue_sends();
        (a, b)
    }

    fn frame(i: u32, n: usize) -> Vec<u8> {
        let h = Header {
            kind: 200,
            flags: 0,
            source: 0,
            ctrl_len: 0,
            data_len: n as u32,
            seq: i,
        };
        let mut f = h.emit().to_vec();
        f.extend((0..n).map(|j| (i as usize * 31 + j) as u8));
        f
    }

    /// Both ends send 48 MiB before either reads: sends return at once (what the socket does
    /// not take waits in the backlog), and flushing while reading delivers every frame in
    /// order.
    #[test]
    fn sends_queue_instead_of_blocking_and_flush_in_order() {
        const FRAMES: u32 = 48;
        const SIZE: usize = 1 << 20;
        let (a, b) = pair();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in [&a, &b] {
                for i in 0..FRAMES {
                    let f = frame(i, SIZE);
                    l.send(&[&f[..HEADER_LEN], &f[HEADER_LEN..]]).expect("send");
                }
            }
            tx.send((a, b)).expect("channel");
        });
        let (a, b) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("send blocked on a peer that was not reading");
        assert!(a.backlog() > 0 && b.backlog() > 0, "nothing was queued");
        let mut bufs = [RecvBuf::new(), RecvBuf::new()];
        let mut got = [0u32; 2];
        let deadline = Instant::now() + Duration::from_secs(30);
        while got != [FRAMES; 2] {
            assert!(Instant::now() < deadline, "frames missing: {got:?}");
            for (k, l) in [&a, &b].into_iter().enumerate() {
                l.flush().expect("flush");
                assert!(l.recv_available(&mut bufs[k]).expect("recv"), "closed");
                while let Some(f) = bufs[k].next_frame().expect("frame") {
                    assert_eq!(f, &frame(got[k], SIZE)[..], "frame {} of link {k}", got[k]);
                    got[k] += 1;
                }
            }
        }
        assert_eq!((a.backlog(), b.backlog()), (0, 0));
        assert!(a.flush().expect("flush") && b.flush().expect("flush"));
    }

    /// `finish_sending` writes the backlog out before the end of the stream.
    #[test]
    fn finish_sending_writes_the_backlog_first() {
        let (a, b) = pair();
        let frames: Vec<Vec<u8>> = (0..24).map(|i| frame(i, 1 << 20)).collect();
        for f in &frames {
            a.send(&[f]).expect("send");
        }
        assert!(a.backlog() > 0, "nothing was queued");
        let reader = std::thread::spawn(move || {
            let mut buf = RecvBuf::new();
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                let alive = b.recv_available(&mut buf).expect("recv");
                while let Some(f) = buf.next_frame().expect("frame") {
                    got.push(f.to_vec());
                }
                if !alive {
                    return got;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            panic!("no end of stream after {} frames", got.len());
        });
        a.finish_sending();
        assert_eq!(a.backlog(), 0);
        assert!(
            reader.join().expect("reader") == frames,
            "frames lost or reordered"
        );
    }
}
