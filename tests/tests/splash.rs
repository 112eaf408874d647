//! The SPLASH-2 macro personality (`docs/splash.md`): the C programs of `tests/splash/` are built
//! with exactly the documented commands,
//!
//! ```text
//! m4 -Ulen -Uindex $(svm-config --m4 splash) x.C > x.c
//! cc -O2 $(svm-config --cflags) x.c $(svm-config --libs splash) -o x -lm
//! ```
//!
//! (plus `-Wall -Werror`), into a fresh temporary directory, and run under `svmrun` at 1, 2 and 4
//! nodes with both fault backends. Every program checks itself and prints `PASS <name>`.
//!
//! Needs `m4` and a C compiler (`cc`); `.ci/run` installs them. The programs need the runtime,
//! `target/<profile>/libsvm_splash.so` (crate `svm-api-splash`), and `svm-config` (crate
//! `svm-run`): `cargo test --workspace` builds both.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use svm_tests::{words, workspace_root, CProgram, CSuite, Scratch};

const NODES: [usize; 3] = [1, 2, 4];
const FAULTS: [&str; 2] = ["uffd", "segv"];
const SPLASH: CSuite = CSuite {
    name: "splash",
    tools: &["m4", "cc"],
    // Per run. The programs take well under a second natively; DSM runs at 4 nodes on a
    // 2-core machine are much slower, and debug builds slower still.
    deadline: Duration::from_secs(180),
};

fn sources() -> PathBuf {
    workspace_root().join("tests/splash")
}

fn macro_file() -> PathBuf {
    workspace_root().join("svm-api-splash/macros/c.m4.svm")
}

fn include_dir() -> PathBuf {
    workspace_root().join("svm-api-splash/include")
}

/// Builds `tests/splash/<name>.C` with the documented commands into `scratch`.
fn build(name: &str, scratch: &Scratch) -> CProgram {
    SPLASH.build(
        scratch,
        name,
        &[sources().join(format!("{name}.C"))],
        &format!(
            "m4 -Ulen -Uindex $(svm-config --m4 splash) {name}.C > {name}.c && \
             cc -O2 -Wall -Werror $(svm-config --cflags) {name}.c \
             $(svm-config --libs splash) -o {name} -lm"
        ),
    )
}

/// Builds `name` and runs it at 1, 2 and 4 nodes with both fault backends, with the arguments
/// `args(nodes)`; every run must exit 0 and print `PASS <name>`.
fn run_everywhere(name: &str, args: impl Fn(usize) -> Vec<String>) {
    let scratch = SPLASH.scratch(name);
    build(name, &scratch).run_matrix(&NODES, &FAULTS, args, &[], |_, out| {
        out.assert_passed(name);
    });
}

// ---------------------------------------------------------------- without the runtime

/// m4 output of `text` with the macro file.
fn expand(text: &str) -> String {
    SPLASH.require_tool("m4");
    let scratch = SPLASH.scratch("expand");
    let file = scratch.path().join("snippet.C");
    std::fs::write(&file, text).expect("write snippet");
    let out = Command::new("m4")
        .args(["-Ulen", "-Uindex"])
        .arg(macro_file())
        .arg(&file)
        .output()
        .expect("run m4");
    assert!(
        out.status.success(),
        "m4 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Collapses runs of whitespace, for comparing expansions.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn macros_expand_to_the_runtime_calls() {
    let cases: &[(&str, &str)] = &[
        ("LOCKDEC(l)", "long l;"),
        ("LOCKINIT(G->l)", "{ (void)&(G->l); }"),
        ("LOCK(G->l)", "{ svm_splash_lock_at(&(G->l)); }"),
        ("UNLOCK(G->l)", "{ svm_splash_unlock_at(&(G->l)); }"),
        ("ALOCKDEC(a, 8)", "long a[8];"),
        ("ALOCKINIT(G->a, n)", "{ (void)&(G->a); (void)(long)(n); }"),
        ("ALOCK(G->a, i)", "{ svm_splash_lock_at(&((G->a)[i])); }"),
        (
            "AULOCK(G->a, i+1)",
            "{ svm_splash_unlock_at(&((G->a)[i+1])); }",
        ),
        ("AGETL(G->a, 2)", "((G->a)[2])"),
        ("BARDEC(b)", "long b;"),
        ("BARINIT(G->b)", "{ (void)&(G->b); }"),
        ("BARINIT(G->b, P)", "{ (void)&(G->b); }"),
        (
            "BARRIER(G->b, P)",
            "{ svm_splash_barrier_at(&(G->b), (long)(P)); }",
        ),
        ("PAUSEDEC(f)", "long f;"),
        ("PAUSEINIT(G->f)", "{ (G->f) = svm_splash_pause_new(); }"),
        ("SETPAUSE(G->f)", "{ svm_splash_pause_set(G->f); }"),
        ("WAITPAUSE(G->f)", "{ svm_splash_pause_wait(G->f); }"),
        ("CLEARPAUSE(G->f)", "{ svm_splash_pause_clear(G->f); }"),
        (
            "CREATE(Slave)",
            "{ svm_splash_dispatched_++; svm_splash_create((void (*)(void))(Slave)); }",
        ),
        (
            "CREATE(Slave, P)",
            "{ if ((long)(P) > 1) svm_splash_dispatched_ += (long)(P) - 1; \
             svm_splash_create_n((void (*)(void))(Slave), (long)(P)); }",
        ),
        (
            "WAIT_FOR_END(P-1)",
            "{ (void)(long)(P-1); svm_splash_wait_for_end(svm_splash_dispatched_); \
             svm_splash_dispatched_ = 0; }",
        ),
        // G_MALLOC and NU_MALLOC end with `;` as in every macro file of the suite; the _F
        // forms are expressions.
        (
            "G_MALLOC(n*sizeof(double))",
            "(svm_splash_malloc((size_t)(n*sizeof(double))));",
        ),
        ("G_MALLOC(n, node)", "(svm_splash_malloc((size_t)(n)));"),
        ("NU_MALLOC(n)", "(svm_splash_malloc((size_t)(n)));"),
        ("G_MALLOC_F(n)", "(svm_splash_malloc((size_t)(n)))"),
        ("NU_MALLOC_F(n)", "(svm_splash_malloc((size_t)(n)))"),
        (
            "x = (double *) G_MALLOC(n)\ny = 1;",
            "x = (double *) (svm_splash_malloc((size_t)(n))); y = 1;",
        ),
        ("DYN_TRACE_ON", ";"),
        ("DYN_SCHED_OFF", ";"),
        ("AUG_SET_LOLIMIT(G, 0)", ";"),
        ("AUG_SET_HILIMIT(G, 0)", ";"),
        ("CLOCK(t)", "{ (t) = svm_splash_clock(); }"),
        ("MAIN_INITENV", "{ svm_splash_initenv(); }"),
        ("MAIN_INITENV(,80000000)", "{ svm_splash_initenv(); }"),
        ("MAIN_INITENV(a, 80000000, b)", "{ svm_splash_initenv(); }"),
        ("MAIN_END", "{ svm_splash_main_end(); exit(0); }"),
        ("GET_PID(p)", "{ (p) = svm_splash_node(); }"),
        ("CONDVARDEC(c)", "long c;"),
        (
            "CONDVARINIT(G->c)",
            "{ (G->c) = svm_splash_condvar_new(); }",
        ),
        (
            "CONDVARWAIT(G->c, G->l)",
            "{ svm_splash_condvar_wait((G->c), &(G->l)); }",
        ),
        (
            "CONDVARSIGNAL(G->c)",
            "{ svm_splash_condvar_signal(G->c); }",
        ),
        (
            "CONDVARBCAST(G->c)",
            "{ svm_splash_condvar_broadcast(G->c); }",
        ),
        ("FULL_FENCE", "{ svm_splash_fence(); }"),
        ("G_FREE(p)", "{ svm_splash_free((void *)(p)); }"),
    ];
    for (input, expected) in cases {
        let got = squash(&expand(&format!("{input}\n")));
        assert_eq!(got, *expected, "expansion of {input}");
    }
    let env = expand("MAIN_ENV\n");
    // The headers of the suite's pthread macro files too (programs may rely on them).
    for header in [
        "<stdio.h>",
        "<stdlib.h>",
        "<assert.h>",
        "<stdint.h>",
        "<pthread.h>",
        "<splash_svm.h>",
    ] {
        assert!(
            env.lines().any(|l| l == format!("#include {header}")),
            "MAIN_ENV lacks {header}:\n{env}"
        );
    }
    assert!(
        env.contains("__thread long svm_splash_dispatched_;"),
        "MAIN_ENV lacks the dispatch counter:\n{env}"
    );
    let ext = expand("EXTERN_ENV\n");
    assert!(
        ext.contains("extern __thread long svm_splash_dispatched_;"),
        "EXTERN_ENV lacks the dispatch counter:\n{ext}"
    );
    // Identifiers the suite uses as C names are left alone (-Ulen -Uindex).
    assert_eq!(
        squash(&expand("len(s) index(s, c)\n")),
        "len(s) index(s, c)"
    );
}

/// Every program (and the stub) compiles as C99 without a warning under -Wall -Wextra, no
/// runtime needed.
#[test]
fn programs_are_warning_free_c99() {
    SPLASH.require_tool("m4");
    SPLASH.require_tool("cc");
    let scratch = SPLASH.scratch("c99");
    let mut names: Vec<String> = std::fs::read_dir(sources())
        .expect("tests/splash")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "C"))
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_string))
        .collect();
    names.sort();
    assert!(names.len() >= 15, "{names:?}");
    let m4 = macro_file();
    let inc = include_dir();
    let strict = "cc -std=c99 -D_XOPEN_SOURCE=600 -Wall -Wextra -Werror";
    for name in &names {
        let src = sources().join(format!("{name}.C"));
        scratch.shell(&format!(
            "m4 -Ulen -Uindex '{}' '{}' > {name}.c && {strict} -I'{}' -c {name}.c",
            m4.display(),
            src.display(),
            inc.display()
        ));
    }
    // The whole macro set, even pedantically.
    scratch.shell(&format!(
        "{strict} -pedantic -I'{}' -c macros.c -o pedantic.o",
        inc.display()
    ));
    // The stub is self-contained and agrees with the header.
    let stub = workspace_root().join("svm-api-splash/stub/svm_splash_stub.c");
    scratch.shell(&format!(
        "{strict} -pedantic -c '{0}' -o stub1.o && \
             {strict} -include '{1}/splash_svm.h' -c '{0}' -o stub2.o",
        stub.display(),
        inc.display()
    ));
}

// ---------------------------------------------------------------- the applications

#[test]
fn fft_six_step_with_inverse_check() {
    run_everywhere("fft", |n| words(&format!("-p{n} -m 14 -t")));
}

#[test]
fn lu_blocked_with_residual_check() {
    run_everywhere("lu", |n| words(&format!("-p{n} -n 96 -b 16 -t")));
}

#[test]
fn radix_sort_with_pause_flag_phases() {
    run_everywhere("radix", |n| words(&format!("-p{n} -n 16384 -t")));
}

#[test]
fn sor_red_black_with_a_barrier_per_phase() {
    run_everywhere("sor", |n| words(&format!("-p{n} -n 30")));
}

// ---------------------------------------------------------------- the facts of the spec

#[test]
fn globals_set_before_create_are_shared() {
    run_everywhere("globals", |n| words(&format!("-p {n}")));
}

#[test]
fn globals_communicate_after_create() {
    run_everywhere("tree", |n| words(&format!("-p {n} -d 8 -f 10")));
}

#[test]
fn plain_flag_spins_terminate() {
    run_everywhere("spin", |n| words(&format!("-p {n} -r 20")));
}

#[test]
fn both_create_forms_and_repeated_rounds() {
    run_everywhere("create", |n| words(&format!("-p {n}")));
}

#[test]
fn more_creates_than_nodes() {
    // 4 CREATEs on 1 and 2 nodes (the spec's case: 2 nodes, 4 CREATEs), 8 on 4 nodes.
    run_everywhere("overcommit", |n| words(&format!("-p {}", 4.max(2 * n))));
}

#[test]
fn clock_and_g_malloc_before_main_initenv() {
    run_everywhere("early", |n| words(&format!("-p {n}")));
}

#[test]
fn sync_objects_in_g_malloced_structs() {
    run_everywhere("syncobj", |n| words(&format!("-p {n}")));
}

#[test]
fn workers_call_g_malloc() {
    run_everywhere("wmalloc", |n| words(&format!("-p {n}")));
}

#[test]
fn condition_variables() {
    run_everywhere("condvar", |n| words(&format!("-p{n} -n 100")));
}

#[test]
fn statement_and_expression_forms_of_the_suite() {
    // G_MALLOC without a semicolon of its own (lu, cholesky), statement macros as if/else
    // branches and back to back, the _F forms as expressions, the DYN_* hooks as statements.
    run_everywhere("forms", |n| words(&format!("-p {n} -n 4096")));
}

#[test]
fn every_other_macro() {
    run_everywhere("macros", |n| words(&format!("-p {n}")));
}

#[test]
fn a_huge_bss_is_shared_lazily() {
    let scratch = SPLASH.scratch("bigbss");
    let args = |n: usize| words(&format!("-p {n}"));
    let envs = [("SVM_STATS", "json")];
    build("bigbss", &scratch).run_matrix(&NODES, &FAULTS, args, &envs, |nodes, out| {
        out.assert_success().assert_stdout_contains("PASS bigbss");
        let fetched = out.stat_per_node(nodes, "pages_fetched");
        // 512 MiB are 131072 pages: a lazy data segment fetches a handful.
        assert!(
            fetched.iter().all(|&p| p <= 64),
            "too many pages fetched {fetched:?}\n{out}"
        );
    });
}

/// Locks and barriers are named by their address: taking them reads nothing of their page, so
/// a page that holds the objects and a word process 0 writes in every round makes no remote
/// faults on the other nodes (reading the objects would make at least one per round and node).
#[test]
fn locks_and_barriers_do_not_read_their_page() {
    const ROUNDS: u64 = 600;
    let scratch = SPLASH.scratch("lockaddr");
    let args = |n: usize| words(&format!("-p {n} -r {ROUNDS}"));
    let envs = [("SVM_STATS", "json")];
    build("lockaddr", &scratch).run_matrix(&NODES, &FAULTS, args, &envs, |nodes, out| {
        out.assert_success().assert_stdout_contains("PASS lockaddr");
        let remote = out.stat_per_node(nodes, "remote_faults");
        // The rest of the run (the data segment, the counter of part 2) takes a few dozen.
        let total: u64 = remote.iter().sum();
        assert!(
            total < ROUNDS / 4,
            "{total} remote faults in {ROUNDS} rounds ({remote:?}): LOCK or BARRIER read their page\n{out}"
        );
    });
}

/// Under a home-based protocol G_MALLOC homes each page where it is first touched: blocks the
/// master allocates and each worker initialises and then rewrites alone cost no diffs (homed on
/// the master, every worker would send its whole block at every barrier: 20 rounds of 32 KiB).
#[test]
fn g_malloc_pages_are_homed_by_first_touch_under_home_based_protocols() {
    let scratch = SPLASH.scratch("placement");
    let program = build("placement", &scratch);
    let args = |n: usize| words(&format!("-p {n} -r 20"));
    for protocol in ["sc-mw", "scope"] {
        let envs = [("SVM_STATS", "json"), ("SVM_PROTOCOL", protocol)];
        program.run_matrix(&[2, 4], &FAULTS, args, &envs, |nodes, out| {
            out.assert_success().assert_stdout_contains("PASS placement");
            let diffs = out.stat_per_node(nodes, "diff_bytes_sent");
            // The lock-protected counters take a few hundred bytes.
            assert!(
                diffs.iter().all(|&d| d < 4096),
                "{protocol}: diff bytes per node {diffs:?}: blocks are not homed at their writers\n{out}"
            );
        });
    }
    // SVM_FIRST_TOUCH=0 and SVM_HOME_MIGRATION=0: homed on the master, the other process's
    // block comes back as diffs at every barrier.
    let envs = [
        ("SVM_STATS", "json"),
        ("SVM_PROTOCOL", "sc-mw"),
        ("SVM_FIRST_TOUCH", "0"),
        ("SVM_HOME_MIGRATION", "0"),
    ];
    program.run_matrix(&[2], &["uffd"], args, &envs, |nodes, out| {
        out.assert_success()
            .assert_stdout_contains("PASS placement");
        let diffs: u64 = out.stat_per_node(nodes, "diff_bytes_sent").iter().sum();
        assert!(
            diffs > 20 * 4096,
            "{diffs} diff bytes with SVM_FIRST_TOUCH=0: blocks homed by first touch anyway\n{out}"
        );
        let moved: u64 = out.stat_per_node(nodes, "homes_moved").iter().sum();
        assert_eq!(moved, 0, "SVM_HOME_MIGRATION=0 moved homes\n{out}");
    });
}

/// sc-mw's home migration (`SVM_HOME_MIGRATION=1`, jobs of two nodes): with `placement`'s
/// blocks all homed on the master (`SVM_FIRST_TOUCH=0`), the worker's block moves to the
/// worker, its only writer, at the first barriers (the master's own first touch of the block
/// counts as its write in the first round), so it sends diffs of it in the first rounds only
/// (20 rounds of 32 KiB without migration), and the job still checks every block.
#[test]
fn pages_only_the_other_node_writes_move_home_to_it_under_sc_mw() {
    let scratch = SPLASH.scratch("migration");
    let program = build("placement", &scratch);
    let args = |n: usize| words(&format!("-p {n} -r 20"));
    let envs = [
        ("SVM_STATS", "json"),
        ("SVM_PROTOCOL", "sc-mw"),
        ("SVM_FIRST_TOUCH", "0"),
        ("SVM_HOME_MIGRATION", "1"),
    ];
    program.run_matrix(&[2], &FAULTS, args, &envs, |nodes, out| {
        out.assert_success()
            .assert_stdout_contains("PASS placement");
        // In the order the nodes printed them: only the master has pages to hand on.
        let moved: u64 = out.stat_per_node(nodes, "homes_moved").iter().sum();
        assert!(
            moved >= 8,
            "{moved} pages handed on: the worker's 8 stayed on the master\n{out}"
        );
        let diffs: u64 = out.stat_per_node(nodes, "diff_bytes_sent").iter().sum();
        assert!(
            diffs < 6 * 8 * 4096,
            "{diffs} diff bytes: the worker's block went back as diffs in most rounds\n{out}"
        );
    });
}

#[test]
fn exit_in_a_worker_ends_the_job_with_its_status() {
    let scratch = SPLASH.scratch("exit3");
    let args = |n: usize| words(&format!("-p {n}"));
    build("exit3", &scratch).run_matrix(&NODES, &FAULTS, args, &[], |_, out| {
        assert_eq!(out.status.code(), Some(3), "expected exit status 3\n{out}");
        out.assert_stdout_contains("exit3: worker exits with status 3");
        assert!(!out.stdout.contains("FAIL"), "{out}");
        assert!(!out.lingering, "a node outlived svmrun\n{out}");
    });
}
