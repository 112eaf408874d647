//! Runs `svm-bench scale` in its tiny configuration (N = 2..16) and checks the report: the three
//! tables, every check passed, and the counts the protocols must produce (a barrier costs
//! 2(N−1) messages: every node to the manager and back). Counts, not times.

mod common;

use common::{bench, out_dir, read};
use std::time::Duration;

#[test]
fn scale_tiny_reports_messages_and_bytes_per_operation() {
    let out = out_dir("scale");
    let (ok, stdout, stderr) = bench(
        &["scale", "--tiny", "--out", out.to_str().unwrap()],
        Duration::from_secs(300),
    );
    assert!(
        ok,
        "svm-bench scale failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let md = read(&out.join("scale.md"));
    for h in [
        "## Per lock",
        "## Per barrier",
        "## Per read fault",
        "| N | sc-sw msgs | sc-sw bytes | sc-mw msgs | sc-mw bytes | scope msgs | scope bytes |",
        "Every check passed",
    ] {
        assert!(md.contains(h), "scale.md lacks {h:?}:\n{md}");
    }
    let barrier = &md[md.find("## Per barrier").unwrap()..];
    for n in [2u32, 4, 8, 16] {
        let row = format!("| {n} | {:.2} |", (2 * (n - 1)) as f64);
        let row2 = format!("| {n} | {:.1} |", (2 * (n - 1)) as f64);
        assert!(
            barrier.contains(&row) || barrier.contains(&row2),
            "barrier at N={n} is not 2(N-1) messages:\n{barrier}"
        );
    }
    for svg in ["scale_msgs.svg", "scale_bytes.svg"] {
        let s = read(&out.join(svg));
        assert!(
            s.starts_with("<svg") || s.contains("<svg"),
            "{svg} is not SVG"
        );
    }
}
