//! Delivery to the surface a job came from (issue 32 item 3; seed 001's Hermes mapping,
//! "delivery to the originating surface"), and the reply of the runtime a job was dispatched
//! to (`[jobs] background_runtime`).
//!
//! - A job created by a runtime in one of its phone sessions records that origin
//!   (`delivery_json.origin`). In `notification` mode its result (or failure alert) is handed
//!   back there: an attention request (source `background_job`) to that runtime, continuing
//!   that session, with the delivered text and the job (id, title, status) as context — the
//!   existing runtime messaging, so the runtime answers in its conversation as it answers the
//!   user. The built-in runtime is not woken for it: its conversations are on the phone, whose
//!   shade already shows the result.
//! - A run dispatched to another runtime records its session (`session:<id>` in the attempt's
//!   `output_ref`); that runtime's final `runtime.message` there (its text, else the deltas it
//!   streamed) is saved as the job's result and completes a one-shot job, whose delivery
//!   then follows as any completion's.

use std::collections::HashMap;
use std::sync::Arc;

use openphone_core::{RuntimeManager, ToolBridge};
use openphone_jobs::{AgentJob, AgentJobExt, Scheduler};
use openphone_protocol::BUILTIN_RUNTIME_ID;
use openphone_protocol::endpoint::{AttentionRequestParams, Source};
use openphone_store::Store;
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

/// Sessions whose streamed text is kept while waiting for their final message.
const MAX_TRACKED: usize = 256;
/// The most streamed text kept per session (characters).
const MAX_DELTA_CHARS: usize = 16_000;

/// Hands `body` (a result, or a failure alert when `alert`) to the runtime and phone session
/// `job` came from. `None` when the job has no origin to deliver to (none recorded, or the
/// built-in runtime's); else whether the runtime was handed it (it was connected and the
/// session could continue), with an audit record either way.
pub(super) async fn deliver(
    manager: &Arc<RuntimeManager>,
    bridge: &ToolBridge,
    job: &AgentJob,
    body: &str,
    alert: bool,
) -> Option<bool> {
    let origin = job.origin()?;
    if origin.runtime == BUILTIN_RUNTIME_ID {
        return None;
    }
    let what = if alert { "failed" } else { "finished" };
    let request = AttentionRequestParams {
        surface: Source::BackgroundJob.as_str().to_owned(),
        text: format!("Background job {} \"{}\" {what}: {body}", job.id, job.title),
        runtime: Some(origin.runtime.clone()),
        autonomy: None,
        include_screen: false,
        context: Some(json!({
            "job": {
                "id": job.id, "title": job.title, "status": job.status.as_str(),
                "failure_count": job.failure_count, "alert": alert,
            },
            "delivered": body,
        })),
        session_target: Some(format!("session:{}", origin.phone_session_id)),
    };
    let manager = Arc::clone(manager);
    let sent = tokio::task::spawn_blocking(move || manager.request_attention(request, None)).await;
    let (handed, error) = match sent {
        Ok(Ok(_)) => (true, Value::Null),
        Ok(Err(e)) => (false, json!(format!("{}: {}", e.code.as_str(), e.message))),
        Err(e) => (false, json!(e.to_string())),
    };
    if !handed {
        tracing::warn!(job_id = job.id, runtime = %origin.runtime, error = %error,
            "jobs: the result could not be handed to the session the job came from");
    }
    super::audit_background(
        bridge,
        "assistant.background_job.delivered_to_origin",
        json!({
            "job_id": job.id, "runtime": origin.runtime,
            "phone_session_id": origin.phone_session_id, "alert": alert,
            "handed": handed, "error": error,
        }),
    );
    Some(handed)
}

/// Saves the replies of runtimes that runs were dispatched to, until `shutdown`: the final
/// `runtime.message` of a session whose source is `background_job` goes to
/// [`Scheduler::runtime_replied`].
pub(super) async fn replies(
    scheduler: Scheduler,
    bridge: Arc<ToolBridge>,
    store: Arc<Store>,
    mut shutdown: watch::Receiver<bool>,
) {
    // Only message events are read here (quiet: tool results are not built for it).
    let mut events = bridge.events().subscribe_quiet();
    // Session → its streamed text (`None`: not a dispatched session).
    let mut tracked: HashMap<String, Option<String>> = HashMap::new();
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            () = crate::shutdown::stopped(&mut shutdown) => return,
        };
        let event = match event {
            Ok(event) => event,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "jobs: runtime replies came faster than read");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let is_final = match event.name.as_str() {
            "runtime.message.final" => true,
            "runtime.message.delta" => false,
            _ => continue,
        };
        let Some(session) = event
            .payload
            .get("phone_session_id")
            .and_then(Value::as_str)
        else {
            continue;
        };
        let Some(runtime) = event.audience.runtime.clone() else {
            continue;
        };
        let text = event
            .payload
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if !tracked.contains_key(session) {
            if tracked.len() >= MAX_TRACKED {
                tracked.clear();
            }
            let dispatched = store
                .get_session(session)
                .ok()
                .flatten()
                .is_some_and(|s| s.source == Source::BackgroundJob.as_str());
            tracked.insert(session.to_owned(), dispatched.then(String::new));
        }
        let Some(Some(streamed)) = tracked.get_mut(session) else {
            if is_final {
                tracked.remove(session);
            }
            continue;
        };
        if !is_final {
            if streamed.chars().count() < MAX_DELTA_CHARS {
                streamed.push_str(&text);
            }
            continue;
        }
        let streamed = std::mem::take(streamed);
        tracked.remove(session);
        let reply = if text.trim().is_empty() {
            streamed
        } else {
            text
        };
        // A final message with an error fails the run (never completes it).
        let error = event
            .payload
            .get("error")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let (scheduler, session) = (scheduler.clone(), session.to_owned());
        let saved = tokio::task::spawn_blocking(move || {
            scheduler.runtime_finished(&runtime, &session, &reply, error.as_deref())
        })
        .await;
        match saved {
            Ok(Ok(Some(job))) => tracing::info!(
                job_id = job.job.id,
                status = job.job.status.as_str(),
                "jobs: the reply of the runtime a job was dispatched to was saved"
            ),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "jobs: saving a dispatched job's reply failed")
            }
            Err(e) => tracing::warn!(error = %e, "jobs: the reply task failed"),
        }
    }
}
