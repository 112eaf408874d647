//! The examples of the `svm` crate run as real multi-node jobs through `svmrun`, with both fault
//! backends, and their `key=value` output is checked word for word.

use std::path::Path;
use std::time::Duration;

use svm_tests::{
    example_path, run_example, run_example_with, run_svmrun_env, serial, word_value, Job, Output,
};

const COUNTER_ITERS: u64 = 200;
const LITMUS_ROUNDS: u64 = 200;

/// Generates one `#[test]` per row: `name => (args...)` calls `helper(args...)`.
macro_rules! cases {
    ($helper:ident { $($name:ident => ($($arg:expr),*)),* $(,)? }) => {
        $( #[test] fn $name() { $helper($($arg),*) } )*
    };
}

/// The one stdout line holding all `words`, panicking (with the output) if there is not
/// exactly one.
fn only_line<'a>(out: &'a Output, words: &[&str]) -> &'a str {
    let lines = out.stdout_lines_with(words);
    assert_eq!(
        lines.len(),
        1,
        "expected exactly one stdout line with {words:?}\n{out}"
    );
    lines[0]
}

/// The count `key=` on node `node`'s `SVM_STATS` line that holds `line_key=` (stderr, under
/// svmrun's `[node]` prefix), panicking (with the output) if there is none.
fn node_stat(out: &Output, node: usize, line_key: &str, key: &str) -> u64 {
    let prefix = format!("[{node}]");
    let line_key = format!("{line_key}=");
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with(&prefix) && l.contains(&line_key))
        .unwrap_or_else(|| panic!("no statistics line of node {node} with {line_key}\n{out}"));
    word_value(line, key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}\n{out}"))
}

// ---------------------------------------------------------------------------------------------
// counter

fn counter(nodes: usize, fault: &str) {
    let iters = COUNTER_ITERS.to_string();
    let out = run_example(nodes, fault, "counter", &[&iters], Duration::from_secs(90));
    out.assert_success();
    let line = only_line(&out, &["counter="]);
    let expected = nodes as u64 * COUNTER_ITERS;
    assert_eq!(
        word_value(line, "counter"),
        Some(expected.to_string().as_str()),
        "{out}"
    );
    assert_eq!(
        word_value(line, "expected"),
        Some(expected.to_string().as_str()),
        "{out}"
    );
    assert!(
        line.split_whitespace().any(|w| w == "OK"),
        "no OK on the counter line\n{out}"
    );
}

cases!(counter {
    counter_1_node_uffd => (1, "uffd"),
    counter_2_nodes_uffd => (2, "uffd"),
    counter_3_nodes_uffd => (3, "uffd"),
    counter_4_nodes_uffd => (4, "uffd"),
    counter_1_node_segv => (1, "segv"),
    counter_2_nodes_segv => (2, "segv"),
    counter_3_nodes_segv => (3, "segv"),
    counter_4_nodes_segv => (4, "segv"),
});

/// Without svmrun's environment `svm::init()` makes a one-node job.
#[test]
fn counter_runs_without_svmrun_as_one_node() {
    let _serial = serial();
    let out = Job::start_program(&example_path("counter"), &["50"], &[])
        .wait(Duration::from_secs(60))
        .unwrap_or_else(|t| panic!("{t}"));
    out.assert_success();
    assert!(out.stdout.contains("counter=50 expected=50 OK"), "{out}");
}

// ---------------------------------------------------------------------------------------------
// jacobi

/// The same relaxation as the example, written again here so that the test checks the
/// example's arithmetic as well as the DSM: returns the row-major sum of the final grid.
fn jacobi_reference_checksum(n: usize, iters: usize) -> f64 {
    let mut old = vec![0.0f64; n * n];
    old[..n].fill(1.0);
    let mut new = old.clone();
    for _ in 0..iters {
        for r in 1..n - 1 {
            for c in 0..n {
                new[r * n + c] = if c == 0 || c == n - 1 {
                    old[r * n + c]
                } else {
                    0.25 * (((old[(r - 1) * n + c] + old[(r + 1) * n + c]) + old[r * n + c - 1])
                        + old[r * n + c + 1])
                };
            }
        }
        std::mem::swap(&mut old, &mut new);
    }
    old.iter().sum()
}

fn jacobi(nodes: usize, fault: &str, n: usize, iters: usize) {
    let (ns, is) = (n.to_string(), iters.to_string());
    let out = run_example(
        nodes,
        fault,
        "jacobi",
        &[&ns, &is, "--verify"],
        Duration::from_secs(120),
    );
    out.assert_success();
    let line = only_line(&out, &["checksum="]);
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        words.last(),
        Some(&"OK"),
        "the checksum line must end with OK\n{out}"
    );
    let time_s: f64 = word_value(line, "time_s")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no time_s=<seconds> on the checksum line\n{out}"));
    assert!(time_s >= 0.0, "{out}");
    let checksum: f64 = word_value(line, "checksum")
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no checksum=<number> on the checksum line\n{out}"));
    let reference = jacobi_reference_checksum(n, iters);
    assert_eq!(
        checksum.to_bits(),
        reference.to_bits(),
        "checksum {checksum:e} differs from the reference {reference:e}\n{out}"
    );
}

cases!(jacobi {
    jacobi_1_node_uffd => (1, "uffd", 128, 10),
    jacobi_2_nodes_uffd => (2, "uffd", 128, 10),
    jacobi_3_nodes_uffd => (3, "uffd", 128, 10),
    jacobi_4_nodes_uffd => (4, "uffd", 128, 10),
    jacobi_1_node_segv => (1, "segv", 128, 10),
    jacobi_2_nodes_segv => (2, "segv", 128, 10),
    jacobi_3_nodes_segv => (3, "segv", 128, 10),
    jacobi_4_nodes_segv => (4, "segv", 128, 10),
    jacobi_512_4_nodes_uffd => (4, "uffd", 512, 20),
    jacobi_512_3_nodes_segv => (3, "segv", 512, 20),
});

/// With the `tcp` transport, nodes on one host link over Unix-domain sockets
/// with `SVM_UNIX_SOCKETS=1` (the default) and over TCP with it off; Jacobi verifies either
/// way. Each node names the transport to every peer with `SVM_VERBOSE`.
#[test]
fn local_nodes_link_over_unix_sockets_and_over_tcp_with_the_switch_off() {
    let exe = example_path("jacobi");
    let exe = exe.to_str().expect("non-UTF-8 target path");
    for (switch, kind, other) in [("1", "unix@", "tcp@"), ("0", "tcp@", "unix@")] {
        let _serial = serial();
        let out = svm_tests::run_svmrun_env(
            &[
                "-n",
                "3",
                "--transport",
                "tcp",
                exe,
                "128",
                "10",
                "--verify",
            ],
            &[("SVM_VERBOSE", "1"), ("SVM_UNIX_SOCKETS", switch)],
            Duration::from_secs(120),
        );
        out.assert_success();
        assert!(
            only_line(&out, &["checksum="]).ends_with("OK"),
            "SVM_UNIX_SOCKETS={switch}: jacobi did not verify\n{out}"
        );
        let lines: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("transports per peer:"))
            .collect();
        assert_eq!(lines.len(), 3, "one transport line per node\n{out}");
        for l in lines {
            assert_eq!(
                l.matches(kind).count(),
                2,
                "SVM_UNIX_SOCKETS={switch}: both peers over {kind}\n{out}"
            );
            assert!(!l.contains(other), "SVM_UNIX_SOCKETS={switch}\n{out}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// laplace: red-black Gauss-Seidel in place on the shared grid

/// The distributed run gives the sequential run's checksum and iteration count, bit for bit.
fn laplace(nodes: usize, fault: &str, protocol: &str) {
    let args = ["48", "1e-3"];
    let seq = Job::start_program(&example_path("laplace"), &[args[0], args[1], "--seq"], &[])
        .wait(Duration::from_secs(60))
        .unwrap_or_else(|t| panic!("{t}"));
    seq.assert_success();
    let reference = only_line(&seq, &["checksum=", "iters="]);
    let n = nodes.to_string();
    let out = run_example_with(
        &["-n", &n, "--fault", fault, "--protocol", protocol],
        "laplace",
        &args,
        Duration::from_secs(120),
    );
    out.assert_success();
    let line = only_line(&out, &["checksum=", "iters="]);
    for word in ["checksum", "iters"] {
        assert_eq!(
            word_value(line, word),
            word_value(reference, word),
            "{word} differs from the sequential run ({reference})\n{out}"
        );
    }
}

cases!(laplace {
    laplace_2_nodes_uffd_sc_sw => (2, "uffd", "sc-sw"),
    laplace_3_nodes_segv_sc_sw => (3, "segv", "sc-sw"),
    laplace_2_nodes_segv_scope => (2, "segv", "scope"),
    laplace_3_nodes_uffd_sc_mw => (3, "uffd", "sc-mw"),
});

/// The pthreads baselines (`--threads T`: T threads in private memory, no job) give the
/// sequential run's checksum (and iteration count), bit for bit, for thread counts that do and
/// do not divide the grid.
#[test]
fn threads_baselines_equal_the_sequential_runs() {
    let run = |prog: &str, args: &[&str]| {
        let out = Job::start_program(&example_path(prog), args, &[])
            .wait(Duration::from_secs(60))
            .unwrap_or_else(|t| panic!("{t}"));
        out.assert_success();
        only_line(&out, &["checksum="]).to_string()
    };
    for (prog, size) in [("laplace", ["48", "1e-3"]), ("jacobi", ["48", "7"])] {
        let seq = run(prog, &[size[0], size[1], "--seq"]);
        for t in ["1", "2", "3", "5"] {
            let line = run(prog, &[size[0], size[1], "--threads", t]);
            for word in ["checksum", "iters"] {
                assert_eq!(
                    word_value(&line, word),
                    word_value(&seq, word),
                    "{prog} --threads {t}: {word} differs from the sequential run ({seq}): {line}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// litmus

fn litmus(nodes: usize, fault: &str) {
    let rounds = LITMUS_ROUNDS.to_string();
    let out = run_example(nodes, fault, "litmus", &[&rounds], Duration::from_secs(120));
    out.assert_success();
    let line = only_line(&out, &["litmus", "mp="]);
    assert_eq!(word_value(line, "mp"), Some("OK"), "{out}");
    assert_eq!(word_value(line, "sb"), Some("OK"), "{out}");
    assert_eq!(word_value(line, "rounds"), Some(rounds.as_str()), "{out}");
    if nodes >= 4 {
        assert_eq!(word_value(line, "iriw"), Some("OK"), "{out}");
    } else {
        assert_eq!(word_value(line, "iriw"), None, "{out}");
    }
}

cases!(litmus {
    litmus_2_nodes_uffd => (2, "uffd"),
    litmus_4_nodes_uffd => (4, "uffd"),
    litmus_2_nodes_segv => (2, "segv"),
    litmus_4_nodes_segv => (4, "segv"),
});

// ---------------------------------------------------------------------------------------------
// firsttouch: first-touch home placement under every protocol

fn firsttouch(nodes: usize, fault: &str, protocol: &str) {
    let n = nodes.to_string();
    let out = svm_tests::run_example_with(
        &["-n", &n, "--fault", fault, "--protocol", protocol],
        "firsttouch",
        &["4"],
        Duration::from_secs(90),
    );
    out.assert_success();
    let line = only_line(&out, &["firsttouch", "OK"]);
    assert_eq!(
        word_value(line, "pages"),
        Some((4 * nodes).to_string().as_str()),
        "{out}"
    );
    assert_eq!(word_value(line, "nodes"), Some(n.as_str()), "{out}");
}

cases!(firsttouch {
    firsttouch_1_node_sc_sw => (1, "uffd", "sc-sw"),
    firsttouch_3_nodes_sc_sw_uffd => (3, "uffd", "sc-sw"),
    firsttouch_3_nodes_sc_mw_segv => (3, "segv", "sc-mw"),
    firsttouch_3_nodes_scope_uffd => (3, "uffd", "scope"),
    firsttouch_4_nodes_scope_segv => (4, "segv", "scope"),
});

#[test]
fn litmus_with_one_node_says_so_and_succeeds() {
    let out = run_example(1, "uffd", "litmus", &[], Duration::from_secs(60));
    out.assert_success();
    out.assert_stdout_contains("needs at least 2 nodes");
    assert!(out.stdout_lines_with(&["mp="]).is_empty(), "{out}");
}

// ---------------------------------------------------------------------------------------------
// pagefault

/// `threads` reading threads per reading rank: their faults are outstanding together, each
/// thread checks every word it reads against the pattern rank 0 wrote.
fn pagefault(nodes: usize, fault: &str, threads: usize) {
    let t = threads.to_string();
    let out = run_example(
        nodes,
        fault,
        "pagefault",
        &["4", "--threads", &t],
        Duration::from_secs(90),
    );
    out.assert_success();
    let lines = out.stdout_lines_with(&["us_per_page="]);
    // Every rank but 0 reads (rank 0 itself with one node).
    assert_eq!(
        lines.len(),
        nodes.max(2) - 1,
        "one us_per_page line per reading rank\n{out}"
    );
    for line in lines {
        let us: f64 = word_value(line, "us_per_page")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("us_per_page is not a number\n{out}"));
        assert!(us.is_finite() && us > 0.0, "{out}");
        assert_eq!(word_value(line, "pages"), Some("1024"), "{out}");
        assert_eq!(word_value(line, "mib"), Some("4"), "{out}");
        assert_eq!(word_value(line, "threads"), Some(t.as_str()), "{out}");
    }
}

cases!(pagefault {
    pagefault_2_nodes_uffd => (2, "uffd", 1),
    pagefault_2_nodes_segv => (2, "segv", 1),
    pagefault_1_node_uffd => (1, "uffd", 1),
    pagefault_3_nodes_3_threads_uffd => (3, "uffd", 3),
    pagefault_3_nodes_3_threads_segv => (3, "segv", 3),
});

// ---------------------------------------------------------------------------------------------
// touch: first touch with fault-around keeps memory use to the pages touched

fn touch_sparse(fault: &str) {
    // 256 MiB allocated per node, every 256th page written (1 MiB) by two threads at once.
    let out = run_example(
        2,
        fault,
        "touch",
        &["256", "--stride", "256", "--reps", "1", "--threads", "2"],
        Duration::from_secs(120),
    );
    out.assert_success();
    let lines = out.stdout_lines_with(&["us_per_page=", "rss_growth_mib="]);
    assert_eq!(lines.len(), 2, "one line per node\n{out}");
    for line in lines {
        assert_eq!(word_value(line, "pages"), Some("256"), "{out}");
        let rss: f64 = word_value(line, "rss_growth_mib")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("rss_growth_mib is not a number\n{out}"));
        assert!(
            rss < 32.0,
            "touching 1 MiB of a 256 MiB allocation grew the node by {rss} MiB\n{out}"
        );
    }
}

cases!(touch_sparse {
    touch_sparse_2_nodes_uffd => ("uffd"),
    touch_sparse_2_nodes_segv => ("segv"),
});

// ---------------------------------------------------------------------------------------------
// behind: a node behind in the collective calls takes a lock and a page sent after a request
// for an allocation it has not made yet

/// `behind 1000`: node 1, behind in the collective call sequence, waits for a lock and a page
/// that node 0 sends after its request for a page of an allocation node 1 has not made yet.
/// Node 1 must take both past that held-back request (`past_held_back=` of its statistics:
/// held back at least 1, taken past it at least 2 — so the run did go through that path)
/// and the job verify; before, node 1 waited for the lock until `SVM_TIMEOUT` (set to 60 s
/// here, under the test's own deadline).
fn behind(nodes: usize, fault: &str, protocol: &str) {
    let _serial = serial();
    let exe = example_path("behind");
    let exe = exe.to_str().expect("non-UTF-8 target path");
    let n = nodes.to_string();
    let args = [
        "-n",
        &n,
        "--fault",
        fault,
        "--protocol",
        protocol,
        "--timeout",
        "60",
        exe,
        "1000",
    ];
    let out = run_svmrun_env(&args, &[("SVM_STATS", "1")], Duration::from_secs(120));
    out.assert_success();
    let line = only_line(&out, &["behind", "OK"]);
    assert_eq!(word_value(line, "nodes"), Some(n.as_str()), "{out}");
    let count = |key: &str| node_stat(&out, 1, "past_held_back", key);
    assert!(count("held_back") >= 1, "nothing was held back\n{out}");
    assert!(
        count("past_held_back") >= 2,
        "the lock grant and the page did not pass the held-back request\n{out}"
    );
}

cases!(behind {
    behind_2_nodes_uffd_sc_sw => (2, "uffd", "sc-sw"),
    behind_2_nodes_segv_sc_sw => (2, "segv", "sc-sw"),
    behind_2_nodes_uffd_scope => (2, "uffd", "scope"),
    behind_3_nodes_uffd_sc_mw => (3, "uffd", "sc-mw"),
});

// ---------------------------------------------------------------------------------------------
// scatter: a manager waiting at a barrier grants a writer the pages around its requests

/// `scatter 256 3`: node 0, home of the array, writes its words of every page and waits at
/// the barrier while the other nodes write theirs in a scrambled page order. Every word of
/// every node must survive every round. Under sc-sw node 0 grants the writers the pages
/// around their requests (`granted_around=` of its statistics above 0, `SVM_GRANT_AROUND`),
/// unless that is set to 0; the multiple-writer protocols never do.
fn scatter(nodes: usize, fault: &str, protocol: &str, grant_around: Option<&str>) {
    let _serial = serial();
    let exe = example_path("scatter");
    let exe = exe.to_str().expect("non-UTF-8 target path");
    let n = nodes.to_string();
    let args = [
        "-n",
        &n,
        "--fault",
        fault,
        "--protocol",
        protocol,
        exe,
        "256",
        "3",
    ];
    let mut env = vec![("SVM_STATS", "1")];
    if let Some(g) = grant_around {
        env.push(("SVM_GRANT_AROUND", g));
    }
    let out = run_svmrun_env(&args, &env, Duration::from_secs(120));
    out.assert_success();
    let line = only_line(&out, &["scatter", "OK"]);
    assert_eq!(word_value(line, "nodes"), Some(n.as_str()), "{out}");
    let granted = node_stat(&out, 0, "granted_around", "granted_around");
    if protocol == "sc-sw" && grant_around != Some("0") {
        assert!(granted > 0, "node 0 granted nothing around\n{out}");
    } else {
        assert_eq!(granted, 0, "pages granted around\n{out}");
    }
}

cases!(scatter {
    scatter_2_nodes_uffd_sc_sw => (2, "uffd", "sc-sw", None),
    scatter_2_nodes_segv_sc_sw => (2, "segv", "sc-sw", None),
    scatter_3_nodes_uffd_sc_sw => (3, "uffd", "sc-sw", None),
    scatter_2_nodes_uffd_sc_sw_off => (2, "uffd", "sc-sw", Some("0")),
    scatter_2_nodes_uffd_sc_mw => (2, "uffd", "sc-mw", None),
});

// ---------------------------------------------------------------------------------------------
// bad arguments: a usage line and exit status 2, before any job is joined

#[test]
fn bad_arguments_give_usage_and_exit_2() {
    let cases: &[(&str, &[&str])] = &[
        ("counter", &[]),
        ("counter", &["many"]),
        ("counter", &["1", "2"]),
        ("counter", &["10", "--fast"]),
        ("jacobi", &["abc"]),
        ("scatter", &["100"]),
        ("scatter", &["256", "0"]),
        ("scatter", &["256", "3", "x"]),
        ("jacobi", &["2"]),
        ("jacobi", &["64", "10", "--frobnicate"]),
        ("pagefault", &["0"]),
        ("pagefault", &["-3"]),
        ("litmus", &["0"]),
        ("litmus", &["x"]),
        ("subsets", &[]),
        ("subsets", &["0"]),
        ("subsets", &["1", "2"]),
        ("sleeper", &["soon"]),
        ("falseshare", &["0"]),
        ("falseshare", &["ten"]),
        ("falseshare", &["10", "0"]),
        ("falseshare", &["10", "64", "0"]),
        ("falseshare", &["1", "2", "3", "4"]),
        ("regions", &["x"]),
        ("regions", &["10", "-1"]),
        ("regions", &["1", "2", "3"]),
        ("firsttouch", &["0"]),
        ("firsttouch", &["1", "2"]),
        ("touch", &["0"]),
        ("touch", &["8", "--stride", "0"]),
        ("touch", &["8", "--threads"]),
        ("behind", &["soon"]),
        ("behind", &["1", "2"]),
    ];
    for (example, args) in cases {
        let exe = example_path(example);
        let out = Job::start_program(Path::new(&exe), args, &[])
            .wait(Duration::from_secs(30))
            .unwrap_or_else(|t| panic!("{t}"));
        assert_eq!(
            out.status.code(),
            Some(2),
            "{example} {args:?} must exit 2\n{out}"
        );
        assert!(
            out.stderr.contains("usage: "),
            "{example} {args:?}: no usage line\n{out}"
        );
    }
}
