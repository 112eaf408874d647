//! Paths of the built programs, child processes with hard deadlines, small helpers.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `target/<profile>`: the directory of this executable (or of `deps/` for a test binary).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("svm-bench"));
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent().map(Path::to_path_buf).unwrap_or(dir)
    } else {
        dir
    }
}

/// The default output directory: `target/svm-bench`.
pub fn default_out() -> PathBuf {
    let p = profile_dir();
    match p.parent() {
        Some(t) => t.join("svm-bench"),
        None => PathBuf::from("target/svm-bench"),
    }
}

/// A built program next to svm-bench, or an error naming the build command.
pub fn program(rel: &str) -> Result<PathBuf, String> {
    let p = profile_dir().join(rel);
    if p.is_file() {
        return Ok(p);
    }
    let prof = profile_dir()
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let flag = match prof.as_str() {
        "release" => " --release".to_string(),
        "debug" | "" => String::new(),
        other => format!(" --profile {other}"),
    };
    Err(format!(
        "{} is missing: build it with `cargo build{flag} --workspace --lib --bins --examples`",
        p.display()
    ))
}

/// A fresh 32-byte job key (not secret: benchmarks only; unique per run and phase).
pub fn fresh_key(tag: u8) -> [u8; 32] {
    let mut key = [0u8; 32];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = f.read_exact(&mut key);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mix = nanos ^ ((std::process::id() as u64) << 32);
    for (i, b) in mix.to_le_bytes().iter().enumerate() {
        key[i] ^= b;
    }
    key[31] = tag;
    key
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Output of a finished child.
pub struct Run {
    pub ok: bool,
    pub status: String,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` in its own process group with a hard deadline: on expiry the whole group is
/// killed. stdout and stderr are collected.
pub fn run_with_deadline(cmd: Command, deadline: Duration) -> Run {
    run_with_deadline_stdin(cmd, deadline, None)
}

/// [`run_with_deadline`] with the child's stdin read from `stdin` (else /dev/null).
pub fn run_with_deadline_stdin(
    mut cmd: Command,
    deadline: Duration,
    stdin: Option<std::fs::File>,
) -> Run {
    cmd.stdin(stdin.map_or_else(Stdio::null, Stdio::from))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for v in [
        "SVM_RANK",
        "SVM_SIZE",
        "SVM_COORD",
        "SVM_COORD_FD",
        "SVM_JOB_KEY",
    ] {
        cmd.env_remove(v);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Run {
                ok: false,
                status: format!("cannot start: {e}"),
                stdout: String::new(),
                stderr: String::new(),
            }
        }
    };
    let pid = child.id() as i32;
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(e) = err.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if start.elapsed() > deadline => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    // Whatever happened, nothing of the group may outlive the run.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
    let status = match status {
        Some(s) => s,
        None => {
            let _ = child.wait();
            return Run {
                ok: false,
                status: format!("killed after the deadline of {deadline:?}"),
                stdout: t_out.join().unwrap_or_default(),
                stderr: t_err.join().unwrap_or_default(),
            };
        }
    };
    Run {
        ok: status.success(),
        status: status.to_string(),
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    }
}

/// The value of `key=` in the first line of `text` that has it.
pub fn kv<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
    })
}

/// Median of a slice (sorted copy).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// Last lines of a text (diagnostics).
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_and_median() {
        let t = "noise\nchecksum=abc time_s=1.5 OK\n";
        assert_eq!(kv(t, "checksum"), Some("abc"));
        assert_eq!(kv(t, "time_s"), Some("1.5"));
        assert_eq!(kv(t, "sum"), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
