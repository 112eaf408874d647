//! Runs the real `svmrun` binary on small shell programs.
//!
//! Every run has a hard deadline: svmrun is started in its own process group, and on deadline the
//! whole group (svmrun and its nodes) is killed and the test fails with the output so far.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

const DEADLINE: Duration = Duration::from_secs(30);

type Buf = Arc<Mutex<Vec<u8>>>;

struct Run {
    pid: Pid,
    started: Instant,
    stdout: Buf,
    stderr: Buf,
    readers: Vec<JoinHandle<()>>,
    exited: mpsc::Receiver<ExitStatus>,
}

struct Done {
    status: ExitStatus,
    elapsed: Duration,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl Done {
    fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    fn err(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
    fn code(&self) -> Option<i32> {
        self.status.code()
    }
    fn lines(&self) -> Vec<String> {
        self.out().lines().map(str::to_owned).collect()
    }
}

fn collect<R: Read + Send + 'static>(mut r: R, buf: Buf) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        loop {
            match r.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.lock().unwrap().extend_from_slice(&chunk[..n]),
            }
        }
    })
}

/// Starts svmrun with `args`, a clean `SVM_*` environment plus `env`, and `stdin`.
fn start(args: &[&str], env: &[(&str, &str)], stdin: Option<&[u8]>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_svmrun"));
    cmd.args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SVM_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child: Child = cmd.spawn().expect("spawn svmrun");
    let pid = Pid::from_raw(child.id() as i32);
    if let Some(input) = stdin {
        let mut w = child.stdin.take().unwrap();
        w.write_all(input).unwrap();
        // Dropping `w` closes svmrun's stdin.
    }
    let stdout = Buf::default();
    let stderr = Buf::default();
    let readers = vec![
        collect(child.stdout.take().unwrap(), stdout.clone()),
        collect(child.stderr.take().unwrap(), stderr.clone()),
    ];
    let (tx, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let status = child.wait().expect("wait svmrun");
        let _ = tx.send(status);
    });
    Run {
        pid,
        started: Instant::now(),
        stdout,
        stderr,
        readers,
        exited,
    }
}

impl Run {
    fn so_far(&self) -> String {
        format!(
            "stdout so far:\n{}\nstderr so far:\n{}",
            String::from_utf8_lossy(&self.stdout.lock().unwrap()),
            String::from_utf8_lossy(&self.stderr.lock().unwrap())
        )
    }

    fn kill_group(&self) {
        // The group may already be empty.
        let _ = killpg(self.pid, Signal::SIGKILL);
    }

    /// Waits until stdout satisfies `pred`, or fails at the deadline.
    fn wait_stdout(&self, what: &str, pred: impl Fn(&str) -> bool) {
        let deadline = self.started + DEADLINE;
        loop {
            if pred(&String::from_utf8_lossy(&self.stdout.lock().unwrap())) {
                return;
            }
            if Instant::now() >= deadline {
                self.kill_group();
                panic!("deadline waiting for {what}\n{}", self.so_far());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for svmrun to exit (failing at the deadline), then cleans up its process group.
    fn finish(self) -> Done {
        let left = (self.started + DEADLINE).saturating_duration_since(Instant::now());
        let status = match self.exited.recv_timeout(left) {
            Ok(st) => st,
            Err(_) => {
                self.kill_group();
                panic!("svmrun missed the {DEADLINE:?} deadline\n{}", self.so_far());
            }
        };
        let elapsed = self.started.elapsed();
        // Stray grandchildren of the nodes (e.g. a `sleep` whose shell was killed) still hold
        // the pipes; they live in svmrun's group.
        self.kill_group();
        for r in self.readers {
            r.join().unwrap();
        }
        let stdout = std::mem::take(&mut *self.stdout.lock().unwrap());
        let stderr = std::mem::take(&mut *self.stderr.lock().unwrap());
        Done {
            status,
            elapsed,
            stdout,
            stderr,
        }
    }
}

fn svmrun(args: &[&str]) -> Done {
    start(args, &[], None).finish()
}

fn svmrun_env(args: &[&str], env: &[(&str, &str)]) -> Done {
    start(args, env, None).finish()
}

/// Parses `[rank] key=value key=value` lines into one map per rank.
fn per_rank(done: &Done) -> BTreeMap<u32, BTreeMap<String, String>> {
    let mut ranks = BTreeMap::new();
    for line in done.lines() {
        let Some(rest) = line.strip_prefix('[') else {
            panic!("unprefixed line {line:?}\n{}", done.err())
        };
        let (rank, body) = rest.split_once("] ").expect("prefix");
        let rank: u32 = rank.parse().expect("rank in prefix");
        let map: &mut BTreeMap<String, String> = ranks.entry(rank).or_default();
        for kv in body.split_whitespace() {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            assert!(
                map.insert(k.to_owned(), v.to_owned()).is_none(),
                "{k} twice for rank {rank}: {}",
                done.out()
            );
        }
    }
    ranks
}

const SHOW_ENV: &str = r#"
inode=$(readlink /proc/self/fd/$SVM_COORD_FD | tr -dc 0-9)
link=$(readlink /proc/self/fd/$SVM_COORD_FD | cut -c1-7)
state=$(awk -v i="$inode" '$10 == i { print $4 }' /proc/net/tcp)
lport=$(awk -v i="$inode" '$10 == i { split($2, a, ":"); print a[2] }' /proc/net/tcp)
echo "rank=$SVM_RANK size=$SVM_SIZE key=$SVM_JOB_KEY coord=$SVM_COORD fd=$SVM_COORD_FD" \
     "launcher=$SVM_LAUNCHER_PID link=$link state=$state lport=$lport" \
     "protocol=$SVM_PROTOCOL fault=$SVM_FAULT transport=$SVM_TRANSPORT timeout=$SVM_TIMEOUT" \
     "stats=$SVM_STATS verbose=$SVM_VERBOSE"
"#;

#[test]
fn every_rank_gets_its_environment_and_the_listener() {
    let run = start(&["-n", "4", "/bin/sh", "-c", SHOW_ENV], &[], None);
    let launcher = run.pid.as_raw().to_string();
    let done = run.finish();
    assert_eq!(done.code(), Some(0), "{}", done.err());
    let ranks = per_rank(&done);
    assert_eq!(ranks.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3]);
    let key = &ranks[&0]["key"];
    assert_eq!(key.len(), 64, "{key}");
    assert!(
        key.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{key}"
    );
    let coord = &ranks[&0]["coord"];
    let port: u16 = coord
        .strip_prefix("127.0.0.1:")
        .expect("loopback coord")
        .parse()
        .unwrap();
    for (rank, env) in &ranks {
        assert_eq!(env["rank"], rank.to_string());
        assert_eq!(env["size"], "4");
        assert_eq!(&env["key"], key, "same key everywhere");
        assert_eq!(&env["coord"], coord);
        assert!(env["fd"].parse::<i32>().unwrap() >= 3);
        assert_eq!(env["launcher"], launcher);
        assert_eq!(env["link"], "socket:", "SVM_COORD_FD is a socket");
        assert_eq!(env["state"], "0A", "SVM_COORD_FD is a listening TCP socket");
        assert_eq!(
            u16::from_str_radix(&env["lport"], 16).unwrap(),
            port,
            "the listener is bound to SVM_COORD's port"
        );
        for flag in [
            "protocol",
            "fault",
            "transport",
            "timeout",
            "stats",
            "verbose",
        ] {
            assert_eq!(env[flag], "", "{flag} set without its flag");
        }
    }
}

#[test]
fn job_keys_differ_between_runs() {
    let script = "echo key=$SVM_JOB_KEY";
    let a = per_rank(&svmrun(&["-n", "1", "/bin/sh", "-c", script]))[&0]["key"].clone();
    let b = per_rank(&svmrun(&["-n", "1", "/bin/sh", "-c", script]))[&0]["key"].clone();
    assert_eq!(a.len(), 64);
    assert_ne!(a, b);
}

#[test]
fn flags_become_env_and_override_it() {
    let done = svmrun_env(
        &[
            "-n",
            "2",
            "--protocol",
            "sc-mw",
            "--fault",
            "uffd",
            "--transport",
            "tcp",
            "--timeout",
            "7",
            "--stats",
            "--verbose",
            "/bin/sh",
            "-c",
            SHOW_ENV,
        ],
        &[("SVM_PROTOCOL", "scope"), ("SVM_FAULT", "segv")],
    );
    assert_eq!(done.code(), Some(0), "{}", done.err());
    let ranks = per_rank(&done);
    assert_eq!(ranks.len(), 2);
    for env in ranks.values() {
        assert_eq!(env["protocol"], "sc-mw");
        assert_eq!(env["fault"], "uffd");
        assert_eq!(env["transport"], "tcp");
        assert_eq!(env["timeout"], "7");
        assert_eq!(env["stats"], "1");
        assert_eq!(env["verbose"], "1");
    }
}

#[test]
fn exported_env_is_kept_when_flags_are_absent() {
    let key = "ab".repeat(32);
    let done = svmrun_env(
        &["-n", "2", "/bin/sh", "-c", SHOW_ENV],
        &[
            ("SVM_PROTOCOL", "scope"),
            ("SVM_TRANSPORT", "deck"),
            ("SVM_STATS", "1"),
            ("SVM_JOB_KEY", &key),
        ],
    );
    assert_eq!(done.code(), Some(0), "{}", done.err());
    for env in per_rank(&done).values() {
        assert_eq!(env["protocol"], "scope");
        assert_eq!(env["transport"], "deck");
        assert_eq!(env["stats"], "1");
        assert_eq!(env["fault"], "");
        assert_eq!(env["key"], key);
    }
}

#[test]
fn coord_flag_means_no_inherited_listener() {
    let done = svmrun_env(
        &[
            "-n",
            "2",
            "--coord",
            "node7:7000",
            "/bin/sh",
            "-c",
            "echo coord=$SVM_COORD fd=${SVM_COORD_FD-unset}",
        ],
        &[("SVM_COORD_FD", "9")],
    );
    assert_eq!(done.code(), Some(0), "{}", done.err());
    for env in per_rank(&done).values() {
        assert_eq!(env["coord"], "node7:7000");
        assert_eq!(env["fd"], "unset");
    }
    // An exported SVM_COORD works like --coord.
    let done = svmrun_env(
        &[
            "-n",
            "1",
            "/bin/sh",
            "-c",
            "echo coord=$SVM_COORD fd=${SVM_COORD_FD-unset}",
        ],
        &[("SVM_COORD", "127.0.0.1:7001")],
    );
    let ranks = per_rank(&done);
    assert_eq!(ranks[&0]["coord"], "127.0.0.1:7001");
    assert_eq!(ranks[&0]["fd"], "unset");
}

#[test]
fn output_is_prefixed_per_line() {
    let script = r#"printf 'out1\nout2\n'; printf 'err1\n' >&2; printf 'last'"#;
    let done = svmrun(&["-n", "3", "/bin/sh", "-c", script]);
    assert_eq!(done.code(), Some(0), "{}", done.err());
    let mut lines = done.lines();
    lines.sort();
    let mut want = Vec::new();
    for r in 0..3 {
        for l in ["out1", "out2", "last"] {
            want.push(format!("[{r}] {l}"));
        }
    }
    want.sort();
    assert_eq!(lines, want);
    assert!(done.stdout.ends_with(b"\n"));
    let mut err: Vec<_> = done.err().lines().map(str::to_owned).collect();
    err.sort();
    assert_eq!(err, ["[0] err1", "[1] err1", "[2] err1"]);
}

#[test]
fn no_prefix_forwards_bytes_as_they_are() {
    let script = r#"printf 'a\n\377\376b\n'; printf 'tail'; printf 'e\n' >&2"#;
    let done = svmrun(&["-n", "1", "--no-prefix", "/bin/sh", "-c", script]);
    assert_eq!(done.code(), Some(0), "{}", done.err());
    assert_eq!(done.stdout, b"a\n\xff\xfeb\ntail");
    assert_eq!(done.stderr, b"e\n");

    let done = svmrun(&["-n", "1", "/bin/sh", "-c", script]);
    assert_eq!(done.stdout, b"[0] a\n[0] \xff\xfeb\n[0] tail\n");
}

#[test]
fn a_node_killed_mid_line_leaves_no_open_line() {
    let script = r#"printf 'cut off' ; printf 'err cut' >&2 ; kill -9 $$"#;
    let done = svmrun(&["-n", "1", "--no-prefix", "/bin/sh", "-c", script]);
    assert_eq!(done.code(), Some(137), "{}", done.err());
    assert_eq!(done.stdout, b"cut off\n");
    // The node's cut-off line and svmrun's message each stand on a line of their own (the
    // forwarder and svmrun's wait for the node race, so either may come first).
    let err = String::from_utf8_lossy(&done.stderr).into_owned();
    assert!(err.ends_with('\n'), "{err:?}");
    let mut lines: Vec<&str> = err.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["err cut", "svmrun: node 0 was killed by signal SIGKILL"],
        "{err:?}"
    );

    let done = svmrun(&["-n", "1", "/bin/sh", "-c", script]);
    assert_eq!(done.stdout, b"[0] cut off\n");
}

#[test]
fn lines_of_different_nodes_never_interleave() {
    // 4 nodes x 300 lines of ~2 KB each, written as fast as possible.
    let script = r#"
        line=$(printf "%0500d" 0 | tr 0 "$SVM_RANK")
        line="$line$line$line$line"
        i=0
        while [ $i -lt 300 ]; do echo "$line"; i=$((i+1)); done
    "#;
    let done = svmrun(&["-n", "4", "/bin/sh", "-c", script]);
    assert_eq!(done.code(), Some(0), "{}", done.err());
    let lines = done.lines();
    assert_eq!(lines.len(), 1200);
    for line in &lines {
        let (prefix, body) = line.split_at(4);
        let rank = &prefix[1..2];
        assert_eq!(prefix, format!("[{rank}] "), "{line:.60}");
        assert_eq!(body, rank.repeat(2000), "mixed line {line:.60}...");
    }
}

#[test]
fn program_arguments_pass_through() {
    let done = svmrun(&[
        "-n",
        "1",
        "/bin/sh",
        "-c",
        r#"echo "args=$*""#,
        "sh",
        "--verify",
        "-x",
        "-n",
        "5",
    ]);
    assert_eq!(done.code(), Some(0), "{}", done.err());
    assert_eq!(done.out(), "[0] args=--verify -x -n 5\n");
}

#[test]
fn failing_node_status_is_returned_and_others_are_stopped() {
    // Rank 1 fails; the others would sleep 60 s. One of them ignores SIGTERM (needs SIGKILL).
    let script = r#"
        case $SVM_RANK in
            1) sleep 0.2; exit 3 ;;
            2) trap '' TERM; exec sleep 60 ;;
            *) exec sleep 60 ;;
        esac
    "#;
    let done = svmrun(&["-n", "3", "/bin/sh", "-c", script]);
    assert_eq!(done.code(), Some(3), "{}", done.err());
    assert!(
        done.err().contains("svmrun: node 1 exited with status 3"),
        "{}",
        done.err()
    );
    assert!(done.elapsed < Duration::from_secs(10), "{:?}", done.elapsed);
}

#[test]
fn sibling_shell_with_a_child_does_not_delay_exit() {
    // Rank 0's shell is TERMed but its `sleep 60` survives and keeps the output pipes open.
    let script = r#"
        if [ $SVM_RANK = 1 ]; then exit 5; fi
        sleep 60
        echo never
    "#;
    let done = svmrun(&["-n", "2", "/bin/sh", "-c", script]);
    assert_eq!(done.code(), Some(5), "{}", done.err());
    assert!(done.elapsed < Duration::from_secs(10), "{:?}", done.elapsed);
    assert!(!done.out().contains("never"));
}

#[test]
fn node_killed_by_signal() {
    let script = r#"
        if [ $SVM_RANK = 0 ]; then kill -9 $$; fi
        exec sleep 60
    "#;
    let done = svmrun(&["-n", "2", "/bin/sh", "-c", script]);
    assert_eq!(done.code(), Some(137), "{}", done.err());
    assert!(
        done.err()
            .contains("svmrun: node 0 was killed by signal SIGKILL"),
        "{}",
        done.err()
    );
    assert!(done.elapsed < Duration::from_secs(10), "{:?}", done.elapsed);
}

#[test]
fn all_nodes_succeeding_gives_zero() {
    let done = svmrun(&["-n", "5", "/bin/sh", "-c", "exit 0"]);
    assert_eq!(done.code(), Some(0), "{}", done.err());
    assert_eq!(done.stderr, b"");
}

#[test]
fn sigterm_is_forwarded_to_every_node() {
    let script = r#"
        trap 'echo "term=$SVM_RANK"; exit 0' TERM
        echo "ready=$SVM_RANK"
        while :; do sleep 0.1; done
    "#;
    let run = start(&["-n", "3", "/bin/sh", "-c", script], &[], None);
    run.wait_stdout("3 ready nodes", |s| s.matches("ready=").count() == 3);
    kill(run.pid, Signal::SIGTERM).unwrap();
    let done = run.finish();
    assert_eq!(done.code(), Some(0), "{}", done.err());
    let ranks = per_rank(&done);
    for r in 0..3 {
        assert_eq!(ranks[&r]["term"], r.to_string(), "{}", done.out());
    }
}

#[test]
fn nodes_ignoring_a_forwarded_signal_are_killed() {
    let script = r#"trap '' INT; echo ready=$SVM_RANK; exec sleep 60"#;
    let run = start(&["-n", "2", "/bin/sh", "-c", script], &[], None);
    run.wait_stdout("2 ready nodes", |s| s.matches("ready=").count() == 2);
    kill(run.pid, Signal::SIGINT).unwrap();
    let done = run.finish();
    assert_eq!(done.code(), Some(137), "{}", done.err());
    assert!(done.err().contains("was killed by signal SIGKILL"));
    assert!(done.elapsed < Duration::from_secs(10), "{:?}", done.elapsed);
}

#[test]
fn stdin_reaches_rank_0_only() {
    let script = r#"read -r line; echo "got=$line""#;
    let done = start(&["-n", "3", "/bin/sh", "-c", script], &[], Some(b"hello\n")).finish();
    assert_eq!(done.code(), Some(0), "{}", done.err());
    let ranks = per_rank(&done);
    assert_eq!(ranks[&0]["got"], "hello");
    assert_eq!(ranks[&1]["got"], "");
    assert_eq!(ranks[&2]["got"], "");
}

#[test]
fn address_randomization_is_off() {
    let done = svmrun(&[
        "-n",
        "2",
        "/bin/sh",
        "-c",
        "echo persona=$(cat /proc/self/personality)",
    ]);
    assert_eq!(done.code(), Some(0), "{}", done.err());
    for env in per_rank(&done).values() {
        let p = u32::from_str_radix(&env["persona"], 16).unwrap();
        assert_ne!(p & 0x0040000, 0, "ADDR_NO_RANDOMIZE not set: {p:#x}");
    }
}

#[test]
fn nonexistent_program_is_reported() {
    let done = svmrun(&["-n", "2", "/nonexistent/svm-program"]);
    assert_eq!(done.code(), Some(2));
    assert!(
        done.err()
            .contains("svmrun: cannot start /nonexistent/svm-program: No such file or directory"),
        "{}",
        done.err()
    );
}

#[test]
fn bad_command_lines_are_rejected() {
    for args in [
        &["-n", "0", "/bin/true"][..],
        &["-n", "1025", "/bin/true"],
        &["-n", "2"],
        &["/bin/true"],
    ] {
        let done = svmrun(args);
        assert_eq!(done.code(), Some(2), "{args:?}: {}", done.err());
        assert!(!done.stderr.is_empty());
    }
    let done = svmrun(&["-n", "2", "--fault", "foo", "/bin/true"]);
    assert_eq!(done.code(), Some(2));
    assert!(done.err().contains("uffd") && done.err().contains("segv"));
    let done = svmrun(&["-n", "2", "--protocol", "tso", "/bin/true"]);
    assert_eq!(done.code(), Some(2));
    assert!(done.err().contains("sc-sw") && done.err().contains("scope"));
    let done = svmrun(&["-n", "2", "--bind", "sideways", "/bin/true"]);
    assert_eq!(done.code(), Some(2));
    assert!(done.err().contains("cpus") && done.err().contains("none"));
}

/// `--bind cpus` (the default) gives every rank its share of svmrun's CPUs as SVM_CPUS;
/// `--bind none` and its twin `SVM_BIND=none` set nothing, and an exported SVM_CPUS is then
/// inherited.
#[test]
fn every_rank_gets_its_share_of_the_cpus_unless_told_not_to() {
    use svm_comm::placement;
    let script = "echo cpus=$SVM_CPUS";
    let allowed = placement::allowed_cpus().expect("svmrun's CPUs");
    let done = svmrun(&["-n", "3", "/bin/sh", "-c", script]);
    assert_eq!(done.code(), Some(0), "{}", done.err());
    for (rank, env) in per_rank(&done) {
        let want = placement::node_cpus(&allowed, 3, rank as usize);
        assert_eq!(
            env["cpus"],
            placement::format_cpu_list(&want),
            "rank {rank}"
        );
    }
    let none = svmrun(&["-n", "2", "--bind", "none", "/bin/sh", "-c", script]);
    let twin = svmrun_env(
        &["-n", "2", "/bin/sh", "-c", script],
        &[("SVM_BIND", "none")],
    );
    let kept = svmrun_env(
        &["-n", "2", "--bind", "none", "/bin/sh", "-c", script],
        &[("SVM_CPUS", "0")],
    );
    for (done, want) in [(none, ""), (twin, ""), (kept, "0")] {
        assert_eq!(done.code(), Some(0), "{}", done.err());
        for env in per_rank(&done).values() {
            assert_eq!(env["cpus"], want);
        }
    }
}

#[test]
fn help_documents_the_env_twins_and_exit_statuses() {
    let done = svmrun(&["--help"]);
    assert_eq!(done.code(), Some(0));
    let help = done.out();
    for word in [
        "SVM_PROTOCOL",
        "SVM_FAULT",
        "SVM_TRANSPORT",
        "SVM_TIMEOUT",
        "SVM_STATS",
        "SVM_VERBOSE",
        "SVM_COORD",
        "--no-prefix",
        "Exit status",
        "128+",
    ] {
        assert!(help.contains(word), "{word} missing from --help");
    }
}
