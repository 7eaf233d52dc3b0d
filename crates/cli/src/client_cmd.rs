//! Client commands: `status`, `tools list|invoke`, `confirmations list|approve|deny`,
//! `runtimes list|select`, `sessions list|cancel` and `ask`. Each finds its daemon through the data
//! directory and acts with the operator credential.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use openphone_protocol::endpoint::{
    ApprovalInfo, ApprovalState, ApprovalsList, ApprovalsListParams, AttentionRequest,
    AttentionRequestParams, ConfirmDecision, ConfirmationsList, ConfirmationsListParams,
    ConfirmationsResolve, ConfirmationsResolveParams, Event, EventsSubscribe,
    EventsSubscribeParams, RuntimeList, RuntimeListParams, RuntimeSelect, RuntimeSelectParams,
    SessionStatus, SessionsCancel, SessionsCancelParams, SessionsList, SessionsListParams,
    ToolsInvoke, ToolsInvokeParams, ToolsList, ToolsListParams,
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

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Phone sessions, newest first.
    List {
        #[command(flatten)]
        data_dir: DataDir,
        /// At most this many (the daemon's default is 50, its maximum 500).
        #[arg(long)]
        limit: Option<usize>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stop an active phone session: it fails with reason `cancelled`; a built-in loop working
    /// on it stops before its next model or tool call.
    Cancel {
        /// The phone session id (`openphone sessions list`).
        phone_session_id: String,
        #[command(flatten)]
        data_dir: DataDir,
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

pub(crate) fn block_on<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(f)
}

/// Prints `v` as pretty JSON with its object keys sorted (through [`Value`]), the form every
/// `--json` output of the client commands has.
pub(crate) fn print_json<T: Serialize>(v: &T) -> Result<()> {
    let value = serde_json::to_value(v)?;
    println!("{}", serde_json::to_string_pretty(&value)?);
    Ok(())
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
    protocol_version: u32,
    phone: PhoneLine,
    commands_version: u32,
    pending_confirmations: usize,
    /// Active standing approvals and session grants.
    approvals: Vec<ApprovalInfo>,
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
            .call::<ConfirmationsList>(ConfirmationsListParams::default())
            .await?;
        let approvals = client
            .call::<ApprovalsList>(ApprovalsListParams::default())
            .await?
            .approvals;
        let hello = client.hello.clone();
        let endpoint = client.endpoint.clone();
        client.close().await;
        let status = StatusReport {
            url: endpoint.url,
            pid: endpoint.pid,
            started_at_ms: endpoint.started_at_ms,
            data_dir: dir,
            protocol_version: hello.protocol_version,
            phone: PhoneLine {
                platform: hello.phone.platform,
                model: hello.phone.model,
            },
            commands_version: hello.manifests.commands_version,
            pending_confirmations: pending.confirmations.len(),
            approvals,
        };
        if json {
            print_json(&status)?;
        } else {
            println!("daemon: running at {} (pid {})", status.url, status.pid);
            println!("data dir: {}", status.data_dir.display());
            println!("phone: {} {}", status.phone.platform, status.phone.model);
            println!("protocol version: {}", status.protocol_version);
            println!("pending confirmations: {}", status.pending_confirmations);
            println!("approvals: {}", status.approvals.len());
            for a in &status.approvals {
                println!("  {}", crate::approvals_cmd::approval_line(a));
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
                                crate::approvals_cmd::constraints_text(&grant.constraints),
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

pub fn sessions(cmd: SessionsCommand) -> Result<ExitCode> {
    let (data_dir, limit, json) = match cmd {
        SessionsCommand::List {
            data_dir,
            limit,
            json,
        } => (data_dir, limit, json),
        SessionsCommand::Cancel {
            phone_session_id,
            data_dir,
            json,
        } => return cancel_session(&data_dir, phone_session_id, json),
    };
    let dir = data_dir.resolve()?;
    block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        let list = client
            .call::<SessionsList>(SessionsListParams {
                limit,
                ..SessionsListParams::default()
            })
            .await?;
        client.close().await;
        if json {
            print_json(&list)?;
        } else {
            if list.sessions.is_empty() {
                println!("no phone sessions");
            }
            for s in &list.sessions {
                println!(
                    "{}  {}  {}  {}  {}",
                    s.phone_session_id,
                    s.runtime_kind,
                    s.source,
                    s.status.as_str(),
                    s.summary
                );
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// `openphone sessions cancel <id>`.
fn cancel_session(data_dir: &DataDir, phone_session_id: String, json: bool) -> Result<ExitCode> {
    let dir = data_dir.resolve()?;
    block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        let result = client
            .call::<SessionsCancel>(SessionsCancelParams { phone_session_id })
            .await?;
        client.close().await;
        if json {
            print_json(&result)?;
        } else {
            let how = if result.stopped_loop {
                "; its built-in run was stopped"
            } else {
                ""
            };
            println!(
                "cancelled {} ({}){how}",
                result.session.phone_session_id, result.session.runtime_kind
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// What `ask --session` names: `main`, `isolated`, or a phone session id to continue.
fn session_target(session: Option<&str>) -> Option<String> {
    let session = session.map(str::trim).filter(|s| !s.is_empty())?;
    Some(match session {
        "main" | "isolated" => session.to_owned(),
        id if id.starts_with("session:") => id.to_owned(),
        id => format!("session:{id}"),
    })
}

/// `--autonomy`: a mode the daemon knows — a canonical one (`observe_only`,
/// `ask_before_action`, `trusted_actions`) or a legacy synonym (`read_only`, `dry_run`,
/// `yolo`). The wire normalises anything else to `ask_before_action` (fail safe), so a typo
/// or `god` on the command line would be accepted silently: refused here with the valid list.
pub fn autonomy_arg(raw: &str) -> std::result::Result<String, String> {
    const SYNONYMS: [&str; 3] = ["read_only", "dry_run", "yolo"];
    let value = raw.trim().to_lowercase();
    if openphone_protocol::Autonomy::parse(&value).is_some() || SYNONYMS.contains(&value.as_str()) {
        return Ok(value);
    }
    let valid: Vec<&str> = openphone_protocol::Autonomy::ALL
        .iter()
        .map(|a| a.as_str())
        .collect();
    Err(format!(
        "unknown autonomy mode {raw:?}: use one of {}",
        valid.join(", ")
    ))
}

/// The settings of one `openphone ask`.
#[derive(Debug, Clone, Copy)]
pub struct AskOptions<'a> {
    /// The entry point (`chat`, …).
    pub surface: &'a str,
    /// A runtime instead of the routed one.
    pub runtime: Option<&'a str>,
    /// The session's autonomy.
    pub autonomy: Option<&'a str>,
    /// `main`, `isolated`, or a phone session id to continue.
    pub session: Option<&'a str>,
    /// How long to wait for the final reply.
    pub timeout_secs: u64,
}

/// `openphone ask`: asks the runtime routed for a surface (or the one named) and prints its
/// reply as it streams. A confirmation the reply waits for is announced on stderr with the
/// commands that decide it. Without a model for the built-in runtime, prints the one-line fix.
pub fn ask(data_dir: &DataDir, text: &str, options: AskOptions<'_>) -> Result<ExitCode> {
    let dir = data_dir.resolve()?;
    block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        let events = [
            "runtime.message.delta",
            "runtime.message.final",
            "runtime.session.updated",
            "runtime.confirmation.required",
        ];
        client
            .call::<EventsSubscribe>(EventsSubscribeParams {
                events: events.map(str::to_owned).to_vec(),
            })
            .await?;
        let asked = client
            .call::<AttentionRequest>(AttentionRequestParams {
                surface: options.surface.to_owned(),
                text: text.to_owned(),
                runtime: options.runtime.map(str::to_owned),
                autonomy: options.autonomy.map(str::to_owned),
                session_target: session_target(options.session),
                ..AttentionRequestParams::default()
            })
            .await;
        let accepted = match asked {
            Ok(accepted) => accepted,
            Err(e) => {
                if let Some(failure) = e.downcast_ref::<crate::client::RpcFailure>()
                    && failure.code.as_str() == "runtime_not_configured"
                {
                    // The daemon's message is the fix; one line, without the code.
                    eprintln!("openphone: {}", failure.message);
                    client.close().await;
                    return Ok(ExitCode::from(1));
                }
                return Err(e);
            }
        };
        let session = accepted.phone_session_id;
        let attention = accepted.attention_id;
        eprintln!("asked {} (session {session})", accepted.runtime);
        let limit = std::time::Duration::from_secs(options.timeout_secs);
        let timeout_secs = options.timeout_secs;
        let followed = follow_reply(&mut client, &session, &attention, &dir);
        let code = match tokio::time::timeout(limit, followed).await {
            Ok(code) => code?,
            Err(_) => {
                eprintln!("no final reply within {timeout_secs} s (session {session})");
                ExitCode::from(1)
            }
        };
        client.close().await;
        Ok(code)
    })
}

/// Prints the reply of phone session `session` as it streams, until its final message (exit 0,
/// or 1 when the runtime reports an error) or its failure (exit 1).
async fn follow_reply(
    client: &mut DaemonClient,
    session: &str,
    attention: &str,
    dir: &Path,
) -> Result<ExitCode> {
    use std::io::Write;
    let mut streamed = false;
    let mut stdout = std::io::stdout();
    // A reply that names another attention request answers an earlier turn of the same
    // session (a follow-up queued behind a busy one): not ours. Runtimes that name none are
    // taken at their word.
    let ours = |m: &openphone_protocol::endpoint::MessagePayload| {
        m.phone_session_id == session && m.attention_id.as_deref().is_none_or(|a| a == attention)
    };
    loop {
        match client.next_event().await? {
            Event::MessageDelta(m) if ours(&m) => {
                write!(stdout, "{}", m.text)?;
                stdout.flush()?;
                streamed = true;
            }
            Event::MessageFinal(m) if ours(&m) => {
                if !streamed {
                    write!(stdout, "{}", m.text)?;
                }
                writeln!(stdout)?;
                if let Some(error) = m.error {
                    eprintln!("the runtime reported an error: {error}");
                    return Ok(ExitCode::from(1));
                }
                return Ok(ExitCode::SUCCESS);
            }
            Event::SessionUpdated(u)
                if u.phone_session_id == session && u.status == SessionStatus::Failed =>
            {
                eprintln!(
                    "the session failed: {}",
                    u.reason.as_deref().unwrap_or("no reason given")
                );
                return Ok(ExitCode::from(1));
            }
            Event::ConfirmationRequired(c)
                if c.phone_session_id.as_deref() == Some(session) && c.created =>
            {
                if streamed {
                    // Off the line the reply is streaming on (stdout keeps only the reply).
                    eprintln!();
                }
                announce_wait(
                    &PendingConfirmation {
                        confirmation_id: c.confirmation_id,
                        summary: c.summary,
                        timeout_ms: Some(c.timeout_ms),
                        expires_at_ms: Some(c.expires_at_ms),
                    },
                    dir,
                );
            }
            // Another session's messages, other statuses, and events not asked for.
            _ => {}
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum RuntimesCommand {
    /// Runtimes with their status and the surfaces routed to them.
    List {
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Routes a surface (chat, volume, background) to a runtime.
    Select {
        /// chat, volume or background.
        surface: String,
        /// A configured runtime id.
        runtime: String,
        #[command(flatten)]
        data_dir: DataDir,
    },
}

pub fn runtimes(cmd: RuntimesCommand) -> Result<ExitCode> {
    match cmd {
        RuntimesCommand::List { data_dir, json } => {
            let dir = data_dir.resolve()?;
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let list = client
                    .call::<RuntimeList>(RuntimeListParams::default())
                    .await?;
                client.close().await;
                if json {
                    print_json(&list)?;
                } else {
                    println!("runtimes: {}", list.status.as_str());
                    for r in &list.runtimes {
                        let surfaces: Vec<&str> = r.surfaces.iter().map(|s| s.as_str()).collect();
                        println!(
                            "{:<16} {:<10} {:<14} {}",
                            r.id,
                            r.kind.as_str(),
                            r.status.as_str(),
                            surfaces.join(",")
                        );
                    }
                }
                Ok(ExitCode::SUCCESS)
            })
        }
        RuntimesCommand::Select {
            surface,
            runtime,
            data_dir,
        } => {
            let dir = data_dir.resolve()?;
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let r = client
                    .call::<RuntimeSelect>(RuntimeSelectParams { surface, runtime })
                    .await?;
                client.close().await;
                println!("{} → {}", r.surface.as_str(), r.runtime);
                Ok(ExitCode::SUCCESS)
            })
        }
    }
}
