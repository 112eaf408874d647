//! Compiles `tests/c/deck_test.c` against `include/deck.h` with the system C compiler, links it
//! to `libsvm_deck.so` and runs it under `svmrun -n 2` over both transports.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn build_c_program() -> PathBuf {
    let dir = svm_tests::profile_dir();
    let lib = dir.join("libsvm_deck.so");
    assert!(
        lib.is_file(),
        "{} not built (cargo test --workspace builds it)",
        lib.display()
    );
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::temp_dir().join(format!("svm_deck_c_test_{}", std::process::id()));
    let st = Command::new("cc")
        .args([
            "-std=c99",
            "-D_POSIX_C_SOURCE=200809L",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-O1",
            "-o",
        ])
        .arg(&out)
        .arg(src.join("tests/c/deck_test.c"))
        .arg("-I")
        .arg(src.join("include"))
        .arg("-L")
        .arg(&dir)
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .args(["-lsvm_deck", "-lpthread"])
        .status()
        .expect("run cc");
    assert!(st.success(), "the C test program does not compile");
    out
}

#[test]
fn c_program_under_svmrun_over_both_transports() {
    let prog = build_c_program();
    let p = prog.to_str().expect("utf-8 path");
    let _serial = svm_tests::serial();
    for transport in ["deck", "tcp"] {
        let out = svm_tests::run_svmrun(
            &["-n", "2", "--transport", transport, p],
            Duration::from_secs(60),
        );
        out.assert_success();
        for node in 0..2 {
            out.assert_stdout_contains(&format!("DECK C OK node {node} of 2"));
        }
    }
    let _ = std::fs::remove_file(&prog);
}
