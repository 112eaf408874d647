//! svm-bench: the benchmarks of svm. Every number is measured against a baseline run in the same
//! invocation (memcpy for DECK, the sequential program for the applications), and every timed
//! result is checked. Reports: Markdown tables and SVG plots in `target/svm-bench/` (or `--out`).
//! See `docs/benchmarks.md`.

mod apps;
mod deck;
mod fault;
mod memory;
mod report;
mod scale;
mod splash;
mod sync;
mod util;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use deck::Level;

#[derive(Parser)]
#[command(
    name = "svm-bench",
    version,
    about = "svm benchmarks: DECK-SCI latency/bandwidth (vs memcpy), application speedups (vs sequential) and \
             page-fault times (vs the SVMlib paper), locks and barriers (vs pthread, futex and TCP floors)",
    long_about = "svm benchmarks. Every subcommand measures against a baseline in the same run, checks every \
                  result it times, prints one progress line per configuration on stderr and writes Markdown \
                  tables + SVG plots into --out (default target/svm-bench).\n\n\
                  `apps` needs svmrun and the svm examples next to this binary: \
                  cargo build --release --workspace --lib --bins --examples\n\n\
                  `fault` also needs svm-config, libsvm_cvm.so and a C compiler (cc): \
                  cargo build --release -p svm-run -p svm -p svm-api-cvm --bins --examples --lib"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args, Clone)]
struct Common {
    /// Fewer sizes and repetitions: each subcommand in under 2 minutes.
    #[arg(long)]
    quick: bool,
    /// Smallest configuration, for tests (seconds; the numbers mean nothing).
    #[arg(long, hide = true)]
    tiny: bool,
    /// Output directory of the reports (default: target/svm-bench).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

impl Common {
    fn level(&self) -> Level {
        if self.tiny {
            Level::Tiny
        } else if self.quick {
            Level::Quick
        } else {
            Level::Full
        }
    }
    fn out(&self) -> PathBuf {
        self.out.clone().unwrap_or_else(util::default_out)
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// DECK-SCI protocols 1/2/3 forced and auto, µDECK over DECK-SCI and TCP, memcpy: latency
    /// 0–62 B and 64 B–8 KiB, bandwidth 1 KiB–16 MiB → deck.md + deck_*.svg.
    Deck(Common),
    /// Mandelbrot (DSM and DECK master/slave), Laplace red-black, Jacobi, sparse mat-vec at 1, 2, 4
    /// nodes for every DSM protocol, against the sequential baseline; Laplace at 2 nodes against 2
    /// threads, Jacobi at 2 and 4 nodes over TCP and DECK against 2 and 4 pthreads, in private
    /// memory → apps.md + apps_*.svg.
    Apps {
        #[command(flatten)]
        common: Common,
        /// Protocols to run (comma-separated).
        #[arg(long, value_delimiter = ',', default_value = "sc-sw,sc-mw,scope")]
        protocols: Vec<String>,
    },
    /// The page-fault table of the SVMlib paper: the CVM FFT (64×64×16, `tests/cvm/fft3d.c`) at
    /// 2, 3, 4 nodes per protocol, fault backend and transport, read/write/average fault time
    /// beside the published rows, fault detection time per backend, first touch per page
    /// against calloc's per backend, with and without fault-around, and remote faults made by
    /// 1, 2 and 4 threads of one node → fault.md + fault_time.svg.
    Fault(Common),
    /// The real SPLASH-2 suite (a Splash-3 checkout, tag v2.0M): the 14 programs built with the
    /// suite's pthread macros and with c.m4.svm, run at p = 1, 2, 4, verified, svm/pthread time
    /// ratio, faults, pages, locks, barriers → splash.md + splash_ratio.svg. Not part of `all`.
    Splash(SplashArgs),
    /// Locks and barriers: lock re-acquire (manager here / elsewhere), contended lock + counter
    /// at 2 and 4 nodes, barrier at 2/4/8 nodes, over TCP and DECK-SCI, beside the floors
    /// (pthread mutex and barrier, futex ping-pong, TCP round trip) → sync.md + sync_barrier.svg.
    Sync(Common),
    /// How cost grows with N: messages and wire bytes per lock, barrier and read fault for every
    /// protocol at N = 2 … 256 nodes, in the deterministic simulator → scale.md +
    /// scale_msgs.svg + scale_bytes.svg.
    Scale(Common),
    /// `deck`, `apps`, `fault` and `sync` (not `splash`: it needs the suite).
    All(Common),
    /// The peer process of `deck` (started by svm-bench itself).
    #[command(hide = true, name = "deck-peer")]
    DeckPeer,
}

#[derive(Args)]
struct SplashArgs {
    /// The Splash-3 checkout (tag v2.0M; the directory holding `codes/`).
    #[arg(long, value_name = "DIR")]
    suite: PathBuf,
    /// p = 2 only.
    #[arg(long)]
    quick: bool,
    /// Node (= thread) counts, comma-separated (default 1,2,4; --quick: 2).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    nodes: Option<Vec<usize>>,
    /// svmrun --fault (uffd or segv; default: svmrun's).
    #[arg(long, value_name = "BACKEND", value_parser = ["uffd", "segv"])]
    fault: Option<String>,
    /// svmrun --protocol (default: the SPLASH personality's, sc-sw).
    #[arg(long, value_name = "P")]
    protocol: Option<String>,
    /// One profile per svm run: SVM_PROFILE=<out>/profiles/<program>-p<N>.md.
    #[arg(long)]
    profile: bool,
    /// One Chrome trace per svm run (SVM_TRACE=<out>/traces/<program>-p<N>.json, tens of MB for
    /// the fault-heavy programs); the report splits each run's remote faults into the steps
    /// of their round trips.
    #[arg(long)]
    trace: bool,
    /// Deadline of every run in seconds (the run's process group is killed on expiry).
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    timeout: u64,
    /// Runs of each program at each p, the pthread and the svm build taking turns; times,
    /// ratios and counts are those of each build's median run (1 to 99). The pthread times
    /// of one program vary by up to 3× between runs on a shared host (2–9 ms for fft and
    /// radix), and a single ratio with them.
    #[arg(long, value_name = "N", default_value_t = 1)]
    repeat: usize,
    /// Only these programs (comma-separated names as in the report).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    only: Vec<String>,
    /// Output directory of the reports (default: target/svm-bench).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Both builds get `-falign-loops=BYTES` (a power of two up to 4096; 0 = the suite's
    /// flags only): where the linker puts a hot inner loop changes its speed by up to 1.8×
    /// on this host, in either build, and the ratio is meant to measure the runtime.
    #[arg(long, value_name = "BYTES", default_value_t = splash::DEFAULT_ALIGN_LOOPS)]
    align_loops: u32,
}

fn finish(name: &str, r: Result<bool, String>) -> bool {
    match r {
        Ok(true) => true,
        Ok(false) => {
            eprintln!("svm-bench {name}: some results failed verification (see the report)");
            false
        }
        Err(e) => {
            eprintln!("svm-bench {name}: error: {e}");
            false
        }
    }
}

fn check_protocols(p: &[String]) -> Result<(), String> {
    for x in p {
        if !apps::PROTOCOLS.contains(&x.as_str()) {
            return Err(format!(
                "unknown protocol {x:?} (expected some of {})",
                apps::PROTOCOLS.join(", ")
            ));
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ok = match cli.cmd {
        Cmd::DeckPeer => match deck::peer_main() {
            Ok(()) => true,
            Err(e) => {
                eprintln!("svm-bench deck-peer: {e}");
                false
            }
        },
        Cmd::Deck(c) => finish("deck", deck::run(c.level(), &c.out())),
        Cmd::Apps { common, protocols } => {
            if let Err(e) = check_protocols(&protocols) {
                eprintln!("svm-bench apps: {e}");
                return ExitCode::from(2);
            }
            finish("apps", apps::run(common.level(), &common.out(), &protocols))
        }
        Cmd::Fault(c) => finish("fault", fault::run(c.level(), &c.out())),
        Cmd::Scale(c) => finish("scale", scale::run(c.level(), &c.out())),
        Cmd::Splash(a) => {
            if let Some(p) = &a.protocol {
                if let Err(e) = check_protocols(std::slice::from_ref(p)) {
                    eprintln!("svm-bench splash: {e}");
                    return ExitCode::from(2);
                }
            }
            let nodes =
                a.nodes
                    .clone()
                    .unwrap_or_else(|| if a.quick { vec![2] } else { vec![1, 2, 4] });
            if nodes.is_empty() || nodes.iter().any(|&n| n == 0 || n > 64) {
                eprintln!("svm-bench splash: --nodes must list counts in 1..=64");
                return ExitCode::from(2);
            }
            if !(1..=99).contains(&a.repeat) {
                eprintln!("svm-bench splash: --repeat must be in 1..=99");
                return ExitCode::from(2);
            }
            if let Err(e) = splash::check_align_loops(a.align_loops) {
                eprintln!("svm-bench splash: {e}");
                return ExitCode::from(2);
            }
            let o = splash::Opts {
                suite: a.suite,
                nodes,
                fault: a.fault,
                protocol: a.protocol,
                profile: a.profile,
                trace: a.trace,
                timeout: std::time::Duration::from_secs(a.timeout.max(1)),
                repeat: a.repeat,
                only: a.only,
                out: a.out.unwrap_or_else(util::default_out),
                align_loops: a.align_loops,
            };
            finish("splash", splash::run(&o))
        }
        Cmd::Sync(c) => finish("sync", sync::run(c.level(), &c.out())),
        Cmd::All(c) => {
            let d = finish("deck", deck::run(c.level(), &c.out()));
            let protocols: Vec<String> = apps::PROTOCOLS.iter().map(|s| s.to_string()).collect();
            let a = finish("apps", apps::run(c.level(), &c.out(), &protocols));
            let f = finish("fault", fault::run(c.level(), &c.out()));
            let y = finish("sync", sync::run(c.level(), &c.out()));
            d && a && f && y
        }
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
