//! Readiness of the links' descriptors for µDECK's receive loop (whichever transport: the
//! `poll_fd` of a TCP link or of a DECK-SCI link). It lives here because forming a `BorrowedFd`
//! from a raw descriptor number is `unsafe`, and DECK-SCI is svm-comm's one place for that.

use std::os::fd::{BorrowedFd, RawFd};

use nix::poll::{PollFd, PollFlags, PollTimeout};

/// Waits up to `timeout` until any of `fds` is readable (or hung up, or in error) and returns the
/// positions in `fds` of those that are. Negative entries are never ready.
///
/// The caller keeps the descriptors open for the call (it holds the links that own them).
pub fn poll_readable(fds: &[RawFd], timeout: PollTimeout) -> nix::Result<Vec<usize>> {
    let at: Vec<usize> = (0..fds.len()).filter(|&i| fds[i] >= 0).collect();
    let mut pfds: Vec<PollFd<'_>> = at
        .iter()
        .map(|&i| {
            // SAFETY: `fds[i]` is not -1 (checked), and the caller keeps it open for this call;
            // the borrow lives only inside this function and is only handed to poll(2), which
            // neither closes the descriptor nor touches memory through it (a stale number would
            // at worst report POLLNVAL or the readiness of another descriptor).
            let fd = unsafe { BorrowedFd::borrow_raw(fds[i]) };
            PollFd::new(fd, PollFlags::POLLIN)
        })
        .collect();
    nix::poll::poll(&mut pfds, timeout)?;
    Ok(pfds
        .iter()
        .zip(&at)
        .filter(|(p, _)| p.revents().is_some_and(|r| !r.is_empty()))
        .map(|(_, &i)| i)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn reports_the_readable_positions() {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (c, _d) = std::os::unix::net::UnixStream::pair().unwrap();
        let fds = [c.as_raw_fd(), -1, a.as_raw_fd()];
        assert_eq!(poll_readable(&fds, PollTimeout::ZERO), Ok(vec![]));
        b.write_all(b"x").unwrap();
        assert_eq!(poll_readable(&fds, PollTimeout::from(1000u16)), Ok(vec![2]));
    }
}
