//! What the svm-bench integration tests share: a fresh output directory, running the
//! `svm-bench` binary under a hard deadline, and reading a report file.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A fresh (not yet created) output directory for one test, `svm-bench-test-TAG-PID`.
pub fn out_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("svm-bench-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs svm-bench with a hard deadline; returns (success, stdout, stderr).
pub fn bench(args: &[&str], deadline: Duration) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_svm-bench"))
        .args(args)
        .env_remove("SVM_RANK")
        .env_remove("SVM_SIZE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start svm-bench");
    let mut so = child.stdout.take().expect("stdout");
    let mut se = child.stderr.take().expect("stderr");
    let to = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let te = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break Some(st);
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (o, e) = (to.join().unwrap_or_default(), te.join().unwrap_or_default());
    match status {
        Some(st) => (st.success(), o, e),
        None => panic!("svm-bench {args:?} exceeded {deadline:?}\nstdout:\n{o}\nstderr:\n{e}"),
    }
}

/// The whole file; panics with its path if it cannot be read.
pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
