//! Page-fault detection time per backend: the example `faultdetect` at one node, no network.

use std::path::Path;
use std::process::Command;

use crate::util;

use super::*;

/// Detection times of one backend: (mean, p50, p90) µs, median over `reps` runs.
pub(super) struct Detect {
    pub(super) backend: &'static str,
    pub(super) mean_us: Option<f64>,
    pub(super) p50_us: Option<f64>,
    pub(super) p90_us: Option<f64>,
    pub(super) faults: u64,
}

pub(super) fn run_detect(
    svmrun: &Path,
    prog: &Path,
    cfg: &Cfg,
    backend: &'static str,
) -> Result<Detect, String> {
    let (mut means, mut p50s, mut p90s, mut faults) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for _ in 0..cfg.reps {
        let mut c = Command::new(svmrun);
        c.args(["-n", "1", "--no-prefix", "--fault", backend]);
        c.arg(prog)
            .arg(cfg.detect_pages.to_string())
            .arg(cfg.detect_rounds.to_string());
        let r = util::run_with_deadline(c, cfg.deadline);
        if !r.ok {
            return Err(format!(
                "faultdetect --fault {backend} failed ({}): {}",
                r.status,
                util::tail(&r.stderr, 5)
            ));
        }
        let get = |k: &str| {
            util::kv(&r.stdout, k)
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| format!("faultdetect: no numeric `{k}=` in {:?}", r.stdout))
        };
        let got = util::kv(&r.stdout, "backend").unwrap_or("");
        if got != backend {
            return Err(format!(
                "faultdetect ran with backend {got:?}, not {backend}"
            ));
        }
        let mean = get("detect_us_mean")?;
        if mean.is_nan() || mean <= 0.0 {
            return Err(format!(
                "faultdetect --fault {backend} measured no fault: {:?}",
                r.stdout.trim()
            ));
        }
        means.push(mean);
        p50s.push(get("detect_us_p50")?);
        p90s.push(get("detect_us_p90")?);
        faults += get("faults")? as u64;
    }
    Ok(Detect {
        backend,
        mean_us: Some(util::median(&means)),
        p50_us: Some(util::median(&p50s)),
        p90_us: Some(util::median(&p90s)),
        faults,
    })
}
