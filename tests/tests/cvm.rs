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

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use svm_tests::{profile_dir, run_svmrun_env, serial, word_value, Output};

const NODES: [usize; 4] = [1, 2, 3, 4];
const FAULTS: [&str; 2] = ["uffd", "segv"];
const PROTOCOLS: [&str; 3] = ["sc-sw", "sc-mw", "scope"];
const TRANSPORTS: [&str; 2] = ["tcp", "deck"];
/// Per run. The programs take a fraction of a second even at 4 nodes; the deadline only
/// catches hangs.
const DEADLINE: Duration = Duration::from_secs(90);
/// Every program of `tests/cvm/`.
const PROGRAMS: [&str; 7] = [
    "shape", "locks", "barrier", "private", "threads", "exitw", "fft3d",
];

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cvm")
}

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .join("svm-api-cvm/include")
}

/// Panics with an installation hint unless `cc --version` runs.
fn require_cc() {
    let ok = Command::new("cc")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "`cc` is not installed or does not run: the CVM tests need a C compiler; install one, \
         e.g. `apt-get install gcc libc6-dev` (.ci/run does)"
    );
}

/// `svm-config`, built next to `svmrun`.
fn svm_config() -> PathBuf {
    let path = profile_dir().join("svm-config");
    assert!(
        path.is_file(),
        "svm-config not found at {}: build it with `cargo build --workspace --bins` \
         (`cargo test --workspace` builds it too)",
        path.display()
    );
    path
}

/// The runtime must exist: the programs link against it. A missing runtime is a failure.
fn require_runtime() {
    let lib = profile_dir().join("libsvm_cvm.so");
    assert!(
        lib.is_file(),
        "the CVM runtime {} is not built: it is the cdylib of the crate svm-api-cvm \
         (`cargo build --workspace` builds it)",
        lib.display()
    );
}

/// A fresh directory for one test's files, removed when the test passes.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("svm-cvm-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Runs `script` with `sh -c` in `dir`, with `svm-config` on the PATH; panics with its output
/// if it fails.
fn shell(dir: &Path, script: &str) {
    let bin = svm_config();
    let bin_dir = bin.parent().expect("svm-config has a directory");
    let mut dirs = vec![bin_dir.to_path_buf()];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("PATH", std::env::join_paths(dirs).expect("PATH"))
        .output()
        .expect("cannot run sh");
    assert!(
        out.status.success(),
        "in {}:\n$ {script}\nfailed ({})\n----- stdout -----\n{}\n----- stderr -----\n{}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds `tests/cvm/<name>.c` with the documented command into `scratch`; returns the
/// executable.
fn build(name: &str, scratch: &Scratch) -> PathBuf {
    require_cc();
    require_runtime();
    for file in [format!("{name}.c"), "check.h".to_string()] {
        let src = sources().join(&file);
        std::fs::copy(&src, scratch.0.join(&file))
            .unwrap_or_else(|e| panic!("cannot copy {}: {e}", src.display()));
    }
    shell(
        &scratch.0,
        &format!(
            "cc -O2 -Wall -Werror $(svm-config --cflags) {name}.c $(svm-config --libs cvm) \
             -o {name} -lm"
        ),
    );
    scratch.0.join(name)
}

/// `svmrun -n NODES FLAGS... EXE -p NODES`.
fn run(exe: &Path, nodes: usize, flags: &[&str]) -> Output {
    let n = nodes.to_string();
    let mut full = vec!["-n", n.as_str()];
    full.extend_from_slice(flags);
    full.extend_from_slice(&[exe.to_str().expect("utf-8 path"), "-p", n.as_str()]);
    let _serial = serial();
    run_svmrun_env(&full, &[], DEADLINE)
}

/// The program passed: exit 0, its success line, no FAIL, no node left behind.
fn assert_passed(name: &str, out: &Output) {
    out.assert_success();
    assert!(!out.stdout.contains("FAIL"), "{out}");
    if name == "fft3d" {
        let line = out.stdout_lines_with(&["fft3d OK"]);
        assert_eq!(line.len(), 1, "expected one `fft3d OK` line\n{out}");
        for key in ["err", "fwd_err", "dft_err", "time_s"] {
            let v: f64 = word_value(line[0], key)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no numeric `{key}=` in {:?}\n{out}", line[0]));
            assert!(v.is_finite() && v >= 0.0, "{key}={v}\n{out}");
        }
    } else {
        out.assert_stdout_contains(&format!("PASS {name}"));
    }
}

/// Builds `name` and runs it at 1, 2, 3 and 4 nodes with both fault backends.
fn run_everywhere(name: &str) {
    let scratch = Scratch::new(name);
    let exe = build(name, &scratch);
    for nodes in NODES {
        for fault in FAULTS {
            let out = run(&exe, nodes, &["--fault", fault]);
            assert_passed(name, &out);
        }
    }
}

/// Every program (and the stub) compiles as C99 without a warning under -Wall -Wextra
/// -pedantic; no runtime needed.
#[test]
fn programs_are_warning_free_c99() {
    require_cc();
    let scratch = Scratch::new("c99");
    let strict = "cc -std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -pedantic -Werror";
    for name in PROGRAMS {
        let src = sources().join(format!("{name}.c"));
        shell(
            &scratch.0,
            &format!(
                "{strict} -I'{}' -c '{}' -o {name}.o",
                include_dir().display(),
                src.display()
            ),
        );
    }
    let stub = include_dir().join("../stub/svm_cvm_stub.c");
    shell(
        &scratch.0,
        &format!(
            "{strict} -include '{}/cvm.h' -c '{}' -o stub.o",
            include_dir().display(),
            stub.display()
        ),
    );
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
    let scratch = Scratch::new("matrix");
    let exes: Vec<(&str, PathBuf)> = ["locks", "barrier", "threads", "fft3d"]
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

#[test]
fn cvm_exit_in_a_worker_ends_the_job_with_an_error() {
    let scratch = Scratch::new("exitw");
    let exe = build("exitw", &scratch);
    for nodes in NODES {
        for fault in FAULTS {
            let out = run(&exe, nodes, &["--fault", fault]);
            assert!(!out.success(), "expected a non-zero exit status\n{out}");
            out.assert_stdout_contains(&format!("exitw: process {} calls cvm_exit", nodes - 1));
            out.assert_stderr_contains(&format!("exitw: worker {} gives up", nodes - 1));
            assert!(!out.stdout.contains("FAIL"), "{out}");
            assert!(!out.lingering, "a node outlived svmrun\n{out}");
        }
    }
}
