//! DECK-SCI tests: real segments under /dev/shm, mapped by real processes (the test binary
//! re-executes itself for the peer) or by two threads of this process. Every test has a hard
//! deadline.

use super::*;
use crate::bootstrap::{Bootstrap, Launcher};
use crate::transport::{Link, RecvBuf};
use std::process::{Child, Command};
use std::sync::mpsc;

const CHILD_ENV: &str = "SVM_DECK_TEST_CHILD";
const KEY_ENV: &str = "SVM_DECK_TEST_KEY";

fn fresh_key(tag: &str) -> [u8; 32] {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut key = [0u8; 32];
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ nanos as u64 ^ ((std::process::id() as u64) << 32);
    for (i, k) in key.iter_mut().enumerate() {
        for b in tag.bytes().chain([i as u8]) {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        *k = (h >> 24) as u8;
    }
    key
}

fn hex(key: &[u8; 32]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

fn boot(rank: NodeId, size: NodeId, key: [u8; 32]) -> Bootstrap {
    Bootstrap {
        rank,
        size,
        launcher: Launcher::Single,
        coord: None,
        coord_fd: None,
        job_key: key,
        listen: None,
        advertise: None,
    }
}

fn test_name(short: &str) -> String {
    format!(
        "{}::{short}",
        module_path!().trim_start_matches("svm_comm::")
    )
}

/// Kills and reaps the child on drop.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_child(short: &str, key: &[u8; 32]) -> ChildGuard {
    let exe = std::env::current_exe().expect("test binary path");
    let name = test_name(short);
    let child = Command::new(exe)
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, short)
        .env(KEY_ENV, hex(key))
        .spawn()
        .expect("spawn the peer process");
    ChildGuard(child)
}

/// When this process is the child of test `short`, runs `body` with the job key and exits.
fn run_child(short: &str, deadline: Duration, body: impl FnOnce([u8; 32])) {
    if std::env::var(CHILD_ENV).ok().as_deref() != Some(short) {
        return;
    }
    let key = crate::bootstrap::parse_key(&std::env::var(KEY_ENV).expect("key")).expect("key");
    std::thread::spawn(move || {
        std::thread::sleep(deadline);
        eprintln!("deck test child {CHILD_ENV}: deadline exceeded");
        std::process::exit(3);
    });
    body(key);
    std::process::exit(0);
}

/// Runs `f` on another thread and fails the test if it does not finish within `secs`.
fn with_deadline<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("test exceeded its deadline of {secs} s"),
    }
}

fn pattern(i: u64, n: usize) -> Vec<u8> {
    (0..n)
        .map(|j| (i.wrapping_mul(131) as usize + j * 7 + (j >> 9)) as u8)
        .collect()
}

fn link(mesh: &mut [Option<DeckLink>], peer: usize) -> DeckLink {
    mesh[peer].take().expect("link")
}

/// Both ranks of a two-node mesh in this process (two threads).
fn local_pair(tag: &str, cfg: &DeckConfig) -> (DeckLink, DeckLink) {
    let key = fresh_key(tag);
    let c1 = cfg.clone();
    let t = std::thread::spawn(move || {
        establish(&boot(1, 2, key), &c1, Duration::from_secs(10)).map_err(|e| e.to_string())
    });
    let mut m0 = establish(&boot(0, 2, key), cfg, Duration::from_secs(10)).expect("rank 0");
    let mut m1 = t.join().expect("join").expect("rank 1");
    for r in 0..2 {
        assert!(
            !segment_path(&cfg.dir, &key, r).exists(),
            "segment file left behind after setup"
        );
    }
    (link(&mut m0, 1), link(&mut m1, 0))
}

fn sizes(limit: usize) -> Vec<usize> {
    vec![
        0,
        1,
        61,
        62,
        63,
        64,
        limit - 1,
        limit,
        limit + 1,
        100_000,
        16 << 20,
    ]
}

const ORDER_MSGS: u64 = 20_000;

fn lcg(x: &mut u64) -> u64 {
    *x = x
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *x >> 33
}

#[test]
fn sizes_and_ordering_across_processes() {
    let cfg = DeckConfig::default();
    run_child(
        "sizes_and_ordering_across_processes",
        Duration::from_secs(100),
        |key| {
            let mut mesh =
                establish(&boot(1, 2, key), &cfg, Duration::from_secs(20)).expect("establish");
            let l = link(&mut mesh, 0);
            for (i, n) in sizes(cfg.msg_buf_limit).into_iter().enumerate() {
                let v = pattern(i as u64, n);
                l.send(&[&v[..n / 2], &v[n / 2..]]).expect("send");
            }
            let mut x = 7;
            for i in 0..ORDER_MSGS {
                let n = 8 + (lcg(&mut x) % 20_000) as usize;
                let mut v = pattern(i, n);
                v[..8].copy_from_slice(&i.to_le_bytes());
                l.send(&[&v]).expect("send");
            }
        },
    );
    with_deadline(100, move || {
        let key = fresh_key("sizes");
        let mut child = spawn_child("sizes_and_ordering_across_processes", &key);
        let mut mesh =
            establish(&boot(0, 2, key), &cfg, Duration::from_secs(20)).expect("establish");
        let l = link(&mut mesh, 1);
        let mut out = Vec::new();
        for (i, n) in sizes(cfg.msg_buf_limit).into_iter().enumerate() {
            assert!(
                l.recv_msg(&mut out, Duration::from_secs(30)).expect("recv"),
                "eof before message {i}"
            );
            assert_eq!(out.len(), n, "size of message {i}");
            assert!(
                out == pattern(i as u64, n),
                "contents of the {n}-byte message"
            );
        }
        let mut x = 7;
        for i in 0..ORDER_MSGS {
            let n = 8 + (lcg(&mut x) % 20_000) as usize;
            assert!(l.recv_msg(&mut out, Duration::from_secs(30)).expect("recv"));
            assert_eq!(u64::from_le_bytes(out[..8].try_into().unwrap()), i, "order");
            assert_eq!(out.len(), n);
            assert!(out[8..] == pattern(i, n)[8..], "contents of message {i}");
        }
        assert!(
            !l.recv_msg(&mut out, Duration::from_secs(30)).expect("eof"),
            "eof after the sender is done"
        );
        assert!(child.0.wait().expect("wait").success(), "child failed");
    });
}

const MILLION: u64 = 1_000_000;

#[test]
fn million_small_messages_fast_sender_slow_receiver() {
    let cfg = DeckConfig::default();
    run_child(
        "million_small_messages_fast_sender_slow_receiver",
        Duration::from_secs(150),
        |key| {
            let mut mesh =
                establish(&boot(1, 2, key), &cfg, Duration::from_secs(20)).expect("establish");
            let l = link(&mut mesh, 0);
            for i in 0..MILLION {
                l.send(&[&i.to_le_bytes()]).expect("send");
            }
        },
    );
    with_deadline(150, move || {
        let key = fresh_key("million");
        let mut child = spawn_child("million_small_messages_fast_sender_slow_receiver", &key);
        let mut mesh =
            establish(&boot(0, 2, key), &cfg, Duration::from_secs(20)).expect("establish");
        let l = link(&mut mesh, 1);
        // Let the ring fill so the sender has to wait for us.
        std::thread::sleep(Duration::from_millis(300));
        let mut out = Vec::new();
        for i in 0..MILLION {
            if i % 100_000 == 0 {
                std::thread::sleep(Duration::from_millis(30));
            }
            assert!(l.recv_msg(&mut out, Duration::from_secs(30)).expect("recv"));
            assert_eq!(out.len(), 8);
            assert_eq!(
                u64::from_le_bytes(out[..8].try_into().unwrap()),
                i,
                "lost or overwritten message"
            );
        }
        assert!(!l.recv_msg(&mut out, Duration::from_secs(30)).expect("eof"));
        assert!(child.0.wait().expect("wait").success(), "child failed");
    });
}

fn frame(i: u32, n: usize) -> (Vec<u8>, Vec<u8>) {
    let h = crate::wire::Header {
        kind: 200,
        flags: 0,
        source: 1,
        ctrl_len: 0,
        data_len: n as u32,
        seq: i,
    };
    (h.emit().to_vec(), pattern(i as u64, n))
}

const FRAME_SIZES: [usize; 8] = [0, 10, 38, 39, 5000, 8200, 300_000, 3 << 20];

#[test]
fn link_poll_path_across_processes() {
    let cfg = DeckConfig::default();
    run_child(
        "link_poll_path_across_processes",
        Duration::from_secs(100),
        |key| {
            let mut mesh =
                establish(&boot(1, 2, key), &cfg, Duration::from_secs(20)).expect("establish");
            let l = link(&mut mesh, 0);
            for i in 0..400u32 {
                let (h, d) = frame(i, FRAME_SIZES[i as usize % FRAME_SIZES.len()]);
                l.send(&[&h, &d]).expect("send");
                if i % 50 == 0 {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        },
    );
    with_deadline(100, move || {
        let key = fresh_key("poll");
        let mut child = spawn_child("link_poll_path_across_processes", &key);
        let mut mesh =
            establish(&boot(0, 2, key), &cfg, Duration::from_secs(20)).expect("establish");
        let l = link(&mut mesh, 1);
        let fd = l.poll_fd();
        let mut buf = RecvBuf::new();
        let mut got = 0u32;
        loop {
            // SAFETY: `fd` is the link's eventfd, open for as long as `l` lives (the whole loop).
            let bfd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            let mut pfd = [nix::poll::PollFd::new(bfd, nix::poll::PollFlags::POLLIN)];
            let n =
                nix::poll::poll(&mut pfd, nix::poll::PollTimeout::from(20_000u16)).expect("poll");
            assert!(n > 0, "poll timed out: the eventfd never became readable");
            let alive = l.recv_available(&mut buf).expect("recv_available");
            while let Some(f) = buf.next_frame().expect("frame") {
                let h = crate::wire::Header::parse(f).expect("header");
                assert_eq!(h.seq, got, "frame order");
                let (_, d) = frame(got, FRAME_SIZES[got as usize % FRAME_SIZES.len()]);
                assert!(
                    f[crate::wire::HEADER_LEN..] == d[..],
                    "frame {got} contents"
                );
                got += 1;
            }
            if !alive {
                break;
            }
        }
        assert_eq!(got, 400);
        assert_eq!(buf.pending(), 0);
        assert!(child.0.wait().expect("wait").success(), "child failed");
    });
}

#[test]
fn dead_receiver_is_an_error_not_a_hang() {
    let cfg = DeckConfig::default();
    run_child(
        "dead_receiver_is_an_error_not_a_hang",
        Duration::from_secs(60),
        |key| {
            let _mesh =
                establish(&boot(1, 2, key), &cfg, Duration::from_secs(20)).expect("establish");
            std::thread::sleep(Duration::from_secs(50));
        },
    );
    with_deadline(60, move || {
        let key = fresh_key("dead");
        let mut child = spawn_child("dead_receiver_is_an_error_not_a_hang", &key);
        let mut mesh =
            establish(&boot(0, 2, key), &cfg, Duration::from_secs(20)).expect("establish");
        let l = link(&mut mesh, 1);
        child.0.kill().expect("kill");
        child.0.wait().expect("reap");
        let mut err = None;
        for i in 0..100_000u64 {
            if let Err(e) = l.send(&[&i.to_le_bytes()]) {
                err = Some(e);
                break;
            }
        }
        let e = err.expect("sending to a dead receiver must fail once the ring is full");
        assert!(matches!(e, CommError::Lost { .. }), "{e}");
        assert!(e.to_string().contains("died"), "{e}");
        // A rendezvous waits for a grant: it must fail too.
        let big = vec![1u8; 1 << 20];
        assert!(l.send(&[&big]).is_err());
        // And the receive side reports the end of the connection.
        let mut out = Vec::new();
        assert!(!l.recv_msg(&mut out, Duration::from_secs(5)).expect("eof"));
    });
}

#[test]
fn corrupt_control_packets_are_errors() {
    with_deadline(30, || {
        let cfg = DeckConfig::default();
        let mut out = Vec::new();
        let mut p = [0u8; 62];
        // Unknown control kind.
        let (a, b) = local_pair("corrupt-kind", &cfg);
        p[0] = 9;
        a.debug_send_raw_slot(&p, LEN_CTRL, None).unwrap();
        let e = b.recv_msg(&mut out, Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e, CommError::Corrupt { .. }), "{e}");
        // Wrong sequence number, after a good message.
        let (a, b) = local_pair("corrupt-seq", &cfg);
        a.send(&[b"hello"]).unwrap();
        a.debug_send_raw_slot(&[0; 62], 3, Some(77)).unwrap();
        assert!(b.recv_msg(&mut out, Duration::from_secs(5)).unwrap());
        assert_eq!(out, b"hello");
        assert!(matches!(
            b.recv_msg(&mut out, Duration::from_secs(5)),
            Err(CommError::Corrupt { .. })
        ));
        // An eager packet pointing somewhere else than the next message.
        let (a, b) = local_pair("corrupt-eager", &cfg);
        p = [0; 62];
        p[0] = K_EAGER;
        p[8..16].copy_from_slice(&4096u64.to_le_bytes());
        p[16..20].copy_from_slice(&100u32.to_le_bytes());
        a.debug_send_raw_slot(&p, LEN_CTRL, None).unwrap();
        assert!(matches!(
            b.recv_msg(&mut out, Duration::from_secs(5)),
            Err(CommError::Corrupt { .. })
        ));
        // Rendezvous data without a request, through the Link interface.
        let (a, b) = local_pair("corrupt-rdv", &cfg);
        p = [0; 62];
        p[0] = K_RDV_DATA;
        p[16..20].copy_from_slice(&64u32.to_le_bytes());
        a.debug_send_raw_slot(&p, LEN_CTRL, None).unwrap();
        let mut rb = RecvBuf::new();
        assert!(matches!(
            b.recv_available(&mut rb),
            Err(CommError::Corrupt { .. })
        ));
        // An eager packet whose buffer header does not match.
        let (a, b) = local_pair("corrupt-hdr", &cfg);
        p = [0; 62];
        p[0] = K_EAGER;
        p[16..20].copy_from_slice(&100u32.to_le_bytes());
        a.debug_send_raw_slot(&p, LEN_CTRL, None).unwrap();
        assert!(matches!(
            b.recv_msg(&mut out, Duration::from_secs(5)),
            Err(CommError::Corrupt { .. })
        ));
    });
}

#[test]
fn forced_protocols_and_wraparound() {
    with_deadline(60, || {
        let cfg = DeckConfig {
            rdv_chunk: 4096,
            rdv_chunks: 2,
            ..DeckConfig::default()
        };
        let (a, b) = local_pair("forced", &cfg);
        let b = Arc::new(b);
        let cases: Vec<(Option<Protocol>, Vec<usize>)> = vec![
            (Some(Protocol::Short), vec![0, 1, 31, 62]),
            (Some(Protocol::Eager), vec![0, 1, 62, 63, 8192, 50_000]),
            (
                Some(Protocol::Rendezvous),
                vec![0, 1, 62, 4095, 4096, 4097, 8192, 100_000],
            ),
            (None, vec![0, 62, 63, 8192, 8193, 70_000]),
        ];
        let total: usize = cases.iter().map(|c| c.1.len()).sum::<usize>() * 50;
        let rb = b.clone();
        let reader = std::thread::spawn(move || {
            let mut out = Vec::new();
            let mut sizes = Vec::new();
            for _ in 0..total {
                assert!(rb.recv_msg(&mut out, Duration::from_secs(10)).unwrap());
                let i = u64::from_le_bytes({
                    let mut k = [0u8; 8];
                    let m = out.len().min(8);
                    k[..m].copy_from_slice(&out[..m]);
                    k
                });
                sizes.push((i, out.clone()));
            }
            sizes
        });
        let mut expect = Vec::new();
        let mut i = 0u64;
        for round in 0..50 {
            for (proto, ns) in &cases {
                a.set_protocol(*proto);
                for &n in ns {
                    let mut v = pattern(i + round, n);
                    let m = n.min(8);
                    v[..m].copy_from_slice(&i.to_le_bytes()[..m]);
                    a.send(&[&v]).unwrap();
                    expect.push(v);
                    i += 1;
                }
            }
        }
        a.set_protocol(Some(Protocol::Short));
        assert!(
            a.send(&[&[0u8; 63]]).is_err(),
            "protocol 1 refuses 63 bytes"
        );
        let got = reader.join().unwrap();
        assert_eq!(got.len(), expect.len());
        for (k, ((_, g), e)) in got.iter().zip(&expect).enumerate() {
            assert!(g == e, "message {k} of {} bytes differs", e.len());
        }
        assert_eq!(b.protocol_for(62), Protocol::Short);
        assert_eq!(b.protocol_for(8192), Protocol::Eager);
        assert_eq!(b.protocol_for(8193), Protocol::Rendezvous);
    });
}

#[test]
fn closed_link_gives_eof_and_send_error() {
    with_deadline(30, || {
        let (a, b) = local_pair("close", &DeckConfig::default());
        a.send(&[b"last"]).unwrap();
        a.close();
        let mut out = Vec::new();
        assert!(b.recv_msg(&mut out, Duration::from_secs(5)).unwrap());
        assert_eq!(out, b"last");
        assert!(!b.recv_msg(&mut out, Duration::from_secs(5)).unwrap());
        assert!(b.send(&[b"x"]).is_err());
        assert!(a.send(&[b"x"]).is_err());
        let e = b.recv_msg(&mut out, Duration::from_millis(10));
        assert!(matches!(e, Ok(false)));
    });
}

#[test]
fn receive_timeout_is_reported() {
    with_deadline(30, || {
        let (_a, b) = local_pair("timeout", &DeckConfig::default());
        let mut out = Vec::new();
        assert!(matches!(
            b.recv_msg(&mut out, Duration::from_millis(100)),
            Err(CommError::Timeout { .. })
        ));
        assert!(out.is_empty(), "nothing was received");
    });
}

#[test]
fn zero_copy_views_hold_their_chunks() {
    with_deadline(60, || {
        let cfg = DeckConfig {
            rdv_chunk: 8192,
            rdv_chunks: 4,
            ..DeckConfig::default()
        };
        let (a, b) = local_pair("views", &cfg);
        // Two-chunk messages: two views fill the area, the third waits for a release.
        let msgs: Vec<Vec<u8>> = (0..3).map(|i| pattern(i, 8193 + i as usize)).collect();
        let sent = msgs.clone();
        let sender = std::thread::spawn(move || {
            for m in &sent {
                a.send(&[m]).unwrap();
            }
            a
        });
        let va = b.recv_view(Duration::from_secs(10)).unwrap().unwrap();
        let vb = b.recv_view(Duration::from_secs(10)).unwrap().unwrap();
        assert!(va.is_in_place() && vb.is_in_place());
        assert!(va[..] == msgs[0][..] && vb[..] == msgs[1][..]);
        assert!(
            matches!(
                b.recv_view(Duration::from_millis(200)),
                Err(CommError::Timeout { .. })
            ),
            "the third message must wait while two views hold the whole area"
        );
        drop(va);
        let vc = b.recv_view(Duration::from_secs(10)).unwrap().unwrap();
        assert!(vc.is_in_place());
        assert!(vc[..] == msgs[2][..], "third message");
        assert!(vb[..] == msgs[1][..], "a held view is never overwritten");
        drop((vb, vc));
        let a = sender.join().unwrap();
        // Sizes around the area: in place when they fit, copied otherwise; small ones copied;
        // views and copying receives mixed; straddling messages restart at the area's start.
        let sizes = [
            0usize, 5, 62, 63, 8192, 8193, 16_384, 24_577, 32_768, 32_769, 100_000, 16_385,
        ];
        let total = sizes.len() * 30;
        let sender = std::thread::spawn(move || {
            for k in 0..total {
                let n = sizes[k % sizes.len()];
                a.send(&[&pattern(k as u64, n)]).unwrap();
            }
        });
        let mut out = Vec::new();
        for k in 0..total {
            let n = sizes[k % sizes.len()];
            let want = pattern(k as u64, n);
            if k % 7 == 3 {
                assert!(b.recv_msg(&mut out, Duration::from_secs(10)).unwrap());
                assert!(out == want, "copied message {k} of {n} bytes");
            } else {
                let v = b.recv_view(Duration::from_secs(10)).unwrap().unwrap();
                assert_eq!(
                    v.is_in_place(),
                    n > 8192 && n <= 32_768,
                    "message {k} of {n} bytes"
                );
                assert!(v[..] == want[..], "viewed message {k} of {n} bytes");
                if k % 5 == 0 {
                    assert!(v.into_vec() == want);
                }
            }
        }
        sender.join().unwrap();
    });
}

#[test]
fn pipe_wakes_the_poller_and_reports_eof() {
    with_deadline(30, || {
        let (a, b) = local_pair("pipe", &DeckConfig::default());
        let fd = b.poll_fd();
        let readable = |ms: u16| {
            let r = super::poll_readable(&[fd], nix::poll::PollTimeout::from(ms)).expect("poll");
            !r.is_empty()
        };
        let mut rb = RecvBuf::new();
        // Nothing yet: not readable; one byte per request of the poller.
        assert!(!readable(0));
        a.send(&[b"one"]).unwrap();
        assert!(readable(5000), "the sender's packet must wake the poller");
        assert!(b.recv_available(&mut rb).unwrap());
        assert_eq!(rb.pending(), 3);
        assert!(!readable(0), "drained");
        // The self-signal used when one call leaves packets behind.
        b.0.rx.signal_self().expect("signal_self");
        assert!(readable(0));
        assert!(b.recv_available(&mut rb).unwrap());
        assert!(!readable(0));
        // The sender goes away: the pipe reports it, and the link reads EOF.
        a.send(&[b"two"]).unwrap();
        drop(a);
        assert!(readable(5000));
        assert!(b.recv_available(&mut rb).unwrap(), "data first");
        assert_eq!(rb.pending(), 6);
        assert!(readable(5000), "EOF stays readable");
        assert!(!b.recv_available(&mut rb).unwrap(), "then EOF");
    });
}

/// Queued sends (the DSM engine's links): two nodes each send 24 MiB to the other before
/// either reads — with waiting sends both would wait forever for a receiver that never comes.
/// Every frame then arrives whole and in order on both sides.
#[test]
fn queued_sends_never_wait_for_the_receiver() {
    const FRAMES: u32 = 24;
    let size = |i: u32| match i % 4 {
        0 => 3 << 20, // rendezvous (above the 1 MiB eager limit)
        1 => 100,
        2 => 512 << 10,
        _ => 1 << 20,
    };
    with_deadline(60, move || {
        let mut cfg = DeckConfig::with_limit(DSM_MSG_BUF_LIMIT);
        cfg.queued_sends = true;
        let (a, b) = local_pair("queued", &cfg);
        for l in [&a, &b] {
            for i in 0..FRAMES {
                let (h, d) = frame(i, size(i));
                l.send(&[&h, &d]).expect("send");
            }
        }
        let mut bufs = [RecvBuf::new(), RecvBuf::new()];
        let mut got = [0u32; 2];
        while got != [FRAMES; 2] {
            for (k, l) in [&a, &b].into_iter().enumerate() {
                assert!(l.recv_available(&mut bufs[k]).expect("recv"), "link closed");
                while let Some(f) = bufs[k].next_frame().expect("frame") {
                    let h = crate::wire::Header::parse(f).expect("header");
                    assert_eq!(h.seq, got[k], "frame order");
                    let (_, d) = frame(got[k], size(got[k]));
                    assert!(f[crate::wire::HEADER_LEN..] == d[..], "frame contents");
                    got[k] += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // Closing drains nothing more and stops the sender threads.
        a.close();
        b.close();
    });
}
