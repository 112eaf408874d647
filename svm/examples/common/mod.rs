//! What the examples share: the shape of `main`. Each example parses its command line into
//! `Ok(Some(args))`, `Ok(None)` for `-h`/`--help`, or `Err(message)`, and hands that and its
//! run to [`main`], which turns them into the exit status every example documents.

use std::fmt::Display;
use std::process::ExitCode;

/// How a run that returned without an error ends the process.
pub trait Outcome {
    fn exit_code(self) -> ExitCode;
}

/// Nothing to check: exit status 0.
impl Outcome for () {
    fn exit_code(self) -> ExitCode {
        ExitCode::SUCCESS
    }
}

/// Did every check pass? `true`: exit status 0; `false`: 1 (the run has said what failed).
impl Outcome for bool {
    fn exit_code(self) -> ExitCode {
        if self {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}

/// The `main` of the example `name`. Help prints `usage` on stdout and ends with 0; a bad
/// command line prints `NAME: MESSAGE` and `usage` on stderr and ends with 2; otherwise
/// `run(args)` decides, and an error ends with 1 after `NAME: error: ERROR` on stderr.
pub fn main<A, R: Outcome, E: Display>(
    name: &str,
    usage: &str,
    parsed: Result<Option<A>, String>,
    run: impl FnOnce(A) -> Result<R, E>,
) -> ExitCode {
    let args = match parsed {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{usage}");
            return ExitCode::SUCCESS;
        }
        Err(msg) => {
            eprintln!("{name}: {msg}\n{usage}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(outcome) => outcome.exit_code(),
        Err(e) => {
            eprintln!("{name}: error: {e}");
            ExitCode::FAILURE
        }
    }
}
