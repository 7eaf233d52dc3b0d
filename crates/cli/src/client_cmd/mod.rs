//! Client commands: `status`, `tools list|invoke`, `confirmations list|approve|deny`,
//! `runtimes list|select`, `sessions list|cancel` and `ask`. Each finds its daemon through the data
//! directory and acts with the operator credential.
//!
//! This file holds `status`, `tools` and what the others share (printing a tool result,
//! announcing and waiting out a confirmation); `confirmations`, `sessions` (with `ask`) and
//! `runtimes` have a file each.

mod confirmations;
mod runtimes;
mod sessions;

pub use confirmations::{ConfirmationsCommand, confirmations};
pub use runtimes::{RuntimesCommand, runtimes};
pub use sessions::{AskOptions, SessionsCommand, ask, autonomy_arg, sessions};

/// The runner and the JSON printer every command uses (defined in [`crate::output`]).
pub(crate) use crate::output::{block_on, print_json};

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use openphone_protocol::endpoint::{
    ApprovalInfo, ApprovalsList, ApprovalsListParams, Event, ToolsInvoke, ToolsInvokeParams,
    ToolsList, ToolsListParams,
};
use openphone_protocol::{
    CanonicalError, PendingConfirmation, ToolResult, ToolStatus, parse_json_strict,
};
use serde::Serialize;
use serde_json::Value;

use crate::client::DaemonClient;
use crate::data_dir::DataDir;

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// The commands the operator may use.
    List {
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Invoke a command; exits 0 for ok, 3 for needs_confirmation, 1 otherwise.
    Invoke {
        /// Command name or alias, e.g. `openphone.screen.get`.
        command: String,
        /// Params as a JSON object.
        #[arg(default_value = "{}")]
        params: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Autonomy for this request (the operator may name any mode): observe_only,
        /// ask_before_action or trusted_actions.
        #[arg(long, value_parser = autonomy_arg)]
        autonomy: Option<String>,
        /// Retries with the same key, tool and params join the first request (its
        /// confirmation or its recorded result) instead of running again.
        #[arg(long)]
        idempotency_key: Option<String>,
        /// The request's timeout in seconds: how long a confirmation waits for the user
        /// (the daemon's default, 30 s, when absent; at most 600).
        #[arg(long, value_name = "SECS")]
        timeout_secs: Option<u64>,
        /// The same in milliseconds: the older spelling, kept for existing scripts.
        #[arg(long, hide = true, conflicts_with = "timeout_secs")]
        timeout_ms: Option<i64>,
        /// Why (recorded in the audit); defaults to a CLI note.
        #[arg(long)]
        reason: Option<String>,
        /// Answer at once with `needs_confirmation` instead of waiting for the user.
        #[arg(long)]
        no_wait: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// A fresh request id for one CLI invocation: `cli-<uuid v4>` (random, so two invocations in
/// the same millisecond still differ, and no clock is read).
fn request_id() -> String {
    format!("cli-{}", uuid::Uuid::new_v4())
}

/// Exit code of a tool result: 0 ok, 3 needs_confirmation, 1 anything else.
fn result_exit(result: &ToolResult) -> ExitCode {
    match result.status {
        ToolStatus::Ok => ExitCode::SUCCESS,
        ToolStatus::NeedsConfirmation => ExitCode::from(3),
        ToolStatus::Denied | ToolStatus::Error | ToolStatus::Timeout | ToolStatus::Cancelled => {
            ExitCode::from(1)
        }
    }
}

fn print_result(result: &ToolResult, json: bool) -> Result<ExitCode> {
    if json {
        print_json(result)?;
    } else {
        println!("status: {}", result.status.as_str());
        if let Some(err) = &result.error {
            println!("error: {} — {}", err.code.as_str(), err.message);
        }
        match result.status {
            ToolStatus::NeedsConfirmation => {
                let pending = result
                    .pending_confirmation()
                    .context("a needs_confirmation result without its confirmation")?;
                println!(
                    "confirmation: {}  ({})",
                    pending.confirmation_id, pending.summary
                );
                println!(
                    "approve with `openphone confirmations approve {}`",
                    pending.confirmation_id
                );
            }
            ToolStatus::Ok
            | ToolStatus::Denied
            | ToolStatus::Error
            | ToolStatus::Timeout
            | ToolStatus::Cancelled => {
                if !result.result.is_empty() {
                    println!("{}", serde_json::to_string_pretty(&result.result)?);
                }
            }
        }
    }
    Ok(result_exit(result))
}

/// What `openphone status` reports.
#[derive(Debug, Serialize)]
struct StatusReport {
    url: String,
    pid: u32,
    started_at_ms: i64,
    data_dir: std::path::PathBuf,
    /// The config file the daemon read (absent when it read none, or from a daemon that does
    /// not say).
    #[serde(skip_serializing_if = "Option::is_none")]
    config_path: Option<std::path::PathBuf>,
    /// Where the daemon's configuration came from, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    config_origin: Option<String>,
    protocol_version: u32,
    phone: PhoneLine,
    commands_version: u32,
    /// Everything waiting for the user (the inbox's total: confirmations, job reviews and goal
    /// approvals).
    pending_confirmations: usize,
    /// The inbox's pending counts by kind.
    pending: openphone_protocol::endpoint::InboxCounts,
    /// Active standing approvals and session grants.
    approvals: Vec<ApprovalInfo>,
    /// Active elevations (`openphone elevate`), one per elevated runtime.
    elevations: Vec<openphone_protocol::endpoint::ElevationInfo>,
    /// The fleet's shared store, when the daemon uses one (absent: SQLite in the data dir).
    #[serde(skip_serializing_if = "Option::is_none")]
    store: Option<crate::fleet_cmd::StatusStore>,
}

/// The phone as `openphone status` names it.
#[derive(Debug, Serialize)]
struct PhoneLine {
    platform: String,
    model: String,
}

pub fn status(data_dir: &DataDir, json: bool) -> Result<ExitCode> {
    let dir = data_dir.resolve()?;
    block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        let pending = client
            .call::<openphone_protocol::endpoint::InboxList>(Default::default())
            .await?;
        let approvals = client
            .call::<ApprovalsList>(ApprovalsListParams::default())
            .await?
            .approvals;
        let elevations = client
            .call::<openphone_protocol::endpoint::RuntimeList>(Default::default())
            .await?
            .runtimes
            .into_iter()
            .filter_map(|r| r.elevation)
            .collect();
        let hello = client.hello.clone();
        let endpoint = client.endpoint.clone();
        client.close().await;
        let store = endpoint.store.map(|store| {
            crate::fleet_cmd::StatusStore::ask(*store, endpoint.config_path.as_deref(), &dir)
        });
        let status = StatusReport {
            url: endpoint.url,
            pid: endpoint.pid,
            started_at_ms: endpoint.started_at_ms,
            data_dir: dir,
            config_path: endpoint.config_path,
            config_origin: endpoint.config_origin,
            protocol_version: hello.protocol_version,
            phone: PhoneLine {
                platform: hello.phone.platform,
                model: hello.phone.model,
            },
            commands_version: hello.manifests.commands_version,
            pending_confirmations: pending.counts.total,
            pending: pending.counts.clone(),
            approvals,
            elevations,
            store,
        };
        if json {
            print_json(&status)?;
        } else {
            println!("daemon: running at {} (pid {})", status.url, status.pid);
            println!("data dir: {}", status.data_dir.display());
            if let Some(store) = &status.store {
                println!("{}", store.line());
            }
            if let Some(origin) = &status.config_origin {
                println!("config: {origin}");
            }
            println!("phone: {} {}", status.phone.platform, status.phone.model);
            println!("protocol version: {}", status.protocol_version);
            println!(
                "waiting for you: {} (`openphone inbox` lists them)",
                crate::inbox_cmd::counts_line(&pending)
            );
            println!("approvals: {}", status.approvals.len());
            for a in &status.approvals {
                println!("  {}", crate::output::approval_line(a));
            }
            if status.elevations.is_empty() {
                println!("elevated runtimes: none");
            } else {
                println!("elevated runtimes: {}", status.elevations.len());
                for e in &status.elevations {
                    println!("  {}", crate::elevate_cmd::elevation_line(e));
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

pub fn tools(cmd: ToolsCommand) -> Result<ExitCode> {
    match cmd {
        ToolsCommand::List { data_dir, json } => {
            let dir = data_dir.resolve()?;
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let list = client.call::<ToolsList>(ToolsListParams::default()).await?;
                client.close().await;
                if json {
                    print_json(&list)?;
                } else {
                    for t in &list.tools {
                        println!(
                            "{:<36} {:<7} {:<18} {}",
                            t.name,
                            t.risk.as_str(),
                            t.confirmation.as_str(),
                            t.default_exposure.as_str()
                        );
                    }
                }
                Ok(ExitCode::SUCCESS)
            })
        }
        ToolsCommand::Invoke {
            command,
            params,
            data_dir,
            autonomy,
            idempotency_key,
            timeout_secs,
            timeout_ms,
            reason,
            no_wait,
            json,
        } => {
            let dir = data_dir.resolve()?;
            // Strict, as the daemon reads a frame: a key given twice is refused, not "last wins".
            let params: Value = parse_json_strict(&params).map_err(|e| match e {
                CanonicalError::DuplicateKey { key } => anyhow::anyhow!(
                    "params hold the key {key:?} more than once; give each key once"
                ),
                other => anyhow::Error::new(other).context(format!(
                    "params must be a JSON object, e.g. '{{\"reason\":\"look\"}}', not {params}"
                )),
            })?;
            // The params' own `reason` stands when no `--reason` is given.
            let reason = match reason {
                Some(r) => Some(r),
                None if params.get("reason").is_some() => None,
                None => Some("requested by the user from the openphone CLI".to_owned()),
            };
            let timeout_ms = timeout_secs
                .map(|s| i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX))
                .or(timeout_ms);
            let request = ToolsInvokeParams {
                request_id: request_id(),
                tool: command,
                params: Some(params),
                reason,
                autonomy,
                idempotency_key,
                timeout_ms,
                // Answered at once, so a request that waits for the user can say so (below);
                // the final result then follows as a `runtime.tool.result` event.
                wait: Some(false),
                ..ToolsInvokeParams::default()
            };
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let first = client.call::<ToolsInvoke>(request).await?;
                let result = match first.pending_confirmation() {
                    Some(pending) if !no_wait => {
                        announce_wait(&pending, &dir);
                        wait_for_final(&mut client, first).await
                    }
                    Some(_) | None => first,
                };
                client.close().await;
                print_result(&result, json)
            })
        }
    }
}

/// Tells the person at the terminal, on stderr and at once, that the request waits for their
/// confirmation: its id, its summary, and the commands that approve or deny it from another
/// terminal (issue 12). stdout stays for the result.
fn announce_wait(pending: &PendingConfirmation, dir: &Path) {
    let program = std::env::args()
        .next()
        .unwrap_or_else(|| "openphone".into());
    // Another terminal may be in another directory.
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let command = |verb: &str| {
        format!(
            "{} confirmations {verb} {} --data-dir {}",
            shell_word(&program),
            shell_word(&pending.confirmation_id),
            shell_word(&dir.display().to_string())
        )
    };
    let expires = pending
        .timeout_ms
        .map(|ms| format!(" (expires in {} s)", ms.saturating_add(999) / 1000))
        .unwrap_or_default();
    eprintln!(
        "waiting for your confirmation: {}\n  \
         id: {}{expires}\n  \
         approve it from another terminal: {}\n  \
         deny it:                          {}",
        pending.summary,
        pending.confirmation_id,
        command("approve"),
        command("deny"),
    );
}

/// `word` as one shell word: as it is when that is safe, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The final result of `first`, a request waiting for a confirmation: the
/// `runtime.tool.result` event addressed to it. When the daemon goes away first, `first`
/// itself (the confirmation stays pending in the daemon; exit 3).
async fn wait_for_final(client: &mut DaemonClient, first: ToolResult) -> ToolResult {
    loop {
        match client.next_event().await {
            Ok(Event::ToolResult(result)) if result.request_id == first.request_id => {
                return result;
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!(
                    "openphone: stopped waiting ({e:#}); the confirmation stays pending in the \
                     daemon"
                );
                return first;
            }
        }
    }
}
