//! Links to the peers on this host over Unix-domain stream sockets.
//!
//! On one host a TCP connection costs the TCP stack's work twice per frame (the sender's
//! `sendmsg` also runs the receiver's TCP input on loopback): 3.8 µs to write and 3.7 µs to
//! read a 4 KiB frame on the development machine, against 1.6–1.8 µs each over a Unix-domain
//! stream socket. A remote page fault is two or three such frames (`svmrun -n 2 pagefault`:
//! 38.9 → 33.0 µs per fault, medians; SPLASH-2 at 4 nodes on 2 CPUs ~0.8× the time). On by
//! default (`SVM_UNIX_SOCKETS=0` keeps TCP); docs/configuration.md weighs it.
//!
//! After the TCP mesh is up (it is the rendezvous, and the links to other hosts), every node
//! that has a peer on this host with a higher rank listens on an abstract Unix socket named
//! after the job (`@svm-<hash of the job key and the coordinator address>-<rank>`: no file to
//! clean up, gone with the process, private to the network namespace). Each node connects to
//! its lower-ranked local peers and accepts from its higher-ranked ones. Both directions carry a
//! `Hello` with the job key, compared in constant time: a stranger on the name is refused and
//! logged, and a node answering under the name proves it belongs to the job. Connecting to the
//! lower ranks never waits for their answer before accepting from the higher ones, so no two
//! nodes wait for each other. The listener is closed once every local peer is linked.

use std::hash::Hasher;
use std::io::ErrorKind;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::time::{Duration, Instant};

use crate::bootstrap::Bootstrap;
use crate::transport::CommError;
use crate::wire::{Msg, NodeId};

use super::{check_hello, read_frame, write_msg, TcpLink, HANDSHAKE_DEADLINE};

/// The abstract socket name node `rank` of this job listens on.
fn socket_name(boot: &Bootstrap, rank: NodeId) -> String {
    // Not the key itself: abstract names are visible to every process of the host
    // (`/proc/net/unix`). The coordinator address tells concurrent jobs with one key apart.
    let mut h = fnv::FnvHasher::default();
    h.write(&boot.job_key);
    h.write(boot.coord.as_deref().unwrap_or("").as_bytes());
    h.write(&boot.size.to_le_bytes());
    format!("svm-{:016x}-{rank}", h.finish())
}

fn setup(me: NodeId, what: String) -> CommError {
    CommError::Setup { me, what }
}

fn hello(boot: &Bootstrap) -> Msg {
    Msg::Hello {
        rank: boot.rank,
        size: boot.size,
        key: boot.job_key,
        listen: "local".into(),
    }
}

/// Reads a peer's `Hello` from `stream` within `wait`: its rank if it holds the job key.
fn read_hello(stream: &mut UnixStream, boot: &Bootstrap, wait: Duration) -> Result<NodeId, String> {
    stream
        .set_read_timeout(Some(wait.max(Duration::from_millis(1))))
        .map_err(|e| e.to_string())?;
    let (msg, _) = read_frame(stream)?;
    let (rank, _) = check_hello(&msg, &boot.job_key, boot.size)?;
    Ok(rank)
}

/// Connects to `peer`'s socket, retrying while it is not bound yet, until `deadline`.
fn connect(boot: &Bootstrap, peer: NodeId, deadline: Instant) -> Result<UnixStream, CommError> {
    let me = boot.rank;
    let name = socket_name(boot, peer);
    let addr = SocketAddr::from_abstract_name(name.as_bytes())
        .map_err(|e| setup(me, format!("local socket name @{name}: {e}")))?;
    let mut pause = Duration::from_micros(200);
    loop {
        match UnixStream::connect_addr(&addr) {
            Ok(s) => return Ok(s),
            Err(e)
                if matches!(e.kind(), ErrorKind::ConnectionRefused | ErrorKind::NotFound)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(setup(
                    me,
                    format!(
                        "could not connect to node {peer} on this host (local socket @{name}): \
                         {e}; is it running? (SVM_UNIX_SOCKETS=0 uses TCP instead)"
                    ),
                ))
            }
        }
    }
}

/// Links to every rank `j` with `local[j]` (other than this node) over Unix-domain sockets;
/// `None` for the others. `local` is this node's view (`Mesh::same_host(me)`); the views of
/// two nodes must agree about each other, as `same_host`'s do (it is symmetric).
pub fn establish_local(
    boot: &Bootstrap,
    local: &[bool],
    timeout: Duration,
) -> Result<Vec<Option<TcpLink>>, CommError> {
    let me = boot.rank;
    let n = boot.size as usize;
    let deadline = Instant::now() + timeout;
    let is_local = |r: usize| r != me as usize && local.get(r).copied().unwrap_or(false);
    let lower: Vec<NodeId> = (0..me as usize)
        .filter(|&r| is_local(r))
        .map(|r| r as NodeId)
        .collect();
    let mut higher: Vec<NodeId> = (me as usize + 1..n)
        .filter(|&r| is_local(r))
        .map(|r| r as NodeId)
        .collect();
    let mut links: Vec<Option<TcpLink>> = (0..n).map(|_| None).collect();

    let listener = if higher.is_empty() {
        None
    } else {
        let name = socket_name(boot, me);
        let addr = SocketAddr::from_abstract_name(name.as_bytes())
            .map_err(|e| setup(me, format!("local socket name @{name}: {e}")))?;
        let l = UnixListener::bind_addr(&addr).map_err(|e| {
            setup(
                me,
                format!(
                    "cannot listen on the local socket @{name}: {e} (another process holds the \
                     name; SVM_UNIX_SOCKETS=0 uses TCP instead)"
                ),
            )
        })?;
        l.set_nonblocking(true)
            .map_err(|e| setup(me, format!("local listener: {e}")))?;
        Some(l)
    };

    // Connect to the lower ranks and say who this node is; their answers are read last.
    let mut pending: Vec<(NodeId, UnixStream)> = Vec::with_capacity(lower.len());
    for &peer in &lower {
        let mut s = connect(boot, peer, deadline)?;
        write_msg(&mut s, me, &hello(boot)).map_err(|e| {
            setup(
                me,
                format!("sending the handshake to node {peer} on this host: {e}"),
            )
        })?;
        pending.push((peer, s));
    }

    // Accept the higher ranks.
    if let Some(l) = &listener {
        while !higher.is_empty() {
            let mut s = match l.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let missing: Vec<String> = higher.iter().map(|r| r.to_string()).collect();
                        return Err(setup(
                            me,
                            format!(
                                "node(s) {} on this host did not connect to the local socket \
                                 within {:.1} s (are they running? all with the same \
                                 SVM_UNIX_SOCKETS?)",
                                missing.join(", "),
                                timeout.as_secs_f64()
                            ),
                        ));
                    }
                    std::thread::sleep(Duration::from_micros(200));
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(setup(me, format!("accepting on the local socket: {e}"))),
            };
            let _ = s.set_nonblocking(false);
            let rank = match read_hello(&mut s, boot, HANDSHAKE_DEADLINE) {
                Ok(r) if higher.contains(&r) => r,
                Ok(r) => {
                    refuse(
                        me,
                        &format!("a connection claiming rank {r}, not expected here"),
                    );
                    continue;
                }
                Err(why) => {
                    refuse(me, &why);
                    continue;
                }
            };
            write_msg(&mut s, me, &hello(boot))
                .map_err(|e| setup(me, format!("answering node {rank} on this host: {e}")))?;
            higher.retain(|&r| r != rank);
            links[rank as usize] = Some(
                TcpLink::from_unix(me, rank, s)
                    .map_err(|e| setup(me, format!("link to node {rank}: {e}")))?,
            );
        }
    }
    drop(listener);

    // The lower ranks' answers: each proves the node behind the name belongs to the job.
    // A lower rank answers once it has connected to its own lower ranks: wait up to the
    // deadline, not just the handshake's.
    for (peer, mut s) in pending {
        let wait = deadline.saturating_duration_since(Instant::now());
        match read_hello(&mut s, boot, wait) {
            Ok(r) if r == peer => {}
            Ok(r) => {
                return Err(setup(
                    me,
                    format!("the local socket of node {peer} was answered by node {r}"),
                ))
            }
            Err(why) => {
                return Err(setup(
                    me,
                    format!(
                        "the local socket of node {peer} did not answer as a node of this job: \
                         {why}"
                    ),
                ))
            }
        }
        links[peer as usize] = Some(
            TcpLink::from_unix(me, peer, s)
                .map_err(|e| setup(me, format!("link to node {peer}: {e}")))?,
        );
    }
    Ok(links)
}

fn refuse(me: NodeId, why: &str) {
    eprintln!("svm: node {me}: refused a connection on its local socket: {why}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::Launcher;
    use crate::transport::{Link, RecvBuf};
    use crate::wire::{self, KEY_LEN};
    use std::io::Read;

    /// A job of `size` ranks with a coordinator address no other test uses (the socket names
    /// derive from it).
    fn boot(rank: NodeId, size: NodeId, key: [u8; KEY_LEN], job: &str) -> Bootstrap {
        Bootstrap {
            rank,
            size,
            launcher: Launcher::Single,
            coord: Some(format!("local-test-{}-{job}", std::process::id())),
            coord_fd: None,
            job_key: key,
            listen: None,
            advertise: None,
        }
    }

    /// Every rank establishes at once; `local[r]` is rank r's view (`Mesh::same_host(r)`).
    fn establish_all(
        local: Vec<Vec<bool>>,
        job: &'static str,
    ) -> Vec<Result<Vec<Option<TcpLink>>, CommError>> {
        let size = local.len() as NodeId;
        let handles: Vec<_> = local
            .into_iter()
            .enumerate()
            .map(|(r, local)| {
                std::thread::spawn(move || {
                    let b = boot(r as NodeId, size, [7; KEY_LEN], job);
                    establish_local(&b, &local, Duration::from_secs(10))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    }

    fn ping(from: &TcpLink, to: &TcpLink, tag: u32) {
        let frame = wire::encode(&Msg::Goodbye, 0, tag, &[]).expect("encode");
        from.send(&[&frame]).expect("send");
        let mut buf = RecvBuf::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            assert!(to.recv_available(&mut buf).expect("recv"), "link closed");
            if let Some(f) = buf.next_frame().expect("frame") {
                assert_eq!(f, &frame[..]);
                return;
            }
            assert!(Instant::now() < deadline, "no frame within 5 s");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn every_pair_of_local_nodes_gets_a_unix_link_that_carries_frames() {
        let all: Vec<Vec<Option<TcpLink>>> = establish_all(vec![vec![true; 4]; 4], "mesh")
            .into_iter()
            .map(|r| r.expect("establish"))
            .collect();
        for (i, links) in all.iter().enumerate() {
            for (j, l) in links.iter().enumerate() {
                assert_eq!(l.is_some(), i != j, "node {i} link to {j}");
                if let Some(l) = l {
                    assert_eq!(l.kind(), "unix");
                }
            }
        }
        // Every ordered pair: a frame from i's link to j arrives on j's link from i.
        let pairs: Vec<(usize, usize)> = (0..4)
            .flat_map(|i| (0..4).filter(move |&j| j != i).map(move |j| (i, j)))
            .collect();
        for (i, j) in pairs {
            let a = all[i][j].as_ref().expect("link");
            let b = all[j][i].as_ref().expect("link");
            ping(a, b, i as u32);
        }
    }

    #[test]
    fn only_the_peers_marked_local_are_linked() {
        // Ranks 0 and 2 on this host, 1 elsewhere (its TCP links stay).
        let (on, off) = (vec![true, false, true], vec![false, true, false]);
        let res = establish_all(vec![on.clone(), off, on], "partial");
        let (r0, r2) = (res[0].as_ref().expect("0"), res[2].as_ref().expect("2"));
        assert!(r0[2].is_some() && r0[1].is_none());
        assert!(r2[0].is_some() && r2[1].is_none());
        // Rank 1 has no peer on its host: no listener, no link.
        assert!(res[1].as_ref().expect("1").iter().all(Option::is_none));
    }

    #[test]
    fn a_stranger_on_the_socket_is_refused_and_the_job_still_links() {
        let size = 2;
        let b0 = boot(0, size, [9; KEY_LEN], "stranger");
        let name = socket_name(&b0, 0);
        let node0 = std::thread::spawn(move || {
            establish_local(&b0, &[true, true], Duration::from_secs(10))
        });
        // The stranger connects first, with the wrong key.
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("name");
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut stranger = loop {
            match UnixStream::connect_addr(&addr) {
                Ok(s) => break s,
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => panic!("node 0 never listened: {e}"),
            }
        };
        let wrong = Msg::Hello {
            rank: 1,
            size,
            key: [1; KEY_LEN],
            listen: "local".into(),
        };
        write_msg(&mut stranger, 1, &wrong).expect("stranger writes");
        let b1 = boot(1, size, [9; KEY_LEN], "stranger");
        let links1 = establish_local(&b1, &[true, true], Duration::from_secs(10)).expect("node 1");
        let links0 = node0.join().expect("thread").expect("node 0");
        ping(
            links1[0].as_ref().expect("1->0"),
            links0[1].as_ref().expect("0<-1"),
            1,
        );
        // The stranger got nothing but the end of the connection.
        stranger
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut got = Vec::new();
        stranger.read_to_end(&mut got).expect("eof");
        assert!(
            got.is_empty(),
            "the stranger was answered: {} bytes",
            got.len()
        );
    }

    #[test]
    fn a_local_peer_that_never_comes_is_a_clear_error() {
        let b = boot(1, 2, [3; KEY_LEN], "absent");
        let err = establish_local(&b, &[true, true], Duration::from_millis(300))
            .err()
            .expect("no peer: an error");
        let msg = err.to_string();
        assert!(
            msg.contains("node 1") && msg.contains("could not connect to node 0"),
            "{msg}"
        );
        // The other side: nobody connects to node 0.
        let b = boot(0, 2, [3; KEY_LEN], "absent0");
        let msg = establish_local(&b, &[true, true], Duration::from_millis(300))
            .err()
            .expect("no peer")
            .to_string();
        assert!(
            msg.contains("did not connect") && msg.contains("1"),
            "{msg}"
        );
    }
}
