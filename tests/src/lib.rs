//! Helpers for the multi-process tests: find the built binaries, run `svmrun` under a hard
//! deadline in its own process group, and kill the whole group when the deadline passes, when the
//! test panics, or when a [`Job`] is dropped. Nothing a test starts can outlive it.
//!
//! The binaries are found relative to the test executable: `current_exe()` is
//! `target/<profile>/deps/<name>-<hash>`, `svmrun` is `target/<profile>/svmrun` and the examples are
//! `target/<profile>/examples/<name>`. `cargo test --workspace` builds them before the tests run.

use std::ffi::OsStr;
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// How long the output pipes may stay open after `svmrun` itself has exited. Something still
/// holding them after that is a node that outlived its launcher: the job's group is killed and
/// the run is marked [`Output::lingering`].
const LINGER_GRACE: Duration = Duration::from_secs(3);

/// Environment variables that describe a job to a node. A test started from inside a job (or a
/// shell that exported them) must not leak them into the job it starts.
const BOOTSTRAP_VARS: &[&str] = &["SVM_RANK", "SVM_SIZE", "SVM_COORD", "SVM_JOB_KEY"];

/// `target/<profile>`: the directory holding `deps/`, `examples/` and the workspace's binaries.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe() failed");
    let deps = exe
        .parent()
        .expect("the test executable has no parent directory");
    // Tests run from `target/<profile>/deps/`; be lenient if run from `target/<profile>/`.
    if deps.file_name() == Some(OsStr::new("deps")) {
        deps.parent().expect("deps/ has no parent").to_path_buf()
    } else {
        deps.to_path_buf()
    }
}

fn profile_name() -> String {
    profile_dir()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "debug".to_string())
}

fn build_hint() -> String {
    match profile_name().as_str() {
        "debug" => "cargo build --workspace --lib --bins --examples".to_string(),
        "release" => "cargo build --release --workspace --lib --bins --examples".to_string(),
        other => format!("cargo build --profile {other} --workspace --lib --bins --examples"),
    }
}

fn existing(path: PathBuf, what: &str) -> PathBuf {
    if !path.is_file() {
        panic!(
            "{what} not found at {}: build it first with `{}` (`cargo test --workspace` builds it too)",
            path.display(),
            build_hint()
        );
    }
    path
}

/// Path of the `svmrun` launcher; panics with the build command if it is missing.
pub fn svmrun_path() -> PathBuf {
    existing(profile_dir().join("svmrun"), "the svmrun launcher")
}

/// Path of an example of the `svm` crate (`svm/examples/<name>.rs`); panics with the build command
/// if it is missing.
pub fn example_path(name: &str) -> PathBuf {
    existing(
        profile_dir().join("examples").join(name),
        &format!("example `{name}`"),
    )
}

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises multi-process runs inside one test binary: the machines these run on have two
/// cores, and jobs of four nodes each would oversubscribe them badly if run side by side.
/// A panic in another test (which poisons the lock) does not stop the others.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a finished run printed and how it ended.
#[derive(Debug)]
pub struct Output {
    /// The command line, for diagnostics.
    pub command: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// Wall time from spawn to the exit of `svmrun`.
    pub elapsed: Duration,
    /// Some process of the job kept the output pipes open for more than a few seconds after
    /// `svmrun` exited (it was then killed).
    pub lingering: bool,
}

impl Output {
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Panics with the full diagnostic unless the run exited 0 and left nothing behind.
    pub fn assert_success(&self) -> &Self {
        assert!(self.success(), "expected exit status 0\n{self}");
        assert!(!self.lingering, "a node outlived svmrun\n{self}");
        self
    }

    /// Panics unless stdout contains `needle`.
    pub fn assert_stdout_contains(&self, needle: &str) -> &Self {
        assert!(
            self.stdout.contains(needle),
            "expected `{needle}` on stdout\n{self}"
        );
        self
    }

    /// Panics unless stderr contains `needle`.
    pub fn assert_stderr_contains(&self, needle: &str) -> &Self {
        assert!(
            self.stderr.contains(needle),
            "expected `{needle}` on stderr\n{self}"
        );
        self
    }

    /// The self-checking program `name` passed: exit 0, no node left behind, `PASS <name>` on
    /// stdout and no `FAIL` there.
    pub fn assert_passed(&self, name: &str) -> &Self {
        self.assert_success()
            .assert_stdout_contains(&format!("PASS {name}"));
        assert!(!self.stdout.contains("FAIL"), "{self}");
        self
    }

    /// The stdout lines that contain every one of `words`.
    pub fn stdout_lines_with(&self, words: &[&str]) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| words.iter().all(|w| l.contains(w)))
            .collect()
    }

    /// `"KEY":N` of the JSON statistics object of each of the `nodes` nodes on stderr
    /// (`SVM_STATS=json`: lines `[K] {...}`), in the order printed; panics unless there is
    /// one per node.
    pub fn stat_per_node(&self, nodes: usize, key: &str) -> Vec<u64> {
        let pat = format!("\"{key}\":");
        let values: Vec<u64> = self
            .stderr
            .lines()
            .filter_map(|line| {
                let json = &line[line.find('{')?..];
                let rest = &json[json.find(&pat)? + pat.len()..];
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()
            })
            .collect();
        assert_eq!(
            values.len(),
            nodes,
            "expected one stats object with {key} per node\n{self}"
        );
        values
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "command: {}", self.command)?;
        writeln!(
            f,
            "ended: {} after {:.2} s{}",
            describe_status(&self.status),
            self.elapsed.as_secs_f64(),
            if self.lingering {
                " (a node outlived svmrun and was killed)"
            } else {
                ""
            }
        )?;
        write_stream(f, "stdout", &self.stdout)?;
        write_stream(f, "stderr", &self.stderr)
    }
}

fn describe_status(status: &ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => format!("{status}"),
    }
}

/// Writes at most the last 16 KiB of a stream, which is where the failure usually is.
fn write_stream(f: &mut fmt::Formatter<'_>, name: &str, text: &str) -> fmt::Result {
    const KEEP: usize = 16 * 1024;
    writeln!(f, "----- {name} ({} bytes) -----", text.len())?;
    if text.len() > KEEP {
        let mut cut = text.len() - KEEP;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        writeln!(f, "[... {cut} bytes cut ...]")?;
        writeln!(f, "{}", &text[cut..])
    } else {
        writeln!(f, "{text}")
    }
}

/// A run that did not finish before its deadline (its process group has been killed).
#[derive(Debug)]
pub struct TimedOut {
    pub deadline: Duration,
    /// What the run had printed until then.
    pub output: Output,
}

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "deadline of {:.0} s passed: the job was killed (SIGKILL to its process group)",
            self.deadline.as_secs_f64()
        )?;
        write!(f, "{}", self.output)
    }
}

impl std::error::Error for TimedOut {}

/// One stream of the child, read in a thread: everything it printed, and its lines as they come.
struct Stream {
    text: Arc<Mutex<Vec<u8>>>,
    reader: Option<JoinHandle<()>>,
    done: Receiver<()>,
}

impl Stream {
    fn start<R: Read + Send + 'static>(pipe: R, lines: Option<mpsc::Sender<String>>) -> Stream {
        let text = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&text);
        let (done_tx, done) = mpsc::channel();
        let reader = thread::spawn(move || {
            let mut pipe = BufReader::new(pipe);
            let mut line = Vec::new();
            loop {
                line.clear();
                match pipe.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        sink.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .extend_from_slice(&line);
                        if let Some(tx) = &lines {
                            // The receiver may be gone; the text is kept regardless.
                            let _ = tx.send(String::from_utf8_lossy(&line).into_owned());
                        }
                    }
                }
            }
            let _ = done_tx.send(());
        });
        Stream {
            text,
            reader: Some(reader),
            done,
        }
    }

    fn snapshot(&self) -> String {
        String::from_utf8_lossy(&self.text.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }

    /// Waits until the pipe reaches end of file; false if it did not by `until`.
    fn wait_eof(&mut self, until: Instant) -> bool {
        if self.reader.is_none() {
            return true;
        }
        let left = until.saturating_duration_since(Instant::now());
        match self.done.recv_timeout(left) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                if let Some(h) = self.reader.take() {
                    let _ = h.join();
                }
                true
            }
            Err(RecvTimeoutError::Timeout) => false,
        }
    }
}

/// A running `svmrun` job in its own process group. Dropping it kills the group.
pub struct Job {
    command: String,
    child: Child,
    pgid: Pid,
    start: Instant,
    stdout: Stream,
    stderr: Stream,
    stdout_lines: Receiver<String>,
    status: Option<ExitStatus>,
    exited_at: Option<Instant>,
}

impl Job {
    /// Starts `svmrun ARGS...` with extra environment `envs`, in a new process group.
    pub fn start(args: &[&str], envs: &[(&str, &str)]) -> Job {
        Self::start_program(&svmrun_path(), args, envs)
    }

    /// Starts any program the same way (own process group, output captured).
    pub fn start_program(program: &Path, args: &[&str], envs: &[(&str, &str)]) -> Job {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for var in BOOTSTRAP_VARS {
            cmd.env_remove(var);
        }
        for (k, v) in envs {
            cmd.env(k, v);
        }
        cmd.process_group(0);
        let mut command = envs
            .iter()
            .map(|(k, v)| format!("{k}={v} "))
            .collect::<String>();
        command.push_str(&program.display().to_string());
        for a in args {
            command.push(' ');
            command.push_str(a);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{command}`: {e}"));
        let pid = i32::try_from(child.id()).expect("pid does not fit in i32");
        let (line_tx, stdout_lines) = mpsc::channel();
        let stdout = Stream::start(child.stdout.take().expect("stdout is piped"), Some(line_tx));
        let stderr = Stream::start(child.stderr.take().expect("stderr is piped"), None);
        Job {
            command,
            child,
            pgid: Pid::from_raw(pid),
            start: Instant::now(),
            stdout,
            stderr,
            stdout_lines,
            status: None,
            exited_at: None,
        }
    }

    /// Process id of `svmrun` (also the id of the job's process group).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Time since the job started.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// SIGKILL to every process of the job's group. Harmless if they are already gone.
    pub fn kill_group(&self) {
        match killpg(self.pgid, Signal::SIGKILL) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => eprintln!("svm-tests: killpg({}) failed: {e}", self.pgid),
        }
    }

    /// The next stdout line (without the newline) for which `pred` holds, waiting at most
    /// `timeout`. Lines that do not match are skipped (they stay in the final output).
    pub fn wait_for_line(
        &mut self,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> Option<String> {
        let until = Instant::now() + timeout;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.stdout_lines.recv_timeout(left) {
                Ok(line) => {
                    let line = line.trim_end_matches(['\n', '\r']).to_string();
                    if pred(&line) {
                        return Some(line);
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// Has `svmrun` exited? Does not block.
    pub fn has_exited(&mut self) -> bool {
        self.poll_exit();
        self.status.is_some()
    }

    fn poll_exit(&mut self) {
        if self.status.is_none() {
            if let Ok(Some(st)) = self.child.try_wait() {
                self.status = Some(st);
                self.exited_at = Some(Instant::now());
            }
        }
    }

    /// Output so far, as an [`Output`] whose status is a placeholder if the job still runs.
    fn snapshot(&self, status: ExitStatus, lingering: bool) -> Output {
        Output {
            command: self.command.clone(),
            status,
            stdout: self.stdout.snapshot(),
            stderr: self.stderr.snapshot(),
            elapsed: self
                .exited_at
                .unwrap_or_else(Instant::now)
                .duration_since(self.start),
            lingering,
        }
    }

    /// Everything printed so far (for diagnostics while the job runs).
    pub fn output_so_far(&self) -> String {
        format!(
            "command: {}\n----- stdout -----\n{}\n----- stderr -----\n{}",
            self.command,
            self.stdout.snapshot(),
            self.stderr.snapshot()
        )
    }

    /// Waits until `svmrun` exits, at most `deadline` after the job started. On time: collects
    /// the output (killing the group if a node keeps the pipes open). Past the deadline: kills
    /// the group and returns [`TimedOut`] with the output so far.
    pub fn wait(mut self, deadline: Duration) -> Result<Output, Box<TimedOut>> {
        let until = self.start + deadline;
        loop {
            self.poll_exit();
            if self.status.is_some() || Instant::now() >= until {
                break;
            }
            thread::sleep(Duration::from_millis(5));
        }
        let Some(status) = self.status else {
            self.kill_group();
            let status = self
                .child
                .wait()
                .unwrap_or_else(|_| ExitStatus::from_raw(9));
            self.status = Some(status);
            let grace = Instant::now() + LINGER_GRACE;
            self.stdout.wait_eof(grace);
            self.stderr.wait_eof(grace);
            let output = self.snapshot(status, false);
            return Err(Box::new(TimedOut { deadline, output }));
        };
        let grace = Instant::now() + LINGER_GRACE;
        let mut closed = self.stdout.wait_eof(grace);
        closed &= self.stderr.wait_eof(grace);
        if !closed {
            self.kill_group();
            let grace = Instant::now() + LINGER_GRACE;
            self.stdout.wait_eof(grace);
            self.stderr.wait_eof(grace);
        }
        Ok(self.snapshot(status, !closed))
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // Always: covers a panicking test, and nodes left behind by an exited svmrun.
        self.kill_group();
        if self.status.is_none() {
            let _ = self.child.wait();
        }
    }
}

/// Runs `svmrun ARGS...` and returns its output, or the output so far if `deadline` passed (the
/// process group is killed then).
pub fn try_run_svmrun_env(
    args: &[&str],
    envs: &[(&str, &str)],
    deadline: Duration,
) -> Result<Output, Box<TimedOut>> {
    Job::start(args, envs).wait(deadline)
}

/// Runs `svmrun ARGS...` with a hard deadline; panics with a diagnostic (including everything
/// printed so far) if the deadline passes. The process group is killed in every case.
pub fn run_svmrun(args: &[&str], deadline: Duration) -> Output {
    run_svmrun_env(args, &[], deadline)
}

/// [`run_svmrun`] with extra environment variables.
pub fn run_svmrun_env(args: &[&str], envs: &[(&str, &str)], deadline: Duration) -> Output {
    match try_run_svmrun_env(args, envs, deadline) {
        Ok(out) => out,
        Err(timed_out) => panic!("{timed_out}"),
    }
}

/// `svmrun -n NODES --fault FAULT <example> ARGS...` under `deadline`, serialised with the
/// other multi-process runs of this test binary.
pub fn run_example(
    nodes: usize,
    fault: &str,
    example: &str,
    args: &[&str],
    deadline: Duration,
) -> Output {
    let n = nodes.to_string();
    run_example_with(&["-n", &n, "--fault", fault], example, args, deadline)
}

/// `svmrun FLAGS... <example> ARGS...` under `deadline` (e.g. FLAGS = `-n 3 --protocol sc-mw`),
/// serialised with the other multi-process runs of this test binary.
pub fn run_example_with(
    flags: &[&str],
    example: &str,
    args: &[&str],
    deadline: Duration,
) -> Output {
    let exe = example_path(example);
    let exe = exe.to_str().expect("non-UTF-8 target path");
    let mut full = flags.to_vec();
    full.push(exe);
    full.extend_from_slice(args);
    let _serial = serial();
    run_svmrun(&full, deadline)
}

/// Parses `key=value` out of a line of whitespace-separated words.
pub fn word_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("cannot bind 127.0.0.1:0");
    l.local_addr().expect("local_addr").port()
}

// ---------------------------------------------------------------- C programs

/// The workspace root (the parent of `tests/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Does `tool --version` run and exit 0?
pub fn tool_runs(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// `svm-config`, built next to `svmrun`; panics with the build command if it is missing.
pub fn svm_config() -> PathBuf {
    let path = profile_dir().join("svm-config");
    assert!(
        path.is_file(),
        "svm-config not found at {}: build it with `cargo build --workspace --bins` \
         (`cargo test --workspace` builds it too)",
        path.display()
    );
    path
}

/// A fresh directory for one test's files, `svm-SUITE-PID-NAME` in the temporary directory,
/// removed when the test passes (kept for inspection when it panics).
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(suite: &str, name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("svm-{suite}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        Scratch(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Runs `script` with `sh -c` in this directory, with `svm-config` on the PATH; panics with
    /// its output if it fails.
    pub fn shell(&self, script: &str) {
        let bin = svm_config();
        let bin_dir = bin.parent().expect("svm-config has a directory");
        let path = match std::env::var_os("PATH") {
            Some(p) => {
                let mut dirs = vec![bin_dir.to_path_buf()];
                dirs.extend(std::env::split_paths(&p));
                std::env::join_paths(dirs).expect("PATH")
            }
            None => bin_dir.as_os_str().to_owned(),
        };
        let out = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(&self.0)
            .env("PATH", path)
            .output()
            .expect("cannot run sh");
        assert!(
            out.status.success(),
            "in {}:\n$ {script}\nfailed ({})\n----- stdout -----\n{}\n----- stderr -----\n{}",
            self.0.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// One C personality (`cvm`, `smi`, `splash`): its programs link against the runtime
/// `target/<profile>/libsvm_NAME.so` (the cdylib of the crate `svm-api-NAME`) through
/// `svm-config`, and run under `svmrun`.
#[derive(Debug, Clone, Copy)]
pub struct CSuite {
    /// The personality: `svm-config --libs NAME`, and the name of the temporary directories.
    pub name: &'static str,
    /// The tools a build needs besides `svm-config`, e.g. `["m4", "cc"]`.
    pub tools: &'static [&'static str],
    /// Per run of a program; it only catches hangs.
    pub deadline: Duration,
}

impl CSuite {
    /// A fresh [`Scratch`] directory for the test `name`.
    pub fn scratch(&self, name: &str) -> Scratch {
        Scratch::new(self.name, name)
    }

    /// Panics with an installation hint unless `tool --version` runs.
    pub fn require_tool(&self, tool: &str) {
        let package = match tool {
            "cc" => "gcc libc6-dev",
            other => other,
        };
        assert!(
            tool_runs(tool),
            "`{tool}` is not installed or does not run: the {} tests need {}; install it, e.g. \
             `apt-get install {package}` (.ci/run does)",
            self.name.to_uppercase(),
            self.tools.join(" and "),
        );
    }

    /// The runtime must exist: the programs link against it. A missing runtime is a failure,
    /// not a reason to skip.
    pub fn require_runtime(&self) {
        let lib = profile_dir().join(format!("libsvm_{}.so", self.name));
        assert!(
            lib.is_file(),
            "the {} runtime {} is not built: it is the cdylib of the crate svm-api-{}, which \
             must be a member of the workspace (`cargo build --workspace` then builds it)",
            self.name.to_uppercase(),
            lib.display(),
            self.name
        );
    }

    /// Builds the program `name` in `scratch`: checks the tools and the runtime, copies
    /// `sources` into `scratch`, and runs `script` (the documented build command, which must
    /// write the executable `name`) there with `svm-config` on the PATH.
    pub fn build(
        &self,
        scratch: &Scratch,
        name: &str,
        sources: &[PathBuf],
        script: &str,
    ) -> CProgram {
        for tool in self.tools {
            self.require_tool(tool);
        }
        self.require_runtime();
        for src in sources {
            let file = src.file_name().expect("a source file has a name");
            std::fs::copy(src, scratch.path().join(file))
                .unwrap_or_else(|e| panic!("cannot copy {}: {e}", src.display()));
        }
        scratch.shell(script);
        CProgram {
            exe: scratch.path().join(name),
            deadline: self.deadline,
        }
    }
}

/// A C program built by [`CSuite::build`].
#[derive(Debug, Clone)]
pub struct CProgram {
    pub exe: PathBuf,
    deadline: Duration,
}

impl CProgram {
    /// `svmrun -n NODES FLAGS... EXE ARGS...` with extra environment `envs`, under the suite's
    /// deadline, serialised with the other multi-process runs of this test binary.
    pub fn run<S: AsRef<str>>(
        &self,
        nodes: usize,
        flags: &[&str],
        args: &[S],
        envs: &[(&str, &str)],
    ) -> Output {
        let n = nodes.to_string();
        let mut full = vec!["-n", n.as_str()];
        full.extend_from_slice(flags);
        full.push(self.exe.to_str().expect("utf-8 path"));
        full.extend(args.iter().map(AsRef::as_ref));
        let _serial = serial();
        run_svmrun_env(&full, envs, self.deadline)
    }

    /// Runs the program at every node count of `nodes` with every fault backend of `faults`
    /// (`svmrun -n N --fault F EXE ARGS...`, the arguments from `args(N)`) and hands each
    /// output to `check(N, &output)`.
    pub fn run_matrix(
        &self,
        nodes: &[usize],
        faults: &[&str],
        args: impl Fn(usize) -> Vec<String>,
        envs: &[(&str, &str)],
        check: impl Fn(usize, &Output),
    ) {
        for &n in nodes {
            for &fault in faults {
                let out = self.run(n, &["--fault", fault], &args(n), envs);
                check(n, &out);
            }
        }
    }
}

/// Splits `s` into its whitespace-separated words, e.g. to build a program's arguments.
pub fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

/// Waits for every node of a job started node by node (the whole set shares `deadline` from
/// now); a node past it is killed and the test fails naming it.
pub fn wait_nodes(jobs: Vec<Job>, deadline: Duration) -> Vec<Output> {
    let start = Instant::now();
    jobs.into_iter()
        .enumerate()
        .map(|(rank, j)| {
            let left = deadline.saturating_sub(start.elapsed()) + j.elapsed();
            j.wait(left)
                .unwrap_or_else(|t| panic!("node {rank} did not finish in time\n{t}"))
        })
        .collect()
}

/// The outputs of a job's nodes, one section per rank, for assertion messages.
pub fn show_nodes(outs: &[Output]) -> String {
    outs.iter()
        .enumerate()
        .map(|(r, o)| format!("==== node {r}\n{o}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_value_finds_exact_keys() {
        let line = "checksum=1.5e0 time_s=0.25 OK";
        assert_eq!(word_value(line, "checksum"), Some("1.5e0"));
        assert_eq!(word_value(line, "time_s"), Some("0.25"));
        assert_eq!(word_value(line, "time"), None);
        assert_eq!(word_value(line, "OK"), None);
    }

    #[test]
    fn deadline_kills_the_group_and_keeps_the_output() {
        let sh = Path::new("/bin/sh");
        let job = Job::start_program(sh, &["-c", "echo started; sleep 30 & sleep 30"], &[]);
        let t = Instant::now();
        let err = job
            .wait(Duration::from_millis(500))
            .expect_err("sleep 30 cannot finish in 0.5 s");
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "took {:?}",
            t.elapsed()
        );
        assert!(err.output.stdout.contains("started"), "{err}");
        assert!(err.to_string().contains("deadline"), "{err}");
    }

    #[test]
    fn a_background_process_holding_the_pipes_is_reported_and_killed() {
        let sh = Path::new("/bin/sh");
        let job = Job::start_program(sh, &["-c", "sleep 30 & echo bye"], &[]);
        let out = job.wait(Duration::from_secs(20)).expect("sh exits at once");
        assert!(out.success(), "{out}");
        assert!(out.lingering, "{out}");
        assert!(out.elapsed < Duration::from_secs(5), "{out}");
    }

    #[test]
    fn exit_status_and_streams_are_reported() {
        let sh = Path::new("/bin/sh");
        let out = Job::start_program(sh, &["-c", "echo out; echo err >&2; exit 3"], &[])
            .wait(Duration::from_secs(20))
            .expect("sh exits at once");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
        assert!(!out.lingering);
    }
}
