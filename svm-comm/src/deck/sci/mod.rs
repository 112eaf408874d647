//! DECK-SCI on one host: message passing through shared segments, with the three protocols of
//! the DECK-SCI papers (see `docs/deck.md` for the full design).
//!
//! Every node creates one segment (a 0600 file under `/dev/shm` named from a hash of the job key
//! and its rank) and maps every peer's segment `MAP_SHARED`. A segment holds a header and one
//! block per peer `p`; the block in node `r`'s segment holds
//!
//! - the **control area of the pair r→p** (in the *sender's* segment, as in DECK-SCI): the read
//!   positions that receiver `p` publishes for r's ring and eager buffer, the rendezvous grant
//!   counter, the futex word r sleeps on while waiting for `p`, and r's own flags;
//! - the **inbound areas p→r** (written by `p`, read by `r`): the ring of 64-byte slots, the eager
//!   buffer (protocol 2) and the rendezvous chunk area (protocol 3).
//!
//! Ring slot: bytes 0..62 payload, byte 62 the sequence number (position mod 256), byte 63 the id
//! byte, stored last with Release: bits 6..7 a lap tag (1, 2, 3, never 0), bits 0..5 the payload
//! length (0..=62, protocol 1) or 63 for a control packet (protocols 2 and 3).
//!
//! Once every peer has mapped a segment its file is unlinked, so nothing is left in `/dev/shm`
//! after setup, whatever way the job ends.

mod shm;
pub use shm::inherited_listener;
mod host_barrier;
pub use host_barrier::{Arrival, HostBarrier};
mod establish;
mod layout;
pub use establish::{establish, establish_with};
use layout::{fifo_path, Geometry};
pub use layout::{
    job_file_prefix, remove_job_files, segment_path, DeckConfig, Protocol, DSM_MSG_BUF_LIMIT,
};
mod outbox;
mod pair;
mod poll;
pub(crate) use poll::poll_readable;

use std::path::PathBuf;
use std::sync::atomic::{fence, AtomicBool, AtomicU8, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::bootstrap::Bootstrap;
use crate::transport::{CommError, Link, RecvBuf};
use crate::wire::NodeId;
use shm::{futex_wait, futex_wake, pid_alive, Fifo, Segment};

/// Bytes of one ring slot.
pub const SLOT: usize = 64;
/// Largest message of protocol 1.
pub const P1_MAX: usize = 62;
/// Default `DECK_MSG_BUF_LIMIT`: largest message sent eagerly (protocol 2).
pub const DEFAULT_MSG_BUF_LIMIT: usize = 8 << 10;
/// Largest message accepted by the rendezvous protocol (a sanity bound against corrupt packets).
pub const MAX_MSG: u64 = 1 << 32;

const MAGIC: u64 = u64::from_le_bytes(*b"SVMDECK1");
const VERSION: u32 = 1;
const LEN_CTRL: u8 = 63;
const K_EAGER: u8 = 2;
const K_RDV_REQ: u8 = 3;
const K_RDV_DATA: u8 = 4;
const EAGER_MAGIC: u32 = u32::from_le_bytes(*b"DKE2");
const EAGER_HDR: usize = 8;
/// How long one futex sleep lasts before liveness is checked again.
const NAP: Duration = Duration::from_millis(20);

// Header offsets.
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_NODES: usize = 12;
const H_RANK: usize = 16;
const H_PID: usize = 20;
const H_RING: usize = 24;
const H_RDV_CHUNKS: usize = 28;
const H_EAGER: usize = 32;
const H_RDV_CHUNK: usize = 40;
const H_LIMIT: usize = 48;
const H_BELL: usize = 64;
const H_SLEEPERS: usize = 68;
const H_ATTACHED: usize = 128;
const H_READY: usize = 132;
const HDR_LEN: usize = 4096;
// Block offsets: the pair's control area, written by the receiver (first line) and the owner.
const C_RING_READ: usize = 0;
const C_EAGER_READ: usize = 8;
const C_RDV_GRANT: usize = 16;
const C_SPACE_WAKE: usize = 24;
const C_SENDER_SLEEPING: usize = 64;
const C_CLOSED: usize = 68;
const C_POLL_ARMED: usize = 72;
const C_QUIET: usize = 76;
const CTL_LEN: usize = 4096;

/// State shared by the links of one node: its own segment and geometry.
struct Hub {
    me: NodeId,
    mine: Arc<Segment>,
    geo: Geometry,
    spin: Duration,
}

impl Hub {
    fn bell(&self) -> &std::sync::atomic::AtomicU32 {
        self.mine.u32_at(H_BELL)
    }
    fn ring_own_bell(&self) {
        self.bell().fetch_add(1, SeqCst);
        futex_wake(self.bell());
    }
}

struct SendState {
    ring_w: u64,
    eager_w: u64,
    rdv_next: u64,
}

struct Rdv {
    remaining: u64,
    /// First chunk of the message.
    first: u64,
    next: u64,
    /// The message fits in the rendezvous area and is delivered in place (a [`DeckView`]) to
    /// a receiver that asks for views; its chunks stay in use until released.
    in_place: bool,
}

/// Which rendezvous chunks are in use on the receiving side, and so may not be granted again.
struct Grants {
    /// First chunk still needed by the receive in progress (the first chunk of an in-place
    /// message being received, else the next chunk to consume).
    cursor: u64,
    /// First chunks of in-place messages handed out as [`DeckView`]s and not dropped yet.
    views: Vec<u64>,
}

struct RecvState {
    ring_r: u64,
    eager_r: u64,
    rdv: Option<Rdv>,
    /// Next rendezvous chunk expected when no transfer is active.
    rdv_next: u64,
    eof: bool,
}

/// One piece of a message handed to a sink: bytes on our stack, a range of our segment to copy
/// out, or (receivers that asked for views only) a whole in-place rendezvous message, already
/// registered as held: `Held(first chunk, offset, length)`.
enum Piece<'a> {
    Bytes(&'a [u8]),
    Shared(&'a Segment, usize, usize),
    Held(u64, usize, usize),
}

impl Piece<'_> {
    fn len(&self) -> usize {
        match self {
            Piece::Bytes(b) => b.len(),
            Piece::Shared(_, _, n) | Piece::Held(_, _, n) => *n,
        }
    }
    fn copy_to(&self, dst: &mut [u8]) {
        match self {
            Piece::Bytes(b) => dst.copy_from_slice(b),
            Piece::Shared(seg, off, _) => seg.read(*off, dst),
            Piece::Held(..) => unreachable!("in-place pieces only go to view receivers"),
        }
    }
}

/// How a receive wants rendezvous messages that fit in the area.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Copy,
    View,
}

/// The two directions between this node and one peer.
struct Pair {
    hub: Arc<Hub>,
    peer: NodeId,
    peer_pid: u32,
    theirs: Arc<Segment>,
    send: Mutex<SendState>,
    recv: Mutex<RecvState>,
    grants: Mutex<Grants>,
    /// Read end of the pipe the peer signals us through (our `poll_fd`).
    rx: Fifo,
    /// Write end of the peer's pipe for us.
    tx: Fifo,
    local_closed: AtomicBool,
    /// 0 = choose by size, else the forced [`Protocol`].
    force: AtomicU8,
    /// Sends never wait for the receiver ([`DeckConfig::queued_sends`]).
    queued: bool,
    /// Frames waiting for the sender thread (queued sends only).
    queue: outbox::Queue,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Copies bytes `[a, b)` of the concatenation of `parts` into `seg` at `off`.
fn write_parts_range(seg: &Segment, mut off: usize, parts: &[&[u8]], a: usize, b: usize) {
    let mut base = 0;
    for p in parts {
        let (ps, pe) = (base, base + p.len());
        base = pe;
        let (s, e) = (ps.max(a), pe.min(b));
        if s < e {
            seg.write(off, &p[s - ps..e - ps]);
            off += e - s;
        }
        if pe >= b {
            break;
        }
    }
}

/// A DECK-SCI connection to one peer on this host. Implements [`Link`] exactly like `TcpLink`
/// (each `send` is one message: the concatenation of its parts), and offers a message-oriented
/// blocking receive ([`DeckLink::recv_msg`]) that waits in the calling thread.
pub struct DeckLink(Arc<Pair>);

/// The shared-memory barrier slots of a job whose nodes are all on this host (`links` from
/// [`establish`], every peer present): in node 0's segment, which every node maps.
pub fn host_barrier(me: NodeId, links: &[Option<DeckLink>]) -> Option<HostBarrier> {
    if links
        .iter()
        .enumerate()
        .any(|(i, l)| i != me as usize && l.is_none())
    {
        return None;
    }
    let seg = if me == 0 {
        links.iter().flatten().next()?.0.hub.mine.clone()
    } else {
        links.first()?.as_ref()?.0.theirs.clone()
    };
    Some(HostBarrier::new(seg))
}

impl DeckLink {
    pub fn peer(&self) -> NodeId {
        self.0.peer
    }

    /// Forces one protocol for every following send (`None`: choose by size). Benchmarks only;
    /// protocol 1 refuses messages above 62 bytes and protocol 2 above the eager buffer.
    pub fn set_protocol(&self, p: Option<Protocol>) {
        self.0.force.store(p.map_or(0, |p| p as u8), Relaxed);
    }

    /// Which protocol a message of `n` bytes takes when not forced.
    pub fn protocol_for(&self, n: usize) -> Protocol {
        if n <= P1_MAX {
            Protocol::Short
        } else if n <= self.0.geo().limit {
            Protocol::Eager
        } else {
            Protocol::Rendezvous
        }
    }

    /// Waits in the calling thread (spin, then futex on the node's doorbell) until inbound data
    /// is there, the peer is gone, or `deadline` passes (`Ok(false)`).
    fn wait_inbound(&self, deadline: Instant) -> bool {
        let p = &*self.0;
        let start = Instant::now();
        let mut i = 0u32;
        while start.elapsed() < p.hub.spin {
            if p.has_inbound() {
                return true;
            }
            std::hint::spin_loop();
            i += 1;
            if i.is_multiple_of(256) {
                std::thread::yield_now();
            }
        }
        let bell = p.hub.bell();
        let sleepers = p.mine().u32_at(H_SLEEPERS);
        loop {
            let v = bell.load(SeqCst);
            sleepers.fetch_add(1, SeqCst);
            fence(SeqCst);
            let ready = p.has_inbound();
            if !ready {
                let now = Instant::now();
                if now < deadline {
                    futex_wait(bell, v, NAP.min(deadline - now));
                }
            }
            sleepers.fetch_sub(1, SeqCst);
            if ready || p.has_inbound() || p.peer_gone() || p.local_closed.load(SeqCst) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
        }
    }

    /// Receives one whole message into `out` (cleared first), waiting at most `timeout`.
    /// `Ok(true)`: a message; `Ok(false)`: the peer closed or died; `Err(Timeout)` on timeout.
    pub fn recv_msg(&self, out: &mut Vec<u8>, timeout: Duration) -> Result<bool, CommError> {
        let p = &*self.0;
        let deadline = Instant::now() + timeout;
        let mut st = lock(&p.recv);
        out.clear();
        loop {
            let closed = p.peer_gone();
            let got = p.step(&mut st, Mode::Copy, &mut |piece, _| {
                let o = out.len();
                out.resize(o + piece.len(), 0);
                piece.copy_to(&mut out[o..]);
            })?;
            match got {
                Some(true) => return Ok(true),
                Some(false) => continue,
                None if closed => {
                    st.eof = true;
                    return Ok(false);
                }
                None => {
                    if !self.wait_inbound(deadline) {
                        return Err(CommError::Timeout {
                            me: p.me(),
                            peer: p.peer,
                            what: format!("no message from node {} within {timeout:?}", p.peer),
                        });
                    }
                }
            }
        }
    }

    /// Receives one whole message, waiting at most `timeout`, **without copying it** when it
    /// came by rendezvous (protocol 3) and fits in the rendezvous area: the returned
    /// [`DeckView`] then points into this node's segment, where the sender wrote it, and its
    /// chunks are granted to the sender again only when the view is dropped. Smaller messages
    /// (protocols 1 and 2, a few copied bytes) and messages larger than the area come as an
    /// owned copy. `Ok(None)`: the peer closed or died; `Err(Timeout)` on timeout.
    ///
    /// Views hold part of the area: a message that needs chunks held by live views waits until
    /// they are dropped, so drop a view before waiting for messages that could need its space.
    pub fn recv_view(&self, timeout: Duration) -> Result<Option<DeckView>, CommError> {
        let p = &*self.0;
        let deadline = Instant::now() + timeout;
        let mut st = lock(&p.recv);
        let mut out = Vec::new();
        let mut held = None;
        loop {
            let closed = p.peer_gone();
            let got = p.step(&mut st, Mode::View, &mut |piece, _| match piece {
                Piece::Held(first, off, len) => held = Some((first, off, len)),
                other => {
                    let o = out.len();
                    out.resize(o + other.len(), 0);
                    other.copy_to(&mut out[o..]);
                }
            })?;
            match got {
                Some(true) => {
                    return Ok(Some(DeckView(match held {
                        Some((first, off, len)) => ViewInner::InPlace {
                            pair: self.0.clone(),
                            first,
                            off,
                            len,
                        },
                        None => ViewInner::Owned(out),
                    })))
                }
                Some(false) => continue,
                None if closed => {
                    st.eof = true;
                    return Ok(None);
                }
                None => {
                    if !self.wait_inbound(deadline) {
                        return Err(CommError::Timeout {
                            me: p.me(),
                            peer: p.peer,
                            what: format!("no message from node {} within {timeout:?}", p.peer),
                        });
                    }
                }
            }
        }
    }

    /// Test hook: writes a raw slot (payload bytes 0..62 and the length field of the id byte)
    /// as the next slot of the outbound ring; `seq` overrides the sequence byte.
    #[doc(hidden)]
    pub fn debug_send_raw_slot(
        &self,
        payload: &[u8; 62],
        len6: u8,
        seq: Option<u8>,
    ) -> Result<(), CommError> {
        let p = &*self.0;
        let mut st = lock(&p.send);
        let mut slot = [0u8; SLOT];
        slot[..62].copy_from_slice(payload);
        match seq {
            None => p.put_slot(&mut st, &mut slot, len6 & 0x3F),
            Some(s) => {
                let g = *p.geo();
                let w = st.ring_w;
                let off = g.ring_off(p.me() as usize) + (w % g.ring as u64) as usize * SLOT;
                slot[62] = s;
                p.theirs.write(off, &slot[..63]);
                p.theirs
                    .u8_at(off + 63)
                    .store(g.tag(w) | (len6 & 0x3F), Release);
                st.ring_w = w + 1;
                p.ring_peer(true);
                Ok(())
            }
        }
    }
}

/// A message received by [`DeckLink::recv_view`]: in place in the shared segment (a protocol-3
/// message, zero copy) or an owned copy. Dereferences to the message bytes; dropping an in-place
/// view hands its rendezvous chunks back to the sender.
pub struct DeckView(ViewInner);

enum ViewInner {
    Owned(Vec<u8>),
    InPlace {
        pair: Arc<Pair>,
        first: u64,
        off: usize,
        len: usize,
    },
}

impl DeckView {
    /// The bytes are in the shared segment (not copied).
    pub fn is_in_place(&self) -> bool {
        matches!(self.0, ViewInner::InPlace { .. })
    }

    /// The bytes as an owned vector (a copy for an in-place view, which is released).
    pub fn into_vec(mut self) -> Vec<u8> {
        match &mut self.0 {
            ViewInner::Owned(v) => std::mem::take(v),
            ViewInner::InPlace { .. } => self.to_vec(),
        }
    }
}

impl std::ops::Deref for DeckView {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            ViewInner::Owned(v) => v,
            // SAFETY: the range is the in-place message the receiver registered in
            // `Grants::views` when its last chunk arrived (Acquire of that packet, after the
            // sender wrote every chunk). The grant never covers a chunk at or after the first
            // chunk of a registered view, and the sender writes a chunk only once granted, so
            // nobody writes the range until `Drop` below unregisters it — after this borrow of
            // `self` has ended. `pair` keeps the mapping alive.
            ViewInner::InPlace { pair, off, len, .. } => unsafe { pair.mine().view(*off, *len) },
        }
    }
}

impl AsRef<[u8]> for DeckView {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Drop for DeckView {
    fn drop(&mut self) {
        if let ViewInner::InPlace { pair, first, .. } = &self.0 {
            pair.release_view(*first);
        }
    }
}

impl Link for DeckLink {
    fn send(&self, parts: &[&[u8]]) -> Result<(), CommError> {
        if self.0.queued {
            self.0.send_queued(parts)
        } else {
            self.0.send_parts(parts)
        }
    }

    fn finish_sending(&self) {
        self.0.drain(Instant::now() + outbox::DRAIN_DEADLINE);
    }

    /// The read end of the pipe the peer signals us through. The peer writes one byte per
    /// request of ours (`poll_armed`, set by `recv_available` after draining): the poller wakes
    /// straight from the sender's write, without a helper thread. The pipe also reports EOF
    /// (`POLLHUP`) when the peer's process dies.
    fn poll_fd(&self) -> std::os::fd::RawFd {
        let p = &*self.0;
        p.mine().u32_at(p.out_ctl() + C_POLL_ARMED).store(1, SeqCst);
        fence(SeqCst);
        if p.has_inbound() {
            let _ = p.rx.signal_self();
        }
        p.rx.fd()
    }

    fn recv_available(&self, buf: &mut RecvBuf) -> Result<bool, CommError> {
        let p = &*self.0;
        let armed = p.mine().u32_at(p.out_ctl() + C_POLL_ARMED);
        armed.store(0, SeqCst);
        let fifo_eof = p.rx.drain();
        let mut st = lock(&p.recv);
        if st.eof {
            return Ok(false);
        }
        let closed = fifo_eof || p.peer_gone();
        let mut got_any = false;
        loop {
            let mut steps = 0;
            while steps < 4096 {
                let r = p.step(&mut st, Mode::Copy, &mut |piece, _| {
                    let n = piece.len();
                    let spare = buf.spare(n);
                    piece.copy_to(&mut spare[..n]);
                    buf.commit(n);
                })?;
                if r.is_none() {
                    break;
                }
                got_any = true;
                steps += 1;
            }
            if steps == 4096 {
                // More may be waiting: stay readable (or go on if that fails).
                if p.rx.signal_self().is_ok() {
                    return Ok(true);
                }
                continue;
            }
            // Ask the sender for a byte with the next packet, then look again (Dekker with
            // `ring_peer`: either it sees the request or we see its packet).
            armed.store(1, SeqCst);
            fence(SeqCst);
            if !p.has_inbound() || armed.swap(0, SeqCst) == 0 {
                // Empty, or the sender took the request and its byte is on its way.
                break;
            }
        }
        if !got_any && closed {
            st.eof = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn has_inbound(&self) -> bool {
        self.0.has_inbound()
    }

    fn kind(&self) -> &'static str {
        "deck"
    }

    fn close(&self) {
        let p = &*self.0;
        if p.local_closed.load(SeqCst) {
            return;
        }
        // Frames still queued go first (a node's last Goodbye may be among them).
        p.drain(Instant::now() + outbox::DRAIN_DEADLINE);
        if p.local_closed.swap(true, SeqCst) {
            return;
        }
        p.queue.notify();
        p.mine().u32_at(p.out_ctl() + C_CLOSED).store(1, Release);
        // Wake the peer's receivers (doorbell) and its senders blocked on us (their wake word).
        let b = p.theirs.u32_at(H_BELL);
        b.fetch_add(1, SeqCst);
        futex_wake(b);
        let w = p.theirs.u32_at(p.in_ctl() + C_SPACE_WAKE);
        w.fetch_add(1, SeqCst);
        futex_wake(w);
        p.tx.signal();
        p.hub.ring_own_bell();
    }
}

impl Drop for DeckLink {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests;
