//! `openphone inbox [--all] [--json]` and `openphone inbox approve|deny <id>`: everything that
//! waits for the user — runtime confirmations, background job reviews, goal approvals — in one
//! list (endpoint `inbox.*`), decided by full id, short id or unique prefix. `openphone
//! confirmations list|approve|deny` goes through the same functions.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use openphone_protocol::endpoint::{
    ApprovalState, ApprovalsList, ApprovalsListParams, ConfirmDecision, InboxItem, InboxKind,
    InboxList, InboxListParams, InboxListResult, InboxOutcome, InboxResolve, InboxResolveParams,
    InboxState,
};

use crate::client::DaemonClient;
use crate::data_dir::DataDir;
use crate::output::fleet_columns::FleetColumns;
use crate::output::{block_on, print_json, when};

/// `openphone inbox`: list (no subcommand) or decide one item.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct InboxArgs {
    #[command(subcommand)]
    pub command: Option<InboxCommand>,
    /// Also list items that expired unanswered.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub data_dir: DataDir,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum InboxCommand {
    /// Approve one item: a confirmation's or goal approval's request runs once; a job review's
    /// call runs once after its record is checked again.
    Approve {
        /// The item's id, short id (8 characters) or a unique prefix (at least 4).
        id: String,
        /// Confirmations and goal approvals only: also let the same runtime use the same tool
        /// without asking for the rest of this phone session (see `confirmations approve`).
        #[arg(long)]
        for_session: bool,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Deny one item: nothing runs.
    Deny {
        /// The item's id, short id (8 characters) or a unique prefix (at least 4).
        id: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: InboxArgs) -> Result<ExitCode> {
    match args.command {
        None => list(&args.data_dir, args.all, args.json),
        Some(InboxCommand::Approve {
            id,
            for_session,
            data_dir,
            json,
        }) => {
            let decision = if for_session {
                ConfirmDecision::AcceptForSession
            } else {
                ConfirmDecision::Approve
            };
            resolve_as(&data_dir, &id, decision, json, false)
        }
        Some(InboxCommand::Deny { id, data_dir, json }) => {
            resolve_as(&data_dir, &id, ConfirmDecision::Deny, json, false)
        }
    }
}

/// Prints the inbox (with expired items when `all`).
pub(crate) fn list(data_dir: &DataDir, all: bool, json: bool) -> Result<ExitCode> {
    let dir = data_dir.resolve()?;
    block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        let list = client
            .call::<InboxList>(InboxListParams {
                include_expired: all,
            })
            .await?;
        client.close().await;
        if json {
            print_json(&list)?;
        } else {
            print_list(&list);
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// The one-line counts by kind: `2 (1 confirmation, 1 job review, 0 goal approvals)`.
pub(crate) fn counts_line(list: &InboxListResult) -> String {
    let c = &list.counts;
    let plural = |n: usize, one: &str| {
        if n == 1 {
            format!("{n} {one}")
        } else {
            format!("{n} {one}s")
        }
    };
    format!(
        "{} ({}, {}, {})",
        c.total,
        plural(c.confirmation, "confirmation"),
        plural(c.job_review, "job review"),
        plural(c.goal_approval, "goal approval")
    )
}

fn kind_text(kind: InboxKind) -> &'static str {
    match kind {
        InboxKind::Confirmation => "confirmation",
        InboxKind::JobReview => "job review",
        InboxKind::GoalApproval => "goal approval",
    }
}

fn print_list(list: &InboxListResult) {
    if list.items.is_empty() {
        println!(
            "Nothing waits for you (no pending confirmations, job reviews or goal approvals)."
        );
        return;
    }
    println!("waiting for you: {}", counts_line(list));
    // In a fleet (every daemon lists the whole fleet's inbox), each item's first line starts
    // with its HOST and PHONE.
    let columns = FleetColumns::of(
        list.items
            .iter()
            .map(|i| (i.host.as_ref(), i.device_id.as_deref())),
    );
    if let Some(columns) = &columns {
        println!("\n{}", columns.header("ITEM"));
    }
    for item in &list.items {
        print_item(item, columns.as_ref());
    }
    println!(
        "Decide one with `openphone inbox approve <id>` or `openphone inbox deny <id>` \
         (the short id or any unique prefix will do)."
    );
}

fn print_item(item: &InboxItem, columns: Option<&FleetColumns>) {
    let expiry = match (item.state, item.expires_at_ms) {
        (InboxState::Expired, Some(at)) => format!("EXPIRED at {}", when(at)),
        (InboxState::Expired, None) => "EXPIRED".to_owned(),
        (InboxState::Pending, Some(at)) => format!("expires {}", when(at)),
        (InboxState::Pending, None) => "no expiry".to_owned(),
    };
    let session = if item.session_grant_offered {
        "  [--for-session offered]"
    } else {
        ""
    };
    let cells = columns
        .map(|c| c.cells(item.host.as_ref(), item.device_id.as_deref()))
        .unwrap_or_default();
    println!();
    println!(
        "{cells}{}  {}  {}{session}",
        item.short_id,
        kind_text(item.kind),
        item.title
    );
    println!("    {}", item.summary.replace('\n', "\n    "));
    println!(
        "    asked {}; {expiry}; id {}",
        when(item.created_at_ms),
        item.id
    );
}

/// Decides one item by id, short id or prefix. With `tool_result_json` (`confirmations
/// approve|deny --json`), a confirmation's or goal approval's `--json` is its final tool result
/// alone, as that command always printed.
pub(crate) fn resolve_as(
    data_dir: &DataDir,
    id: &str,
    decision: ConfirmDecision,
    json: bool,
    tool_result_json: bool,
) -> Result<ExitCode> {
    let dir = data_dir.resolve()?;
    block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        let answer = client
            .call::<InboxResolve>(InboxResolveParams {
                id: id.to_owned(),
                decision,
            })
            .await?;
        let grant = if decision == ConfirmDecision::AcceptForSession && !json {
            let grants = client
                .call::<ApprovalsList>(ApprovalsListParams {
                    runtime: None,
                    all: true,
                })
                .await?;
            Some(grants.approvals.into_iter().find(|a| {
                a.confirmation_id.as_deref() == Some(answer.id.as_str())
                    && a.state == ApprovalState::Active
            }))
        } else {
            None
        };
        client.close().await;
        if json && tool_result_json && answer.kind != InboxKind::JobReview {
            print_json(&answer.result)?;
        } else if json {
            print_json(&answer)?;
        } else {
            println!("{}", answer.message);
            match grant {
                Some(Some(grant)) => println!(
                    "for the rest of phone session {}: {} may use {}{} without asking (grant {}; \
                     end it early with `openphone approvals revoke {}`)",
                    grant.phone_session_id.as_deref().unwrap_or("?"),
                    grant.runtime,
                    grant.tool,
                    crate::output::constraints_text(&grant.constraints),
                    grant.approval_id,
                    grant.approval_id
                ),
                Some(None) => println!(
                    "approved this request only: no session grant was made (the command always \
                     asks, the request is not in an active phone session, or it did not run); \
                     `openphone audit export` names the reason"
                ),
                None => {}
            }
        }
        Ok(match answer.outcome {
            InboxOutcome::Approved | InboxOutcome::Denied => ExitCode::SUCCESS,
            InboxOutcome::Refused => ExitCode::from(1),
        })
    })
}
