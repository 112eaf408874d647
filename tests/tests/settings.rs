//! Every bad setting is a clear error at start: non-zero exit, a message naming the variable
//! (or the option), and no panic.

use std::time::Duration;

use svm_tests::{example_path, run_svmrun_env, serial, Output};

const DEADLINE: Duration = Duration::from_secs(60);

fn check(out: &Output, names: &str) {
    eprintln!("{out}");
    assert!(!out.success(), "a bad setting must fail the job\n{out}");
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains(names),
        "the message does not name {names}\n{out}"
    );
    assert!(
        !all.contains("panicked"),
        "a panic instead of an error\n{out}"
    );
    assert!(!out.lingering, "a node outlived svmrun\n{out}");
}

fn bad_setting(var: &str, value: &str) {
    let _serial = serial();
    let counter = example_path("counter");
    let out = run_svmrun_env(
        &["-n", "2", counter.to_str().unwrap(), "10"],
        &[(var, value)],
        DEADLINE,
    );
    check(&out, var);
}

#[test]
fn window_base_zero() {
    bad_setting("SVM_SPACE_BASE", "0");
}

#[test]
fn window_base_unaligned() {
    bad_setting("SVM_SPACE_BASE", "0x600000000123");
}

#[test]
fn window_base_outside_user_space() {
    bad_setting("SVM_SPACE_BASE", "0xffff900000000000");
}

#[test]
fn window_larger_than_the_address_space() {
    bad_setting("SVM_SPACE_SIZE", "100T");
}

#[test]
fn page_size_not_a_power_of_two_multiple() {
    bad_setting("SVM_PAGE_SIZE", "12288");
}

#[test]
fn page_size_too_large_for_a_message() {
    bad_setting("SVM_PAGE_SIZE", "1G");
}

#[test]
fn unknown_svmrun_option_before_the_program() {
    let _serial = serial();
    let counter = example_path("counter");
    let out = run_svmrun_env(
        &["--bogus", "-n", "2", counter.to_str().unwrap(), "10"],
        &[],
        DEADLINE,
    );
    check(&out, "--bogus");
    assert_eq!(out.status.code(), Some(2), "{out}");
    assert!(!out.stdout.contains("counter="), "the program ran\n{out}");
}
