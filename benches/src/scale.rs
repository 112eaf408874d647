//! How cost grows with the number of nodes N, in the deterministic simulator
//! (`svm-protocols/src/sim.rs`, the real protocol and sync state machines): messages and wire
//! bytes (frame header + control payload + data, as TCP carries them) per lock acquisition, per
//! barrier and per read fault, for every protocol, at N = 2 … 256 → scale.md + scale_msgs.svg +
//! scale_bytes.svg.
//!
//! Each figure is a marginal cost: a scenario is run with k and with 2k operations per node and
//! the difference is divided by the extra operations, so set-up and the end of the run cancel
//! out. The lock scenario also checks the counter it increments.

use std::path::Path;
use std::time::Instant;

use svm_protocols::sim::{Cluster, Op, RunStats, SimConfig};

use crate::deck::Level;
use crate::report::{num, Plot, Scale, Series, Table};

const PROTOCOLS: &[&str] = &["sc-sw", "sc-mw", "scope"];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lock,
    /// The counting barrier at its manager.
    Barrier,
    /// The barrier of every node, one thread each, by dissemination (no manager).
    BarrierAll,
    Fault,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Barrier => "barrier",
            Kind::BarrierAll => "barrier (dissemination)",
            Kind::Fault => "read fault",
        }
    }
}

const KINDS: [Kind; 4] = [Kind::Lock, Kind::Barrier, Kind::BarrierAll, Kind::Fault];

/// One scenario run: the stats, and whether its check passed.
fn scenario(protocol: &str, kind: Kind, n: u16, k: u64) -> Result<(RunStats, bool), String> {
    let factory = |_| svm_protocols::by_name(protocol).expect("known protocol");
    let cfg = SimConfig::new(n, 7).page_size(4096).max_steps(200_000_000);
    let mut c = Cluster::new(cfg, factory);
    let nodes = n as u32;
    let counter = c.addr(0, 0);
    let mut check = None;
    match kind {
        Kind::Lock => {
            let mut prog = Vec::new();
            for _ in 0..k {
                prog.extend([
                    Op::Lock(1),
                    Op::Load {
                        addr: counter,
                        reg: 0,
                    },
                    Op::AddImm { reg: 0, imm: 1 },
                    Op::StoreReg {
                        addr: counter,
                        reg: 0,
                    },
                    Op::Unlock(1),
                ]);
            }
            let last = c.spawn(0, {
                let mut p = prog.clone();
                p.extend([
                    Op::Barrier {
                        id: 9,
                        count: nodes,
                    },
                    Op::Lock(1),
                    Op::Load {
                        addr: counter,
                        reg: 1,
                    },
                    Op::Unlock(1),
                ]);
                p
            });
            for node in 1..n {
                let mut p = prog.clone();
                p.push(Op::Barrier {
                    id: 9,
                    count: nodes,
                });
                c.spawn(node, p);
            }
            check = Some((last, n as u64 * k));
        }
        Kind::Barrier => {
            for node in 0..n {
                let prog = (0..k)
                    .map(|i| Op::Barrier {
                        id: i,
                        count: nodes,
                    })
                    .collect();
                c.spawn(node, prog);
            }
        }
        Kind::BarrierAll => {
            for node in 0..n {
                c.spawn(node, (0..k).map(Op::BarrierAll).collect());
            }
        }
        Kind::Fault => {
            // Node 0 writes k pages per node; after a barrier every node reads k of them
            // (pages homed all over the cluster, none of them its own copy).
            let pages = n as u64 * k;
            let mut writer: Vec<Op> = (0..pages)
                .map(|p| Op::Store {
                    addr: c.addr(1 + p, 0),
                    value: p + 1,
                })
                .collect();
            writer.push(Op::Barrier {
                id: 1,
                count: nodes,
            });
            c.spawn(0, writer);
            for node in 1..n {
                let mut prog = vec![Op::Barrier {
                    id: 1,
                    count: nodes,
                }];
                for i in 0..k {
                    let page = 1 + (node as u64 * k + i) % pages;
                    prog.push(Op::Load {
                        addr: c.addr(page, 0),
                        reg: 0,
                    });
                }
                c.spawn(node, prog);
            }
        }
    }
    let stats = c
        .run()
        .map_err(|e| format!("{protocol} {} N={n}: {e}", kind.name()))?;
    let ok = match check {
        Some((t, want)) => c.log(t).last() == Some(&want),
        None => true,
    };
    Ok((stats, ok))
}

struct Point {
    msgs: f64,
    bytes: f64,
}

/// Marginal cost of one operation: runs with k and 2k operations per node.
fn measure(protocol: &str, kind: Kind, n: u16, k: u64) -> Result<(Point, bool), String> {
    let (a, ok_a) = scenario(protocol, kind, n, k)?;
    let (b, ok_b) = scenario(protocol, kind, n, 2 * k)?;
    // Extra operations: locks and faults are per node (read faults on N-1 nodes), barriers are
    // per job.
    let extra = match kind {
        Kind::Lock => n as f64 * k as f64,
        Kind::Barrier | Kind::BarrierAll => k as f64,
        Kind::Fault => (n as f64 - 1.0) * k as f64,
    };
    let d = |x: u64, y: u64| (y as f64 - x as f64) / extra;
    Ok((
        Point {
            msgs: d(a.wire_messages, b.wire_messages),
            bytes: d(a.wire_bytes, b.wire_bytes),
        },
        ok_a && ok_b,
    ))
}

pub fn run(level: Level, out: &Path) -> Result<bool, String> {
    let t_start = Instant::now();
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let (nodes, k): (&[u16], u64) = match level {
        Level::Tiny => (&[2, 4, 8, 16], 2),
        Level::Quick => (&[2, 4, 8, 16, 32, 64], 2),
        Level::Full => (&[2, 4, 8, 16, 32, 64, 128, 256], 4),
    };
    let mut all_ok = true;
    // results[kind][protocol] = [(n, point)]
    let mut results: Vec<Vec<Vec<(u16, Point)>>> = KINDS
        .iter()
        .map(|_| PROTOCOLS.iter().map(|_| Vec::new()).collect())
        .collect();
    for (ki, &kind) in KINDS.iter().enumerate() {
        for (pi, &protocol) in PROTOCOLS.iter().enumerate() {
            for &n in nodes {
                let t = Instant::now();
                let (p, ok) = measure(protocol, kind, n, k)?;
                eprintln!(
                    "scale: {protocol:<5} {:<10} N={n:<3} {} msgs {} bytes per op{} ({:.1} s)",
                    kind.name(),
                    num(Some(p.msgs)),
                    num(Some(p.bytes)),
                    if ok { "" } else { " CHECK FAILED" },
                    t.elapsed().as_secs_f64()
                );
                all_ok &= ok;
                results[ki][pi].push((n, p));
            }
        }
    }
    let mut md = String::from(
        "# How cost grows with N (simulator)\n\nMessages and wire bytes (frame header + control \
         payload + data) between nodes per operation, in the deterministic simulator running \
         the real protocol and sync state machines (`svm-bench scale`). Marginal costs: each \
         scenario runs with k and 2k operations per node and the difference is divided by the \
         extra operations. Lock: every node increments one counter under one lock (checked). \
         Barrier: every node passes barriers. Read fault: node 0 writes pages, then every \
         other node reads pages it has no copy of.\n\n",
    );
    for (ki, &kind) in KINDS.iter().enumerate() {
        md.push_str(&format!("## Per {}\n\n", kind.name()));
        let mut head = vec!["N".to_string()];
        for p in PROTOCOLS {
            head.push(format!("{p} msgs"));
            head.push(format!("{p} bytes"));
        }
        let mut t = Table::new(head);
        for (i, &n) in nodes.iter().enumerate() {
            let mut row = vec![n.to_string()];
            for per_protocol in &results[ki] {
                let p = &per_protocol[i].1;
                row.push(num(Some(p.msgs)));
                row.push(num(Some(p.bytes)));
            }
            t.row(row);
        }
        md.push_str(&t.render());
        md.push('\n');
    }
    md.push_str(&format!(
        "Plots: `scale_msgs.svg`, `scale_bytes.svg`. {} in {:.0} s.\n",
        if all_ok {
            "Every check passed"
        } else {
            "SOME CHECKS FAILED"
        },
        t_start.elapsed().as_secs_f64()
    ));
    std::fs::write(out.join("scale.md"), md).map_err(|e| format!("writing scale.md: {e}"))?;
    for (file, what, get) in [
        (
            "scale_msgs.svg",
            "messages per operation",
            (|p: &Point| p.msgs) as fn(&Point) -> f64,
        ),
        (
            "scale_bytes.svg",
            "wire bytes per operation",
            |p: &Point| p.bytes,
        ),
    ] {
        let mut series = Vec::new();
        for (ki, &kind) in KINDS.iter().enumerate() {
            for (pi, &protocol) in PROTOCOLS.iter().enumerate() {
                series.push(Series {
                    name: format!("{} {protocol}", kind.name()),
                    points: results[ki][pi]
                        .iter()
                        .map(|(n, p)| (*n as f64, get(p).max(1e-3)))
                        .collect(),
                    dashed: matches!(kind, Kind::Barrier | Kind::BarrierAll),
                });
            }
        }
        let plot = Plot {
            title: format!("svm: {what} as N grows (simulator)"),
            x_label: "nodes N".into(),
            y_label: what.into(),
            x_scale: Scale::Log2Size,
            y_scale: Scale::Log10,
            y_from_zero: false,
            series,
        };
        std::fs::write(out.join(file), plot.svg()).map_err(|e| format!("writing {file}: {e}"))?;
    }
    eprintln!("scale: wrote {}", out.join("scale.md").display());
    Ok(all_ok)
}
