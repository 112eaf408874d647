//! Runs `svm-bench deck` and `svm-bench apps` in their tiny test configuration and checks that the
//! reports exist, have the expected tables, and that every result was verified. No timing is
//! asserted. `apps` needs svmrun and the svm examples, which `cargo test --workspace` builds.

mod common;

use common::{bench, out_dir, read};
use std::path::Path;
use std::time::Duration;

fn svg_ok(p: &Path) {
    let s = read(p);
    assert!(
        s.starts_with("<svg") && s.trim_end().ends_with("</svg>") && s.contains("<polyline"),
        "{} is not a plot",
        p.display()
    );
}

#[test]
fn deck_tiny_writes_verified_report() {
    let out = out_dir("deck");
    let (ok, stdout, stderr) = bench(
        &["deck", "--tiny", "--out", out.to_str().unwrap()],
        Duration::from_secs(120),
    );
    assert!(
        ok,
        "svm-bench deck failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let md = read(&out.join("deck.md"));
    for h in [
        "## Latency 0–62 B (one-way, µs, median)",
        "| size | DECK-SCI p1 µs | DECK-SCI p2 µs | DECK-SCI p3 µs | DECK-SCI auto µs | µDECK/SCI µs | µDECK/TCP µs | memcpy µs |",
        "## Latency 64 B–8 KiB (one-way, µs, median)",
        "## Bandwidth (MB/s)",
        "| size | DECK-SCI p3 MB/s | DECK-SCI p3 copy MB/s | DECK-SCI auto MB/s | DECK-SCI p2 MB/s | µDECK/SCI MB/s | µDECK/TCP MB/s | memcpy MB/s |",
        "## Bandwidth as % of memcpy",
        "protocol 1 latency flatness over 0–62 B",
        " 0 failures",
    ] {
        assert!(md.contains(h), "deck.md lacks {h:?}:\n{md}");
    }
    assert!(!md.contains("FAILED"), "{md}");
    // Every configuration measured every size: no empty cell in the tables.
    let tables = md.split("## Latency 0–62 B").nth(1).unwrap();
    assert!(
        !tables.contains("| – |") && !tables.contains("| – \n"),
        "missing values:\n{tables}"
    );
    assert!(
        stdout.contains("protocol 1 latency max/min over 0–62 B"),
        "{stdout}"
    );
    assert!(stdout.contains("% of memcpy"), "{stdout}");
    assert!(
        stderr.lines().filter(|l| l.starts_with("deck: ")).count() >= 15,
        "progress lines:\n{stderr}"
    );
    for f in [
        "deck_latency_small.svg",
        "deck_latency_medium.svg",
        "deck_bandwidth.svg",
        "deck_bandwidth_pct.svg",
    ] {
        svg_ok(&out.join(f));
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn apps_tiny_writes_verified_report() {
    let out = out_dir("apps");
    let (ok, stdout, stderr) = bench(
        &["apps", "--tiny", "--out", out.to_str().unwrap()],
        Duration::from_secs(300),
    );
    assert!(
        ok,
        "svm-bench apps failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let md = read(&out.join("apps.md"));
    for h in [
        "## Applications",
        "| app | problem | sequential s (1st) | sequential s (2nd) | spread % |",
        "## Time and speedup per node count",
        "| app | variant | 1 node s | 2 nodes s | speedup 1 | speedup 2 |",
        "## Mandelbrot: time (s) vs number of slices",
        "## All runs",
        "| app | variant | slices | nodes | time s | speedup | verified |",
        "## Laplace against pthreads",
        "| two threads s (best) | speedup of two threads | best at 2 nodes | 2 nodes s | × two threads |",
        " 0 failures",
    ] {
        assert!(md.contains(h), "apps.md lacks {h:?}:\n{md}");
    }
    // mandelbrot: 3 DSM protocols + deck; the others: 3 protocols; each at 1 and 2 nodes.
    let runs = (4 + 3 + 3 + 3) * 2;
    assert!(
        md.contains(&format!("{runs} of {runs} runs verified")),
        "not every run verified:\n{md}"
    );
    let all = md.split("## All runs").nth(1).unwrap();
    assert_eq!(all.matches("| yes |").count(), runs, "{all}");
    assert!(!all.contains("| NO |"));
    for v in ["dsm sc-sw", "dsm sc-mw", "dsm scope", "deck"] {
        assert!(all.contains(v), "no {v} runs:\n{all}");
    }
    // Jacobi against pthreads: every kind of link at 2 and 4 nodes, each with a time.
    let jac = md
        .split("## Jacobi against pthreads")
        .nth(1)
        .unwrap_or_else(|| panic!("no Jacobi section:\n{md}"));
    for kind in ["tcp", "unix", "deck"] {
        for nodes in [2, 4] {
            let row = format!("| {kind} | {nodes} | ");
            let line = jac
                .lines()
                .find(|l| l.starts_with(&row))
                .unwrap_or_else(|| panic!("no row {row:?}:\n{jac}"));
            assert!(!line.contains("| – |") && !line.contains("| - |"), "{line}");
        }
    }
    for f in [
        "apps_speedup_mandelbrot.svg",
        "apps_speedup_laplace.svg",
        "apps_speedup_jacobi.svg",
        "apps_speedup_matvec.svg",
        "apps_mandelbrot_slices.svg",
    ] {
        svg_ok(&out.join(f));
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn help_lists_subcommands() {
    let (ok, stdout, _) = bench(&["--help"], Duration::from_secs(30));
    assert!(ok);
    for s in ["deck", "apps", "all"] {
        assert!(stdout.contains(s), "{stdout}");
    }
    let (ok, stdout, _) = bench(&["apps", "--help"], Duration::from_secs(30));
    assert!(
        ok && stdout.contains("--quick") && stdout.contains("--out"),
        "{stdout}"
    );
}
