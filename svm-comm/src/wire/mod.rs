//! Frame format shared by every transport.
//!
//! A frame is a fixed 24-byte little-endian header followed by `ctrl_len` bytes of control payload
//! (a [`Msg`] encoded with postcard) and `data_len` bytes of raw data (page contents, diffs),
//! which never go through a serializer. Every decoder checks lengths and returns
//! [`WireError`] on bad input: it never panics.

mod msg;
pub use msg::*;

use thiserror::Error;

/// `"SVM1"` read as a little-endian u32.
pub const MAGIC: u32 = u32::from_le_bytes(*b"SVM1");
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 24;
/// Largest control payload accepted (postcard-encoded [`Msg`]).
pub const MAX_CTRL_LEN: u32 = 1 << 20;
/// Largest raw data payload accepted (pages, diff batches).
pub const MAX_DATA_LEN: u32 = 64 << 20;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("frame too short: {got} bytes, need {need}")]
    Truncated { got: usize, need: usize },
    #[error("bad magic {0:#010x}: the peer is not an svm node (or the stream lost its framing)")]
    BadMagic(u32),
    #[error("unsupported wire version {0} (this build speaks version {VERSION})")]
    BadVersion(u8),
    #[error("control payload of {0} bytes exceeds the limit of {MAX_CTRL_LEN}")]
    CtrlTooLong(u32),
    #[error("data payload of {0} bytes exceeds the limit of {MAX_DATA_LEN}")]
    DataTooLong(u32),
    #[error("header kind {header} does not match the message kind {msg}")]
    KindMismatch { header: u8, msg: u8 },
    #[error("malformed control payload: {0}")]
    Decode(String),
    #[error("cannot encode message: {0}")]
    Encode(String),
}

/// The fixed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// [`Msg::kind`] of the control payload, kept in the header so that counters and tracing can
    /// classify a frame without decoding it.
    pub kind: u8,
    pub flags: u16,
    /// Rank of the sending node.
    pub source: u16,
    pub ctrl_len: u32,
    pub data_len: u32,
    /// Per-connection sequence number, for diagnostics.
    pub seq: u32,
}

impl Header {
    /// Parses and validates the first [`HEADER_LEN`] bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Header, WireError> {
        if buf.len() < HEADER_LEN {
            return Err(WireError::Truncated {
                got: buf.len(),
                need: HEADER_LEN,
            });
        }
        let u16_at = |i: usize| u16::from_le_bytes([buf[i], buf[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let magic = u32_at(0);
        if magic != MAGIC {
            return Err(WireError::BadMagic(magic));
        }
        if buf[4] != VERSION {
            return Err(WireError::BadVersion(buf[4]));
        }
        let h = Header {
            kind: buf[5],
            flags: u16_at(6),
            source: u16_at(8),
            // bytes 10..12 reserved
            ctrl_len: u32_at(12),
            data_len: u32_at(16),
            seq: u32_at(20),
        };
        if h.ctrl_len > MAX_CTRL_LEN {
            return Err(WireError::CtrlTooLong(h.ctrl_len));
        }
        if h.data_len > MAX_DATA_LEN {
            return Err(WireError::DataTooLong(h.data_len));
        }
        Ok(h)
    }

    pub fn emit(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4] = VERSION;
        b[5] = self.kind;
        b[6..8].copy_from_slice(&self.flags.to_le_bytes());
        b[8..10].copy_from_slice(&self.source.to_le_bytes());
        b[12..16].copy_from_slice(&self.ctrl_len.to_le_bytes());
        b[16..20].copy_from_slice(&self.data_len.to_le_bytes());
        b[20..24].copy_from_slice(&self.seq.to_le_bytes());
        b
    }

    /// Total frame length (header + payloads).
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.ctrl_len as usize + self.data_len as usize
    }
}

/// Encodes the header and control payload of a frame whose raw data (`data_len` bytes) the
/// caller sends separately (so page contents are never copied into the frame buffer).
/// `out` is cleared first.
pub fn encode_head(
    msg: &Msg,
    source: u16,
    seq: u32,
    data_len: usize,
    out: &mut Vec<u8>,
) -> Result<(), WireError> {
    if data_len > MAX_DATA_LEN as usize {
        return Err(WireError::DataTooLong(
            data_len.min(u32::MAX as usize) as u32
        ));
    }
    out.clear();
    out.extend_from_slice(&[0u8; HEADER_LEN]);
    let buf = postcard::to_extend(msg, std::mem::take(out))
        .map_err(|e| WireError::Encode(e.to_string()))?;
    *out = buf;
    let ctrl_len = out.len() - HEADER_LEN;
    if ctrl_len > MAX_CTRL_LEN as usize {
        out.clear();
        return Err(WireError::CtrlTooLong(ctrl_len as u32));
    }
    let h = Header {
        kind: msg.kind(),
        flags: 0,
        source,
        ctrl_len: ctrl_len as u32,
        data_len: data_len as u32,
        seq,
    };
    out[..HEADER_LEN].copy_from_slice(&h.emit());
    Ok(())
}

/// Encodes `msg` plus raw `data` as one frame into `out` (cleared first).
pub fn encode_into(
    msg: &Msg,
    source: u16,
    seq: u32,
    data: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), WireError> {
    encode_head(msg, source, seq, data.len(), out)?;
    out.extend_from_slice(data);
    Ok(())
}

/// Encodes one frame into a fresh buffer.
pub fn encode(msg: &Msg, source: u16, seq: u32, data: &[u8]) -> Result<Vec<u8>, WireError> {
    let mut v = Vec::with_capacity(HEADER_LEN + 32 + data.len());
    encode_into(msg, source, seq, data, &mut v)?;
    Ok(v)
}

/// A decoded frame borrowing its raw data from the input.
#[derive(Debug, PartialEq)]
pub struct Frame<'a> {
    pub header: Header,
    pub msg: Msg,
    pub data: &'a [u8],
}

/// Decodes exactly one frame from `buf`, which must hold the whole frame (see
/// [`Header::frame_len`]); trailing bytes are an error.
pub fn decode(buf: &[u8]) -> Result<Frame<'_>, WireError> {
    let header = Header::parse(buf)?;
    let need = header.frame_len();
    if buf.len() < need {
        return Err(WireError::Truncated {
            got: buf.len(),
            need,
        });
    }
    if buf.len() > need {
        return Err(WireError::Decode(format!(
            "{} trailing bytes after the frame",
            buf.len() - need
        )));
    }
    let ctrl_end = HEADER_LEN + header.ctrl_len as usize;
    let msg: Msg = match postcard::take_from_bytes::<Msg>(&buf[HEADER_LEN..ctrl_end]) {
        Ok((m, [])) => m,
        Ok((_, rest)) => {
            return Err(WireError::Decode(format!(
                "{} unused bytes in the control payload",
                rest.len()
            )))
        }
        Err(e) => return Err(WireError::Decode(e.to_string())),
    };
    if msg.kind() != header.kind {
        return Err(WireError::KindMismatch {
            header: header.kind,
            msg: msg.kind(),
        });
    }
    Ok(Frame {
        header,
        msg,
        data: &buf[ctrl_end..need],
    })
}

#[cfg(test)]
mod tests;
