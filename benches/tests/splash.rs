//! `svm-bench splash` without the suite (CI has none): a missing or wrong `--suite` directory
//! or a bad option is a clear error (the suite's errors say how to get Splash-3), and nothing
//! is written. The parsing and verification logic is unit-tested in `src/splash.rs` with
//! synthetic outputs.

#[allow(dead_code)] // not every helper is used here
mod common;

use common::{bench, out_dir};
use std::path::Path;
use std::time::Duration;

/// Runs `svm-bench splash --suite SUITE EXTRA… --out OUT`, which must fail without writing a
/// report; returns its stderr.
fn splash_refused(suite: &Path, extra: &[&str], out: &Path) -> String {
    let mut args = vec!["splash", "--suite", suite.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let (ok, stdout, stderr) = bench(&args, Duration::from_secs(60));
    assert!(!ok, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(!out.join("splash.md").exists());
    stderr
}

#[test]
fn missing_suite_is_a_clear_error() {
    let out = out_dir("splash-missing");
    let stderr = splash_refused(Path::new("/nonexistent/Splash-3"), &["--quick"], &out);
    assert!(
        stderr.contains("/nonexistent/Splash-3")
            && stderr.contains("github.com/SakalisC/Splash-3")
            && stderr.contains("v2.0M"),
        "{stderr}"
    );
}

#[test]
fn a_directory_that_is_not_the_suite_is_a_clear_error() {
    let out = out_dir("splash-wrong");
    std::fs::create_dir_all(out.join("notsplash/codes")).expect("mkdir");
    let stderr = splash_refused(&out.join("notsplash"), &[], &out);
    assert!(
        stderr.contains("not a Splash-3 checkout") && stderr.contains("SakalisC/Splash-3"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_loop_alignment_that_is_not_a_power_of_two_is_refused_before_anything_runs() {
    let out = out_dir("splash-align");
    let stderr = splash_refused(
        Path::new("/nonexistent/Splash-3"),
        &["--align-loops", "48"],
        &out,
    );
    assert!(
        stderr.contains("--align-loops 48") && stderr.contains("power of two"),
        "{stderr}"
    );
}

#[test]
fn a_repeat_count_outside_1_to_99_is_refused_before_anything_runs() {
    let out = out_dir("splash-repeat");
    for n in ["0", "100"] {
        let stderr = splash_refused(Path::new("/nonexistent/Splash-3"), &["--repeat", n], &out);
        assert!(stderr.contains("--repeat must be in 1..=99"), "{stderr}");
    }
}
