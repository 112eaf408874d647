//! Forwarding of the nodes' stdout and stderr, line by line, to svmrun's own.
//!
//! One thread per pipe. Each complete line is written with a single `write_all` on the locked
//! stdout/stderr handle and flushed, so lines of different nodes never interleave mid-line.
//! Bytes are forwarded as they are (no UTF-8 decoding).
//!
//! Once every node has exited ([`Drain::start`]), a pipe that is still open (a grandchild of a
//! node holds it) is forwarded until it stays quiet for [`IDLE_AFTER_EXIT`]; when svmrun is
//! aborting the job, for at most [`ABORT_DRAIN`] in total.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::unistd::pipe2;

/// A line longer than this is forwarded in pieces of this size.
pub const MAX_LINE: usize = 64 * 1024;
/// After the last node exited, a pipe quiet for this long is given up.
pub const IDLE_AFTER_EXIT: Duration = Duration::from_millis(500);
/// After the last node exited in an aborted job, forwarding stops after this long.
pub const ABORT_DRAIN: Duration = Duration::from_secs(1);

const POLL_MS: u8 = 100;
/// Stack of the per-pipe and per-node threads (a job may have 1024 nodes).
pub const THREAD_STACK: usize = 256 * 1024;

/// Which of svmrun's streams a pipe goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sink {
    Stdout,
    Stderr,
}

/// Whether the last byte forwarded to svmrun's stdout / stderr ended a line (only a final line
/// without newline under `--no-prefix` leaves one open).
static STDOUT_AT_LINE_START: AtomicBool = AtomicBool::new(true);
static STDERR_AT_LINE_START: AtomicBool = AtomicBool::new(true);

impl Sink {
    fn at_line_start(self) -> &'static AtomicBool {
        match self {
            Sink::Stdout => &STDOUT_AT_LINE_START,
            Sink::Stderr => &STDERR_AT_LINE_START,
        }
    }

    fn write_line(self, line: &[u8]) -> io::Result<()> {
        let ends = line.last().is_none_or(|b| *b == b'\n');
        // Relaxed: the flag is only read and written under the stream's lock below.
        match self {
            Sink::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(line)?;
                self.at_line_start().store(ends, Ordering::Relaxed);
                out.flush()
            }
            Sink::Stderr => {
                let mut err = io::stderr().lock();
                err.write_all(line)?;
                self.at_line_start().store(ends, Ordering::Relaxed);
                err.flush()
            }
        }
    }
}

/// Prints one of svmrun's own messages on stderr, on a line of its own even if a node's output
/// there ended mid-line (a node killed while printing, under `--no-prefix`).
pub fn say(message: &str) {
    let mut err = io::stderr().lock();
    let nl = if STDERR_AT_LINE_START.load(Ordering::Relaxed) {
        ""
    } else {
        "\n"
    };
    let _ = writeln!(err, "{nl}svmrun: {message}");
    STDERR_AT_LINE_START.store(true, Ordering::Relaxed);
    let _ = err.flush();
}

/// Ends a line a failed job's node left open on svmrun's stdout or stderr (under `--no-prefix`;
/// with the prefix every forwarded line is already complete).
pub fn end_open_lines() {
    if !STDOUT_AT_LINE_START.load(Ordering::Relaxed) {
        let mut out = io::stdout().lock();
        let _ = out.write_all(b"\n");
        STDOUT_AT_LINE_START.store(true, Ordering::Relaxed);
        let _ = out.flush();
    }
    if !STDERR_AT_LINE_START.load(Ordering::Relaxed) {
        let mut err = io::stderr().lock();
        let _ = err.write_all(b"\n");
        STDERR_AT_LINE_START.store(true, Ordering::Relaxed);
        let _ = err.flush();
    }
}

/// Shared "the nodes are gone" state the forwarders look at.
///
/// Until [`Drain::start`], a forwarder sleeps in `poll` on its pipe and on a wake-up pipe with no
/// timeout, so idle forwarders cost nothing. `start` closes the wake-up pipe's write end, which
/// wakes every forwarder; from then on they poll with a short timeout to notice a quiet pipe.
#[derive(Debug, Clone)]
pub struct Drain(Arc<DrainInner>);

#[derive(Debug)]
struct DrainInner {
    state: Mutex<Option<(Instant, bool)>>,
    wake_rx: OwnedFd,
    wake_tx: Mutex<Option<OwnedFd>>,
}

impl Drain {
    /// The wake-up pipe is close-on-exec, so no node holds its write end.
    pub fn new() -> io::Result<Self> {
        let (wake_rx, wake_tx) = pipe2(OFlag::O_CLOEXEC)?;
        Ok(Drain(Arc::new(DrainInner {
            state: Mutex::new(None),
            wake_rx,
            wake_tx: Mutex::new(Some(wake_tx)),
        })))
    }

    /// Every node has exited; `aborting` caps the remaining forwarding at [`ABORT_DRAIN`].
    pub fn start(&self, aborting: bool) {
        self.0
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert((Instant::now(), aborting));
        drop(
            self.0
                .wake_tx
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
    }

    fn get(&self) -> Option<(Instant, bool)> {
        *self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Splits a byte stream into prefixed lines.
#[derive(Debug)]
pub struct LineSplitter {
    prefix: Vec<u8>,
    pending: Vec<u8>,
}

impl LineSplitter {
    /// `prefix` goes in front of every line; empty means raw lines (`--no-prefix`).
    pub fn new(prefix: Vec<u8>) -> Self {
        LineSplitter {
            prefix,
            pending: Vec::new(),
        }
    }

    fn line(&mut self, tail: &[u8], add_newline: bool) -> Vec<u8> {
        let mut line = Vec::with_capacity(self.prefix.len() + self.pending.len() + tail.len() + 1);
        line.extend_from_slice(&self.prefix);
        line.append(&mut self.pending);
        line.extend_from_slice(tail);
        if add_newline {
            line.push(b'\n');
        }
        line
    }

    /// Feeds bytes; calls `emit` with every complete output line.
    pub fn push(
        &mut self,
        mut data: &[u8],
        emit: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        while let Some(pos) = data.iter().position(|&b| b == b'\n') {
            let line = self.line(&data[..=pos], false);
            emit(&line)?;
            data = &data[pos + 1..];
        }
        while !data.is_empty() {
            let room = MAX_LINE - self.pending.len();
            let take = room.min(data.len());
            self.pending.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.pending.len() >= MAX_LINE {
                let add_newline = !self.prefix.is_empty();
                let line = self.line(&[], add_newline);
                emit(&line)?;
            }
        }
        Ok(())
    }

    /// End of stream: forwards a final line that has no newline. With a prefix a newline is
    /// added (so the next node's line starts on its own line); without one, the bytes go out
    /// exactly as the node wrote them.
    pub fn finish(&mut self, emit: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let add_newline = !self.prefix.is_empty();
        let line = self.line(&[], add_newline);
        emit(&line)
    }
}

/// Starts the thread forwarding `pipe` to `sink`.
pub fn spawn_forwarder<R>(
    rank: u32,
    pipe: R,
    sink: Sink,
    prefix: bool,
    drain: Drain,
) -> io::Result<JoinHandle<()>>
where
    R: Read + AsFd + Send + 'static,
{
    let name = format!("svmrun-out-{rank}");
    std::thread::Builder::new()
        .name(name)
        .stack_size(THREAD_STACK)
        .spawn(move || forward(rank, pipe, sink, prefix, &drain))
}

fn forward<R: Read + AsFd>(rank: u32, mut pipe: R, sink: Sink, prefix: bool, drain: &Drain) {
    let prefix = if prefix {
        format!("[{rank}] ").into_bytes()
    } else {
        Vec::new()
    };
    let mut splitter = LineSplitter::new(prefix);
    let mut emit = |line: &[u8]| sink.write_line(line);
    let mut buf = vec![0u8; 16 * 1024];
    let mut quiet_since = None::<Instant>;
    loop {
        let draining = drain.get();
        if let Some((since, aborting)) = draining {
            let now = Instant::now();
            let quiet = quiet_since.is_some_and(|q| now.duration_since(q) >= IDLE_AFTER_EXIT);
            if quiet || (aborting && now.duration_since(since) >= ABORT_DRAIN) {
                break;
            }
        }
        let ready = {
            let mut fds = [
                PollFd::new(pipe.as_fd(), PollFlags::POLLIN),
                PollFd::new(drain.0.wake_rx.as_fd(), PollFlags::POLLIN),
            ];
            // While draining, the wake-up pipe stays readable (closed): leave it out.
            let (fds, timeout) = match draining {
                Some(_) => (&mut fds[..1], PollTimeout::from(POLL_MS)),
                None => (&mut fds[..], PollTimeout::NONE),
            };
            match poll(fds, timeout) {
                Ok(_) => fds[0].any().unwrap_or(true),
                Err(nix::errno::Errno::EINTR) => false,
                // poll itself failing is not expected; fall back to a blocking read.
                Err(_) => true,
            }
        };
        if !ready {
            if draining.is_some() {
                quiet_since.get_or_insert_with(Instant::now);
            }
            continue;
        }
        quiet_since = None;
        match pipe.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if splitter.push(&buf[..n], &mut emit).is_err() {
                    // svmrun's own stream is gone: stop reading, so the node sees EPIPE.
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    // Nothing sensible to do if the final write fails.
    let _ = splitter.finish(&mut emit);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(prefix: &str, chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut s = LineSplitter::new(prefix.as_bytes().to_vec());
        let mut emit = |l: &[u8]| {
            out.push(l.to_vec());
            Ok(())
        };
        for c in chunks {
            s.push(c, &mut emit).unwrap();
        }
        s.finish(&mut emit).unwrap();
        out
    }

    #[test]
    fn lines_across_chunks() {
        let out = run("[1] ", &[b"ab", b"c\nde\n", b"f\n\ng"]);
        let want: [&[u8]; 5] = [b"[1] abc\n", b"[1] de\n", b"[1] f\n", b"[1] \n", b"[1] g\n"];
        assert_eq!(out, want);
    }

    #[test]
    fn raw_final_line_keeps_bytes() {
        let out = run("", &[b"x\n\xff\xfey"]);
        let want: [&[u8]; 2] = [b"x\n", b"\xff\xfey"];
        assert_eq!(out, want);
    }

    #[test]
    fn long_line_is_split() {
        let big = vec![b'a'; MAX_LINE + 10];
        let out = run("[0] ", &[&big, b"\n"]);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].len(), 4 + MAX_LINE + 1);
        assert_eq!(out[1], b"[0] aaaaaaaaaa\n");
    }
}
