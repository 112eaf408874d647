//! The CVM personality (`docs/cvm.md`): the C programs of `tests/cvm/` are built with exactly
//! the documented command,
//!
//! ```text
//! cc -O2 $(svm-config --cflags) x.c $(svm-config --libs cvm) -o x -lm
//! ```
//!
//! (plus `-Wall -Werror`), into a fresh temporary directory, and run under `svmrun` at 1, 2, 3
//! and 4 nodes with both fault backends; the lock, barrier, thread and FFT programs also run
//! under every protocol and both transports at 3 nodes. Every program checks itself and prints
//! `PASS <name>` (`fft3d OK ...` for the FFT), or `FAIL ...` and ends the job non-zero.
//!
//! Needs a C compiler (`cc`). The programs need the runtime `target/<profile>/libsvm_cvm.so`
//! (crate `svm-api-cvm`) and `svm-config` (crate `svm-run`): `cargo test --workspace` builds both.

use std::path::PathBuf;
use std::time::Duration;

use svm_tests::{word_value, words, CProgram, CSuite, Output, Scratch};

const NODES: [usize; 4] = [1, 2, 3, 4];
const FAULTS: [&str; 2] = ["uffd", "segv"];
const PROTOCOLS: [&str; 3] = ["sc-sw", "sc-mw", "scope"];
const TRANSPORTS: [&str; 2] = ["tcp", "deck"];
const CVM: CSuite = CSuite {
    name: "cvm",
    tools: &["cc"],
    // Per run. The programs take a fraction of a second even at 4 nodes; the deadline only
    // catches hangs.
    deadline: Duration::from_secs(90),
};
/// Every program of `tests/cvm/`.
const PROGRAMS: [&str; 8] = [
    "shape",
    "locks",
    "barrier",
    "private",
    "threads",
    "exitw",
    "fft3d",
    "placement",
];

fn sources() -> PathBuf {
    svm_tests::workspace_root().join("tests/cvm")
}

fn include_dir() -> PathBuf {
    svm_tests::workspace_root().join("svm-api-cvm/include")
}

/// Builds `tests/cvm/<name>.c` with the documented command into `scratch`.
fn build(name: &str, scratch: &Scratch) -> CProgram {
    CVM.build(
        scratch,
        name,
        &[
            sources().join(format!("{name}.c")),
            sources().join("check.h"),
        ],
        &format!(
            "cc -O2 -Wall -Werror $(svm-config --cflags) {name}.c $(svm-config --libs cvm) \
             -o {name} -lm"
        ),
    )
}

/// `svmrun -n NODES FLAGS... EXE -p NODES`.
fn run(exe: &CProgram, nodes: usize, flags: &[&str]) -> Output {
    exe.run(nodes, flags, &dash_p(nodes), &[])
}

/// The programs' arguments at `nodes` nodes: `-p NODES`.
fn dash_p(nodes: usize) -> Vec<String> {
    words(&format!("-p {nodes}"))
}

/// The program passed: exit 0, its success line, no FAIL, no node left behind.
fn assert_passed(name: &str, out: &Output) {
    if name == "fft3d" {
        out.assert_success();
        assert!(!out.stdout.contains("FAIL"), "{out}");
        let line = out.stdout_lines_with(&["fft3d OK"]);
        assert_eq!(line.len(), 1, "expected one `fft3d OK` line\n{out}");
        for key in ["err", "fwd_err", "dft_err", "time_s"] {
            let v: f64 = word_value(line[0], key)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no numeric `{key}=` in {:?}\n{out}", line[0]));
            assert!(v.is_finite() && v >= 0.0, "{key}={v}\n{out}");
        }
    } else {
        out.assert_passed(name);
    }
}

/// Builds `name` and runs it at 1, 2, 3 and 4 nodes with both fault backends.
fn run_everywhere(name: &str) {
    let scratch = CVM.scratch(name);
    build(name, &scratch).run_matrix(&NODES, &FAULTS, dash_p, &[], |_, out| {
        assert_passed(name, out)
    });
}

/// Every program (and the stub) compiles as C99 without a warning under -Wall -Wextra
/// -pedantic; no runtime needed.
#[test]
fn programs_are_warning_free_c99() {
    CVM.require_tool("cc");
    let scratch = CVM.scratch("c99");
    let strict = "cc -std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -pedantic -Werror";
    for name in PROGRAMS {
        let src = sources().join(format!("{name}.c"));
        scratch.shell(&format!(
            "{strict} -I'{}' -c '{}' -o {name}.o",
            include_dir().display(),
            src.display()
        ));
    }
    let stub = include_dir().join("../stub/svm_cvm_stub.c");
    scratch.shell(&format!(
        "{strict} -include '{}/cvm.h' -c '{}' -o stub.o",
        include_dir().display(),
        stub.display()
    ));
}

#[test]
fn the_program_shape_of_the_spec() {
    run_everywhere("shape");
}

#[test]
fn lock_protected_counters_and_a_token_ring() {
    run_everywhere("locks");
}

#[test]
fn barrier_phases() {
    run_everywhere("barrier");
}

#[test]
fn globals_are_private_after_create_procs_and_ids_are_unique() {
    run_everywhere("private");
}

#[test]
fn two_threads_per_process() {
    run_everywhere("threads");
}

#[test]
fn fft3d_checks_itself() {
    run_everywhere("fft3d");
}

/// Locks, barriers, threads and the FFT under every protocol and both transports (3 nodes).
#[test]
fn every_protocol_and_transport() {
    let scratch = CVM.scratch("matrix");
    let exes: Vec<(&str, CProgram)> = ["locks", "barrier", "threads", "fft3d"]
        .into_iter()
        .map(|name| (name, build(name, &scratch)))
        .collect();
    for protocol in PROTOCOLS {
        for transport in TRANSPORTS {
            for (name, exe) in &exes {
                let flags = [
                    "--protocol",
                    protocol,
                    "--transport",
                    transport,
                    "--fault",
                    "uffd",
                ];
                let out = run(exe, 3, &flags);
                assert_passed(name, &out);
            }
        }
    }
}

/// Under the default protocol (scope) `cvm_alloc` homes each page on its first toucher: blocks
/// the master allocates and each process rewrites alone cost no diffs (homed on the master, a
/// worker's 20 rewrites of 32 KiB would come back as diffs), and SVM_FIRST_TOUCH=0 homes them
/// on the master again.
#[test]
fn cvm_alloc_pages_are_homed_by_first_touch() {
    let scratch = CVM.scratch("placement");
    let exe = build("placement", &scratch);
    for (first_touch, nodes) in [("1", 2), ("1", 3), ("0", 2)] {
        let envs = [("SVM_STATS", "json"), ("SVM_FIRST_TOUCH", first_touch)];
        let out = exe.run(nodes, &["--fault", "uffd"], &dash_p(nodes), &envs);
        assert_passed("placement", &out);
        let diffs = out.stat_per_node(nodes, "diff_bytes_sent");
        if first_touch == "1" {
            assert!(
                diffs.iter().all(|&d| d < 4096),
                "diff bytes per node {diffs:?}: blocks not homed at their writers\n{out}"
            );
        } else {
            assert!(
                diffs.iter().sum::<u64>() > 20 * 4096,
                "diff bytes per node {diffs:?} with SVM_FIRST_TOUCH=0\n{out}"
            );
        }
    }
}

#[test]
fn cvm_exit_in_a_worker_ends_the_job_with_an_error() {
    let scratch = CVM.scratch("exitw");
    build("exitw", &scratch).run_matrix(&NODES, &FAULTS, dash_p, &[], |nodes, out| {
        assert!(!out.success(), "expected a non-zero exit status\n{out}");
        out.assert_stdout_contains(&format!("exitw: process {} calls cvm_exit", nodes - 1));
        out.assert_stderr_contains(&format!("exitw: worker {} gives up", nodes - 1));
        assert!(!out.stdout.contains("FAIL"), "{out}");
        assert!(!out.lingering, "a node outlived svmrun\n{out}");
    });
}
