//! `openphone approvals grant | list | revoke`: the standing approvals the user manages, and
//! the session grants `confirmations approve --for-session` made (endpoint `approvals.*`,
//! operator only).

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Subcommand;
use openphone_protocol::endpoint::{
    ApprovalsGrant, ApprovalsGrantParams, ApprovalsList, ApprovalsListParams, ApprovalsRevoke,
    ApprovalsRevokeParams,
};
use openphone_protocol::parse_json_strict;
use serde_json::{Map, Value};

use crate::client::DaemonClient;
use crate::data_dir::DataDir;
use crate::output::{approval_line, block_on, duration_ms, print_json, when_ms};

/// `openphone approvals` subcommands.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Let a runtime run a state-changing command without asking, until revoked or expired.
    /// Commands that always ask (the risk floor: sending a message, placing a call, …) cannot
    /// be approved this way.
    Grant {
        /// The runtime id (as configured).
        #[arg(long)]
        runtime: String,
        /// A command (any of its names) or `group:<category>`, e.g. `openphone.ui.tap`,
        /// `app.open`, `group:ui`.
        #[arg(long)]
        tool: String,
        /// Only requests whose param KEY equals VALUE (VALUE is JSON; a bare word is taken as
        /// a string; `null` means the request must not carry KEY), e.g.
        /// `--param package_or_label=Maps`. Repeatable.
        #[arg(long = "param", value_name = "KEY=VALUE")]
        params: Vec<String>,
        /// Stop applying after this long, e.g. `30m`, `2h`, `7d`.
        #[arg(long, value_name = "DURATION")]
        expires_in: Option<String>,
        /// Stop applying at this time: RFC 3339 (`2026-12-01T18:00:00+01:00`), a local time
        /// (`tomorrow 18:00`, `fri 09:00`) or relative (`in 2h`).
        #[arg(long, value_name = "WHEN", conflicts_with = "expires_in")]
        expires_at: Option<String>,
        /// Also apply inside background job runs.
        #[arg(long)]
        background: bool,
        /// A note for yourself.
        #[arg(long)]
        note: Option<String>,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The active standing approvals and session grants (`--all`: also expired, revoked and
    /// ended ones).
    List {
        /// Only this runtime's.
        #[arg(long)]
        runtime: Option<String>,
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a standing approval or a session grant: the next request asks again.
    Revoke {
        /// The id `approvals list` shows.
        approval_id: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Runs an `approvals` subcommand.
pub fn run(cmd: ApprovalsCommand) -> Result<ExitCode> {
    match cmd {
        ApprovalsCommand::Grant {
            runtime,
            tool,
            params,
            expires_in,
            expires_at,
            background,
            note,
            data_dir,
            json,
        } => {
            let constraints = parse_constraints(&params)?;
            let expires_in_ms = expires_in.as_deref().map(parse_duration_ms).transpose()?;
            let expires_at_ms = expires_at
                .as_deref()
                .map(|raw| when_ms("--expires-at", raw))
                .transpose()?;
            let dir = data_dir.resolve()?;
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let granted = client
                    .call::<ApprovalsGrant>(ApprovalsGrantParams {
                        runtime,
                        tool,
                        constraints,
                        expires_at_ms,
                        expires_in_ms,
                        background,
                        note,
                    })
                    .await?;
                client.close().await;
                if json {
                    print_json(&granted)?;
                } else {
                    println!("granted: {}", approval_line(&granted));
                    println!(
                        "revoke it with `openphone approvals revoke {}`",
                        granted.approval_id
                    );
                }
                Ok(ExitCode::SUCCESS)
            })
        }
        ApprovalsCommand::List {
            runtime,
            all,
            data_dir,
            json,
        } => {
            let dir = data_dir.resolve()?;
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let list = client
                    .call::<ApprovalsList>(ApprovalsListParams { runtime, all })
                    .await?;
                client.close().await;
                if json {
                    print_json(&list)?;
                } else if list.approvals.is_empty() {
                    println!("no {}approvals", if all { "" } else { "active " });
                } else {
                    for a in &list.approvals {
                        println!("{}", approval_line(a));
                    }
                }
                Ok(ExitCode::SUCCESS)
            })
        }
        ApprovalsCommand::Revoke {
            approval_id,
            data_dir,
            json,
        } => {
            let dir = data_dir.resolve()?;
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let revoked = client
                    .call::<ApprovalsRevoke>(ApprovalsRevokeParams { approval_id })
                    .await?;
                client.close().await;
                if json {
                    print_json(&revoked)?;
                } else {
                    println!("revoked: {}", approval_line(&revoked));
                }
                Ok(ExitCode::SUCCESS)
            })
        }
    }
}

/// `KEY=VALUE` pairs into a constraints object; VALUE is JSON, or a string when it is not.
fn parse_constraints(pairs: &[String]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for pair in pairs {
        let Some((key, raw)) = pair.split_once('=') else {
            bail!("--param {pair:?}: expected KEY=VALUE, e.g. package_or_label=Maps");
        };
        let key = key.trim();
        if key.is_empty() {
            bail!("--param {pair:?}: the key is empty");
        }
        let value = parse_json_strict(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
        if out.insert(key.to_owned(), value).is_some() {
            bail!("--param {key:?} is given twice; give each key once");
        }
    }
    Ok(out)
}

/// `30m`, `2h`, `7d`, `1h 30m` into milliseconds (`--expires-in`).
fn parse_duration_ms(raw: &str) -> Result<i64> {
    duration_ms("--expires-in", raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn params_take_json_or_a_bare_string_and_refuse_repeats() {
        let c = parse_constraints(&["package_or_label=Maps".into(), "x=3".into()]).unwrap();
        assert_eq!(c.get("package_or_label"), Some(&json!("Maps")));
        assert_eq!(c.get("x"), Some(&json!(3)));
        assert!(parse_constraints(&["nokey".into()]).is_err());
        assert!(parse_constraints(&["=1".into()]).is_err());
        assert!(parse_constraints(&["a=1".into(), "a=2".into()]).is_err());
    }

    #[test]
    fn durations_parse_in_human_units() {
        assert_eq!(parse_duration_ms("30m").unwrap(), 30 * 60 * 1000);
        assert_eq!(parse_duration_ms("2h").unwrap(), 2 * 60 * 60 * 1000);
        assert!(parse_duration_ms("soon").is_err());
        assert!(parse_duration_ms("0s").is_err());
    }
}
