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
mod outbox;
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

/// Which protocol carries a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// One 64-byte slot (0..=62 bytes).
    Short = 1,
    /// Eager: copied into the per-sender buffer, announced by a control packet.
    Eager = 2,
    /// Rendezvous: the receiver grants chunks of its rendezvous area, the sender writes them.
    Rendezvous = 3,
}

/// Eager limit of the DSM engine's DECK-SCI links when `DECK_MSG_BUF_LIMIT` is not set (see
/// [`DeckConfig::for_dsm_from_env`]): 1 MiB, so the eager area is 4 MiB per sender.
pub const DSM_MSG_BUF_LIMIT: usize = 1 << 20;

/// Geometry and tuning of DECK-SCI. Every node of a job must use the same geometry.
#[derive(Debug, Clone)]
pub struct DeckConfig {
    /// Largest message sent eagerly (`DECK_MSG_BUF_LIMIT`, default 8 KiB).
    pub msg_buf_limit: usize,
    /// Slots per ring (a power of two).
    pub ring_slots: usize,
    /// Bytes of the per-sender eager buffer.
    pub eager_bytes: usize,
    /// Bytes of one rendezvous chunk.
    pub rdv_chunk: usize,
    /// Rendezvous chunks per sender (the receiver grants up to this many ahead).
    pub rdv_chunks: usize,
    /// How long a waiter spins before sleeping on the futex (`DECK_SPIN_US`, default 20 µs).
    pub spin: Duration,
    /// Directory of the segment files.
    pub dir: PathBuf,
    /// `send` never waits for the receiver: what cannot be written at once goes to the link's
    /// sender thread (`outbox.rs`). Set for the DSM engine's links, which are sent on while
    /// the node's state is held.
    pub queued_sends: bool,
}

impl Default for DeckConfig {
    fn default() -> Self {
        Self::with_limit(DEFAULT_MSG_BUF_LIMIT)
    }
}

impl DeckConfig {
    /// Default geometry for a given eager limit.
    pub fn with_limit(limit: usize) -> DeckConfig {
        let eager = (4 * (limit + EAGER_HDR + SLOT))
            .max(256 << 10)
            .next_multiple_of(4096);
        DeckConfig {
            msg_buf_limit: limit,
            ring_slots: 512,
            eager_bytes: eager,
            rdv_chunk: 1 << 20,
            rdv_chunks: 8,
            spin: Duration::from_micros(20),
            dir: PathBuf::from("/dev/shm"),
            queued_sends: false,
        }
    }

    /// Reads `DECK_MSG_BUF_LIMIT` and `DECK_SPIN_US`.
    pub fn from_env() -> Result<DeckConfig, String> {
        Self::from_env_or(DEFAULT_MSG_BUF_LIMIT)
    }

    /// The geometry of the DSM engine's links: as [`DeckConfig::from_env`], but without
    /// `DECK_MSG_BUF_LIMIT` the eager limit is [`DSM_MSG_BUF_LIMIT`]. The engine sends while it
    /// holds its state, and a sender waiting for a rendezvous grant or for buffer space depends
    /// on the receiver's engine; a large eager area gives the DSM's bursts (diff batches at a
    /// barrier, read-ahead) the same room TCP socket buffers do, so nodes sending to each other
    /// at once do not wait on each other.
    pub fn for_dsm_from_env() -> Result<DeckConfig, String> {
        let mut c = Self::from_env_or(DSM_MSG_BUF_LIMIT)?;
        c.queued_sends = true;
        Ok(c)
    }

    fn from_env_or(default_limit: usize) -> Result<DeckConfig, String> {
        let num = |var: &str| -> Result<Option<usize>, String> {
            match std::env::var(var) {
                Err(_) => Ok(None),
                Ok(v) => v
                    .trim()
                    .parse::<usize>()
                    .map(Some)
                    .map_err(|_| format!("{var}={v:?} is not a non-negative integer")),
            }
        };
        let limit = num("DECK_MSG_BUF_LIMIT")?.unwrap_or(default_limit);
        if !(P1_MAX..=(64 << 20)).contains(&limit) {
            return Err(format!(
                "DECK_MSG_BUF_LIMIT={limit} must be between {P1_MAX} and {}",
                64 << 20
            ));
        }
        let mut c = Self::with_limit(limit);
        if let Some(us) = num("DECK_SPIN_US")? {
            c.spin = Duration::from_micros(us as u64);
        }
        Ok(c)
    }

    fn validate(&self) -> Result<(), String> {
        if !self.ring_slots.is_power_of_two() || self.ring_slots < 4 {
            return Err(format!(
                "ring_slots={} must be a power of two >= 4",
                self.ring_slots
            ));
        }
        if !self.eager_bytes.is_multiple_of(SLOT)
            || self.eager_bytes < 2 * (self.msg_buf_limit + EAGER_HDR + SLOT)
        {
            return Err(format!(
                "eager_bytes={} must be a multiple of 64 holding two messages of the limit",
                self.eager_bytes
            ));
        }
        if self.rdv_chunk == 0 || !self.rdv_chunk.is_multiple_of(SLOT) || self.rdv_chunks == 0 {
            return Err(
                "rdv_chunk must be a non-zero multiple of 64 and rdv_chunks non-zero".into(),
            );
        }
        Ok(())
    }
}

/// Offsets inside a segment, derived from the configuration and the job size.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    nodes: usize,
    ring: usize,
    eager: usize,
    chunk: usize,
    chunks: usize,
    limit: usize,
    block_len: usize,
}

impl Geometry {
    fn new(cfg: &DeckConfig, nodes: usize) -> Geometry {
        let data = cfg.ring_slots * SLOT + cfg.eager_bytes + cfg.rdv_chunk * cfg.rdv_chunks;
        Geometry {
            nodes,
            ring: cfg.ring_slots,
            eager: cfg.eager_bytes,
            chunk: cfg.rdv_chunk,
            chunks: cfg.rdv_chunks,
            limit: cfg.msg_buf_limit,
            block_len: (CTL_LEN + data).next_multiple_of(4096),
        }
    }
    fn seg_len(&self) -> usize {
        HDR_LEN + self.nodes * self.block_len
    }
    fn block(&self, p: usize) -> usize {
        HDR_LEN + p * self.block_len
    }
    fn ring_off(&self, p: usize) -> usize {
        self.block(p) + CTL_LEN
    }
    fn eager_off(&self, p: usize) -> usize {
        self.ring_off(p) + self.ring * SLOT
    }
    fn rdv_off(&self, p: usize) -> usize {
        self.eager_off(p) + self.eager
    }
    /// Lap tag of ring position `pos` (bits 6..7 of the id byte).
    fn tag(&self, pos: u64) -> u8 {
        (((pos / self.ring as u64) % 3) as u8 + 1) << 6
    }
    fn write_header(&self, seg: &Segment, rank: usize) {
        seg.u64_at(H_MAGIC).store(MAGIC, Relaxed);
        seg.u32_at(H_VERSION).store(VERSION, Relaxed);
        seg.u32_at(H_NODES).store(self.nodes as u32, Relaxed);
        seg.u32_at(H_RANK).store(rank as u32, Relaxed);
        seg.u32_at(H_PID).store(std::process::id(), Relaxed);
        seg.u32_at(H_RING).store(self.ring as u32, Relaxed);
        seg.u32_at(H_RDV_CHUNKS).store(self.chunks as u32, Relaxed);
        seg.u64_at(H_EAGER).store(self.eager as u64, Relaxed);
        seg.u64_at(H_RDV_CHUNK).store(self.chunk as u64, Relaxed);
        seg.u64_at(H_LIMIT).store(self.limit as u64, Relaxed);
        seg.u32_at(H_READY).store(1, Release);
    }
    /// Checks a peer's header against ours.
    fn check_header(&self, seg: &Segment, rank: usize) -> Result<(), String> {
        if seg.u64_at(H_MAGIC).load(Relaxed) != MAGIC
            || seg.u32_at(H_VERSION).load(Relaxed) != VERSION
        {
            return Err("not a DECK-SCI segment of this version".into());
        }
        let (n, r) = (
            seg.u32_at(H_NODES).load(Relaxed) as usize,
            seg.u32_at(H_RANK).load(Relaxed) as usize,
        );
        if n != self.nodes || r != rank {
            return Err(format!(
                "segment of rank {r} of {n}, expected rank {rank} of {}",
                self.nodes
            ));
        }
        let same = seg.u32_at(H_RING).load(Relaxed) as usize == self.ring
            && seg.u32_at(H_RDV_CHUNKS).load(Relaxed) as usize == self.chunks
            && seg.u64_at(H_EAGER).load(Relaxed) as usize == self.eager
            && seg.u64_at(H_RDV_CHUNK).load(Relaxed) as usize == self.chunk
            && seg.u64_at(H_LIMIT).load(Relaxed) as usize == self.limit;
        if !same {
            return Err(format!(
                "its geometry differs from ours (DECK_MSG_BUF_LIMIT {} there, {} here): every node must use the same DECK_MSG_BUF_LIMIT",
                seg.u64_at(H_LIMIT).load(Relaxed),
                self.limit
            ));
        }
        Ok(())
    }
}

/// Segment file name of `rank` in the job with key `key`.
pub fn segment_path(dir: &std::path::Path, key: &[u8], rank: NodeId) -> PathBuf {
    dir.join(format!("{}{rank}", job_file_prefix(key)))
}

/// The start of the name of every file (segment or pipe) a job with this key makes in the
/// DECK-SCI directory (`/dev/shm`): a launcher removes what a killed job left behind with it.
pub fn job_file_prefix(key: &[u8]) -> String {
    // FNV-1a: the name only has to tell jobs apart; the file itself is 0600.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("svm-deck-{h:016x}-")
}

/// Removes every file in `dir` whose name starts with the prefix of the job `key`; returns how
/// many it removed. For the launcher, once every node of the job has ended.
pub fn remove_job_files(dir: &std::path::Path, key: &[u8]) -> usize {
    let prefix = job_file_prefix(key);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

/// Path of the named pipe through which node `from` signals node `to` (created by `to`).
fn fifo_path(dir: &std::path::Path, key: &[u8], to: NodeId, from: NodeId) -> PathBuf {
    let seg = segment_path(dir, key, to);
    let mut name = seg.into_os_string();
    name.push(format!("-from-{from}"));
    PathBuf::from(name)
}

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

impl Pair {
    fn me(&self) -> NodeId {
        self.hub.me
    }
    fn geo(&self) -> &Geometry {
        &self.hub.geo
    }
    fn mine(&self) -> &Segment {
        &self.hub.mine
    }
    // Outbound (me → peer): data in their block for me; control in my block for them.
    fn out_ctl(&self) -> usize {
        self.geo().block(self.peer as usize)
    }
    // Inbound (peer → me): data in my block for them; control in their block for me.
    fn in_ctl(&self) -> usize {
        self.geo().block(self.me() as usize)
    }

    fn lost(&self, why: String) -> CommError {
        CommError::Lost {
            me: self.me(),
            peer: self.peer,
            why,
        }
    }
    fn corrupt(&self, what: String) -> CommError {
        CommError::Corrupt {
            me: self.me(),
            peer: self.peer,
            what,
        }
    }

    /// The peer closed its side or its process is gone.
    fn peer_gone(&self) -> bool {
        self.theirs.u32_at(self.in_ctl() + C_CLOSED).load(Acquire) != 0 || !pid_alive(self.peer_pid)
    }

    /// Why a wait on the peer must stop, if it must.
    fn check_peer(&self, waiting_for: &str) -> Result<(), CommError> {
        if self.local_closed.load(SeqCst) {
            return Err(self.lost(format!(
                "the link was closed locally while waiting for {waiting_for}"
            )));
        }
        if self.theirs.u32_at(self.in_ctl() + C_CLOSED).load(Acquire) != 0 {
            return Err(self.lost(format!(
                "node {} closed the connection while we waited for {waiting_for}",
                self.peer
            )));
        }
        if !pid_alive(self.peer_pid) {
            return Err(self.lost(format!(
                "node {} (pid {}) died while we waited for {waiting_for}",
                self.peer, self.peer_pid
            )));
        }
        Ok(())
    }

    /// Sender side: waits until `cond` holds, spinning briefly and then sleeping on the pair's
    /// futex word, which the receiver bumps after publishing progress.
    fn wait_until(&self, waiting_for: &str, cond: impl Fn() -> bool) -> Result<(), CommError> {
        let start = Instant::now();
        let mut i = 0u32;
        while start.elapsed() < self.hub.spin {
            if cond() {
                return Ok(());
            }
            std::hint::spin_loop();
            i += 1;
            if i.is_multiple_of(256) {
                std::thread::yield_now();
            }
        }
        let wake = self.mine().u32_at(self.out_ctl() + C_SPACE_WAKE);
        let sleeping = self.mine().u32_at(self.out_ctl() + C_SENDER_SLEEPING);
        loop {
            let v = wake.load(SeqCst);
            sleeping.store(1, SeqCst);
            fence(SeqCst);
            if cond() {
                sleeping.store(0, SeqCst);
                return Ok(());
            }
            futex_wait(wake, v, NAP);
            sleeping.store(0, SeqCst);
            if cond() {
                return Ok(());
            }
            self.check_peer(waiting_for)?;
        }
    }

    /// Receiver side: tells a sleeping sender that we made progress.
    fn wake_sender(&self) {
        fence(SeqCst);
        if self
            .theirs
            .u32_at(self.in_ctl() + C_SENDER_SLEEPING)
            .load(SeqCst)
            != 0
        {
            let w = self.theirs.u32_at(self.in_ctl() + C_SPACE_WAKE);
            w.fetch_add(1, SeqCst);
            futex_wake(w);
        }
    }

    /// Rings the peer's doorbell if any of its threads sleeps on it, and writes a byte into its
    /// pipe for us if its poller asked for one (`poll_armed`, taken back by the swap so that
    /// only one byte is written per request).
    fn ring_peer(&self, bell: bool) {
        fence(SeqCst);
        if bell && self.theirs.u32_at(H_SLEEPERS).load(SeqCst) != 0 {
            let b = self.theirs.u32_at(H_BELL);
            b.fetch_add(1, SeqCst);
            futex_wake(b);
        }
        let armed = self.theirs.u32_at(self.in_ctl() + C_POLL_ARMED);
        if armed.load(SeqCst) != 0 && armed.swap(0, SeqCst) != 0 {
            self.tx.signal();
        }
    }

    /// Receiver side: the rendezvous chunks from `first in use` on may not be granted; grants
    /// everything else of the area (the grant is cumulative and only grows).
    fn publish_grant(&self, g: &Grants) {
        let base = g.views.iter().copied().fold(g.cursor, u64::min);
        let v = base + self.geo().chunks as u64;
        let grant = self.theirs.u64_at(self.in_ctl() + C_RDV_GRANT);
        if v > grant.load(Relaxed) {
            grant.store(v, Release);
        }
    }

    fn set_cursor(&self, cursor: u64) {
        let mut g = lock(&self.grants);
        g.cursor = cursor;
        self.publish_grant(&g);
    }

    /// A [`DeckView`] of the in-place message starting at chunk `first` was dropped.
    fn release_view(&self, first: u64) {
        let mut g = lock(&self.grants);
        if let Some(i) = g.views.iter().position(|&f| f == first) {
            g.views.swap_remove(i);
        }
        self.publish_grant(&g);
        drop(g);
        self.wake_sender();
    }

    /// Writes one slot of the outbound ring (bytes 0..62 of `slot` are the payload, `len6` the
    /// length field), waiting for space first.
    fn put_slot(
        &self,
        st: &mut SendState,
        slot: &mut [u8; SLOT],
        len6: u8,
    ) -> Result<(), CommError> {
        self.put_slot_bell(st, slot, len6, true)
    }

    /// [`put_slot`](Self::put_slot); `wake = false` (a rendezvous chunk that does not end its
    /// message) skips the doorbell when the receiver said it only wants the last chunk.
    fn put_slot_bell(
        &self,
        st: &mut SendState,
        slot: &mut [u8; SLOT],
        len6: u8,
        wake: bool,
    ) -> Result<(), CommError> {
        let g = *self.geo();
        let read = self.mine().u64_at(self.out_ctl() + C_RING_READ);
        let w = st.ring_w;
        self.wait_until("ring space", || w - read.load(Acquire) < g.ring as u64)?;
        let off = g.ring_off(self.me() as usize) + (w % g.ring as u64) as usize * SLOT;
        slot[62] = w as u8;
        self.theirs.write(off, &slot[..63]);
        self.theirs.u8_at(off + 63).store(g.tag(w) | len6, Release);
        st.ring_w = w + 1;
        self.ring_peer(wake || self.theirs.u32_at(self.in_ctl() + C_QUIET).load(Relaxed) == 0);
        Ok(())
    }

    /// The protocol a message of `n` bytes travels by (forced, or chosen by size).
    fn protocol_for(&self, n: usize) -> Protocol {
        match self.force.load(Relaxed) {
            1 => Protocol::Short,
            2 => Protocol::Eager,
            3 => Protocol::Rendezvous,
            _ if n <= P1_MAX => Protocol::Short,
            _ if n <= self.geo().limit => Protocol::Eager,
            _ => Protocol::Rendezvous,
        }
    }

    fn send_parts(&self, parts: &[&[u8]]) -> Result<(), CommError> {
        let n: usize = parts.iter().map(|p| p.len()).sum();
        let g = *self.geo();
        let proto = self.protocol_for(n);
        if self.local_closed.load(SeqCst) {
            return Err(self.lost("send on a closed link".into()));
        }
        if self.theirs.u32_at(self.in_ctl() + C_CLOSED).load(Acquire) != 0 {
            return Err(self.lost(format!("node {} closed the connection", self.peer)));
        }
        let mut st = lock(&self.send);
        let mut slot = [0u8; SLOT];
        match proto {
            Protocol::Short => {
                if n > P1_MAX {
                    return Err(self.lost(format!(
                        "protocol 1 carries at most {P1_MAX} bytes, not {n}"
                    )));
                }
                let mut o = 0;
                for p in parts {
                    slot[o..o + p.len()].copy_from_slice(p);
                    o += p.len();
                }
                self.put_slot(&mut st, &mut slot, n as u8)
            }
            Protocol::Eager => {
                let need = (EAGER_HDR + n).next_multiple_of(SLOT);
                let cap = g.eager as u64;
                if need as u64 > cap {
                    return Err(self.lost(format!(
                        "protocol 2 carries at most {} bytes, not {n}",
                        g.eager - EAGER_HDR
                    )));
                }
                let mut start = st.eager_w;
                if start % cap + need as u64 > cap {
                    start = start.next_multiple_of(cap);
                }
                let end = start + need as u64;
                let read = self.mine().u64_at(self.out_ctl() + C_EAGER_READ);
                self.wait_until("eager buffer space", || end - read.load(Acquire) <= cap)?;
                let off = g.eager_off(self.me() as usize) + (start % cap) as usize;
                let mut hdr = [0u8; EAGER_HDR];
                hdr[..4].copy_from_slice(&(n as u32).to_le_bytes());
                hdr[4..].copy_from_slice(&EAGER_MAGIC.to_le_bytes());
                self.theirs.write(off, &hdr);
                write_parts_range(&self.theirs, off + EAGER_HDR, parts, 0, n);
                // The Release store of the control packet's id byte orders the data before it.
                slot[0] = K_EAGER;
                slot[8..16].copy_from_slice(&start.to_le_bytes());
                slot[16..20].copy_from_slice(&(n as u32).to_le_bytes());
                st.eager_w = end;
                self.put_slot(&mut st, &mut slot, LEN_CTRL)
            }
            Protocol::Rendezvous => {
                if n as u64 > MAX_MSG {
                    return Err(self.lost(format!(
                        "message of {n} bytes exceeds the limit of {MAX_MSG}"
                    )));
                }
                let nchunks = n.div_ceil(g.chunk) as u64;
                let area = g.chunks as u64;
                let mut first = st.rdv_next;
                // A message that fits in the area never straddles its end, so that the receiver
                // can hand it out in place as one contiguous range.
                if nchunks <= area && first % area + nchunks > area {
                    first = first.next_multiple_of(area);
                }
                slot[0] = K_RDV_REQ;
                slot[8..16].copy_from_slice(&(n as u64).to_le_bytes());
                slot[16..24].copy_from_slice(&first.to_le_bytes());
                self.put_slot(&mut st, &mut slot, LEN_CTRL)?;
                st.rdv_next = first + nchunks;
                let grant = self.mine().u64_at(self.out_ctl() + C_RDV_GRANT);
                for k in 0..nchunks {
                    let abs = first + k;
                    self.wait_until("a rendezvous grant", || grant.load(Acquire) > abs)?;
                    let a = k as usize * g.chunk;
                    let b = (a + g.chunk).min(n);
                    let off =
                        g.rdv_off(self.me() as usize) + (abs % g.chunks as u64) as usize * g.chunk;
                    write_parts_range(&self.theirs, off, parts, a, b);
                    let mut s = [0u8; SLOT];
                    s[0] = K_RDV_DATA;
                    s[8..16].copy_from_slice(&abs.to_le_bytes());
                    s[16..20].copy_from_slice(&((b - a) as u32).to_le_bytes());
                    self.put_slot_bell(&mut st, &mut s, LEN_CTRL, b == n)?;
                }
                Ok(())
            }
        }
    }

    /// Is there an unread (or corrupt) slot at the head of the inbound ring?
    fn has_inbound(&self) -> bool {
        let g = self.geo();
        let pos = self
            .theirs
            .u64_at(self.in_ctl() + C_RING_READ)
            .load(Acquire);
        let off = g.ring_off(self.peer as usize) + (pos % g.ring as u64) as usize * SLOT;
        let id = self.mine().u8_at(off + 63).load(Acquire);
        !self.slot_empty(pos, id)
    }

    fn slot_empty(&self, pos: u64, id: u8) -> bool {
        let g = self.geo();
        if pos < g.ring as u64 {
            id == 0
        } else {
            id & 0xC0 == g.tag(pos - g.ring as u64)
        }
    }

    /// Consumes one slot of the inbound ring if one is there. Returns `Ok(Some(end))` when it
    /// consumed a packet (`end`: a whole message is complete), `Ok(None)` when the ring is empty.
    fn step(
        &self,
        st: &mut RecvState,
        mode: Mode,
        sink: &mut dyn FnMut(Piece<'_>, bool),
    ) -> Result<Option<bool>, CommError> {
        let g = *self.geo();
        let pos = st.ring_r;
        let off = g.ring_off(self.peer as usize) + (pos % g.ring as u64) as usize * SLOT;
        let id = self.mine().u8_at(off + 63).load(Acquire);
        if id & 0xC0 != g.tag(pos) {
            if self.slot_empty(pos, id) {
                return Ok(None);
            }
            return Err(self.corrupt(format!(
                "ring slot {pos}: id byte {id:#04x} carries no valid lap tag"
            )));
        }
        let mut slot = [0u8; SLOT];
        self.mine().read(off, &mut slot[..63]);
        if slot[62] != pos as u8 {
            return Err(self.corrupt(format!(
                "ring slot {pos}: sequence number {} instead of {}",
                slot[62], pos as u8
            )));
        }
        let len6 = id & 0x3F;
        let u64_at = |i: usize| u64::from_le_bytes(slot[i..i + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |i: usize| u32::from_le_bytes(slot[i..i + 4].try_into().unwrap_or([0; 4]));
        let mut end = true;
        if len6 != LEN_CTRL {
            sink(Piece::Bytes(&slot[..len6 as usize]), true);
        } else {
            if slot[1..8].iter().any(|b| *b != 0) {
                return Err(self.corrupt(format!(
                    "control packet at slot {pos}: reserved bytes are not zero"
                )));
            }
            match slot[0] {
                K_EAGER => {
                    let (start, n) = (u64_at(8), u32_at(16) as usize);
                    let cap = g.eager as u64;
                    let need = (EAGER_HDR + n).next_multiple_of(SLOT);
                    let expect_wrap = st.eager_r.next_multiple_of(cap);
                    if (start != st.eager_r && start != expect_wrap)
                        || need as u64 > cap
                        || start % cap + need as u64 > cap
                    {
                        return Err(self.corrupt(format!(
                            "eager control packet at slot {pos}: message of {n} bytes at {start}, expected one at {}",
                            st.eager_r
                        )));
                    }
                    let hoff = g.eager_off(self.peer as usize) + (start % cap) as usize;
                    let mut hdr = [0u8; EAGER_HDR];
                    self.mine().read(hoff, &mut hdr);
                    let hl = u32::from_le_bytes(hdr[..4].try_into().unwrap_or([0; 4])) as usize;
                    let hm = u32::from_le_bytes(hdr[4..].try_into().unwrap_or([0; 4]));
                    if hl != n || hm != EAGER_MAGIC {
                        return Err(self.corrupt(format!(
                            "eager buffer header at {start} does not match its control packet"
                        )));
                    }
                    sink(Piece::Shared(self.mine(), hoff + EAGER_HDR, n), true);
                    st.eager_r = start + need as u64;
                    self.theirs
                        .u64_at(self.in_ctl() + C_EAGER_READ)
                        .store(st.eager_r, Release);
                }
                K_RDV_REQ => {
                    let (total, first) = (u64_at(8), u64_at(16));
                    let area = g.chunks as u64;
                    let nchunks = total.div_ceil(g.chunk as u64);
                    // The sender skips to the start of the area when a message that fits would
                    // straddle its end.
                    let skipped = nchunks <= area
                        && st.rdv_next % area + nchunks > area
                        && first == st.rdv_next.next_multiple_of(area);
                    if st.rdv.is_some() || total > MAX_MSG || (first != st.rdv_next && !skipped) {
                        return Err(self.corrupt(format!(
                            "rendezvous request at slot {pos}: {total} bytes from chunk {first}"
                        )));
                    }
                    if total == 0 {
                        sink(Piece::Bytes(&[]), true);
                    } else {
                        let in_place = mode == Mode::View && nchunks <= area;
                        st.rdv = Some(Rdv {
                            remaining: total,
                            first,
                            next: first,
                            in_place,
                        });
                        // An in-place message is only useful whole: no doorbell before its last
                        // chunk (the last one always rings).
                        self.mine()
                            .u32_at(self.out_ctl() + C_QUIET)
                            .store(in_place as u32, Relaxed);
                        self.set_cursor(first);
                        end = false;
                    }
                }
                K_RDV_DATA => {
                    let (abs, n) = (u64_at(8), u32_at(16) as u64);
                    let Some(r) = st.rdv.as_mut() else {
                        return Err(self
                            .corrupt(format!("rendezvous data at slot {pos} without a request")));
                    };
                    if abs != r.next || n != r.remaining.min(g.chunk as u64) {
                        return Err(self.corrupt(format!(
                            "rendezvous data at slot {pos}: chunk {abs} of {n} bytes, expected chunk {} of {}",
                            r.next,
                            r.remaining.min(g.chunk as u64)
                        )));
                    }
                    let area = g.chunks as u64;
                    let coff = g.rdv_off(self.peer as usize) + (abs % area) as usize * g.chunk;
                    r.remaining -= n;
                    r.next += 1;
                    end = r.remaining == 0;
                    let (first, next) = (r.first, r.next);
                    if !r.in_place {
                        // Copied out chunk by chunk: each chunk is free again at once.
                        sink(Piece::Shared(self.mine(), coff, n as usize), end);
                        self.set_cursor(next);
                    } else if end {
                        // The whole message is in place, contiguous from its first chunk.
                        let off = g.rdv_off(self.peer as usize) + (first % area) as usize * g.chunk;
                        let len = ((next - first - 1) * g.chunk as u64 + n) as usize;
                        if mode == Mode::View {
                            let mut gr = lock(&self.grants);
                            gr.views.push(first);
                            gr.cursor = next;
                            self.publish_grant(&gr);
                            drop(gr);
                            sink(Piece::Held(first, off, len), true);
                        } else {
                            sink(Piece::Shared(self.mine(), off, len), true);
                            self.set_cursor(next);
                        }
                    }
                    if end {
                        st.rdv = None;
                        st.rdv_next = next;
                        self.mine()
                            .u32_at(self.out_ctl() + C_QUIET)
                            .store(0, Relaxed);
                    }
                }
                k => {
                    return Err(
                        self.corrupt(format!("control packet at slot {pos} has unknown kind {k}"))
                    )
                }
            }
        }
        st.ring_r = pos + 1;
        self.theirs
            .u64_at(self.in_ctl() + C_RING_READ)
            .store(st.ring_r, Release);
        self.wake_sender();
        Ok(Some(end))
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

/// Removes our segment file and pipes when dropped (at the end of setup, or when it failed).
struct Unlink(Vec<PathBuf>);

impl Drop for Unlink {
    fn drop(&mut self) {
        for p in self.0.drain(..) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Builds the DECK-SCI mesh of this node: creates and exports its segment, maps every peer's,
/// and unlinks its file once every peer has mapped it. `links[rank]` is `None` for this node.
/// Every node of the job must call it with the same configuration; `timeout` bounds the setup.
pub fn establish(
    boot: &Bootstrap,
    cfg: &DeckConfig,
    timeout: Duration,
) -> Result<Vec<Option<DeckLink>>, CommError> {
    let all = vec![true; boot.size as usize];
    establish_with(boot, cfg, timeout, &all)
}

/// [`establish`] with only the peers `local[i]` (those on this host; the relation must be the
/// same on every node, as it is when derived from addresses). The other entries stay None.
pub fn establish_with(
    boot: &Bootstrap,
    cfg: &DeckConfig,
    timeout: Duration,
    local: &[bool],
) -> Result<Vec<Option<DeckLink>>, CommError> {
    let me = boot.rank;
    // Peers that map our segment: every local one but ourselves.
    let attaching = local
        .iter()
        .enumerate()
        .filter(|(i, l)| **l && *i != me as usize)
        .count() as u32;
    let setup = |what: String| CommError::Setup { me, what };
    cfg.validate()
        .map_err(|e| setup(format!("DECK-SCI configuration: {e}")))?;
    let n = boot.size as usize;
    let geo = Geometry::new(cfg, n);
    let len = geo.seg_len();
    let deadline = Instant::now() + timeout;
    let path = segment_path(&cfg.dir, &boot.job_key, me);
    let mine = match Segment::create(&path, len) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // A leftover of a job with the same key: reuse the name only if its owner is dead.
            let owner = Segment::open(&path, len)
                .ok()
                .map(|s| s.u32_at(H_PID).load(Relaxed));
            if owner.is_some_and(pid_alive) {
                return Err(setup(format!(
                    "segment {} belongs to the running process {} (another job with the same SVM_JOB_KEY?)",
                    path.display(),
                    owner.unwrap_or(0)
                )));
            }
            let _ = std::fs::remove_file(&path);
            Segment::create(&path, len)
                .map_err(|e| setup(format!("cannot create {}: {e}", path.display())))?
        }
        Err(e) => {
            return Err(setup(format!(
                "cannot create the DECK-SCI segment {}: {e}",
                path.display()
            )))
        }
    };
    let mut guard = Unlink(vec![path.clone()]);
    // Our pipes (one per peer, read end ours) exist before the header says "ready", so a peer
    // that sees the segment ready can open its write end. Pollers want a byte from the start.
    let mut rx: Vec<Option<Fifo>> = (0..n).map(|_| None).collect();
    for (peer, slot) in rx.iter_mut().enumerate() {
        if peer == me as usize || !local.get(peer).copied().unwrap_or(false) {
            continue;
        }
        let fp = fifo_path(&cfg.dir, &boot.job_key, me, peer as NodeId);
        guard.0.push(fp.clone());
        *slot = Some(
            Fifo::create_reader(&fp)
                .map_err(|e| setup(format!("cannot create the pipe {}: {e}", fp.display())))?,
        );
        mine.u32_at(geo.block(peer) + C_POLL_ARMED).store(1, SeqCst);
    }
    geo.write_header(&mine, me as usize);
    let hub = Arc::new(Hub {
        me,
        mine: Arc::new(mine),
        geo,
        spin: cfg.spin,
    });
    let mut links: Vec<Option<DeckLink>> = (0..n).map(|_| None).collect();
    for (peer, slot) in links.iter_mut().enumerate() {
        if peer == me as usize || !local.get(peer).copied().unwrap_or(false) {
            continue;
        }
        let ppath = segment_path(&cfg.dir, &boot.job_key, peer as NodeId);
        let theirs = loop {
            let last = match Segment::open(&ppath, len) {
                Ok(s) if s.u32_at(H_READY).load(Acquire) == 1 => {
                    geo.check_header(&s, peer)
                        .map_err(|e| setup(format!("segment {}: {e}", ppath.display())))?;
                    if pid_alive(s.u32_at(H_PID).load(Relaxed)) {
                        break s;
                    }
                    "its owner is dead (a leftover)".to_string()
                }
                Ok(_) => "not ready yet".to_string(),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(setup(format!(
                    "timed out waiting for the DECK-SCI segment of node {peer} ({}: {last}); is it running with the same SVM_JOB_KEY?",
                    ppath.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let peer_pid = theirs.u32_at(H_PID).load(Relaxed);
        let fp = fifo_path(&cfg.dir, &boot.job_key, peer as NodeId, me);
        let tx = Fifo::open_writer(&fp)
            .map_err(|e| setup(format!("cannot open the pipe {}: {e}", fp.display())))?;
        // Only we open it for writing: its name can go.
        let _ = std::fs::remove_file(&fp);
        let Some(rx) = rx[peer].take() else {
            return Err(setup(format!("no pipe for node {peer}")));
        };
        // The last peer to map a segment removes its name, so no file outlives setup even if
        // its owner dies right after (the owner removes it too; one of them finds it gone).
        if theirs.u32_at(H_ATTACHED).fetch_add(1, SeqCst) + 1 == attaching {
            let _ = std::fs::remove_file(&ppath);
        }
        let pair = Arc::new(Pair {
            hub: hub.clone(),
            peer: peer as NodeId,
            peer_pid,
            theirs: Arc::new(theirs),
            send: Mutex::new(SendState {
                ring_w: 0,
                eager_w: 0,
                rdv_next: 0,
            }),
            recv: Mutex::new(RecvState {
                ring_r: 0,
                eager_r: 0,
                rdv: None,
                rdv_next: 0,
                eof: false,
            }),
            grants: Mutex::new(Grants {
                cursor: 0,
                views: Vec::new(),
            }),
            rx,
            tx,
            local_closed: AtomicBool::new(false),
            force: AtomicU8::new(0),
            queued: cfg.queued_sends,
            queue: outbox::Queue::default(),
        });
        *slot = Some(DeckLink(pair));
    }
    // Every peer has mapped our segment once the counter reaches n-1: the name can go.
    while hub.mine.u32_at(H_ATTACHED).load(SeqCst) < attaching {
        if Instant::now() >= deadline {
            return Err(setup(format!(
                "timed out waiting for {} peer(s) to map our DECK-SCI segment",
                attaching - hub.mine.u32_at(H_ATTACHED).load(SeqCst)
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(guard);
    Ok(links)
}

#[cfg(test)]
mod tests;
