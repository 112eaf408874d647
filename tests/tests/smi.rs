//! The SMI personality (`docs/smi.md`): the C programs of `tests/smi/` are built with the
//! documented command,
//!
//! ```text
//! cc -Wall -Werror=incompatible-pointer-types $(svm-config --cflags) prog.c $(svm-config --libs smi) -o prog -lm
//! ```
//!
//! into a fresh temporary directory and run under `svmrun` at 1, 2, 3 and 4 nodes with both
//! fault backends. Every program checks itself and prints `PASS <name>` on process 0.
//!
//! Needs a C compiler (`cc`). The programs need the runtime `target/<profile>/libsvm_smi.so`
//! (crate `svm-api-smi`) and `svm-config` (crate `svm-run`): `cargo test --workspace` builds
//! both.

use std::time::Duration;

use svm_tests::{
    free_port, serial, tool_runs, workspace_root, CProgram, CSuite, Job, Output, Scratch,
};

const NODES: [usize; 4] = [1, 2, 3, 4];
const FAULTS: [&str; 2] = ["uffd", "segv"];
const SMI: CSuite = CSuite {
    name: "smi",
    tools: &["cc"],
    // Per run; the programs take well under a second natively.
    deadline: Duration::from_secs(120),
};

/// Builds `tests/smi/<name>.c` with the documented command.
fn build(name: &str, scratch: &Scratch) -> CProgram {
    let src = workspace_root().join("tests/smi").join(format!("{name}.c"));
    SMI.build(
        scratch,
        name,
        &[],
        &format!(
            "cc -Wall -Werror -Werror=incompatible-pointer-types $(svm-config --cflags) {} \
             $(svm-config --libs smi) -o {name} -lm",
            src.display()
        ),
    )
}

/// Builds `name` and runs it at 1..4 nodes with both fault backends.
fn run_everywhere(name: &str, args: &[&str]) {
    let scratch = SMI.scratch(name);
    build(name, &scratch).run_matrix(
        &NODES,
        &FAULTS,
        |_| args.iter().map(|a| a.to_string()).collect(),
        &[],
        |_, out| {
            out.assert_passed(name);
            assert!(!out.stderr.contains("FAIL"), "{out}");
        },
    );
}

/// Hello world with queries; SMI_Init strips the classic launcher arguments up to `--`.
#[test]
fn hello_with_queries() {
    run_everywhere(
        "hello",
        &[
            "-r",
            "0",
            "-n",
            "1",
            "-h",
            "localhost",
            "-m",
            "42",
            "--",
            "user1",
            "user2",
        ],
    );
}

/// A program that used a lock and returns from main without SMI_Finalize ends the job in its
/// exit handlers, after its thread-locals were destroyed: every process ends with status 0.
#[test]
fn ending_in_the_exit_handlers_after_lock_use() {
    let scratch = SMI.scratch("exit_after_locks");
    build("exit_after_locks", &scratch).run_matrix(
        &NODES,
        &FAULTS,
        |_| Vec::new(),
        &[],
        |_, out| {
            out.assert_passed("exit_after_locks");
            // A panic in an exit handler is caught there and does not change the status:
            // only its message shows it.
            assert!(!out.stderr.contains("panicked"), "{out}");
        },
    );
}

#[test]
fn concurrent_linked_list() {
    run_everywhere("list", &[]);
}

#[test]
fn locks_flushes_barriers_progress_counters_all_to_all() {
    run_everywhere("sync", &[]);
}

#[test]
fn merge_sort_over_per_process_regions() {
    run_everywhere("sort", &[]);
}

#[test]
fn poisson_over_a_blocked_region_with_loop_scheduling() {
    run_everywhere("poisson", &[]);
}

#[test]
fn replication_and_reductions() {
    run_everywhere("replicate", &[]);
}

#[test]
fn region_types() {
    run_everywhere("regions", &[]);
}

#[test]
fn messages_signals_timers() {
    run_everywhere("msg", &[]);
}

/// A buffer handed back and forth by signals and messages, written with plain stores and
/// copies on both sides (the shape of MP-MPICH's `put`): a signal or message is a release, so
/// the receiver reads what the sender stored, under `sc-mw` too.
#[test]
fn a_buffer_handed_over_by_signals_and_messages() {
    let name = "handoff";
    let scratch = SMI.scratch(name);
    let prog = build(name, &scratch);
    for protocol in ["sc-sw", "sc-mw"] {
        prog.run_matrix(
            &[1, 2, 3],
            &FAULTS,
            |_| Vec::new(),
            &[("SVM_PROTOCOL", protocol)],
            |n, out| {
                out.assert_passed(name);
                assert!(!out.stderr.contains("FAIL"), "{protocol}, {n} nodes: {out}");
            },
        );
    }
}

/// FRAGMENTED address arrays, UNDIVIDED size 0 on non-owners, recursive mutex locks,
/// `rank | SMI_SIGNAL_ANY`, loop restarts after SMI_LOOP_READY, polling a flag without SMI
/// calls, SMI_SHM_REGISTER, 1024 LOCAL regions (issue 10).
#[test]
fn behaviours_smi_programs_rely_on() {
    run_everywhere("behaviours", &[]);
}

/// SMI used after SMI_Finalize: the calls fail with SMI_ERR_NOINIT and the job ends with the
/// status the program chose (SMI_Abort(3)), never with a node killed by SIGPIPE.
#[test]
fn use_after_finalize_ends_the_job_with_the_programs_status() {
    let scratch = SMI.scratch("after_finalize");
    build("after_finalize", &scratch).run_matrix(
        &[1, 3],
        &FAULTS,
        |_| Vec::new(),
        &[],
        |n, out| {
            assert_eq!(out.status.code(), Some(3), "{out}");
            assert!(!out.stderr.contains("SIGPIPE"), "{out}");
            assert!(!out.stderr.contains("FAIL"), "{out}");
            for r in 0..n {
                out.assert_stdout_contains(&format!("after finalize {r}"));
            }
        },
    );
}

/// The classic start without svmrun: `prog -r R -n N -h HOST -m MAGIC -p PORT -- args` on each
/// process, mapped onto svm's bootstrap.
#[test]
fn classic_launcher_arguments() {
    let scratch = SMI.scratch("classic");
    let hello = build("hello", &scratch);
    let port = free_port().to_string();
    let _serial = serial();
    let jobs: Vec<Job> = (0..2)
        .map(|r| {
            let r = r.to_string();
            let args = [
                "-r",
                &r,
                "-n",
                "2",
                "-h",
                "127.0.0.1",
                "-m",
                "4711",
                "-p",
                &port,
                "--",
                "user1",
                "user2",
            ];
            Job::start_program(&hello.exe, &args, &[])
        })
        .collect();
    let outs: Vec<Output> = jobs
        .into_iter()
        .map(|j| j.wait(SMI.deadline).unwrap_or_else(|t| panic!("{t}")))
        .collect();
    for o in &outs {
        o.assert_success();
    }
    outs[0].assert_stdout_contains("PASS hello");
    outs[1].assert_stdout_contains("hello from process 1 of 2");
}

/// The header compiles as C++ too (extern "C", no C-only constructs), if a C++ compiler exists.
#[test]
fn header_compiles_as_cxx() {
    if !tool_runs("c++") {
        eprintln!("no c++ compiler: skipping the C++ header check");
        return;
    }
    let scratch = SMI.scratch("cxx");
    std::fs::write(
        scratch.path().join("t.cc"),
        "#include <smi.h>\nint main(){ smi_region_info_t i; char *p; int id;\n\
         SMI_Init_reginfo(&i, 4096, 0); SMI_Init_reginfo(&i, 4096, 0, 0, 0, 0, 0, 0);\n\
         return SMI_Create_shreg(SMI_SHM_UNDIVIDED, &i, &id, &p) + SMI_Barrier(); }\n",
    )
    .expect("write t.cc");
    scratch.shell("c++ -Wall -Werror -fsyntax-only $(svm-config --cflags) t.cc");
}
