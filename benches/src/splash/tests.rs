//! Unit tests of the parsing and verification with synthetic program outputs.

use super::*;

fn prog(name: &str) -> &'static Prog {
    PROGS.iter().find(|p| p.name == name).expect("program")
}

#[test]
fn fourteen_programs() {
    assert_eq!(PROGS.len(), 14);
    let mut names: Vec<&str> = PROGS.iter().map(|p| p.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 14);
}

#[test]
fn missing_or_wrong_suite_is_a_clear_error() {
    let e = codes_dir(Path::new("/nonexistent/splash-3")).unwrap_err();
    assert!(
        e.contains("no such directory") && e.contains("SakalisC/Splash-3"),
        "{e}"
    );
    assert!(e.contains("v2.0M"), "{e}");
    let dir = std::env::temp_dir().join(format!("svm-bench-splash-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("codes/kernels")).expect("mkdir");
    let e = codes_dir(&dir).unwrap_err();
    assert!(
        e.contains("not a Splash-3 checkout") && e.contains("SakalisC/Splash-3"),
        "{e}"
    );
    // Only fft present: incomplete.
    std::fs::create_dir_all(dir.join("codes/kernels/fft")).expect("mkdir");
    std::fs::write(dir.join("codes/kernels/fft/fft.C"), "x").expect("write");
    let e = codes_dir(&dir).unwrap_err();
    assert!(e.contains("incomplete") && e.contains("apps/barnes"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn own_times() {
    let t = "Start time                        :       640\n\
             Total time with initialization    :    184066\n\
             Total time without initialization :    170573\n";
    assert_eq!(own_time_us(t, TOTAL), Some(170573.0));
    let r = "\tTotal time without initialization\t               81353\n";
    assert_eq!(own_time_us(r, TOTAL), Some(81353.0));
    let b = "COMPUTESTART  = 17\nCOMPUTETIME   =       453351\nTRACKTIME     =  2\n";
    assert_eq!(own_time_us(b, "COMPUTETIME"), Some(453351.0));
    let w = "COMPUTETIME (after initialization) = 78392\n";
    assert_eq!(own_time_us(w, "COMPUTETIME"), Some(78392.0));
    assert_eq!(own_time_us("nothing\n", TOTAL), None);
}

#[test]
fn self_checks() {
    let fft_ok = "Total time without initialization : 10\n\
                  Checksum difference is 0.000 (1.5, 1.5)\nTEST PASSED\n";
    assert!(self_check(prog("fft"), fft_ok).is_ok());
    let fft_bad = "Total time without initialization : 10\n\
                   Checksum difference is 3.000 (1.5, 4.5)\nTEST FAILED\n";
    assert!(self_check(prog("fft"), fft_bad).is_err());
    // No time on the line.
    let no_time = "Checksum difference is 0.000 (1.5, 1.5)\nTEST PASSED\n";
    assert!(self_check(prog("fft"), no_time).is_err());
    assert!(self_check(
        prog("radix"),
        "PASSED: All keys in place.\nTotal time without initialization : 5\n"
    )
    .is_ok());
    assert!(self_check(prog("radix"), "ERROR: key 5 out of place\n").is_err());
    assert!(self_check(
        prog("water-nsquared"),
        "COMPUTETIME (after initialization) = 3\n"
    )
    .is_err());
    let water = "***** NEW RUN STARTING FROM REGULAR LATTICE *****\n  3  1.5  0.05\n  \
                 10.0 305.7\nCOMPUTESTART (after initialization) = 1\n\
                 COMPUTETIME (after initialization) = 3\nExited Happily with XTT = 1\n";
    assert!(self_check(prog("water-nsquared"), water).is_ok());
    let energies = vec!["3 1.5 0.05".to_string(), "10.0 305.7".to_string()];
    assert_eq!(signature(Sig::Energies, water), energies);
    // Printed by a worker node: after the master's last lines.
    let late = "***** NEW RUN STARTING FROM REGULAR LATTICE *****\n\
                COMPUTESTART (after initialization) = 1\n\
                COMPUTETIME (after initialization) = 3\nExited Happily with XTT = 1\n\
                \x20        3  1.5  0.05\n   10.0 305.7\n";
    assert_eq!(signature(Sig::Energies, late), energies);
    assert!(signature(Sig::Energies, "3 1.5\n").is_empty());
}

#[test]
fn comparisons_with_the_reference() {
    let p = prog("ocean-contiguous");
    let out = |res: &str| {
        RunOut {
        ok: true,
        sig: signature(
            Sig::Residuals,
            &format!("iter 71, level 7, residual norm {res}, work = 33.875\nTotal time without initialization : 1\n"),
        ),
        ..RunOut::default()
    }
    };
    let a = out("8.00274594e-08");
    let b = out("8.00274594e-08");
    let c = out("8.00274595e-08");
    assert_eq!(a.sig.len(), 1);
    assert!(compare(p, &a, Some(&b)).is_ok());
    let e = compare(p, &a, Some(&c)).unwrap_err();
    assert!(e.contains("differs"), "{e}");
    assert!(compare(p, &a, None).is_err());
    // No signature to compare: always fine.
    assert!(compare(prog("barnes"), &a, None).is_ok());
    // Images.
    let img = |bytes: &[u8]| RunOut {
        ok: true,
        images: vec![("teapot.rl".into(), bytes.to_vec())],
        ..RunOut::default()
    };
    let rt = prog("raytrace");
    assert!(compare(rt, &img(b"abc"), Some(&img(b"abc"))).is_ok());
    assert!(compare(rt, &img(b"abc"), Some(&img(b"abd"))).is_err());
    let none = RunOut {
        ok: true,
        ..RunOut::default()
    };
    assert!(compare(rt, &none, Some(&img(b"abc"))).is_err());
}

#[test]
fn racy_images_are_bounded_by_the_pthread_build() {
    let run = |frames: &[&[u8]]| RunOut {
        ok: true,
        images: frames
            .iter()
            .enumerate()
            .map(|(i, f)| (format!("f{i}.tiff"), f.to_vec()))
            .collect(),
        ..RunOut::default()
    };
    let seq = run(&[b"aaaa", b"bbbb"]);
    assert_eq!(
        pixel_diffs(&run(&[b"aaab", b"bxxb"]), &seq),
        Some(vec![1, 2])
    );
    assert_eq!(pixel_diffs(&run(&[b"aaaa"]), &seq), None);
    assert_eq!(pixel_diffs(&run(&[b"aaaa", b"bbb"]), &seq), None);
    // Equal: no note.
    assert_eq!(
        compare_racy_images(&run(&[b"aaaa", b"bbbb"]), &seq, 0),
        Ok(None)
    );
    // Within the pthread build's deviation: verified, with a note.
    let n = compare_racy_images(&run(&[b"aaab", b"bbbb"]), &seq, 2)
        .expect("within bound")
        .expect("note");
    assert!(
        n.contains("1 of 2 frames") && n.contains("up to 1 of 4"),
        "{n}"
    );
    // More than the pthread build (or any difference at p = 1): failed.
    assert!(compare_racy_images(&run(&[b"axxx", b"bbbb"]), &seq, 2).is_err());
    // The allowance: exact at p = 1; at p > 1 the pthread build's worst, at least a tenth.
    assert_eq!(racy_bound(0, 8281, 1), 0);
    assert_eq!(racy_bound(0, 8281, 2), 828);
    assert_eq!(racy_bound(1000, 8281, 4), 1000);
    assert!(compare_racy_images(&run(&[b"aaab", b"bbbb"]), &seq, 0).is_err());
    assert!(compare_racy_images(&run(&[b"aaaa"]), &seq, 9).is_err());
}

#[test]
fn stats_are_summed_over_nodes() {
    let node = |n: u64| {
        format!(
            "{{\"node\":{n},\"nodes\":2,\"protocol\":\"sc-sw\",\"read_faults\":{},\"write_faults\":2,\
             \"local_faults\":0,\"remote_faults\":3,\"pages_fetched\":4,\
             \"lock_acquire_latency\":{{\"count\":5,\"mean_us\":1.0}},\
             \"barrier_wait\":{{\"count\":6,\"mean_us\":2.0}}}}",
            n + 1
        )
    };
    let stderr = format!("noise\n{}\n[1] {}\n", node(0), node(1));
    let s = parse_stats(&stderr).expect("stats");
    assert_eq!(
        s,
        SvmStats {
            nodes: 2,
            faults: 1 + 2 + 2 + 2,
            remote_faults: 6,
            pages_fetched: 8,
            locks: 10,
            barriers: 12,
        }
    );
    assert!(parse_stats("no stats here\n").is_err());
    assert!(parse_stats("{\"node\":0}\n").is_err());
}

#[test]
fn makefile_objects_and_input_edits() {
    let mk = "TARGET = X\nOBJS = a.o b.o \\\n\tc.o \\\n d.o\ninclude ../Makefile.config\n";
    assert_eq!(makefile_objs(mk), vec!["a.o", "b.o", "c.o", "d.o"]);
    assert_eq!(makefile_objs("OBJS = lu.o\n"), vec!["lu.o"]);
    assert_eq!(set_line("a\nb\n1\n\n", 0, |_| "4".into()), "a\nb\n4\n\n");
    assert_eq!(
        set_line("x\ny 6.2\n", 2, |l| l.replace('y', "2")),
        "x\n2 6.2\n"
    );
}

#[test]
fn headline_format() {
    let h = headline(13, 14, &[("fft", 2.0), ("radix", 8.0), ("lu", f64::NAN)]);
    assert_eq!(
        h,
        "splash: correct=13/14 geomean_ratio_p2=4.00 max_ratio_p2=8.00 (radix)"
    );
    assert_eq!(
        headline(0, 14, &[]),
        "splash: correct=0/14 geomean_ratio_p2=n/a max_ratio_p2=n/a (none)"
    );
}

#[test]
fn align_loops_values() {
    for ok in [0, 1, 16, DEFAULT_ALIGN_LOOPS, 4096] {
        assert!(check_align_loops(ok).is_ok(), "{ok}");
    }
    for bad in [3, 48, 8192] {
        let e = check_align_loops(bad).unwrap_err();
        assert!(
            e.contains(&format!("--align-loops {bad}")) && e.contains("power of two"),
            "{e}"
        );
    }
    let suite: Vec<String> = BASE_CFLAGS.iter().map(|s| s.to_string()).collect();
    assert_eq!(common_cflags(0), suite);
    let aligned = common_cflags(DEFAULT_ALIGN_LOOPS);
    assert_eq!(aligned[..suite.len()], suite[..]);
    assert_eq!(aligned[suite.len()..], ["-falign-loops=64".to_string()]);
}

/// The flag does what the default is for: the compiler puts the head of a hot inner loop on
/// a 64-byte boundary (`.p2align 6`, unconditional), where the suite's flags leave it to a
/// padding limit (`.p2align 4,,10`: anywhere when that costs more than 10 bytes).
#[test]
fn both_builds_put_loop_heads_on_64_byte_boundaries() {
    let dir = std::env::temp_dir().join(format!("svm-bench-align-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = dir.join("daxpy.c");
    std::fs::write(
        &src,
        "void daxpy(double *a, const double *b, long n, double x)\n\
         { for (long i = 0; i < n; i++) a[i] += x * b[i]; }\n",
    )
    .expect("write source");
    let asm = |align: u32| -> Option<String> {
        let out = Command::new("cc")
            .args(common_cflags(align))
            .args(["-S", "-o", "-"])
            .arg(&src)
            .output()
            .ok()?;
        assert!(
            out.status.success(),
            "cc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (Some(aligned), Some(suite)) = (asm(DEFAULT_ALIGN_LOOPS), asm(0)) else {
        eprintln!("SKIPPED: no `cc` on this machine");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    let _ = std::fs::remove_dir_all(&dir);
    // GCC writes `.p2align 6`, Clang `.p2align 6, 0x90`; a padding limit is `,,N`.
    let unconditional_64 = |s: &str| {
        s.lines().any(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            t.first() == Some(&".p2align") && matches!(t.get(1), Some(&"6") | Some(&"6,"))
        })
    };
    assert!(unconditional_64(&aligned), "{aligned}");
    assert!(!unconditional_64(&suite), "{suite}");
}

fn other_data_with_steps() -> serde_json::Value {
    let step = |p50: f64, mean: f64| serde_json::json!({"count": 3, "p50": p50, "mean": mean});
    serde_json::json!({"nodes": 2, "remote_fault_steps_us": {
        "remote_faults": 4, "matched": 3, "steps": {
            "to_request_sent": step(2.0, 3.0), "request_on_its_way": step(11.0, 15.5),
            "serving_nodes": step(10.0, 56.0), "grant_on_its_way": step(20.5, 39.8),
            "install_and_wake": step(9.1, 10.9), "total": step(66.3, 126.1)},
        "by_node": {}}})
}

#[test]
fn fault_steps_come_from_the_end_of_the_trace() {
    let want = FaultSteps {
        remote: 4,
        matched: 3,
        steps: [
            (2.0, 3.0),
            (11.0, 15.5),
            (10.0, 56.0),
            (20.5, 39.8),
            (9.1, 10.9),
            (66.3, 126.1),
        ],
    };
    assert_eq!(fault_steps_of(&other_data_with_steps()), Some(want));
    // No remote fault with a round trip of its own (p = 1): no steps.
    let none = serde_json::json!({"remote_fault_steps_us":
        {"remote_faults": 0, "matched": 0, "steps": {}, "by_node": {}}});
    assert_eq!(fault_steps_of(&none), None);
    // A trace file as the merge writes it: the events, then otherData (an event that mentions
    // otherData in its arguments does not confuse the reader).
    let dir = std::env::temp_dir().join(format!("svm-bench-steps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let f = dir.join("t.json");
    std::fs::write(
        &f,
        format!(
            "{{\"traceEvents\":[\n{{\"name\":\"x\",\"args\":{{\"otherData\":1}}}}\n],\
             \"displayTimeUnit\":\"ns\",\"otherData\":{}}}\n",
            other_data_with_steps()
        ),
    )
    .expect("write trace");
    assert_eq!(trace_fault_steps(&f), Some(want));
    // A trace larger than the first window read from its end, with multi-byte characters
    // where a window may start, and an otherData longer than that window.
    let events = "{\"name\":\"recv grant\",\"args\":{\"what\":\"é\"}},\n".repeat(20_000);
    let mut other = other_data_with_steps();
    other["padding"] = serde_json::json!("x".repeat(100 << 10));
    std::fs::write(
        &f,
        format!(
            "{{\"traceEvents\":[\n{events}{{}}\n],\"displayTimeUnit\":\"ns\",\"otherData\":{other}}}\n"
        ),
    )
    .expect("write trace");
    assert_eq!(trace_fault_steps(&f), Some(want));
    std::fs::write(&f, "{\"traceEvents\":[\n").expect("write trace");
    assert_eq!(trace_fault_steps(&f), None, "a cut-off trace");
    assert_eq!(trace_fault_steps(&dir.join("missing.json")), None);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_report_tabulates_the_fault_steps_per_node_count() {
    let row = |prog: &'static str, p: usize, steps: Option<FaultSteps>| Row {
        prog,
        p,
        pthread: None,
        svm: None,
        verified: true,
        stats: None,
        profile: String::new(),
        steps,
    };
    let s = fault_steps_of(&other_data_with_steps());
    let md = fault_steps_section(
        &[row("fft", 1, None), row("fft", 2, s), row("radix", 2, None)],
        &[1, 2],
    );
    assert!(!md.contains("### p = 1"), "{md}");
    assert!(md.contains("### p = 2"), "{md}");
    let fft = md
        .lines()
        .find(|l| l.starts_with("| fft"))
        .expect("fft row");
    assert!(
        fft.contains("3 / 4") && fft.contains("20.5 / 39.8") && fft.contains("66.3 / 126"),
        "{fft}"
    );
    let radix = md
        .lines()
        .find(|l| l.starts_with("| radix"))
        .expect("radix row");
    assert_eq!(radix.matches('–').count(), 7, "{radix}");
}

fn timed_run(time_us: f64, sig: &str) -> RunOut {
    RunOut {
        ok: true,
        time_us: Some(time_us),
        sig: vec![sig.to_string()],
        ..RunOut::default()
    }
}

#[test]
fn repeated_runs_report_the_median_run_with_its_own_outputs() {
    let r = median_run(vec![
        timed_run(900.0, "slow"),
        timed_run(100.0, "fast"),
        timed_run(300.0, "middle"),
    ]);
    assert_eq!(r.time_us, Some(300.0));
    assert_eq!(r.sig, vec!["middle".to_string()]);
    // An even count: the lower of the two middle runs.
    let r = median_run(vec![
        timed_run(400.0, "d"),
        timed_run(200.0, "b"),
        timed_run(100.0, "a"),
        timed_run(300.0, "c"),
    ]);
    assert_eq!(r.sig, vec!["b".to_string()]);
    assert_eq!(median_run(vec![timed_run(5.0, "one")]).time_us, Some(5.0));
}

#[test]
fn a_failed_repetition_fails_the_row_even_if_the_others_passed() {
    let failed = RunOut {
        err: Some("exit 1: checksum wrong".into()),
        ..RunOut::default()
    };
    let r = median_run(vec![timed_run(1.0, "a"), failed, timed_run(2.0, "b")]);
    assert!(!r.ok);
    assert_eq!(r.err.as_deref(), Some("exit 1: checksum wrong"));
    assert!(median_run(Vec::new()).err.is_some(), "no runs is no result");
}

fn row(prog: &'static str, p: usize, pthread: f64, svm: Option<f64>, verified: bool) -> Row {
    Row {
        prog,
        p,
        pthread: Some(pthread),
        svm,
        verified,
        stats: None,
        profile: String::new(),
        steps: None,
    }
}

#[test]
fn means_cover_the_verified_programs_with_both_times_at_one_p() {
    let rows = [
        row("fft", 2, 10.0, Some(40.0), true),
        row("radix", 2, 1000.0, Some(16000.0), true),
        row("lu", 2, 5.0, Some(5000.0), false),
        row("ocean", 2, 7.0, None, false),
        row("fft", 1, 10.0, Some(12.0), true),
    ];
    let m = means_at(&rows, 2);
    let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-9 * b);
    assert!(close(m.ratio, 8.0), "{m:?}"); // √(4 × 16)
    assert!(close(m.svm_us, 800.0), "{m:?}"); // √(40 × 16000)
    assert!(close(m.pthread_us, 100.0), "{m:?}"); // √(10 × 1000)
    assert!(close(means_at(&rows, 1).ratio, 1.2));
    assert_eq!(
        means_at(&rows, 4),
        Means {
            ratio: None,
            svm_us: None,
            pthread_us: None
        }
    );
}
