//! Decoding arbitrary bytes as one frame must return an error or a frame, never panic; a frame
//! that decodes must encode back to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svm_comm::wire;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = wire::decode(data) {
        let again = wire::encode(&f.msg, f.header.source, f.header.seq, f.data).expect("re-encode");
        // flags and reserved bytes are not preserved by design; compare what the decoder keeps.
        let g = wire::decode(&again).expect("decode of re-encoded frame");
        assert_eq!(g.msg, f.msg);
        assert_eq!(g.data, f.data);
    }
});
