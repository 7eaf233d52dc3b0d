//! `openphone policy …`: the tool profiles and `policy explain`.

mod explain;
mod profiles;

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

/// `openphone policy` subcommands.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// The tool profiles and the commands each one offers (offline).
    Profiles(profiles::ProfilesArgs),
    /// Dry-run one request through the daemon's policy stack: every layer's verdict and
    /// reason, the merged decision, and what would change it.
    Explain(explain::ExplainArgs),
}

/// Runs a `policy` subcommand.
pub fn run(cmd: PolicyCommand) -> Result<ExitCode> {
    match cmd {
        PolicyCommand::Profiles(args) => profiles::run(args),
        PolicyCommand::Explain(args) => explain::run(args),
    }
}
