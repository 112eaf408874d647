//! How a node fails: the engine's error type, the one exit point every failure is returned
//! to (ending the job with a message naming what was waited for), and a lost peer.

use super::*;
use crate::sys::SysError;

/// Why a node cannot go on. Engine steps and application-thread operations return it; it
/// reaches `Node::fail` (or, for a node built with [`FailureMode::Keep`], the engine keeps it
/// and stops) and nowhere else ends the process.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("engine poll failed: {0}")]
    Poll(SysError),
    #[error("reading faults: {0}")]
    Faults(SysError),
    /// A fault-backend or poller call on behalf of the engine (`what` names the page or link).
    #[error("{what}: {err}")]
    System { what: String, err: SysError },
    #[error("malformed frame from node {peer}: {why}; connection closed")]
    MalformedFrame { peer: NodeId, why: String },
    /// `locks`: the locks whose token the peer may have held.
    #[error(
        "lost node {peer} ({why}); it died or its connection broke{}",
        held_tokens(locks)
    )]
    Lost {
        peer: NodeId,
        why: String,
        locks: Vec<u64>,
    },
    /// A send found its peer's connection closed and no Goodbye of that peer turned up.
    #[error("{0}")]
    SendFailed(String),
    #[error("cannot encode a {kind} message: {why}")]
    Encode { kind: &'static str, why: String },
    #[error("no connection to node {0}")]
    NoLink(NodeId),
    #[error("node {from} sent a message of unknown protocol {proto}")]
    UnknownProtocol { from: NodeId, proto: u8 },
    #[error("node {from} sent a handshake message after setup (protocol error)")]
    LateHandshake { from: NodeId },
    #[error("page {page} uses protocol {proto}, which this build lacks")]
    MissingProtocol { page: PageId, proto: u8 },
    #[error("a page grant for page {page} carried {got} bytes, expected {expected}")]
    GrantSize {
        page: PageId,
        got: usize,
        expected: usize,
    },
    /// A protocol asked for something impossible (a second twin, a diff without a twin).
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("malformed diff message: {0}")]
    Diff(#[from] crate::diff::DiffError),
    #[error("a page fault was not served within {0:?} (SVM_TIMEOUT)")]
    FaultTimeout(Duration),
    /// An application thread's wait passed `SVM_TIMEOUT`.
    #[error("timed out after {after:?} (SVM_TIMEOUT) waiting for {what}")]
    Timeout { after: Duration, what: String },
    /// Another node ended the job (its Abort); `code` is the job's status.
    #[error("the job was ended by {reason} (status {code})")]
    Aborted { reason: String, code: i32 },
    /// The application gave up (a panic in a task, a personality's abort).
    #[error("{0}")]
    Application(String),
}

/// The clause of a lost-node message naming the tokens the node may have held.
fn held_tokens(locks: &[u64]) -> String {
    if locks.is_empty() {
        String::new()
    } else {
        format!("; it may hold the token of locks {locks:?} (it held or was in line for them)")
    }
}

/// Writes a line to the process's standard error directly: `eprintln!` goes to a test
/// harness's capture buffer when a test runs nodes in its own process, and a diagnostic
/// printed just before the process exits must never be swallowed.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

impl EngineError {
    /// For `map_err`: a system call the engine made while doing `what` (named lazily, so the
    /// fault path formats nothing unless the call failed) failed with the error given.
    pub(super) fn system(what: impl FnOnce() -> String) -> impl FnOnce(SysError) -> EngineError {
        move |err| EngineError::System { what: what(), err }
    }
}

/// What a node does with an [`EngineError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailureMode {
    /// End the job: tell every peer, print the diagnostic, exit with [`EXIT_FAILURE`] (or the
    /// status an Abort carried). What every real node does.
    #[default]
    EndJob,
    /// The engine thread stops and keeps its error for [`Node::engine_failure`] (engine tests
    /// running several nodes in one process). Application-thread failures still end the job.
    Keep,
}

impl Node {
    // ----------------------------------------------------------------------------------------
    // Failure

    /// The one exit point: ends this node with a diagnostic naming `err` and what its threads
    /// waited for, and tells the peers why (best effort) so that their own messages name the
    /// cause.
    pub(super) fn fail(&self, st: Option<&EngineState>, err: EngineError) -> ! {
        // This node is already ending the job on purpose (exit(status) in a personality): the
        // failures that follow (peers vanishing as they obey) must not replace its status.
        let ending = ENDING_CODE.load(Ordering::Acquire);
        if ending != NOT_ENDING {
            crate::sys::exit_now(ending);
        }
        match &err {
            EngineError::Aborted { code, .. } => {
                if *code != 0 {
                    say(&format!("svm: node {}: {err}", self.me));
                }
                crate::sys::exit_now(*code);
            }
            EngineError::Lost { peer, .. } => self.await_abort(*peer),
            _ => {}
        }
        let why = err.to_string();
        let mut msg = format!("svm: node {}: {why}", self.me);
        if let Some(st) = st {
            msg.push_str(&self.describe_waits(st));
        }
        say(&msg);
        self.end_job(EXIT_FAILURE, &why)
    }

    /// The engine thread's exit point: under [`FailureMode::Keep`] the error is kept and the
    /// engine stops; otherwise [`Node::fail`].
    pub(super) fn engine_failed(&self, err: EngineError) {
        if self.failure_mode == FailureMode::Keep {
            *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(err);
            return;
        }
        let st = self.lock_state();
        self.fail(Some(&st), err)
    }

    /// The error the engine stopped with (nodes built with [`FailureMode::Keep`]).
    pub fn engine_failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|e| e.to_string())
    }

    /// Tells every peer to end with `code` (best effort) and ends this process with it.
    pub fn end_job(&self, code: i32, why: &str) -> ! {
        let _ = ENDING_CODE.compare_exchange(NOT_ENDING, code, Ordering::AcqRel, Ordering::Acquire);
        // Frames already queued go before the Abort, in their order.
        self.write_out();
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
        for &(ref b, since) in st.blocked.values() {
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
                st.now.saturating_sub(since) as f64 / 1e9
            ));
        }
        if let Some((page, w)) = st.pages.oldest_waiter() {
            s.push_str(&format!(
                "\n  a thread has waited {:.1} s for {:?} access to page {page} (address {:#x}, home node {}): {}",
                (st.now.saturating_sub(w.since_ns)) as f64 / 1e9,
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

    /// The error for a lost `peer`, naming the locks whose token it may have held.
    pub(super) fn lost(&self, st: &EngineState, peer: NodeId, why: &str) -> EngineError {
        EngineError::Lost {
            peer,
            why: why.to_string(),
            locks: st.sync.locks_towards(peer),
        }
    }

    /// `peer`'s connection closed once everything it sent was handled: an orderly end if it
    /// said Goodbye, else the peer is lost.
    pub(super) fn peer_closed(&self, st: &EngineState, peer: NodeId) -> Result<(), EngineError> {
        if st.goodbye_from[peer as usize] {
            Ok(())
        } else {
            Err(self.lost(st, peer, "connection closed"))
        }
    }

    /// A node that ends the job on purpose (exit(status) in a personality) tells everyone with
    /// an Abort carrying its status, but its connection may close here before that Abort
    /// travels through another node. Wait a moment, reading only Aborts, so the job's status is
    /// the one its program chose rather than this node's failure.
    fn await_abort(&self, peer: NodeId) {
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
    }
}
