//! The 14 programs: where they are, their flags, inputs, checks and how a run is set up.

use super::*;

/// How to get the suite (in every "not a checkout" error).
pub(super) const HOW_TO_GET: &str = "get the suite with `git clone https://github.com/SakalisC/Splash-3 && \
     git -C Splash-3 checkout v2.0M` and pass `--suite Splash-3` (the directory that holds `codes/`)";

/// Flags of both builds (the suite's `Makefile.config`), plus `-include sys/time.h` for the
/// microsecond `CLOCK` of the pthread build (below).
pub(super) const BASE_CFLAGS: &[&str] = &[
    "-O2",
    "-pthread",
    "-D_POSIX_C_SOURCE=200112",
    "-g",
    "-include",
    "sys/time.h",
];

/// `--align-loops` by default: loop heads on 64-byte boundaries in both builds. The two builds
/// of one program differ in code size (the macro files expand differently), so the linker puts
/// a hot inner loop at different addresses, and on this host (AMD EPYC) a loop that straddles
/// a 32/64-byte boundary runs up to 1.8× slower: lu-noncontiguous at p = 1 (n = 512, the same
/// `bmod` instructions in both builds) took 79–93 ms in the svm build against 44–57 ms in the
/// pthread one, and 80–86 ms in a pthread build whose only change was one `fprintf` that moved
/// `bmod` by 48 bytes; with `-falign-loops=64` both pthread builds took 45–63 ms.
pub const DEFAULT_ALIGN_LOOPS: u32 = 64;

/// `--align-loops`: 0 (off) or a power of two up to a page.
pub fn check_align_loops(bytes: u32) -> Result<(), String> {
    if bytes == 0 || (bytes.is_power_of_two() && bytes <= 4096) {
        Ok(())
    } else {
        Err(format!(
            "--align-loops {bytes}: expected 0 (the suite's flags only) or a power of two up to 4096"
        ))
    }
}

/// The flags both builds of every program get: the suite's (`BASE_CFLAGS`) and, unless
/// `align_loops` is 0, `-falign-loops=align_loops`.
pub(super) fn common_cflags(align_loops: u32) -> Vec<String> {
    let mut f: Vec<String> = BASE_CFLAGS.iter().map(|s| s.to_string()).collect();
    if align_loops > 0 {
        f.push(format!("-falign-loops={align_loops}"));
    }
    f
}

/// The suite's pthread macro file defines `CLOCK` with `time(0)` (seconds), which makes the
/// programs' own timings useless for the baseline; the pthread build gets this definition
/// after it (the one of the suite's `c.m4.null.POSIX`: microseconds from `gettimeofday`).
pub(super) const PTHREAD_CLOCK_M4: &str = "divert(-1)\n\
define(`CLOCK', `{ struct timeval svm_bench_tv_; gettimeofday(&svm_bench_tv_, NULL); \
($1) = (unsigned long)(svm_bench_tv_.tv_usec + svm_bench_tv_.tv_sec * 1000000); }')\n\
divert(0)dnl\n";

/// Where a program reports its own compute time (µs): the last number of the first line that
/// starts with this text; `None`: wall time of the run.
#[derive(Clone, Copy)]
pub(super) enum TimeKey {
    Line(&'static str),
    Wall,
}

/// Output that must be equal to the pthread build's.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Sig {
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

pub(super) struct Prog {
    pub(super) name: &'static str,
    /// Directory under `codes/`.
    pub(super) dir: &'static str,
    pub(super) cflags: &'static [&'static str],
    /// C files compiled as they are (radiosity's graphics stubs).
    pub(super) extra_srcs: &'static [&'static str],
    pub(super) libs: &'static [&'static str],
    pub(super) time: TimeKey,
    /// Every one of these must appear in stdout (the program's own check or completion line).
    pub(super) pass: &'static [&'static str],
    pub(super) sig: Sig,
}

pub(super) const TOTAL: &str = "Total time without initialization";

pub(super) const PROGS: &[Prog] = &[
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

/// The inputs, decompressed once into `<scratch>/inputs`.
pub(super) fn prepare_inputs(codes: &Path, inputs: &Path) -> Result<(), String> {
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
pub(super) fn set_line(text: &str, n: usize, f: impl Fn(&str) -> String) -> String {
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

pub(super) fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

pub(super) fn link(src: &Path, dst: &Path) -> Result<(), String> {
    std::os::unix::fs::symlink(src, dst).map_err(|e| format!("{}: {e}", dst.display()))
}

/// Prepares `run` for one run; returns the arguments and the stdin file.
pub(super) fn setup_run(
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
