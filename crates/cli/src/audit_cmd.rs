//! `openphone audit …`: offline checks of the hash-chained audit log. These read the database
//! directly (read-only, without the daemon's lock), so they work next to a running daemon.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Subcommand, ValueEnum};
use openphone_store::Store;
use serde_json::json;

use crate::data_dir::DataDir;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the audit chain; exits 1 and names the first broken record when it is not intact.
    Verify {
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stream the audit log to stdout, oldest first.
    Export {
        #[command(flatten)]
        data_dir: DataDir,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Jsonl)]
        format: Format,
        /// Start after this sequence number.
        #[arg(long, default_value_t = 0)]
        after: i64,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// One JSON record per line.
    Jsonl,
}

fn open(data_dir: &DataDir) -> Result<Store> {
    let dir = data_dir.resolve()?;
    Store::open_read_only(&dir)
        .with_context(|| format!("cannot open the audit log in {}", dir.display()))
}

pub fn run(cmd: AuditCommand) -> Result<ExitCode> {
    match cmd {
        AuditCommand::Verify { data_dir, json } => {
            let report = open(&data_dir)?.verify_audit()?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&json!({
                        "intact": report.is_intact(),
                        "checked": report.checked,
                        "last_seq": report.last_seq,
                        "last_hash": report.last_hash,
                        "first_broken": report.first_broken,
                    }))?
                );
            } else if let Some(broken) = &report.first_broken {
                println!(
                    "audit chain broken at {broken} ({} records checked)",
                    report.checked
                );
            } else {
                println!(
                    "audit chain intact: {} records, head {}",
                    report.checked, report.last_hash
                );
            }
            Ok(if report.is_intact() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        AuditCommand::Export {
            data_dir,
            format: Format::Jsonl,
            after,
        } => {
            let store = open(&data_dir)?;
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            for record in store.audit_iter(after, 500) {
                let record = record?;
                serde_json::to_writer(&mut out, &record)?;
                out.write_all(b"\n")?;
            }
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
