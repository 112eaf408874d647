//! `svm-bench deck`'s report: the headline numbers, `deck.md` with its tables and the plots.

use super::*;

/// Headline numbers: protocol-1 latency max/min over 0–62 B, protocol-3 bandwidth at 4 MiB (or
/// the largest size measured) as % of memcpy.
pub(super) struct Headline {
    pub(super) p1_ratio: Option<f64>,
    pub(super) p3_pct: Option<(usize, f64, f64, f64)>,
}

fn headline(res: &Results, sz: &Sizes) -> Headline {
    let p1: Vec<f64> = res
        .small
        .iter()
        .find(|c| c.name == P1)
        .map(|c| c.pts.iter().filter_map(|p| p.1).collect())
        .unwrap_or_default();
    let p1_ratio = (!p1.is_empty()).then(|| {
        p1.iter().copied().fold(0.0, f64::max) / p1.iter().copied().fold(f64::MAX, f64::min)
    });
    let at = if sz.bw.contains(&(4 << 20)) {
        4 << 20
    } else {
        sz.max_bw()
    };
    let get = |name| {
        res.bw
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.at(at))
    };
    let p3_pct = match (get(P3), get(MEMCPY)) {
        (Some(p), Some(m)) => Some((at, p, m, 100.0 * p / m)),
        _ => None,
    };
    Headline { p1_ratio, p3_pct }
}

pub(super) fn write_report(
    out: &Path,
    res: &Results,
    sz: &Sizes,
    level: Level,
    elapsed: f64,
) -> Result<Headline, String> {
    let h = headline(res, sz);
    let mut md = String::new();
    md.push_str("# svm-bench deck\n\n");
    md.push_str(&format!(
        "Run: {} mode, {}, {} CPU(s), {:.0} s. Two processes on this host (svm-bench and a re-executed copy as the peer). \
         Latency = median of the one-way time (round trip / 2) over {} round trips per size ({} for µDECK), taken in interleaved passes over all sizes; \
         bandwidth = bytes streamed one way / time until the receiver's acknowledgement, median of {} timed runs per size, MB = 10^6 bytes. \
         memcpy = one `copy_from_slice` of the same size in this process, same run.\n\n",
        level_name(level),
        uname(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        elapsed,
        sz.lat_iters,
        sz.lat_iters_slow,
        RUNS
    ));
    md.push_str("## Headline\n\n");
    md.push_str(&format!(
        "- protocol 1 latency flatness over 0–62 B: max/min = **{}**\n",
        num(h.p1_ratio)
    ));
    if let Some((at, p, m, pct)) = h.p3_pct {
        md.push_str(&format!(
            "- protocol 3 bandwidth at {}: **{} MB/s = {}% of memcpy** ({} MB/s)\n",
            size_label(at),
            num(Some(p)),
            num(Some(pct)),
            num(Some(m))
        ));
    }
    md.push_str(&format!(
        "- verification: {} messages checked, {} failures\n\n",
        res.verified,
        res.failures.len()
    ));
    for f in &res.failures {
        md.push_str(&format!("  - FAILED: {f}\n"));
    }
    md.push_str(&format!(
        "Open MPI comparison: {}\n\n",
        if which("mpirun") {
            "`mpirun` is on PATH, but no MPI benchmark program ships with svm-bench; not measured."
        } else {
            "not measured (`mpirun` / openmpi-bin is not installed on this machine)."
        }
    ));
    let lat_table = |title: &str, cs: &[Curve], sizes: &[usize]| {
        let mut t = Table::new(
            std::iter::once("size".to_string()).chain(cs.iter().map(|c| format!("{} µs", c.name))),
        );
        for &n in sizes {
            t.row(std::iter::once(size_label(n)).chain(cs.iter().map(|c| num(c.at(n)))));
        }
        format!("## {title}\n\n{}\n", t.render())
    };
    md.push_str(&lat_table(
        "Latency 0–62 B (one-way, µs, median)",
        &res.small,
        &sz.small,
    ));
    md.push_str(&lat_table(
        "Latency 64 B–8 KiB (one-way, µs, median)",
        &res.medium,
        &sz.medium,
    ));
    let mut t = Table::new(
        std::iter::once("size".to_string())
            .chain(res.bw.iter().map(|c| format!("{} MB/s", c.name))),
    );
    for &n in &sz.bw {
        t.row(std::iter::once(size_label(n)).chain(res.bw.iter().map(|c| num(c.at(n)))));
    }
    md.push_str(&format!("## Bandwidth (MB/s)\n\n{}\n", t.render()));
    let memcpy = res.bw.iter().find(|c| c.name == MEMCPY);
    let others: Vec<&Curve> = res.bw.iter().filter(|c| c.name != MEMCPY).collect();
    let mut t = Table::new(
        std::iter::once("size".to_string())
            .chain(others.iter().map(|c| format!("{} % of memcpy", c.name))),
    );
    for &n in &sz.bw {
        let m = memcpy.and_then(|c| c.at(n));
        t.row(
            std::iter::once(size_label(n)).chain(others.iter().map(|c| match (c.at(n), m) {
                (Some(v), Some(m)) => num(Some(100.0 * v / m)),
                _ => "–".into(),
            })),
        );
    }
    md.push_str(&format!(
        "## Bandwidth as % of memcpy (same size, same run)\n\n{}\n",
        t.render()
    ));
    md.push_str(
        "Notes: p1/p2/p3 are forced with `DeckLink::set_protocol` (p1 only up to 62 B); \"auto\" chooses by size \
         (p1 ≤ 62 B, p2 ≤ DECK_MSG_BUF_LIMIT = 8 KiB, p3 above). p2 bandwidth is measured on a second mesh whose \
         eager buffer holds two messages of the largest size (the default 256 KiB buffer refuses larger forced \
         p2 messages). µDECK = mailbox post/retrieve through the receive thread, over DECK-SCI (auto) or TCP loopback. \
         \"p3\" and \"auto\" receive with `DeckLink::recv_view`: a protocol-3 message that fits in the \
         rendezvous area (8 MiB) is handed to the receiver in place in the shared segment (zero copy; the receiver \
         checks its stamps there), larger ones are copied out; \"p3 copy\" forces protocol 3 and receives with \
         `recv_msg` (one copy out of the segment); p1/p2 use `recv_msg`.\n\n\
         Seeds (2001, SCI hardware): protocol 1 4.66 µs flat over 0–62 B; protocol 3 84.12 MB/s = 95.9% of the \
         87.72 MB/s remote-write limit; protocol 2 capped at 62.81 MB/s.\n\n\
         Plots: `deck_latency_small.svg`, `deck_latency_medium.svg`, `deck_bandwidth.svg`, `deck_bandwidth_pct.svg`.\n",
    );
    std::fs::write(out.join("deck.md"), md).map_err(|e| format!("writing deck.md: {e}"))?;

    let plots = [
        (
            "deck_latency_small.svg",
            Plot {
                title: "Latency, 0–62 B (one-way, median)".into(),
                x_label: "message size (bytes)".into(),
                y_label: "µs".into(),
                x_scale: Scale::Linear,
                y_scale: Scale::Log10,
                y_from_zero: false,
                series: res
                    .small
                    .iter()
                    .map(|c| c.series(c.name == MEMCPY))
                    .collect(),
            },
        ),
        (
            "deck_latency_medium.svg",
            Plot {
                title: "Latency, 64 B–8 KiB (one-way, median)".into(),
                x_label: "message size (bytes)".into(),
                y_label: "µs".into(),
                x_scale: Scale::Log2Size,
                y_scale: Scale::Log10,
                y_from_zero: false,
                series: res
                    .medium
                    .iter()
                    .map(|c| c.series(c.name == MEMCPY))
                    .collect(),
            },
        ),
        (
            "deck_bandwidth.svg",
            Plot {
                title: "Bandwidth vs memcpy".into(),
                x_label: "message size (bytes)".into(),
                y_label: "MB/s".into(),
                x_scale: Scale::Log2Size,
                y_scale: Scale::Log10,
                y_from_zero: false,
                series: res.bw.iter().map(|c| c.series(c.name == MEMCPY)).collect(),
            },
        ),
        (
            "deck_bandwidth_pct.svg",
            Plot {
                title: "Bandwidth as % of memcpy of the same size".into(),
                x_label: "message size (bytes)".into(),
                y_label: "% of memcpy".into(),
                x_scale: Scale::Log2Size,
                y_scale: Scale::Linear,
                y_from_zero: true,
                series: others
                    .iter()
                    .map(|c| Series {
                        name: c.name.to_string(),
                        points: sz
                            .bw
                            .iter()
                            .filter_map(|&n| match (c.at(n), memcpy.and_then(|m| m.at(n))) {
                                (Some(v), Some(m)) => Some((n as f64, 100.0 * v / m)),
                                _ => None,
                            })
                            .collect(),
                        dashed: false,
                    })
                    .collect(),
            },
        ),
    ];
    for (file, p) in plots {
        std::fs::write(out.join(file), p.svg()).map_err(|e| format!("writing {file}: {e}"))?;
    }
    Ok(h)
}

pub(super) fn uname() -> String {
    let u = nix::sys::utsname::uname();
    match u {
        Ok(u) => format!(
            "{} {} {}",
            u.sysname().to_string_lossy(),
            u.release().to_string_lossy(),
            u.machine().to_string_lossy()
        ),
        Err(_) => "unknown system".into(),
    }
}
