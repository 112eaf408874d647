//! Runs the real `svm-config` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn svm_config(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_svm-config"))
        .args(args)
        .output()
        .expect("cannot run svm-config")
}

fn stdout_of(args: &[&str]) -> String {
    let out = svm_config(args);
    assert!(
        out.status.success(),
        "svm-config {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    assert!(
        text.ends_with('\n') && text.lines().count() == 1,
        "{text:?}"
    );
    text.trim_end().to_string()
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Where cargo put the binary (and the personalities' shared libraries).
fn bin_dir() -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_svm-config"));
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    exe.parent().expect("bin dir").to_path_buf()
}

#[test]
fn cflags_point_at_the_headers() {
    let flags = stdout_of(&["--cflags"]);
    let splash = workspace_root().join("svm-api-splash/include");
    assert!(
        flags
            .split(' ')
            .any(|f| f == format!("-I{}", splash.display())),
        "{flags}"
    );
    for f in flags.split(' ') {
        let dir = f.strip_prefix("-I").expect("only -I flags");
        assert!(
            Path::new(dir).is_absolute() && Path::new(dir).is_dir(),
            "{f}"
        );
    }
}

#[test]
fn splash_libs() {
    let flags = stdout_of(&["--libs", "splash"]);
    let words: Vec<&str> = flags.split(' ').collect();
    let lib = bin_dir();
    let stub = workspace_root().join("svm-api-splash/stub/svm_splash_stub.c");
    assert_eq!(
        words,
        [
            stub.display().to_string(),
            format!("-L{}", lib.display()),
            format!("-Wl,-rpath,{}", lib.display()),
            "-lsvm_splash".to_string(),
            "-Wl,--wrap=main".to_string(),
            "-Wl,-z,now".to_string(),
            "-pthread".to_string(),
        ]
    );
    assert!(stub.is_file());
}

#[test]
fn deck_libs() {
    let flags = stdout_of(&["--libs", "deck"]);
    let lib = bin_dir();
    assert_eq!(
        flags,
        format!("-L{0} -Wl,-rpath,{0} -lsvm_deck -pthread", lib.display())
    );
}

#[test]
fn m4_path() {
    let path = stdout_of(&["--m4", "splash"]);
    assert_eq!(
        Path::new(&path),
        workspace_root().join("svm-api-splash/macros/c.m4.svm")
    );
    assert!(Path::new(&path).is_file());
}

#[test]
fn help() {
    let text = stdout_of_multiline(&["--help"]);
    assert!(text.contains("--libs NAME"), "{text}");
    assert!(text.contains("--m4"), "{text}");
}

fn stdout_of_multiline(args: &[&str]) -> String {
    let out = svm_config(args);
    assert!(out.status.success());
    String::from_utf8(out.stdout).expect("utf-8 output")
}

#[test]
fn unknown_personality_exits_2_with_a_message() {
    for args in [
        &["--libs", "pvm"][..],
        &["--m4", "nope"][..],
        &["--m4", "smi"][..],
        &["--libs"][..],
        &["--bogus"][..],
        &[][..],
    ] {
        let out = svm_config(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("svm-config: "), "{args:?}: {err}");
    }
    let err = String::from_utf8_lossy(&svm_config(&["--libs", "pvm"]).stderr).into_owned();
    assert!(err.contains("unknown personality `pvm`"), "{err}");
}
