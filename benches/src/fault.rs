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

use std::path::Path;
use std::time::{Duration, Instant};

use crate::deck::Level;
use crate::report::num;
use crate::util;

mod detect;
mod fft;
mod plot;
mod report;
#[cfg(test)]
mod tests;

use detect::*;
use fft::*;
use plot::*;
use report::*;

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
