//! `openphone`: the OpenPhone runtime's one user-facing binary.
//!
//! Today it offers the offline protocol tools (`openphone protocol …`) and `openphone info`.
//! The daemon (`openphone serve`) and the client commands that talk to it come with the daemon
//! work; every command added here keeps the same conventions: `--json` where a machine reads
//! the output, exit code 0 for success, 1 when the thing checked is bad, 2 for unusable input.

mod audit_cmd;
mod data_dir;
mod protocol_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The OpenPhone runtime: a phone as a trusted endpoint for AI agents.
#[derive(Debug, Parser)]
#[command(name = "openphone", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect and check the protocol manifests, hash params, validate tool params (offline).
    #[command(subcommand)]
    Protocol(protocol_cmd::ProtocolCommand),
    /// Verify or export the hash-chained audit log of a data directory (offline).
    #[command(subcommand)]
    Audit(audit_cmd::AuditCommand),
    /// Print version information, including the supported runtime-protocol range.
    Info {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Protocol(cmd) => protocol_cmd::run(cmd),
        Command::Audit(cmd) => audit_cmd::run(cmd),
        Command::Info { json } => info(json),
    };
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("openphone: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn info(json: bool) -> anyhow::Result<ExitCode> {
    let advert = openphone_protocol::VersionAdvertisement::current();
    if json {
        let value = serde_json::json!({
            "name": "openphone",
            "version": env!("CARGO_PKG_VERSION"),
            "runtime_protocol": advert,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("openphone {}", env!("CARGO_PKG_VERSION"));
        println!(
            "runtime protocol: {} versions {}..={}",
            advert.name, advert.min_version, advert.max_version
        );
    }
    Ok(ExitCode::SUCCESS)
}
