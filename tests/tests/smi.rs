//! The SMI personality (`docs/smi.md`): the C programs of `tests/smi/` are built with the
//! documented command,
//!
//! ```text
//! cc -Wall -Werror=incompatible-pointer-types $(svm-config --cflags) prog.c $(svm-config --libs smi) -o prog -lm
//! ```
//!
//! into a fresh temporary directory and run under `svmrun` at 1, 2, 3 and 4 nodes with both
//! fault backends. Every program checks itself and prints `PASS <name>` on process 0.
//!
//! Needs a C compiler (`cc`). The programs need the runtime `target/<profile>/libsvm_smi.so`
//! (crate `svm-api-smi`) and `svm-config` (crate `svm-run`): `cargo test --workspace` builds
//! both.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use svm_tests::{free_port, profile_dir, run_svmrun_env, serial, Job, Output};

const NODES: [usize; 4] = [1, 2, 3, 4];
const FAULTS: [&str; 2] = ["uffd", "segv"];
/// Per run; the programs take well under a second natively.
const DEADLINE: Duration = Duration::from_secs(120);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn require_cc() {
    let ok = Command::new("cc")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(ok, "`cc` is not installed or does not run: the SMI tests need a C compiler (apt-get install gcc libc6-dev)");
}

fn svm_config() -> PathBuf {
    let path = profile_dir().join("svm-config");
    assert!(
        path.is_file(),
        "svm-config not found at {}: `cargo build --workspace --bins` builds it",
        path.display()
    );
    path
}

fn require_runtime() {
    let lib = profile_dir().join("libsvm_smi.so");
    assert!(
        lib.is_file(),
        "the SMI runtime {} is not built: it is the cdylib of svm-api-smi, a workspace member \
         (`cargo build --workspace` builds it)",
        lib.display()
    );
}

/// A fresh directory for one test's files, removed when the test passes.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("svm-smi-{}-{name}", std::process::id()));
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

/// Runs `script` with `sh -c` in `dir` with svm-config on the PATH; panics with its output if
/// it fails.
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

/// Builds `tests/smi/<name>.c` with the documented command; returns the executable.
fn build(name: &str, scratch: &Scratch) -> PathBuf {
    require_cc();
    require_runtime();
    let src = workspace_root().join("tests/smi").join(format!("{name}.c"));
    shell(
        &scratch.0,
        &format!(
            "cc -Wall -Werror -Werror=incompatible-pointer-types $(svm-config --cflags) {} \
             $(svm-config --libs smi) -o {name} -lm",
            src.display()
        ),
    );
    scratch.0.join(name)
}

fn run(exe: &Path, nodes: usize, fault: &str, args: &[&str]) -> Output {
    let n = nodes.to_string();
    let mut full = vec![
        "-n",
        &n,
        "--fault",
        fault,
        exe.to_str().expect("utf-8 path"),
    ];
    full.extend_from_slice(args);
    let _serial = serial();
    run_svmrun_env(&full, &[], DEADLINE)
}

/// Builds `name` and runs it at 1..4 nodes with both fault backends.
fn run_everywhere(name: &str, args: &[&str]) {
    let scratch = Scratch::new(name);
    let exe = build(name, &scratch);
    for nodes in NODES {
        for fault in FAULTS {
            let out = run(&exe, nodes, fault, args);
            out.assert_success();
            out.assert_stdout_contains(&format!("PASS {name}"));
            assert!(
                !out.stdout.contains("FAIL") && !out.stderr.contains("FAIL"),
                "{out}"
            );
        }
    }
}

/// Hello world with queries; SMI_Init strips the classic launcher arguments up to `--`.
#[test]
fn hello_with_queries() {
    run_everywhere(
        "hello",
        &[
            "-r",
            "0",
            "-n",
            "1",
            "-h",
            "localhost",
            "-m",
            "42",
            "--",
            "user1",
            "user2",
        ],
    );
}

#[test]
fn concurrent_linked_list() {
    run_everywhere("list", &[]);
}

#[test]
fn locks_flushes_barriers_progress_counters_all_to_all() {
    run_everywhere("sync", &[]);
}

#[test]
fn merge_sort_over_per_process_regions() {
    run_everywhere("sort", &[]);
}

#[test]
fn poisson_over_a_blocked_region_with_loop_scheduling() {
    run_everywhere("poisson", &[]);
}

#[test]
fn replication_and_reductions() {
    run_everywhere("replicate", &[]);
}

#[test]
fn region_types() {
    run_everywhere("regions", &[]);
}

#[test]
fn messages_signals_timers() {
    run_everywhere("msg", &[]);
}

/// The classic start without svmrun: `prog -r R -n N -h HOST -m MAGIC -p PORT -- args` on each
/// process, mapped onto svm's bootstrap.
#[test]
fn classic_launcher_arguments() {
    let scratch = Scratch::new("classic");
    let exe = build("hello", &scratch);
    let port = free_port().to_string();
    let _serial = serial();
    let jobs: Vec<Job> = (0..2)
        .map(|r| {
            let r = r.to_string();
            let args = [
                "-r",
                &r,
                "-n",
                "2",
                "-h",
                "127.0.0.1",
                "-m",
                "4711",
                "-p",
                &port,
                "--",
                "user1",
                "user2",
            ];
            Job::start_program(&exe, &args, &[])
        })
        .collect();
    let outs: Vec<Output> = jobs
        .into_iter()
        .map(|j| j.wait(DEADLINE).unwrap_or_else(|t| panic!("{t}")))
        .collect();
    for o in &outs {
        o.assert_success();
    }
    outs[0].assert_stdout_contains("PASS hello");
    outs[1].assert_stdout_contains("hello from process 1 of 2");
}

/// The header compiles as C++ too (extern "C", no C-only constructs), if a C++ compiler exists.
#[test]
fn header_compiles_as_cxx() {
    let have = Command::new("c++")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !have {
        eprintln!("no c++ compiler: skipping the C++ header check");
        return;
    }
    let scratch = Scratch::new("cxx");
    std::fs::write(
        scratch.0.join("t.cc"),
        "#include <smi.h>\nint main(){ smi_region_info_t i; char *p; int id;\n\
         SMI_Init_reginfo(&i, 4096, 0); SMI_Init_reginfo(&i, 4096, 0, 0, 0, 0, 0, 0);\n\
         return SMI_Create_shreg(SMI_SHM_UNDIVIDED, &i, &id, &p) + SMI_Barrier(); }\n",
    )
    .expect("write t.cc");
    shell(
        &scratch.0,
        "c++ -Wall -Werror -fsyntax-only $(svm-config --cflags) t.cc",
    );
}
