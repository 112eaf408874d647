//! How a node fails: ending the job with a message naming what it waited for, and a lost
//! peer.

use super::*;

impl Node {
    // ----------------------------------------------------------------------------------------
    // Failure

    /// Ends this node with a diagnostic. Tells the peers why (best effort) so that their own
    /// messages name the cause.
    pub(super) fn fatal(&self, st: Option<&EngineState>, why: &str) -> ! {
        // This node is already ending the job on purpose (exit(status) in a personality): the
        // failures that follow (peers vanishing as they obey) must not replace its status.
        let ending = ENDING_CODE.load(Ordering::Acquire);
        if ending != NOT_ENDING {
            crate::sys::exit_now(ending);
        }
        let mut msg = format!("svm: node {}: {why}", self.me);
        if let Some(st) = st {
            msg.push_str(&self.describe_waits(st));
        }
        eprintln!("{msg}");
        self.end_job(EXIT_FAILURE, why)
    }

    /// Tells every peer to end with `code` (best effort) and ends this process with it.
    pub fn end_job(&self, code: i32, why: &str) -> ! {
        let _ = ENDING_CODE.compare_exchange(NOT_ENDING, code, Ordering::AcqRel, Ordering::Acquire);
        let abort = Msg::Abort {
            reason: format!("node {}: {why}", self.me),
            code,
        };
        if let Ok(frame) = wire::encode(&abort, self.me, 0, &[]) {
            for l in self.links.iter().flatten() {
                if l.send(&[&frame]).is_ok() {
                    l.finish_sending();
                }
            }
        }
        // Exiting with unread data in a socket makes the kernel reset the connection, and a
        // reset can destroy the Abort the peer has not read yet. So read (and drop) what
        // arrives until every peer has closed — they exit on the Abort — or a short deadline.
        let deadline = Instant::now() + Duration::from_millis(500);
        let mut open: Vec<usize> = (0..self.links.len())
            .filter(|i| self.links[*i].is_some())
            .collect();
        let mut buf = RecvBuf::new();
        while !open.is_empty() && Instant::now() < deadline {
            open.retain(|&i| {
                matches!(
                    self.links[i].as_ref().map(|l| l.recv_available(&mut buf)),
                    Some(Ok(true))
                )
            });
            buf = RecvBuf::new();
            std::thread::sleep(Duration::from_millis(2));
        }
        crate::sys::exit_now(code)
    }

    pub(super) fn describe_waits(&self, st: &EngineState) -> String {
        let mut s = String::new();
        for (b, since) in st.blocked.values() {
            let what = match b {
                Blocked::Lock(l) | Blocked::Unlock(l) => st.sync.describe_lock(*l),
                Blocked::Barrier(b) => st.sync.describe_barrier(*b),
                Blocked::SemWait(s) | Blocked::SemPost(s) => st.sems.describe(*s),
                Blocked::Finish => {
                    let missing: Vec<usize> = st
                        .goodbye_from
                        .iter()
                        .enumerate()
                        .filter(|(_, g)| !**g)
                        .map(|(i, _)| i)
                        .collect();
                    format!("the end of the job (nodes {missing:?} have not finished)")
                }
            };
            s.push_str(&format!(
                "\n  a thread has waited {:.1} s for {what}",
                since.elapsed().as_secs_f64()
            ));
        }
        if let Some((page, w)) = st.pages.oldest_waiter() {
            s.push_str(&format!(
                "\n  a thread has waited {:.1} s for {:?} access to page {page} (address {:#x}, home node {}): {}",
                (now_ns().saturating_sub(w.since_ns)) as f64 / 1e9,
                w.need,
                self.space.page_addr(page),
                self.space.home(page),
                self.protocol_of(st, page).map(|p| p.describe(page)).unwrap_or_default()
            ));
            let others = st.pages.pages_waited_on();
            if others > 1 {
                s.push_str(&format!(" ({} pages have waiting threads)", others));
            }
        }
        s
    }

    pub(super) fn lost(&self, st: &EngineState, peer: NodeId, why: &str) -> ! {
        // A node that ends the job on purpose (exit(status) in a personality) tells everyone
        // with an Abort carrying its status, but its connection may close here before that
        // Abort travels through another node. Wait a moment, reading only Aborts, so the job's
        // status is the one its program chose rather than this node's failure.
        let deadline = Instant::now() + Duration::from_millis(300);
        let mut bufs: Vec<RecvBuf> = (0..self.nodes).map(|_| RecvBuf::new()).collect();
        while Instant::now() < deadline {
            for (i, l) in self.links.iter().enumerate() {
                let Some(l) = l else { continue };
                if i == peer as usize || l.recv_available(&mut bufs[i]).is_err() {
                    continue;
                }
                while let Ok(Some(frame)) = bufs[i].next_frame() {
                    if let Ok(wire::Frame {
                        msg: Msg::Abort { code, .. },
                        ..
                    }) = wire::decode(frame)
                    {
                        crate::sys::exit_now(code);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let tokens = st.sync.locks_towards(peer);
        let tokens = if tokens.is_empty() {
            String::new()
        } else {
            format!("; it may hold the token of locks {tokens:?} (it held or was in line for them)")
        };
        self.fatal(
            Some(st),
            &format!("lost node {peer} ({why}); it died or its connection broke{tokens}"),
        )
    }
}
