//! `svm-bench splash --suite DIR`: the 14 programs of the real SPLASH-2 suite (a user's
//! Splash-3 checkout, tag v2.0M, `codes/` inside) built twice with identical flags — with the
//! suite's pthread macro file and with `c.m4.svm` — run with the standard small inputs at
//! p = 1, 2, 4 (svm: p nodes through `svmrun`; pthreads: p threads), every run verified (the
//! programs' own checks, and equality with the pthread output where it is deterministic), and
//! reported per program: times, svm/pthread ratio, faults, pages fetched, lock and barrier
//! counts (from `SVM_STATS=json`).
//!
//! Nothing of the suite is copied into the repository: the programs are copied into a scratch
//! directory (`<out>/splash-build/`), built and run there. See `docs/benchmarks.md`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::report::{num, Plot, Scale, Series, Table};
use crate::util;

mod build;
mod check;
mod progs;
mod steps;
#[cfg(test)]
mod tests;

use build::*;
use check::*;
use progs::*;
pub use progs::{check_align_loops, DEFAULT_ALIGN_LOOPS};
use steps::*;

/// Options of `svm-bench splash`.
pub struct Opts {
    pub suite: PathBuf,
    pub nodes: Vec<usize>,
    pub fault: Option<String>,
    pub protocol: Option<String>,
    pub profile: bool,
    /// `SVM_TRACE` per svm run, and the remote faults' steps in the report.
    pub trace: bool,
    pub timeout: Duration,
    /// Runs per program, build and p (`main.rs` checks 1..=99; 0 fails every row, see
    /// `median_run`); each build's median run is reported.
    pub repeat: usize,
    pub only: Vec<String>,
    pub out: PathBuf,
    /// `-falign-loops=` of both builds (0: none; `DEFAULT_ALIGN_LOOPS`), checked by the
    /// caller (`check_align_loops`, like the other options in `main.rs`).
    pub align_loops: u32,
}

/// The `codes/` directory of a checkout, or a clear error that says how to get the suite.
pub fn codes_dir(suite: &Path) -> Result<PathBuf, String> {
    if !suite.is_dir() {
        return Err(format!(
            "--suite {}: no such directory; {HOW_TO_GET}",
            suite.display()
        ));
    }
    // The checkout itself, or its `codes/` directory.
    for c in [suite.join("codes"), suite.to_path_buf()] {
        if c.join("kernels/fft/fft.C").is_file() {
            let missing: Vec<&str> = PROGS
                .iter()
                .filter(|p| !c.join(p.dir).join("Makefile").is_file())
                .map(|p| p.dir)
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "--suite {}: incomplete Splash-3 checkout (missing {}); {HOW_TO_GET}",
                    suite.display(),
                    missing.join(", ")
                ));
            }
            if !c.join("pthread_macros/pthread.m4.stougie").is_file() {
                return Err(format!(
                    "--suite {}: no pthread_macros/pthread.m4.stougie (not tag v2.0M?); {HOW_TO_GET}",
                    suite.display()
                ));
            }
            return Ok(c);
        }
    }
    Err(format!(
        "--suite {}: not a Splash-3 checkout (no codes/kernels/fft/fft.C); {HOW_TO_GET}",
        suite.display()
    ))
}

/// The result of one run.
#[derive(Default)]
struct RunOut {
    ok: bool,
    err: Option<String>,
    time_us: Option<f64>,
    wall_s: f64,
    sig: Vec<String>,
    images: Vec<(String, Vec<u8>)>,
    stats: Option<SvmStats>,
    profile: Option<PathBuf>,
    trace: Option<PathBuf>,
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    prog: &Prog,
    build: Build,
    exe: &Path,
    p: usize,
    codes: &Path,
    scratch: &Path,
    o: &Opts,
    svmrun: &Path,
) -> RunOut {
    let mut r = RunOut::default();
    let run = scratch
        .join("run")
        .join(format!("{}-{}-p{p}", prog.name, build.label()));
    let (args, stdin) = match setup_run(prog, p, codes, &scratch.join("inputs"), &run) {
        Ok(x) => x,
        Err(e) => {
            r.err = Some(e);
            return r;
        }
    };
    let mut cmd = match build {
        Build::Pthread => Command::new(exe),
        Build::Svm => {
            let mut c = Command::new(svmrun);
            c.arg("-n").arg(p.to_string()).arg("--no-prefix");
            if let Some(f) = &o.fault {
                c.arg("--fault").arg(f);
            }
            if let Some(pr) = &o.protocol {
                c.arg("--protocol").arg(pr);
            }
            c.arg(exe);
            c.env("SVM_STATS", "json");
            // A fresh per-run output file of the runtime's: `<out>/<dir>/<program>-p<N>.<ext>`.
            let fresh = |dir: &str, ext: &str| {
                let dir = o.out.join(dir);
                let _ = std::fs::create_dir_all(&dir);
                let f = dir.join(format!("{}-p{p}.{ext}", prog.name));
                let _ = std::fs::remove_file(&f);
                f
            };
            if o.profile {
                let f = fresh("profiles", "md");
                c.env("SVM_PROFILE", &f);
                r.profile = Some(f);
            }
            if o.trace {
                let f = fresh("traces", "json");
                c.env("SVM_TRACE", &f);
                r.trace = Some(f);
            }
            c
        }
    };
    cmd.args(&args).current_dir(&run);
    let stdin = match stdin.map(std::fs::File::open).transpose() {
        Ok(f) => f,
        Err(e) => {
            r.err = Some(format!("input file: {e}"));
            return r;
        }
    };
    let t0 = Instant::now();
    let out = util::run_with_deadline_stdin(cmd, o.timeout, stdin);
    r.wall_s = t0.elapsed().as_secs_f64();
    let _ = std::fs::write(run.join("stdout.txt"), &out.stdout);
    let _ = std::fs::write(run.join("stderr.txt"), &out.stderr);
    if !out.ok {
        let diag: String = out
            .stderr
            .lines()
            .filter(|l| !l.contains("{\"node\":"))
            .collect::<Vec<_>>()
            .join("\n");
        r.err = Some(format!(
            "exit {}: {} {}",
            out.status,
            util::tail(&out.stdout, 2),
            util::tail(&diag, 4)
        ));
        return r;
    }
    if let Err(e) = self_check(prog, &out.stdout) {
        r.err = Some(e);
        return r;
    }
    r.time_us = match prog.time {
        TimeKey::Line(k) => own_time_us(&out.stdout, k),
        TimeKey::Wall => Some(r.wall_s * 1e6),
    };
    r.sig = signature(prog.sig, &out.stdout);
    r.images = images(prog, &run);
    if matches!(prog.sig, Sig::RayImage | Sig::VolImages) && r.images.is_empty() {
        r.err = Some("no image written".into());
        return r;
    }
    if build == Build::Svm {
        match parse_stats(&out.stderr) {
            Ok(s) => r.stats = Some(s),
            Err(e) => {
                r.err = Some(e);
                return r;
            }
        }
    }
    r.ok = true;
    r
}

/// The run to report of one build's repeated runs: the first that failed (its error fails
/// the row), else the median by time (the lower one of an even count). Its outputs (the
/// signature, images and counts it is verified and reported with) go with it.
fn median_run(mut runs: Vec<RunOut>) -> RunOut {
    if runs.is_empty() {
        return RunOut {
            err: Some("not run (--repeat 0)".into()),
            ..RunOut::default()
        };
    }
    if let Some(i) = runs.iter().position(|r| !r.ok) {
        return runs.swap_remove(i);
    }
    let time = |r: &RunOut| r.time_us.unwrap_or(f64::INFINITY);
    runs.sort_by(|a, b| time(a).total_cmp(&time(b)));
    runs.swap_remove((runs.len() - 1) / 2)
}

/// Geometric means over the programs at one p: of the ratios, and of each build's times (µs).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Means {
    ratio: Option<f64>,
    svm_us: Option<f64>,
    pthread_us: Option<f64>,
}

/// The geometric means over the verified rows at `p` that have both times (failed runs and
/// programs missing either build are left out of all three, so they cover the same programs).
fn means_at(rows: &[Row], p: usize) -> Means {
    let both: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.p == p && r.verified)
        .filter_map(|r| Some((r.svm?, r.pthread?)))
        .filter(|&(s, t)| s > 0.0 && t > 0.0)
        .collect();
    let of = |f: fn(&(f64, f64)) -> f64| geomean(&both.iter().map(f).collect::<Vec<_>>());
    Means {
        ratio: of(|&(s, t)| s / t),
        svm_us: of(|&(s, _)| s),
        pthread_us: of(|&(_, t)| t),
    }
}

// ---------------------------------------------------------------- the whole benchmark

/// One row of the report: one program at one p.
struct Row {
    prog: &'static str,
    p: usize,
    pthread: Option<f64>,
    svm: Option<f64>,
    verified: bool,
    stats: Option<SvmStats>,
    profile: String,
    /// The remote faults' steps from the run's trace (`--trace`).
    steps: Option<FaultSteps>,
}

/// `svm-bench splash`. Ok(true) when every program compiled and every run verified.
pub fn run(o: &Opts) -> Result<bool, String> {
    let codes = codes_dir(&o.suite)?;
    // Builds and runs happen in other working directories: every path must be absolute.
    let out = std::path::absolute(&o.out).map_err(|e| format!("--out {}: {e}", o.out.display()))?;
    let codes = std::path::absolute(&codes).map_err(|e| format!("{}: {e}", codes.display()))?;
    let o = &Opts {
        suite: o.suite.clone(),
        nodes: o.nodes.clone(),
        fault: o.fault.clone(),
        protocol: o.protocol.clone(),
        profile: o.profile,
        trace: o.trace,
        timeout: o.timeout,
        repeat: o.repeat,
        only: o.only.clone(),
        out,
        align_loops: o.align_loops,
    };
    let common = common_cflags(o.align_loops);
    for p in &o.only {
        if !PROGS.iter().any(|x| x.name == p) {
            return Err(format!(
                "unknown program {p:?} (expected some of {})",
                PROGS.iter().map(|x| x.name).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let svmrun = util::program("svmrun")?;
    let svm_config = util::program("svm-config")?;
    let cfg = |args: &[&str]| -> Result<String, String> {
        let r = Command::new(&svm_config)
            .args(args)
            .output()
            .map_err(|e| format!("svm-config: {e}"))?;
        if !r.status.success() {
            return Err(format!(
                "svm-config {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&r.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&r.stdout).trim().to_string())
    };
    let svm_cflags: Vec<String> = cfg(&["--cflags"])?
        .split_whitespace()
        .map(String::from)
        .collect();
    let svm_libs: Vec<String> = cfg(&["--libs", "splash"])?
        .split_whitespace()
        .map(String::from)
        .collect();
    let svm_m4 = PathBuf::from(cfg(&["--m4", "splash"])?);
    if !util::profile_dir().join("libsvm_splash.so").is_file() {
        return Err(format!(
            "{} is missing: build it with `cargo build --release --workspace --lib --bins --examples`",
            util::profile_dir().join("libsvm_splash.so").display()
        ));
    }
    let scratch = o.out.join("splash-build");
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let clock = scratch.join("pthread-clock.m4");
    write(&clock, PTHREAD_CLOCK_M4)?;
    prepare_inputs(&codes, &scratch.join("inputs"))?;
    if PROGS.iter().any(|p| {
        p.sig == Sig::VolImages && (o.only.is_empty() || o.only.iter().any(|x| x == p.name))
    }) {
        match build_tiffraw(&scratch) {
            Ok(exe) => {
                let _ = TIFFRAW.set(exe);
            }
            Err(e) => eprintln!("splash: volrend images compared as files: {e}"),
        }
    }
    let pthread_macros = vec![codes.join("pthread_macros/pthread.m4.stougie"), clock];
    let svm_macros = vec![svm_m4];

    let mut rows: Vec<Row> = Vec::new();
    let mut correct = 0usize;
    let mut compiled = 0usize;
    let mut failures: Vec<String> = Vec::new();
    let mut remarks: Vec<String> = Vec::new();
    let progs: Vec<&Prog> = PROGS
        .iter()
        .filter(|p| o.only.is_empty() || o.only.iter().any(|x| x == p.name))
        .collect();
    for prog in &progs {
        let mut exes = BTreeMap::new();
        let mut ok = true;
        for (b, macros, cf, libs) in [
            (Build::Pthread, &pthread_macros, &[][..], &[][..]),
            (Build::Svm, &svm_macros, &svm_cflags[..], &svm_libs[..]),
        ] {
            let dir = scratch.join(b.label()).join(prog.name);
            match build(prog, &codes, &dir, macros, &common, cf, libs) {
                Ok(exe) => {
                    exes.insert(b, exe);
                }
                Err(e) => {
                    eprintln!("splash: {:<20} {} build FAILED: {e}", prog.name, b.label());
                    failures.push(format!("{} ({} build): {e}", prog.name, b.label()));
                    ok = false;
                }
            }
        }
        if exes.len() == 2 {
            compiled += 1;
        }
        let (Some(pt), Some(sv)) = (exes.get(&Build::Pthread), exes.get(&Build::Svm)) else {
            for &p in &o.nodes {
                rows.push(Row {
                    prog: prog.name,
                    p,
                    pthread: None,
                    svm: None,
                    verified: false,
                    stats: None,
                    profile: String::new(),
                    steps: None,
                });
            }
            continue;
        };
        // volrend's pthread build races at p > 1: its images are compared with p = 1.
        let seq_ref = if prog.sig == Sig::VolImages {
            Some(run_one(
                prog,
                Build::Pthread,
                pt,
                1,
                &codes,
                &scratch,
                o,
                &svmrun,
            ))
        } else {
            None
        };
        for &p in &o.nodes {
            // The builds take turns, so that a slow stretch of the host falls on both.
            let run = |b: Build, exe: &Path| run_one(prog, b, exe, p, &codes, &scratch, o, &svmrun);
            let (mut pts, mut svs) = (Vec::new(), Vec::new());
            for _ in 0..o.repeat {
                pts.push(run(Build::Pthread, pt));
                svs.push(run(Build::Svm, sv));
            }
            let (rp, rs) = (median_run(pts), median_run(svs));
            let mut notes = Vec::new();
            if let Some(e) = &rp.err {
                notes.push(format!("pthread: {e}"));
            }
            if let Some(e) = &rs.err {
                notes.push(format!("svm: {e}"));
            }
            let reference = if prog.sig == Sig::VolImages {
                seq_ref.as_ref()
            } else {
                Some(&rp)
            };
            let mut remark = None;
            if rs.ok && prog.sig == Sig::VolImages {
                match seq_ref.as_ref().filter(|x| x.ok) {
                    None => notes.push("svm: no verified sequential pthread run".into()),
                    Some(seq) => {
                        let pthread_worst = if rp.ok {
                            pixel_diffs(&rp, seq)
                                .and_then(|d| d.into_iter().max())
                                .unwrap_or(0)
                        } else {
                            0
                        };
                        let pixels = seq.images.first().map_or(0, |x| x.1.len());
                        let bound = racy_bound(pthread_worst, pixels, p);
                        match compare_racy_images(&rs, seq, bound) {
                            Ok(n) => remark = n,
                            Err(e) => notes.push(format!("svm: {e}")),
                        }
                    }
                }
            } else if rs.ok {
                if let Err(e) = compare(prog, &rs, reference) {
                    notes.push(format!("svm: {e}"));
                }
            }
            if rp.ok && prog.sig == Sig::VolImages && p == 1 {
                // The sequential reference itself must agree with the p = 1 run.
                if let Err(e) = compare(prog, &rp, seq_ref.as_ref()) {
                    notes.push(format!("pthread: {e}"));
                }
            }
            let verified = rp.ok && rs.ok && notes.is_empty();
            ok &= verified;
            let ratio = match (rs.time_us, rp.time_us) {
                (Some(s), Some(t)) if t > 0.0 => Some(s / t),
                _ => None,
            };
            let stats = rs.stats;
            eprintln!(
                "splash: {:<20} p={p} pthread {} ms, svm {} ms, ratio {}, faults {}, pages {}: {}",
                prog.name,
                num(rp.time_us.map(|t| t / 1e3)),
                num(rs.time_us.map(|t| t / 1e3)),
                num(ratio),
                stats.map_or("–".into(), |s| s.faults.to_string()),
                stats.map_or("–".into(), |s| s.pages_fetched.to_string()),
                if verified {
                    remark
                        .as_ref()
                        .map_or("verified".to_string(), |m| format!("verified ({m})"))
                } else {
                    format!("FAILED: {}", notes.join("; "))
                }
            );
            if let Some(m) = &remark {
                remarks.push(format!("{} p={p}: {m}", prog.name));
            }
            if !verified {
                failures.push(format!("{} p={p}: {}", prog.name, notes.join("; ")));
            }
            let profile = match &rs.profile {
                Some(f) if f.is_file() => format!(
                    "profiles/{}",
                    f.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default()
                ),
                Some(_) => "not written (svmrun without --profile support?)".into(),
                None => String::new(),
            };
            rows.push(Row {
                prog: prog.name,
                p,
                pthread: rp.time_us,
                svm: rs.time_us,
                verified,
                stats,
                profile,
                steps: rs.trace.as_deref().and_then(trace_fault_steps),
            });
        }
        if ok {
            correct += 1;
        }
    }

    let ratio_of = |r: &Row| match (r.svm, r.pthread) {
        (Some(s), Some(t)) if t > 0.0 => Some(s / t),
        _ => None,
    };
    let p2: Vec<(&str, f64)> = rows
        .iter()
        .filter(|r| r.p == 2)
        .filter_map(|r| ratio_of(r).map(|x| (r.prog, x)))
        .collect();
    let head = headline(correct, progs.len(), &p2);

    // Report.
    let mut md = String::new();
    let _ = writeln!(md, "# SPLASH-2 (Splash-3 v2.0M) on svm vs pthreads\n");
    let _ = writeln!(md, "`{head}`\n");
    let _ =
        writeln!(
        md,
        "Suite: `{}`. svm: `svmrun -n P --no-prefix{}{}` with `SVM_STATS=json`{}; pthreads: the \
         suite's `pthread.m4.stougie` (with a microsecond `CLOCK`), p threads. Both builds: `cc {} \
         <per-program flags>`; {} of {} programs compiled with both macro files. Times are the \
         programs' own compute times (µs; `Total time without initialization`, barnes/water \
         `COMPUTETIME`), volrend: wall time of the run. ratio = svm / pthread at the same p. \
         Counts are sums over the nodes.{}\n",
        codes.display(),
        o.fault.as_ref().map_or(String::new(), |f| format!(" --fault {f}")),
        o.protocol
            .as_ref()
            .map_or(String::new(), |f| format!(" --protocol {f}")),
        if o.profile { " and `SVM_PROFILE`" } else { "" },
        common.join(" "),
        compiled,
        progs.len(),
        if o.repeat > 1 {
            format!(
                " Each program ran {} times at each p, the two builds taking turns; each row \
                 shows each build's median run (profiles, traces and the run directories' \
                 outputs: the last run).",
                o.repeat
            )
        } else {
            String::new()
        }
    );
    let mut sum = Table::new(
        std::iter::once("program".to_string())
            .chain(o.nodes.iter().map(|p| format!("ratio p={p}"))),
    );
    for prog in &progs {
        let mut cells = vec![prog.name.to_string()];
        for &p in &o.nodes {
            let r = rows.iter().find(|r| r.prog == prog.name && r.p == p);
            cells.push(match r {
                Some(r) if r.verified => num(ratio_of(r)),
                Some(r) => format!("{} (FAILED)", num(ratio_of(r))),
                None => "–".into(),
            });
        }
        sum.row(cells);
    }
    let means: Vec<Means> = o.nodes.iter().map(|&p| means_at(&rows, p)).collect();
    sum.row(
        std::iter::once("**geometric mean**".to_string()).chain(means.iter().map(|m| num(m.ratio))),
    );
    let _ = writeln!(md, "## svm / pthread time ratio\n\n{}", sum.render());
    let _ = writeln!(
        md,
        "Geometric means of the times (ms), svm / pthread: {}. Comparing two builds of the \
         runtime, the svm times' mean moves less with the host than the ratios do (the pthread \
         runs are short).\n",
        o.nodes
            .iter()
            .zip(&means)
            .map(|(p, m)| format!(
                "p = {p} {} / {}",
                num(m.svm_us.map(|t| t / 1e3)),
                num(m.pthread_us.map(|t| t / 1e3))
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for &p in &o.nodes {
        let mut t = Table::new([
            "program",
            "pthread µs",
            "svm µs",
            "ratio",
            "verified",
            "faults",
            "remote faults",
            "pages fetched",
            "locks",
            "barrier waits",
        ]);
        for r in rows.iter().filter(|r| r.p == p) {
            let s = r.stats;
            let c = |f: fn(&SvmStats) -> u64| s.map_or("–".into(), |s| f(&s).to_string());
            t.row([
                r.prog.to_string(),
                num(r.pthread),
                num(r.svm),
                num(ratio_of(r)),
                if r.verified {
                    "yes".into()
                } else {
                    "**no**".to_string()
                },
                c(|s| s.faults),
                c(|s| s.remote_faults),
                c(|s| s.pages_fetched),
                c(|s| s.locks),
                c(|s| s.barriers),
            ]);
        }
        let _ = writeln!(md, "## p = {p}\n\n{}", t.render());
    }
    if o.profile {
        let _ = writeln!(md, "## Profiles\n");
        for r in &rows {
            let _ = writeln!(md, "- {} p={}: {}", r.prog, r.p, r.profile);
        }
        md.push('\n');
    }
    if o.trace {
        md.push_str(&fault_steps_section(&rows, &o.nodes));
    }
    if !remarks.is_empty() {
        let _ = writeln!(md, "## Notes\n");
        for f in &remarks {
            let _ = writeln!(md, "- {f}");
        }
        md.push('\n');
    }
    if !failures.is_empty() {
        let _ = writeln!(md, "## Failures\n");
        for f in &failures {
            let _ = writeln!(md, "- {}", f.replace('\n', " "));
        }
        md.push('\n');
    }
    let _ = writeln!(
        md,
        "Verification: the programs' own checks (fft/lu `TEST PASSED`, radix `PASSED: All keys in \
         place`, cholesky `PASSED`, completion lines of the others); svm output equal to the \
         pthread build at the same p for the fft checksum, the ocean residuals (`-o`), the water \
         energies and the raytrace image, volrend's images equal to the pthread build's at p = 1 — or, as volrend races, differing from \
         them in at most as many pixels as the pthread build's images at the same p do."
    );
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    write(&o.out.join("splash.md"), &md)?;
    let plot = Plot {
        title: "SPLASH-2: svm / pthread time".into(),
        x_label: "nodes = threads".into(),
        y_label: "time ratio svm / pthread".into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Log10,
        y_from_zero: false,
        series: progs
            .iter()
            .map(|prog| Series {
                name: prog.name.to_string(),
                points: rows
                    .iter()
                    .filter(|r| r.prog == prog.name)
                    .filter_map(|r| ratio_of(r).map(|x| (r.p as f64, x)))
                    .collect(),
                dashed: false,
            })
            .collect(),
    };
    write(&o.out.join("splash_ratio.svg"), &plot.svg())?;
    println!("{head}");
    Ok(correct == progs.len())
}
