//! Command line of `svmrun`.
//!
//! Every flag has an `SVM_*` environment twin. A flag that is given overrides the environment;
//! a flag that is not given leaves whatever the user exported untouched (the nodes inherit
//! svmrun's environment).

use std::ffi::OsString;

use clap::{Parser, ValueEnum};

/// Most nodes one `svmrun` starts.
pub const MAX_NODES: u32 = 1024;

const AFTER_HELP: &str = "\
Environment given to every node:
  SVM_RANK           0..N-1
  SVM_SIZE           N
  SVM_COORD          HOST:PORT of the rendezvous (rank 0)
  SVM_COORD_FD       fd of the rendezvous listener bound by svmrun (only without --coord/SVM_COORD)
  SVM_JOB_KEY        64 hex chars, random per run (an exported SVM_JOB_KEY is kept)
  SVM_LAUNCHER_PID   pid of svmrun; nodes die with it
  SVM_PROTOCOL, SVM_FAULT, SVM_TRANSPORT, SVM_TIMEOUT, SVM_STATS, SVM_VERBOSE,
  SVM_PROFILE, SVM_TRACE
                     set only when the matching flag is given; otherwise inherited
  SVM_CPUS           the CPUs the node runs on (--bind cpus, the default: svmrun's own CPUs
                     split into one share per node; with more nodes than CPUs one CPU
                     each, neighbouring ranks together); with --bind none, inherited

Output: each node's stdout/stderr goes to svmrun's stdout/stderr line by line, prefixed
\"[RANK] \" unless --no-prefix. stdin goes to rank 0; the other ranks read /dev/null.
SIGINT, SIGTERM and SIGHUP are forwarded to every node; nodes still alive 3 s later are killed.

Exit status:
  0        every node exited 0
  S        the first node to fail exited with status S (the others get SIGTERM, then SIGKILL
           after 1 s); svmrun prints \"svmrun: node K exited with status S\"
  128+SIG  the first node to fail was killed by signal SIG
           (\"svmrun: node K was killed by signal NAME\")
  2        bad command line, or PROGRAM (or the rendezvous) could not be started

See docs/svmrun.md for running under Slurm or mpirun instead.";

/// Starts the N nodes of an svm job on this host.
#[derive(Debug, Parser)]
#[command(
    name = "svmrun",
    version,
    about = "Starts the N nodes of an svm (distributed shared memory) job on this host",
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// Number of nodes to start (1..=1024); the nodes see it as SVM_SIZE
    #[arg(short = 'n', value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_NODES)))]
    pub nodes: u32,

    /// Coherence protocol [env: SVM_PROTOCOL]
    #[arg(long, value_enum, value_name = "PROTOCOL")]
    pub protocol: Option<ProtocolArg>,

    /// How page faults are caught [env: SVM_FAULT]
    #[arg(long, value_enum, value_name = "BACKEND")]
    pub fault: Option<FaultArg>,

    /// How nodes talk: TCP, DECK shared memory, or per peer [env: SVM_TRANSPORT]
    #[arg(long, value_enum, value_name = "TRANSPORT")]
    pub transport: Option<TransportArg>,

    /// Deadline in seconds of every blocking wait inside the nodes [env: SVM_TIMEOUT]
    #[arg(long, value_name = "SECS", value_parser = parse_timeout)]
    pub timeout: Option<String>,

    /// Print protocol statistics at exit [env: SVM_STATS=1]
    #[arg(long)]
    pub stats: bool,

    /// Verbose runtime messages (and svmrun's own) [env: SVM_VERBOSE=1]
    #[arg(long)]
    pub verbose: bool,

    /// Write one profile of the whole job: Markdown at FILE, JSON at FILE.json (hot pages,
    /// their allocation sites and sharing class, locks, barriers; docs/profiling.md)
    /// [env: SVM_PROFILE]
    #[arg(long, value_name = "FILE")]
    pub profile: Option<std::path::PathBuf>,

    /// Write a Chrome trace-event JSON of the whole job to FILE (opens in Perfetto)
    /// [env: SVM_TRACE]
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,

    /// Rendezvous address that rank 0 binds itself, instead of a listener bound by svmrun
    /// [env: SVM_COORD]
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_coord)]
    pub coord: Option<String>,

    /// Where the nodes run: `cpus` gives each node CPUs of its own out of svmrun's (passed
    /// as SVM_CPUS; `taskset -c 2-3 svmrun …` uses CPUs 2 and 3), `none` leaves placement to
    /// the scheduler
    #[arg(
        long,
        value_enum,
        value_name = "HOW",
        env = "SVM_BIND",
        default_value = "cpus"
    )]
    pub bind: BindArg,

    /// Do not prefix the nodes' output lines with "[RANK] "
    #[arg(long)]
    pub no_prefix: bool,

    /// PROGRAM every node runs (looked up in PATH when it has no '/'), then its ARGS, passed
    /// untouched: everything after PROGRAM belongs to the program, even words that look like
    /// svmrun's own flags (`svmrun -n 4 ./LU -n 512`).
    #[arg(
        value_name = "PROGRAM [ARGS]",
        required = true,
        num_args = 1..,
        trailing_var_arg = true
    )]
    pub command: Vec<OsString>,
}

impl Cli {
    /// The program every node runs.
    pub fn program(&self) -> &OsString {
        &self.command[0]
    }

    /// The program's arguments.
    pub fn args(&self) -> &[OsString] {
        &self.command[1..]
    }
}

/// `--protocol` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProtocolArg {
    /// Sequential consistency, single writer
    #[value(name = "sc-sw")]
    ScSw,
    /// Sequential consistency, multiple writers (twins and diffs)
    #[value(name = "sc-mw")]
    ScMw,
    /// Scope consistency
    #[value(name = "scope")]
    Scope,
}

/// `--bind` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BindArg {
    /// Each node on CPUs of its own (SVM_CPUS)
    Cpus,
    /// Wherever the scheduler puts them
    None,
}

/// `--fault` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FaultArg {
    /// userfaultfd
    Uffd,
    /// mprotect + SIGSEGV handler
    Segv,
}

/// `--transport` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// TCP between every pair of nodes (Unix-domain sockets between the nodes of one host
    /// unless SVM_UNIX_SOCKETS=0)
    Tcp,
    /// DECK over shared memory (one host)
    Deck,
    /// Shared memory on the same host, TCP otherwise
    Auto,
}

fn value_name<T: ValueEnum>(v: T) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_owned())
        .unwrap_or_default()
}

impl Cli {
    /// The `SVM_*` variables set by the flags that were given, in a fixed order.
    pub fn flag_env(&self) -> Vec<(&'static str, String)> {
        let mut env = Vec::new();
        if let Some(p) = self.protocol {
            env.push(("SVM_PROTOCOL", value_name(p)));
        }
        if let Some(f) = self.fault {
            env.push(("SVM_FAULT", value_name(f)));
        }
        if let Some(t) = self.transport {
            env.push(("SVM_TRANSPORT", value_name(t)));
        }
        if let Some(t) = &self.timeout {
            env.push(("SVM_TIMEOUT", t.clone()));
        }
        if self.stats {
            env.push(("SVM_STATS", "1".to_owned()));
        }
        if self.verbose {
            env.push(("SVM_VERBOSE", "1".to_owned()));
        }
        // Absolute, so that every node writes beside the same file whatever its directory.
        if let Some(p) = &self.profile {
            env.push(("SVM_PROFILE", absolute(p)));
        }
        if let Some(t) = &self.trace {
            env.push(("SVM_TRACE", absolute(t)));
        }
        env
    }
}

fn absolute(p: &std::path::Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

/// Accepts a positive, finite number of seconds (`30`, `2.5`), passed on as written.
fn parse_timeout(s: &str) -> Result<String, String> {
    match s.trim().parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs.is_finite() => Ok(s.trim().to_owned()),
        _ => Err(format!("'{s}' is not a positive number of seconds")),
    }
}

/// Accepts `HOST:PORT` (HOST may be a bracketed IPv6 address) with a non-zero port.
fn parse_coord(s: &str) -> Result<String, String> {
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("'{s}' is not HOST:PORT"))?;
    if host.is_empty() || host == "[]" {
        return Err(format!("'{s}' has an empty host"));
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("'{port}' is not a port number (1..=65535)")),
        Ok(_) => Ok(s.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("svmrun").chain(args.iter().copied()))
    }

    #[test]
    fn program_options_that_look_like_svmrun_flags_stay_with_the_program() {
        let cli = parse(&["-n", "4", "./LU", "-n", "512", "-p4"]).unwrap();
        assert_eq!(cli.program(), "./LU");
        assert_eq!(cli.args(), ["-n", "512", "-p4"]);
    }

    #[test]
    fn definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn program_arguments_are_untouched() {
        let cli = parse(&["-n", "2", "./prog", "--verify", "-x", "-n", "5", "--", "y"]).unwrap();
        assert_eq!(cli.nodes, 2);
        assert_eq!(cli.program(), "./prog");
        assert_eq!(cli.args(), ["--verify", "-x", "-n", "5", "--", "y"]);
    }

    #[test]
    fn flags_become_env() {
        let cli = parse(&[
            "-n",
            "3",
            "--protocol",
            "sc-mw",
            "--fault",
            "segv",
            "--transport",
            "deck",
            "--timeout",
            "30",
            "--stats",
            "--verbose",
            "prog",
        ])
        .unwrap();
        assert_eq!(
            cli.flag_env(),
            [
                ("SVM_PROTOCOL", "sc-mw".to_owned()),
                ("SVM_FAULT", "segv".to_owned()),
                ("SVM_TRANSPORT", "deck".to_owned()),
                ("SVM_TIMEOUT", "30".to_owned()),
                ("SVM_STATS", "1".to_owned()),
                ("SVM_VERBOSE", "1".to_owned()),
            ]
        );
        assert!(parse(&["-n", "1", "prog"]).unwrap().flag_env().is_empty());
        let cli = parse(&[
            "-n",
            "2",
            "--profile",
            "/tmp/p.md",
            "--trace",
            "t.json",
            "prog",
        ]);
        let env = cli.unwrap().flag_env();
        assert_eq!(env[0], ("SVM_PROFILE", "/tmp/p.md".to_owned()));
        assert_eq!(env[1].0, "SVM_TRACE");
        assert!(env[1].1.starts_with('/') && env[1].1.ends_with("/t.json"));
    }

    #[test]
    fn bad_values_are_rejected() {
        assert!(parse(&["-n", "0", "prog"]).is_err());
        assert!(parse(&["-n", "1025", "prog"]).is_err());
        assert!(parse(&["-n", "1024", "prog"]).is_ok());
        assert!(parse(&["-n", "2"]).is_err());
        assert!(parse(&["prog"]).is_err());
        assert!(parse(&["-n", "2", "--fault", "foo", "prog"]).is_err());
        assert!(parse(&["-n", "2", "--timeout", "0", "prog"]).is_err());
        assert!(parse(&["-n", "2", "--timeout", "-1", "prog"]).is_err());
        assert!(parse(&["-n", "2", "--timeout", "inf", "prog"]).is_err());
        assert!(parse(&["-n", "2", "--timeout", "x", "prog"]).is_err());
        let cli = parse(&["-n", "2", "--timeout", "2.5", "prog"]).unwrap();
        assert_eq!(cli.timeout.as_deref(), Some("2.5"));
        assert!(parse(&["-n", "2", "--coord", "localhost", "prog"]).is_err());
        assert!(parse(&["-n", "2", "--coord", "h:0", "prog"]).is_err());
        assert!(parse(&["-n", "2", "--coord", ":80", "prog"]).is_err());
    }

    #[test]
    fn unknown_options_before_the_program_are_errors() {
        let e = parse(&["--bogus", "-n", "2", "prog"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{e}");
        assert!(e.to_string().contains("--bogus"), "{e}");
        assert!(parse(&["-n", "2", "--bogus", "prog"]).is_err());
        assert!(parse(&["-n", "2", "-q", "prog"]).is_err());
        // After `--`, a program whose name starts with '-' is fine.
        let cli = parse(&["-n", "2", "--", "-prog", "--bogus"]).unwrap();
        assert_eq!(cli.program(), "-prog");
        assert_eq!(cli.args(), ["--bogus"]);
    }

    #[test]
    fn coord_forms() {
        assert_eq!(parse_coord("node0:7000").unwrap(), "node0:7000");
        assert_eq!(parse_coord("[::1]:7000").unwrap(), "[::1]:7000");
        assert!(parse_coord("node0:x").is_err());
    }
}
