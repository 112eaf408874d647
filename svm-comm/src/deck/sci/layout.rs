//! DECK-SCI's configuration, the layout of a segment (offsets derived from the configuration
//! and the job size) and the names of a job's files (see the module docs of `sci`).

use super::*;

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

    pub(super) fn validate(&self) -> Result<(), String> {
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
pub(super) struct Geometry {
    pub(super) nodes: usize,
    pub(super) ring: usize,
    pub(super) eager: usize,
    pub(super) chunk: usize,
    pub(super) chunks: usize,
    pub(super) limit: usize,
    pub(super) block_len: usize,
}

impl Geometry {
    pub(super) fn new(cfg: &DeckConfig, nodes: usize) -> Geometry {
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
    pub(super) fn seg_len(&self) -> usize {
        HDR_LEN + self.nodes * self.block_len
    }
    pub(super) fn block(&self, p: usize) -> usize {
        HDR_LEN + p * self.block_len
    }
    pub(super) fn ring_off(&self, p: usize) -> usize {
        self.block(p) + CTL_LEN
    }
    pub(super) fn eager_off(&self, p: usize) -> usize {
        self.ring_off(p) + self.ring * SLOT
    }
    pub(super) fn rdv_off(&self, p: usize) -> usize {
        self.eager_off(p) + self.eager
    }
    /// Lap tag of ring position `pos` (bits 6..7 of the id byte).
    pub(super) fn tag(&self, pos: u64) -> u8 {
        (((pos / self.ring as u64) % 3) as u8 + 1) << 6
    }
    pub(super) fn write_header(&self, seg: &Segment, rank: usize) {
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
    pub(super) fn check_header(&self, seg: &Segment, rank: usize) -> Result<(), String> {
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
pub(super) fn fifo_path(dir: &std::path::Path, key: &[u8], to: NodeId, from: NodeId) -> PathBuf {
    let seg = segment_path(dir, key, to);
    let mut name = seg.into_os_string();
    name.push(format!("-from-{from}"));
    PathBuf::from(name)
}
