//! Every coherence protocol, through real multi-node jobs: for each protocol × fault backend ×
//! transport, the examples `counter`, `jacobi --verify` and `falseshare` at 2 and 4 nodes and
//! `regions` (one region per protocol in one run) at 1, 2 and 3 nodes; `litmus` under `sc-sw`
//! only (`sc-mw` and `scope` are not sequentially consistent for racy programs, see
//! `docs/protocols.md`); a long lock-heavy run under `scope` whose write notices and memory
//! must stay bounded; and `burst` under the multiple-writer protocols: every node flushing
//! 16 MiB of diffs to the others at one barrier, more than any transport buffers, which stalled
//! every node while engines blocked in sends under their state.
//!
//! Test names are `<protocol>::<fault>::<transport>::<case>` (e.g.
//! `sc_mw::segv::tcp::falseshare_4_nodes`), so `cargo test -p svm-tests --test protocols scope::`
//! runs one protocol. Runs are serialised (one job at a time) and each has a hard deadline after
//! which its process group is killed.

use std::time::Duration;

use svm_tests::{example_path, run_example_with, run_svmrun_env, serial, word_value, Output};

/// Expands `$body` once per value, inside a module named after it that defines the constant
/// `$konst` (a `&str`). Nested, this builds the test matrix.
macro_rules! each {
    ($konst:ident: $($m:ident = $v:literal),+ ; $body:tt) => {
        $(
            mod $m {
                #[allow(unused_imports)]
                use super::*;
                const $konst: &str = $v;
                items! $body
            }
        )+
    };
}

/// The items it is given (`items! { … }` with the braces of a captured `$body:tt`).
macro_rules! items {
    ($($t:tt)*) => { $($t)* };
}

/// The transports every case runs over. Adding a transport is one entry here. (`auto` picks
/// `deck` for nodes on one host, which is all a test can start, so it is not listed.)
macro_rules! per_transport {
    ($body:tt) => {
        each!(TRANSPORT: tcp = "tcp", deck = "deck"; $body);
    };
}

/// Both fault backends.
macro_rules! per_fault {
    ($body:tt) => {
        each!(FAULT: uffd = "uffd", segv = "segv"; $body);
    };
}

const COUNTER_ITERS: u64 = 200;
const JACOBI_N: usize = 128;
const JACOBI_ITERS: usize = 10;
/// `falseshare ROUNDS WORDS_PER_NODE PASSES`: 512 words per node span `nodes` pages per buffer.
const FALSESHARE_ARGS: [&str; 3] = ["20", "512", "4"];
/// `regions ITERS NOTICE_ITERS` for the matrix runs.
const REGIONS_ITERS: u64 = 20;
const REGIONS_NOTICE_ITERS: u64 = 1000;
const LITMUS_ROUNDS: u64 = 200;
const SUBSETS_ROUNDS: u64 = 30;
/// The long run: lock operations per node in the write-notice loop.
const SOAK_NOTICE_ITERS: u64 = 10_000;
const SOAK_NODES: usize = 4;
/// Largest resident-set growth of a node over the second half of the long run. The loop's
/// region is 1 MiB; a node's resident copies of it come and go with invalidations.
const SOAK_RSS_GROWTH_KIB: i64 = 2048;
/// Largest mean size of a lock grant in the long run. With the notices at lock managers
/// collected at every barrier, a grant names the few pages written under its lock since the
/// previous barrier (about 30 bytes measured); without the collection it would name up to 64
/// pages (the pages each lock guards), well over this.
const SOAK_GRANT_BYTES: f64 = 128.0;

const DEADLINE: Duration = Duration::from_secs(120);

/// `svmrun` flags of one cell of the matrix.
fn flags(protocol: &str, fault: &str, transport: &str, nodes: usize) -> Vec<String> {
    [
        "-n",
        &nodes.to_string(),
        "--protocol",
        protocol,
        "--fault",
        fault,
        "--transport",
        transport,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Runs `example ARGS...` in one cell of the matrix; panics unless it exits 0 and leaves
/// nothing behind.
fn run(
    protocol: &str,
    fault: &str,
    transport: &str,
    nodes: usize,
    example: &str,
    args: &[&str],
) -> Output {
    let flags = flags(protocol, fault, transport, nodes);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let out = run_example_with(&flags, example, args, DEADLINE);
    out.assert_success();
    out
}

/// The one stdout line holding all `words` (panics with the output otherwise).
fn only_line<'a>(out: &'a Output, words: &[&str]) -> &'a str {
    let lines = out.stdout_lines_with(words);
    assert_eq!(
        lines.len(),
        1,
        "expected exactly one stdout line with {words:?}\n{out}"
    );
    lines[0]
}

fn has_word(line: &str, word: &str) -> bool {
    line.split_whitespace().any(|w| w == word)
}

fn number<T: std::str::FromStr>(out: &Output, line: &str, key: &str) -> T {
    word_value(line, key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}=<number> in {line:?}\n{out}"))
}

// ---------------------------------------------------------------------------------------------
// The cases

fn counter(protocol: &str, fault: &str, transport: &str, nodes: usize) {
    let iters = COUNTER_ITERS.to_string();
    let out = run(protocol, fault, transport, nodes, "counter", &[&iters]);
    let line = only_line(&out, &["counter="]);
    let expected = (nodes as u64 * COUNTER_ITERS).to_string();
    assert_eq!(
        word_value(line, "counter"),
        Some(expected.as_str()),
        "{out}"
    );
    assert_eq!(
        word_value(line, "expected"),
        Some(expected.as_str()),
        "{out}"
    );
    assert!(has_word(line, "OK"), "no OK on the counter line\n{out}");
}

fn jacobi(protocol: &str, fault: &str, transport: &str, nodes: usize) {
    let (n, iters) = (JACOBI_N.to_string(), JACOBI_ITERS.to_string());
    let out = run(
        protocol,
        fault,
        transport,
        nodes,
        "jacobi",
        &[&n, &iters, "--verify"],
    );
    // --verify compares every cell, bit for bit, with a sequential run and appends OK.
    let line = only_line(&out, &["checksum="]);
    assert_eq!(
        line.split_whitespace().last(),
        Some("OK"),
        "the checksum line must end with OK\n{out}"
    );
    let time_s: f64 = number(&out, line, "time_s");
    assert!(time_s >= 0.0, "{out}");
}

fn falseshare(protocol: &str, fault: &str, transport: &str, nodes: usize) {
    let out = run(
        protocol,
        fault,
        transport,
        nodes,
        "falseshare",
        &FALSESHARE_ARGS,
    );
    let line = only_line(&out, &["time_s="]);
    assert!(has_word(line, "OK"), "no OK on the falseshare line\n{out}");
    let time_s: f64 = number(&out, line, "time_s");
    assert!(time_s.is_finite() && time_s >= 0.0, "{out}");
    assert_eq!(
        word_value(line, "rounds"),
        Some(FALSESHARE_ARGS[0]),
        "{out}"
    );
    assert_eq!(
        word_value(line, "words_per_node"),
        Some(FALSESHARE_ARGS[1]),
        "{out}"
    );
    assert_eq!(
        word_value(line, "nodes"),
        Some(nodes.to_string().as_str()),
        "{out}"
    );
    // 512 words of 8 bytes per node: one 4 KiB page per node in each buffer.
    assert_eq!(
        word_value(line, "pages"),
        Some(nodes.to_string().as_str()),
        "{out}"
    );
}

/// Checks the `notices …` line of `regions` and returns it.
fn regions_notices(out: &Output, nodes: usize, notice_iters: u64) -> &str {
    let line = only_line(out, &["notices", "notices_sent="]);
    let expected = nodes as u64 * notice_iters;
    assert_eq!(number::<u64>(out, line, "total"), expected, "{out}");
    assert_eq!(number::<u64>(out, line, "expected"), expected, "{out}");
    assert_eq!(number::<u64>(out, line, "iters"), notice_iters, "{out}");
    // Every release in the loop's `scope` region announces the page it wrote — once other
    // nodes share the pages. With one node no page is ever fetched by another, and a home
    // page nobody else holds needs no notices (the home leaves it writable, untracked).
    let sent: u64 = number(out, line, "notices_sent");
    if nodes > 1 {
        assert!(
            sent >= expected,
            "notices_sent={sent} < {expected} releases\n{out}"
        );
    }
    line
}

fn regions(protocol: &str, fault: &str, transport: &str, nodes: usize) {
    let (iters, notice_iters) = (REGIONS_ITERS.to_string(), REGIONS_NOTICE_ITERS.to_string());
    let out = run(
        protocol,
        fault,
        transport,
        nodes,
        "regions",
        &[&iters, &notice_iters],
    );
    regions_notices(&out, nodes, REGIONS_NOTICE_ITERS);
    let line = only_line(&out, &["regions", "OK"]);
    assert_eq!(
        word_value(line, "nodes"),
        Some(nodes.to_string().as_str()),
        "{out}"
    );
}

/// Barriers of some of the nodes (`subsets`): every write before one is visible to its
/// participants, also one that reached a participant through an earlier such barrier, and a
/// later barrier of every node makes it visible to the others.
fn subsets(protocol: &str, fault: &str, transport: &str, nodes: usize) {
    let rounds = SUBSETS_ROUNDS.to_string();
    let out = run(protocol, fault, transport, nodes, "subsets", &[&rounds]);
    let line = only_line(&out, &["subsets", "direct="]);
    for case in ["direct", "through", "every"] {
        assert_eq!(word_value(line, case), Some("OK"), "{case}\n{out}");
    }
    assert_eq!(word_value(line, "rounds"), Some(rounds.as_str()), "{out}");
}

fn litmus(fault: &str, transport: &str, nodes: usize) {
    let rounds = LITMUS_ROUNDS.to_string();
    let out = run("sc-sw", fault, transport, nodes, "litmus", &[&rounds]);
    let line = only_line(&out, &["litmus", "mp="]);
    assert_eq!(word_value(line, "mp"), Some("OK"), "{out}");
    assert_eq!(word_value(line, "sb"), Some("OK"), "{out}");
    assert_eq!(word_value(line, "rounds"), Some(rounds.as_str()), "{out}");
    if nodes >= 4 {
        assert_eq!(word_value(line, "iriw"), Some("OK"), "{out}");
    }
}

// ---------------------------------------------------------------------------------------------
// The long run under `scope`

/// The unsigned integer after `"key":` in a one-line JSON object.
/// Pages per node of the burst runs: 16 MiB of diffs from each node, several times what a TCP
/// connection or a DECK-SCI eager area holds in one direction.
const BURST_PAGES: &str = "4096";

/// `burst` (every node flushes diffs to every other node at one barrier), two rounds.
fn burst(protocol: &str, transport: &str, nodes: usize) {
    let out = run(
        protocol,
        "uffd",
        transport,
        nodes,
        "burst",
        &[BURST_PAGES, "2", protocol],
    );
    let line = only_line(&out, &["burst", "OK"]);
    assert!(
        has_word(line, &format!("nodes={nodes}")),
        "burst: {line}\n{out}"
    );
}

fn json_u64(obj: &str, key: &str) -> Option<u64> {
    let pat = format!("\"{key}\":");
    let rest = &obj[obj.find(&pat)? + pat.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The nested object after `"key":` (up to its first closing brace: the objects read here
/// hold no deeper nesting).
fn json_object<'a>(obj: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("\"{key}\":{{");
    let start = obj.find(&pat)? + pat.len() - 1;
    let end = start + obj[start..].find('}')?;
    Some(&obj[start..=end])
}

/// `regions 10 SOAK_NOTICE_ITERS` on 4 nodes under `--protocol scope` with `SVM_STATS=json`:
/// 40,000 lock operations with a barrier every 8 per node. What must not grow with the number of
/// iterations: the write notices a lock grant carries (mean bytes per grant, from the
/// example's two halves and from every node's JSON statistics) and the nodes' resident memory.
fn soak(fault: &str, transport: &str) {
    let flags = flags("scope", fault, transport, SOAK_NODES);
    let exe = example_path("regions");
    let iters = SOAK_NOTICE_ITERS.to_string();
    let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
    args.extend([exe.to_str().expect("non-UTF-8 target path"), "10", &iters]);
    let out = {
        let _serial = serial();
        run_svmrun_env(&args, &[("SVM_STATS", "json")], Duration::from_secs(150))
    };
    out.assert_success();
    out.assert_stdout_contains("regions OK");
    let line = regions_notices(&out, SOAK_NODES, SOAK_NOTICE_ITERS);

    let first: f64 = number(&out, line, "grant_bytes_first");
    let second: f64 = number(&out, line, "grant_bytes_second");
    assert!(
        first > 0.0 && second > 0.0,
        "no lock grants crossed the network\n{out}"
    );
    assert!(
        second <= first * 1.25 + 8.0,
        "lock grants grew from {first:.1} to {second:.1} bytes on average between the two halves of the run: write notices pile up at the lock managers\n{out}"
    );
    assert!(
        second <= SOAK_GRANT_BYTES,
        "lock grants carry {second:.1} bytes on average (bound {SOAK_GRANT_BYTES}): write notices are not collected at barriers\n{out}"
    );
    let growth: i64 = number(&out, line, "rss_growth_kib");
    assert!(
        growth <= SOAK_RSS_GROWTH_KIB,
        "a node's resident memory grew by {growth} KiB over the second half of the run (bound {SOAK_RSS_GROWTH_KIB} KiB)\n{out}"
    );

    let objects = stats_objects(&out, SOAK_NODES);
    for obj in objects {
        assert!(obj.contains("\"protocol\":\"scope\""), "{obj}\n{out}");
        let notices =
            json_u64(obj, "notices_sent").unwrap_or_else(|| panic!("no notices_sent in {obj}"));
        assert!(
            notices >= SOAK_NOTICE_ITERS,
            "notices_sent={notices} < {SOAK_NOTICE_ITERS} releases in {obj}"
        );
        let grant = json_object(obj, "lock_grant")
            .unwrap_or_else(|| panic!("no lock_grant messages in {obj}"));
        let (n, bytes) = (
            json_u64(grant, "received").unwrap_or(0),
            json_u64(grant, "received_bytes").unwrap_or(0),
        );
        assert!(n > 0, "this node received no lock grant: {obj}");
        let mean = bytes as f64 / n as f64;
        assert!(
            mean <= SOAK_GRANT_BYTES,
            "lock grants received carry {mean:.1} bytes on average (bound {SOAK_GRANT_BYTES}) in {obj}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The matrix

macro_rules! protocol_cases {
    () => {
        per_fault!({
            per_transport!({
                #[test]
                fn counter_2_nodes() {
                    counter(PROTOCOL, FAULT, TRANSPORT, 2)
                }
                #[test]
                fn counter_4_nodes() {
                    counter(PROTOCOL, FAULT, TRANSPORT, 4)
                }
                #[test]
                fn jacobi_2_nodes() {
                    jacobi(PROTOCOL, FAULT, TRANSPORT, 2)
                }
                #[test]
                fn jacobi_4_nodes() {
                    jacobi(PROTOCOL, FAULT, TRANSPORT, 4)
                }
                #[test]
                fn falseshare_2_nodes() {
                    falseshare(PROTOCOL, FAULT, TRANSPORT, 2)
                }
                #[test]
                fn falseshare_4_nodes() {
                    falseshare(PROTOCOL, FAULT, TRANSPORT, 4)
                }
                #[test]
                fn regions_1_node() {
                    regions(PROTOCOL, FAULT, TRANSPORT, 1)
                }
                #[test]
                fn regions_2_nodes() {
                    regions(PROTOCOL, FAULT, TRANSPORT, 2)
                }
                #[test]
                fn regions_3_nodes() {
                    regions(PROTOCOL, FAULT, TRANSPORT, 3)
                }
                #[test]
                fn subsets_3_nodes() {
                    subsets(PROTOCOL, FAULT, TRANSPORT, 3)
                }
            });
        });
    };
}

mod sc_sw {
    use super::*;
    const PROTOCOL: &str = "sc-sw";
    protocol_cases!();

    /// Litmus tests hold only under sequential consistency for racy programs: `sc-sw`.
    mod litmus {
        use super::*;
        per_fault!({
            per_transport!({
                #[test]
                fn litmus_2_nodes() {
                    litmus(FAULT, TRANSPORT, 2)
                }
                #[test]
                fn litmus_4_nodes() {
                    litmus(FAULT, TRANSPORT, 4)
                }
            });
        });
    }
}

mod sc_mw {
    use super::*;
    const PROTOCOL: &str = "sc-mw";
    protocol_cases!();

    mod burst {
        use super::*;
        per_transport!({
            #[test]
            fn diffs_to_every_node_at_once_2_nodes() {
                burst(PROTOCOL, TRANSPORT, 2)
            }
            #[test]
            fn diffs_to_every_node_at_once_4_nodes() {
                burst(PROTOCOL, TRANSPORT, 4)
            }
        });
    }
}

mod scope {
    use super::*;
    const PROTOCOL: &str = "scope";
    protocol_cases!();

    mod burst {
        use super::*;
        per_transport!({
            #[test]
            fn diffs_to_every_node_at_once_3_nodes() {
                burst(PROTOCOL, TRANSPORT, 3)
            }
        });
    }

    /// The long lock-heavy run.
    mod soak {
        use super::*;
        per_fault!({
            per_transport!({
                #[test]
                fn notices_and_memory_stay_bounded() {
                    soak(FAULT, TRANSPORT)
                }
            });
        });
    }
}

/// Pages that travel with their lock (`SVM_LOCK_PAGES`, sc-sw): `counter 200 --handoff` at 2
/// nodes passes the lock to the other node every round, and each holder reads and writes the
/// counter's page in its critical section. Without the pages travelling every hand-over is
/// followed by a remote fault on that page; with them the node that takes the lock finds the
/// page installed, asked for along with the lock and handed over just before the token. Counts,
/// not times: the job's remote faults with are fewer than half of those without, and pages
/// were asked for along with the lock only with. Both runs verify the counter.
#[test]
fn a_lock_takes_its_page_along() {
    let counter = example_path("counter");
    let counter = counter.to_str().expect("UTF-8 path");
    let run = |lock_pages: &str| {
        let args = [
            "-n",
            "2",
            "--protocol",
            "sc-sw",
            counter,
            "200",
            "--handoff",
        ];
        let env = [("SVM_LOCK_PAGES", lock_pages)];
        let (out, objects) = run_with_stats(&args, &env, &["counter=400", "expected=400", "OK"]);
        let sum = |key: &str| job_sum(&objects, key, &out);
        (
            sum("remote_faults"),
            sum("lock_pages_asked"),
            out.to_string(),
        )
    };
    let (faults_with, asked_with, with) = run("1");
    let (faults_without, asked_without, without) = run("0");
    assert_eq!(
        asked_without, 0,
        "SVM_LOCK_PAGES=0 asked for pages\n{without}"
    );
    assert!(
        asked_with > 0,
        "no page was asked for along with the lock\n{with}"
    );
    assert!(
        faults_with * 2 < faults_without,
        "remote faults with the pages travelling: {faults_with}, without: {faults_without}\n{with}\n{without}"
    );
}

/// sc-mw's bounded visibility (`SVM_FLUSH_AFTER_US`): `flags` hands a turn back and forth
/// between two real nodes through plain loads and stores, with no release between them; every
/// turn arrives, with the datum written before it, through timed flushes. (With the timer off
/// no turn ever arrives: the simulators check that, `bounded_visibility.rs`.)
#[test]
fn a_racy_flag_arrives_under_sc_mw() {
    let example = example_path("flags");
    let example = example.to_str().expect("UTF-8 path");
    let args = ["-n", "2", "--protocol", "sc-mw", example, "30"];
    let (out, objects) = run_with_stats(&args, &[], &["flags", "rounds=30", "OK"]);
    let timed = job_sum(&objects, "timed_flushes", &out);
    assert!(timed >= 30, "{timed} timed flushes for 60 turns\n{out}");
}

/// sc-mw's lock releases that wait (`SVM_RELEASE_DELAY_US`, jobs of two nodes): `counter`'s
/// nodes take one lock in turns, and a release whose token stays on the node leaves its flush
/// to the token's departure. Counts, not times: with the delay, releases were deferred and the
/// job diffed fewer pages than releases it made; without it (0) every release that wrote
/// flushed. Both runs verify the counter.
#[test]
fn lock_releases_that_keep_their_token_flush_later_under_sc_mw() {
    let counter = example_path("counter");
    let counter = counter.to_str().expect("UTF-8 path");
    let run = |delay: &str| {
        let args = ["-n", "2", "--protocol", "sc-mw", counter, "500"];
        let env = [("SVM_RELEASE_DELAY_US", delay)];
        let (out, objects) = run_with_stats(&args, &env, &["counter=1000", "expected=1000", "OK"]);
        let sum = |key: &str| job_sum(&objects, key, &out);
        (
            sum("releases_deferred"),
            sum("diffs_created"),
            out.to_string(),
        )
    };
    let (deferred, diffs_with, with) = run("1000");
    let (deferred_without, diffs_without, without) = run("0");
    assert_eq!(
        deferred_without, 0,
        "SVM_RELEASE_DELAY_US=0 deferred releases\n{without}"
    );
    assert!(deferred > 0, "no release was deferred\n{with}");
    assert!(
        diffs_with < diffs_without,
        "pages diffed with the delay: {diffs_with}, without: {diffs_without}\n{with}\n{without}"
    );
}

/// sc-sw read-ahead from the owner to the manager: rank 1 fills 4 MiB homed on rank 0, then
/// rank 0 (the home and manager) reads every page in order. Each read goes to the owner, rank
/// 1, which also sends the following pages ahead when the home asks for them. Counts, not
/// times: with read-ahead (`SVM_PREFETCH=8`) the home took pages ahead and had fewer than half
/// the remote faults it has without (`SVM_PREFETCH=0`); both runs check every page read.
#[test]
fn the_home_reads_ahead_what_another_node_wrote() {
    let pagefault = example_path("pagefault");
    let pagefault = pagefault.to_str().expect("UTF-8 path");
    let run = |prefetch: &str| {
        let args = [
            "-n",
            "2",
            "--protocol",
            "sc-sw",
            pagefault,
            "4",
            "--home-reads",
        ];
        let env = [("SVM_PREFETCH", prefetch)];
        let (out, objects) = run_with_stats(&args, &env, &["us_per_page=", "pages=1024"]);
        let home = objects
            .iter()
            .find(|o| json_u64(o, "node") == Some(0))
            .unwrap_or_else(|| panic!("no statistics of node 0\n{out}"));
        (
            json_key(home, "remote_faults", &out),
            json_key(home, "pages_read_ahead", &out),
            out.to_string(),
        )
    };
    let (faults_with, ahead_with, with) = run("8");
    let (faults_without, ahead_without, without) = run("0");
    assert_eq!(ahead_without, 0, "SVM_PREFETCH=0 read ahead\n{without}");
    assert!(ahead_with > 0, "no page was read ahead\n{with}");
    assert!(
        faults_with * 2 < faults_without,
        "the home's remote faults with read-ahead: {faults_with}, without: {faults_without}\n{with}\n{without}"
    );
}

/// Runs a 2-node job with `SVM_STATS=json` and `env` (one at a time: the counts must not
/// suffer from other jobs), checks that it succeeded and printed exactly one line with `line`,
/// and returns its output and the nodes' statistics objects.
fn run_with_stats(args: &[&str], env: &[(&str, &str)], line: &[&str]) -> (Output, Vec<String>) {
    let _serial = serial();
    let mut env = env.to_vec();
    env.push(("SVM_STATS", "json"));
    let out = run_svmrun_env(args, &env, DEADLINE);
    out.assert_success();
    only_line(&out, line);
    let objects = stats_objects(&out, 2)
        .into_iter()
        .map(str::to_string)
        .collect();
    (out, objects)
}

/// `key` summed over every node's statistics object (each must have it).
fn job_sum(objects: &[String], key: &str, out: &Output) -> u64 {
    objects.iter().map(|o| json_key(o, key, out)).sum()
}

/// `key` of a statistics object, which must have it.
fn json_key(object: &str, key: &str, out: &Output) -> u64 {
    json_u64(object, key).unwrap_or_else(|| panic!("no {key} in {object}\n{out}"))
}

/// Every node's statistics (`SVM_STATS=json`): one JSON object per node on stderr.
fn stats_objects(out: &Output, nodes: usize) -> Vec<&str> {
    let objects: Vec<&str> = out
        .stderr
        .lines()
        .filter_map(|l| l.find("{\"node\":").map(|i| &l[i..]))
        .collect();
    assert_eq!(
        objects.len(),
        nodes,
        "expected one JSON statistics object per node on stderr\n{out}"
    );
    objects
}

/// Barrier messages (`barrier_arrive`, `barrier_release`, `barrier_round`) sent by all nodes,
/// from the `SVM_STATS=json` objects on stderr.
fn barrier_messages_sent(out: &Output, nodes: usize) -> u64 {
    stats_objects(out, nodes)
        .iter()
        .map(|obj| {
            ["barrier_arrive", "barrier_release", "barrier_round"]
                .iter()
                .filter_map(|m| json_object(obj, m).and_then(|o| json_u64(o, "sent")))
                .sum::<u64>()
        })
        .sum()
}

/// Over DECK-SCI (every node on this host) barriers go through shared memory: under `sc-sw`,
/// which has nothing to hand over at a barrier, not one barrier message is sent; with
/// `SVM_HOST_BARRIER=0` every barrier is messages again. Under `scope` the episodes after
/// writes carry write notices, so they go through the message barrier as well (and the
/// verified result shows nobody missed a notice).
#[test]
fn barriers_over_deck_go_through_shared_memory_when_nothing_is_handed_over() {
    const NODES: usize = 4;
    let syncbench = example_path("syncbench");
    let syncbench = syncbench.to_str().expect("UTF-8 path");
    for (host_barrier, messages) in [("1", false), ("0", true)] {
        let _serial = serial();
        let out = run_svmrun_env(
            &[
                "-n",
                "4",
                "--transport",
                "deck",
                syncbench,
                "barrier",
                "200",
            ],
            &[("SVM_STATS", "json"), ("SVM_HOST_BARRIER", host_barrier)],
            DEADLINE,
        );
        out.assert_success();
        only_line(&out, &["barrier_us=", "OK"]);
        let sent = barrier_messages_sent(&out, NODES);
        assert_eq!(
            sent > 0,
            messages,
            "SVM_HOST_BARRIER={host_barrier}: {sent} barrier messages\n{out}"
        );
    }
    let jacobi = example_path("jacobi");
    let jacobi = jacobi.to_str().expect("UTF-8 path");
    let _serial = serial();
    let out = run_svmrun_env(
        &[
            "-n",
            "4",
            "--transport",
            "deck",
            "--protocol",
            "scope",
            jacobi,
            "128",
            "10",
            "--verify",
        ],
        &[("SVM_STATS", "json")],
        DEADLINE,
    );
    out.assert_success();
    let line = only_line(&out, &["checksum="]);
    assert_eq!(line.split_whitespace().last(), Some("OK"), "{out}");
    assert!(barrier_messages_sent(&out, NODES) > 0, "{out}");
}

/// Linux 6.7 and later find a scope home's writes by scanning its page tables
/// (`SVM_WRITE_SCAN`, docs/protocols.md).
fn kernel_scans_writes() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut nums = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<u32>().ok());
    (nums.next().unwrap_or(0), nums.next().unwrap_or(0)) >= (6, 7)
}

/// Under `scope` a home finds its writes to the pages other nodes read by scanning its page
/// tables at each release (`SVM_WRITE_SCAN`, on by default where the kernel has it), not by a
/// write fault per page and interval: Jacobi at 2 nodes, each node's block homed on it and its
/// boundary rows read by the other, verifies with no write fault at all after the blocks are
/// first touched and a scan finding every boundary row written; with `SVM_WRITE_SCAN=0` the
/// same rows take write faults and no scan runs. Both runs equal the sequential one.
#[test]
fn scope_homes_find_their_writes_by_scanning_not_by_faults() {
    const NODES: usize = 2;
    const ITERS: u64 = 40;
    let jacobi = example_path("jacobi");
    let jacobi = jacobi.to_str().expect("UTF-8 path");
    let scans = kernel_scans_writes();
    let mut write_faults_of = Vec::new();
    for scan in ["1", "0"] {
        let _serial = serial();
        // 512 doubles a row: one page per row, one boundary page per node and grid.
        let out = run_svmrun_env(
            &[
                "-n",
                "2",
                "--fault",
                "uffd",
                "--protocol",
                "scope",
                jacobi,
                "512",
                &ITERS.to_string(),
                "--verify",
            ],
            &[("SVM_STATS", "json"), ("SVM_WRITE_SCAN", scan)],
            DEADLINE,
        );
        out.assert_success();
        let line = only_line(&out, &["checksum="]);
        assert_eq!(line.split_whitespace().last(), Some("OK"), "{out}");
        let mut write_faults_here = 0;
        for obj in stats_objects(&out, NODES) {
            let scanned = json_u64(obj, "writes_scanned").expect("writes_scanned");
            let write_faults = json_u64(obj, "write_faults").expect("write_faults");
            write_faults_here += write_faults;
            if scan == "1" && scans {
                assert!(
                    scanned >= ITERS / 2,
                    "{scanned} boundary pages found written by scans in {ITERS} iterations\n{out}"
                );
            } else {
                assert_eq!(scanned, 0, "SVM_WRITE_SCAN={scan}\n{out}");
                assert!(
                    write_faults >= ITERS / 2,
                    "{write_faults} write faults without scanning in {ITERS} iterations\n{out}"
                );
            }
        }
        write_faults_of.push(write_faults_here);
    }
    // The first touches fault either way; the boundary rows' writes only without scanning
    // (each node writes its two boundary pages every second iteration).
    if scans {
        let (with, without) = (write_faults_of[0], write_faults_of[1]);
        assert!(
            with + ITERS <= without,
            "write faults: {with} with scanning, {without} without"
        );
    }
}

/// A barrier through shared memory runs sc-sw's barrier hooks as the message barrier does:
/// Jacobi over DECK-SCI at 2 nodes, where each node reads one boundary row of the other per
/// iteration. Each home pushes the row it wrote to its reader at its arrival and each reader
/// drops the copy after its phase, so a node's remote faults over the 40 iterations stay well
/// under one per iteration (without the hooks: two per iteration, every boundary page fetched
/// again). The result equals the sequential run's.
#[test]
fn a_barrier_through_shared_memory_pushes_and_drops_like_the_message_barrier() {
    const NODES: usize = 2;
    const ITERS: u64 = 40;
    let jacobi = example_path("jacobi");
    let jacobi = jacobi.to_str().expect("UTF-8 path");
    let _serial = serial();
    // 512 doubles a row: one page per row, one boundary page per node and grid.
    let out = run_svmrun_env(
        &[
            "-n",
            "2",
            "--transport",
            "deck",
            "--protocol",
            "sc-sw",
            jacobi,
            "512",
            &ITERS.to_string(),
            "--verify",
        ],
        &[("SVM_STATS", "json"), ("SVM_HOST_BARRIER", "1")],
        DEADLINE,
    );
    out.assert_success();
    let line = only_line(&out, &["checksum="]);
    assert_eq!(line.split_whitespace().last(), Some("OK"), "{out}");
    for obj in stats_objects(&out, NODES) {
        let sent = |kind: &str| {
            json_object(obj, kind)
                .and_then(|o| json_u64(o, "sent"))
                .unwrap_or(0)
        };
        assert!(
            sent("push") >= ITERS / 4 && sent("dropped") >= ITERS / 4,
            "every node pushes its boundary rows and drops the copies it read\n{out}"
        );
    }
    // Node 1 reads nothing but its own block and node 0's boundary row (node 0 also gathers
    // the whole grid to verify it).
    let node1 = stats_objects(&out, NODES)
        .into_iter()
        .find(|o| o.starts_with("{\"node\":1,"))
        .expect("node 1's statistics");
    let remote = json_u64(node1, "remote_faults").expect("remote_faults");
    assert!(
        remote < ITERS,
        "node 1: {remote} remote faults in {ITERS} iterations\n{out}"
    );
}

/// `SharedSlice::read_into` and `write_from` over several pages ask for all of them at once
/// (`Node::prefetch`): matvec at 2 nodes with read-ahead and the push off, so that without it
/// every remote page of `x` would be one read fault and every page of `y` the node had lowered
/// one write fault. Under every protocol the result equals the sequential run's and each node
/// fetches many more pages than it faults on.
#[test]
fn bulk_copies_ask_for_their_pages_at_once() {
    const NODES: usize = 2;
    // x and y of 40,000 doubles: 40 pages per node's block; 5 products.
    let args = ["40000", "4", "5"];
    let seq = std::process::Command::new(example_path("matvec"))
        .args(args)
        .arg("--seq")
        .output()
        .expect("running matvec --seq");
    let seq = String::from_utf8_lossy(&seq.stdout).into_owned();
    let checksum = seq
        .split_whitespace()
        .find(|w| w.starts_with("checksum="))
        .unwrap_or_else(|| panic!("no checksum in the sequential run: {seq}"))
        .to_string();
    for protocol in ["sc-sw", "sc-mw", "scope"] {
        let flags = flags(protocol, "uffd", "tcp", NODES);
        let exe = example_path("matvec");
        let mut argv: Vec<&str> = flags.iter().map(String::as_str).collect();
        argv.push(exe.to_str().expect("non-UTF-8 target path"));
        argv.extend(args);
        let out = {
            let _serial = serial();
            run_svmrun_env(
                &argv,
                &[
                    ("SVM_STATS", "json"),
                    ("SVM_PREFETCH", "0"),
                    ("SVM_PUSH", "0"),
                ],
                DEADLINE,
            )
        };
        out.assert_success();
        out.assert_stdout_contains(&checksum);
        for obj in stats_objects(&out, NODES) {
            let fetched = json_u64(obj, "pages_fetched").expect("pages_fetched");
            let faults = json_u64(obj, "remote_faults").expect("remote_faults");
            assert!(
                fetched >= 5 * 20 && faults * 4 <= fetched,
                "{protocol}: a node fetched {fetched} pages with {faults} remote faults: the copies did not ask for their pages at once\n{out}"
            );
        }
    }
}
