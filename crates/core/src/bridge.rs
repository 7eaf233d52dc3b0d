//! The ToolBridge: the one path by which any runtime touches the phone.
//!
//! validate → decide → replay → confirm → execute → record (`runtime-protocol.md` §8.2).
//!
//! - **validate** (`request.rs`): sizes, identity, tool, reason, params schema.
//! - **decide**: the pure policy stack (`openphone-policy`) returns Allow / Confirm / Deny with
//!   a proof.
//! - **replay**: for mutating commands, a request id reused for another body is
//!   `idempotency_conflict`; a final result recorded under the identity key is returned again,
//!   re-addressed, and nothing executes.
//! - **confirm**: a durable pending confirmation bound to the exact request (identity key =
//!   runtime + runtime session + tool + params digest + idempotency key). Only an operator can
//!   resolve it; on approval the **stored** request runs, re-checked against policy then.
//! - **execute**: on the device, or on a runtime-owned service (memory, watchers).
//! - **record**: the final result of every mutating request (for replay), a hash-chained audit
//!   record per request and per confirmation transition, events, the phone session's status.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use openphone_clock::Clock;
use openphone_device::{DeviceError, PhoneDevice};
use openphone_policy::{
    Autonomy, Caller, Context, Decision, Requirement, Role, StandingApproval, ToolPolicy,
    ToolSelector,
};
use openphone_protocol::{
    Command, ErrorCode, Executor, Registry, ToolRequest, ToolResult, ToolStatus, params_hash,
};
use openphone_store as store;
use openphone_store::{
    ConfirmationRecord, IdentityKey, NewConfirmation, PendingInsert, RequestCheck, Resolution,
    Scope, SessionStatus, Store, StoreError,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::events::{Audience, EventBus};
use crate::request::{NormalizedRequest, Rejection, normalize, validate};
use crate::services;
use crate::summary::summary;

/// Pending confirmations one runtime may hold at once (§8.2 step 4).
pub const MAX_PENDING_PER_RUNTIME: usize = 32;

/// Configuration the bridge applies to every request.
#[derive(Debug, Clone, Default)]
pub struct BridgeConfig {
    /// Global and per-runtime allow/deny lists (policy layer 2).
    pub tool_policy: ToolPolicy,
}

/// An operator principal: the only kind of caller that can resolve a confirmation. It can be
/// made only from a caller whose credential has the operator role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    principal: String,
    surface: String,
}

impl Operator {
    /// The operator behind `caller`, or `None` for a runtime credential.
    pub fn from_caller(caller: &Caller) -> Option<Operator> {
        match caller.role {
            Role::Operator => Some(Operator {
                principal: caller.principal.clone(),
                surface: caller.transport.as_str().to_owned(),
            }),
            Role::Runtime => None,
        }
    }

    /// `<surface>:<principal>`, recorded as `resolved_by`.
    pub fn label(&self) -> String {
        format!("{}:{}", self.surface, self.principal)
    }
}

/// A host the user designated as a confirming host for one runtime (`mcp.md` §7.1, config
/// `trust_client_confirmation`): its own confirmation dialog may approve that runtime's
/// requests below the risk floor. Made by the daemon from its configuration only; the label
/// (`<source>:<runtime>`) is recorded as `resolved_by`, so audit tells these resolutions apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmingHost {
    runtime: String,
    source: String,
}

impl ConfirmingHost {
    /// `runtime`'s host, resolving through `source` (`mcp_elicitation`, `mcp_input_response`).
    pub fn new(runtime: &str, source: &str) -> ConfirmingHost {
        ConfirmingHost {
            runtime: runtime.to_owned(),
            source: source.to_owned(),
        }
    }

    /// `<source>:<runtime>`, recorded as `resolved_by`.
    pub fn label(&self) -> String {
        format!("{}:{}", self.source, self.runtime)
    }
}

/// The operator's answer to a confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfirmDecision {
    Approve,
    Deny,
}

/// Why a resolve call did nothing.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// Unknown, expired or already resolved (`pending_confirmation_not_found`).
    #[error("no pending confirmation {0:?} (unknown, expired or already resolved)")]
    PendingConfirmationNotFound(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A confirming host tried to resolve a confirmation of the risk floor.
    #[error("confirmation {0:?} needs the user's approval on the phone (confirmation: always)")]
    RiskFloor(String),
    /// A stored confirmation could not be read back.
    #[error("unreadable stored request: {0}")]
    CorruptRecord(String),
}

impl BridgeError {
    /// The catalogue code of the error.
    pub fn code(&self) -> ErrorCode {
        match self {
            BridgeError::PendingConfirmationNotFound(_) => ErrorCode::PendingConfirmationNotFound,
            BridgeError::RiskFloor(_) => ErrorCode::ConfirmationRequired,
            BridgeError::Store(_) | BridgeError::CorruptRecord(_) => ErrorCode::ToolError,
        }
    }
}

/// The request as stored with its confirmation: everything needed to re-check and execute it
/// after approval, possibly after a restart. Executed params always come from here.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredRequest {
    caller: Caller,
    request: NormalizedRequest,
    context: Context,
}

/// What startup recovery found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Approved confirmations whose execution outcome is unknown (never re-run).
    pub result_unknown: Vec<String>,
    /// Pending confirmations whose time passed while the daemon was down.
    pub timed_out: Vec<String>,
    /// Pending confirmations still in time, resolvable again.
    pub still_pending: Vec<String>,
}

/// The ToolBridge.
pub struct ToolBridge {
    registry: &'static Registry,
    store: Arc<Store>,
    device: Arc<dyn PhoneDevice>,
    clock: Arc<dyn Clock>,
    events: Arc<EventBus>,
    config: RwLock<BridgeConfig>,
    /// confirmation id → the final result, once known (requests waiting on it subscribe).
    waiters: Mutex<HashMap<String, watch::Sender<Option<ToolResult>>>>,
    /// scope → execution-context (task) id.
    tasks: Mutex<HashMap<String, String>>,
    /// identity key → the lock held while one request with that identity is replayed,
    /// confirmed or executed, so two of them never both execute.
    key_locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    /// Serialises expiry, so a confirmation is timed out (and announced) once.
    expiry: tokio::sync::Mutex<()>,
}

/// Holds an identity key's lock; drops the map entry when nobody else waits for it.
struct KeyGuard {
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
    lock: Arc<tokio::sync::Mutex<()>>,
    map: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    key: String,
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        let mut map = lock(&self.map);
        self.guard.take();
        // Only the map and this guard hold the lock: nobody is waiting.
        if Arc::strong_count(&self.lock) == 2 {
            map.remove(&self.key);
        }
    }
}

impl std::fmt::Debug for ToolBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolBridge").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ToolBridge {
    /// A bridge over the given store, device, clock and event bus.
    pub fn new(
        registry: &'static Registry,
        store: Arc<Store>,
        device: Arc<dyn PhoneDevice>,
        clock: Arc<dyn Clock>,
        events: Arc<EventBus>,
        config: BridgeConfig,
    ) -> Self {
        Self {
            registry,
            store,
            device,
            clock,
            events,
            config: RwLock::new(config),
            waiters: Mutex::new(HashMap::new()),
            tasks: Mutex::new(HashMap::new()),
            key_locks: Arc::new(Mutex::new(HashMap::new())),
            expiry: tokio::sync::Mutex::new(()),
        }
    }

    async fn lock_identity(&self, identity: &IdentityKey) -> KeyGuard {
        let key = identity.describe();
        let lock = Arc::clone(
            lock(&self.key_locks)
                .entry(key.clone())
                .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(()))),
        );
        let guard = Arc::clone(&lock).lock_owned().await;
        KeyGuard {
            guard: Some(guard),
            lock,
            map: Arc::clone(&self.key_locks),
            key,
        }
    }

    /// A confirmation for this identity that is still waiting or executing.
    fn live_confirmation(
        &self,
        identity: &IdentityKey,
    ) -> Result<Option<ConfirmationRecord>, StoreError> {
        if let Some(pending) = self.store.find_pending(identity, self.now())? {
            return Ok(Some(pending));
        }
        let executing = self.store.list_confirmations(&store::ConfirmationFilter {
            state: Some(store::ConfirmationState::Approved),
            runtime: Some(identity.runtime.clone()),
            limit: None,
        })?;
        Ok(executing.into_iter().find(|r| r.identity == *identity))
    }

    /// The store the bridge records into.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The event bus the bridge publishes on.
    pub fn events(&self) -> &Arc<EventBus> {
        &self.events
    }

    /// Replaces the configuration (e.g. after a config reload).
    pub fn set_config(&self, config: BridgeConfig) {
        *self
            .config
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = config;
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Handles one tool request; a request that needs confirmation is answered at once with
    /// `needs_confirmation` and its `confirmation_id`.
    pub async fn invoke(
        &self,
        caller: &Caller,
        request: ToolRequest,
        context: Context,
    ) -> ToolResult {
        let started = self.now();
        let req = normalize(request);
        self.process(caller, req, context, started).await
    }

    /// Like [`ToolBridge::invoke`], but a request that needs confirmation is answered only when
    /// final: after approval and execution, denial, or expiry.
    pub async fn invoke_and_wait(
        &self,
        caller: &Caller,
        request: ToolRequest,
        context: Context,
    ) -> ToolResult {
        let first = self.invoke(caller, request, context).await;
        let Some(confirmation_id) = waiting_on(&first) else {
            return first;
        };
        match self.wait_final(&confirmation_id).await {
            Some(final_result) => final_result.readdressed_as(&first),
            None => first,
        }
    }

    /// Waits until the confirmation has a final result (approval and execution, denial or
    /// expiry) and returns it; `None` when the confirmation is unknown, or when one that is
    /// already resolved gets no final result within ten minutes (which only a broken store
    /// can cause).
    pub async fn wait_final(&self, confirmation_id: &str) -> Option<ToolResult> {
        // Subscribe before reading the store so a resolution in between is not missed.
        let mut rx = {
            let mut waiters = lock(&self.waiters);
            waiters
                .entry(confirmation_id.to_owned())
                .or_insert_with(|| watch::channel(None).0)
                .subscribe()
        };
        let outcome = self.wait_loop(confirmation_id, &mut rx).await;
        drop(rx);
        let mut waiters = lock(&self.waiters);
        if waiters
            .get(confirmation_id)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            waiters.remove(confirmation_id);
        }
        outcome
    }

    async fn wait_loop(
        &self,
        confirmation_id: &str,
        rx: &mut watch::Receiver<Option<ToolResult>>,
    ) -> Option<ToolResult> {
        const RESOLVED_GRACE: Duration = Duration::from_secs(600);
        const POLL: Duration = Duration::from_secs(1);
        let mut resolved_since: Option<std::time::Instant> = None;
        loop {
            let record = match self.store.get_confirmation(confirmation_id) {
                Ok(Some(r)) => r,
                Ok(None) => return None,
                Err(e) => {
                    tracing::error!(error = %e, "reading confirmation");
                    return None;
                }
            };
            if let Some(result) = record.final_result.as_ref().and_then(parse_result) {
                return Some(result);
            }
            if let Some(result) = rx.borrow_and_update().clone() {
                return Some(result);
            }
            if record.state == store::ConfirmationState::Pending {
                let remaining = record.expires_at_ms - self.now();
                if remaining <= 0 {
                    // Time it out ourselves; if that did not settle it, back off briefly
                    // rather than spin.
                    if self.expire_due().await == 0 {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
                // Wake on resolution, or at expiry (re-checked at least every second, so a
                // clock that jumps is noticed).
                let wait = Duration::from_millis(u64::try_from(remaining).unwrap_or(1)).min(POLL);
                let _ = tokio::time::timeout(wait, rx.changed()).await;
                continue;
            }
            // Approved and executing (or resolved, result being recorded): wait for it.
            let since = *resolved_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() > RESOLVED_GRACE {
                return None;
            }
            let _ = tokio::time::timeout(POLL, rx.changed()).await;
        }
    }

    async fn process(
        &self,
        caller: &Caller,
        req: NormalizedRequest,
        context: Context,
        started: i64,
    ) -> ToolResult {
        let runtime = caller.runtime.clone();
        // Step 1 — validate.
        let validated = match validate(self.registry, caller, &req, true) {
            Ok(v) => v,
            Err(Rejection {
                code,
                message,
                details,
            }) => {
                let mut result = ToolResult::failure(&runtime, &req.request_id, code, message);
                if let Some(details) = details {
                    result = result.with_details(details);
                }
                self.audit_request(caller, &req, None, None, None, &result, None, started);
                return result;
            }
        };
        let command = validated.command;
        let params_digest = validated.params_digest.clone();

        // Step 2 — decide.
        let session_autonomy = self.session_autonomy(caller, req.phone_session_id.as_deref());
        let decision = self.decide(caller, command, &req, session_autonomy, &context);
        if let Requirement::Deny {
            code,
            policy_detail,
            reason,
        } = &decision.requirement
        {
            let details = self.denial_details(caller, command, &decision, policy_detail.as_str());
            let result = ToolResult::failure(&runtime, &req.request_id, *code, reason.clone())
                .with_details(details);
            self.audit_request(
                caller,
                &req,
                Some(command),
                Some(&decision),
                None,
                &result,
                None,
                started,
            );
            self.publish_result(caller, &result);
            return result;
        }

        // Step 3 — replay (mutating commands only: reads are never recorded).
        let identity = IdentityKey::new(
            runtime.clone(),
            &req.runtime_session_id,
            command.name.clone(),
            params_digest.clone(),
            &req.idempotency_key,
            &req.request_id,
        );
        // Held until this request is final, so a second request with the same identity
        // waits and then finds the recorded result (or the live confirmation).
        let _identity_guard = if command.mutating {
            Some(self.lock_identity(&identity).await)
        } else {
            None
        };
        if command.mutating {
            let scope = Scope::new(runtime.clone(), &req.runtime_session_id);
            match self.store.remember_request(
                &scope,
                &req.request_id,
                &command.name,
                &params_digest,
                started,
            ) {
                Ok(RequestCheck::New | RequestCheck::Repeat(_)) => {}
                Ok(RequestCheck::Conflict(entry)) => {
                    let result = ToolResult::failure(
                        &runtime,
                        &req.request_id,
                        ErrorCode::IdempotencyConflict,
                        format!(
                            "request id {:?} already names a request for {} with other params",
                            req.request_id, entry.tool
                        ),
                    );
                    self.audit_request(
                        caller,
                        &req,
                        Some(command),
                        Some(&decision),
                        None,
                        &result,
                        None,
                        started,
                    );
                    return result;
                }
                Err(e) => return self.internal_error(caller, &req, command, &decision, e, started),
            }
            match self.store.find_final(&identity) {
                Ok(Some(recorded)) => {
                    let Some(stored) = parse_result(&recorded.result) else {
                        let e = format!("unreadable recorded result for {}", identity.describe());
                        return self.internal_error(caller, &req, command, &decision, e, started);
                    };
                    let result = stored.readdressed(&runtime, &req.request_id);
                    self.audit_request(
                        caller,
                        &req,
                        Some(command),
                        Some(&decision),
                        Some((None, store::AuditConfirmation::Replayed)),
                        &result,
                        None,
                        started,
                    );
                    return result;
                }
                Ok(None) => {}
                Err(e) => return self.internal_error(caller, &req, command, &decision, e, started),
            }
            // A confirmation for this very request is still waiting or executing: point at it,
            // whatever this attempt's own verdict is (an Allow now must not run it a second
            // time).
            match self.live_confirmation(&identity) {
                Ok(Some(live)) if live.state == store::ConfirmationState::Pending => {
                    return self
                        .confirm(caller, req, command, &decision, identity, context, started);
                }
                Ok(Some(live)) => {
                    let result = needs_confirmation(&runtime, &req.request_id, &live);
                    self.audit_request(
                        caller,
                        &req,
                        Some(command),
                        Some(&decision),
                        Some((
                            Some(live.confirmation_id.clone()),
                            store::AuditConfirmation::Approved,
                        )),
                        &result,
                        None,
                        started,
                    );
                    return result;
                }
                Ok(None) => {}
                Err(e) => return self.internal_error(caller, &req, command, &decision, e, started),
            }
        }

        // Step 4 — confirm.
        if let Requirement::Confirm {
            park_for_review,
            reason,
            ..
        } = &decision.requirement
        {
            if *park_for_review {
                let result = ToolResult::failure(
                    &runtime,
                    &req.request_id,
                    ErrorCode::BackgroundConfirmationRequired,
                    format!("parked for the user's review: {reason}"),
                );
                let result = ToolResult {
                    status: ToolStatus::NeedsConfirmation,
                    requires_confirmation: true,
                    ..result
                };
                self.audit_request(
                    caller,
                    &req,
                    Some(command),
                    Some(&decision),
                    None,
                    &result,
                    None,
                    started,
                );
                return result;
            }
            return self.confirm(caller, req, command, &decision, identity, context, started);
        }

        // Step 5 — execute; step 6 — record.
        let result = self.execute(caller, &req, command, started).await;
        if command.mutating
            && let Err(e) = self.store.record_final(
                &identity,
                &req.request_id,
                &result_json(&result),
                self.now(),
            )
        {
            tracing::error!(error = %e, "recording final result");
        }
        self.audit_request(
            caller,
            &req,
            Some(command),
            Some(&decision),
            None,
            &result,
            Some(self.now() - started),
            started,
        );
        self.publish_result(caller, &result);
        self.touch_session(
            caller,
            req.phone_session_id.as_deref(),
            SessionStatus::Running,
        );
        result
    }

    fn decide(
        &self,
        caller: &Caller,
        command: &Command,
        req: &NormalizedRequest,
        session_autonomy: Option<Autonomy>,
        context: &Context,
    ) -> Decision {
        let config = self
            .config
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let approvals = self.standing_approvals(&caller.runtime);
        let now = u64::try_from(self.now()).unwrap_or(0);
        let input = openphone_policy::PolicyInput {
            command,
            caller,
            request_autonomy: req.autonomy.as_deref(),
            session_autonomy,
            tool_policy: &config.tool_policy,
            platform_supported: self.platform_supports(command),
            context,
            standing_approvals: &approvals,
            params: &req.params,
            now_ms: now,
        };
        openphone_policy::decide(&input)
    }

    fn platform_supports(&self, command: &Command) -> bool {
        match command.executor {
            Executor::Device => self.device.supports(&command.name),
            Executor::Runtime => services::serves(&command.name),
        }
    }

    fn standing_approvals(&self, runtime: &str) -> Vec<StandingApproval> {
        let now = self.now();
        let rows = match self.store.list_approvals(Some(runtime)) {
            Ok(rows) => rows
                .into_iter()
                .filter(|r| r.is_active(now))
                .collect::<Vec<_>>(),
            Err(e) => {
                tracing::error!(error = %e, "reading standing approvals");
                return Vec::new();
            }
        };
        rows.into_iter()
            .filter_map(|row| {
                let tool = ToolSelector::parse(&row.tool).ok()?;
                let constraints = match row.constraints {
                    Value::Object(map) => map.into_iter().collect(),
                    _ => Default::default(),
                };
                Some(StandingApproval {
                    id: row.approval_id.to_string(),
                    runtime: row.runtime,
                    tool,
                    constraints,
                    expires_at_ms: row.expires_at_ms.and_then(|t| u64::try_from(t).ok()),
                    background: row.background,
                    enabled: row.enabled,
                })
            })
            .collect()
    }

    /// The caller's own active phone session with this id. A runtime never borrows another
    /// runtime's session (its autonomy or its status); the operator may name any session.
    fn own_session(
        &self,
        caller: &Caller,
        phone_session_id: Option<&str>,
    ) -> Option<store::PhoneSession> {
        let id = phone_session_id?;
        let session = self.store.get_session(id).ok().flatten()?;
        let owner = caller.role == Role::Operator || session.runtime_kind == caller.runtime;
        (owner && session.status.is_active()).then_some(session)
    }

    fn session_autonomy(
        &self,
        caller: &Caller,
        phone_session_id: Option<&str>,
    ) -> Option<Autonomy> {
        let session = self.own_session(caller, phone_session_id)?;
        Autonomy::normalize(session.autonomy.as_str())
    }

    fn denial_details(
        &self,
        caller: &Caller,
        command: &Command,
        decision: &Decision,
        policy: &str,
    ) -> Map<String, Value> {
        let mut d = Map::new();
        d.insert("policy".into(), json!(policy));
        d.insert("tool".into(), json!(command.name));
        d.insert("runtime".into(), json!(caller.runtime));
        d.insert(
            "autonomy".into(),
            json!(decision.effective_autonomy.as_str()),
        );
        d.insert("risk".into(), json!(command.risk.as_str()));
        d.insert(
            "phone_platform".into(),
            json!(self.device.profile().platform),
        );
        d
    }

    #[allow(clippy::too_many_arguments)]
    fn confirm(
        &self,
        caller: &Caller,
        req: NormalizedRequest,
        command: &Command,
        decision: &Decision,
        identity: IdentityKey,
        context: Context,
        started: i64,
    ) -> ToolResult {
        let runtime = caller.runtime.clone();
        let reason = req.reason.clone().unwrap_or_default();
        let text = summary(&command.name, &reason, &req.params);
        let stored = StoredRequest {
            caller: caller.clone(),
            request: req.clone(),
            context,
        };
        let request_json = match serde_json::to_value(&stored) {
            Ok(v) => v,
            Err(e) => return self.internal_error(caller, &req, command, decision, e, started),
        };
        let new = NewConfirmation {
            confirmation_id: format!("runtime-confirm-{}", uuid::Uuid::new_v4()),
            identity,
            request_id: req.request_id.clone(),
            request: request_json,
            phone_session_id: req.phone_session_id.clone(),
            summary: text,
            risk: command.risk,
            created_at_ms: started,
            expires_at_ms: started + req.timeout_ms,
        };
        let (record, created) = match self.store.insert_pending(&new, MAX_PENDING_PER_RUNTIME) {
            Ok(PendingInsert::Created(r)) => (r, true),
            Ok(PendingInsert::Existing(r)) => (r, false),
            Ok(PendingInsert::TooMany { pending }) => {
                let result = ToolResult::failure(
                    &runtime,
                    &req.request_id,
                    ErrorCode::RateLimited,
                    format!("{runtime} already has {pending} confirmations waiting for the user"),
                );
                self.audit_request(
                    caller,
                    &req,
                    Some(command),
                    Some(decision),
                    None,
                    &result,
                    None,
                    started,
                );
                return result;
            }
            Err(e) => return self.internal_error(caller, &req, command, decision, e, started),
        };
        let result = needs_confirmation(&runtime, &req.request_id, &record);
        self.audit_request(
            caller,
            &req,
            Some(command),
            Some(decision),
            Some((
                Some(record.confirmation_id.clone()),
                store::AuditConfirmation::Pending,
            )),
            &result,
            None,
            started,
        );
        let payload = json!({
            "confirmation_id": record.confirmation_id,
            "request_id": req.request_id,
            "runtime": runtime,
            "runtime_session_id": req.runtime_session_id,
            "tool": command.name,
            "summary": record.summary,
            "reason": reason,
            "autonomy": decision.effective_autonomy.as_str(),
            "timeout_ms": record.expires_at_ms - record.created_at_ms,
            "expires_at_ms": record.expires_at_ms,
            "risk": command.risk.as_str(),
            "phone_session_id": req.phone_session_id,
            "created": created,
            "result": result_json(&result),
        });
        self.publish("runtime.confirmation.required", payload, &runtime);
        self.touch_session(
            caller,
            req.phone_session_id.as_deref(),
            SessionStatus::WaitingForConfirmation,
        );
        result
    }

    /// Step 5: runs the command and normalises its outcome.
    async fn execute(
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

    fn task_for(&self, scope: &str) -> String {
        lock(&self.tasks)
            .entry(scope.to_owned())
            .or_insert_with(|| format!("task-{}", uuid::Uuid::new_v4()))
            .clone()
    }

    /// Resolves a pending confirmation. Only an [`Operator`] can; the first resolution wins.
    /// Approval executes the stored request (re-checked against policy now) exactly once.
    /// Returns the final tool result.
    pub async fn resolve(
        &self,
        operator: &Operator,
        confirmation_id: &str,
        decision: ConfirmDecision,
    ) -> Result<ToolResult, BridgeError> {
        let denial = (
            ErrorCode::UserDeniedConfirmation,
            "the user denied this request",
        );
        self.resolve_as(&operator.label(), confirmation_id, decision, denial)
            .await
    }

    /// Resolves a pending confirmation through a host the user designated as a confirming
    /// host for `host.runtime` (`mcp.md` §7.1): only that runtime's own confirmations, and
    /// never one of the risk floor (`confirmation: "always"`), which only an [`Operator`] can
    /// approve. A denial records `denial` as the code (`user_denied_confirmation` for a
    /// decline, `confirmation_cancelled` for a dismissed prompt).
    pub async fn resolve_as_host(
        &self,
        host: &ConfirmingHost,
        confirmation_id: &str,
        decision: ConfirmDecision,
        denial: ErrorCode,
    ) -> Result<ToolResult, BridgeError> {
        let record = self
            .store
            .get_confirmation(confirmation_id)?
            .filter(|r| r.identity.runtime == host.runtime)
            .ok_or_else(|| BridgeError::PendingConfirmationNotFound(confirmation_id.to_owned()))?;
        let below_floor = self
            .registry
            .resolve(&record.identity.tool)
            .is_some_and(|c| c.confirmation != openphone_protocol::Confirmation::Always);
        if !below_floor {
            return Err(BridgeError::RiskFloor(confirmation_id.to_owned()));
        }
        let message = match denial {
            ErrorCode::ConfirmationCancelled => "the user dismissed the confirmation prompt",
            _ => "the user denied this request",
        };
        self.resolve_as(&host.label(), confirmation_id, decision, (denial, message))
            .await
    }

    /// Withdraws a runtime's own pending confirmation (its call was cancelled): the request
    /// never executes and its final result is `cancelled`. Only the runtime that made the
    /// request can withdraw it, and only while it is still pending; withdrawing can never
    /// approve anything.
    pub async fn withdraw(
        &self,
        caller: &Caller,
        confirmation_id: &str,
    ) -> Result<ToolResult, BridgeError> {
        let owned = self
            .store
            .get_confirmation(confirmation_id)?
            .is_some_and(|r| r.identity.runtime == caller.runtime);
        if !owned {
            return Err(BridgeError::PendingConfirmationNotFound(
                confirmation_id.to_owned(),
            ));
        }
        let label = format!("{}:{}:withdrawn", caller.transport.as_str(), caller.runtime);
        let denial = (
            ErrorCode::Cancelled,
            "the request was cancelled by its caller before it ran",
        );
        self.resolve_as(&label, confirmation_id, ConfirmDecision::Deny, denial)
            .await
    }

    async fn resolve_as(
        &self,
        label: &str,
        confirmation_id: &str,
        decision: ConfirmDecision,
        denial: (ErrorCode, &str),
    ) -> Result<ToolResult, BridgeError> {
        let now = self.now();
        let resolution = match decision {
            ConfirmDecision::Approve => Resolution::Approve,
            ConfirmDecision::Deny => Resolution::Deny,
        };
        let record = match self.store.resolve(confirmation_id, resolution, label, now) {
            Ok(r) => r,
            Err(e) if e.is_pending_confirmation_not_found() => {
                // An expired one was just moved to `timeout`: give it its final result.
                if let StoreError::ConfirmationNotPending { .. } = &e {
                    self.expire_due().await;
                }
                return Err(BridgeError::PendingConfirmationNotFound(
                    confirmation_id.to_owned(),
                ));
            }
            Err(e) => return Err(e.into()),
        };
        let stored: StoredRequest = match serde_json::from_value(record.request.clone()) {
            Ok(s) => s,
            Err(e) => {
                // Nothing can be executed from an unreadable record; close it with an error so
                // no one waits for it forever.
                let failure = ToolResult::failure(
                    &record.identity.runtime,
                    &record.request_id,
                    ErrorCode::ToolError,
                    "the stored request could not be read; nothing was executed",
                );
                let closed = match decision {
                    ConfirmDecision::Approve => {
                        self.store
                            .complete(&record.confirmation_id, &result_json(&failure), now)
                    }
                    ConfirmDecision::Deny => self.store.attach_final_result(
                        &record.confirmation_id,
                        &result_json(&failure),
                        now,
                    ),
                };
                if let Err(store_error) = closed {
                    tracing::error!(error = %store_error, "closing an unreadable confirmation");
                }
                self.wake(&record.confirmation_id, &failure);
                return Err(BridgeError::CorruptRecord(format!(
                    "confirmation {confirmation_id}: {e}"
                )));
            }
        };
        match decision {
            ConfirmDecision::Deny => {
                let result = ToolResult::failure(
                    &stored.caller.runtime,
                    &record.request_id,
                    denial.0,
                    denial.1,
                );
                self.finish(
                    &record,
                    &stored,
                    result,
                    store::AuditConfirmation::Denied,
                    "denied",
                    None,
                )
            }
            ConfirmDecision::Approve => {
                // The identity lock keeps a retry of the same request from running beside it.
                let _identity_guard = self.lock_identity(&record.identity).await;
                self.audit_transition(
                    &record,
                    &stored,
                    store::AuditConfirmation::Approved,
                    None,
                    None,
                );
                let result = self.execute_approved(&stored).await;
                let duration = self.now() - now;
                match self.store.complete(
                    &record.confirmation_id,
                    &result_json(&result),
                    self.now(),
                ) {
                    Ok(done) => {
                        self.announce(
                            &done,
                            &stored,
                            &result,
                            store::AuditConfirmation::Completed,
                            "approved",
                            Some(duration),
                        );
                        Ok(result)
                    }
                    Err(e) => {
                        // Executed but not recorded: tell whoever waits, and the operator.
                        self.wake(&record.confirmation_id, &result);
                        Err(e.into())
                    }
                }
            }
        }
    }

    /// Re-runs steps 1 and 2 on the stored request; a Confirm counts as satisfied by this
    /// approval, a Deny wins; then executes.
    async fn execute_approved(&self, stored: &StoredRequest) -> ToolResult {
        let caller = &stored.caller;
        let req = &stored.request;
        let runtime = &caller.runtime;
        let command = match validate(self.registry, caller, req, true) {
            Ok(v) => v.command,
            Err(Rejection { code, message, .. }) => {
                return ToolResult::failure(runtime, &req.request_id, code, message);
            }
        };
        let session_autonomy = self.session_autonomy(caller, req.phone_session_id.as_deref());
        let decision = self.decide(caller, command, req, session_autonomy, &stored.context);
        if let Requirement::Deny {
            code,
            policy_detail,
            reason,
        } = &decision.requirement
        {
            let details = self.denial_details(caller, command, &decision, policy_detail.as_str());
            return ToolResult::failure(
                runtime,
                &req.request_id,
                *code,
                format!("denied after approval: {reason}"),
            )
            .with_details(details);
        }
        let started = self.now();
        let result = self.execute(caller, req, command, started).await;
        self.touch_session(
            caller,
            req.phone_session_id.as_deref(),
            SessionStatus::Running,
        );
        result
    }

    /// Stores a final result for a confirmation that ended without executing, then announces.
    fn finish(
        &self,
        record: &ConfirmationRecord,
        stored: &StoredRequest,
        result: ToolResult,
        state: store::AuditConfirmation,
        resolution: &str,
        duration: Option<i64>,
    ) -> Result<ToolResult, BridgeError> {
        let done = self.store.attach_final_result(
            &record.confirmation_id,
            &result_json(&result),
            self.now(),
        )?;
        self.announce(&done, stored, &result, state, resolution, duration);
        Ok(result)
    }

    /// Audit, events and waiters for a confirmation that reached its final result.
    fn announce(
        &self,
        record: &ConfirmationRecord,
        stored: &StoredRequest,
        result: &ToolResult,
        state: store::AuditConfirmation,
        resolution: &str,
        duration: Option<i64>,
    ) {
        self.audit_transition(record, stored, state, Some(result), duration);
        let runtime = &stored.caller.runtime;
        let payload = json!({
            "confirmation_id": record.confirmation_id,
            "request_id": record.request_id,
            "runtime": runtime,
            "runtime_session_id": stored.request.runtime_session_id,
            "tool": record.identity.tool,
            "resolution": resolution,
            "result": result_json(result),
        });
        self.publish("runtime.confirmation.resolved", payload, runtime);
        self.publish_result(&stored.caller, result);
        self.touch_session(
            &stored.caller,
            stored.request.phone_session_id.as_deref(),
            SessionStatus::Running,
        );
        self.wake(&record.confirmation_id, result);
    }

    /// Hands a confirmation's final result to every request waiting on it.
    fn wake(&self, confirmation_id: &str, result: &ToolResult) {
        if let Some(tx) = lock(&self.waiters).remove(confirmation_id) {
            let _ = tx.send(Some(result.clone()));
        }
    }

    /// Times out every pending confirmation past its expiry. Returns how many.
    pub async fn expire_due(&self) -> usize {
        let _serial = self.expiry.lock().await;
        let now = self.now();
        let expired = match self.store.expire_due(now) {
            Ok(list) => list,
            Err(e) => {
                tracing::error!(error = %e, "expiring confirmations");
                return 0;
            }
        };
        let mut done = 0;
        for record in &expired {
            if self.finish_timeout(record).is_some() {
                done += 1;
            }
        }
        // Then any left in `timeout` without a final result (moved there by a late resolve
        // call, or by an earlier run that stopped before finishing them).
        let unfinished = self
            .store
            .list_confirmations(&store::ConfirmationFilter {
                state: Some(store::ConfirmationState::Timeout),
                ..Default::default()
            })
            .unwrap_or_default();
        for record in unfinished.iter().filter(|r| r.final_result.is_none()) {
            if self.finish_timeout(record).is_some() {
                done += 1;
            }
        }
        done
    }

    fn finish_timeout(&self, record: &ConfirmationRecord) -> Option<ToolResult> {
        let stored: StoredRequest = serde_json::from_value(record.request.clone()).ok()?;
        let result = ToolResult::failure(
            &stored.caller.runtime,
            &record.request_id,
            ErrorCode::Timeout,
            "the confirmation expired before the user answered",
        );
        self.finish(
            record,
            &stored,
            result,
            store::AuditConfirmation::Timeout,
            "timeout",
            None,
        )
        .map_err(|e| tracing::error!(error = %e, "finishing a timed-out confirmation"))
        .ok()
    }

    /// Startup recovery: approved confirmations whose outcome is unknown become
    /// `result_unknown` (final result `execution_result_unknown`, never re-run); pending ones
    /// past their expiry time out; the rest stay pending.
    pub async fn recover(&self) -> Result<RecoveryReport, BridgeError> {
        let recovery = self.store.recover_after_restart(self.now())?;
        let mut report = RecoveryReport::default();
        for record in &recovery.result_unknown {
            if let Ok(stored) = serde_json::from_value::<StoredRequest>(record.request.clone()) {
                let result = ToolResult::failure(
                    &stored.caller.runtime,
                    &record.request_id,
                    ErrorCode::ExecutionResultUnknown,
                    "the daemon stopped while this approved action ran; it is not run again",
                );
                self.finish(
                    record,
                    &stored,
                    result,
                    store::AuditConfirmation::ResultUnknown,
                    "result_unknown",
                    None,
                )?;
            }
            report.result_unknown.push(record.confirmation_id.clone());
        }
        for record in &recovery.timed_out {
            self.finish_timeout(record);
            report.timed_out.push(record.confirmation_id.clone());
        }
        report.still_pending = recovery
            .still_pending
            .iter()
            .map(|r| r.confirmation_id.clone())
            .collect();
        Ok(report)
    }

    fn publish(&self, event: &str, payload: Value, runtime: &str) {
        let audience = Audience {
            runtime: Some(runtime.to_owned()),
            operators: true,
        };
        if let Err(e) = self.events.publish(event, payload, audience) {
            tracing::error!(error = %e, "publishing an event");
        }
    }

    fn publish_result(&self, caller: &Caller, result: &ToolResult) {
        self.publish("runtime.tool.result", result_json(result), &caller.runtime);
    }

    fn touch_session(
        &self,
        caller: &Caller,
        phone_session_id: Option<&str>,
        status: SessionStatus,
    ) {
        let Some(session) = self.own_session(caller, phone_session_id) else {
            return;
        };
        let id = session.phone_session_id.as_str();
        if session.status == status {
            return;
        }
        if let Err(e) = self
            .store
            .update_session_status(id, status, None, self.now())
        {
            tracing::error!(error = %e, "updating a phone session");
            return;
        }
        self.publish(
            "runtime.session.updated",
            json!({
                "phone_session_id": id,
                "runtime_session_id": session.runtime_session_id,
                "status": status.as_str(),
                "updated_at_ms": self.now(),
            }),
            &session.runtime_kind,
        );
    }

    fn internal_error(
        &self,
        caller: &Caller,
        req: &NormalizedRequest,
        command: &Command,
        decision: &Decision,
        error: impl std::fmt::Display,
        started: i64,
    ) -> ToolResult {
        tracing::error!(error = %error, tool = %command.name, "tool bridge storage failure");
        let result = ToolResult::failure(
            &caller.runtime,
            &req.request_id,
            ErrorCode::ToolError,
            "the phone could not record this request; nothing was executed",
        );
        self.audit_request(
            caller,
            req,
            Some(command),
            Some(decision),
            None,
            &result,
            None,
            started,
        );
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn audit_request(
        &self,
        caller: &Caller,
        req: &NormalizedRequest,
        command: Option<&Command>,
        decision: Option<&Decision>,
        confirmation: Option<(Option<String>, store::AuditConfirmation)>,
        result: &ToolResult,
        duration_ms: Option<i64>,
        at_ms: i64,
    ) {
        let (confirmation_id, confirmation_state) = match confirmation {
            Some((id, state)) => (id, Some(state)),
            None => (
                None,
                decision.map(|_| {
                    if result.status == ToolStatus::NeedsConfirmation {
                        store::AuditConfirmation::Pending
                    } else {
                        store::AuditConfirmation::NotRequired
                    }
                }),
            ),
        };
        let entry = store::AuditEntry {
            audit_id: result.audit_id.clone(),
            kind: store::AuditKind::ToolRequest,
            at_ms,
            runtime: caller.runtime.clone(),
            caller: audit_caller(caller),
            phone_session_id: req.phone_session_id.clone(),
            runtime_session_id: Some(req.session_scope().to_owned()),
            request_id: req.request_id.clone(),
            idempotency_key: Some(req.idempotency_key.clone()),
            tool: Some(command.map_or_else(|| req.tool.clone(), |c| c.name.clone())),
            risk: command.map(|c| c.risk),
            mutating: command.map(|c| c.mutating),
            autonomy: decision.and_then(|d| store::Autonomy::parse(d.effective_autonomy.as_str())),
            decision: decision.map(|d| policy_decision(&d.requirement)),
            proof_digest: decision.map(Decision::proof_digest),
            policy_proof: decision.and_then(|d| serde_json::to_value(&d.proof).ok()),
            confirmation_id,
            confirmation: confirmation_state,
            status: Some(result.status),
            error_code: result.error.as_ref().map(|e| e.code.as_str().to_owned()),
            duration_ms,
            params_hash: params_hash(&req.params).ok(),
            result_digest: result_digest(result),
        };
        self.append_audit(&entry);
    }

    fn audit_transition(
        &self,
        record: &ConfirmationRecord,
        stored: &StoredRequest,
        state: store::AuditConfirmation,
        result: Option<&ToolResult>,
        duration_ms: Option<i64>,
    ) {
        let caller = &stored.caller;
        let command = self.registry.resolve(&record.identity.tool);
        let entry = store::AuditEntry {
            audit_id: openphone_protocol::audit_id(&caller.runtime, &record.request_id),
            kind: store::AuditKind::ConfirmationTransition,
            at_ms: self.now(),
            runtime: caller.runtime.clone(),
            caller: audit_caller(caller),
            phone_session_id: record.phone_session_id.clone(),
            runtime_session_id: Some(record.identity.runtime_session_id.clone()),
            request_id: record.request_id.clone(),
            idempotency_key: Some(record.identity.idempotency_key.clone()),
            tool: Some(record.identity.tool.clone()),
            risk: Some(record.risk),
            mutating: command.map(|c| c.mutating),
            autonomy: None,
            decision: None,
            proof_digest: None,
            policy_proof: record
                .resolved_by
                .as_ref()
                .map(|by| json!({"resolved_by": by})),
            confirmation_id: Some(record.confirmation_id.clone()),
            confirmation: Some(state),
            status: result.map(|r| r.status),
            error_code: result.and_then(|r| r.error.as_ref().map(|e| e.code.as_str().to_owned())),
            duration_ms,
            params_hash: Some(format!("sha256:{}", record.identity.params_digest)),
            result_digest: result.and_then(result_digest),
        };
        self.append_audit(&entry);
    }

    fn append_audit(&self, entry: &store::AuditEntry) {
        if let Err(e) = self.store.append_audit(entry) {
            tracing::error!(error = %e, audit_id = %entry.audit_id, "writing the audit log");
        }
        tracing::info!(
            event = "runtime_tool",
            runtime = %cut_log(&entry.runtime),
            session = %cut_log(entry.runtime_session_id.as_deref().unwrap_or("")),
            request = %cut_log(&entry.request_id),
            tool = %cut_log(entry.tool.as_deref().unwrap_or("")),
            risk = %entry.risk.map_or("", |r| r.as_str()),
            mutating = entry.mutating.unwrap_or(false),
            autonomy = %entry.autonomy.map_or("", |a| a.as_str()),
            status = %entry.status.map_or("", |s| s.as_str()),
            caller = %cut_log(&entry.caller.principal),
        );
    }
}

/// §15 log-line values: at most 160 characters, spaces replaced by `_`.
fn cut_log(value: &str) -> String {
    value
        .chars()
        .take(160)
        .map(|c| if c == ' ' { '_' } else { c })
        .collect()
}

fn audit_caller(caller: &Caller) -> store::Caller {
    store::Caller {
        runtime: caller.runtime.clone(),
        transport: caller.transport.as_str().to_owned(),
        principal: caller.principal.clone(),
    }
}

fn policy_decision(requirement: &Requirement) -> store::PolicyDecision {
    match requirement {
        Requirement::Allow => store::PolicyDecision::Allow,
        Requirement::Confirm { .. } => store::PolicyDecision::Confirm,
        Requirement::Deny { .. } => store::PolicyDecision::Deny,
    }
}

/// A digest of a result, for the audit (never the result itself).
fn result_digest(result: &ToolResult) -> Option<String> {
    if result.result.is_empty() {
        return None;
    }
    openphone_protocol::value_hash(&Value::Object(result.result.clone())).ok()
}

fn result_json(result: &ToolResult) -> Value {
    serde_json::to_value(result).unwrap_or(Value::Null)
}

fn parse_result(value: &Value) -> Option<ToolResult> {
    serde_json::from_value(value.clone()).ok()
}

fn needs_confirmation(runtime: &str, request_id: &str, record: &ConfirmationRecord) -> ToolResult {
    let timeout_ms = record.expires_at_ms - record.created_at_ms;
    let mut result = ToolResult::failure(
        runtime,
        request_id,
        ErrorCode::MutatingToolRequiresConfirmation,
        "waiting for the user to approve this request on the phone",
    );
    let mut body = Map::new();
    body.insert("confirmation_id".into(), json!(record.confirmation_id));
    body.insert("summary".into(), json!(record.summary));
    body.insert("timeout_ms".into(), json!(timeout_ms));
    body.insert("expires_at_ms".into(), json!(record.expires_at_ms));
    result.result = body;
    result
}

/// The confirmation a `needs_confirmation` answer waits on (not a background park).
pub fn waiting_on(result: &ToolResult) -> Option<String> {
    let code = result.error.as_ref()?.code;
    if result.status != ToolStatus::NeedsConfirmation
        || code != ErrorCode::MutatingToolRequiresConfirmation
    {
        return None;
    }
    result
        .result
        .get("confirmation_id")?
        .as_str()
        .map(str::to_owned)
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

/// Re-addressing a confirmation's final result to the request that waited on it.
trait Readdress {
    fn readdressed_as(self, first: &ToolResult) -> ToolResult;
}

impl Readdress for ToolResult {
    fn readdressed_as(self, first: &ToolResult) -> ToolResult {
        ToolResult {
            request_id: first.request_id.clone(),
            audit_id: first.audit_id.clone(),
            ..self
        }
    }
}
