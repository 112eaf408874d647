//! `svm-bench splash` without the suite (CI has none): a missing or wrong `--suite` directory
//! is a clear error that says how to get Splash-3, and nothing is written. The parsing and
//! verification logic is unit-tested in `src/splash.rs` with synthetic outputs.

#[allow(dead_code)] // not every helper is used here
mod common;

use common::{bench, out_dir};
use std::time::Duration;

#[test]
fn missing_suite_is_a_clear_error() {
    let out = out_dir("splash-missing");
    let (ok, stdout, stderr) = bench(
        &[
            "splash",
            "--suite",
            "/nonexistent/Splash-3",
            "--quick",
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(!ok, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("/nonexistent/Splash-3")
            && stderr.contains("github.com/SakalisC/Splash-3")
            && stderr.contains("v2.0M"),
        "{stderr}"
    );
    assert!(!out.join("splash.md").exists());
}

#[test]
fn a_directory_that_is_not_the_suite_is_a_clear_error() {
    let out = out_dir("splash-wrong");
    std::fs::create_dir_all(out.join("notsplash/codes")).expect("mkdir");
    let suite = out.join("notsplash");
    let (ok, _, stderr) = bench(
        &[
            "splash",
            "--suite",
            suite.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(!ok);
    assert!(
        stderr.contains("not a Splash-3 checkout") && stderr.contains("SakalisC/Splash-3"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_loop_alignment_that_is_not_a_power_of_two_is_refused_before_anything_runs() {
    let out = out_dir("splash-align");
    let (ok, _, stderr) = bench(
        &[
            "splash",
            "--suite",
            "/nonexistent/Splash-3",
            "--align-loops",
            "48",
            "--out",
            out.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(!ok);
    assert!(
        stderr.contains("--align-loops 48") && stderr.contains("power of two"),
        "{stderr}"
    );
    assert!(!out.join("splash.md").exists());
}
