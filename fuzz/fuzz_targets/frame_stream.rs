//! Feeding arbitrary bytes through stream reassembly, in arbitrary chunk sizes, must never
//! panic or loop.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svm_comm::transport::RecvBuf;
use svm_comm::wire;

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let chunk = (data[0] as usize % 64) + 1;
    let mut rb = RecvBuf::new();
    for piece in data[1..].chunks(chunk) {
        let spare = rb.spare(piece.len());
        spare[..piece.len()].copy_from_slice(piece);
        rb.commit(piece.len());
        loop {
            match rb.next_frame() {
                Ok(Some(f)) => {
                    let _ = wire::decode(f);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
});
