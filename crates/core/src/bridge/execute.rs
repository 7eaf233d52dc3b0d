//! Step 5, execute: the command runs on the device or on a runtime-owned service, within the
//! request's timeout, and its outcome becomes a tool result.

use std::time::Duration;

use openphone_device::DeviceError;
use openphone_policy::Caller;
use openphone_protocol::{Command, ErrorCode, Executor, ToolResult};
use openphone_store::SessionStatus;
use serde_json::{Map, Value, json};

use super::ToolBridge;
use crate::locks::lock;
use crate::request::NormalizedRequest;
use crate::services;

impl ToolBridge {
    /// Runs the command and normalises its outcome.
    pub(super) async fn execute(
        &self,
        caller: &Caller,
        req: &NormalizedRequest,
        command: &Command,
        started: i64,
    ) -> ToolResult {
        let runtime = &caller.runtime;
        self.touch_session(
            caller,
            req.phone_session_id.as_deref(),
            SessionStatus::Running,
        );
        let task_id = self.task_for(&req.scope(runtime));
        let mut params = match &req.params {
            Value::Object(map) => map.clone(),
            _ => Map::new(),
        };
        // Device params, not a wire shape: what the executor reads besides the request's own.
        if let Some(reason) = &req.reason {
            params.entry("reason").or_insert_with(|| json!(reason));
        }
        params.insert("_runtime".into(), json!(runtime));
        params.insert("_runtime_request_id".into(), json!(req.request_id));
        params.insert("_phone_session_id".into(), json!(req.phone_session_id));
        let params = Value::Object(params);
        let timeout = Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(30_000));
        let outcome = match command.executor {
            Executor::Device => {
                tokio::time::timeout(timeout, self.device.execute(&command.name, &params)).await
            }
            Executor::Runtime => Ok(services::execute(
                &self.store,
                caller,
                &command.name,
                &params,
                started,
            )),
        };
        let mut result = match outcome {
            Ok(Ok(Value::Object(map))) => ToolResult::ok(runtime, &req.request_id, map),
            Ok(Ok(other)) => {
                let mut map = Map::new();
                map.insert("value".into(), other);
                ToolResult::ok(runtime, &req.request_id, map)
            }
            Ok(Err(e)) => device_failure(runtime, &req.request_id, &e),
            // Past the deadline a state-changing command may or may not have happened.
            Err(_elapsed) if command.mutating => ToolResult::failure(
                runtime,
                &req.request_id,
                ErrorCode::ExecutionResultUnknown,
                format!(
                    "{} did not finish within {} ms; whether it took effect is unknown",
                    command.name, req.timeout_ms
                ),
            ),
            Err(_elapsed) => ToolResult::failure(
                runtime,
                &req.request_id,
                ErrorCode::ToolError,
                format!(
                    "{} did not finish within {} ms",
                    command.name, req.timeout_ms
                ),
            ),
        };
        result.openphone_task_id = Some(task_id);
        result
    }

    /// The execution-context (task) id of a runtime session scope, made on first use.
    fn task_for(&self, scope: &str) -> String {
        lock(&self.tasks)
            .entry(scope.to_owned())
            .or_insert_with(|| format!("task-{}", uuid::Uuid::new_v4()))
            .clone()
    }
}

/// Maps a device failure onto the tool-result catalogue (§8.2 step 5).
fn device_failure(runtime: &str, request_id: &str, error: &DeviceError) -> ToolResult {
    let (code, message) = match error {
        DeviceError::DeviceOffline { .. } => (ErrorCode::FrameworkUnavailable, error.to_string()),
        DeviceError::UnsupportedTool { .. } => (
            ErrorCode::ToolNotSupportedByPhonePlatform,
            error.to_string(),
        ),
        _ => (ErrorCode::ToolError, error.to_string()),
    };
    let mut details = Map::new();
    details.insert("device_error".into(), json!(error.code()));
    if let Value::Object(more) = error.details() {
        for (k, v) in more {
            if k != "code" {
                details.insert(k, v);
            }
        }
    }
    ToolResult::failure(runtime, request_id, code, message).with_details(details)
}
