//! The FFT runs: building `fft3d.c` with the documented command, running it under `svmrun`
//! with `SVM_STATS=json`, checking its result line and reading every node's fault statistics.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::util;

use super::*;

/// The benchmark program (also built and run by the tests of `tests/tests/cvm.rs`).
const FFT_SOURCE: &str = include_str!("../../../tests/cvm/fft3d.c");

/// Latency of one kind of fault on one node: count and mean (µs).
#[derive(Clone, Copy, Default)]
struct Lat {
    count: u64,
    mean_us: f64,
}

/// One node's statistics object.
#[derive(Default)]
pub(super) struct NodeStats {
    read: Lat,
    write: Lat,
    pub(super) read_faults: u64,
    pub(super) write_faults: u64,
    pub(super) remote_faults: u64,
}

/// One run of the FFT.
pub(super) struct RunResult {
    pub(super) protocol: &'static str,
    pub(super) fault: &'static str,
    pub(super) transport: &'static str,
    pub(super) nodes: usize,
    pub(super) rep: usize,
    pub(super) nodes_stats: Vec<NodeStats>,
    pub(super) time_s: Option<f64>,
    pub(super) err: Option<f64>,
    pub(super) verified: bool,
}

/// Weighted mean over latencies, in ms (None without samples).
fn mean_ms(l: impl Iterator<Item = Lat>) -> Option<f64> {
    let (mut n, mut sum) = (0u64, 0.0);
    for x in l {
        n += x.count;
        sum += x.mean_us * x.count as f64;
    }
    (n > 0).then(|| sum / n as f64 / 1e3)
}

/// (read, write, average) ms over runs.
pub(super) fn times(runs: &[&RunResult]) -> [Option<f64>; 3] {
    let all = || runs.iter().flat_map(|r| r.nodes_stats.iter());
    [
        mean_ms(all().map(|s| s.read)),
        mean_ms(all().map(|s| s.write)),
        mean_ms(all().flat_map(|s| [s.read, s.write])),
    ]
}

fn lat_of(v: &serde_json::Value, key: &str) -> Result<Lat, String> {
    let o = v
        .get(key)
        .ok_or_else(|| format!("no `{key}` in the statistics"))?;
    let count = o
        .get("count")
        .and_then(|x| x.as_u64())
        .ok_or_else(|| format!("no `{key}.count`"))?;
    let mean_us = o
        .get("mean_us")
        .and_then(|x| x.as_f64())
        .ok_or_else(|| format!("no `{key}.mean_us`"))?;
    Ok(Lat { count, mean_us })
}

/// The statistics objects of every node (JSON lines on stderr, possibly `[K] `-prefixed).
pub(super) fn parse_stats(stderr: &str) -> Result<Vec<NodeStats>, String> {
    let mut out = Vec::new();
    for line in stderr.lines() {
        let Some(at) = line.find("{\"node\":") else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&line[at..])
            .map_err(|e| format!("bad statistics line {line:?}: {e}"))?;
        let u = |k: &str| {
            v.get(k)
                .and_then(|x| x.as_u64())
                .ok_or_else(|| format!("no `{k}` in the statistics"))
        };
        out.push(NodeStats {
            read: lat_of(&v, "read_fault_latency")?,
            write: lat_of(&v, "write_fault_latency")?,
            read_faults: u("read_faults")?,
            write_faults: u("write_faults")?,
            remote_faults: u("remote_faults")?,
        });
    }
    Ok(out)
}

/// Checks the FFT's result line; returns (time_s, err).
pub(super) fn parse_fft(stdout: &str) -> Result<(f64, f64), String> {
    let line = stdout
        .lines()
        .find(|l| l.contains("fft3d OK"))
        .ok_or_else(|| {
            format!(
                "no `fft3d OK` line (the FFT failed its checks?): {}",
                util::tail(stdout, 3)
            )
        })?;
    let get = |k: &str| {
        util::kv(line, k)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("no numeric `{k}=` in {line:?}"))
    };
    let (err, fwd, dft, t) = (
        get("err")?,
        get("fwd_err")?,
        get("dft_err")?,
        get("time_s")?,
    );
    if !(err < 1e-9 && fwd < 1e-9 && dft < 1e-8) {
        return Err(format!("the FFT's errors are out of bounds: {line:?}"));
    }
    Ok((t, err))
}

/// Runs `script` with `sh -c` in `dir` with the profile directory (svm-config) first on PATH.
fn shell(dir: &Path, script: &str) -> Result<(), String> {
    let mut dirs = vec![util::profile_dir()];
    if let Some(p) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    let path = std::env::join_paths(dirs).map_err(|e| format!("PATH: {e}"))?;
    let mut c = Command::new("sh");
    c.arg("-c").arg(script).current_dir(dir).env("PATH", path);
    let r = util::run_with_deadline(c, Duration::from_secs(120));
    if r.ok {
        Ok(())
    } else {
        Err(format!(
            "`{script}` failed ({}): {}{}",
            r.status,
            util::tail(&r.stdout, 5),
            util::tail(&r.stderr, 10)
        ))
    }
}

/// Builds fft3d with the documented command into `dir`.
pub(super) fn build_fft(dir: &Path) -> Result<PathBuf, String> {
    util::program("svm-config")?;
    let lib = util::profile_dir().join("libsvm_cvm.so");
    if !lib.is_file() {
        return Err(format!(
            "{} is missing: build the CVM runtime with `cargo build{} -p svm-api-cvm -p svm-run`",
            lib.display(),
            if util::profile_dir().ends_with("release") {
                " --release"
            } else {
                ""
            }
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    std::fs::write(dir.join("fft3d.c"), FFT_SOURCE).map_err(|e| format!("writing fft3d.c: {e}"))?;
    shell(
        dir,
        "cc -O2 $(svm-config --cflags) fft3d.c $(svm-config --libs cvm) -o fft3d -lm",
    )?;
    Ok(dir.join("fft3d"))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn run_fft(
    svmrun: &Path,
    fft: &Path,
    cfg: &Cfg,
    protocol: &'static str,
    fault: &'static str,
    transport: &'static str,
    nodes: usize,
    rep: usize,
) -> (RunResult, Option<String>) {
    let mut res = RunResult {
        protocol,
        fault,
        transport,
        nodes,
        rep,
        nodes_stats: Vec::new(),
        time_s: None,
        err: None,
        verified: false,
    };
    let mut c = Command::new(svmrun);
    c.arg("-n").arg(nodes.to_string()).arg("--no-prefix");
    c.args([
        "--protocol",
        protocol,
        "--fault",
        fault,
        "--transport",
        transport,
    ]);
    c.arg("--timeout").arg(cfg.deadline.as_secs().to_string());
    c.arg(fft).arg("-p").arg(nodes.to_string());
    c.env("SVM_STATS", "json");
    let r = util::run_with_deadline(c, cfg.deadline + Duration::from_secs(10));
    if !r.ok {
        // Without the statistics lines (one long JSON object per node).
        let diag: String = r
            .stderr
            .lines()
            .filter(|l| !l.contains("{\"node\":"))
            .collect::<Vec<_>>()
            .join("\n");
        let e = format!(
            "svmrun failed ({}): {} {}",
            r.status,
            util::tail(&r.stdout, 3),
            util::tail(&diag, 5)
        );
        return (res, Some(e));
    }
    match parse_fft(&r.stdout) {
        Ok((t, err)) => {
            res.time_s = Some(t);
            res.err = Some(err);
        }
        Err(e) => return (res, Some(e)),
    }
    match parse_stats(&r.stderr) {
        Ok(s) if s.len() == nodes => res.nodes_stats = s,
        Ok(s) => {
            let e = format!(
                "{} statistics objects for {nodes} nodes: {}",
                s.len(),
                util::tail(&r.stderr, 5)
            );
            return (res, Some(e));
        }
        Err(e) => return (res, Some(e)),
    }
    res.verified = true;
    (res, None)
}
