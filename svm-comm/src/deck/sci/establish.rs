//! Setting up a DECK-SCI mesh: every node creates and exports its segment, maps every
//! peer's, and unlinks its files once every peer has mapped them (see the module docs of
//! `sci`).

use super::*;

/// Removes our segment file and pipes when dropped (at the end of setup, or when it failed).
struct Unlink(Vec<PathBuf>);

impl Drop for Unlink {
    fn drop(&mut self) {
        for p in self.0.drain(..) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Builds the DECK-SCI mesh of this node: creates and exports its segment, maps every peer's,
/// and unlinks its file once every peer has mapped it. `links[rank]` is `None` for this node.
/// Every node of the job must call it with the same configuration; `timeout` bounds the setup.
pub fn establish(
    boot: &Bootstrap,
    cfg: &DeckConfig,
    timeout: Duration,
) -> Result<Vec<Option<DeckLink>>, CommError> {
    let all = vec![true; boot.size as usize];
    establish_with(boot, cfg, timeout, &all)
}

/// [`establish`] with only the peers `local[i]` (those on this host; the relation must be the
/// same on every node, as it is when derived from addresses). The other entries stay None.
pub fn establish_with(
    boot: &Bootstrap,
    cfg: &DeckConfig,
    timeout: Duration,
    local: &[bool],
) -> Result<Vec<Option<DeckLink>>, CommError> {
    let me = boot.rank;
    // Peers that map our segment: every local one but ourselves.
    let attaching = local
        .iter()
        .enumerate()
        .filter(|(i, l)| **l && *i != me as usize)
        .count() as u32;
    let setup = |what: String| CommError::Setup { me, what };
    cfg.validate()
        .map_err(|e| setup(format!("DECK-SCI configuration: {e}")))?;
    let n = boot.size as usize;
    let geo = Geometry::new(cfg, n);
    let len = geo.seg_len();
    let deadline = Instant::now() + timeout;
    let path = segment_path(&cfg.dir, &boot.job_key, me);
    let mine = match Segment::create(&path, len) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // A leftover of a job with the same key: reuse the name only if its owner is dead.
            let owner = Segment::open(&path, len)
                .ok()
                .map(|s| s.u32_at(H_PID).load(Relaxed));
            if owner.is_some_and(pid_alive) {
                return Err(setup(format!(
                    "segment {} belongs to the running process {} (another job with the same SVM_JOB_KEY?)",
                    path.display(),
                    owner.unwrap_or(0)
                )));
            }
            let _ = std::fs::remove_file(&path);
            Segment::create(&path, len)
                .map_err(|e| setup(format!("cannot create {}: {e}", path.display())))?
        }
        Err(e) => {
            return Err(setup(format!(
                "cannot create the DECK-SCI segment {}: {e}",
                path.display()
            )))
        }
    };
    let mut guard = Unlink(vec![path.clone()]);
    // Our pipes (one per peer, read end ours) exist before the header says "ready", so a peer
    // that sees the segment ready can open its write end. Pollers want a byte from the start.
    let mut rx: Vec<Option<Fifo>> = (0..n).map(|_| None).collect();
    for (peer, slot) in rx.iter_mut().enumerate() {
        if peer == me as usize || !local.get(peer).copied().unwrap_or(false) {
            continue;
        }
        let fp = fifo_path(&cfg.dir, &boot.job_key, me, peer as NodeId);
        guard.0.push(fp.clone());
        *slot = Some(
            Fifo::create_reader(&fp)
                .map_err(|e| setup(format!("cannot create the pipe {}: {e}", fp.display())))?,
        );
        mine.u32_at(geo.block(peer) + C_POLL_ARMED).store(1, SeqCst);
    }
    geo.write_header(&mine, me as usize);
    let hub = Arc::new(Hub {
        me,
        mine: Arc::new(mine),
        geo,
        spin: cfg.spin,
    });
    let mut links: Vec<Option<DeckLink>> = (0..n).map(|_| None).collect();
    for (peer, slot) in links.iter_mut().enumerate() {
        if peer == me as usize || !local.get(peer).copied().unwrap_or(false) {
            continue;
        }
        let ppath = segment_path(&cfg.dir, &boot.job_key, peer as NodeId);
        let theirs = loop {
            let last = match Segment::open(&ppath, len) {
                Ok(s) if s.u32_at(H_READY).load(Acquire) == 1 => {
                    geo.check_header(&s, peer)
                        .map_err(|e| setup(format!("segment {}: {e}", ppath.display())))?;
                    if pid_alive(s.u32_at(H_PID).load(Relaxed)) {
                        break s;
                    }
                    "its owner is dead (a leftover)".to_string()
                }
                Ok(_) => "not ready yet".to_string(),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(setup(format!(
                    "timed out waiting for the DECK-SCI segment of node {peer} ({}: {last}); is it running with the same SVM_JOB_KEY?",
                    ppath.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let peer_pid = theirs.u32_at(H_PID).load(Relaxed);
        let fp = fifo_path(&cfg.dir, &boot.job_key, peer as NodeId, me);
        let tx = Fifo::open_writer(&fp)
            .map_err(|e| setup(format!("cannot open the pipe {}: {e}", fp.display())))?;
        // Only we open it for writing: its name can go.
        let _ = std::fs::remove_file(&fp);
        let Some(rx) = rx[peer].take() else {
            return Err(setup(format!("no pipe for node {peer}")));
        };
        // The last peer to map a segment removes its name, so no file outlives setup even if
        // its owner dies right after (the owner removes it too; one of them finds it gone).
        if theirs.u32_at(H_ATTACHED).fetch_add(1, SeqCst) + 1 == attaching {
            let _ = std::fs::remove_file(&ppath);
        }
        let pair = Arc::new(Pair {
            hub: hub.clone(),
            peer: peer as NodeId,
            peer_pid,
            theirs: Arc::new(theirs),
            send: Mutex::new(SendState {
                ring_w: 0,
                eager_w: 0,
                rdv_next: 0,
            }),
            recv: Mutex::new(RecvState {
                ring_r: 0,
                eager_r: 0,
                rdv: None,
                rdv_next: 0,
                eof: false,
            }),
            grants: Mutex::new(Grants {
                cursor: 0,
                views: Vec::new(),
            }),
            rx,
            tx,
            local_closed: AtomicBool::new(false),
            force: AtomicU8::new(0),
            queued: cfg.queued_sends,
            queue: outbox::Queue::default(),
        });
        *slot = Some(DeckLink(pair));
    }
    // Every peer has mapped our segment once the counter reaches n-1: the name can go.
    while hub.mine.u32_at(H_ATTACHED).load(SeqCst) < attaching {
        if Instant::now() >= deadline {
            return Err(setup(format!(
                "timed out waiting for {} peer(s) to map our DECK-SCI segment",
                attaching - hub.mine.u32_at(H_ATTACHED).load(SeqCst)
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(guard);
    Ok(links)
}
