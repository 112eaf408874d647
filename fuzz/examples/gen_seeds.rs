//! Writes a seed corpus of valid frames for both fuzz targets into `fuzz/corpus/<target>/`.
//! Without seeds libFuzzer rarely builds a frame whose lengths, kind and postcard payload all
//! agree, so the "decodes fine" paths stay cold. Run from anywhere:
//!
//!     cargo run --manifest-path fuzz/Cargo.toml --example gen_seeds
use std::path::PathBuf;

use svm_comm::wire::{self, Access, LockNotice, Msg, ProtoMsg, SyncMsg, KEY_LEN};

fn samples() -> Vec<(Msg, Vec<u8>)> {
    let p = |msg| Msg::Proto { proto: 1, msg };
    vec![
        (Msg::Hello { rank: 3, size: 4, key: [7; KEY_LEN], listen: "127.0.0.1:4000".into() }, vec![]),
        (Msg::PeerTable { addrs: vec!["a:1".into(), "b:2".into()] }, vec![]),
        (p(ProtoMsg::ReadReq { page: 42 }), vec![]),
        (p(ProtoMsg::WriteReq { page: 300 }), vec![]),
        (p(ProtoMsg::FwdRead { page: 7, to: 2 }), vec![]),
        (p(ProtoMsg::FwdWrite { page: 7, to: 2, with_data: true }), vec![]),
        (p(ProtoMsg::Inval { page: u64::MAX }), vec![]),
        (p(ProtoMsg::InvalAck { page: 1 }), vec![]),
        (p(ProtoMsg::Grant { page: 5, access: Access::Write, with_data: true }), vec![0xab; 64]),
        (p(ProtoMsg::Done { page: 5 }), vec![]),
        (p(ProtoMsg::Diffs { token: 11, diffed: vec![5, 6], pushed: vec![7] }), vec![0x5a; 40]),
        (p(ProtoMsg::DiffAck { token: 11, page: 5 }), vec![]),
        (p(ProtoMsg::FwdExclusive { page: 7, to: 1, with_data: true }), vec![]),
        (p(ProtoMsg::GrantExclusive { page: 7, with_data: true }), vec![0xcd; 64]),
        (p(ProtoMsg::ExclusiveUnused { page: 7 }), vec![]),
        (Msg::Sync(SyncMsg::LockAcquire { lock: 1 }), vec![]),
        (Msg::Sync(SyncMsg::LockTry { lock: 2 }), vec![]),
        (Msg::Sync(SyncMsg::LockGrant { lock: 9, releases: 4, notices: vec![LockNotice { page: 1, epoch: 0, release: 1 }, LockNotice { page: 2, epoch: 1, release: 3 }, LockNotice { page: 300, epoch: 2, release: 4 }] }), vec![]),
        (Msg::Sync(SyncMsg::LockBusy { lock: 9 }), vec![]),
        (Msg::Sync(SyncMsg::LockForward { lock: 9, to: 1, try_only: false }), vec![]),
        (Msg::Sync(SyncMsg::LockTryDone { lock: 9, to: 2, granted: true }), vec![]),
        (Msg::Sync(SyncMsg::BarrierArrive { barrier: 0, count: 4, notices: vec![] }), vec![]),
        (Msg::Sync(SyncMsg::BarrierRelease { barrier: 0, arrivals: 2, notices: vec![8, 9], nodes: 2 }), vec![]),
        (Msg::Sync(SyncMsg::BarrierMismatch { barrier: 3, expected: 4, got: 5 }), vec![]),
        (Msg::Goodbye, vec![]),
        (Msg::Abort { reason: "node 2 lost".into(), code: 70 }, vec![1, 2, 3]),
    ]
}

fn main() -> std::io::Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let wd = root.join("wire_decode");
    let fs = root.join("frame_stream");
    std::fs::create_dir_all(&wd)?;
    std::fs::create_dir_all(&fs)?;
    let frames: Vec<Vec<u8>> = samples()
        .iter()
        .enumerate()
        .map(|(i, (m, d))| wire::encode(m, i as u16, i as u32, d).expect("encode seed"))
        .collect();
    for (i, f) in frames.iter().enumerate() {
        std::fs::write(wd.join(format!("seed-{i:02}")), f)?;
    }
    // frame_stream input: one chunk-size byte, then a stream of frames.
    let all: Vec<u8> = frames.concat();
    for (i, chunk) in [0u8, 6, 23, 63].into_iter().enumerate() {
        let mut s = vec![chunk];
        s.extend_from_slice(&all);
        std::fs::write(fs.join(format!("seed-all-{i}")), s)?;
    }
    for (i, pair) in frames.windows(2).enumerate() {
        let mut s = vec![i as u8];
        s.extend_from_slice(&pair.concat());
        std::fs::write(fs.join(format!("seed-pair-{i:02}")), s)?;
    }
    println!("wrote {} + {} seeds under {}", frames.len(), 4 + frames.len() - 1, root.display());
    Ok(())
}
