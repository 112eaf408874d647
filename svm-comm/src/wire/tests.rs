use super::*;

fn samples() -> Vec<(Msg, Vec<u8>)> {
    vec![
        (
            Msg::Hello {
                rank: 3,
                size: 4,
                key: [7; KEY_LEN],
                listen: "127.0.0.1:4000".into(),
            },
            vec![],
        ),
        (
            Msg::PeerTable {
                addrs: vec!["a:1".into(), "b:2".into()],
            },
            vec![],
        ),
        (
            Msg::Proto {
                proto: 0,
                msg: ProtoMsg::ReadReq { page: 42 },
            },
            vec![],
        ),
        (
            Msg::Proto {
                proto: 0,
                msg: ProtoMsg::Grant {
                    page: u64::MAX,
                    access: Access::Read,
                    with_data: true,
                },
            },
            vec![0xab; 4096],
        ),
        (
            Msg::Proto {
                proto: 0,
                msg: ProtoMsg::GrantExclusive {
                    page: 77,
                    with_data: true,
                },
            },
            vec![0xcd; 4096],
        ),
        (
            Msg::Proto {
                proto: 1,
                msg: ProtoMsg::FwdExclusive {
                    page: 78,
                    to: 3,
                    with_data: false,
                },
            },
            vec![],
        ),
        (
            Msg::Proto {
                proto: 0,
                msg: ProtoMsg::ExclusiveUnused { page: 79 },
            },
            vec![],
        ),
        (
            Msg::Proto {
                proto: 0,
                msg: ProtoMsg::Push { page: 80 },
            },
            vec![7; 64],
        ),
        (
            Msg::Proto {
                proto: 0,
                msg: ProtoMsg::Dropped { page: 81 },
            },
            vec![],
        ),
        (
            Msg::Proto {
                proto: 0,
                msg: ProtoMsg::DropAck { page: 82 },
            },
            vec![],
        ),
        (
            Msg::Proto {
                proto: 0,
                msg: ProtoMsg::AheadAsk { page: 83, count: 8 },
            },
            vec![],
        ),
        (
            Msg::Proto {
                proto: 0,
                msg: ProtoMsg::AheadCopy { page: 84 },
            },
            vec![5; 64],
        ),
        (
            Msg::Proto {
                proto: 0,
                msg: ProtoMsg::HomeMoved {
                    page: 85,
                    copy_kept: true,
                },
            },
            vec![],
        ),
        (
            Msg::Proto {
                proto: 0,
                msg: ProtoMsg::HomeTaken { page: 86 },
            },
            vec![],
        ),
        (
            Msg::Sync(SyncMsg::LockGrant {
                lock: 9,
                releases: 7,
                notices: vec![
                    LockNotice {
                        page: 1,
                        epoch: 0,
                        release: 2,
                    },
                    LockNotice {
                        page: 2,
                        epoch: 5,
                        release: 7,
                    },
                    LockNotice {
                        page: 3,
                        epoch: 1,
                        release: 1,
                    },
                ],
            }),
            vec![],
        ),
        (
            Msg::Sync(SyncMsg::BarrierArrive {
                barrier: 0,
                count: 4,
                notices: vec![],
            }),
            vec![],
        ),
        (Msg::Goodbye, vec![]),
        (Msg::User { tag: 7 }, vec![9; 100]),
        (Msg::HomeQuery { page: 12 }, vec![]),
        (Msg::HomeIs { page: 12, home: 3 }, vec![]),
        (
            Msg::Sync(SyncMsg::SemPost {
                sem: 5,
                notices: vec![1],
            }),
            vec![],
        ),
        (
            Msg::Proto {
                proto: 2,
                msg: ProtoMsg::Diffs {
                    token: 1,
                    diffed: vec![4, 5],
                    pushed: vec![6],
                },
            },
            vec![1, 2, 3],
        ),
        (
            Msg::Abort {
                reason: "node 2 lost".into(),
                code: 70,
            },
            vec![1, 2, 3],
        ),
    ]
}

#[test]
fn round_trip_every_sample() {
    for (i, (msg, data)) in samples().into_iter().enumerate() {
        let frame = encode(&msg, 2, i as u32, &data).unwrap();
        let f = decode(&frame).unwrap();
        assert_eq!(f.msg, msg);
        assert_eq!(f.data, &data[..]);
        assert_eq!(f.header.source, 2);
        assert_eq!(f.header.seq, i as u32);
        assert_eq!(f.header.kind, msg.kind());
    }
}

#[test]
fn every_truncation_is_an_error() {
    for (msg, data) in samples() {
        let frame = encode(&msg, 0, 0, &data).unwrap();
        for cut in 0..frame.len() {
            assert!(
                decode(&frame[..cut]).is_err(),
                "prefix of {cut} bytes accepted for {msg:?}"
            );
        }
    }
}

#[test]
fn bad_magic_version_and_lengths_are_rejected() {
    let frame = encode(&Msg::Goodbye, 0, 0, &[]).unwrap();
    let mut f = frame.clone();
    f[0] ^= 1;
    assert!(matches!(decode(&f), Err(WireError::BadMagic(_))));
    let mut f = frame.clone();
    f[4] = 99;
    assert_eq!(decode(&f), Err(WireError::BadVersion(99)));
    let mut f = frame.clone();
    f[12..16].copy_from_slice(&(MAX_CTRL_LEN + 1).to_le_bytes());
    assert_eq!(decode(&f), Err(WireError::CtrlTooLong(MAX_CTRL_LEN + 1)));
    let mut f = frame.clone();
    f[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(decode(&f), Err(WireError::DataTooLong(u32::MAX)));
    let mut f = frame.clone();
    f[5] = 3; // kind says Proto, payload says Goodbye
    assert!(matches!(decode(&f), Err(WireError::KindMismatch { .. })));
    let mut f = frame;
    f.push(0);
    assert!(decode(&f).is_err(), "trailing byte accepted");
}

#[test]
fn extra_bytes_inside_the_control_payload_are_rejected() {
    let mut frame = encode(&Msg::Goodbye, 0, 0, &[]).unwrap();
    // Grow ctrl_len by one and append a byte: postcard would decode a prefix; we must refuse.
    let mut h = Header::parse(&frame).unwrap();
    h.ctrl_len += 1;
    frame[..HEADER_LEN].copy_from_slice(&h.emit());
    frame.push(0);
    assert!(matches!(decode(&frame), Err(WireError::Decode(_))));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
        let _ = decode(&bytes);
        let _ = Header::parse(&bytes);
    }

    #[test]
    fn random_bytes_behind_a_valid_header_never_panic(
        body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120),
        kind in 0u8..8,
        split in 0usize..120,
    ) {
        let ctrl = split.min(body.len());
        let h = Header { kind, flags: 0, source: 1, ctrl_len: ctrl as u32, data_len: (body.len() - ctrl) as u32, seq: 0 };
        let mut frame = h.emit().to_vec();
        frame.extend_from_slice(&body);
        let _ = decode(&frame);
    }

    #[test]
    fn lock_grants_round_trip(lock in proptest::prelude::any::<u64>(), releases in proptest::prelude::any::<u64>(), notices in proptest::collection::vec(proptest::prelude::any::<(u64, u64, u64)>(), 0..50)) {
        let notices = notices.into_iter().map(|(page, epoch, release)| LockNotice { page, epoch, release }).collect();
        let m = Msg::Sync(SyncMsg::LockGrant { lock, releases, notices });
        let f = encode(&m, 5, 1, &[]).unwrap();
        proptest::prop_assert_eq!(decode(&f).unwrap().msg, m);
    }
}

/// One message of every `ProtoMsg` kind. The match has no wildcard: a new kind does not
/// compile until it is listed here, so the name lists below stay checked against it.
fn one_proto_msg_of_each_kind() -> Vec<ProtoMsg> {
    let all = vec![
        ProtoMsg::ReadReq { page: 1 },
        ProtoMsg::WriteReq { page: 1 },
        ProtoMsg::FwdRead { page: 1, to: 2 },
        ProtoMsg::FwdWrite {
            page: 1,
            to: 2,
            with_data: true,
        },
        ProtoMsg::Inval { page: 1 },
        ProtoMsg::InvalAck { page: 1 },
        ProtoMsg::Grant {
            page: 1,
            access: Access::Read,
            with_data: true,
        },
        ProtoMsg::Done { page: 1 },
        ProtoMsg::Diffs {
            token: 1,
            diffed: vec![1],
            pushed: vec![],
        },
        ProtoMsg::DiffAck { token: 1, page: 1 },
        ProtoMsg::FwdExclusive {
            page: 1,
            to: 2,
            with_data: false,
        },
        ProtoMsg::GrantExclusive {
            page: 1,
            with_data: true,
        },
        ProtoMsg::ExclusiveUnused { page: 1 },
        ProtoMsg::Push { page: 1 },
        ProtoMsg::Dropped { page: 1 },
        ProtoMsg::DropAck { page: 1 },
        ProtoMsg::AheadAsk { page: 1, count: 8 },
        ProtoMsg::AheadCopy { page: 1 },
        ProtoMsg::HomeMoved {
            page: 1,
            copy_kept: true,
        },
        ProtoMsg::HomeTaken { page: 1 },
        ProtoMsg::ExclusiveWritten { page: 1 },
    ];
    for m in &all {
        match m {
            ProtoMsg::ReadReq { .. }
            | ProtoMsg::WriteReq { .. }
            | ProtoMsg::FwdRead { .. }
            | ProtoMsg::FwdWrite { .. }
            | ProtoMsg::Inval { .. }
            | ProtoMsg::InvalAck { .. }
            | ProtoMsg::Grant { .. }
            | ProtoMsg::Done { .. }
            | ProtoMsg::Diffs { .. }
            | ProtoMsg::DiffAck { .. }
            | ProtoMsg::FwdExclusive { .. }
            | ProtoMsg::GrantExclusive { .. }
            | ProtoMsg::ExclusiveUnused { .. }
            | ProtoMsg::Push { .. }
            | ProtoMsg::Dropped { .. }
            | ProtoMsg::DropAck { .. }
            | ProtoMsg::AheadAsk { .. }
            | ProtoMsg::AheadCopy { .. }
            | ProtoMsg::HomeMoved { .. }
            | ProtoMsg::HomeTaken { .. }
            | ProtoMsg::ExclusiveWritten { .. } => {}
        }
    }
    all
}

#[test]
fn the_page_request_and_grant_names_are_those_of_the_messages_picked() {
    let mut requests = Vec::new();
    let mut grants = Vec::new();
    for m in one_proto_msg_of_each_kind() {
        let name = Msg::Proto {
            proto: 0,
            msg: m.clone(),
        }
        .stat_name();
        assert_eq!(
            m.is_page_request(),
            PAGE_REQUEST_NAMES.contains(&name),
            "{name}"
        );
        assert_eq!(
            m.is_page_grant(),
            PAGE_GRANT_NAMES.contains(&name),
            "{name}"
        );
        if m.is_page_request() {
            requests.push(name);
        }
        if m.is_page_grant() {
            grants.push(name);
        }
    }
    // Every listed name is some message's.
    assert_eq!(requests.len(), PAGE_REQUEST_NAMES.len());
    assert_eq!(grants.len(), PAGE_GRANT_NAMES.len());
}
