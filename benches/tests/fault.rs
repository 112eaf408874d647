//! Runs `svm-bench fault` in its tiny test configuration (the FFT at 2 nodes, sc-sw over TCP,
//! both fault backends; detection with both backends) and checks the report: the paper's table
//! headers beside ours, every FFT check passed, detection measured. No timing is asserted.
//! Needs svmrun, svm-config, libsvm_cvm.so, the `faultdetect` example and a C compiler, which
//! `cargo test --workspace` (and `.ci/run`) provide.

mod common;

use common::{bench, out_dir, read};
use std::time::Duration;

#[test]
fn fault_tiny_writes_the_seed_table_with_every_fft_verified() {
    let out = out_dir("fault");
    let (ok, stdout, stderr) = bench(
        &["fault", "--tiny", "--out", out.to_str().unwrap()],
        Duration::from_secs(300),
    );
    assert!(
        ok,
        "svm-bench fault failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let md = read(&out.join("fault.md"));
    for h in [
        "## Page-fault time: read / write / average [ms] (FFT 64×64×16)",
        "| nodes | svm sc-sw, uffd, tcp (this machine) | svm sc-sw, segv, tcp (this machine) | \
         CVM on Solaris (paper: Solaris 2.5.1, Sun SS-20, Ethernet) | SVMlib on Solaris (paper: same platform) | \
         SVMlib on Win32 (paper: NT 4.0, Pentium-133, FastEthernet) |",
        // The paper's rows, quoted exactly.
        "| 11.3 / 0.8 / 4.4 | 4.5 / 1.3 / 2.2 | 3.4 / 1.1 / 1.8 |",
        "| 12.0 / 0.8 / 5.8 | 4.6 / 1.8 / 2.7 | 3.4 / 1.4 / 2.3 |",
        "| 16.7 / 0.9 / 7.1 | 4.9 / 1.8 / 3.1 | 4.0 / 1.5 / 2.4 |",
        "## Every configuration: read / write / average page-fault time [ms]",
        "## Page-fault detection time (no network)",
        "| backend | mean µs | p50 µs | p90 µs | faults |",
        "| Solaris 2.5.1 | 135 μs | 92 μs | 48 μs |",
        "## All runs",
        "verification: 2 of 2 FFT runs passed their checks, 0 failures",
    ] {
        assert!(md.contains(h), "fault.md lacks {h:?}:\n{md}");
    }
    assert!(!md.contains("FAILED"), "{md}");
    let all = md.split("## All runs").nth(1).unwrap();
    assert_eq!(all.matches("| yes |").count(), 2, "{all}");
    assert!(!all.contains("| NO |"), "{all}");
    // Ours at 2 nodes: three numbers for each backend.
    let row2 = md
        .lines()
        .find(|l| l.starts_with("| 2 | ") && l.contains("11.3 / 0.8 / 4.4"))
        .expect("the 2-node row");
    let ours: Vec<&str> = row2.split(" | ").skip(1).take(2).collect();
    for cell in ours {
        let nums: Vec<f64> = cell
            .split(" / ")
            .filter_map(|x| x.trim().parse().ok())
            .collect();
        assert_eq!(nums.len(), 3, "not three numbers in {cell:?}: {row2}");
        assert!(nums.iter().all(|v| *v > 0.0), "{row2}");
    }
    for backend in ["uffd", "segv"] {
        let line = md
            .lines()
            .find(|l| l.starts_with(&format!("| svm {backend} (this machine) |")))
            .unwrap_or_else(|| panic!("no detection row for {backend}:\n{md}"));
        let mean: f64 = line
            .split(" | ")
            .nth(1)
            .and_then(|v| v.trim().parse().ok())
            .expect(line);
        assert!(mean > 0.0, "{line}");
    }
    assert!(stdout.contains("FFT runs passed their checks"), "{stdout}");
    let svg = read(&out.join("fault_time.svg"));
    assert!(
        svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>") && svg.contains("<rect x="),
        "fault_time.svg is not a bar plot"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn help_lists_fault() {
    let (ok, stdout, _) = bench(&["--help"], Duration::from_secs(30));
    assert!(ok && stdout.contains("fault"), "{stdout}");
    let (ok, stdout, _) = bench(&["fault", "--help"], Duration::from_secs(30));
    assert!(
        ok && stdout.contains("--quick") && stdout.contains("--out"),
        "{stdout}"
    );
}
