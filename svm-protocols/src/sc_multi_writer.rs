//! `sc-mw`: sequential consistency for data-race-free programs, home-based multiple writer.
//!
//! The home of a page (`ctx.home(page)`) always holds its master copy and keeps its copyset
//! (the other nodes holding a copy). Any number of nodes may write a page at once, each in its
//! own copy:
//!
//! - **Read fault** (not home): `ReadReq` to the home, which adds the node to the copyset and
//!   answers with the master copy, installed read-only.
//! - **Write fault** (not home): fetch a copy first if there is none, then `MakeTwin` and make
//!   it writable locally. No ownership, no invalidation at write time: concurrent writers of
//!   disjoint words of a page do not ping-pong it.
//! - **Home's own accesses** go to the master copy directly; a home write marks the page dirty.
//! - **Release and barrier arrival**: every dirty page is lowered to read-only; remote pages'
//!   diffs go to their homes, batched (one `Diffs` message per home). A home applies them and
//!   invalidates every other copy (`Inval` to the copyset except the writer, waiting for every
//!   `InvalAck`), then answers `DiffAck`. The home's own dirty pages are handled the same way
//!   locally. The release completes (`ReleaseDone`, no notices) only when every home has
//!   acknowledged, and never before an earlier release of the same node.
//! - After the flush the writer's copy **stays valid, read-only** (and the writer stays in the
//!   copyset): it holds the master's contents as of its fetch plus its own writes; words that
//!   another node wrote concurrently are stale in it, but that node's own release will
//!   invalidate it before any data-race-free reader can be ordered after those writes.
//! - **An invalidated dirty copy** (another node released the same page while this node was
//!   still writing other words of it) is not lost: its diff travels with the `InvalAck`, the
//!   home applies it, and the page is named (`Diffs::pushed`) at this node's next release so
//!   the home invalidates the other copies then.
//! - **Acquire and barrier departure do nothing.** This is correct because every invalidation
//!   happens *before* the release that published the writes completes: in a data-race-free
//!   program, a read of data written on another node is ordered after that node's release by a
//!   lock grant or a barrier, and the sync layer only passes the lock on / counts the arrival
//!   after `ReleaseDone`. By then every copy of the written pages that existed when the diffs
//!   were applied has been dropped (acknowledged), copies in flight included (the home's
//!   `Inval` follows its `Grant` on the same FIFO channel, and the ack follows the install);
//!   copies fetched later come from the master, which already holds the diffs. So the
//!   acquirer's next access to such a page faults and fetches the new contents.
//!
//! Guarantees: sequential consistency for data-race-free programs (synchronized with this
//! system's locks and barriers). Racy programs may observe non-SC results (writes are
//! invisible to other nodes until the writer's next release), and writes of *different bytes of
//! the same 8-byte word* by two nodes between synchronizations lose one of them (diffs are
//! word-granular). See `docs/protocols.md`.

use crate::home_mw::{home_mw_protocol, Mode};

home_mw_protocol!(
    /// Home-based multiple-writer sequential consistency (for data-race-free programs).
    ScMultiWriter,
    "sc-mw",
    Mode::Eager
);

#[cfg(test)]
mod tests {
    use super::*;
    use svm_core::protocol::{Access, Action, ProtoMsg, Protocol, StaticContext};

    #[test]
    fn forgotten_pages_start_over() {
        let ctx = |me| StaticContext {
            me,
            nodes: 2,
            homes: |_| 0,
        };
        // The home serves node 1 a copy of page 3 (copyset) and writes page 4 itself (dirty).
        let mut home = ScMultiWriter::new();
        let mut out: Vec<Action> = Vec::new();
        home.on_message(&ctx(0), 1, &ProtoMsg::ReadReq { page: 3 }, 0, &mut out);
        home.on_fault(&ctx(0), 4, Access::Write, &mut out);
        home.on_fault(&ctx(0), 5, Access::Read, &mut out);
        assert!(
            home.describe(3).contains("copyset [1]"),
            "{}",
            home.describe(3)
        );
        assert!(home.describe(4).contains("dirty home page: true"));
        assert!(home.forget(3..5));
        assert_eq!(
            home.describe(3),
            "sc-mw page 3: untouched here; open critical sections 0"
        );
        assert_eq!(
            home.describe(4),
            "sc-mw page 4: untouched here; open critical sections 0"
        );
        assert!(
            home.describe(5).contains("access Read"),
            "outside the range"
        );
        // A remote writer with a twin forgets it too.
        let mut w = ScMultiWriter::new();
        w.on_fault(&ctx(1), 3, Access::Write, &mut out);
        assert!(w.describe(3).contains("fetching: true"));
        assert!(w.forget(3..4));
        assert_eq!(
            w.describe(3),
            "sc-mw page 3: untouched here; open critical sections 0"
        );
    }
}
