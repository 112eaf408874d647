//! An in-process link: two ends joined by byte queues, each with an eventfd that is readable
//! while bytes wait for it. Engines of several nodes in one process talk over it (engine tests,
//! the simulator): no sockets, no scheduling between processes, and a test can put any bytes
//! on the wire or cut the connection ([`LoopbackTap`]).

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::transport::{CommError, Link, RecvBuf};
use crate::NodeId;

/// One direction of a loopback connection.
struct Pipe {
    bytes: Mutex<VecDeque<u8>>,
    /// Readable while `bytes` is not empty or the pipe is closed (the reader's poll fd).
    ready: EventFd,
    /// Set by either end's `close` or by the writer's `finish_sending`: the reader sees EOF
    /// once it has read what was queued.
    closed: AtomicBool,
    /// How many sends the writer made (each a write of its own on a socket).
    sends: AtomicU64,
}

impl Pipe {
    fn new() -> Result<Pipe, CommError> {
        let ready =
            EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK).map_err(|e| {
                CommError::Setup {
                    me: 0,
                    what: format!("creating a loopback link's eventfd: {e}"),
                }
            })?;
        Ok(Pipe {
            bytes: Mutex::new(VecDeque::new()),
            ready,
            closed: AtomicBool::new(false),
            sends: AtomicU64::new(0),
        })
    }

    fn queue(&self) -> MutexGuard<'_, VecDeque<u8>> {
        self.bytes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn signal(&self) {
        // A full counter (2^64 - 2 unread signals) is the only failure: it is readable then.
        let _ = self.ready.write(1);
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.signal();
    }

    /// Moves every queued byte into `buf`; false once the pipe is closed.
    fn drain_into(&self, buf: &mut RecvBuf) -> bool {
        // Consume the readiness first: bytes queued after this read signal again.
        let _ = self.ready.read();
        let mut q = self.queue();
        let n = q.len();
        if n > 0 {
            let dst = buf.spare(n);
            for (d, s) in dst.iter_mut().zip(q.drain(..)) {
                *d = s;
            }
            buf.commit(n);
        }
        drop(q);
        let open = !self.closed.load(Ordering::Acquire);
        if !open {
            // Stay readable: a closed connection is reported on every poll, like a socket's EOF.
            self.signal();
        }
        open
    }
}

/// One end of an in-process connection (see [`pair`]).
pub struct LoopbackLink {
    me: NodeId,
    peer: NodeId,
    /// What this end reads.
    inbound: Arc<Pipe>,
    /// What this end writes (the peer's inbound).
    outbound: Arc<Pipe>,
}

/// The two ends of a connection between node `a` and node `b`: the first is `a`'s link to
/// `b`, the second `b`'s link to `a`.
pub fn pair(a: NodeId, b: NodeId) -> Result<(LoopbackLink, LoopbackLink), CommError> {
    let ab = Arc::new(Pipe::new()?);
    let ba = Arc::new(Pipe::new()?);
    Ok((
        LoopbackLink {
            me: a,
            peer: b,
            inbound: ba.clone(),
            outbound: ab.clone(),
        },
        LoopbackLink {
            me: b,
            peer: a,
            inbound: ab,
            outbound: ba,
        },
    ))
}

/// One link per ordered pair of `n` nodes: `links[i][j]` is node i's link to node j (None
/// for i = j), and `taps[i][j]` a tap on that end.
pub type Mesh = (
    Vec<Vec<Option<Box<dyn Link>>>>,
    Vec<Vec<Option<LoopbackTap>>>,
);

/// A full mesh of loopback links between `n` nodes (see [`Mesh`]).
pub fn mesh(n: NodeId) -> Result<Mesh, CommError> {
    let mut links: Vec<Vec<Option<Box<dyn Link>>>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    let mut taps: Vec<Vec<Option<LoopbackTap>>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    for a in 0..n {
        for b in a + 1..n {
            let (ab, ba) = pair(a, b)?;
            taps[a as usize][b as usize] = Some(ab.tap());
            taps[b as usize][a as usize] = Some(ba.tap());
            links[a as usize][b as usize] = Some(Box::new(ab));
            links[b as usize][a as usize] = Some(Box::new(ba));
        }
    }
    Ok((links, taps))
}

impl LoopbackLink {
    /// A handle on this connection that stays with the test once the link is handed to a
    /// node: it puts bytes on the wire towards this end or cuts the connection.
    pub fn tap(&self) -> LoopbackTap {
        LoopbackTap {
            inbound: self.inbound.clone(),
            outbound: self.outbound.clone(),
        }
    }
}

/// Acts on a loopback connection from outside its two ends ([`LoopbackLink::tap`]).
pub struct LoopbackTap {
    /// What the tapped end reads.
    inbound: Arc<Pipe>,
    outbound: Arc<Pipe>,
}

impl LoopbackTap {
    /// Puts `bytes` on the wire towards the tapped end, as if its peer had sent them
    /// (malformed frames, a stranger's bytes).
    pub fn inject(&self, bytes: &[u8]) {
        self.inbound.queue().extend(bytes);
        self.inbound.signal();
    }

    /// Whether bytes wait at the tapped end or the connection is closed (no system call).
    pub fn pending(&self) -> bool {
        !self.inbound.queue().is_empty() || self.inbound.closed.load(Ordering::Acquire)
    }

    /// Reads what arrived at the tapped end into `buf`, standing in for that end's reader (a
    /// simulator that delivers frames to a driven engine one at a time); false once the
    /// connection is closed.
    pub fn receive(&self, buf: &mut RecvBuf) -> bool {
        self.inbound.drain_into(buf)
    }

    /// How many sends the tapped end has made on this connection: on a socket each is a
    /// write of its own, which the peer can read before the next is made.
    pub fn sends(&self) -> u64 {
        self.outbound.sends.load(Ordering::Acquire)
    }

    /// Cuts the connection, as a dying peer would: both ends see EOF once they have read what
    /// was already queued.
    pub fn cut(&self) {
        self.inbound.close();
        self.outbound.close();
    }
}

impl Link for LoopbackLink {
    fn send(&self, parts: &[&[u8]]) -> Result<(), CommError> {
        if self.outbound.closed.load(Ordering::Acquire) {
            return Err(CommError::Lost {
                me: self.me,
                peer: self.peer,
                why: "the loopback connection is closed".into(),
            });
        }
        let mut q = self.outbound.queue();
        for p in parts {
            q.extend(*p);
        }
        drop(q);
        self.outbound.sends.fetch_add(1, Ordering::AcqRel);
        self.outbound.signal();
        Ok(())
    }

    fn poll_fd(&self) -> RawFd {
        self.inbound.ready.as_raw_fd()
    }

    fn recv_available(&self, buf: &mut RecvBuf) -> Result<bool, CommError> {
        Ok(self.inbound.drain_into(buf))
    }

    fn kind(&self) -> &'static str {
        "loopback"
    }

    fn close(&self) {
        self.inbound.close();
        self.outbound.close();
    }

    fn finish_sending(&self) {
        self.outbound.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_sent_at_one_end_arrive_at_the_other_in_order() {
        let (a, b) = pair(0, 1).expect("pair");
        a.send(&[b"hel", b"lo"]).expect("send");
        a.send(&[b" world"]).expect("send");
        let mut buf = RecvBuf::new();
        assert!(b.recv_available(&mut buf).expect("recv"), "still open");
        assert_eq!(buf.filled(), 11);
        let mut back = RecvBuf::new();
        assert!(a.recv_available(&mut back).expect("recv"));
        assert_eq!(back.filled(), 0, "nothing was sent the other way");
    }

    #[test]
    fn a_cut_connection_reads_as_closed_after_its_queued_bytes_and_refuses_sends() {
        let (a, b) = pair(0, 1).expect("pair");
        a.send(&[b"last words"]).expect("send");
        a.tap().cut();
        let mut buf = RecvBuf::new();
        assert!(!b.recv_available(&mut buf).expect("recv"), "EOF");
        assert_eq!(buf.filled(), 10, "what was queued before the cut arrives");
        assert!(b.send(&[b"x"]).is_err(), "no sends over a cut connection");
    }

    #[test]
    fn a_tap_injects_bytes_towards_its_end() {
        let (a, _b) = pair(0, 1).expect("pair");
        a.tap().inject(b"stranger");
        let mut buf = RecvBuf::new();
        assert!(a.recv_available(&mut buf).expect("recv"));
        assert_eq!(buf.filled(), 8);
    }

    #[test]
    fn readiness_follows_the_queue() {
        let (a, b) = pair(0, 1).expect("pair");
        let readable = |l: &LoopbackLink| {
            use std::os::fd::AsFd;
            let mut fds = [nix::poll::PollFd::new(
                l.inbound.ready.as_fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO).expect("poll") == 1
        };
        assert!(!readable(&b), "nothing queued");
        a.send(&[b"x"]).expect("send");
        assert!(readable(&b), "a byte waits");
        let mut buf = RecvBuf::new();
        b.recv_available(&mut buf).expect("recv");
        assert!(!readable(&b), "read: no longer readable");
    }
}
