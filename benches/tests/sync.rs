//! Runs `svm-bench sync` in its tiny test configuration and checks the report: every floor and
//! every svm measurement present, the counter runs verified, the headline's words. No timing is
//! asserted. Needs svmrun, the `syncbench` example and a C compiler.

mod common;

use common::{bench, out_dir, read};
use std::time::Duration;

#[test]
fn sync_tiny_measures_locks_and_barriers_beside_their_floors() {
    let out = out_dir("sync");
    let (ok, stdout, stderr) = bench(
        &["sync", "--tiny", "--out", out.to_str().unwrap()],
        Duration::from_secs(300),
    );
    assert!(
        ok,
        "svm-bench sync failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let head = stdout
        .lines()
        .find(|l| l.starts_with("sync: lock_cached_us="))
        .unwrap_or_else(|| panic!("no headline in {stdout}"));
    for key in [
        "lock_cached_us",
        "counter2_us",
        "barrier4_tcp_us",
        "tcp_rtt_us",
    ] {
        let v: f64 = head
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{key}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} is not a number in {head:?}"));
        assert!(v > 0.0, "{head}");
    }
    let md = read(&out.join("sync.md"));
    for h in [
        "## Floors (this machine, this run)",
        "| pthread mutex lock+unlock, one thread of a process that started another |",
        "| the same in a process that never started a thread (glibc skips the atomics) |",
        "| futex ping-pong between two processes (round trip) |",
        "| pthread barrier, 4 threads |",
        "## Lock re-acquire by one node",
        "## Contended lock + shared counter",
        "## Barrier of all nodes",
        "verification: every run passed its checks, 0 failures",
    ] {
        assert!(md.contains(h), "sync.md lacks {h:?}:\n{md}");
    }
    for tr in ["tcp", "deck"] {
        assert!(
            md.lines().any(|l| l.starts_with(&format!("| {tr} | 4 | "))),
            "no 4-node barrier row over {tr}:\n{md}"
        );
    }
    assert!(md.contains("| tcp | scope | 2 | "), "{md}");
    let svg = read(&out.join("sync_barrier.svg"));
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    let _ = std::fs::remove_dir_all(&out);
}
