//! Answering `openphone_confirmation_status` (`crate::status_tool`): the caller's own
//! confirmation, where it stands, waiting a little for a decision first.

use openphone_core::Waited;
use openphone_protocol::{ErrorCode, PendingConfirmation, ToolResult, ToolStatus};
use openphone_store::ConfirmationRecord;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

use super::tool_call::Call;
use crate::result::summary_text;

/// The status word of a final result.
fn status_of(result: &ToolResult) -> &'static str {
    match result.status {
        ToolStatus::Ok => "approved",
        ToolStatus::Denied => "denied",
        ToolStatus::Timeout => "expired",
        ToolStatus::Cancelled => "cancelled",
        ToolStatus::Error => "failed",
        ToolStatus::NeedsConfirmation => "pending",
    }
}

impl Call<'_> {
    /// The answer of `openphone_confirmation_status` for `arguments`.
    pub(super) async fn confirmation_status(&self, arguments: &Value) -> CallToolResponse {
        let id = match arguments.get("confirmation_id") {
            Some(Value::String(id)) if !id.trim().is_empty() && id.len() <= 128 => id.trim(),
            Some(Value::String(_)) => {
                return self.refuse(
                    ErrorCode::InvalidParams,
                    "`confirmation_id` must be 1 to 128 characters: the id a pending answer named",
                );
            }
            _ => {
                return self.refuse(
                    ErrorCode::InvalidParams,
                    "`confirmation_id` is required: the id a pending answer named \
                     (runtime-confirm-…)",
                );
            }
        };
        if let Some(Value::Object(map)) = Some(arguments)
            && let Some(extra) = map
                .keys()
                .find(|k| k.as_str() != "confirmation_id" && k.as_str() != "reason")
        {
            return self.refuse(
                ErrorCode::InvalidParams,
                &format!("unknown argument {extra:?}: only `confirmation_id` and `reason`"),
            );
        }
        let runtime = self.caller().runtime.clone();
        let record = match self.backend.bridge.confirmation(id) {
            Ok(Some(record)) if record.identity.runtime == runtime => record,
            // Another runtime's confirmation is answered like an unknown one.
            Ok(_) => {
                return self.refuse(
                    ErrorCode::PendingConfirmationNotFound,
                    &format!(
                        "no confirmation {id:?} of this connection's runtime; use the id a \
                         pending answer named"
                    ),
                );
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading a confirmation for the status tool");
                return self.refuse(
                    ErrorCode::AuditUnavailable,
                    "the phone could not read its confirmations",
                );
            }
        };
        let first = ToolResult::needs_confirmation(
            &runtime,
            &record.request_id,
            "waiting for the user to approve this request on the phone",
            &PendingConfirmation {
                confirmation_id: record.confirmation_id.clone(),
                summary: record.summary.clone(),
                timeout_ms: Some(record.expires_at_ms - record.created_at_ms),
                expires_at_ms: Some(record.expires_at_ms),
            },
        );
        let deadline = tokio::time::sleep(self.backend.settings.local_confirmation_wait);
        let stop = async {
            tokio::select! {
                () = deadline => {}
                () = self.site.ct.cancelled() => {}
            }
        };
        let waited = self.backend.bridge.wait_for_final(&first, stop).await;
        CallToolResponse::Complete(self.status_answer(&record, waited))
    }

    fn status_answer(&self, record: &ConfirmationRecord, waited: Waited) -> CallToolResult {
        let id = &record.confirmation_id;
        let mut body = Map::new();
        body.insert("confirmation_id".into(), json!(id));
        body.insert("summary".into(), json!(record.summary));
        let text = match waited {
            Waited::Final(result) if result.status != ToolStatus::NeedsConfirmation => {
                let status = status_of(&result);
                body.insert("status".into(), json!(status));
                if let Some(error) = &result.error {
                    body.insert(
                        "error".into(),
                        json!({"code": error.code.as_str(), "message": error.message}),
                    );
                }
                if result.status == ToolStatus::Ok {
                    let done = summary_text(&result.result, false);
                    body.insert("result".into(), Value::Object(result.result));
                    format!("Confirmation {id}: approved, and the action ran. {done}")
                } else {
                    let why = result
                        .error
                        .as_ref()
                        .map(|e| e.message.clone())
                        .unwrap_or_default();
                    format!("Confirmation {id}: {status}; the action did not run. {why}")
                }
            }
            Waited::Final(_) | Waited::Stopped(_) => {
                let expired = self.backend.now_ms() >= record.expires_at_ms;
                let status = if expired { "expired" } else { "pending" };
                body.insert("status".into(), json!(status));
                body.insert("expires_at_ms".into(), json!(record.expires_at_ms));
                if expired {
                    format!("Confirmation {id}: expired; the user did not decide in time.")
                } else {
                    format!(
                        "Confirmation {id}: still waiting for the user on the phone; the action \
                         has not happened. Ask again later with this tool."
                    )
                }
            }
        };
        let mut shaped = CallToolResult::structured(Value::Object(body));
        shaped.content = vec![ContentBlock::text(text)];
        shaped
    }
}
