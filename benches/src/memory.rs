//! The memory-path comparisons (issue 13), each against its baseline in the same invocation:
//!
//! - **first touch** (part of `svm-bench fault`): `examples/touch` writes one word of every page
//!   of fresh shared memory at 1 node and, in the same process, of fresh `calloc` memory; per
//!   fault backend, with fault-around off (`SVM_FAULT_AROUND=0`) and at its default;
//! - **remote faults by several threads of one node** (part of `svm-bench fault`):
//!   `examples/pagefault` at 2 nodes, the reading node faulting with 1, 2 and 4 threads at once
//!   (read-ahead off, so every page is its own fault), per fault backend; the baseline is the
//!   single thread of the same backend in the same run, and the TCP round trip it measures;
//! - **Jacobi vs pthreads** (part of `svm-bench apps`): `examples/jacobi N I` as a DSM job of
//!   2 and 4 nodes over TCP and over DECK shared memory, against `jacobi N I --threads T`
//!   (T threads in private memory, run first and last); the checksum must match.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::deck::Level;
use crate::report::{num, Table};
use crate::util;

/// A report section: Markdown, headline lines for stdout, failures.
#[derive(Default)]
pub struct Section {
    pub md: String,
    pub headline: Vec<String>,
    pub failures: Vec<String>,
}

const BACKENDS: &[&str] = &["uffd", "segv"];

fn value(out: &str, key: &str) -> Option<f64> {
    util::kv(out, key).and_then(|v| v.parse::<f64>().ok())
}

/// Records a run of the `fault` sections that failed or printed no result.
fn run_failed(sec: &mut Section, name: &str, r: &util::Run) {
    let e = format!(
        "{name}: failed ({}): {}",
        r.status,
        util::tail(&(r.stdout.clone() + &r.stderr), 5)
    );
    eprintln!("fault: FAILED: {e}");
    sec.failures.push(e);
}

/// First touch per page, svm vs calloc, per backend and fault-around setting.
pub fn first_touch(level: Level, svmrun: &Path) -> Section {
    let mut sec = Section::default();
    let prog = match util::program("examples/touch") {
        Ok(p) => p,
        Err(e) => {
            sec.failures.push(e);
            return sec;
        }
    };
    let (mib, reps) = match level {
        Level::Full => ("64", "5"),
        Level::Quick => ("64", "3"),
        Level::Tiny => ("8", "1"),
    };
    let mut t = Table::new([
        "backend",
        "fault-around",
        "svm µs/page",
        "calloc µs/page",
        "svm / calloc",
        "RSS growth MiB",
    ]);
    for &backend in BACKENDS {
        for (label, fa) in [("off (0)", Some("0")), ("default", None)] {
            let mut c = Command::new(svmrun);
            c.args(["-n", "1", "--no-prefix", "--fault", backend]);
            c.arg(&prog).args([mib, "--reps", reps]);
            match fa {
                Some(v) => c.env("SVM_FAULT_AROUND", v),
                None => c.env_remove("SVM_FAULT_AROUND"),
            };
            let r = util::run_with_deadline(c, Duration::from_secs(120));
            let name = format!("first touch {backend} fault-around {label}");
            let parsed = value(&r.stdout, "us_per_page").zip(value(&r.stdout, "ratio"));
            match (r.ok, parsed) {
                (true, Some((us, ratio))) => {
                    let mus = value(&r.stdout, "malloc_us_per_page");
                    let rss = value(&r.stdout, "rss_growth_mib");
                    eprintln!(
                        "fault: {name:<40} {} µs/page, {} × calloc",
                        num(Some(us)),
                        num(Some(ratio))
                    );
                    t.row([
                        backend.to_string(),
                        label.to_string(),
                        num(Some(us)),
                        num(mus),
                        num(Some(ratio)),
                        num(rss),
                    ]);
                    if fa.is_none() {
                        sec.headline.push(format!(
                            "first touch ({backend}, fault-around default): {} µs per page = {} × calloc (target ≤ 1.5)",
                            num(Some(us)),
                            num(Some(ratio))
                        ));
                    }
                }
                _ => run_failed(&mut sec, &name, &r),
            }
        }
    }
    sec.md.push_str(&format!(
        "## First touch\n\n`svmrun -n 1 --fault B examples/touch {mib} --reps {reps}`: one word written per page of \
         {mib} MiB of fresh shared memory homed on the node, against the same on fresh `calloc` memory in the same \
         process (best of {reps} each, alternating). Fault-around (`SVM_FAULT_AROUND`) makes the untouched home pages \
         around a first fault writable in one call.\n\n"
    ));
    sec.md.push_str(&t.render());
    sec.md.push('\n');
    sec
}

/// Remote read faults of one node made by 1, 2 and 4 threads at once, per fault backend.
pub fn fault_threads(level: Level, svmrun: &Path) -> Section {
    let mut sec = Section::default();
    let prog = match util::program("examples/pagefault") {
        Ok(p) => p,
        Err(e) => {
            sec.failures.push(e);
            return sec;
        }
    };
    let mib = match level {
        Level::Full => "32",
        Level::Quick => "8",
        Level::Tiny => "1",
    };
    let threads = [1usize, 2, 4];
    let mut t = Table::new([
        "backend",
        "threads",
        "µs per page",
        "pages/s × 1 thread",
        "TCP round trip µs",
    ]);
    for &backend in BACKENDS {
        let mut one: Option<f64> = None;
        for &n in &threads {
            let mut c = Command::new(svmrun);
            c.args(["-n", "2", "--no-prefix", "--fault", backend]);
            c.arg(&prog).args([mib, "--threads", &n.to_string()]);
            // Every page its own fault: read-ahead would hide whether faults overlap.
            c.env("SVM_PREFETCH", "0");
            let r = util::run_with_deadline(c, Duration::from_secs(120));
            let name = format!("remote faults {backend} {n} thread(s)");
            match (r.ok, value(&r.stdout, "us_per_page")) {
                (true, Some(us)) => {
                    if n == 1 {
                        one = Some(us);
                    }
                    let speedup = one.map(|o| o / us);
                    eprintln!(
                        "fault: {name:<40} {} µs/page, {} × the pages/s of 1 thread",
                        num(Some(us)),
                        num(speedup)
                    );
                    t.row([
                        backend.to_string(),
                        n.to_string(),
                        num(Some(us)),
                        num(speedup),
                        num(value(&r.stdout, "tcp_rtt_us")),
                    ]);
                    if n == 2 {
                        sec.headline.push(format!(
                            "remote faults by 2 threads of one node ({backend}): {} µs per page = {} × the pages/s of 1 thread",
                            num(Some(us)),
                            num(speedup)
                        ));
                    }
                }
                _ => run_failed(&mut sec, &name, &r),
            }
        }
    }
    sec.md.push_str(&format!(
        "## Remote faults by several threads of one node\n\n`SVM_PREFETCH=0 svmrun -n 2 --fault B examples/pagefault {mib} \
         --threads T`: rank 0 fills {mib} MiB homed on itself, rank 1 reads one word of every page with T threads at \
         once, each its own contiguous part (read-ahead off: every page is a fault of its own). µs per page is the read \
         pass divided by its pages; \"pages/s × 1 thread\" above 1 means the node serves its threads' faults \
         concurrently. The TCP round trip is measured by the same run.\n\n"
    ));
    sec.md.push_str(&t.render());
    sec.md.push('\n');
    sec
}

/// One `checksum=… time_s=…` run: (checksum, seconds).
fn jacobi_run(c: Command, deadline: Duration, label: &str) -> Result<(String, f64), String> {
    let r = util::run_with_deadline(c, deadline);
    let sum = util::kv(&r.stdout, "checksum").map(str::to_string);
    match (r.ok, sum, value(&r.stdout, "time_s")) {
        (true, Some(s), Some(t)) => Ok((s, t)),
        _ => Err(format!(
            "{label}: failed ({}): {}",
            r.status,
            util::tail(&(r.stdout.clone() + &r.stderr), 5)
        )),
    }
}

/// Jacobi as a DSM job of 2 and 4 nodes (TCP, DECK) against T threads in private memory.
pub fn jacobi_threads(level: Level, svmrun: &Path) -> Section {
    let mut sec = Section::default();
    let prog = match util::program("examples/jacobi") {
        Ok(p) => p,
        Err(e) => {
            sec.failures.push(e);
            return sec;
        }
    };
    let (n, iters, reps) = match level {
        Level::Full => ("1024", "100", 3),
        Level::Quick => ("1024", "100", 1),
        Level::Tiny => ("64", "5", 1),
    };
    let deadline = Duration::from_secs(120);
    let threads = [2usize, 4];
    // Baselines first and last: threads → (checksum, times).
    let mut base: Vec<(usize, Option<String>, Vec<f64>)> =
        threads.iter().map(|&t| (t, None, Vec::new())).collect();
    let run_base = |sec: &mut Section, base: &mut Vec<(usize, Option<String>, Vec<f64>)>| {
        for (t, sum, times) in base.iter_mut() {
            let mut c = Command::new(&prog);
            c.args([n, iters, "--threads", &t.to_string()]);
            match jacobi_run(c, deadline, &format!("jacobi --threads {t}")) {
                Ok((s, time)) => {
                    eprintln!(
                        "apps: jacobi {t} pthreads (private memory): {} s",
                        num(Some(time))
                    );
                    if sum.as_ref().is_some_and(|x| *x != s) {
                        sec.failures.push(format!(
                            "jacobi --threads {t}: checksum {s} changed between runs"
                        ));
                    }
                    *sum = Some(s);
                    times.push(time);
                }
                Err(e) => {
                    eprintln!("apps: FAILED: {e}");
                    sec.failures.push(e);
                }
            }
        }
    };
    run_base(&mut sec, &mut base);
    let best = |v: &[f64]| {
        v.iter()
            .copied()
            .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.min(x))))
    };
    // (link kind, nodes) → best time. `tcp` is TCP proper between the nodes of this host;
    // `unix` is the tcp transport as by default, Unix-domain sockets between them
    // (`SVM_UNIX_SOCKETS=1`).
    let mut dsm: Vec<(&str, usize, Option<f64>)> = Vec::new();
    for (kind, transport, unix_sockets) in [
        ("tcp", "tcp", "0"),
        ("unix", "tcp", "1"),
        ("deck", "deck", "1"),
    ] {
        for &nodes in &threads {
            let mut times = Vec::new();
            for _ in 0..reps {
                let mut c = Command::new(svmrun);
                c.args([
                    "-n",
                    &nodes.to_string(),
                    "--no-prefix",
                    "--transport",
                    transport,
                ]);
                c.env("SVM_UNIX_SOCKETS", unix_sockets);
                c.arg(&prog).args([n, iters]);
                let label = format!("jacobi {kind} n={nodes}");
                match jacobi_run(c, deadline, &label) {
                    Ok((s, t)) => {
                        let want = base[0].1.as_deref();
                        if want.is_some_and(|w| w != s) {
                            let e =
                                format!("{label}: checksum {s} differs from the threads' {want:?}");
                            eprintln!("apps: FAILED: {e}");
                            sec.failures.push(e);
                        } else {
                            eprintln!("apps: {label:<24} {} s", num(Some(t)));
                            times.push(t);
                        }
                    }
                    Err(e) => {
                        eprintln!("apps: FAILED: {e}");
                        sec.failures.push(e);
                    }
                }
            }
            dsm.push((kind, nodes, best(&times)));
        }
    }
    run_base(&mut sec, &mut base);
    let base_time = |t: usize| base.iter().find(|b| b.0 == t).and_then(|b| best(&b.2));
    let mut tab = Table::new([
        "links",
        "nodes",
        "DSM s (best)",
        "× 2 pthreads",
        "× pthreads of as many threads",
        "× the same transport at 2 nodes",
    ]);
    for &(transport, nodes, t) in &dsm {
        let two = dsm
            .iter()
            .find(|d| d.0 == transport && d.1 == 2)
            .and_then(|d| d.2);
        let r2 = t.zip(base_time(2)).map(|(a, b)| a / b);
        tab.row([
            transport.to_string(),
            nodes.to_string(),
            num(t),
            num(r2),
            num(t.zip(base_time(nodes)).map(|(a, b)| a / b)),
            num(t.zip(two).map(|(a, b)| a / b)),
        ]);
        if nodes == 2 {
            let target = if transport == "deck" { "1.6" } else { "2.5" };
            sec.headline.push(format!(
                "jacobi {n}²×{iters} at 2 nodes over {transport}: {} × two pthreads (target ≤ {target})",
                num(r2)
            ));
        }
    }
    let mut bt = Table::new(["pthreads", "s (first)", "s (last)"]);
    for (t, _, times) in &base {
        bt.row([
            t.to_string(),
            num(times.first().copied()),
            num(times.get(1).copied()),
        ]);
    }
    sec.md.push_str(&format!(
        "## Jacobi against pthreads\n\n`svmrun -n N --transport T examples/jacobi {n} {iters}` (default protocol and \
         fault backend, best of {reps}; links `tcp`: `--transport tcp` with `SVM_UNIX_SOCKETS=0`, TCP between the nodes \
         of this host; `unix`: `--transport tcp` as by default (`SVM_UNIX_SOCKETS=1`), Unix-domain sockets between them; `deck`: `--transport \
         deck`) against `examples/jacobi {n} {iters} --threads P`: P threads of one process in \
         private memory, each with its row block and halo rows, meeting at a barrier every iteration (run first and \
         last; the ratios use the best). Every checksum equals the threads' checksum.\n\n"
    ));
    sec.md.push_str(&bt.render());
    sec.md.push('\n');
    sec.md.push_str(&tab.render());
    sec.md.push('\n');
    sec
}
