//! The native C and C++ API (`docs/c-api.md`) from an installed prefix (`docs/install.md`):
//! `scripts/install.sh` (what `make install` runs) installs this build into a fresh prefix; the
//! examples of `examples/c` and `examples/cpp` are built there with pkg-config alone,
//!
//! ```text
//! cc -O2 -Wall -Werror $(pkg-config --cflags svm) x.c $(pkg-config --libs svm) -o x -lm
//! c++ -std=c++17 -O2 -Wall -Werror $(pkg-config --cflags svm) x.cpp $(pkg-config --libs svm) -o x
//! ```
//!
//! (`PKG_CONFIG_PATH` pointing into the prefix, no `LD_LIBRARY_PATH`), and run with the
//! prefix's `svmrun` at 1–4 nodes with both fault backends.
//!
//! Needs `cc`, `c++` and `pkg-config` (.ci/run installs gcc, g++ and pkg-config).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use svm_tests::{profile_dir, serial, tool_runs, word_value, workspace_root, Job, Output};

const NODES: [usize; 4] = [1, 2, 3, 4];
const FAULTS: [&str; 2] = ["uffd", "segv"];
/// Per run; the programs take well under a second at 4 nodes, this only catches hangs.
const DEADLINE: Duration = Duration::from_secs(120);

/// The installed prefix with every example built from it.
struct Installed {
    prefix: PathBuf,
    bin: PathBuf,
}

fn sh(dir: &Path, script: &str, envs: &[(&str, &str)]) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .envs(envs.iter().copied())
        .env_remove("LD_LIBRARY_PATH")
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
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const C_PROGRAMS: [&str; 5] = ["counter", "jacobi", "prodcons", "regions", "errors"];
const CPP_PROGRAMS: [&str; 1] = ["counter"];

fn installed() -> &'static Installed {
    static INSTALLED: OnceLock<Installed> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        for tool in ["cc", "c++", "pkg-config"] {
            assert!(
                tool_runs(tool),
                "`{tool}` is not installed: the C API tests need cc, c++ and pkg-config \
                 (apt-get install gcc g++ pkg-config; .ci/run does)"
            );
        }
        let root = profile_dir().join("capi-install");
        let _ = std::fs::remove_dir_all(&root);
        let prefix = root.join("prefix");
        let build = root.join("build");
        std::fs::create_dir_all(&build).expect("create the build directory");
        let install = workspace_root().join("scripts/install.sh");
        sh(
            &root,
            &format!(
                "sh {} --prefix {} --build {}",
                install.display(),
                prefix.display(),
                profile_dir().display()
            ),
            &[],
        );
        // Only the prefix: sources copied next to the build, the prefix's pkg-config files.
        let examples = workspace_root().join("examples");
        for (dir, files) in [("c", &C_PROGRAMS[..]), ("cpp", &CPP_PROGRAMS[..])] {
            for f in files {
                let ext = if dir == "c" { "c" } else { "cpp" };
                std::fs::copy(
                    examples.join(dir).join(format!("{f}.{ext}")),
                    build.join(format!("{f}.{ext}")),
                )
                .expect("copy an example");
            }
        }
        std::fs::copy(examples.join("c/check.h"), build.join("check.h")).expect("copy check.h");
        let pc = prefix.join("lib/pkgconfig");
        let pc = pc.to_str().expect("utf-8 path");
        let env = [("PKG_CONFIG_PATH", pc)];
        let mut script = String::from("set -e\n");
        for p in C_PROGRAMS {
            script.push_str(&format!(
                "cc -O2 -Wall -Werror $(pkg-config --cflags svm) {p}.c $(pkg-config --libs svm) -o {p} -lm\n"
            ));
        }
        for p in CPP_PROGRAMS {
            script.push_str(&format!(
                "c++ -std=c++17 -O2 -Wall -Werror $(pkg-config --cflags svm) {p}.cpp $(pkg-config --libs svm) -o {p}_cpp\n"
            ));
        }
        sh(&build, &script, &env);
        Installed {
            bin: build,
            prefix,
        }
    })
}

/// `PREFIX/bin/svmrun -n NODES --fault FAULT PROGRAM ARGS...`.
fn run(program: &str, nodes: usize, fault: &str, args: &[&str]) -> Output {
    let inst = installed();
    let svmrun = inst.prefix.join("bin/svmrun");
    let exe = inst.bin.join(program);
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
    match Job::start_program(&svmrun, &full, &[]).wait(DEADLINE) {
        Ok(out) => out,
        Err(timed_out) => panic!("{timed_out}"),
    }
}

fn matrix(program: &str, args: &[&str], check: impl Fn(usize, &Output)) {
    for n in NODES {
        for f in FAULTS {
            let out = run(program, n, f, args);
            out.assert_success();
            assert!(
                !out.stdout.contains("FAIL") && !out.stderr.contains("FAIL"),
                "{out}"
            );
            check(n, &out);
        }
    }
}

fn one_line<'a>(out: &'a Output, words: &[&str]) -> &'a str {
    let lines = out.stdout_lines_with(words);
    assert_eq!(lines.len(), 1, "expected one line with {words:?}\n{out}");
    lines[0]
}

#[test]
fn counter_in_c_and_cpp() {
    matrix("counter", &["200"], |n, out| {
        let l = one_line(out, &["counter="]);
        assert_eq!(
            word_value(l, "counter"),
            Some((200 * n).to_string().as_str())
        );
        assert!(l.ends_with("OK"), "{out}");
    });
    matrix("counter_cpp", &["200"], |n, out| {
        let l = one_line(out, &["counter="]);
        assert_eq!(
            word_value(l, "counter"),
            Some((200 * n).to_string().as_str())
        );
        assert_eq!(word_value(l, "blocks"), Some("OK"), "{out}");
    });
}

/// `svm_set_profile` before `svm_init` is `SVM_PROFILE`: one merged report of every node.
#[test]
fn the_profiler_switch_writes_one_report() {
    let dir = installed().bin.join("profile");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the profile directory");
    let file = dir.join("p.md");
    let out = run(
        "counter",
        2,
        "uffd",
        &["--profile", file.to_str().expect("utf-8"), "50"],
    );
    out.assert_success();
    let report = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert!(
        !report.is_empty() && file.with_extension("md.json").is_file(),
        "{out}"
    );
}

#[test]
fn jacobi_verifies_against_a_serial_run() {
    matrix("jacobi", &["--verify", "48", "20"], |n, out| {
        let l = one_line(out, &["jacobi", "verify="]);
        assert_eq!(word_value(l, "verify"), Some("OK"), "{out}");
        assert_eq!(word_value(l, "nodes"), Some(n.to_string().as_str()));
    });
}

#[test]
fn producer_consumer_with_semaphores() {
    matrix("prodcons", &["300"], |n, out| {
        let l = one_line(out, &["prodcons", "sum="]);
        assert_eq!(word_value(l, "sum"), Some("45150"), "{out}");
        assert_eq!(
            word_value(l, "consumers"),
            Some(n.saturating_sub(1).max(1).to_string().as_str())
        );
    });
}

#[test]
fn misuse_is_an_error_code() {
    for n in [1, 2] {
        for f in FAULTS {
            let out = run("errors", n, f, &[]);
            out.assert_success();
            assert_eq!(out.stdout_lines_with(&["errors OK"]).len(), 1, "{out}");
        }
    }
}

/// A region created, filled, checked and destroyed 2,000 times at the same address: the window
/// never runs out and the resident memory does not grow with the cycles.
#[test]
fn destroyed_regions_are_reused_without_growing_memory() {
    for f in FAULTS {
        let out = run("regions", 2, f, &["2000", "65536"]);
        out.assert_success();
        let lines = out.stdout_lines_with(&["regions", "cycles=2000"]);
        assert_eq!(lines.len(), 2, "one line per node\n{out}");
        for l in lines {
            assert_eq!(word_value(l, "reused"), Some("1999"), "{out}");
            assert_eq!(word_value(l, "bad"), Some("0"), "{out}");
            let kb = |k| -> i64 { word_value(l, k).and_then(|v| v.parse().ok()).expect(k) };
            // 2,000 kept regions would hold 2000 * 64 KiB / 2 nodes = 64 MiB per node.
            let growth = kb("rss_kb_last") - kb("rss_kb_first");
            assert!(growth < 4096, "resident memory grew by {growth} KiB\n{out}");
        }
    }
    // Without destroying, the same regions exhaust a small window.
    let out = {
        let inst = installed();
        let svmrun = inst.prefix.join("bin/svmrun");
        let exe = inst.bin.join("regions");
        let _serial = serial();
        Job::start_program(
            &svmrun,
            &[
                "-n",
                "2",
                exe.to_str().expect("utf-8"),
                "--keep",
                "2000",
                "65536",
            ],
            &[("SVM_SPACE_SIZE", "64M")],
        )
        .wait(DEADLINE)
        .unwrap_or_else(|t| panic!("{t}"))
    };
    out.assert_success();
    let l = &out.stdout_lines_with(&["regions-kept", "node=0"]);
    assert_eq!(l.len(), 1, "{out}");
    // Half of the 64 MiB window is the collective arena: 512 regions of 64 KiB.
    assert_eq!(word_value(l[0], "created"), Some("512"), "{out}");
}

/// Destroying forgets every node's protocol state: under each protocol, regions written and
/// read by every node are reused and start as zeros every time (`bad=0`).
#[test]
fn destroyed_regions_start_fresh_under_every_protocol() {
    for (proto, fault) in [("sc-sw", "segv"), ("sc-mw", "uffd"), ("scope", "segv")] {
        let out = run("regions", 3, fault, &["200", "65536", proto]);
        out.assert_success();
        let lines = out.stdout_lines_with(&["regions", "cycles=200"]);
        assert_eq!(lines.len(), 3, "one line per node\n{out}");
        for l in lines {
            assert_eq!(word_value(l, "bad"), Some("0"), "{proto}\n{out}");
            assert_eq!(word_value(l, "reused"), Some("199"), "{proto}\n{out}");
        }
    }
}

#[test]
fn the_installed_svm_config_names_the_prefix() {
    let inst = installed();
    let cfg = inst.prefix.join("bin/svm-config");
    let out = sh(
        &inst.bin,
        &format!("{} --cflags --libs svm --m4 splash", cfg.display()),
        &[],
    );
    let p = inst.prefix.display();
    assert!(out.contains(&format!("-I{p}/include/svm")), "{out}");
    assert!(
        out.contains(&format!("-L{p}/lib")) && out.contains("-lsvm "),
        "{out}"
    );
    assert!(out.contains(&format!("{p}/share/svm/c.m4.svm")), "{out}");
    for pc in ["svm", "svm-smi", "svm-splash", "svm-cvm", "svm-deck"] {
        assert!(
            inst.prefix.join(format!("lib/pkgconfig/{pc}.pc")).is_file(),
            "{pc}.pc not installed"
        );
    }
}
