//! Unit tests of the parsing of the FFT's output and statistics, and of the plot.

use super::*;

#[test]
fn stats_lines_parse_with_and_without_prefix() {
    let line = r#"{"node":1,"nodes":2,"read_faults":3,"write_faults":1,"remote_faults":4,"read_fault_latency":{"count":3,"mean_us":100.0,"p50_us":1,"p90_us":1,"p99_us":1},"write_fault_latency":{"count":1,"mean_us":20.0,"p50_us":1,"p90_us":1,"p99_us":1}}"#;
    let err = format!("noise\n[1] {line}\n{line}\n");
    let s = parse_stats(&err).expect("parses");
    assert_eq!(s.len(), 2);
    let r = RunResult {
        protocol: "sc-sw",
        fault: "uffd",
        transport: "tcp",
        nodes: 2,
        rep: 0,
        nodes_stats: s,
        time_s: None,
        err: None,
        verified: true,
    };
    let t = times(&[&r]);
    assert_eq!(t[0], Some(0.1));
    assert_eq!(t[1], Some(0.02));
    assert!((t[2].unwrap() - 0.08).abs() < 1e-12);
    assert_eq!(rwa(t), "0.100 / 0.020 / 0.080");
}

#[test]
fn fft_line_is_checked() {
    let ok = "fft3d OK err=1.3e-15 fwd_err=0.000e+00 dft_err=3.7e-12 time_s=0.05 procs=2 size=64x64x16\n";
    assert_eq!(parse_fft(ok).unwrap(), (0.05, 1.3e-15));
    assert!(parse_fft("fft3d FAIL err=1 fwd_err=0 dft_err=0 time_s=1\n").is_err());
    assert!(parse_fft("fft3d OK err=1e-3 fwd_err=0 dft_err=0 time_s=1\n").is_err());
}

#[test]
fn bar_plot_renders() {
    let svg = bar_svg(
        "t",
        "ms",
        &["2 nodes".into(), "3 nodes".into()],
        &[
            ("a<b".into(), vec![Some(0.05), None]),
            ("paper".into(), vec![Some(4.4), Some(5.8)]),
        ],
    );
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    assert!(svg.contains("a&lt;b") && svg.matches("<rect x=").count() >= 3);
}
