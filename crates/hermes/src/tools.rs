//! The loopback tool endpoint the plugin calls (`POST /call`, bearer token): one Hermes tool
//! call → one ToolBridge request as this runtime, in the phone session of the Hermes session
//! that made it, with the idempotency key `hermes:<run id>:<api request id>:<tool-call id>`
//! (`idempotency_key`: the model's tool-call id and the id of the model response it came in,
//! both of which Hermes hands to the plugin's execution middleware), so a call Hermes sends
//! again is answered from the recorded result and never runs twice, while the same `call_0`
//! in a later step is a new call. A call outside an adapter run carries no key (the bridge's
//! keyless retry join still catches a true retry).
//!
//! A call that waits for the user is held until the user decides (up to
//! `confirmation_timeout_ms`): Hermes gets the outcome of that one request, never "pending"
//! followed by a second confirmation. The confirmation names the phone session, so the
//! surface the user asked on announces it (`openphone ask` prints it). Past the wait, the
//! answer says it is still pending and that the same call joins it.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use openphone_core::{Invocation, Waited, waiting_on};
use openphone_protocol::{ErrorCode, ToolRequest, ToolResult, ToolStatus};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::adapter::{Inner, lock};

/// One call from the plugin.
#[derive(Debug, Deserialize)]
pub(crate) struct CallBody {
    tool: String,
    #[serde(default)]
    arguments: Value,
    #[serde(default)]
    session_id: String,
    #[serde(default)]
    tool_call_id: String,
    /// Hermes' id of the model response (step) the call came in: `<turn id>:api:<n>`.
    #[serde(default)]
    api_request_id: String,
}

/// The idempotency key of a call: only inside an adapter run (`run_id`), and only when Hermes
/// named both the step (`api_request_id`) and the call (`tool_call_id`). Models number calls
/// per response (`call_0` in every step), so the step is part of the key; without a run or a
/// step there is no key rather than one that a later, different call could collide with.
pub(crate) fn idempotency_key(
    run_id: Option<&str>,
    api_request_id: &str,
    tool_call_id: &str,
) -> Option<String> {
    let run_id = run_id.map(str::trim).filter(|r| !r.is_empty())?;
    let step = api_request_id.trim();
    let call = tool_call_id.trim();
    (!step.is_empty() && !call.is_empty()).then(|| format!("hermes:{run_id}:{step}:{call}"))
}

/// Binds the endpoint on a free loopback port; returns its URL (`http://127.0.0.1:<p>/call`).
pub(crate) async fn serve(inner: Arc<Inner>) -> Result<String, String> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| format!("binding the Hermes tool endpoint: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("reading the Hermes tool endpoint's address: {e}"))?;
    let app = axum::Router::new()
        .route("/call", axum::routing::post(call))
        .with_state(Arc::clone(&inner));
    let stop = Arc::clone(&inner);
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.stopping().await })
            .await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "the Hermes tool endpoint stopped");
        }
    });
    lock(&inner.tasks).push(task);
    Ok(format!("http://{addr}/call"))
}

/// Compares two tokens in time independent of where they differ.
fn same_token(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn text(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn call(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: String) -> Response {
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if inner.tool_token.is_empty() || !same_token(presented.as_bytes(), inner.tool_token.as_bytes())
    {
        return text(
            StatusCode::UNAUTHORIZED,
            json!({"error": "the OpenPhone tool endpoint refused the token"}),
        );
    }
    let body: CallBody = match serde_json::from_str(&body) {
        Ok(b) => b,
        Err(e) => {
            return text(
                StatusCode::BAD_REQUEST,
                json!({"error": format!("not a tool call: {e}")}),
            );
        }
    };
    text(StatusCode::OK, inner.run_tool(body).await)
}

impl Inner {
    /// Runs one call; the answer is what Hermes gives the model.
    pub(crate) async fn run_tool(self: &Arc<Self>, body: CallBody) -> Value {
        let Some(tool) = self.surface.get(&body.tool) else {
            return json!({"error": format!(
                "{:?} is not a phone tool this runtime may use", body.tool)});
        };
        let params = match body.arguments {
            Value::Object(map) => Value::Object(map),
            Value::Null => Value::Object(Map::new()),
            other => {
                return json!({"error": format!(
                    "the arguments of {} must be a JSON object, not {other}", tool.name)});
            }
        };
        let bound = lock(&self.sessions).bound(&body.session_id);
        let idempotency_key = idempotency_key(
            bound.as_ref().and_then(|b| b.run_id.as_deref()),
            &body.api_request_id,
            &body.tool_call_id,
        );
        let runtime_session_id = if body.session_id.is_empty() {
            format!("{}-unbound", self.config.runtime_id)
        } else {
            body.session_id.clone()
        };
        let request = ToolRequest {
            request_id: format!("hermes-{}", uuid::Uuid::new_v4()),
            runtime: Some(self.config.runtime_id.clone()),
            runtime_session_id,
            phone_session_id: bound.as_ref().map(|b| b.phone_session_id.clone()),
            tool: tool.command.clone(),
            params,
            reason: Some(match &bound {
                Some(b) => format!(
                    "requested by Hermes in phone session {}",
                    b.phone_session_id
                ),
                None => "requested by Hermes outside a phone session".to_owned(),
            }),
            autonomy: bound.as_ref().map(|b| b.autonomy.clone()),
            idempotency_key,
            timeout_ms: i64::try_from(self.config.confirmation_timeout_ms).ok(),
        };
        let first = self
            .bridge
            .call(Invocation::runtime(&self.caller, request))
            .await;
        let Some(confirmation_id) = waiting_on(&first) else {
            return answer_of(&first);
        };
        // Held while the user decides, a little past the confirmation's own expiry so its
        // timeout is the answer, not ours.
        let hold = Duration::from_millis(self.config.confirmation_timeout_ms.saturating_add(5_000));
        let inner = Arc::clone(self);
        let stop = async move {
            tokio::select! {
                () = tokio::time::sleep(hold) => {}
                () = inner.stopping() => {}
            }
        };
        match self.bridge.wait_for_final(&first, stop).await {
            Waited::Final(result) => answer_of(&result),
            Waited::Stopped(_) => json!({
                "status": "pending_confirmation",
                "confirmation_id": confirmation_id,
                "note": "Still waiting for the user to decide on the phone. Calling this tool \
                         again with the same arguments joins this request; it never runs twice.",
            }),
        }
    }
}

/// A bridge result as the tool's answer to the model: the result object when it ran, else
/// `{"error": …}` saying who decided.
pub fn answer_of(result: &ToolResult) -> Value {
    if result.status == ToolStatus::Ok {
        let mut payload = result.result.clone();
        if result.replayed {
            payload.insert("replayed".into(), Value::Bool(true));
        }
        return Value::Object(payload);
    }
    let (code, message) = match &result.error {
        Some(e) => (Some(e.code), e.message.clone()),
        None => (None, "the phone refused this request".to_owned()),
    };
    let code_name = code.map_or(result.status.as_str(), |c| c.as_str());
    let error = match (result.status, code) {
        (_, Some(ErrorCode::UserDeniedConfirmation)) => {
            format!("The user declined this action on the phone. ({message})")
        }
        (ToolStatus::Denied, _) => format!(
            "OpenPhone policy denied this request [{code_name}]: {message}. The user can \
             change this on the phone."
        ),
        _ => format!("[{code_name}] {message}"),
    };
    json!({"error": error, "code": code_name})
}

#[cfg(test)]
mod tests {
    use super::idempotency_key;

    /// Security review finding 3: models number tool calls per response, so the key
    /// `hermes:<run>:call_0` of a tap in step 1 was the key of an identical tap in step 2, which
    /// was then answered "replayed" and never ran; unbound calls shared the key `hermes::call_0`.
    #[test]
    fn a_second_identical_tap_in_a_later_step_runs_again() {
        let step1 = idempotency_key(Some("run_1"), "s:t:ab12cd34:api:0", "call_0");
        let step2 = idempotency_key(Some("run_1"), "s:t:ab12cd34:api:1", "call_0");
        assert!(step1.is_some() && step2.is_some());
        assert_ne!(
            step1, step2,
            "the same call id in a later step is a new call"
        );
        // A retry of the same call in the same step keeps its key (it joins, never reruns).
        assert_eq!(
            step1,
            idempotency_key(Some("run_1"), "s:t:ab12cd34:api:0", "call_0")
        );
        // Another run's step 0 is another call.
        assert_ne!(
            step1,
            idempotency_key(Some("run_2"), "s:t:ab12cd34:api:0", "call_0")
        );
        // No run bound (a Hermes cron job, another platform) or no step/call id: no key.
        assert_eq!(idempotency_key(None, "s:t:x:api:0", "call_0"), None);
        assert_eq!(idempotency_key(Some(""), "s:t:x:api:0", "call_0"), None);
        assert_eq!(idempotency_key(Some("run_1"), "", "call_0"), None);
        assert_eq!(idempotency_key(Some("run_1"), "s:t:x:api:0", " "), None);
    }
}
