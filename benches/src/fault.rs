//! `svm-bench fault`: the page-fault table of the SVMlib paper (seed 003, §4.5) measured on svm.
//!
//! The workload is the paper's: the FFT of the CVM example set on a 64×64×16 complex array —
//! here `tests/cvm/fft3d.c`, a CVM program (compiled into this binary's source with
//! `include_str!`, built at run time with `cc $(svm-config --cflags) … $(svm-config --libs
//! cvm)`), which checks itself (inverse within 1e-9 of the input, forward equal to a one-process
//! computation and to a direct DFT). It runs under `svmrun -n N` with `SVM_STATS=json` at 2, 3
//! and 4 nodes for every protocol, fault backend and transport selected; every node prints its
//! statistics, and the fault times are the nodes' `read_fault_latency` / `write_fault_latency`
//! (fault service time seen by the faulting thread: from the runtime seeing the fault to the
//! thread's wake-up, detection excluded — the paper's definition), averaged over every fault of
//! every node and repetition (weighted by count).
//!
//! Page-fault detection time (processor fault → runtime sees it, no network) is measured with
//! `svm::measure_fault_detection` by the example `faultdetect` at one node, per backend.
//!
//! The published numbers are quoted beside ours, exactly as printed in the paper.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::deck::Level;
use crate::report::{num, Table};
use crate::util;

/// The benchmark program (also built and run by the tests of `tests/tests/cvm.rs`).
const FFT_SOURCE: &str = include_str!("../../tests/cvm/fft3d.c");

/// The paper's page-fault table (FFT 64×64×16, multiple reader / single writer protocol with
/// sequential consistency): (nodes, [CVM on Solaris, SVMlib on Solaris, SVMlib on Win32]) as
/// (read, write, average) in ms.
const SEED_FAULT_MS: [(usize, [[f64; 3]; 3]); 3] = [
    (2, [[11.3, 0.8, 4.4], [4.5, 1.3, 2.2], [3.4, 1.1, 1.8]]),
    (3, [[12.0, 0.8, 5.8], [4.6, 1.8, 2.7], [3.4, 1.4, 2.3]]),
    (4, [[16.7, 0.9, 7.1], [4.9, 1.8, 3.1], [4.0, 1.5, 2.4]]),
];
/// Column names of the paper's table, with the platforms the paper states.
const SEED_SYSTEMS: [&str; 3] = [
    "CVM on Solaris (paper: Solaris 2.5.1, Sun SS-20, Ethernet)",
    "SVMlib on Solaris (paper: same platform)",
    "SVMlib on Win32 (paper: NT 4.0, Pentium-133, FastEthernet)",
];
/// Short names for the plot legend.
const SEED_SHORT: [&str; 3] = [
    "CVM/Solaris, Ethernet (paper)",
    "SVMlib/Solaris, Ethernet (paper)",
    "SVMlib/Win32, FastEthernet (paper)",
];

/// Configurations to run.
struct Cfg {
    nodes: Vec<usize>,
    protocols: Vec<&'static str>,
    faults: Vec<&'static str>,
    transports: Vec<&'static str>,
    reps: usize,
    detect_pages: usize,
    detect_rounds: usize,
    deadline: Duration,
}

fn config(level: Level) -> Cfg {
    let (protocols, transports, nodes, reps, detect_pages, detect_rounds) = match level {
        Level::Full => (
            vec!["sc-sw", "sc-mw", "scope"],
            vec!["tcp", "deck"],
            vec![2, 3, 4],
            5,
            1024,
            6,
        ),
        Level::Quick => (
            vec!["sc-sw", "scope"],
            vec!["tcp"],
            vec![2, 3, 4],
            3,
            512,
            4,
        ),
        Level::Tiny => (vec!["sc-sw"], vec!["tcp"], vec![2], 1, 64, 2),
    };
    Cfg {
        nodes,
        protocols,
        faults: vec!["uffd", "segv"],
        transports,
        reps,
        detect_pages,
        detect_rounds,
        deadline: Duration::from_secs(120),
    }
}

/// Latency of one kind of fault on one node: count and mean (µs).
#[derive(Clone, Copy, Default)]
struct Lat {
    count: u64,
    mean_us: f64,
}

/// One node's statistics object.
#[derive(Default)]
struct NodeStats {
    read: Lat,
    write: Lat,
    read_faults: u64,
    write_faults: u64,
    remote_faults: u64,
}

/// One run of the FFT.
struct RunResult {
    protocol: &'static str,
    fault: &'static str,
    transport: &'static str,
    nodes: usize,
    rep: usize,
    nodes_stats: Vec<NodeStats>,
    time_s: Option<f64>,
    err: Option<f64>,
    verified: bool,
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
fn times(runs: &[&RunResult]) -> [Option<f64>; 3] {
    let all = || runs.iter().flat_map(|r| r.nodes_stats.iter());
    [
        mean_ms(all().map(|s| s.read)),
        mean_ms(all().map(|s| s.write)),
        mean_ms(all().flat_map(|s| [s.read, s.write])),
    ]
}

fn rwa(t: [Option<f64>; 3]) -> String {
    format!("{} / {} / {}", ms(t[0]), ms(t[1]), ms(t[2]))
}

/// Milliseconds with 3 decimals (our times are tens of µs; the paper's are ms with 1 decimal).
fn ms(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.3}"),
        _ => "–".into(),
    }
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
fn parse_stats(stderr: &str) -> Result<Vec<NodeStats>, String> {
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
fn parse_fft(stdout: &str) -> Result<(f64, f64), String> {
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
fn build_fft(dir: &Path) -> Result<PathBuf, String> {
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
fn run_fft(
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

/// Detection times of one backend: (mean, p50, p90) µs, median over `reps` runs.
struct Detect {
    backend: &'static str,
    mean_us: Option<f64>,
    p50_us: Option<f64>,
    p90_us: Option<f64>,
    faults: u64,
}

fn run_detect(
    svmrun: &Path,
    prog: &Path,
    cfg: &Cfg,
    backend: &'static str,
) -> Result<Detect, String> {
    let (mut means, mut p50s, mut p90s, mut faults) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for _ in 0..cfg.reps {
        let mut c = Command::new(svmrun);
        c.args(["-n", "1", "--no-prefix", "--fault", backend]);
        c.arg(prog)
            .arg(cfg.detect_pages.to_string())
            .arg(cfg.detect_rounds.to_string());
        let r = util::run_with_deadline(c, cfg.deadline);
        if !r.ok {
            return Err(format!(
                "faultdetect --fault {backend} failed ({}): {}",
                r.status,
                util::tail(&r.stderr, 5)
            ));
        }
        let get = |k: &str| {
            util::kv(&r.stdout, k)
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| format!("faultdetect: no numeric `{k}=` in {:?}", r.stdout))
        };
        let got = util::kv(&r.stdout, "backend").unwrap_or("");
        if got != backend {
            return Err(format!(
                "faultdetect ran with backend {got:?}, not {backend}"
            ));
        }
        let mean = get("detect_us_mean")?;
        if mean.is_nan() || mean <= 0.0 {
            return Err(format!(
                "faultdetect --fault {backend} measured no fault: {:?}",
                r.stdout.trim()
            ));
        }
        means.push(mean);
        p50s.push(get("detect_us_p50")?);
        p90s.push(get("detect_us_p90")?);
        faults += get("faults")? as u64;
    }
    Ok(Detect {
        backend,
        mean_us: Some(util::median(&means)),
        p50_us: Some(util::median(&p50s)),
        p90_us: Some(util::median(&p90s)),
        faults,
    })
}

/// `svm-bench fault`. Ok(true) when every run passed its checks.
pub fn run(level: Level, out: &Path) -> Result<bool, String> {
    let t_start = Instant::now();
    let cfg = config(level);
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let svmrun = util::program("svmrun")?;
    let detect_prog = util::program("examples/faultdetect")?;
    let build_dir = std::env::temp_dir().join(format!("svm-bench-fault-{}", std::process::id()));
    let fft = build_fft(&build_dir);
    let fft = match fft {
        Ok(f) => f,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&build_dir);
            return Err(e);
        }
    };
    let mut failures: Vec<String> = Vec::new();
    let mut runs: Vec<RunResult> = Vec::new();
    for &protocol in &cfg.protocols {
        for &fault in &cfg.faults {
            for &transport in &cfg.transports {
                for &n in &cfg.nodes {
                    for rep in 0..cfg.reps {
                        let label = format!("{protocol} {fault} {transport} n={n} rep {}", rep + 1);
                        let (r, error) =
                            run_fft(&svmrun, &fft, &cfg, protocol, fault, transport, n, rep);
                        match error {
                            None => eprintln!(
                                "fault: {label:<28} read/write/avg {} ms, fft3d OK in {} s",
                                rwa(times(&[&r])),
                                num(r.time_s)
                            ),
                            Some(e) => {
                                eprintln!("fault: FAILED: {label}: {e}");
                                failures.push(format!("{label}: {e}"));
                            }
                        }
                        runs.push(r);
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&build_dir);
    let mut detects = Vec::new();
    for &backend in &cfg.faults {
        match run_detect(&svmrun, &detect_prog, &cfg, backend) {
            Ok(d) => {
                eprintln!(
                    "fault: detection {backend}: mean {} µs, p50 {} µs ({} faults)",
                    num(d.mean_us),
                    num(d.p50_us),
                    d.faults
                );
                detects.push(d);
            }
            Err(e) => {
                eprintln!("fault: FAILED: {e}");
                failures.push(e);
                detects.push(Detect {
                    backend,
                    mean_us: None,
                    p50_us: None,
                    p90_us: None,
                    faults: 0,
                });
            }
        }
    }
    let touch = crate::memory::first_touch(level, &svmrun);
    failures.extend(touch.failures.iter().cloned());
    let threads = crate::memory::fault_threads(level, &svmrun);
    failures.extend(threads.failures.iter().cloned());
    let (mut md, mut headline) = report(
        level,
        &cfg,
        &runs,
        &detects,
        &failures,
        t_start.elapsed().as_secs_f64(),
    );
    md.push('\n');
    md.push_str(&touch.md);
    md.push('\n');
    md.push_str(&threads.md);
    for l in touch.headline.iter().chain(&threads.headline) {
        headline.push_str(&format!("fault: {l}\n"));
    }
    std::fs::write(out.join("fault.md"), md).map_err(|e| format!("writing fault.md: {e}"))?;
    std::fs::write(out.join("fault_time.svg"), plot(&cfg, &runs))
        .map_err(|e| format!("writing fault_time.svg: {e}"))?;
    print!("{headline}");
    let verified = runs.iter().filter(|r| r.verified).count();
    println!(
        "fault: {verified} of {} FFT runs passed their checks, {} failures; report {}",
        runs.len(),
        failures.len(),
        out.join("fault.md").display()
    );
    Ok(failures.is_empty())
}

/// The runs of one configuration.
fn select<'a>(runs: &'a [RunResult], p: &str, f: &str, t: &str, n: usize) -> Vec<&'a RunResult> {
    runs.iter()
        .filter(|r| {
            r.verified && r.protocol == p && r.fault == f && r.transport == t && r.nodes == n
        })
        .collect()
}

/// Transport of the headline table: TCP, as in the paper (TCP/IP), if it was run.
fn headline_transport(cfg: &Cfg) -> &'static str {
    if cfg.transports.contains(&"tcp") {
        "tcp"
    } else {
        cfg.transports[0]
    }
}

/// (fault.md, the headline printed on stdout).
fn report(
    level: Level,
    cfg: &Cfg,
    runs: &[RunResult],
    detects: &[Detect],
    failures: &[String],
    elapsed: f64,
) -> (String, String) {
    let mut md = String::new();
    md.push_str("# svm-bench fault\n\n");
    md.push_str(&format!(
        "Run: {} mode, {} CPU(s), {:.0} s. Workload: `tests/cvm/fft3d.c`, the 3-D FFT of the CVM example set on a \
         64×64×16 complex array (two shared arrays of 1 MiB, slabs per process, transposes through shared memory), \
         a CVM program run by `svmrun -n N --protocol P --fault F --transport T` with `SVM_STATS=json`; \
         {} repetition(s) per configuration; every run checks its result (inverse within 1e-9 of the input, \
         forward equal to a one-process computation within 1e-9 and to a direct DFT within 1e-8).\n\n",
        crate::deck::level_name(level),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        elapsed,
        cfg.reps
    ));
    let verified = runs.iter().filter(|r| r.verified).count();
    md.push_str(&format!(
        "verification: {verified} of {} FFT runs passed their checks, {} failures\n\n",
        runs.len(),
        failures.len()
    ));
    for f in failures {
        md.push_str(&format!("- FAILED: {f}\n"));
    }
    if !failures.is_empty() {
        md.push('\n');
    }

    // 1. The paper's table, ours beside it.
    let ht = headline_transport(cfg);
    let ours: Vec<&str> = cfg.faults.to_vec();
    let proto = if cfg.protocols.contains(&"sc-sw") {
        "sc-sw"
    } else {
        cfg.protocols[0]
    };
    let head: Vec<String> = std::iter::once("nodes".to_string())
        .chain(
            ours.iter()
                .map(|f| format!("svm {proto}, {f}, {ht} (this machine)")),
        )
        .chain(SEED_SYSTEMS.iter().map(|s| s.to_string()))
        .collect();
    let mut t = Table::new(head);
    for &(n, seed) in &SEED_FAULT_MS {
        let row: Vec<String> = std::iter::once(n.to_string())
            .chain(
                ours.iter()
                    .map(|f| rwa(times(&select(runs, proto, f, ht, n)))),
            )
            .chain(
                seed.iter()
                    .map(|s| format!("{:.1} / {:.1} / {:.1}", s[0], s[1], s[2])),
            )
            .collect();
        t.row(row);
    }
    md.push_str("## Page-fault time: read / write / average [ms] (FFT 64×64×16)\n\n");
    md.push_str(&format!(
        "The paper's table (seed 003, §4.5) with svm beside it. The paper's protocol is \"a multiple reader / \
         single writer protocol implementing sequential consistency\": svm's `{proto}`. svm's nodes are processes \
         on one host talking over {ht} loopback; the paper's were workstations on (Fast) Ethernet, and its times \
         are \"mainly influenced by the high TCP/IP latency\". Page-fault time = mean time to handle one fault, \
         detection excluded, over every fault of every node.\n\n"
    ));
    md.push_str(&t.render());
    md.push('\n');
    let headline = format!(
        "fault: page-fault time read / write / average ms (FFT 64x64x16, svm {proto} over {ht} vs the paper)\n{}",
        t.render()
    );

    // 2. Every configuration.
    let head: Vec<String> = ["protocol", "fault", "transport"]
        .iter()
        .map(|s| s.to_string())
        .chain(
            cfg.nodes
                .iter()
                .map(|n| format!("{n} nodes: read / write / avg ms")),
        )
        .collect();
    let mut t = Table::new(head);
    for &p in &cfg.protocols {
        for &f in &cfg.faults {
            for &tr in &cfg.transports {
                let row: Vec<String> = [p, f, tr]
                    .iter()
                    .map(|s| s.to_string())
                    .chain(
                        cfg.nodes
                            .iter()
                            .map(|&n| rwa(times(&select(runs, p, f, tr, n)))),
                    )
                    .collect();
                t.row(row);
            }
        }
    }
    md.push_str("## Every configuration: read / write / average page-fault time [ms]\n\n");
    md.push_str(&t.render());
    md.push('\n');

    // 3. Detection.
    md.push_str("## Page-fault detection time (no network)\n\n");
    md.push_str(
        "From the processor fault on a protected page to the moment the runtime sees it (the paper: \"all \
         operating system overhead to deliver a page fault exception to user code\"). Measured by \
         `svm::measure_fault_detection` (example `faultdetect`, one node, fresh local pages, first round \
         dropped as warm-up); median over the repetitions.\n\n",
    );
    let mut t = Table::new(["backend", "mean µs", "p50 µs", "p90 µs", "faults"]);
    for d in detects {
        t.row([
            format!("svm {} (this machine)", d.backend),
            num(d.mean_us),
            num(d.p50_us),
            num(d.p90_us),
            d.faults.to_string(),
        ]);
    }
    md.push_str(&t.render());
    md.push_str("\nThe paper's detection times (mean):\n\n");
    let mut t = Table::new([
        "system",
        "SuperSPARC, 50 MHz",
        "Pentium, 133 MHz",
        "Pentium Pro, 200 MHz",
    ]);
    t.row(["Windows NT 4.0 Server / Workstation", "-", "28 μs", "19 μs"]);
    t.row(["Solaris 2.5.1", "135 μs", "92 μs", "48 μs"]);
    md.push_str(&t.render());
    md.push('\n');
    let mut headline = headline;
    for d in detects {
        headline.push_str(&format!(
            "fault: detection {}: mean {} µs, p50 {} µs (paper: NT 19–28 µs, Solaris 48–135 µs)\n",
            d.backend,
            num(d.mean_us),
            num(d.p50_us)
        ));
    }

    // 4. Every run.
    md.push_str("## All runs\n\n");
    let mut t = Table::new([
        "protocol",
        "fault",
        "transport",
        "nodes",
        "rep",
        "read faults",
        "write faults",
        "remote faults",
        "read ms",
        "write ms",
        "avg ms",
        "FFT time s",
        "FFT err",
        "verified",
    ]);
    for r in runs {
        let sum = |f: fn(&NodeStats) -> u64| r.nodes_stats.iter().map(f).sum::<u64>().to_string();
        let tm = times(&[r]);
        t.row([
            r.protocol.to_string(),
            r.fault.to_string(),
            r.transport.to_string(),
            r.nodes.to_string(),
            (r.rep + 1).to_string(),
            sum(|s| s.read_faults),
            sum(|s| s.write_faults),
            sum(|s| s.remote_faults),
            ms(tm[0]),
            ms(tm[1]),
            ms(tm[2]),
            num(r.time_s),
            r.err.map_or("–".into(), |e| format!("{e:.1e}")),
            if r.verified {
                "yes".into()
            } else {
                "NO".into()
            },
        ]);
    }
    md.push_str(&t.render());
    md.push_str(
        "\nNotes: read / write ms are means over every read (write) fault of every node, weighted by count \
         (`read_fault_latency` / `write_fault_latency` of `SVM_STATS=json`); avg is the mean over all faults. \
         Faults include local ones (e.g. a write to a page already held read-only that only needs a twin or an \
         ownership change). Runs with more nodes than CPUs oversubscribe the machine. Plot: `fault_time.svg`.\n",
    );
    (md, headline)
}

/// Grouped bar plot (log y): average fault time per node count, ours and the paper's.
fn plot(cfg: &Cfg, runs: &[RunResult]) -> String {
    let mut series: Vec<(String, Vec<Option<f64>>)> = Vec::new();
    let groups: Vec<usize> = SEED_FAULT_MS.iter().map(|s| s.0).collect();
    for &p in &cfg.protocols {
        for &f in &cfg.faults {
            for &tr in &cfg.transports {
                let v = groups
                    .iter()
                    .map(|&n| times(&select(runs, p, f, tr, n))[2])
                    .collect();
                series.push((format!("svm {p}, {f}, {tr}"), v));
            }
        }
    }
    for (i, name) in SEED_SHORT.iter().enumerate() {
        series.push((
            name.to_string(),
            SEED_FAULT_MS.iter().map(|s| Some(s.1[i][2])).collect(),
        ));
    }
    bar_svg(
        "FFT 64×64×16: average page-fault time (log scale)",
        "ms per fault",
        &groups
            .iter()
            .map(|n| format!("{n} nodes"))
            .collect::<Vec<_>>(),
        &series,
    )
}

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#aec7e8", "#ff9896", "#98df8a",
];
const SEED_COLORS: &[&str] = &["#404040", "#7f7f7f", "#bfbfbf"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A grouped bar chart with a log10 y axis. The last `SEED_SHORT.len()` series are the paper's
/// (grey).
fn bar_svg(
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> String {
    use std::fmt::Write as _;
    let vals = series
        .iter()
        .flat_map(|s| s.1.iter().flatten())
        .filter(|v| v.is_finite() && **v > 0.0);
    let (lo, hi) = vals.fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    let (lo, hi) = if lo > hi { (0.1, 10.0) } else { (lo, hi) };
    let (e0, e1) = (
        lo.log10().floor(),
        hi.log10().ceil().max(lo.log10().floor() + 1.0),
    );
    let nbars = series.len().max(1) as f64;
    let legend_h = 20.0 * series.len() as f64 + 20.0;
    let (w, ml, mr, mt, mb) = (1000.0, 80.0, 300.0, 50.0, 60.0);
    let h = (mt + mb + 360.0f64).max(mt + legend_h + 20.0);
    let (pw, ph) = (w - ml - mr, h - mt - mb);
    let sy = |v: f64| mt + ph - (v.log10() - e0) / (e1 - e0) * ph;
    let gw = pw / groups.len().max(1) as f64;
    let bw = gw * 0.8 / nbars;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="16">{}</text>"#,
        ml + pw / 2.0,
        esc(title)
    );
    let mut e = e0;
    while e <= e1 + 1e-9 {
        let y = sy(10f64.powf(e));
        let label = format!("{:.*}", (-e).max(0.0) as usize, 10f64.powf(e));
        let _ = writeln!(
            s,
            r##"<line x1="{ml}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#d0d0d0"/><text x="{}" y="{:.1}" text-anchor="end">{label}</text>"##,
            ml + pw,
            ml - 6.0,
            y + 4.0
        );
        e += 1.0;
    }
    for (gi, g) in groups.iter().enumerate() {
        let x0 = ml + gi as f64 * gw + gw * 0.1;
        for (si, (name, v)) in series.iter().enumerate() {
            let Some(v) = v
                .get(gi)
                .copied()
                .flatten()
                .filter(|v| v.is_finite() && *v > 0.0)
            else {
                continue;
            };
            let seed = si + SEED_SHORT.len() >= series.len();
            let c = if seed {
                SEED_COLORS[(si + SEED_SHORT.len() - series.len()) % SEED_COLORS.len()]
            } else {
                COLORS[si % COLORS.len()]
            };
            let (x, y) = (x0 + si as f64 * bw, sy(v));
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{c}"><title>{}: {} ms</title></rect>"#,
                (bw - 1.0).max(1.0),
                (mt + ph - y).max(0.0),
                esc(name),
                num(Some(v))
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            ml + gi as f64 * gw + gw / 2.0,
            mt + ph + 18.0,
            esc(g)
        );
    }
    let _ = writeln!(
        s,
        r#"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(20,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
        mt + ph / 2.0,
        esc(y_label)
    );
    for (si, (name, _)) in series.iter().enumerate() {
        let seed = si + SEED_SHORT.len() >= series.len();
        let c = if seed {
            SEED_COLORS[(si + SEED_SHORT.len() - series.len()) % SEED_COLORS.len()]
        } else {
            COLORS[si % COLORS.len()]
        };
        let (lx, ly) = (ml + pw + 15.0, mt + 10.0 + si as f64 * 20.0);
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="{}" width="14" height="12" fill="{c}"/><text x="{}" y="{}">{}</text>"#,
            ly - 6.0,
            lx + 20.0,
            ly + 4.0,
            esc(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_lines_parse_with_and_without_prefix() {
        let line = r#"{"node":1,"nodes":2,"read_faults":3,"write_faults":1,"remote_faults":4,"read_fault_latency":{"count":3,"mean_us":100.0,"p50_us":1,"p90_us":1,"p99_us":1},"write_fault_latency":{"count":1,"mean_us":20.0,"p50_us":1,"p90_us":1,"p99_us":1}}"#;
        let err = format!("noise\n[1] {line}\n{line}\n");
        let s = parse_stats(&err).expect("parses");
        assert_eq!(s.len(), 2);
        let r = RunResult {
            protocol: "sc-sw",
            fault: "uffd",
            transport: "tcp",
            nodes: 2,
            rep: 0,
            nodes_stats: s,
            time_s: None,
            err: None,
            verified: true,
        };
        let t = times(&[&r]);
        assert_eq!(t[0], Some(0.1));
        assert_eq!(t[1], Some(0.02));
        assert!((t[2].unwrap() - 0.08).abs() < 1e-12);
        assert_eq!(rwa(t), "0.100 / 0.020 / 0.080");
    }

    #[test]
    fn fft_line_is_checked() {
        let ok = "fft3d OK err=1.3e-15 fwd_err=0.000e+00 dft_err=3.7e-12 time_s=0.05 procs=2 size=64x64x16\n";
        assert_eq!(parse_fft(ok).unwrap(), (0.05, 1.3e-15));
        assert!(parse_fft("fft3d FAIL err=1 fwd_err=0 dft_err=0 time_s=1\n").is_err());
        assert!(parse_fft("fft3d OK err=1e-3 fwd_err=0 dft_err=0 time_s=1\n").is_err());
    }

    #[test]
    fn bar_plot_renders() {
        let svg = bar_svg(
            "t",
            "ms",
            &["2 nodes".into(), "3 nodes".into()],
            &[
                ("a<b".into(), vec![Some(0.05), None]),
                ("paper".into(), vec![Some(4.4), Some(5.8)]),
            ],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("a&lt;b") && svg.matches("<rect x=").count() >= 3);
    }
}
