//! Request normalisation and validation (`runtime-protocol.md` §8.1 and §8.2 step 1).

use openphone_policy::Caller;
use openphone_protocol::limits::{
    PARAMS_CANONICAL_BYTES, REASON_CHARS, REQUEST_ID_CHARS, RUNTIME_SESSION_ID_CHARS,
    SESSION_ID_CHARS,
};
use openphone_protocol::{
    Command, ErrorCode, Registry, ToolRequest, canonical_json, effective_timeout_ms,
    normalize_runtime_id, params_hash_hex,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// At most this many field errors are listed in `details.errors`.
pub const MAX_FIELD_ERRORS: usize = 20;

/// A request after §8.1: strings trimmed, defaults applied. The params are kept exactly as the
/// runtime sent them; they are what the identity digest covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NormalizedRequest {
    pub request_id: String,
    /// The `runtime` member of the payload, if any (checked against the caller).
    pub payload_runtime: Option<String>,
    pub runtime_session_id: String,
    pub phone_session_id: Option<String>,
    pub tool: String,
    pub params: Value,
    /// The request's reason, else `params.reason`.
    pub reason: Option<String>,
    pub autonomy: Option<String>,
    /// The request id when none was given.
    pub idempotency_key: String,
    pub timeout_ms: i64,
    /// The phone the request acts on (`crate::devices`): as the caller named it, or, with
    /// several phones, as the bridge resolved it. `None` on a daemon with one phone when the
    /// caller named none (and in requests stored before several phones existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    /// The caller reads the result as JSON text only (`crate::Answer::Text`); never stored.
    #[serde(skip)]
    pub answer_as_text: bool,
}

impl NormalizedRequest {
    /// `<runtime>:<runtime_session_id>` or `<runtime>:global`.
    pub fn scope(&self, runtime: &str) -> String {
        format!("{runtime}:{}", self.session_scope())
    }

    /// The runtime session id, or `global` when empty.
    pub fn session_scope(&self) -> &str {
        if self.runtime_session_id.is_empty() {
            "global"
        } else {
            &self.runtime_session_id
        }
    }
}

fn trimmed(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// Applies §8.1 to a wire request.
pub fn normalize(req: ToolRequest) -> NormalizedRequest {
    let request_id = req.request_id.trim().to_owned();
    let runtime_session_id = req.runtime_session_id.trim().to_owned();
    let phone_session_id = trimmed(req.phone_session_id).or_else(|| {
        runtime_session_id
            .split(':')
            .find(|seg| seg.starts_with("phone-sess-"))
            .map(str::to_owned)
    });
    // Params are kept exactly as sent: they are what the identity digest covers, and text a
    // user typed may carry meaningful spaces.
    let params = req.params;
    let reason = trimmed(req.reason).or_else(|| {
        params
            .get("reason")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_owned)
    });
    let idempotency_key = trimmed(req.idempotency_key).unwrap_or_else(|| request_id.clone());
    NormalizedRequest {
        payload_runtime: trimmed(req.runtime),
        runtime_session_id,
        phone_session_id,
        tool: req.tool.trim().to_owned(),
        params,
        reason,
        autonomy: trimmed(req.autonomy),
        idempotency_key,
        timeout_ms: effective_timeout_ms(req.timeout_ms),
        request_id,
        device_id: None,
        answer_as_text: false,
    }
}

/// A request that passed step 1.
#[derive(Debug, Clone)]
pub struct Validated<'r> {
    pub command: &'r Command,
    /// 64 hex characters of `params_hash` over the params as received.
    pub params_digest: String,
    pub reason: String,
}

/// A step-1 failure: the code (with its catalogue status) and a message for the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub code: ErrorCode,
    pub message: String,
    /// `{"errors": [{field, pointer, message}], "omitted"?}` for invalid params.
    pub details: Option<Map<String, Value>>,
}

fn reject(code: ErrorCode, message: impl Into<String>) -> Rejection {
    Rejection {
        details: None,
        code,
        message: message.into(),
    }
}

/// Step 1 of the decision order; the first failing check wins, in the spec's order.
pub fn validate<'r>(
    registry: &'r Registry,
    caller: &Caller,
    req: &NormalizedRequest,
    device_available: bool,
) -> Result<Validated<'r>, Rejection> {
    // 1.1
    if !device_available {
        return Err(reject(
            ErrorCode::FrameworkUnavailable,
            "the phone's device backend is not available",
        ));
    }
    // 1.2
    check_sizes(req)?;
    // 1.3
    if req.request_id.is_empty() {
        return Err(reject(
            ErrorCode::MissingRequestId,
            "request_id is required",
        ));
    }
    // 1.4
    if caller.runtime.trim().is_empty() || caller.principal.trim().is_empty() {
        return Err(reject(
            ErrorCode::MissingRuntimeIdentity,
            "the caller's runtime, transport and principal must all be known",
        ));
    }
    // 1.5
    if let Some(payload) = &req.payload_runtime {
        let same = normalize_runtime_id(payload).is_ok_and(|id| id == caller.runtime);
        if !same {
            return Err(reject(
                ErrorCode::RuntimeMismatch,
                format!(
                    "payload runtime {payload:?} is not the authenticated runtime {:?}",
                    caller.runtime
                ),
            ));
        }
    }
    // 1.6
    if req.tool.is_empty() {
        return Err(reject(ErrorCode::MissingTool, "tool is required"));
    }
    // 1.7
    let Some(reason) = req.reason.clone() else {
        return Err(reject(
            ErrorCode::MissingReason,
            "a reason is required (request `reason` or `params.reason`)",
        ));
    };
    // 1.8: the daemon does not start without valid manifests, so the registry is always loaded.
    // 1.9
    let Some(command) = registry.resolve(&req.tool) else {
        return Err(reject(
            ErrorCode::UnknownTool,
            format!("unknown tool {:?}", req.tool),
        ));
    };
    // 1.10 — validated with the reason in place, as the bridge executes it.
    let mut executed = req.params.clone();
    if let Value::Object(map) = &mut executed {
        map.entry("reason")
            .or_insert_with(|| Value::String(reason.clone()));
    }
    if let Err(errors) = registry.validate_params(command, &executed) {
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let entries: Vec<Value> = errors
            .iter()
            .take(MAX_FIELD_ERRORS)
            .map(|e| json!({"field": e.field, "pointer": e.pointer(), "message": e.message}))
            .collect();
        let mut details = Map::new();
        details.insert("errors".into(), Value::Array(entries));
        if errors.len() > MAX_FIELD_ERRORS {
            details.insert("omitted".into(), json!(errors.len() - MAX_FIELD_ERRORS));
        }
        let mut rejection = reject(
            ErrorCode::InvalidParams,
            format!("invalid params for {}: {}", command.name, text.join("; ")),
        );
        rejection.details = Some(details);
        return Err(rejection);
    }
    let params_digest = params_hash_hex(&req.params)
        .map_err(|e| reject(ErrorCode::InvalidParams, e.to_string()))?;
    Ok(Validated {
        command,
        params_digest,
        reason,
    })
}

fn check_sizes(req: &NormalizedRequest) -> Result<(), Rejection> {
    let too_long = |what: &str, value: &str, limit: usize| -> Result<(), Rejection> {
        if value.chars().count() > limit {
            Err(reject(
                ErrorCode::PayloadTooLarge,
                format!("{what} is longer than {limit} characters"),
            ))
        } else {
            Ok(())
        }
    };
    too_long("request_id", &req.request_id, REQUEST_ID_CHARS)?;
    too_long("idempotency_key", &req.idempotency_key, REQUEST_ID_CHARS)?;
    too_long(
        "runtime_session_id",
        &req.runtime_session_id,
        RUNTIME_SESSION_ID_CHARS,
    )?;
    if let Some(p) = &req.phone_session_id {
        too_long("phone_session_id", p, SESSION_ID_CHARS)?;
    }
    if let Some(r) = &req.reason {
        too_long("reason", r, REASON_CHARS)?;
    }
    // Params size as canonical JSON (non-objects and unsafe numbers are left to 1.10).
    if let Ok(text) = canonical_json(&req.params)
        && text.len() > PARAMS_CANONICAL_BYTES
    {
        return Err(reject(
            ErrorCode::PayloadTooLarge,
            format!(
                "params are {} bytes as canonical JSON; the limit is {PARAMS_CANONICAL_BYTES}",
                text.len()
            ),
        ));
    }
    Ok(())
}
