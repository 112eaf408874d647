//! Report output: Markdown tables and SVG line plots, written by hand (no font or system
//! library dependency: the SVG names a generic font family and the viewer renders the text).

use std::fmt::Write as _;

/// A Markdown table.
pub struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(head: impl IntoIterator<Item = S>) -> Table {
        Table {
            head: head.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "| {} |", self.head.join(" | "));
        let _ = writeln!(
            s,
            "|{}",
            self.head
                .iter()
                .enumerate()
                .map(|(i, _)| if i == 0 { "---|" } else { "---:|" })
                .collect::<String>()
        );
        for r in &self.rows {
            let _ = writeln!(s, "| {} |", r.join(" | "));
        }
        s
    }
}

/// Human size: 0 B, 62 B, 1 KiB, 4 MiB, 1.5 KiB.
pub fn size_label(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// Compact axis label for sizes.
fn short_size(v: f64) -> String {
    let n = v.round() as u64;
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{}K", n >> 10)
    } else {
        format!("{n}")
    }
}

/// A number with 3 significant digits (or "–" for none).
pub fn num(v: Option<f64>) -> String {
    match v {
        None => "–".to_string(),
        Some(v) if !v.is_finite() => "–".to_string(),
        Some(0.0) => "0".to_string(),
        Some(v) => {
            let mag = v.abs().log10().floor() as i32;
            let decimals = (2 - mag).clamp(0, 6) as usize;
            format!("{v:.decimals$}")
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
pub enum Scale {
    Linear,
    /// Logarithmic, base 2 ticks labelled as sizes.
    Log2Size,
    /// Logarithmic, decade ticks.
    Log10,
}

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Dashed line (baselines).
    pub dashed: bool,
}

pub struct Plot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_scale: Scale,
    pub y_scale: Scale,
    /// Force the y axis to start at 0 (linear scale).
    pub y_from_zero: bool,
    pub series: Vec<Series>,
}

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];

/// `s` as SVG text content.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Starts an SVG document of `w` × `h` on a white background with `title` centred at
/// `title_x` (every plot of `svm-bench` starts so).
pub fn svg_open(s: &mut String, w: f64, h: f64, title: &str, title_x: f64) {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{title_x}" y="28" text-anchor="middle" font-size="16">{}</text>"#,
        esc(title)
    );
}

/// "Nice" linear ticks covering [lo, hi].
fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(1e-12);
    let raw = span / 6.0;
    let p = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p);
    let mut t = (lo / step).floor() * step;
    let mut v = vec![t];
    // The last tick is the first one at or above `hi`, so every point lies inside the axis.
    while t < hi - step * 1e-9 {
        t += step;
        v.push(t);
    }
    v
}

impl Plot {
    /// Renders the plot as a standalone SVG document.
    pub fn svg(&self) -> String {
        let (w, h) = (820.0, 520.0);
        let (ml, mr, mt, mb) = (80.0, 210.0, 50.0, 60.0);
        let (pw, ph) = (w - ml - mr, h - mt - mb);
        let pts = self
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| {
                p.0.is_finite()
                    && p.1.is_finite()
                    && (self.x_scale == Scale::Linear || p.0 > 0.0)
                    && (self.y_scale == Scale::Linear || p.1 > 0.0)
            });
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for p in pts {
            x0 = x0.min(p.0);
            x1 = x1.max(p.0);
            y0 = y0.min(p.1);
            y1 = y1.max(p.1);
        }
        if x0 > x1 {
            // No point to plot: an empty frame (positive, so that log axes have a range).
            (x0, x1, y0, y1) = (1.0, 10.0, 1.0, 10.0);
        }
        let tf = |scale: Scale, v: f64| match scale {
            Scale::Linear => v,
            Scale::Log2Size => v.max(1e-9).log2(),
            Scale::Log10 => v.max(1e-12).log10(),
        };
        // Axis ranges in transformed space, with ticks.
        let (xt, (ax0, ax1)) = self.axis(self.x_scale, x0, x1, true);
        let (yt, (ay0, ay1)) = self.axis(self.y_scale, y0, y1, self.y_from_zero);
        let sx = |v: f64| ml + (tf(self.x_scale, v) - ax0) / (ax1 - ax0).max(1e-12) * pw;
        let sy = |v: f64| mt + ph - (tf(self.y_scale, v) - ay0) / (ay1 - ay0).max(1e-12) * ph;
        let mut s = String::new();
        svg_open(&mut s, w, h, &self.title, ml + pw / 2.0);
        // Grid and ticks.
        for &(v, ref label) in &xt {
            let x = sx(v);
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{mt}" x2="{x:.1}" y2="{}" stroke="#e0e0e0"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
                mt + ph,
                mt + ph + 18.0,
                esc(label)
            );
        }
        for &(v, ref label) in &yt {
            let y = sy(v);
            let _ = writeln!(
                s,
                r##"<line x1="{ml}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#e0e0e0"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                ml + pw,
                ml - 6.0,
                y + 4.0,
                esc(label)
            );
        }
        let _ = writeln!(
            s,
            r#"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            ml + pw / 2.0,
            h - 15.0,
            esc(&self.x_label)
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate(20,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
            mt + ph / 2.0,
            esc(&self.y_label)
        );
        // Series.
        for (i, ser) in self.series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            let dash = if ser.dashed {
                r#" stroke-dasharray="6,4""#
            } else {
                ""
            };
            let path: Vec<String> = ser
                .points
                .iter()
                .filter(|p| {
                    p.1.is_finite()
                        && (self.y_scale == Scale::Linear || p.1 > 0.0)
                        && (self.x_scale == Scale::Linear || p.0 > 0.0)
                })
                .map(|p| format!("{:.1},{:.1}", sx(p.0), sy(p.1)))
                .collect();
            if !path.is_empty() {
                let _ = writeln!(
                    s,
                    r#"<polyline fill="none" stroke="{c}" stroke-width="1.8"{dash} points="{}"/>"#,
                    path.join(" ")
                );
                for p in &path {
                    let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                    let _ = writeln!(s, r#"<circle cx="{x}" cy="{y}" r="2.5" fill="{c}"/>"#);
                }
            }
            let ly = mt + 10.0 + i as f64 * 20.0;
            let lx = ml + pw + 15.0;
            let _ = writeln!(
                s,
                r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
                lx + 24.0,
                lx + 30.0,
                ly + 4.0,
                esc(&ser.name)
            );
        }
        s.push_str("</svg>\n");
        s
    }

    /// Ticks (transformed position, label) and the transformed range of one axis.
    fn axis(&self, scale: Scale, lo: f64, hi: f64, zero: bool) -> (Vec<(f64, String)>, (f64, f64)) {
        match scale {
            Scale::Linear => {
                let lo = if zero { lo.min(0.0) } else { lo };
                let (lo, hi) = if hi - lo < 1e-12 {
                    (lo - 1.0, hi + 1.0)
                } else {
                    (lo, hi)
                };
                let pad = if zero { 0.0 } else { (hi - lo) * 0.05 };
                let ticks = linear_ticks(lo - pad, hi);
                let r = (*ticks.first().unwrap_or(&lo), *ticks.last().unwrap_or(&hi));
                (ticks.into_iter().map(|t| (t, num(Some(t)))).collect(), r)
            }
            Scale::Log2Size => {
                let (a, b) = (lo.max(1.0).log2().floor(), hi.max(1.0).log2().ceil());
                let b = if b <= a { a + 1.0 } else { b };
                let step = ((b - a) / 8.0).ceil().max(1.0);
                let mut ticks = Vec::new();
                let mut e = a;
                while e <= b {
                    ticks.push((e, short_size(2f64.powf(e))));
                    e += step;
                }
                (ticks, (a, b))
            }
            Scale::Log10 => {
                let (a, b) = (lo.log10().floor(), hi.log10().ceil());
                let b = if b <= a { a + 1.0 } else { b };
                let ticks = (a as i32..=b as i32)
                    .map(|e| {
                        let v = 10f64.powi(e);
                        (e as f64, num(Some(v)))
                    })
                    .collect();
                (ticks, (a, b))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_and_plot_render() {
        let mut t = Table::new(["size", "µs"]);
        t.row(["0 B", "1.0"]);
        let md = t.render();
        assert!(md.starts_with("| size | µs |\n|---|---:|\n| 0 B | 1.0 |"));
        let p = Plot {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_scale: Scale::Log2Size,
            y_scale: Scale::Log10,
            y_from_zero: false,
            series: vec![Series {
                name: "a<b".into(),
                points: vec![(1024.0, 10.0), (4096.0, 1000.0)],
                dashed: true,
            }],
        };
        let svg = p.svg();
        assert!(svg.contains("<polyline") && svg.contains("a&lt;b") && svg.ends_with("</svg>\n"));
        // Without any point (every run failed): an empty frame, on log axes too.
        for scale in [Scale::Linear, Scale::Log10, Scale::Log2Size] {
            let empty = Plot {
                title: "t".into(),
                x_label: "x".into(),
                y_label: "y".into(),
                x_scale: scale,
                y_scale: scale,
                y_from_zero: false,
                series: vec![Series {
                    name: "none".into(),
                    points: vec![],
                    dashed: false,
                }],
            };
            assert!(empty.svg().ends_with("</svg>\n"));
        }
        assert_eq!(size_label(4 << 20), "4 MiB");
        assert_eq!(size_label(62), "62 B");
        assert_eq!(num(Some(1234.6)), "1235");
        assert_eq!(num(Some(1.2345)), "1.23");
    }
}
