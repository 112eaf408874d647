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
mod setup;
pub use setup::{establish, report_failure, HANDSHAKE_DEADLINE};

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Mutex;
use std::time::Duration;

use std::io::IoSlice;

use nix::sys::socket::{recv, sendmsg, setsockopt, shutdown, sockopt, MsgFlags, Shutdown};
use subtle::ConstantTimeEq;

use crate::transport::{CommError, Link, RecvBuf};
use crate::wire::{self, Msg, NodeId, KEY_LEN};

/// A TCP connection to one peer.
pub struct TcpLink {
    me: NodeId,
    peer: NodeId,
    stream: TcpStream,
    send_lock: Mutex<()>,
}

impl TcpLink {
    fn new(me: NodeId, peer: NodeId, stream: TcpStream) -> std::io::Result<TcpLink> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(None)?;
        stream.set_write_timeout(None)?;
        // Large buffers keep a sender from blocking while the peer is busy sending to us.
        let _ = setsockopt(&stream, sockopt::SndBuf, &(4 << 20));
        let _ = setsockopt(&stream, sockopt::RcvBuf, &(4 << 20));
        Ok(TcpLink {
            me,
            peer,
            stream,
            send_lock: Mutex::new(()),
        })
    }
}

/// Sends all parts, looping over short writes, with `MSG_NOSIGNAL`: a peer that has gone
/// gives `EPIPE`, never a SIGPIPE (C programs that load svm keep SIGPIPE's default action,
/// which would kill the node; `writev` has no such flag).
fn send_all_parts(stream: &TcpStream, parts: &[&[u8]]) -> std::io::Result<()> {
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
        let _g = self.send_lock.lock().unwrap_or_else(|p| p.into_inner());
        send_all_parts(&self.stream, parts).map_err(|e| CommError::Lost {
            me: self.me,
            peer: self.peer,
            why: format!("send failed: {e}"),
        })
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
        "tcp"
    }

    fn close(&self) {
        let _ = shutdown(self.stream.as_raw_fd(), Shutdown::Both);
    }

    fn finish_sending(&self) {
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
fn read_frame(stream: &mut TcpStream) -> Result<(Msg, Vec<u8>), String> {
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
fn write_msg(stream: &mut TcpStream, me: NodeId, msg: &Msg) -> std::io::Result<()> {
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
