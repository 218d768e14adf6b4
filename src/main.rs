//! `sparse-gcn`: train and evaluate GCNs on large sparse graphs from the command line. The
//! subcommands live in `src/cli/`, one file each.

// Library and binary code never unwraps: bad input gets a typed error (tests may unwrap).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
