//! Parsing and verification of the runs' outputs and statistics, the headline.

use super::*;

/// The program's own compute time in µs (the last number on the first line starting with
/// `key`, leading blanks ignored).
pub(super) fn own_time_us(stdout: &str, key: &str) -> Option<f64> {
    stdout
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|w| w.parse::<f64>().ok())
}

/// The deterministic part of the stdout for `sig` (empty: nothing to compare).
pub(super) fn signature(sig: Sig, stdout: &str) -> Vec<String> {
    let lines = stdout.lines().map(str::trim);
    match sig {
        Sig::Checksum => lines
            .filter(|l| l.starts_with("Checksum difference"))
            .map(String::from)
            .collect(),
        Sig::Residuals => lines
            .filter(|l| l.contains("residual norm"))
            .map(String::from)
            .collect(),
        Sig::Energies => {
            // The all-number lines after the start banner. They are printed by the program's
            // process 0, which under svm may run on another node than `main`: its output can
            // come after the master's later lines, so their position is not used.
            let mut on = false;
            let mut v = Vec::new();
            for l in lines {
                if l.contains("NEW RUN STARTING") {
                    on = true;
                } else if on
                    && !l.is_empty()
                    && l.split_whitespace().all(|w| w.parse::<f64>().is_ok())
                {
                    v.push(l.split_whitespace().collect::<Vec<_>>().join(" "));
                }
            }
            v
        }
        Sig::None | Sig::RayImage | Sig::VolImages => Vec::new(),
    }
}

/// The program's own checks on one run's stdout.
pub(super) fn self_check(prog: &Prog, stdout: &str) -> Result<(), String> {
    for p in prog.pass {
        if !stdout.contains(p) {
            return Err(format!("no `{p}` in the output"));
        }
    }
    for bad in ["TEST FAILED", "FAILED", "ERROR:"] {
        if let Some(l) = stdout.lines().find(|l| l.contains(bad)) {
            return Err(format!("the program reports {:?}", l.trim()));
        }
    }
    if let TimeKey::Line(k) = prog.time {
        if own_time_us(stdout, k).is_none() {
            return Err(format!("no time on the `{k}` line"));
        }
    }
    if matches!(prog.sig, Sig::Checksum | Sig::Residuals | Sig::Energies)
        && signature(prog.sig, stdout).is_empty()
    {
        return Err("no result lines to compare".into());
    }
    Ok(())
}

/// Statistics summed over the nodes of one svm run.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
pub(super) struct SvmStats {
    pub(super) nodes: u64,
    pub(super) faults: u64,
    pub(super) remote_faults: u64,
    pub(super) pages_fetched: u64,
    pub(super) locks: u64,
    pub(super) barriers: u64,
}

/// The `SVM_STATS=json` objects of every node (lines holding `{"node":`).
pub(super) fn parse_stats(stderr: &str) -> Result<SvmStats, String> {
    let mut s = SvmStats::default();
    for line in stderr.lines() {
        let Some(at) = line.find("{\"node\":") else {
            continue;
        };
        let v: serde_json::Value =
            serde_json::from_str(&line[at..]).map_err(|e| format!("bad statistics line: {e}"))?;
        let u = |k: &str| {
            v.get(k)
                .and_then(|x| x.as_u64())
                .ok_or_else(|| format!("no `{k}` in the statistics"))
        };
        let count = |k: &str| {
            v.get(k)
                .and_then(|x| x.get("count"))
                .and_then(|x| x.as_u64())
                .ok_or_else(|| format!("no `{k}.count` in the statistics"))
        };
        s.nodes += 1;
        s.faults += u("read_faults")? + u("write_faults")?;
        s.remote_faults += u("remote_faults")?;
        s.pages_fetched += u("pages_fetched")?;
        // Acquires through the lock fast path are counted apart (older builds lack the key).
        s.locks += count("lock_acquire_latency")?
            + v.get("fast_locks").and_then(|x| x.as_u64()).unwrap_or(0);
        s.barriers += count("barrier_wait")?;
    }
    if s.nodes == 0 {
        return Err("no statistics (SVM_STATS=json) on stderr".into());
    }
    Ok(s)
}

/// Per image: the number of pixels (bytes) in which `a` differs from `b`; `None` when the
/// image sets do not correspond.
pub(super) fn pixel_diffs(a: &RunOut, b: &RunOut) -> Option<Vec<usize>> {
    if a.images.len() != b.images.len() || a.images.is_empty() {
        return None;
    }
    a.images
        .iter()
        .zip(&b.images)
        .map(|(x, y)| {
            (x.0 == y.0 && x.1.len() == y.1.len())
                .then(|| x.1.iter().zip(&y.1).filter(|(u, v)| u != v).count())
        })
        .collect()
}

/// How many pixels of a volrend frame may differ from the sequential image at `p` processes:
/// none at p = 1; at p > 1 as many as the pthread build's worst frame in this run, but at least
/// a tenth of the frame, because the race's reach changes from run to run — the pthread build
/// alone, at p = 2 on this machine, differed in 0 of 8281 pixels in one run and 571 (6.9 %) in
/// the next, and svm in 571 and 586.
pub(super) fn racy_bound(pthread_worst: usize, pixels: usize, p: usize) -> usize {
    if p <= 1 {
        pthread_worst
    } else {
        pthread_worst.max(pixels / 10)
    }
}

/// volrend: the svm images against the sequential ones. volrend races (adaptive ray tracing
/// reads image corners that another process may not have traced yet; its pthread build differs
/// from the sequential image in every frame at p > 1, from run to run), so an svm image may
/// differ from the sequential one in at most `bound` pixels ([`racy_bound`]: 0 at p = 1).
/// Ok(note) says what differed.
pub(super) fn compare_racy_images(
    r: &RunOut,
    seq: &RunOut,
    bound: usize,
) -> Result<Option<String>, String> {
    let Some(d) = pixel_diffs(r, seq) else {
        return Err(format!(
            "{} images, the sequential run has {}",
            r.images.len(),
            seq.images.len()
        ));
    };
    let worst = d.iter().copied().max().unwrap_or(0);
    let frames = d.iter().filter(|&&x| x > 0).count();
    let pixels = seq.images.first().map_or(0, |x| x.1.len());
    if worst == 0 {
        Ok(None)
    } else if worst <= bound {
        Ok(Some(format!(
            "{frames} of {} frames differ from the sequential image in up to {worst} of {pixels} \
             pixels (allowed: {bound}, from the pthread build at this p; the program races)",
            d.len()
        )))
    } else {
        Err(format!(
            "{frames} of {} frames differ from the sequential image in up to {worst} of {pixels} \
             pixels, more than allowed ({bound}: the pthread build's worst frame at this p, at \
             least a tenth of the frame)",
            d.len()
        ))
    }
}

/// Compares a run with its reference (the pthread run at the same p; volrend: pthread p = 1).
pub(super) fn compare(prog: &Prog, r: &RunOut, reference: Option<&RunOut>) -> Result<(), String> {
    if prog.sig == Sig::None {
        return Ok(());
    }
    let Some(refr) = reference.filter(|x| x.ok) else {
        return Err("no verified pthread reference run to compare with".into());
    };
    match prog.sig {
        Sig::RayImage | Sig::VolImages => {
            if r.images.len() != refr.images.len() {
                return Err(format!(
                    "{} image files, the reference has {}",
                    r.images.len(),
                    refr.images.len()
                ));
            }
            for (a, b) in r.images.iter().zip(&refr.images) {
                if a != b {
                    return Err(format!("image {} differs from the reference", a.0));
                }
            }
            Ok(())
        }
        _ => {
            if r.sig == refr.sig {
                Ok(())
            } else {
                let at = r
                    .sig
                    .iter()
                    .zip(&refr.sig)
                    .position(|(a, b)| a != b)
                    .unwrap_or(r.sig.len().min(refr.sig.len()));
                Err(format!(
                    "result differs from the pthread build at line {}: {:?} vs {:?}",
                    at + 1,
                    r.sig.get(at),
                    refr.sig.get(at)
                ))
            }
        }
    }
}

pub(super) fn geomean(v: &[f64]) -> Option<f64> {
    let v: Vec<f64> = v
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    if v.is_empty() {
        None
    } else {
        Some((v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
    }
}

/// `splash: correct=N/14 geomean_ratio_p2=X max_ratio_p2=Y (PROGRAM)`.
pub(super) fn headline(correct: usize, total: usize, ratios_p2: &[(&str, f64)]) -> String {
    let g = geomean(&ratios_p2.iter().map(|x| x.1).collect::<Vec<_>>());
    let max = ratios_p2
        .iter()
        .filter(|x| x.1.is_finite())
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let f = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.2}"));
    format!(
        "splash: correct={correct}/{total} geomean_ratio_p2={} max_ratio_p2={} ({})",
        f(g),
        f(max.map(|m| m.1)),
        max.map_or("none", |m| m.0)
    )
}
