//! `openphone sessions list | cancel` and `openphone ask`: phone sessions, and asking a
//! runtime with its reply followed as it streams.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use openphone_protocol::PendingConfirmation;
use openphone_protocol::endpoint::{
    AttentionRequest, AttentionRequestParams, ConfirmationResolution, Event, EventsSubscribe,
    EventsSubscribeParams, SessionStatus, SessionsCancel, SessionsCancelParams, SessionsList,
    SessionsListParams,
};

use super::announce_wait;
use crate::client::DaemonClient;
use crate::data_dir::DataDir;
use crate::output::{block_on, print_json};

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
                // The runtime's own key, once it named one (until then it is the phone
                // session id).
                let key = if s.runtime_session_id.is_empty()
                    || s.runtime_session_id == s.phone_session_id
                {
                    String::new()
                } else {
                    format!(
                        "  runtime session {}",
                        openphone_protocol::display_text(&s.runtime_session_id)
                    )
                };
                // The phone it acts on, on a daemon with several.
                let phone = s
                    .device_id
                    .as_deref()
                    .map(|d| format!("  phone {d}"))
                    .unwrap_or_default();
                // When it last moved, for a person (`--json` keeps the milliseconds).
                println!(
                    "{}  {}  {}  {}  {}  {}{key}{phone}",
                    s.phone_session_id,
                    s.runtime_kind,
                    s.source,
                    s.status.as_str(),
                    crate::output::when(s.updated_at_ms),
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
            "runtime.confirmation.resolved",
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
    // Everything printed of this reply so far (the deltas), so the final message adds only
    // what is missing (`unprinted`).
    let mut streamed = String::new();
    let mut stdout = std::io::stdout();
    // A reply that names another attention request answers an earlier turn of the same
    // session (a follow-up queued behind a busy one): not ours. Runtimes that name none are
    // taken at their word.
    let ours = |m: &openphone_protocol::endpoint::MessagePayload| {
        m.phone_session_id == session && m.attention_id.as_deref().is_none_or(|a| a == attention)
    };
    // The confirmation this reply waits for: its id and when it expires (Unix ms).
    let mut waiting: Option<(String, i64)> = None;
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let event = tokio::select! {
            event = client.next_event() => event?,
            _ = tick.tick(), if waiting.is_some() => {
                if let Some((id, expires_at_ms)) = &waiting {
                    // Past its end with no word from the daemon: say it, once.
                    if wall_ms() > expires_at_ms.saturating_add(EXPIRY_GRACE_MS) {
                        if tty {
                            eprint!("\r\x1b[K");
                        }
                        eprintln!("{}", resolved_line(id, ConfirmationResolution::Timeout));
                        waiting = None;
                    } else {
                        countdown(id, *expires_at_ms, tty);
                    }
                }
                continue;
            }
        };
        match event {
            Event::ConfirmationResolved(r)
                if waiting
                    .as_ref()
                    .is_some_and(|(id, _)| *id == r.confirmation_id) =>
            {
                waiting = None;
                if tty {
                    // Off the countdown's line.
                    eprint!("\r\x1b[K");
                }
                eprintln!("{}", resolved_line(&r.confirmation_id, r.resolution));
            }
            Event::MessageDelta(m) if ours(&m) => {
                write!(stdout, "{}", m.text)?;
                stdout.flush()?;
                streamed.push_str(&m.text);
            }
            Event::MessageFinal(m) if ours(&m) => {
                write!(stdout, "{}", unprinted(&streamed, &m.text))?;
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
                if !streamed.is_empty() {
                    // Off the line the reply is streaming on (stdout keeps only the reply).
                    eprintln!();
                }
                waiting = Some((c.confirmation_id.clone(), c.expires_at_ms));
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

/// How long past a confirmation's expiry `ask` waits for the daemon's word before saying it
/// expired itself.
const EXPIRY_GRACE_MS: i64 = 3_000;

/// Now, from the system clock (the daemon stamps expiries with its own, on this machine).
fn wall_ms() -> i64 {
    openphone_clock::Clock::now_ms(&openphone_clock::SystemClock)
}

/// The countdown line of a waiting confirmation, rewritten in place each second on a
/// terminal (nothing otherwise: a log would fill with it).
fn countdown(id: &str, expires_at_ms: i64, tty: bool) {
    if !tty {
        return;
    }
    let now = wall_ms();
    let left = (expires_at_ms.saturating_sub(now).max(0) + 999) / 1000;
    if left > 0 {
        eprint!("\r\x1b[K  waiting for your confirmation of {id}: expires in {left} s");
    } else {
        eprint!("\r\x1b[K  waiting for your confirmation of {id}: expiring now");
    }
}

/// What `ask` says when the confirmation it waits for ends.
fn resolved_line(id: &str, resolution: ConfirmationResolution) -> String {
    match resolution {
        ConfirmationResolution::Approved | ConfirmationResolution::ApprovedForSession => {
            format!("confirmation {id} approved")
        }
        ConfirmationResolution::Denied => format!("confirmation {id} denied"),
        ConfirmationResolution::Timeout => format!(
            "confirmation {id} expired: nobody approved it in time, so the action was not \
             taken (the runtime is told)"
        ),
        ConfirmationResolution::ResultUnknown => format!(
            "confirmation {id}: the daemon stopped while the action ran; whether it happened \
             is unknown"
        ),
    }
}

/// What of a final message's text is still to print after `streamed` (the deltas already
/// printed), so `ask` shows the whole reply whatever the runtime's style (`docs/endpoint.md`,
/// `runtime.message`):
///
/// - only a final: all of it;
/// - deltas, then a final that repeats them (the whole reply; it may go on past them): the
///   part after what was streamed;
/// - deltas, then an empty final, or a final that the stream already ends with (the built-in
///   runtime's final repeats its last turn, which streamed after earlier turns): nothing;
/// - deltas, then a final that is neither: the final in full on a line of its own, so no text
///   the runtime sent is lost.
pub(crate) fn unprinted<'a>(streamed: &str, final_text: &'a str) -> std::borrow::Cow<'a, str> {
    use std::borrow::Cow;
    if streamed.is_empty() {
        return Cow::Borrowed(final_text);
    }
    if let Some(rest) = final_text.strip_prefix(streamed) {
        return Cow::Borrowed(rest);
    }
    let tail = final_text.trim();
    if tail.is_empty() || streamed.trim_end().ends_with(tail) {
        return Cow::Borrowed("");
    }
    Cow::Owned(format!("\n{final_text}"))
}

#[cfg(test)]
mod tests {
    use super::unprinted;

    #[test]
    fn ask_dropped_the_final_after_partial_text() {
        // Only a final.
        assert_eq!(
            unprinted("", "Lunch with Sam at 12:30"),
            "Lunch with Sam at 12:30"
        );
        // Deltas, then a final that repeats them and goes on (the bug: the rest was dropped).
        assert_eq!(
            unprinted("Lunch with ", "Lunch with Sam at 12:30"),
            "Sam at 12:30"
        );
        // Deltas, then a final that repeats them exactly.
        assert_eq!(unprinted("Lunch with Sam", "Lunch with Sam"), "");
        // Deltas, then an empty final.
        assert_eq!(unprinted("Lunch with Sam", ""), "");
        // The built-in runtime: earlier turns streamed, the final repeats the last one.
        assert_eq!(
            unprinted("Let me look.\n\nLunch with Sam", "Lunch with Sam"),
            ""
        );
        // A final that neither repeats nor is empty is shown whole, on its own line.
        assert_eq!(unprinted("Lunch with ", "Sam at 12:30"), "\nSam at 12:30");
    }
}
