//! `crossbench`: parse the command line, run it, exit with its code. The codes are
//! listed by `crossbench --help` and in README.md, from one enum
//! (`loader::cli::exit::Exit`).

use std::process::ExitCode;

use clap::Parser;
use loader::cli::{dispatch, exit::Exit, exit_of_error, Cli};

// The loader allocates on every batch; glibc's allocator showed up at ~15 % of a
// control-dense profile. mimalloc halves that (docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                Exit::BadInput
            } else {
                Exit::Pass
            };
            let _ = e.print();
            return ExitCode::from(code.code());
        }
    };
    match dispatch(cli) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit_of_error(&e).code())
        }
    }
}
