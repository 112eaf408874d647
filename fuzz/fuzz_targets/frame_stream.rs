//! Feeding arbitrary bytes through stream reassembly, in arbitrary chunk sizes, must never
//! panic or loop, and must not depend on how the stream was split: fed in chunks of 1..=64
//! bytes, `RecvBuf` must yield exactly the frames (and the error, if any) it yields when fed
//! the whole stream at once. Every reassembled frame is also run through `wire::decode`.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svm_comm::transport::RecvBuf;
use svm_comm::wire;

#[derive(Debug, PartialEq)]
struct Outcome {
    frames: Vec<Vec<u8>>,
    error: Option<wire::WireError>,
    pending: usize,
}

fn reassemble(stream: &[u8], chunk: usize) -> Outcome {
    let mut rb = RecvBuf::new();
    let mut frames = Vec::new();
    for piece in stream.chunks(chunk) {
        let spare = rb.spare(piece.len());
        assert!(spare.len() >= piece.len(), "spare() returned less than asked");
        spare[..piece.len()].copy_from_slice(piece);
        rb.commit(piece.len());
        loop {
            match rb.next_frame() {
                Ok(Some(f)) => {
                    let _ = wire::decode(f);
                    frames.push(f.to_vec());
                }
                Ok(None) => break,
                Err(e) => return Outcome { frames, error: Some(e), pending: rb.pending() },
            }
        }
    }
    Outcome { frames, error: None, pending: rb.pending() }
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let chunk = (data[0] as usize % 64) + 1;
    let stream = &data[1..];
    let split = reassemble(stream, chunk);
    let whole = reassemble(stream, stream.len().max(1));
    // On an error the chunked run stops feeding early, so only frames and error must agree;
    // without one, both runs saw every byte and must hold the same partial frame.
    assert_eq!(split.frames, whole.frames, "frames depend on the chunk size ({chunk})");
    assert_eq!(split.error, whole.error, "error depends on the chunk size ({chunk})");
    if split.error.is_none() {
        assert_eq!(split.pending, whole.pending, "partial frame depends on the chunk size ({chunk})");
        let consumed: usize = split.frames.iter().map(Vec::len).sum();
        assert_eq!(consumed + split.pending, stream.len(), "bytes lost or duplicated");
    }
});
