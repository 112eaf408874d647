//! µDECK across real processes: the test binary re-executes itself for ranks 1 and 2, which
//! start DECK from the environment exactly as under `svmrun` (SVM_RANK, SVM_SIZE, SVM_COORD,
//! SVM_JOB_KEY). Every test has a hard deadline.

use super::*;
use std::process::{Child, Command};
use std::sync::mpsc;

const ROLE_ENV: &str = "SVM_UDECK_TEST_CHILD";
const NODES: u16 = 3;
const THREADS: u32 = 8;
const PER_THREAD: u32 = 500;

struct Kids(Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn key_hex(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ nanos as u64 ^ std::process::id() as u64;
    (0..32)
        .map(|i| {
            for b in tag.bytes().chain([i as u8]) {
                h ^= b as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
            format!("{:02x}", (h >> 24) as u8)
        })
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port")
}

/// What every node does: name server, mailbox passing, concurrent posts, group operations.
fn scenario(deck: Arc<Deck>) {
    let me = deck.node();
    assert_eq!(deck.nodes(), NODES);
    if me == 0 {
        let sink = deck.mbox_create_named("sink").expect("bind sink");
        // Clients fetch "server" before it exists: they must wait, then succeed.
        std::thread::sleep(Duration::from_millis(300));
        let server = deck.mbox_create_named("server").expect("bind server");
        for _ in 1..NODES {
            let mut req = server
                .retrieve_timeout(Duration::from_secs(20))
                .expect("request");
            let reply_to = req.unpack::<MboxId>().expect("mbox in the message");
            let v = req.unpack::<i64>().expect("value");
            let mut nested = req.unpack::<Message>().expect("nested message");
            assert_eq!(
                nested.unpack_bytes().expect("bytes"),
                format!("from {}", reply_to.node).into_bytes()
            );
            let mut ans = Message::new(16);
            ans.pack(&(v * 2)).unwrap();
            deck.post(reply_to, &ans)
                .expect("reply through the received mailbox");
        }
        // 8 threads on each other node post concurrently into one mailbox.
        let mut next: HashMap<(u16, u32), u32> = HashMap::new();
        for _ in 0..(NODES as u32 - 1) * THREADS * PER_THREAD {
            let mut m = sink
                .retrieve_timeout(Duration::from_secs(20))
                .expect("posted message");
            let (node, t, i) = (
                m.unpack::<u16>().unwrap(),
                m.unpack::<u32>().unwrap(),
                m.unpack::<u32>().unwrap(),
            );
            let e = next.entry((node, t)).or_insert(0);
            assert_eq!(*e, i, "messages of one thread arrive in order");
            *e += 1;
        }
        assert_eq!(next.len(), (NODES as usize - 1) * THREADS as usize);
        assert!(next.values().all(|v| *v == PER_THREAD));
        assert!(sink.try_retrieve().is_none());
    } else {
        let t0 = Instant::now();
        let server = deck
            .fetch_timeout("server", Duration::from_secs(20))
            .expect("fetch waits for bind");
        assert!(
            t0.elapsed() >= Duration::from_millis(100),
            "fetch returned before the name was bound"
        );
        assert_eq!(server.node, 0);
        let reply = deck.mbox_create();
        let mut req = Message::new(256);
        req.pack(&reply.id()).unwrap();
        req.pack(&(me as i64 * 10)).unwrap();
        let mut nested = Message::new(64);
        nested.pack_bytes(format!("from {me}").as_bytes()).unwrap();
        req.pack(&nested).unwrap();
        deck.post(server, &req).expect("post request");
        let mut ans = reply
            .retrieve_timeout(Duration::from_secs(20))
            .expect("reply");
        assert_eq!(ans.unpack::<i64>().unwrap(), me as i64 * 20);
        let sink = deck.fetch("sink").expect("fetch sink");
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let d = deck.clone();
                thread::spawn(move || {
                    for i in 0..PER_THREAD {
                        let mut m = Message::new(32);
                        m.pack(&d.node()).unwrap();
                        m.pack(&t).unwrap();
                        m.pack(&i).unwrap();
                        d.post(sink, &m).expect("post");
                    }
                })
                .unwrap()
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
    // Group operations.
    let mut b = Message::new(64);
    if me == 1 {
        b.pack(&777u32).unwrap();
    }
    deck.broadcast(1, &mut b).unwrap();
    assert_eq!(b.unpack::<u32>().unwrap(), 777);
    let mut g = Message::new(16);
    g.pack(&(me as u64 + 100)).unwrap();
    match deck.gather(2, &g).unwrap() {
        Some(all) => {
            assert_eq!(me, 2);
            for (r, mut m) in all.into_iter().enumerate() {
                assert_eq!(m.unpack::<u64>().unwrap(), r as u64 + 100);
            }
        }
        None => assert_ne!(me, 2),
    }
    let sum = deck.reduce(0, me as i64 + 1, |a, b| a + b).unwrap();
    assert_eq!(sum, if me == 0 { Some(6) } else { None });
    for _ in 0..5 {
        deck.barrier().unwrap();
    }
    assert!(deck.errors().is_empty(), "{:?}", deck.errors());
    deck.done();
}

fn run(short: &str, transport: Transport) {
    if std::env::var(ROLE_ENV).ok().as_deref() == Some(short) {
        std::thread::spawn(|| {
            std::thread::sleep(Duration::from_secs(90));
            eprintln!("udeck test child: deadline exceeded");
            std::process::exit(3);
        });
        let deck = Deck::init(Some(transport)).expect("init from the environment");
        scenario(deck);
        std::process::exit(0);
    }
    let short = short.to_string();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(move || {
            let key = key_hex(&short);
            let coord = format!("127.0.0.1:{}", free_port());
            let exe = std::env::current_exe().unwrap();
            let name = format!(
                "{}::{short}",
                module_path!().trim_start_matches("svm_comm::")
            );
            let mut kids = Kids(Vec::new());
            for rank in 1..NODES {
                kids.0.push(
                    Command::new(&exe)
                        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
                        .env(ROLE_ENV, &short)
                        .env("SVM_RANK", rank.to_string())
                        .env("SVM_SIZE", NODES.to_string())
                        .env("SVM_COORD", &coord)
                        .env("SVM_JOB_KEY", &key)
                        .env_remove("SVM_COORD_FD")
                        .spawn()
                        .unwrap(),
                );
            }
            let boot = Bootstrap::from_lookup(&|k| match k {
                "SVM_RANK" => Some("0".into()),
                "SVM_SIZE" => Some(NODES.to_string()),
                "SVM_COORD" => Some(coord.clone()),
                "SVM_JOB_KEY" => Some(key.clone()),
                _ => None,
            })
            .unwrap();
            let deck = Deck::init_with(&boot, transport, Duration::from_secs(30)).expect("init");
            scenario(deck);
            for c in &mut kids.0 {
                assert!(c.wait().unwrap().success(), "a node failed");
            }
        });
        let _ = tx.send(r);
    });
    match rx.recv_timeout(Duration::from_secs(90)) {
        Ok(Ok(())) => {}
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("µDECK test exceeded its deadline"),
    }
}

#[test]
fn udeck_over_shared_memory() {
    run("udeck_over_shared_memory", Transport::Sci);
}

#[test]
fn udeck_over_tcp() {
    run("udeck_over_tcp", Transport::Tcp);
}
