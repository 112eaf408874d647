//! Decoding arbitrary bytes as one frame must return an error or a frame, never panic; a frame
//! that decodes must encode back to a frame that decodes to the same message and data, and that
//! canonical encoding must be a fixed point of decode + encode.
#![no_main]
use libfuzzer_sys::fuzz_target;
use svm_comm::wire;

fuzz_target!(|data: &[u8]| {
    let _ = wire::Header::parse(data);
    if let Ok(f) = wire::decode(data) {
        let again = wire::encode(&f.msg, f.header.source, f.header.seq, f.data).expect("re-encode");
        // flags and reserved bytes are not preserved by design, and postcard accepts
        // non-canonical varints, so compare what the decoder keeps, not the input bytes.
        let g = wire::decode(&again).expect("decode of re-encoded frame");
        assert_eq!(g.msg, f.msg);
        assert_eq!(g.data, f.data);
        assert_eq!(g.header.kind, f.header.kind);
        assert_eq!(g.header.source, f.header.source);
        assert_eq!(g.header.seq, f.header.seq);
        assert!(g.header.ctrl_len <= f.header.ctrl_len, "canonical encoding is longer than the input");
        let third = wire::encode(&g.msg, g.header.source, g.header.seq, g.data).expect("re-encode");
        assert_eq!(third, again, "encoding is not canonical");
    }
});
