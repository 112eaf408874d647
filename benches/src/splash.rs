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

/// How to get the suite (in every "not a checkout" error).
pub const HOW_TO_GET: &str = "get the suite with `git clone https://github.com/SakalisC/Splash-3 && \
     git -C Splash-3 checkout v2.0M` and pass `--suite Splash-3` (the directory that holds `codes/`)";

/// Flags of both builds (the suite's `Makefile.config`), plus `-include sys/time.h` for the
/// microsecond `CLOCK` of the pthread build (below).
const BASE_CFLAGS: &[&str] = &[
    "-O2",
    "-pthread",
    "-D_POSIX_C_SOURCE=200112",
    "-g",
    "-include",
    "sys/time.h",
];

/// The suite's pthread macro file defines `CLOCK` with `time(0)` (seconds), which makes the
/// programs' own timings useless for the baseline; the pthread build gets this definition
/// after it (the one of the suite's `c.m4.null.POSIX`: microseconds from `gettimeofday`).
const PTHREAD_CLOCK_M4: &str = "divert(-1)\n\
define(`CLOCK', `{ struct timeval svm_bench_tv_; gettimeofday(&svm_bench_tv_, NULL); \
($1) = (unsigned long)(svm_bench_tv_.tv_usec + svm_bench_tv_.tv_sec * 1000000); }')\n\
divert(0)dnl\n";

/// Where a program reports its own compute time (µs): the last number of the first line that
/// starts with this text; `None`: wall time of the run.
#[derive(Clone, Copy)]
enum TimeKey {
    Line(&'static str),
    Wall,
}

/// Output that must be equal to the pthread build's.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Sig {
    None,
    /// fft: the `Checksum difference` line.
    Checksum,
    /// ocean `-o`: the multigrid residual lines.
    Residuals,
    /// water: the energy lines between the start banner and `COMPUTESTART`.
    Energies,
    /// raytrace: the image file `inputs/teapot.rl` (same p).
    RayImage,
    /// volrend: the image files `inputs/head-scaleddown4_*.tiff` (against the pthread p = 1 run:
    /// the pthread build races at p > 1).
    VolImages,
}

struct Prog {
    name: &'static str,
    /// Directory under `codes/`.
    dir: &'static str,
    cflags: &'static [&'static str],
    /// C files compiled as they are (radiosity's graphics stubs).
    extra_srcs: &'static [&'static str],
    libs: &'static [&'static str],
    time: TimeKey,
    /// Every one of these must appear in stdout (the program's own check or completion line).
    pass: &'static [&'static str],
    sig: Sig,
}

const TOTAL: &str = "Total time without initialization";

const PROGS: &[Prog] = &[
    Prog {
        name: "barnes",
        dir: "apps/barnes",
        cflags: &["-std=c11"],
        extra_srcs: &[],
        libs: &[],
        time: TimeKey::Line("COMPUTETIME"),
        pass: &["COMPUTETIME"],
        sig: Sig::None,
    },
    Prog {
        name: "fmm",
        dir: "apps/fmm",
        cflags: &["-std=gnu99"],
        extra_srcs: &[],
        libs: &[],
        time: TimeKey::Line(TOTAL),
        pass: &["Finished FMM", TOTAL],
        sig: Sig::None,
    },
    Prog {
        name: "ocean-contiguous",
        dir: "apps/ocean/contiguous_partitions",
        cflags: &["-std=c11"],
        extra_srcs: &[],
        libs: &[],
        time: TimeKey::Line(TOTAL),
        pass: &["residual norm", TOTAL],
        sig: Sig::Residuals,
    },
    Prog {
        name: "ocean-noncontiguous",
        dir: "apps/ocean/non_contiguous_partitions",
        cflags: &["-std=c11"],
        extra_srcs: &[],
        libs: &[],
        time: TimeKey::Line(TOTAL),
        pass: &["residual norm", TOTAL],
        sig: Sig::Residuals,
    },
    Prog {
        name: "radiosity",
        dir: "apps/radiosity",
        cflags: &["-std=c11", "-I./glibdumb", "-I./glibps"],
        extra_srcs: &["glibdumb/glib.c", "glibps/glibps.c"],
        libs: &[],
        time: TimeKey::Line(TOTAL),
        pass: &["Iterations to converge", TOTAL],
        sig: Sig::None,
    },
    Prog {
        name: "raytrace",
        dir: "apps/raytrace",
        cflags: &["-std=c11", "-fcommon"],
        extra_srcs: &[],
        libs: &[],
        time: TimeKey::Line(TOTAL),
        pass: &[TOTAL],
        sig: Sig::RayImage,
    },
    Prog {
        name: "volrend",
        dir: "apps/volrend",
        cflags: &["-std=c11"],
        extra_srcs: &[],
        libs: &["-ltiff"],
        time: TimeKey::Wall,
        pass: &["Rendering..."],
        sig: Sig::VolImages,
    },
    Prog {
        name: "water-nsquared",
        dir: "apps/water-nsquared",
        cflags: &["-std=c11"],
        extra_srcs: &[],
        libs: &[],
        time: TimeKey::Line("COMPUTETIME"),
        pass: &["Exited Happily"],
        sig: Sig::Energies,
    },
    Prog {
        name: "water-spatial",
        dir: "apps/water-spatial",
        cflags: &["-std=c11"],
        extra_srcs: &[],
        libs: &[],
        time: TimeKey::Line("COMPUTETIME"),
        pass: &["Exited Happily"],
        sig: Sig::Energies,
    },
    Prog {
        name: "cholesky",
        dir: "kernels/cholesky",
        cflags: &["-std=c11"],
        extra_srcs: &[],
        libs: &[],
        time: TimeKey::Line(TOTAL),
        pass: &["PASSED"],
        sig: Sig::None,
    },
    Prog {
        name: "fft",
        dir: "kernels/fft",
        cflags: &["-std=c11"],
        extra_srcs: &[],
        libs: &[],
        time: TimeKey::Line(TOTAL),
        pass: &["TEST PASSED"],
        sig: Sig::Checksum,
    },
    Prog {
        name: "lu-contiguous",
        dir: "kernels/lu/contiguous_blocks",
        cflags: &["-std=c11"],
        extra_srcs: &[],
        libs: &[],
        time: TimeKey::Line(TOTAL),
        pass: &["TEST PASSED"],
        sig: Sig::None,
    },
    Prog {
        name: "lu-noncontiguous",
        dir: "kernels/lu/non_contiguous_blocks",
        cflags: &["-std=c11"],
        extra_srcs: &[],
        libs: &[],
        time: TimeKey::Line(TOTAL),
        pass: &["TEST PASSED"],
        sig: Sig::None,
    },
    Prog {
        name: "radix",
        dir: "kernels/radix",
        cflags: &["-std=c11"],
        extra_srcs: &[],
        libs: &[],
        time: TimeKey::Line(TOTAL),
        pass: &["PASSED: All keys in place"],
        sig: Sig::None,
    },
];

/// Options of `svm-bench splash`.
pub struct Opts {
    pub suite: PathBuf,
    pub nodes: Vec<usize>,
    pub fault: Option<String>,
    pub protocol: Option<String>,
    pub profile: bool,
    pub timeout: Duration,
    pub only: Vec<String>,
    pub out: PathBuf,
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

// ---------------------------------------------------------------- parsing and verification

/// The program's own compute time in µs (the last number on the first line starting with
/// `key`, leading blanks ignored).
fn own_time_us(stdout: &str, key: &str) -> Option<f64> {
    stdout
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|w| w.parse::<f64>().ok())
}

/// The deterministic part of the stdout for `sig` (empty: nothing to compare).
fn signature(sig: Sig, stdout: &str) -> Vec<String> {
    let lines = stdout.lines().map(str::trim);
    match sig {
        Sig::Checksum => lines
            .filter(|l| l.starts_with("Checksum difference"))
            .map(String::from)
            .collect(),
        Sig::Residuals => lines
            .filter(|l| l.contains("residual norm"))
            .map(String::from)
            .collect(),
        Sig::Energies => {
            // The all-number lines after the start banner. They are printed by the program's
            // process 0, which under svm may run on another node than `main`: its output can
            // come after the master's later lines, so their position is not used.
            let mut on = false;
            let mut v = Vec::new();
            for l in lines {
                if l.contains("NEW RUN STARTING") {
                    on = true;
                } else if on
                    && !l.is_empty()
                    && l.split_whitespace().all(|w| w.parse::<f64>().is_ok())
                {
                    v.push(l.split_whitespace().collect::<Vec<_>>().join(" "));
                }
            }
            v
        }
        Sig::None | Sig::RayImage | Sig::VolImages => Vec::new(),
    }
}

/// The program's own checks on one run's stdout.
fn self_check(prog: &Prog, stdout: &str) -> Result<(), String> {
    for p in prog.pass {
        if !stdout.contains(p) {
            return Err(format!("no `{p}` in the output"));
        }
    }
    for bad in ["TEST FAILED", "FAILED", "ERROR:"] {
        if let Some(l) = stdout.lines().find(|l| l.contains(bad)) {
            return Err(format!("the program reports {:?}", l.trim()));
        }
    }
    if let TimeKey::Line(k) = prog.time {
        if own_time_us(stdout, k).is_none() {
            return Err(format!("no time on the `{k}` line"));
        }
    }
    if matches!(prog.sig, Sig::Checksum | Sig::Residuals | Sig::Energies)
        && signature(prog.sig, stdout).is_empty()
    {
        return Err("no result lines to compare".into());
    }
    Ok(())
}

/// Statistics summed over the nodes of one svm run.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
struct SvmStats {
    nodes: u64,
    faults: u64,
    remote_faults: u64,
    pages_fetched: u64,
    locks: u64,
    barriers: u64,
}

/// The `SVM_STATS=json` objects of every node (lines holding `{"node":`).
fn parse_stats(stderr: &str) -> Result<SvmStats, String> {
    let mut s = SvmStats::default();
    for line in stderr.lines() {
        let Some(at) = line.find("{\"node\":") else {
            continue;
        };
        let v: serde_json::Value =
            serde_json::from_str(&line[at..]).map_err(|e| format!("bad statistics line: {e}"))?;
        let u = |k: &str| {
            v.get(k)
                .and_then(|x| x.as_u64())
                .ok_or_else(|| format!("no `{k}` in the statistics"))
        };
        let count = |k: &str| {
            v.get(k)
                .and_then(|x| x.get("count"))
                .and_then(|x| x.as_u64())
                .ok_or_else(|| format!("no `{k}.count` in the statistics"))
        };
        s.nodes += 1;
        s.faults += u("read_faults")? + u("write_faults")?;
        s.remote_faults += u("remote_faults")?;
        s.pages_fetched += u("pages_fetched")?;
        s.locks += count("lock_acquire_latency")?;
        s.barriers += count("barrier_wait")?;
    }
    if s.nodes == 0 {
        return Err("no statistics (SVM_STATS=json) on stderr".into());
    }
    Ok(s)
}

// ---------------------------------------------------------------- building

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Build {
    Pthread,
    Svm,
}

impl Build {
    fn label(self) -> &'static str {
        match self {
            Build::Pthread => "pthread",
            Build::Svm => "svm",
        }
    }
}

fn copy_dir(src: &Path, dst: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dst).map_err(|e| format!("creating {}: {e}", dst.display()))?;
    let rd = std::fs::read_dir(src).map_err(|e| format!("reading {}: {e}", src.display()))?;
    for e in rd {
        let e = e.map_err(|e| format!("reading {}: {e}", src.display()))?;
        let (from, to) = (e.path(), dst.join(e.file_name()));
        let ft = e
            .file_type()
            .map_err(|e| format!("{}: {e}", from.display()))?;
        if ft.is_dir() {
            copy_dir(&from, &to)?;
        } else if ft.is_file() {
            std::fs::copy(&from, &to)
                .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))?;
        }
    }
    Ok(())
}

/// The object list (`OBJS = a.o b.o \ ...`) of a program's Makefile.
fn makefile_objs(makefile: &str) -> Vec<String> {
    let mut text = String::new();
    let mut on = false;
    for l in makefile.lines() {
        if !on && l.trim_start().starts_with("OBJS") {
            on = true;
            text.push_str(l.split_once('=').map_or("", |x| x.1));
        } else if on {
            text.push_str(l);
        }
        if on {
            if let Some(t) = text.strip_suffix('\\') {
                text = format!("{t} ");
            } else {
                break;
            }
        }
    }
    text.split_whitespace().map(String::from).collect()
}

fn run_tool(cmd: Command, what: &str) -> Result<(), String> {
    let r = util::run_with_deadline(cmd, Duration::from_secs(600));
    if r.ok {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}): {}",
            r.status,
            util::tail(&format!("{}{}", r.stdout, r.stderr), 8)
        ))
    }
}

/// m4 of `src` in `dir` into `dst` with the macro files.
fn m4(dir: &Path, macros: &[PathBuf], src: &str, dst: &str) -> Result<(), String> {
    let out = std::fs::File::create(dir.join(dst)).map_err(|e| format!("{dst}: {e}"))?;
    let r = Command::new("m4")
        .current_dir(dir)
        .args(["-Ulen", "-Uindex"])
        .args(macros)
        .arg(src)
        .stdout(out)
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run m4: {e} (install m4)"))?;
    if r.status.success() {
        Ok(())
    } else {
        Err(format!(
            "m4 {src}: {}",
            String::from_utf8_lossy(&r.stderr).trim()
        ))
    }
}

/// Copies the program into `dir`, runs m4 on its `.H` and `.C` files and compiles it;
/// returns the executable.
fn build(
    prog: &Prog,
    codes: &Path,
    dir: &Path,
    macros: &[PathBuf],
    svm_cflags: &[String],
    svm_libs: &[String],
) -> Result<PathBuf, String> {
    let _ = std::fs::remove_dir_all(dir);
    copy_dir(&codes.join(prog.dir), dir)?;
    let makefile = std::fs::read_to_string(dir.join("Makefile"))
        .map_err(|e| format!("{}/Makefile: {e}", prog.dir))?;
    // Headers first; one may include another (m4 `include`), so retry until none is left.
    let mut pending: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".H"))
        .collect();
    pending.sort();
    while !pending.is_empty() {
        let mut left = Vec::new();
        let mut last_err = String::new();
        for h in &pending {
            let out = format!("{}.h", h.trim_end_matches(".H"));
            if let Err(e) = m4(dir, macros, h, &out) {
                last_err = e;
                left.push(h.clone());
            }
        }
        if left.len() == pending.len() {
            return Err(last_err);
        }
        pending = left;
    }
    let objs = makefile_objs(&makefile);
    if objs.is_empty() {
        return Err(format!("{}/Makefile: no OBJS", prog.dir));
    }
    let mut srcs = Vec::new();
    for o in &objs {
        let stem = o.trim_end_matches(".o");
        m4(dir, macros, &format!("{stem}.C"), &format!("{stem}.c"))?;
        srcs.push(format!("{stem}.c"));
    }
    let exe = dir.join("prog");
    let mut cc = Command::new("cc");
    cc.current_dir(dir)
        .args(BASE_CFLAGS)
        .args(prog.cflags)
        .args(svm_cflags)
        .args(&srcs)
        .args(prog.extra_srcs)
        .args(svm_libs)
        .arg("-o")
        .arg(&exe)
        .arg("-lm")
        .args(prog.libs);
    run_tool(cc, "cc")?;
    Ok(exe)
}

// ---------------------------------------------------------------- running

/// The inputs, decompressed once into `<scratch>/inputs`.
fn prepare_inputs(codes: &Path, inputs: &Path) -> Result<(), String> {
    std::fs::create_dir_all(inputs).map_err(|e| format!("{}: {e}", inputs.display()))?;
    for (src, name) in [
        ("kernels/cholesky/inputs/tk15.O.Z", "tk15.O"),
        ("apps/raytrace/inputs/teapot.env.Z", "teapot.env"),
        ("apps/raytrace/inputs/teapot.geo.Z", "teapot.geo"),
        (
            "apps/volrend/inputs/head-scaleddown4.den.Z",
            "head-scaleddown4.den",
        ),
    ] {
        let dst = inputs.join(name);
        if dst.is_file() {
            continue;
        }
        let from = codes.join(src);
        let f = std::fs::File::create(&dst).map_err(|e| format!("{}: {e}", dst.display()))?;
        let r = Command::new("gzip")
            .arg("-dc")
            .arg(&from)
            .stdout(f)
            .output()
            .map_err(|e| format!("cannot run gzip: {e}"))?;
        if !r.status.success() {
            let _ = std::fs::remove_file(&dst);
            return Err(format!(
                "gzip -dc {}: {}",
                from.display(),
                String::from_utf8_lossy(&r.stderr).trim()
            ));
        }
    }
    Ok(())
}

/// Replaces line `n` (1-based; 0 = the last non-empty line) of `text`.
fn set_line(text: &str, n: usize, f: impl Fn(&str) -> String) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let idx = if n == 0 {
        lines.iter().rposition(|l| !l.trim().is_empty())
    } else {
        Some(n - 1).filter(|&i| i < lines.len())
    };
    if let Some(i) = idx {
        lines[i] = f(&lines[i]);
    }
    lines.join("\n") + "\n"
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn link(src: &Path, dst: &Path) -> Result<(), String> {
    std::os::unix::fs::symlink(src, dst).map_err(|e| format!("{}: {e}", dst.display()))
}

/// Prepares `run` for one run; returns the arguments and the stdin file.
fn setup_run(
    prog: &Prog,
    p: usize,
    codes: &Path,
    inputs: &Path,
    run: &Path,
) -> Result<(Vec<String>, Option<PathBuf>), String> {
    let _ = std::fs::remove_dir_all(run);
    std::fs::create_dir_all(run.join("inputs")).map_err(|e| format!("{}: {e}", run.display()))?;
    let read =
        |rel: &str| std::fs::read_to_string(codes.join(rel)).map_err(|e| format!("{rel}: {e}"));
    let a = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let input = run.join("input");
    Ok(match prog.name {
        "barnes" => {
            // The last line of the input file is NPROC.
            write(
                &input,
                &set_line(&read("apps/barnes/input")?, 0, |_| p.to_string()),
            )?;
            (Vec::new(), Some(input))
        }
        "fmm" => {
            // Line 5 of the input file is the number of processors.
            let t = read("apps/fmm/inputs/input.16384")?;
            write(&input, &set_line(&t, 5, |_| p.to_string()))?;
            (Vec::new(), Some(input))
        }
        "water-nsquared" | "water-spatial" => {
            // Line 3: NPROCS CUTOFF.
            let t = read(&format!("apps/{}/input", prog.name))?;
            write(
                &input,
                &set_line(&t, 3, |l| {
                    let rest: Vec<&str> = l.split_whitespace().skip(1).collect();
                    format!("{p} {}", rest.join(" "))
                }),
            )?;
            link(
                &codes.join(format!("apps/{}/random.in", prog.name)),
                &run.join("random.in"),
            )?;
            (Vec::new(), Some(input))
        }
        "ocean-contiguous" | "ocean-noncontiguous" => (a(&format!("-n258 -p{p} -o")), None),
        "radiosity" => (a(&format!("-p {p} -batch")), None),
        "raytrace" => {
            std::fs::copy(inputs.join("teapot.env"), run.join("teapot.env"))
                .map_err(|e| format!("teapot.env: {e}"))?;
            link(&inputs.join("teapot.geo"), &run.join("inputs/teapot.geo"))?;
            (a(&format!("-p{p} -m64 teapot.env")), None)
        }
        "volrend" => {
            link(
                &inputs.join("head-scaleddown4.den"),
                &run.join("inputs/head-scaleddown4.den"),
            )?;
            (a(&format!("{p} inputs/head-scaleddown4")), None)
        }
        "cholesky" => {
            link(&inputs.join("tk15.O"), &run.join("tk15.O"))?;
            (a(&format!("-p{p} -t tk15.O")), None)
        }
        "fft" => (a(&format!("-p{p} -m16 -t")), None),
        "lu-contiguous" | "lu-noncontiguous" => (a(&format!("-p{p} -n256 -t")), None),
        "radix" => (a(&format!("-p{p} -n262144 -t")), None),
        other => return Err(format!("no inputs for {other}")),
    })
}

/// The image files of a run, sorted by name, with their contents.
fn images(prog: &Prog, run: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(run.join("inputs"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().into_string().ok()?;
            let keep = match prog.sig {
                Sig::RayImage => n.ends_with(".rl"),
                Sig::VolImages => n.ends_with(".tiff"),
                _ => false,
            };
            if keep {
                Some((n, std::fs::read(e.path()).ok()?))
            } else {
                None
            }
        })
        .collect();
    v.sort();
    v
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
            if o.profile {
                let dir = o.out.join("profiles");
                let _ = std::fs::create_dir_all(&dir);
                let f = dir.join(format!("{}-p{p}.md", prog.name));
                let _ = std::fs::remove_file(&f);
                c.env("SVM_PROFILE", &f);
                r.profile = Some(f);
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

/// Compares a run with its reference (the pthread run at the same p; volrend: pthread p = 1).
fn compare(prog: &Prog, r: &RunOut, reference: Option<&RunOut>) -> Result<(), String> {
    if prog.sig == Sig::None {
        return Ok(());
    }
    let Some(refr) = reference.filter(|x| x.ok) else {
        return Err("no verified pthread reference run to compare with".into());
    };
    match prog.sig {
        Sig::RayImage | Sig::VolImages => {
            if r.images.len() != refr.images.len() {
                return Err(format!(
                    "{} image files, the reference has {}",
                    r.images.len(),
                    refr.images.len()
                ));
            }
            for (a, b) in r.images.iter().zip(&refr.images) {
                if a != b {
                    return Err(format!("image {} differs from the reference", a.0));
                }
            }
            Ok(())
        }
        _ => {
            if r.sig == refr.sig {
                Ok(())
            } else {
                let at = r
                    .sig
                    .iter()
                    .zip(&refr.sig)
                    .position(|(a, b)| a != b)
                    .unwrap_or(r.sig.len().min(refr.sig.len()));
                Err(format!(
                    "result differs from the pthread build at line {}: {:?} vs {:?}",
                    at + 1,
                    r.sig.get(at),
                    refr.sig.get(at)
                ))
            }
        }
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
}

fn geomean(v: &[f64]) -> Option<f64> {
    let v: Vec<f64> = v
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    if v.is_empty() {
        None
    } else {
        Some((v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
    }
}

/// `splash: correct=N/14 geomean_ratio_p2=X max_ratio_p2=Y (PROGRAM)`.
fn headline(correct: usize, total: usize, ratios_p2: &[(&str, f64)]) -> String {
    let g = geomean(&ratios_p2.iter().map(|x| x.1).collect::<Vec<_>>());
    let max = ratios_p2
        .iter()
        .filter(|x| x.1.is_finite())
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let f = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.2}"));
    format!(
        "splash: correct={correct}/{total} geomean_ratio_p2={} max_ratio_p2={} ({})",
        f(g),
        f(max.map(|m| m.1)),
        max.map_or("none", |m| m.0)
    )
}

/// `svm-bench splash`. Ok(true) when every program compiled and every run verified.
pub fn run(o: &Opts) -> Result<bool, String> {
    let codes = codes_dir(&o.suite)?;
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
    let pthread_macros = vec![codes.join("pthread_macros/pthread.m4.stougie"), clock];
    let svm_macros = vec![svm_m4];

    let mut rows: Vec<Row> = Vec::new();
    let mut correct = 0usize;
    let mut compiled = 0usize;
    let mut failures: Vec<String> = Vec::new();
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
            match build(prog, &codes, &dir, macros, cf, libs) {
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
            let rp = run_one(prog, Build::Pthread, pt, p, &codes, &scratch, o, &svmrun);
            let rs = run_one(prog, Build::Svm, sv, p, &codes, &scratch, o, &svmrun);
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
            if rs.ok {
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
                    "verified".to_string()
                } else {
                    format!("FAILED: {}", notes.join("; "))
                }
            );
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
         Counts are sums over the nodes.\n",
        codes.display(),
        o.fault.as_ref().map_or(String::new(), |f| format!(" --fault {f}")),
        o.protocol
            .as_ref()
            .map_or(String::new(), |f| format!(" --protocol {f}")),
        if o.profile { " and `SVM_PROFILE`" } else { "" },
        BASE_CFLAGS.join(" "),
        compiled,
        progs.len()
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
    let _ = writeln!(md, "## svm / pthread time ratio\n\n{}", sum.render());
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
         energies and the raytrace image, volrend's images equal to the pthread build's at p = 1."
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

#[cfg(test)]
mod tests {
    use super::*;

    fn prog(name: &str) -> &'static Prog {
        PROGS.iter().find(|p| p.name == name).expect("program")
    }

    #[test]
    fn fourteen_programs() {
        assert_eq!(PROGS.len(), 14);
        let mut names: Vec<&str> = PROGS.iter().map(|p| p.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 14);
    }

    #[test]
    fn missing_or_wrong_suite_is_a_clear_error() {
        let e = codes_dir(Path::new("/nonexistent/splash-3")).unwrap_err();
        assert!(
            e.contains("no such directory") && e.contains("SakalisC/Splash-3"),
            "{e}"
        );
        assert!(e.contains("v2.0M"), "{e}");
        let dir =
            std::env::temp_dir().join(format!("svm-bench-splash-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("codes/kernels")).expect("mkdir");
        let e = codes_dir(&dir).unwrap_err();
        assert!(
            e.contains("not a Splash-3 checkout") && e.contains("SakalisC/Splash-3"),
            "{e}"
        );
        // Only fft present: incomplete.
        std::fs::create_dir_all(dir.join("codes/kernels/fft")).expect("mkdir");
        std::fs::write(dir.join("codes/kernels/fft/fft.C"), "x").expect("write");
        let e = codes_dir(&dir).unwrap_err();
        assert!(e.contains("incomplete") && e.contains("apps/barnes"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn own_times() {
        let t = "Start time                        :       640\n\
                 Total time with initialization    :    184066\n\
                 Total time without initialization :    170573\n";
        assert_eq!(own_time_us(t, TOTAL), Some(170573.0));
        let r = "\tTotal time without initialization\t               81353\n";
        assert_eq!(own_time_us(r, TOTAL), Some(81353.0));
        let b = "COMPUTESTART  = 17\nCOMPUTETIME   =       453351\nTRACKTIME     =  2\n";
        assert_eq!(own_time_us(b, "COMPUTETIME"), Some(453351.0));
        let w = "COMPUTETIME (after initialization) = 78392\n";
        assert_eq!(own_time_us(w, "COMPUTETIME"), Some(78392.0));
        assert_eq!(own_time_us("nothing\n", TOTAL), None);
    }

    #[test]
    fn self_checks() {
        let fft_ok = "Total time without initialization : 10\n\
                      Checksum difference is 0.000 (1.5, 1.5)\nTEST PASSED\n";
        assert!(self_check(prog("fft"), fft_ok).is_ok());
        let fft_bad = "Total time without initialization : 10\n\
                       Checksum difference is 3.000 (1.5, 4.5)\nTEST FAILED\n";
        assert!(self_check(prog("fft"), fft_bad).is_err());
        // No time on the line.
        let no_time = "Checksum difference is 0.000 (1.5, 1.5)\nTEST PASSED\n";
        assert!(self_check(prog("fft"), no_time).is_err());
        assert!(self_check(
            prog("radix"),
            "PASSED: All keys in place.\nTotal time without initialization : 5\n"
        )
        .is_ok());
        assert!(self_check(prog("radix"), "ERROR: key 5 out of place\n").is_err());
        assert!(self_check(
            prog("water-nsquared"),
            "COMPUTETIME (after initialization) = 3\n"
        )
        .is_err());
        let water = "***** NEW RUN STARTING FROM REGULAR LATTICE *****\n  3  1.5  0.05\n  \
                     10.0 305.7\nCOMPUTESTART (after initialization) = 1\n\
                     COMPUTETIME (after initialization) = 3\nExited Happily with XTT = 1\n";
        assert!(self_check(prog("water-nsquared"), water).is_ok());
        let energies = vec!["3 1.5 0.05".to_string(), "10.0 305.7".to_string()];
        assert_eq!(signature(Sig::Energies, water), energies);
        // Printed by a worker node: after the master's last lines.
        let late = "***** NEW RUN STARTING FROM REGULAR LATTICE *****\n\
                    COMPUTESTART (after initialization) = 1\n\
                    COMPUTETIME (after initialization) = 3\nExited Happily with XTT = 1\n\
                    \x20        3  1.5  0.05\n   10.0 305.7\n";
        assert_eq!(signature(Sig::Energies, late), energies);
        assert!(signature(Sig::Energies, "3 1.5\n").is_empty());
    }

    #[test]
    fn comparisons_with_the_reference() {
        let p = prog("ocean-contiguous");
        let out = |res: &str| {
            RunOut {
            ok: true,
            sig: signature(
                Sig::Residuals,
                &format!("iter 71, level 7, residual norm {res}, work = 33.875\nTotal time without initialization : 1\n"),
            ),
            ..RunOut::default()
        }
        };
        let a = out("8.00274594e-08");
        let b = out("8.00274594e-08");
        let c = out("8.00274595e-08");
        assert_eq!(a.sig.len(), 1);
        assert!(compare(p, &a, Some(&b)).is_ok());
        let e = compare(p, &a, Some(&c)).unwrap_err();
        assert!(e.contains("differs"), "{e}");
        assert!(compare(p, &a, None).is_err());
        // No signature to compare: always fine.
        assert!(compare(prog("barnes"), &a, None).is_ok());
        // Images.
        let img = |bytes: &[u8]| RunOut {
            ok: true,
            images: vec![("teapot.rl".into(), bytes.to_vec())],
            ..RunOut::default()
        };
        let rt = prog("raytrace");
        assert!(compare(rt, &img(b"abc"), Some(&img(b"abc"))).is_ok());
        assert!(compare(rt, &img(b"abc"), Some(&img(b"abd"))).is_err());
        let none = RunOut {
            ok: true,
            ..RunOut::default()
        };
        assert!(compare(rt, &none, Some(&img(b"abc"))).is_err());
    }

    #[test]
    fn stats_are_summed_over_nodes() {
        let node = |n: u64| {
            format!(
                "{{\"node\":{n},\"nodes\":2,\"protocol\":\"sc-sw\",\"read_faults\":{},\"write_faults\":2,\
                 \"local_faults\":0,\"remote_faults\":3,\"pages_fetched\":4,\
                 \"lock_acquire_latency\":{{\"count\":5,\"mean_us\":1.0}},\
                 \"barrier_wait\":{{\"count\":6,\"mean_us\":2.0}}}}",
                n + 1
            )
        };
        let stderr = format!("noise\n{}\n[1] {}\n", node(0), node(1));
        let s = parse_stats(&stderr).expect("stats");
        assert_eq!(
            s,
            SvmStats {
                nodes: 2,
                faults: 1 + 2 + 2 + 2,
                remote_faults: 6,
                pages_fetched: 8,
                locks: 10,
                barriers: 12,
            }
        );
        assert!(parse_stats("no stats here\n").is_err());
        assert!(parse_stats("{\"node\":0}\n").is_err());
    }

    #[test]
    fn makefile_objects_and_input_edits() {
        let mk = "TARGET = X\nOBJS = a.o b.o \\\n\tc.o \\\n d.o\ninclude ../Makefile.config\n";
        assert_eq!(makefile_objs(mk), vec!["a.o", "b.o", "c.o", "d.o"]);
        assert_eq!(makefile_objs("OBJS = lu.o\n"), vec!["lu.o"]);
        assert_eq!(set_line("a\nb\n1\n\n", 0, |_| "4".into()), "a\nb\n4\n\n");
        assert_eq!(
            set_line("x\ny 6.2\n", 2, |l| l.replace('y', "2")),
            "x\n2 6.2\n"
        );
    }

    #[test]
    fn headline_format() {
        let h = headline(13, 14, &[("fft", 2.0), ("radix", 8.0), ("lu", f64::NAN)]);
        assert_eq!(
            h,
            "splash: correct=13/14 geomean_ratio_p2=4.00 max_ratio_p2=8.00 (radix)"
        );
        assert_eq!(
            headline(0, 14, &[]),
            "splash: correct=0/14 geomean_ratio_p2=n/a max_ratio_p2=n/a (none)"
        );
    }
}
