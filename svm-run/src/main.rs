//! `svmrun`: starts the N nodes of an svm job on this host (see `docs/svmrun.md`).

#![forbid(unsafe_code)]

mod cli;
mod job;
mod output;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    let code = match job::run(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("svmrun: {e}");
            job::EXIT_LAUNCH
        }
    };
    std::process::exit(code);
}
