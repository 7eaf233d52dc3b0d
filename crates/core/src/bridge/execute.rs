//! Step 5, execute: the command runs on the device or on a runtime-owned service, within the
//! request's timeout, and its outcome becomes a tool result.
//!
//! A state-changing request that runs without a confirmation is bracketed by the store
//! (`execute_recorded`): its executing record and the audit record of the attempt commit
//! together before the side effect; its final result, the outcome's audit record and the end
//! of the executing record commit together after it. When the first write fails nothing runs
//! (`audit_unavailable`); an executing record left behind (a crash, a failed second write) is
//! settled as `execution_result_unknown` (`settle_interrupted`) and never runs again.

use std::time::Duration;

use openphone_device::{CallOrigin, DeviceAnswer, DeviceCall, DeviceError};
use openphone_policy::{Caller, Context};
use openphone_protocol::{Command, ErrorCode, Executor, ToolResult};
use openphone_store::{Execution, IdentityKey, SessionStatus, StoreError};
use serde_json::{Map, Value, json};

use super::audit::{Attempt, Unaudited};
use super::{ToolBridge, result_json};
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
        let params = Value::Object(params);
        let timeout = Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(30_000));
        let outcome = match command.executor {
            Executor::Device => {
                let origin = CallOrigin {
                    runtime: runtime.clone(),
                    request_id: req.request_id.clone(),
                    phone_session_id: req.phone_session_id.clone(),
                };
                let call = DeviceCall {
                    command,
                    params: &params,
                    origin: &origin,
                };
                match self.routed_device(req) {
                    // A read for a caller of text: the phone may answer with text it kept.
                    Ok(device) if req.answer_as_text && !command.mutating => {
                        match tokio::time::timeout(timeout, device.execute_for_text(call)).await {
                            Ok(Ok(DeviceAnswer::Text(object))) => {
                                let mut result =
                                    ToolResult::ok_text(runtime, &req.request_id, object);
                                result.openphone_task_id = Some(task_id);
                                return result;
                            }
                            Ok(Ok(DeviceAnswer::Value(value))) => Ok(Ok(value)),
                            Ok(Err(e)) => Ok(Err(e)),
                            Err(elapsed) => Err(elapsed),
                        }
                    }
                    Ok(device) => tokio::time::timeout(timeout, device.execute(call)).await,
                    // Configured phones changed since the request was stored: nothing runs.
                    Err(e) => Ok(Err(DeviceError::invalid("device_id", e.to_string()))),
                }
            }
            Executor::Runtime => match self.services.find(&command.name) {
                Some(service) => {
                    let call = services::ServiceCall {
                        caller,
                        name: &command.name,
                        params: &params,
                        phone_session_id: req.phone_session_id.as_deref(),
                        runtime_session_id: &req.runtime_session_id,
                        now_ms: started,
                    };
                    tokio::time::timeout(timeout, service.execute(call)).await
                }
                None => Ok(services::execute(
                    &self.store,
                    caller,
                    &req.runtime_session_id,
                    &command.name,
                    &params,
                    started,
                )),
            },
        };
        let mut result = match outcome {
            Ok(Ok(Value::Object(map))) => ToolResult::ok(runtime, &req.request_id, map),
            Ok(Ok(other)) => {
                let mut map = Map::new();
                map.insert("value".into(), other);
                ToolResult::ok(runtime, &req.request_id, map)
            }
            // A runtime-owned service that finds the params semantically wrong (an empty
            // title, an unknown job type) answers invalid_params, as its tool's spec says.
            Ok(Err(e @ DeviceError::InvalidInput { .. }))
                if command.executor == Executor::Runtime =>
            {
                let details = device_failure(runtime, &req.request_id, &e)
                    .error
                    .and_then(|error| error.details)
                    .unwrap_or_default();
                ToolResult::failure(
                    runtime,
                    &req.request_id,
                    ErrorCode::InvalidParams,
                    e.to_string(),
                )
                .with_details(details)
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

    /// Steps 5 and 6 of a state-changing request that needs no confirmation: the executing
    /// record and the attempt's audit record (durable before anything runs), the side effect,
    /// then the final result with the outcome's audit record. Fails closed: without the first
    /// record nothing runs; without the second the answer is `audit_unavailable` and the
    /// executing record stays, so the request is never run again.
    pub(super) async fn execute_recorded(
        &self,
        attempt: &Attempt<'_>,
        identity: &IdentityKey,
        command: &Command,
        context: &Context,
        reviewed: bool,
    ) -> ToolResult {
        let (caller, req, started) = (attempt.caller, attempt.req, attempt.started);
        let begin = Execution {
            identity: identity.clone(),
            request_id: req.request_id.clone(),
            attempt: attempt.attempt_entry(),
            started_at_ms: self.now_ms(),
        };
        if let Err(e) = self.store.begin_execution_async(begin).await {
            return attempt.audit_unavailable(&e, Unaudited::NothingRan);
        }
        let result = self.execute(caller, req, command, started).await;
        // An OS dialog the phone put up: the user's to answer (`os_dialogs.rs`).
        let result = self
            .after_direct(caller, req, command, identity, context, reviewed, result)
            .await;
        let outcome = attempt.outcome_entry(&result, self.now_ms() - started);
        let access = tracing::enabled!(
            target: super::ACCESS_LOG_TARGET,
            tracing::Level::INFO
        )
        .then(|| outcome.clone());
        match self
            .store
            .finish_execution_async(
                identity.clone(),
                req.request_id.clone(),
                result_json(&result),
                outcome,
                self.now_ms(),
            )
            .await
        {
            Ok(_) => {
                if let Some(outcome) = &access {
                    self.log_line(outcome);
                }
                result
            }
            Err(e) => attempt.audit_unavailable(&e, Unaudited::RanUnrecorded),
        }
    }

    /// Settles a direct execution that never recorded its outcome: its final result is
    /// `execution_result_unknown` (recorded for replay, with its audit record, in one
    /// transaction); it is never run again. Returns that result.
    pub(super) fn settle_interrupted(
        &self,
        execution: &Execution,
    ) -> Result<ToolResult, StoreError> {
        let result = ToolResult::failure(
            &execution.identity.runtime,
            &execution.request_id,
            ErrorCode::ExecutionResultUnknown,
            "the daemon stopped while this action ran (or could not record its result); \
             whether it took effect is unknown, and it is not run again",
        );
        let now = self.now_ms();
        let mut entry = execution.attempt.clone();
        entry.at_ms = now;
        entry.status = Some(result.status);
        entry.error_code = Some(ErrorCode::ExecutionResultUnknown.as_str().to_owned());
        entry.result_digest = None;
        let stored = self.store.finish_execution(
            &execution.identity,
            &execution.request_id,
            &result_json(&result),
            &entry,
            now,
        )?;
        self.log_line(&entry);
        Ok(super::parse_result(&stored.result).unwrap_or(result))
    }

    /// Start-up recovery of direct executions: every one without an outcome is settled as
    /// `execution_result_unknown`. Returns their audit ids.
    pub(super) fn recover_executions(&self) -> Result<Vec<String>, StoreError> {
        let mut settled = Vec::new();
        for execution in self.store.list_executions()? {
            self.settle_interrupted(&execution)?;
            settled.push(execution.attempt.audit_id.clone());
        }
        Ok(settled)
    }

    /// The execution-context (task) id of a runtime session scope, made on first use (and
    /// again after the scope was evicted from the bounded cache, `tasks.rs`).
    fn task_for(&self, scope: &str) -> String {
        lock(&self.tasks).get_or_make(scope, || format!("task-{}", uuid::Uuid::new_v4()))
    }
}

/// Maps a device failure onto the tool-result catalogue (§8.2 step 5).
fn device_failure(runtime: &str, request_id: &str, error: &DeviceError) -> ToolResult {
    let (code, message) = (error.catalogue_code(), error.to_string());
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
