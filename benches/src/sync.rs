//! `svm-bench sync`: lock and barrier costs beside their floors, measured in the same run.
//!
//! svm side (the example `syncbench` under `svmrun`, checked: the counter must come out exact):
//! - lock re-acquire by one node, lock managed by itself and by another node (nothing written
//!   inside): µs per lock+unlock;
//! - contended lock + shared counter at 2 and 4 nodes: µs per increment (all nodes together)
//!   and the fraction of acquires that found the lock last held by another node;
//! - barrier of all nodes at 2, 4 and 8 nodes: µs per barrier;
//!
//! each over TCP and DECK-SCI. Floors (`floors.c`, compiled at run time with `cc`): pthread
//! mutex lock+unlock, pthread barrier at 2/4/8 threads, a futex ping-pong between two processes
//! and the TCP (loopback) round trip. Every number is the median of the repetitions.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::deck::{level_name, Level};
use crate::report::{num, Plot, Scale, Series, Table};
use crate::util;

const FLOORS_SOURCE: &str = include_str!("../floors.c");

struct Cfg {
    reps: usize,
    reacquire_iters: u64,
    counter_iters: u64,
    barrier_iters: u64,
    floor_iters: u64,
    counter_nodes: Vec<usize>,
    barrier_nodes: Vec<usize>,
    transports: Vec<&'static str>,
    /// Protocols of the counter runs (the first is the headline's).
    protocols: Vec<&'static str>,
    deadline: Duration,
}

fn config(level: Level) -> Cfg {
    match level {
        Level::Full => Cfg {
            reps: 5,
            reacquire_iters: 20_000,
            counter_iters: 2_000,
            barrier_iters: 1_000,
            floor_iters: 20_000,
            counter_nodes: vec![2, 4],
            barrier_nodes: vec![2, 4, 8],
            transports: vec!["tcp", "deck"],
            protocols: vec!["sc-sw", "sc-mw", "scope"],
            deadline: Duration::from_secs(120),
        },
        Level::Quick => Cfg {
            reps: 3,
            reacquire_iters: 5_000,
            counter_iters: 500,
            barrier_iters: 300,
            floor_iters: 5_000,
            counter_nodes: vec![2, 4],
            barrier_nodes: vec![2, 4, 8],
            transports: vec!["tcp", "deck"],
            protocols: vec!["sc-sw", "scope"],
            deadline: Duration::from_secs(90),
        },
        Level::Tiny => Cfg {
            reps: 1,
            reacquire_iters: 200,
            counter_iters: 50,
            barrier_iters: 20,
            floor_iters: 200,
            counter_nodes: vec![2],
            barrier_nodes: vec![2, 4],
            transports: vec!["tcp", "deck"],
            protocols: vec!["sc-sw", "scope"],
            deadline: Duration::from_secs(60),
        },
    }
}

/// One svm measurement (medians over the repetitions).
struct Meas {
    what: &'static str,
    transport: &'static str,
    protocol: &'static str,
    nodes: usize,
    /// µs per operation.
    us: Option<f64>,
    /// Second value: remote-manager re-acquire µs, or the fraction of acquires that changed node.
    extra: Option<f64>,
}

/// Compiles `floors.c` into `dir`.
fn build_floors(dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    std::fs::write(dir.join("floors.c"), FLOORS_SOURCE)
        .map_err(|e| format!("writing floors.c: {e}"))?;
    let mut c = Command::new("cc");
    c.args(["-O2", "-pthread", "floors.c", "-o", "floors"])
        .current_dir(dir);
    let r = util::run_with_deadline(c, Duration::from_secs(120));
    if !r.ok {
        return Err(format!(
            "compiling floors.c with cc failed ({}): {}",
            r.status,
            util::tail(&r.stderr, 10)
        ));
    }
    Ok(dir.join("floors"))
}

fn floor(prog: &Path, args: &[String], reps: usize) -> Result<f64, String> {
    let mut v = Vec::new();
    for _ in 0..reps {
        let mut c = Command::new(prog);
        c.args(args);
        let r = util::run_with_deadline(c, Duration::from_secs(60));
        let us = util::kv(&r.stdout, "floor_us").and_then(|x| x.parse::<f64>().ok());
        match us {
            Some(us) if r.ok && r.stdout.contains("OK") => v.push(us),
            _ => {
                return Err(format!(
                    "floors {} failed ({}): {}",
                    args.join(" "),
                    r.status,
                    util::tail(&r.stderr, 5)
                ))
            }
        }
    }
    Ok(util::median(&v))
}

/// Runs `syncbench MODE ITERS` at `n` nodes; returns the values of `keys` (medians).
#[allow(clippy::too_many_arguments)]
fn svm_run(
    svmrun: &Path,
    prog: &Path,
    cfg: &Cfg,
    mode: &str,
    iters: u64,
    n: usize,
    transport: &str,
    protocol: &str,
    keys: &[&str],
) -> Result<Vec<f64>, String> {
    let mut vals: Vec<Vec<f64>> = vec![Vec::new(); keys.len()];
    for rep in 0..cfg.reps {
        let mut c = Command::new(svmrun);
        c.arg("-n").arg(n.to_string()).arg("--no-prefix");
        c.arg("--timeout").arg(cfg.deadline.as_secs().to_string());
        c.arg("--transport").arg(transport);
        c.arg("--protocol").arg(protocol);
        c.arg(prog).arg(mode).arg(iters.to_string());
        let r = util::run_with_deadline(c, cfg.deadline + Duration::from_secs(10));
        let label = format!("{mode} {protocol} {transport} n={n} rep {}", rep + 1);
        if !r.ok || !r.stdout.contains(" OK") {
            return Err(format!(
                "{label}: {}\n{}{}",
                r.status,
                util::tail(&r.stdout, 3),
                util::tail(&r.stderr, 8)
            ));
        }
        for (k, key) in keys.iter().enumerate() {
            let v = util::kv(&r.stdout, key)
                .and_then(|x| x.parse::<f64>().ok())
                .ok_or_else(|| format!("{label}: no {key}= in {:?}", r.stdout))?;
            vals[k].push(v);
        }
    }
    Ok(vals.iter().map(|v| util::median(v)).collect())
}

struct Floors {
    /// pthread mutex lock+unlock in a process that started a thread (what threaded programs
    /// pay: the ratios are against it).
    mutex: Option<f64>,
    /// The same in a process that never started one (glibc skips the atomic instructions).
    mutex_single: Option<f64>,
    futex: Option<f64>,
    tcp: Option<f64>,
    /// (threads, µs per barrier)
    barrier: Vec<(usize, Option<f64>)>,
}

pub fn run(level: Level, out: &Path) -> Result<bool, String> {
    let t_start = Instant::now();
    let cfg = config(level);
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let svmrun = util::program("svmrun")?;
    let prog = util::program("examples/syncbench")?;
    let build_dir = std::env::temp_dir().join(format!("svm-bench-sync-{}", std::process::id()));
    let floors_prog = build_floors(&build_dir);
    let mut failures: Vec<String> = Vec::new();
    let note = |r: Result<f64, String>, what: &str, failures: &mut Vec<String>| match r {
        Ok(v) => {
            eprintln!("sync: floor {what:<24} {} µs", num(Some(v)));
            Some(v)
        }
        Err(e) => {
            eprintln!("sync: FAILED: {e}");
            failures.push(e);
            None
        }
    };
    let it = cfg.floor_iters.to_string();
    let floors = match &floors_prog {
        Ok(fp) => {
            let mutex_iters = (cfg.floor_iters * 50).to_string();
            let [mutex, mutex_single] = [
                ("mutex", "pthread mutex"),
                ("mutex-single", "pthread mutex 1 thread"),
            ]
            .map(|(mode, what)| {
                note(
                    floor(fp, &[mode.into(), mutex_iters.clone()], cfg.reps),
                    what,
                    &mut failures,
                )
            });
            let futex = note(
                floor(fp, &["futex".into(), it.clone()], cfg.reps),
                "futex ping-pong",
                &mut failures,
            );
            let tcp = note(
                floor(fp, &["tcp".into(), it.clone()], cfg.reps),
                "TCP round trip",
                &mut failures,
            );
            let mut barrier = Vec::new();
            for &t in &cfg.barrier_nodes {
                let v = note(
                    floor(
                        fp,
                        &[
                            "barrier".into(),
                            t.to_string(),
                            (cfg.barrier_iters * 4).to_string(),
                        ],
                        cfg.reps,
                    ),
                    &format!("pthread barrier x{t}"),
                    &mut failures,
                );
                barrier.push((t, v));
            }
            Floors {
                mutex,
                mutex_single,
                futex,
                tcp,
                barrier,
            }
        }
        Err(e) => {
            eprintln!("sync: FAILED: {e}");
            failures.push(e.clone());
            Floors {
                mutex: None,
                mutex_single: None,
                futex: None,
                tcp: None,
                barrier: Vec::new(),
            }
        }
    };
    let _ = std::fs::remove_dir_all(&build_dir);

    let mut meas: Vec<Meas> = Vec::new();
    let mut record = |m: Meas, failures: &mut Vec<String>, r: Result<(), String>| {
        match r {
            Ok(()) => eprintln!(
                "sync: {:<10} {:<5} {:<5} n={} {} µs{}",
                m.what,
                m.protocol,
                m.transport,
                m.nodes,
                num(m.us),
                m.extra
                    .map(|e| format!(" ({})", num(Some(e))))
                    .unwrap_or_default()
            ),
            Err(e) => {
                eprintln!("sync: FAILED: {e}");
                failures.push(e);
            }
        }
        meas.push(m);
    };
    let p0 = cfg.protocols[0];
    for &tr in &cfg.transports {
        let r = svm_run(
            &svmrun,
            &prog,
            &cfg,
            "reacquire",
            cfg.reacquire_iters,
            2,
            tr,
            p0,
            &["local_us", "remote_us"],
        );
        let (us, extra, r) = match r {
            Ok(v) => (Some(v[0]), Some(v[1]), Ok(())),
            Err(e) => (None, None, Err(e)),
        };
        record(
            Meas {
                what: "reacquire",
                transport: tr,
                protocol: p0,
                nodes: 2,
                us,
                extra,
            },
            &mut failures,
            r,
        );
        for &proto in &cfg.protocols {
            // Every protocol over TCP; the first one over the other transports.
            if proto != p0 && tr != "tcp" {
                continue;
            }
            for &n in &cfg.counter_nodes {
                let r = svm_run(
                    &svmrun,
                    &prog,
                    &cfg,
                    "counter",
                    cfg.counter_iters,
                    n,
                    tr,
                    proto,
                    &["counter_us", "changed"],
                );
                let (us, extra, r) = match r {
                    Ok(v) => (Some(v[0]), Some(v[1]), Ok(())),
                    Err(e) => (None, None, Err(e)),
                };
                record(
                    Meas {
                        what: "counter",
                        transport: tr,
                        protocol: proto,
                        nodes: n,
                        us,
                        extra,
                    },
                    &mut failures,
                    r,
                );
            }
        }
        for &n in &cfg.barrier_nodes {
            let r = svm_run(
                &svmrun,
                &prog,
                &cfg,
                "barrier",
                cfg.barrier_iters,
                n,
                tr,
                p0,
                &["barrier_us"],
            );
            let (us, r) = match r {
                Ok(v) => (Some(v[0]), Ok(())),
                Err(e) => (None, Err(e)),
            };
            record(
                Meas {
                    what: "barrier",
                    transport: tr,
                    protocol: p0,
                    nodes: n,
                    us,
                    extra: None,
                },
                &mut failures,
                r,
            );
        }
    }

    let find = |what: &str, tr: &str, proto: &str, n: usize| {
        meas.iter()
            .find(|m| m.what == what && m.transport == tr && m.protocol == proto && m.nodes == n)
    };
    let headline = format!(
        "sync: lock_cached_us={} counter2_us={} barrier4_tcp_us={} tcp_rtt_us={}\n",
        num(find("reacquire", "tcp", p0, 2).and_then(|m| m.extra)),
        num(find("counter", "tcp", p0, 2).and_then(|m| m.us)),
        num(find("barrier", "tcp", p0, 4).and_then(|m| m.us)),
        num(floors.tcp),
    );
    let md = report(
        level,
        &cfg,
        &meas,
        &floors,
        &failures,
        &headline,
        t_start.elapsed().as_secs_f64(),
    );
    std::fs::write(out.join("sync.md"), md).map_err(|e| format!("writing sync.md: {e}"))?;
    std::fs::write(
        out.join("sync_barrier.svg"),
        barrier_plot(&cfg, &meas, &floors),
    )
    .map_err(|e| format!("writing sync_barrier.svg: {e}"))?;
    print!("{headline}");
    println!(
        "sync: {} measurements, {} failures; report {}",
        meas.len(),
        failures.len(),
        out.join("sync.md").display()
    );
    Ok(failures.is_empty())
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{}×", num(Some(a / b))),
        _ => "–".to_string(),
    }
}

fn report(
    level: Level,
    cfg: &Cfg,
    meas: &[Meas],
    floors: &Floors,
    failures: &[String],
    headline: &str,
    secs: f64,
) -> String {
    let mut s = String::new();
    s.push_str("# svm-bench sync: locks and barriers beside their floors\n\n");
    s.push_str(&format!(
        "Level: {}; medians of {} repetitions; took {:.0} s. Headline:\n\n```\n{}```\n\n",
        level_name(level),
        cfg.reps,
        secs,
        headline
    ));
    s.push_str("## Floors (this machine, this run)\n\n");
    let mut t = Table::new(["floor", "µs"]);
    t.row([
        "pthread mutex lock+unlock, one thread of a process that started another".to_string(),
        num(floors.mutex),
    ]);
    t.row([
        "the same in a process that never started a thread (glibc skips the atomics)".to_string(),
        num(floors.mutex_single),
    ]);
    t.row([
        "futex ping-pong between two processes (round trip)".to_string(),
        num(floors.futex),
    ]);
    t.row([
        "TCP loopback round trip (8 bytes, TCP_NODELAY)".to_string(),
        num(floors.tcp),
    ]);
    for (n, v) in &floors.barrier {
        t.row([format!("pthread barrier, {n} threads"), num(*v)]);
    }
    s.push_str(&t.render());
    s.push_str(&format!(
        "\n## Lock re-acquire by one node (2 nodes, {}, {} lock+unlock, nothing written inside)\n\n",
        cfg.protocols[0], cfg.reacquire_iters
    ));
    let mut t = Table::new([
        "transport",
        "manager here µs",
        "manager on the other node µs",
        "÷ pthread mutex",
        "÷ TCP round trip",
    ]);
    for m in meas.iter().filter(|m| m.what == "reacquire") {
        t.row([
            m.transport.to_string(),
            num(m.us),
            num(m.extra),
            ratio(m.extra, floors.mutex),
            ratio(m.extra, floors.tcp),
        ]);
    }
    s.push_str(&t.render());
    s.push_str(&format!(
        "\n## Contended lock + shared counter ({} increments per node)\n\nµs per increment (all \
         nodes together); *changed* is the fraction of acquires that found the lock last held by \
         another node.\n\n",
        cfg.counter_iters
    ));
    let mut t = Table::new([
        "transport",
        "protocol",
        "nodes",
        "µs per increment",
        "changed node",
        "÷ TCP round trip",
    ]);
    for m in meas.iter().filter(|m| m.what == "counter") {
        t.row([
            m.transport.to_string(),
            m.protocol.to_string(),
            m.nodes.to_string(),
            num(m.us),
            m.extra
                .map(|e| format!("{:.1} %", e * 100.0))
                .unwrap_or_else(|| "–".into()),
            ratio(m.us, floors.tcp),
        ]);
    }
    s.push_str(&t.render());
    s.push_str(&format!(
        "\n## Barrier of all nodes ({} barriers, {})\n\n",
        cfg.barrier_iters, cfg.protocols[0]
    ));
    let mut t = Table::new([
        "transport",
        "nodes",
        "µs per barrier",
        "÷ TCP round trip",
        "÷ pthread barrier (same count)",
    ]);
    for m in meas.iter().filter(|m| m.what == "barrier") {
        let pb = floors
            .barrier
            .iter()
            .find(|(n, _)| *n == m.nodes)
            .and_then(|(_, v)| *v);
        t.row([
            m.transport.to_string(),
            m.nodes.to_string(),
            num(m.us),
            ratio(m.us, floors.tcp),
            ratio(m.us, pb),
        ]);
    }
    s.push_str(&t.render());
    s.push_str("\nPlot: `sync_barrier.svg` (barrier time against nodes, with the floors).\n");
    if failures.is_empty() {
        s.push_str("\nverification: every run passed its checks, 0 failures\n");
    } else {
        s.push_str(&format!("\n## FAILED ({})\n\n", failures.len()));
        for f in failures {
            s.push_str(&format!("- {}\n", f.replace('\n', " ")));
        }
    }
    s
}

fn barrier_plot(cfg: &Cfg, meas: &[Meas], floors: &Floors) -> String {
    let mut series = Vec::new();
    for &tr in &cfg.transports {
        series.push(Series {
            name: format!("svm barrier, {tr}"),
            points: meas
                .iter()
                .filter(|m| m.what == "barrier" && m.transport == tr)
                .filter_map(|m| m.us.map(|u| (m.nodes as f64, u)))
                .collect(),
            dashed: false,
        });
    }
    series.push(Series {
        name: "pthread barrier".into(),
        points: floors
            .barrier
            .iter()
            .filter_map(|(n, v)| v.map(|v| (*n as f64, v)))
            .collect(),
        dashed: true,
    });
    if let Some(t) = floors.tcp {
        series.push(Series {
            name: "TCP round trip".into(),
            points: cfg.barrier_nodes.iter().map(|&n| (n as f64, t)).collect(),
            dashed: true,
        });
    }
    Plot {
        title: "Barrier of all nodes".into(),
        x_label: "nodes".into(),
        y_label: "µs per barrier".into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Log10,
        y_from_zero: false,
        series,
    }
    .svg()
}
