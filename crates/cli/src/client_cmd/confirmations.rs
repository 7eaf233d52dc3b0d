//! `openphone confirmations list | approve | deny`: the older names of `openphone inbox`
//! (issue 31). `list` shows the whole inbox — runtime confirmations, background job reviews and
//! goal approvals — and its `--json` keeps the `confirmations` member it always had (the
//! runtime confirmations, `confirmations.list`) next to the inbox's `items` and `counts`;
//! `approve` / `deny` take any inbox id, short id or unique prefix (`inbox.resolve`), and
//! `--json` prints the request's final tool result, as before, for a confirmation or a goal
//! approval (the `jobs.review` answer for a job review).

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use openphone_protocol::endpoint::{
    ConfirmDecision, ConfirmationsList, ConfirmationsListParams, InboxCounts, InboxItem, InboxList,
    InboxListParams, PendingConfirmation,
};
use serde::Serialize;

use crate::client::DaemonClient;
use crate::data_dir::DataDir;
use crate::inbox_cmd;
use crate::output::{block_on, print_json};

#[derive(Debug, Subcommand)]
pub enum ConfirmationsCommand {
    /// Everything waiting for you: confirmations, job reviews, goal approvals (as `openphone
    /// inbox`).
    List {
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending confirmation, job review or goal approval (as `openphone inbox
    /// approve`): the stored request then runs once.
    Approve {
        /// The id, its short id (8 characters) or a unique prefix (at least 4).
        confirmation_id: String,
        /// Also let the same runtime use the same tool (on the same target, when the request
        /// names one: the same contact, app or URL) without asking for the rest of this phone
        /// session. Never for commands that always ask (the risk floor): there it approves this
        /// request only, and says so. Revoke early with `openphone approvals revoke <id>`.
        #[arg(long)]
        for_session: bool,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Deny a pending confirmation, job review or goal approval (as `openphone inbox deny`).
    Deny {
        /// The id, its short id (8 characters) or a unique prefix (at least 4).
        confirmation_id: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `confirmations list --json`: the runtime confirmations as always, and the whole inbox.
#[derive(Debug, Serialize)]
struct Listed {
    confirmations: Vec<PendingConfirmation>,
    items: Vec<InboxItem>,
    counts: InboxCounts,
}

pub fn confirmations(cmd: ConfirmationsCommand) -> Result<ExitCode> {
    match cmd {
        ConfirmationsCommand::List { data_dir, json } if json => {
            let dir = data_dir.resolve()?;
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let old = client
                    .call::<ConfirmationsList>(ConfirmationsListParams::default())
                    .await?;
                let inbox = client.call::<InboxList>(InboxListParams::default()).await?;
                client.close().await;
                print_json(&Listed {
                    confirmations: old.confirmations,
                    items: inbox.items,
                    counts: inbox.counts,
                })?;
                Ok(ExitCode::SUCCESS)
            })
        }
        ConfirmationsCommand::List { data_dir, .. } => inbox_cmd::list(&data_dir, false, false),
        ConfirmationsCommand::Approve {
            confirmation_id,
            for_session,
            data_dir,
            json,
        } => {
            let decision = if for_session {
                ConfirmDecision::AcceptForSession
            } else {
                ConfirmDecision::Approve
            };
            inbox_cmd::resolve_as(&data_dir, &confirmation_id, decision, json, true)
        }
        ConfirmationsCommand::Deny {
            confirmation_id,
            data_dir,
            json,
        } => inbox_cmd::resolve_as(
            &data_dir,
            &confirmation_id,
            ConfirmDecision::Deny,
            json,
            true,
        ),
    }
}
