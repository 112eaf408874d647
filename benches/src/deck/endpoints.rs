//! `svm-bench deck`'s endpoints (DECK-SCI links and µDECK mailboxes behind one message
//! interface) and the payloads both ranks fill and check.

use super::*;

// ---------------------------------------------------------------------------------------------
// Endpoints

/// One side of a two-node connection, message oriented.
pub(super) trait Ep {
    fn send(&self, b: &[u8]) -> Result<(), String>;
    /// Receives one message and hands its bytes to `f` (in place in the shared segment for the
    /// zero-copy receive of DECK-SCI protocol 3).
    fn recv_with(&self, f: &mut dyn FnMut(&[u8])) -> Result<(), String>;
    /// Receives one message into `out` (a copy).
    fn recv(&self, out: &mut Vec<u8>) -> Result<(), String> {
        self.recv_with(&mut |b| {
            out.clear();
            out.extend_from_slice(b);
        })
    }
    /// 0 = automatic, 1/2/3 = force that DECK-SCI protocol, 4 = force protocol 3 and receive by
    /// copying out of the segment (ignored by µDECK). 0 and 3 receive with `recv_view` (zero
    /// copy for rendezvous messages), 1, 2 and 4 with `recv_msg` (one copy out).
    fn force(&self, p: u8);
}

/// Forced protocol 3, received by copying out of the segment (`recv_msg`).
pub(super) const P3_COPY_CODE: u8 = 4;

pub(super) struct SciEp {
    link: DeckLink,
    view: std::sync::atomic::AtomicBool,
    scratch: std::sync::Mutex<Vec<u8>>,
}

impl SciEp {
    pub(super) fn new(link: DeckLink) -> SciEp {
        SciEp {
            link,
            view: std::sync::atomic::AtomicBool::new(true),
            scratch: std::sync::Mutex::new(Vec::new()),
        }
    }
}

impl Ep for SciEp {
    fn send(&self, b: &[u8]) -> Result<(), String> {
        self.link.send(&[b]).map_err(|e| e.to_string())
    }
    fn recv_with(&self, f: &mut dyn FnMut(&[u8])) -> Result<(), String> {
        let closed = || "the peer closed the DECK-SCI link".to_string();
        if self.view.load(std::sync::atomic::Ordering::Relaxed) {
            match self.link.recv_view(RECV_TIMEOUT) {
                Ok(Some(v)) => {
                    f(&v);
                    Ok(())
                }
                Ok(None) => Err(closed()),
                Err(e) => Err(e.to_string()),
            }
        } else {
            let mut out = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
            match self.link.recv_msg(&mut out, RECV_TIMEOUT) {
                Ok(true) => {
                    f(&out);
                    Ok(())
                }
                Ok(false) => Err(closed()),
                Err(e) => Err(e.to_string()),
            }
        }
    }
    fn force(&self, p: u8) {
        self.view
            .store(matches!(p, 0 | 3), std::sync::atomic::Ordering::Relaxed);
        self.link.set_protocol(match p {
            1 => Some(Protocol::Short),
            2 => Some(Protocol::Eager),
            3 | P3_COPY_CODE => Some(Protocol::Rendezvous),
            _ => None,
        });
    }
}

pub(super) struct DeckEp {
    pub(super) deck: Arc<Deck>,
    pub(super) mine: Mbox,
    pub(super) peer: MboxId,
}

impl Ep for DeckEp {
    fn send(&self, b: &[u8]) -> Result<(), String> {
        self.deck
            .post(self.peer, &Message::from_bytes(b.to_vec()))
            .map_err(|e| e.to_string())
    }
    fn recv_with(&self, f: &mut dyn FnMut(&[u8])) -> Result<(), String> {
        match self.mine.retrieve_timeout(RECV_TIMEOUT) {
            Some(m) => {
                f(&m.into_bytes());
                Ok(())
            }
            None => Err(format!(
                "no µDECK message within {RECV_TIMEOUT:?} ({})",
                self.deck.errors().join("; ")
            )),
        }
    }
    fn force(&self, _p: u8) {}
}

pub(super) fn cmd(op: u8, proto: u8, size: usize, count: usize) -> [u8; 24] {
    let mut c = [0u8; 24];
    c[0] = op;
    c[1] = proto;
    c[8..16].copy_from_slice(&(size as u64).to_le_bytes());
    c[16..24].copy_from_slice(&(count as u64).to_le_bytes());
    c
}

// ---------------------------------------------------------------------------------------------
// Payloads and their checks

/// The ping-pong payload of round `i`: every byte depends on `i` and its position.
pub(super) fn ping_fill(buf: &mut [u8], i: usize) {
    for (j, b) in buf.iter_mut().enumerate() {
        *b = (j.wrapping_mul(31) ^ i.wrapping_mul(17) ^ (j >> 8)) as u8;
    }
}

/// The base pattern of streamed messages (both sides compute it).
pub(super) fn base_pattern(n: usize) -> Vec<u8> {
    (0..n)
        .map(|j| (j.wrapping_mul(131) ^ (j >> 9) ^ 0x5a) as u8)
        .collect()
}

pub(super) fn stamp_value(i: usize, off: usize) -> u64 {
    (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ off as u64
}

/// Offsets of the stamps of a message of `n` bytes (every 4 KiB and the last 8 bytes).
pub(super) fn stamp_offsets(n: usize) -> impl Iterator<Item = usize> {
    let tail = if n >= 8 && !(n - 8).is_multiple_of(4096) {
        Some(n - 8)
    } else {
        None
    };
    (0..n.saturating_sub(7)).step_by(4096).chain(tail)
}

pub(super) fn stamp(buf: &mut [u8], i: usize) {
    let n = buf.len();
    if n < 8 {
        for b in buf.iter_mut() {
            *b = i as u8;
        }
        return;
    }
    for off in stamp_offsets(n) {
        buf[off..off + 8].copy_from_slice(&stamp_value(i, off).to_le_bytes());
    }
}

pub(super) fn stamp_ok(buf: &[u8], i: usize) -> bool {
    let n = buf.len();
    if n < 8 {
        return buf.iter().all(|&b| b == i as u8);
    }
    stamp_offsets(n).all(|off| buf[off..off + 8] == stamp_value(i, off).to_le_bytes())
}
