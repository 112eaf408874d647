//! `fault_time.svg`: average fault time per node count, ours beside the paper's, as grouped
//! bars on a log scale.

use crate::report::{esc, num, svg_open};

use super::*;

/// Grouped bar plot (log y): average fault time per node count, ours and the paper's.
pub(super) fn plot(cfg: &Cfg, runs: &[RunResult]) -> String {
    let mut series: Vec<(String, Vec<Option<f64>>)> = Vec::new();
    let groups: Vec<usize> = SEED_FAULT_MS.iter().map(|s| s.0).collect();
    for &p in &cfg.protocols {
        for &f in &cfg.faults {
            for &tr in &cfg.transports {
                let v = groups
                    .iter()
                    .map(|&n| times(&select(runs, p, f, tr, n))[2])
                    .collect();
                series.push((format!("svm {p}, {f}, {tr}"), v));
            }
        }
    }
    for (i, name) in SEED_SHORT.iter().enumerate() {
        series.push((
            name.to_string(),
            SEED_FAULT_MS.iter().map(|s| Some(s.1[i][2])).collect(),
        ));
    }
    bar_svg(
        "FFT 64×64×16: average page-fault time (log scale)",
        "ms per fault",
        &groups
            .iter()
            .map(|n| format!("{n} nodes"))
            .collect::<Vec<_>>(),
        &series,
    )
}

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#aec7e8", "#ff9896", "#98df8a",
];
const SEED_COLORS: &[&str] = &["#404040", "#7f7f7f", "#bfbfbf"];

/// A grouped bar chart with a log10 y axis. The last `SEED_SHORT.len()` series are the paper's
/// (grey).
pub(super) fn bar_svg(
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<Option<f64>>)],
) -> String {
    use std::fmt::Write as _;
    let vals = series
        .iter()
        .flat_map(|s| s.1.iter().flatten())
        .filter(|v| v.is_finite() && **v > 0.0);
    let (lo, hi) = vals.fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    let (lo, hi) = if lo > hi { (0.1, 10.0) } else { (lo, hi) };
    let (e0, e1) = (
        lo.log10().floor(),
        hi.log10().ceil().max(lo.log10().floor() + 1.0),
    );
    let nbars = series.len().max(1) as f64;
    let legend_h = 20.0 * series.len() as f64 + 20.0;
    let (w, ml, mr, mt, mb) = (1000.0, 80.0, 300.0, 50.0, 60.0);
    let h = (mt + mb + 360.0f64).max(mt + legend_h + 20.0);
    let (pw, ph) = (w - ml - mr, h - mt - mb);
    let sy = |v: f64| mt + ph - (v.log10() - e0) / (e1 - e0) * ph;
    let gw = pw / groups.len().max(1) as f64;
    let bw = gw * 0.8 / nbars;
    let mut s = String::new();
    svg_open(&mut s, w, h, title, ml + pw / 2.0);
    let mut e = e0;
    while e <= e1 + 1e-9 {
        let y = sy(10f64.powf(e));
        let label = format!("{:.*}", (-e).max(0.0) as usize, 10f64.powf(e));
        let _ = writeln!(
            s,
            r##"<line x1="{ml}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#d0d0d0"/><text x="{}" y="{:.1}" text-anchor="end">{label}</text>"##,
            ml + pw,
            ml - 6.0,
            y + 4.0
        );
        e += 1.0;
    }
    for (gi, g) in groups.iter().enumerate() {
        let x0 = ml + gi as f64 * gw + gw * 0.1;
        for (si, (name, v)) in series.iter().enumerate() {
            let Some(v) = v
                .get(gi)
                .copied()
                .flatten()
                .filter(|v| v.is_finite() && *v > 0.0)
            else {
                continue;
            };
            let seed = si + SEED_SHORT.len() >= series.len();
            let c = if seed {
                SEED_COLORS[(si + SEED_SHORT.len() - series.len()) % SEED_COLORS.len()]
            } else {
                COLORS[si % COLORS.len()]
            };
            let (x, y) = (x0 + si as f64 * bw, sy(v));
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{c}"><title>{}: {} ms</title></rect>"#,
                (bw - 1.0).max(1.0),
                (mt + ph - y).max(0.0),
                esc(name),
                num(Some(v))
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            ml + gi as f64 * gw + gw / 2.0,
            mt + ph + 18.0,
            esc(g)
        );
    }
    let _ = writeln!(
        s,
        r#"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(20,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
        mt + ph / 2.0,
        esc(y_label)
    );
    for (si, (name, _)) in series.iter().enumerate() {
        let seed = si + SEED_SHORT.len() >= series.len();
        let c = if seed {
            SEED_COLORS[(si + SEED_SHORT.len() - series.len()) % SEED_COLORS.len()]
        } else {
            COLORS[si % COLORS.len()]
        };
        let (lx, ly) = (ml + pw + 15.0, mt + 10.0 + si as f64 * 20.0);
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="{}" width="14" height="12" fill="{c}"/><text x="{}" y="{}">{}</text>"#,
            ly - 6.0,
            lx + 20.0,
            ly + 4.0,
            esc(name)
        );
    }
    s.push_str("</svg>\n");
    s
}
