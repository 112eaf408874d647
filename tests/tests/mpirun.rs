//! The Open MPI recipe of docs/svmrun.md, on this host: `mpirun ... -x SVM_JOB_KEY
//! -x SVM_COORD=HOST:PORT setarch "$(uname -m)" -R PROGRAM`, with no SVM_LISTEN. Skipped with a
//! message where `mpirun` is missing (CI installs openmpi-bin).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use svm_tests::{example_path, free_port, serial, Job};

const KEY: &str = "7e57ab1e00112233445566778899aabbccddeeff00112233445566778899aabb";

fn mpirun_available() -> bool {
    match Command::new("mpirun").arg("--version").output() {
        Ok(o) if o.status.success() => true,
        _ => {
            eprintln!("SKIPPED: no mpirun on this machine (install openmpi-bin)");
            false
        }
    }
}

fn machine() -> String {
    Command::new("uname")
        .arg("-m")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|_| "x86_64".into())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// `mpirun -n 3 [extra] -x SVM_JOB_KEY -x SVM_COORD=<coord> setarch <m> -R counter 200`.
fn recipe(coord_host: &str, extra: &[&str]) {
    let _serial = serial();
    if !mpirun_available() {
        return;
    }
    let counter = example_path("counter");
    let coord = format!("-x SVM_COORD={coord_host}:{}", free_port());
    let m = machine();
    let mut args: Vec<&str> = vec!["-n", "3"];
    // CI runs as root; two cores run three ranks.
    args.extend(["--allow-run-as-root", "--oversubscribe"]);
    args.extend_from_slice(extra);
    args.extend(["-x", "SVM_JOB_KEY"]);
    args.extend(coord.split(' '));
    args.extend([
        "setarch",
        m.as_str(),
        "-R",
        counter.to_str().unwrap(),
        "200",
    ]);
    let out = Job::start_program(Path::new("mpirun"), &args, &[("SVM_JOB_KEY", KEY)])
        .wait(Duration::from_secs(120))
        .unwrap_or_else(|t| panic!("{t}"));
    eprintln!("{out}");
    out.assert_success();
    out.assert_stdout_contains("counter=600 expected=600 OK");
}

#[test]
fn open_mpi_recipe_with_localhost() {
    recipe("localhost", &["--host", "localhost:3"]);
}

#[test]
fn open_mpi_recipe_with_this_host_name() {
    let h = hostname();
    recipe(&h, &[]);
}
