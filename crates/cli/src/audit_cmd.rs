//! `openphone audit …`: offline checks of the hash-chained audit log. These read the database
//! directly (read-only, without the daemon's lock), so they work next to a running daemon.
//!
//! `head` prints the chain's head as an anchor (`<seq>:<hash>`); kept somewhere the data
//! directory's owner cannot rewrite, it lets `verify --anchor` prove later that the log still
//! holds exactly the records up to that seq — which an offline delete-and-re-hash breaks even
//! though the rewritten chain verifies on its own.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Subcommand, ValueEnum};
use openphone_store::{AnchorCheck, AuditAnchor, BrokenRecord, Store};
use serde::Serialize;

use crate::data_dir::DataDir;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the audit chain; exits 1 and names the first broken record when it is not intact,
    /// or the seq of an anchor the log no longer holds.
    Verify {
        #[command(flatten)]
        data_dir: DataDir,
        /// Also prove the log still holds exactly the records up to this anchor's seq:
        /// `<seq>:<hash>` as printed by `openphone audit head` earlier. Repeatable.
        #[arg(long, value_name = "SEQ:HASH")]
        anchor: Vec<AuditAnchor>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print the chain's head as an anchor, `<seq>:<hash>`, to keep outside the data
    /// directory (see `audit verify --anchor`).
    Head {
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
        /// Only the records of this goal (`goal_…`): its actions' requests and their
        /// confirmations, and the operator's acts on it (`goals create`, `plan`, `retry`, …).
        #[arg(long, value_name = "GOAL")]
        goal: Option<String>,
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

/// `audit verify --json`.
#[derive(Serialize)]
struct VerifyOutput<'a> {
    /// The chain is intact and every anchor holds.
    intact: bool,
    checked: u64,
    last_seq: i64,
    last_hash: &'a str,
    first_broken: &'a Option<BrokenRecord>,
    /// One per `--anchor`, in order (absent without anchors).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    anchors: &'a [AnchorCheck],
}

/// `audit head --json`.
#[derive(Serialize)]
struct HeadOutput<'a> {
    seq: i64,
    hash: &'a str,
    /// `<seq>:<hash>`, the value `audit verify --anchor` takes.
    anchor: String,
}

fn open(data_dir: &DataDir) -> Result<Store> {
    let dir = data_dir.resolve()?;
    Store::open_read_only(&dir)
        .with_context(|| format!("cannot open the audit log in {}", dir.display()))
}

pub fn run(cmd: AuditCommand) -> Result<ExitCode> {
    match cmd {
        AuditCommand::Verify {
            data_dir,
            anchor,
            json,
        } => {
            let report = open(&data_dir)?.verify_audit_anchored(&anchor)?;
            let chain = &report.chain;
            if json {
                let out = VerifyOutput {
                    intact: report.is_intact(),
                    checked: chain.checked,
                    last_seq: chain.last_seq,
                    last_hash: &chain.last_hash,
                    first_broken: &chain.first_broken,
                    anchors: &report.anchors,
                };
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                if let Some(broken) = &chain.first_broken {
                    println!(
                        "audit chain broken at {broken} ({} records checked)",
                        chain.checked
                    );
                } else {
                    println!(
                        "audit chain intact: {} records, head {}",
                        chain.checked, chain.last_hash
                    );
                }
                for check in &report.anchors {
                    println!("{check}");
                }
            }
            Ok(if report.is_intact() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        AuditCommand::Head { data_dir, json } => {
            let head = open(&data_dir)?.audit_head()?;
            if json {
                let out = HeadOutput {
                    seq: head.seq,
                    hash: &head.hash,
                    anchor: head.to_string(),
                };
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!("{head}");
            }
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Export {
            data_dir,
            goal,
            format: Format::Jsonl,
            after,
        } => {
            let store = open(&data_dir)?;
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            for record in store.audit_iter(after, 500) {
                let record = record?;
                if let Some(goal) = &goal
                    && !belongs_to_goal(&record.entry, goal)
                {
                    continue;
                }
                serde_json::to_writer(&mut out, &record)?;
                out.write_all(b"\n")?;
            }
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Whether an audit record belongs to goal `goal_id`: every request of its actions carries
/// the request id and idempotency key `goal_<id>:<action>:<n>` (their confirmations keep the
/// request's id) and runs in the runtime session `goal:<goal_id>:<action>`; the operator's acts
/// on it are recorded under `goal_<id>:op:<method>-<uuid>`.
pub fn belongs_to_goal(entry: &openphone_store::AuditEntry, goal_id: &str) -> bool {
    let prefix = format!("{goal_id}:");
    let session = openphone_protocol::goal_action_sessions_prefix(goal_id);
    entry.request_id.starts_with(&prefix)
        || entry
            .idempotency_key
            .as_deref()
            .is_some_and(|k| k.starts_with(&prefix))
        || entry
            .runtime_session_id
            .as_deref()
            .is_some_and(|s| s.starts_with(&session))
}
