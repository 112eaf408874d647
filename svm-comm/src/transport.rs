//! The transport interface the engine sends through, and frame reassembly for stream transports.

use std::os::fd::RawFd;

use crate::wire::{Header, WireError, HEADER_LEN};
use crate::NodeId;

#[derive(Debug, thiserror::Error)]
pub enum CommError {
    #[error("node {me}: lost the connection to node {peer}: {why}")]
    Lost {
        me: NodeId,
        peer: NodeId,
        why: String,
    },
    #[error("node {me}: malformed frame from node {peer}: {err}; closing the connection")]
    Malformed {
        me: NodeId,
        peer: NodeId,
        err: WireError,
    },
    #[error("node {me}: {what}")]
    Setup { me: NodeId, what: String },
    #[error("node {me}: corrupt packet from node {peer}: {what}")]
    Corrupt {
        me: NodeId,
        peer: NodeId,
        what: String,
    },
    #[error("node {me}: timed out: {what}")]
    Timeout {
        me: NodeId,
        peer: NodeId,
        what: String,
    },
}

/// One connection to one peer. Sends from several threads are serialised inside the link, so
/// each frame arrives whole and frames from one sender arrive in order.
pub trait Link: Send + Sync {
    /// Sends whole frames — one, or several back to back — given as consecutive parts (e.g.
    /// header+control, then raw data); the receiver cuts them apart again ([`RecvBuf`]). A link
    /// with a backlog ([`Link::backlog`]) never blocks here: what the connection does not take
    /// at once is queued behind earlier frames for [`Link::flush`].
    fn send(&self, parts: &[&[u8]]) -> Result<(), CommError>;
    /// Writes as much of the backlog as the connection takes now, without blocking. `Ok(true)`
    /// when nothing is left. The caller flushes when [`Link::poll_fd`] is writable.
    fn flush(&self) -> Result<bool, CommError> {
        Ok(true)
    }
    /// Bytes sent but not yet taken by the connection (0 for links whose `send` blocks until
    /// the peer has room).
    fn backlog(&self) -> usize {
        0
    }
    /// A descriptor that becomes readable when frames may be available (for epoll).
    fn poll_fd(&self) -> RawFd;
    /// Reads whatever is available without blocking into `buf`. Returns `Ok(false)` when the peer
    /// closed the connection.
    fn recv_available(&self, buf: &mut RecvBuf) -> Result<bool, CommError>;
    /// Whether the peer has written something this side has not read yet, as far as this
    /// side can tell without a system call (false where it cannot: TCP). A node leaving a
    /// barrier through shared memory reads what is there first (`Node::read_inbound_now`).
    fn has_inbound(&self) -> bool {
        false
    }
    /// Transport name for diagnostics (`tcp`, `deck`).
    fn kind(&self) -> &'static str;
    /// Shuts the connection down (both directions) so the peer sees EOF.
    fn close(&self);
    /// Stops sending (the peer sees EOF after everything sent so far) but keeps receiving.
    fn finish_sending(&self) {}
}

/// Reassembles frames from a byte stream.
///
/// `buf` is always fully initialised (zeroed once when it grows), and the valid bytes are
/// `buf[start..end]`: handing out spare space never zeroes it again, so a receive costs only the
/// copy of the bytes received.
#[derive(Default)]
pub struct RecvBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl RecvBuf {
    pub fn new() -> Self {
        RecvBuf {
            buf: vec![0; 1 << 16],
            start: 0,
            end: 0,
        }
    }

    /// Spare space to read into (at least `min` bytes), compacting consumed bytes first.
    pub fn spare(&mut self, min: usize) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.start > 0
            && (self.start > self.buf.len() / 2 || self.buf.len() - self.end < min)
        {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < min {
            let want = (self.end + min).max(self.buf.len() * 2);
            self.buf.resize(want, 0);
        }
        &mut self.buf[self.end..]
    }

    /// Records that `n` bytes were written at the start of the slice returned by the last
    /// `spare`.
    pub fn commit(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Bytes held (not yet consumed).
    pub fn filled(&self) -> usize {
        self.end - self.start
    }

    /// If a whole frame is buffered, returns its byte range and consumes it.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, WireError> {
        let avail = &self.buf[self.start..self.end];
        if avail.len() < HEADER_LEN {
            return Ok(None);
        }
        let h = Header::parse(avail)?;
        let len = h.frame_len();
        if avail.len() < len {
            return Ok(None);
        }
        let s = self.start;
        self.start += len;
        Ok(Some(&self.buf[s..s + len]))
    }

    /// Bytes of a partial frame still buffered (non-zero when a peer died mid-frame).
    pub fn pending(&self) -> usize {
        self.end - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{encode, Msg};

    #[test]
    fn frames_split_at_every_byte_reassemble() {
        let mut stream = Vec::new();
        for i in 0..5u32 {
            stream.extend(
                encode(
                    &Msg::Abort {
                        reason: format!("r{i}"),
                        code: 1,
                    },
                    1,
                    i,
                    &vec![i as u8; i as usize * 100],
                )
                .unwrap(),
            );
        }
        for chunk in [1usize, 7, 24, 100, 4096] {
            let mut rb = RecvBuf::new();
            let mut got = 0;
            for piece in stream.chunks(chunk) {
                let spare = rb.spare(piece.len());
                spare[..piece.len()].copy_from_slice(piece);
                rb.commit(piece.len());
                while let Some(f) = rb.next_frame().unwrap() {
                    let fr = crate::wire::decode(f).unwrap();
                    assert_eq!(fr.header.seq, got);
                    got += 1;
                }
            }
            assert_eq!(got, 5);
            assert_eq!(rb.pending(), 0);
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_hang() {
        let mut rb = RecvBuf::new();
        let spare = rb.spare(64);
        spare[..64].copy_from_slice(&[0x41; 64]);
        rb.commit(64);
        assert!(rb.next_frame().is_err());
    }
}
