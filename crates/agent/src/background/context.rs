//! The sessions of a background run: the job's own phone session `background-job:<id>`
//! (created on its first run, `running` during a run, then `completed` or `failed`, each change
//! published), and the context `session_target` names, read only and never written.

use std::sync::Arc;

use openphone_clock::Clock;
use openphone_core::{Audience, CreatorAuthority, ToolBridge};
use openphone_jobs::AgentJob;
use openphone_model::Message;
use openphone_protocol::BUILTIN_RUNTIME_ID;
use openphone_protocol::endpoint::{Event, SessionUpdated, Source, Surface};
use openphone_store::{NewPhoneSession, SessionFilter, SessionStatus, Store, StoreError};

use crate::transcript::{self, Kept};

/// The `source` of a background job's phone session.
const SESSION_SOURCE: &str = "background_job";

/// How many sessions `session_target: main` looks through for the latest chat.
const MAIN_LOOKBACK: usize = 50;

/// The context a run reads before its job (never written).
#[derive(Debug, Default)]
pub(super) struct Prior {
    pub(super) messages: Vec<Kept>,
    /// The session it came from.
    pub(super) from: Option<String>,
    /// Why a context the target names is missing, for the trace and the transcript.
    pub(super) note: Option<String>,
}

impl Prior {
    pub(super) fn noted(note: String) -> Prior {
        tracing::warn!(note = %note, "background run without its context");
        Prior {
            note: Some(note),
            ..Prior::default()
        }
    }
}

/// The store and the clock a run's sessions are kept with.
pub(super) struct Sessions<'a> {
    pub(super) store: &'a Arc<Store>,
    pub(super) clock: &'a Arc<dyn Clock>,
}

impl Sessions<'_> {
    pub(super) async fn open_session(
        &self,
        bridge: &Arc<ToolBridge>,
        session: &str,
        job: &AgentJob,
    ) -> Result<(), String> {
        let store = Arc::clone(self.store);
        let now = self.clock.now_ms();
        let new = NewPhoneSession {
            phone_session_id: session.to_owned(),
            runtime_kind: BUILTIN_RUNTIME_ID.to_owned(),
            runtime_session_id: session.to_owned(),
            attention_id: format!("job-{}", job.id),
            source: SESSION_SOURCE.to_owned(),
            autonomy: openphone_store::Autonomy::AskBeforeAction,
            summary: openphone_core::summary::cut(job.title.trim(), 120),
        };
        // A job made naming a phone runs on it: its session is bound to it, so its calls that
        // name none go there (`openphone_core` routing).
        let device = job.device_id.clone();
        let opened = tokio::task::spawn_blocking(move || {
            if store.get_session(&new.phone_session_id)?.is_none() {
                match store.create_session(&new, now) {
                    Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            if device.is_some() {
                store.set_session_device(&new.phone_session_id, device.as_deref())?;
            }
            store.update_session_status(&new.phone_session_id, SessionStatus::Running, None, now)
        })
        .await;
        match opened {
            Ok(Ok(updated)) => {
                publish_session(bridge, &updated);
                Ok(())
            }
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Ends the run's session: `completed`, or `failed` with `reason` (only while it is still
    /// active: a session cancelled meanwhile stays as it is).
    pub(super) async fn close_session(
        &self,
        bridge: &Arc<ToolBridge>,
        session: &str,
        reason: Option<String>,
    ) {
        let store = Arc::clone(self.store);
        let id = session.to_owned();
        let now = self.clock.now_ms();
        let status = if reason.is_some() {
            SessionStatus::Failed
        } else {
            SessionStatus::Completed
        };
        let closed = tokio::task::spawn_blocking(move || {
            store.update_active_session_status(&id, status, reason.as_deref(), now)
        })
        .await;
        match closed {
            Ok(Ok(Some(updated))) => publish_session(bridge, &updated),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, session, "ending a background session"),
            Err(e) => tracing::warn!(error = %e, session, "ending a background session"),
        }
    }

    /// The context `session_target` names, read only. A runtime's job never reads the user's
    /// conversation: `main` gives it no context, and `session:<id>` only a session of its
    /// creator.
    pub(super) fn context(&self, target: &str, authority: &CreatorAuthority) -> Prior {
        let target = target.trim();
        if target == "isolated" {
            return Prior::default();
        }
        if !authority.is_users() && (target.is_empty() || target == "main") {
            return Prior::noted(format!(
                "session_target main is the user's conversation, which a job of runtime `{}` \
                 does not read; ran without context",
                authority.creator()
            ));
        }
        if target.is_empty() || target == "main" {
            return match self.main_session() {
                Ok(Some(id)) => self.read_context(&id),
                // No chat with the built-in runtime yet: nothing to read.
                Ok(None) => Prior::default(),
                Err(e) => Prior::noted(format!("the main conversation could not be read: {e}")),
            };
        }
        let Some(id) = target.strip_prefix("session:").map(str::trim) else {
            return Prior::noted(format!(
                "session_target {:?} is not main, isolated or session:<id>; ran without context",
                openphone_protocol::log_value(target).to_string()
            ));
        };
        match self.store.get_session(id) {
            Ok(Some(session))
                if !authority.is_users() && session.runtime_kind != authority.creator() =>
            {
                Prior::noted(format!(
                    "phone session {id} (session_target) is not a session of runtime `{}`, \
                     whose job this is; ran without its context",
                    authority.creator()
                ))
            }
            Ok(Some(_)) => self.read_context(id),
            Ok(None) => Prior::noted(format!(
                "phone session {id} (session_target) no longer exists; ran without its context"
            )),
            Err(e) => Prior::noted(format!("phone session {id} could not be read: {e}")),
        }
    }

    /// `main`: the built-in runtime's latest chat-surface session that has not failed (the
    /// session an attention request with `session_target: main` continues).
    pub(super) fn main_session(&self) -> Result<Option<String>, StoreError> {
        let recent = self.store.list_sessions(&SessionFilter {
            runtime: Some(BUILTIN_RUNTIME_ID.to_owned()),
            status: None,
            limit: Some(MAIN_LOOKBACK),
        })?;
        Ok(recent
            .into_iter()
            .find(|s| {
                s.status != SessionStatus::Failed
                    && Surface::for_source(Source::normalize(&s.source)) == Surface::Chat
            })
            .map(|s| s.phone_session_id))
    }

    pub(super) fn read_context(&self, id: &str) -> Prior {
        let entries = match self.store.transcript(id) {
            Ok(entries) => entries,
            Err(e) => {
                return Prior::noted(format!("the transcript of {id} could not be read: {e}"));
            }
        };
        match transcript::history(&entries) {
            Ok(history) => Prior {
                messages: answered(history),
                from: Some(id.to_owned()),
                note: None,
            },
            Err(e) => Prior::noted(format!("the transcript of {id} is unreadable: {e}")),
        }
    }
}

/// `history` without a trailing model turn whose tool calls were never all answered (a run
/// interrupted mid-call): a model refuses a conversation with unanswered calls.
pub(super) fn answered(mut history: Vec<Kept>) -> Vec<Kept> {
    let last_call = history.iter().rposition(
        |k| matches!(&k.message, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()),
    );
    let Some(at) = last_call else {
        return history;
    };
    let Message::Assistant { tool_calls, .. } = &history[at].message else {
        return history;
    };
    let all_answered = tool_calls.iter().all(|call| {
        history[at + 1..].iter().any(|k| {
            matches!(&k.message, Message::Tool { tool_call_id, .. } if *tool_call_id == call.id)
        })
    });
    if !all_answered {
        history.truncate(at);
    }
    history
}

pub(super) fn publish_session(bridge: &ToolBridge, session: &openphone_store::PhoneSession) {
    let update = SessionUpdated {
        phone_session_id: session.phone_session_id.clone(),
        runtime_session_id: session.runtime_session_id.clone(),
        status: session.status,
        updated_at_ms: session.updated_at_ms,
        reason: session.failure_reason.clone(),
    };
    let audience = Audience {
        runtime: Some(BUILTIN_RUNTIME_ID.to_owned()),
        operators: true,
    };
    if let Err(e) = bridge
        .events()
        .publish(&Event::SessionUpdated(update), audience)
    {
        tracing::warn!(error = %e, "publishing a background session's update");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use openphone_model::ToolCall;
    use serde_json::json;

    #[test]
    fn unanswered_calls_are_left_out_of_a_context() {
        let call = |id: &str| Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "contacts_search".into(),
                arguments: "{}".into(),
            }],
        };
        let kept = |m: Message| Kept::new(m, &json!({}));
        let whole = vec![
            kept(Message::user("q")),
            kept(call("c1")),
            kept(Message::tool("c1", "ok")),
            kept(Message::assistant("a")),
        ];
        assert_eq!(answered(whole.clone()).len(), 4);
        let mut cut = whole;
        cut.push(kept(Message::user("q2")));
        cut.push(kept(call("c2")));
        assert_eq!(answered(cut).len(), 5);
    }
}
