//! `svm-bench apps`: application speedups against a sequential baseline run in the same
//! invocation. The applications are examples of the `svm` crate (`svm/examples/mandelbrot.rs`,
//! `laplace.rs`, `jacobi.rs`, `matvec.rs`); each has a sequential mode (`--seq` / `--mode seq`)
//! that runs in private memory without a job, and prints `checksum=… time_s=…`. svm-bench runs
//! each application's sequential baseline directly, right before and right after its
//! distributed configurations (the two rounds show the run-to-run noise), and those through
//! `svmrun -n N --protocol P`; it compares the checksum with the baseline (bit-identical by
//! construction) and reports time and speedup.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::deck::Level;
use crate::report::{num, Plot, Scale, Series, Table};
use crate::util;

pub const PROTOCOLS: &[&str] = &["sc-sw", "sc-mw", "scope"];

struct AppSpec {
    name: &'static str,
    prog: &'static str,
    /// Arguments of every run (size parameters).
    args: Vec<String>,
    /// Extra arguments of the sequential run.
    seq_args: Vec<&'static str>,
    /// Keys that must be equal to the baseline's.
    check: &'static [&'static str],
    what: String,
}

struct Cfg {
    nodes: Vec<usize>,
    slices: Vec<usize>,
    apps: Vec<AppSpec>,
    deadline: Duration,
    /// Runs of every configuration, and of the sequential baseline in each of its two rounds;
    /// the best (smallest) time counts: the machines are shared and noisy, and a run a
    /// neighbour disturbed says nothing about the program.
    runs: usize,
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn config(level: Level) -> Cfg {
    let (mandel, laplace, jacobi, matvec, slices, nodes, deadline, runs) = match level {
        Level::Full => (
            ["600", "1000"],
            ["600", "1e-3"],
            ["1024", "100"],
            ["40000", "64", "50"],
            vec![16, 32, 64, 128, 256, 512],
            vec![1, 2, 4],
            300,
            3,
        ),
        Level::Quick => (
            ["300", "500"],
            ["300", "1e-3"],
            ["512", "50"],
            ["20000", "64", "20"],
            vec![16, 128],
            vec![1, 2, 4],
            120,
            2,
        ),
        Level::Tiny => (
            ["64", "100"],
            ["40", "1e-2"],
            ["64", "5"],
            ["2000", "8", "3"],
            vec![16],
            vec![1, 2],
            60,
            1,
        ),
    };
    let apps = vec![
        AppSpec {
            name: "mandelbrot",
            prog: "mandelbrot",
            args: s(&["--size", mandel[0], "--max-iter", mandel[1]]),
            seq_args: vec!["--mode", "seq"],
            check: &["checksum", "sum"],
            what: format!(
                "{0}×{0} pixels, at most {1} iterations per pixel, master/slave slices",
                mandel[0], mandel[1]
            ),
        },
        AppSpec {
            name: "laplace",
            prog: "laplace",
            args: s(&laplace),
            seq_args: vec!["--seq"],
            check: &["checksum", "iters"],
            what: format!(
                "{0}×{0} red-black Gauss-Seidel until the largest change < {1}",
                laplace[0], laplace[1]
            ),
        },
        AppSpec {
            name: "jacobi",
            prog: "jacobi",
            args: s(&jacobi),
            seq_args: vec!["--seq"],
            check: &["checksum"],
            what: format!("{0}×{0} Jacobi, {1} iterations", jacobi[0], jacobi[1]),
        },
        AppSpec {
            name: "matvec",
            prog: "matvec",
            args: s(&matvec),
            seq_args: vec!["--seq"],
            check: &["checksum"],
            what: format!(
                "CSR N={}, {} non-zeros per row (seeded), {} products x ← A·x",
                matvec[0], matvec[1], matvec[2]
            ),
        },
    ];
    Cfg {
        nodes,
        slices,
        apps,
        deadline: Duration::from_secs(deadline),
        runs,
    }
}

/// (variant name, protocol for svmrun, extra arguments, slices).
type Variant<'a> = (String, Option<&'a str>, Vec<String>, Option<usize>);

/// One distributed run.
struct Point {
    app: &'static str,
    /// "dsm sc-sw", …, "deck".
    variant: String,
    slices: Option<usize>,
    nodes: usize,
    time_s: Option<f64>,
    speedup: Option<f64>,
    verified: bool,
}

struct Baseline {
    app: &'static str,
    values: Vec<(String, String)>,
    times: Vec<f64>,
}

impl Baseline {
    /// The best time of both rounds.
    fn time(&self) -> Option<f64> {
        self.times.iter().copied().reduce(f64::min)
    }
}

/// `runs` runs of `app` in private memory, with `extra` arguments (`--seq`, `--threads 2`):
/// the values (all equal, or an error) and the best time.
fn private_runs(
    prog: &Path,
    app: &AppSpec,
    extra: &[&str],
    deadline: Duration,
    runs: usize,
) -> Result<(Vec<(String, String)>, f64), String> {
    let (values, mut best) = private_run(prog, app, extra, deadline)?;
    for _ in 1..runs {
        let (v, t) = private_run(prog, app, extra, deadline)?;
        if v != values {
            return Err(format!(
                "{} {}: runs disagree: {} and {}",
                app.name,
                extra.join(" "),
                fmt_vals(&values),
                fmt_vals(&v)
            ));
        }
        best = best.min(t);
    }
    Ok((values, best))
}

fn private_run(
    prog: &Path,
    app: &AppSpec,
    extra: &[&str],
    deadline: Duration,
) -> Result<(Vec<(String, String)>, f64), String> {
    let mut c = Command::new(prog);
    c.args(&app.args).args(extra);
    let r = util::run_with_deadline(c, deadline);
    if !r.ok {
        return Err(format!(
            "{} {} failed ({}): {}",
            app.name,
            extra.join(" "),
            r.status,
            util::tail(&r.stderr, 5)
        ));
    }
    parse_result(app, &r.stdout)
}

/// Laplace at 2 nodes against two threads of one process in private memory
/// (`laplace … --threads 2`, best of `cfg.runs`), which meet at the same two barriers per
/// iteration: section text and headline.
fn laplace_threads(
    cfg: &Cfg,
    progs: &[PathBuf],
    baselines: &[Baseline],
    points: &[Point],
    failures: &mut Vec<String>,
) -> (String, Vec<String>) {
    let Some((i, app)) = cfg
        .apps
        .iter()
        .enumerate()
        .find(|(_, a)| a.name == "laplace")
    else {
        return (String::new(), Vec::new());
    };
    let two = match private_runs(&progs[i], app, &["--threads", "2"], cfg.deadline, cfg.runs) {
        Ok((v, t)) if baselines.get(i).is_some_and(|b| b.values == v) => t,
        Ok((v, _)) => {
            failures.push(format!("laplace --threads 2 gave {}", fmt_vals(&v)));
            return (String::new(), Vec::new());
        }
        Err(e) => {
            failures.push(e);
            return (String::new(), Vec::new());
        }
    };
    eprintln!(
        "apps: laplace 2 threads (private memory): {} s",
        num(Some(two))
    );
    let seq = baselines.get(i).and_then(Baseline::time);
    let best = points
        .iter()
        .filter(|p| p.app == "laplace" && p.nodes == 2 && p.verified)
        .filter_map(|p| p.time_s.map(|t| (t, p.variant.clone())))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let mut tab = Table::new([
        "two threads s (best)",
        "speedup of two threads",
        "best at 2 nodes",
        "2 nodes s",
        "× two threads",
    ]);
    let ratio = best.as_ref().map(|b| b.0 / two);
    tab.row([
        num(Some(two)),
        num(seq.map(|s| s / two)),
        best.as_ref().map_or("-".into(), |b| b.1.clone()),
        num(best.as_ref().map(|b| b.0)),
        num(ratio),
    ]);
    let md = format!(
        "## Laplace against pthreads\n\n`examples/laplace {} --threads 2`: two threads of one process in private \
         memory, each with the row block of a node and its halo rows, meeting at a `std::sync::Barrier` twice per \
         iteration like the nodes (best of {}; its checksum and iteration count equal the sequential run's). They \
         meet the same barriers as two nodes, without messages or page faults: what they gain over the sequential \
         run bounds what two nodes can reach on this host.\n\n{}\n",
        app.args.join(" "),
        cfg.runs,
        tab.render()
    );
    let headline = vec![format!(
        "laplace at 2 nodes ({}): {} × two pthreads (whose speedup over sequential is {})",
        best.as_ref().map_or("-", |b| b.1.as_str()),
        num(ratio),
        num(seq.map(|s| s / two))
    )];
    (md, headline)
}

fn parse_result(app: &AppSpec, out: &str) -> Result<(Vec<(String, String)>, f64), String> {
    let mut vals = Vec::new();
    for k in app.check {
        let v = util::kv(out, k)
            .ok_or_else(|| format!("{}: no `{k}=` in the output {out:?}", app.name))?;
        vals.push((k.to_string(), v.to_string()));
    }
    let t = util::kv(out, "time_s")
        .and_then(|v| v.parse::<f64>().ok())
        .ok_or_else(|| format!("{}: no `time_s=` in the output {out:?}", app.name))?;
    Ok((vals, t))
}

/// `svm-bench apps`. Returns Ok(true) when every run finished and matched its baseline.
pub fn run(level: Level, out: &Path, protocols: &[String]) -> Result<bool, String> {
    let t_start = Instant::now();
    let cfg = config(level);
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let svmrun = util::program("svmrun")?;
    let mut progs: Vec<PathBuf> = Vec::new();
    for a in &cfg.apps {
        progs.push(util::program(&format!("examples/{}", a.prog))?);
    }
    let mut failures: Vec<String> = Vec::new();
    let mut baselines: Vec<Baseline> = Vec::new();
    // Per application: its sequential baseline (best of `cfg.runs`), its DSM runs, then the
    // baseline again; speedups use the best of both rounds. Taking an application's
    // baseline right around its own runs keeps both sides in the same stretch of a shared
    // host, whose speed changes within minutes (laplace's 2-node speedup read 0.88 with
    // every baseline taken before all the DSM runs, ~1.2 alternated run by run).
    let mut points: Vec<Point> = Vec::new();
    for (a, p) in cfg.apps.iter().zip(&progs) {
        let mut b = Baseline {
            app: a.name,
            values: Vec::new(),
            times: Vec::new(),
        };
        match private_runs(p, a, &a.seq_args, cfg.deadline, cfg.runs) {
            Ok((v, t)) => {
                eprintln!(
                    "apps: {:<10} sequential baseline: {} s ({})",
                    a.name,
                    num(Some(t)),
                    fmt_vals(&v)
                );
                b.values = v;
                b.times.push(t);
            }
            Err(e) => {
                eprintln!("apps: FAILED: {e}");
                failures.push(e);
            }
        }
        if !b.values.is_empty() {
            let first = points.len();
            for (variant, proto, extra, sl) in variants(a, &cfg, protocols) {
                for &n in &cfg.nodes {
                    let run = Configuration {
                        app: a,
                        prog: p,
                        variant: &variant,
                        proto,
                        extra: &extra,
                        slices: sl,
                        nodes: n,
                    };
                    points.push(run.measure(&cfg, &svmrun, &b, &mut failures));
                }
            }
            // The baseline again (noise estimate).
            match private_runs(p, a, &a.seq_args, cfg.deadline, cfg.runs) {
                Ok((v, t)) if v == b.values => {
                    eprintln!(
                        "apps: {:<10} sequential baseline again: {} s",
                        a.name,
                        num(Some(t))
                    );
                    b.times.push(t);
                }
                Ok((v, _)) => failures.push(format!(
                    "{}: the second sequential run gave {} instead of {}",
                    a.name,
                    fmt_vals(&v),
                    fmt_vals(&b.values)
                )),
                Err(e) => failures.push(e),
            }
            // Speedups against the best of both rounds.
            for pt in points[first..].iter_mut().filter(|pt| pt.verified) {
                pt.speedup = pt.time_s.zip(b.time()).map(|(t, bt)| bt / t);
            }
        }
        baselines.push(b);
    }
    let (lap_md, lap_headline) = laplace_threads(&cfg, &progs, &baselines, &points, &mut failures);
    let jac = crate::memory::jacobi_threads(level, &svmrun);
    failures.extend(jac.failures.iter().cloned());
    let headline = write_report(
        out,
        level,
        &cfg,
        &baselines,
        &points,
        &failures,
        t_start.elapsed().as_secs_f64(),
    )?;
    append(&out.join("apps.md"), &lap_md)?;
    append(&out.join("apps.md"), &jac.md)?;
    for l in headline.iter().chain(&lap_headline).chain(&jac.headline) {
        println!("apps: {l}");
    }
    let verified = points.iter().filter(|p| p.verified).count();
    println!(
        "apps: {verified} of {} runs verified against the sequential baseline, {} failures; report {}",
        points.len(),
        failures.len(),
        out.join("apps.md").display()
    );
    Ok(failures.is_empty())
}

/// The distributed variants of `app`: every protocol over DSM memory (and, for Mandelbrot,
/// its DECK message variant), at every slice count for Mandelbrot.
fn variants<'a>(app: &AppSpec, cfg: &Cfg, protocols: &'a [String]) -> Vec<Variant<'a>> {
    let mandelbrot = app.name == "mandelbrot";
    let slices: Vec<Option<usize>> = if mandelbrot {
        cfg.slices.iter().map(|&s| Some(s)).collect()
    } else {
        vec![None]
    };
    let mut variants: Vec<Variant> = Vec::new();
    for sl in slices {
        let sl_args: Vec<String> = sl
            .map(|s| vec!["--slices".to_string(), s.to_string()])
            .unwrap_or_default();
        for proto in protocols {
            let mut extra = sl_args.clone();
            if mandelbrot {
                extra.extend(s(&["--mode", "dsm"]));
            }
            variants.push((format!("dsm {proto}"), Some(proto.as_str()), extra, sl));
        }
        if mandelbrot {
            let mut extra = sl_args;
            extra.extend(s(&["--mode", "deck"]));
            variants.push(("deck".to_string(), None, extra, sl));
        }
    }
    variants
}

/// One distributed configuration of an application: a variant at a node count.
struct Configuration<'a> {
    app: &'a AppSpec,
    prog: &'a Path,
    variant: &'a str,
    proto: Option<&'a str>,
    extra: &'a [String],
    slices: Option<usize>,
    nodes: usize,
}

impl Configuration<'_> {
    /// `cfg.runs` runs through `svmrun`, each verified against the baseline `b`; the best time
    /// counts (its speedup here against the baseline's first round). A failed run ends the
    /// configuration, which stays unverified; what failed goes to `failures`.
    fn measure(&self, cfg: &Cfg, svmrun: &Path, b: &Baseline, failures: &mut Vec<String>) -> Point {
        let (a, n) = (self.app, self.nodes);
        let label = format!(
            "{} {}{} n={n}",
            a.name,
            self.variant,
            self.slices
                .map(|s| format!(" slices={s}"))
                .unwrap_or_default()
        );
        let mut pt = Point {
            app: a.name,
            variant: self.variant.to_string(),
            slices: self.slices,
            nodes: n,
            time_s: None,
            speedup: None,
            verified: false,
        };
        let mut best: Option<f64> = None;
        for _ in 0..cfg.runs {
            let mut c = Command::new(svmrun);
            c.arg("-n").arg(n.to_string()).arg("--no-prefix");
            c.arg("--timeout").arg(cfg.deadline.as_secs().to_string());
            if let Some(pr) = self.proto {
                c.arg("--protocol").arg(pr);
            }
            c.arg(self.prog).args(&a.args).args(self.extra);
            let r = util::run_with_deadline(c, cfg.deadline + Duration::from_secs(10));
            let failed = if !r.ok {
                format!(
                    "{label}: svmrun failed ({}): {}",
                    r.status,
                    util::tail(&r.stderr, 5)
                )
            } else {
                match parse_result(a, &r.stdout) {
                    Ok((vals, t)) if vals == b.values => {
                        best = Some(best.map_or(t, |x: f64| x.min(t)));
                        continue;
                    }
                    Ok((vals, _)) => format!(
                        "{label}: result differs from the sequential baseline: {} vs {}",
                        fmt_vals(&vals),
                        fmt_vals(&b.values)
                    ),
                    Err(e) => format!("{label}: {e}"),
                }
            };
            eprintln!("apps: FAILED: {failed}");
            failures.push(failed);
            return pt;
        }
        if let Some(t) = best {
            pt.time_s = Some(t);
            pt.verified = true;
            pt.speedup = b.time().map(|bt| bt / t);
            eprintln!(
                "apps: {label:<40} {} s  speedup {}  (best of {}, results identical to the baseline)",
                num(Some(t)),
                num(pt.speedup),
                cfg.runs
            );
        }
        pt
    }
}

/// Appends a section to a report written before.
fn append(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(format!("\n{text}").as_bytes()))
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

fn fmt_vals(v: &[(String, String)]) -> String {
    v.iter()
        .map(|(k, x)| format!("{k}={x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The slice count used for the mandelbrot speedup table: 128 (in the seed's best range) or the
/// nearest measured below it.
fn headline_slices(cfg: &Cfg) -> Option<usize> {
    cfg.slices
        .iter()
        .copied()
        .filter(|&s| s <= 128)
        .max()
        .or(cfg.slices.first().copied())
}

fn write_report(
    out: &Path,
    level: Level,
    cfg: &Cfg,
    baselines: &[Baseline],
    points: &[Point],
    failures: &[String],
    elapsed: f64,
) -> Result<Vec<String>, String> {
    let mut md = String::new();
    md.push_str("# svm-bench apps\n\n");
    md.push_str(&format!(
        "Run: {} mode, {} CPU(s), {:.0} s. Every distributed run is a job of N processes started by `svmrun -n N` \
         (TCP transport of the DSM, default fault backend); its result is compared with the sequential baseline \
         (bit-identical: same operations in the same order). time = the program's own `time_s` (its parallel \
         section, from a barrier after setup to the end of the computation), the best of {} runs of each configuration \
         (the machines are shared and noisy: a run a neighbour disturbed says nothing about the program); \
         speedup = best sequential time (of {} runs before and {} after the distributed runs) / time.\n\n",
        crate::deck::level_name(level),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        elapsed,
        cfg.runs,
        cfg.runs,
        cfg.runs
    ));
    let verified = points.iter().filter(|p| p.verified).count();
    md.push_str(&format!(
        "verification: {verified} of {} runs verified against the sequential baseline, {} failures\n\n",
        points.len(),
        failures.len()
    ));
    for f in failures {
        md.push_str(&format!("- FAILED: {f}\n"));
    }
    md.push_str("## Applications\n\n");
    let mut t = Table::new([
        "app",
        "problem",
        "sequential s (1st)",
        "sequential s (2nd)",
        "spread %",
    ]);
    for b in baselines {
        let what = cfg
            .apps
            .iter()
            .find(|a| a.name == b.app)
            .map(|a| a.what.clone())
            .unwrap_or_default();
        let spread = if b.times.len() == 2 {
            num(Some(
                100.0 * (b.times[0] - b.times[1]).abs() / b.times[0].min(b.times[1]),
            ))
        } else {
            "–".into()
        };
        t.row([
            b.app.to_string(),
            what,
            num(b.times.first().copied()),
            num(b.times.get(1).copied()),
            spread,
        ]);
    }
    md.push_str(&t.render());
    md.push('\n');

    // Speedup table.
    let hs = headline_slices(cfg);
    let mut headline = Vec::new();
    let head: Vec<String> = ["app", "variant"]
        .iter()
        .map(|s| s.to_string())
        .chain(
            cfg.nodes
                .iter()
                .map(|n| format!("{n} node{} s", if *n == 1 { "" } else { "s" })),
        )
        .chain(cfg.nodes.iter().map(|n| format!("speedup {n}")))
        .collect();
    let mut t = Table::new(head);
    let mut plots = Vec::new();
    for a in &cfg.apps {
        let mut variants: Vec<String> = Vec::new();
        for p in points.iter().filter(|p| p.app == a.name) {
            if !variants.contains(&p.variant) {
                variants.push(p.variant.clone());
            }
        }
        let mut series = Vec::new();
        for v in &variants {
            let sel = |n: usize| {
                points.iter().find(|p| {
                    p.app == a.name
                        && &p.variant == v
                        && p.nodes == n
                        && (a.name != "mandelbrot" || p.slices == hs)
                })
            };
            let name = if a.name == "mandelbrot" {
                format!("{} ({} slices)", a.name, hs.unwrap_or(0))
            } else {
                a.name.to_string()
            };
            t.row(
                [name, v.clone()]
                    .into_iter()
                    .chain(
                        cfg.nodes
                            .iter()
                            .map(|&n| num(sel(n).and_then(|p| p.time_s))),
                    )
                    .chain(
                        cfg.nodes
                            .iter()
                            .map(|&n| num(sel(n).and_then(|p| p.speedup))),
                    ),
            );
            if let Some(sp) = sel(2).and_then(|p| p.speedup) {
                headline.push(format!("{} {v}: 2-node speedup {}", a.name, num(Some(sp))));
            }
            series.push(Series {
                name: v.clone(),
                points: cfg
                    .nodes
                    .iter()
                    .filter_map(|&n| sel(n).and_then(|p| p.speedup).map(|s| (n as f64, s)))
                    .collect(),
                dashed: false,
            });
        }
        series.push(Series {
            name: "ideal".into(),
            points: cfg.nodes.iter().map(|&n| (n as f64, n as f64)).collect(),
            dashed: true,
        });
        plots.push((
            format!("apps_speedup_{}.svg", a.name),
            Plot {
                title: format!("{}: speedup vs nodes", a.name),
                x_label: "nodes (processes under svmrun)".into(),
                y_label: "speedup over the sequential run".into(),
                x_scale: Scale::Linear,
                y_scale: Scale::Linear,
                y_from_zero: true,
                series,
            },
        ));
    }
    md.push_str("## Time and speedup per node count\n\n");
    md.push_str(&t.render());
    md.push('\n');

    // Mandelbrot: time vs number of slices (seed 001, figures 4 and 5).
    if cfg.apps.iter().any(|a| a.name == "mandelbrot") {
        let mp: Vec<&Point> = points.iter().filter(|p| p.app == "mandelbrot").collect();
        let mut variants: Vec<String> = Vec::new();
        for p in &mp {
            if !variants.contains(&p.variant) {
                variants.push(p.variant.clone());
            }
        }
        let head: Vec<String> = std::iter::once("slices".to_string())
            .chain(
                cfg.nodes
                    .iter()
                    .flat_map(|n| variants.iter().map(move |v| format!("{v} n={n} s"))),
            )
            .collect();
        let mut t = Table::new(head);
        for &sl in &cfg.slices {
            t.row(
                std::iter::once(sl.to_string()).chain(cfg.nodes.iter().flat_map(|&n| {
                    let mp = &mp;
                    variants.iter().map(move |v| {
                        num(mp
                            .iter()
                            .find(|p| &p.variant == v && p.nodes == n && p.slices == Some(sl))
                            .and_then(|p| p.time_s))
                    })
                })),
            );
        }
        md.push_str("## Mandelbrot: time (s) vs number of slices\n\n");
        md.push_str(&t.render());
        md.push('\n');
        let n2 = if cfg.nodes.contains(&2) {
            2
        } else {
            cfg.nodes[0]
        };
        let mut series: Vec<Series> = variants
            .iter()
            .map(|v| Series {
                name: format!("{v}, {n2} nodes"),
                points: mp
                    .iter()
                    .filter(|p| &p.variant == v && p.nodes == n2)
                    .filter_map(|p| Some((p.slices? as f64, p.time_s?)))
                    .collect(),
                dashed: false,
            })
            .collect();
        if let Some(bt) = baselines
            .iter()
            .find(|b| b.app == "mandelbrot")
            .and_then(|b| b.time())
        {
            series.push(Series {
                name: "sequential".into(),
                points: cfg.slices.iter().map(|&s| (s as f64, bt)).collect(),
                dashed: true,
            });
        }
        plots.push((
            "apps_mandelbrot_slices.svg".to_string(),
            Plot {
                title: format!("mandelbrot: time vs number of slices ({n2} nodes)"),
                x_label: "slices".into(),
                y_label: "seconds".into(),
                x_scale: Scale::Log2Size,
                y_scale: Scale::Linear,
                y_from_zero: true,
                series,
            },
        ));
    }
    md.push_str("## All runs\n\n");
    let mut t = Table::new([
        "app", "variant", "slices", "nodes", "time s", "speedup", "verified",
    ]);
    for p in points {
        t.row([
            p.app.to_string(),
            p.variant.clone(),
            p.slices.map_or("–".into(), |s| s.to_string()),
            p.nodes.to_string(),
            num(p.time_s),
            num(p.speedup),
            if p.verified {
                "yes".into()
            } else {
                "NO".to_string()
            },
        ]);
    }
    md.push_str(&t.render());
    md.push_str(
        "\nNotes: `dsm P` = shared-memory version under `svmrun --protocol P`; `deck` = mandelbrot over µDECK \
         messages (master thread on node 0, one slave per node, DECK-SCI transport). Runs with more nodes than \
         CPUs oversubscribe the machine. Plots: `apps_speedup_<app>.svg`, `apps_mandelbrot_slices.svg`.\n",
    );
    std::fs::write(out.join("apps.md"), md).map_err(|e| format!("writing apps.md: {e}"))?;
    for (f, p) in plots {
        std::fs::write(out.join(&f), p.svg()).map_err(|e| format!("writing {f}: {e}"))?;
    }
    Ok(headline)
}
