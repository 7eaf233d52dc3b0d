//! `openphone confirmations list | approve | deny`: the confirmations waiting for the user
//! (endpoint `confirmations.*`), and the session grants an approval can make.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Subcommand;
use openphone_protocol::endpoint::{
    ApprovalState, ApprovalsList, ApprovalsListParams, ConfirmDecision, ConfirmationsList,
    ConfirmationsListParams, ConfirmationsResolve, ConfirmationsResolveParams,
};

use crate::client::DaemonClient;
use crate::data_dir::DataDir;
use crate::output::{block_on, print_json};

#[derive(Debug, Subcommand)]
pub enum ConfirmationsCommand {
    /// Pending confirmations.
    List {
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending confirmation (the stored request then runs once).
    Approve {
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
    /// Deny a pending confirmation.
    Deny {
        confirmation_id: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn confirmations(cmd: ConfirmationsCommand) -> Result<ExitCode> {
    let (data_dir, json, action) = match cmd {
        ConfirmationsCommand::List { data_dir, json } => (data_dir, json, None),
        ConfirmationsCommand::Approve {
            confirmation_id,
            for_session,
            data_dir,
            json,
        } => (
            data_dir,
            json,
            Some((
                confirmation_id,
                if for_session {
                    ConfirmDecision::AcceptForSession
                } else {
                    ConfirmDecision::Approve
                },
            )),
        ),
        ConfirmationsCommand::Deny {
            confirmation_id,
            data_dir,
            json,
        } => (
            data_dir,
            json,
            Some((confirmation_id, ConfirmDecision::Deny)),
        ),
    };
    if let Some((id, decision)) = &action {
        // A background job's review is not a pending confirmation (issue 31): say where it is
        // decided instead of answering "not found".
        if id.starts_with("job-confirm-") {
            let verb = match decision {
                ConfirmDecision::Deny => "deny",
                ConfirmDecision::Approve | ConfirmDecision::AcceptForSession => "approve",
            };
            bail!(
                "{id} is a background job's review, not a pending confirmation: decide it with \
                 `openphone jobs {verb} {id}`"
            );
        }
    }
    let dir = data_dir.resolve()?;
    block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        let code = match action {
            None => {
                let list = client
                    .call::<ConfirmationsList>(ConfirmationsListParams::default())
                    .await?;
                if json {
                    print_json(&list)?;
                } else {
                    if list.confirmations.is_empty() {
                        println!("no pending confirmations");
                    }
                    for c in &list.confirmations {
                        let session = if c.session_grant_offered {
                            "  [--for-session offered]"
                        } else {
                            ""
                        };
                        println!(
                            "{}  {}  {}  {}{session}",
                            c.confirmation_id, c.runtime, c.tool, c.summary
                        );
                    }
                }
                ExitCode::SUCCESS
            }
            Some((id, decision)) => {
                let result = client
                    .call::<ConfirmationsResolve>(ConfirmationsResolveParams {
                        confirmation_id: id.clone(),
                        decision,
                    })
                    .await?;
                if json {
                    print_json(&result)?;
                } else {
                    let done = match decision {
                        ConfirmDecision::Approve | ConfirmDecision::AcceptForSession => "approved",
                        ConfirmDecision::Deny => "denied",
                    };
                    println!(
                        "{done} {id}: the request finished with status {}",
                        result.status.as_str()
                    );
                    if decision == ConfirmDecision::AcceptForSession {
                        let grants = client
                            .call::<ApprovalsList>(ApprovalsListParams {
                                runtime: None,
                                all: true,
                            })
                            .await?;
                        match grants.approvals.iter().find(|a| {
                            a.confirmation_id.as_deref() == Some(id.as_str())
                                && a.state == ApprovalState::Active
                        }) {
                            Some(grant) => println!(
                                "for the rest of phone session {}: {} may use {}{} without \
                                 asking (grant {}; end it early with `openphone approvals revoke \
                                 {}`)",
                                grant.phone_session_id.as_deref().unwrap_or("?"),
                                grant.runtime,
                                grant.tool,
                                crate::output::constraints_text(&grant.constraints),
                                grant.approval_id,
                                grant.approval_id
                            ),
                            None => println!(
                                "approved this request only: no session grant was made (the \
                                 command always asks, the request is not in an active phone \
                                 session, or it did not run); `openphone audit export` names \
                                 the reason"
                            ),
                        }
                    }
                }
                ExitCode::SUCCESS
            }
        };
        client.close().await;
        Ok(code)
    })
}
