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
//! - **confirm** (`confirm.rs`): a durable pending confirmation bound to the exact request
//!   (identity key = runtime + runtime session + tool + params digest + idempotency key). Only
//!   an operator can resolve it; on approval the **stored** request runs, re-checked against
//!   policy then. `wait.rs` is the one way to wait for its final result.
//! - **execute** (`execute.rs`): on the device, or on a runtime-owned service (memory,
//!   watchers).
//! - **record** (`audit.rs`): the final result of every mutating request (for replay), a
//!   hash-chained audit record per request and per confirmation transition, events, the phone
//!   session's status.
//!
//! Crash and storage rules (fail closed): a state-changing request that runs without a
//! confirmation first writes its durable executing record together with the audit record of
//! the attempt (`execute.rs`); one found without an outcome after a restart (or on a keyed
//! retry) becomes `execution_result_unknown` and never runs again, as an approved
//! confirmation does. When an audit record cannot be written the answer is
//! `audit_unavailable`: nothing runs, and no result is given out without its record.
//!
//! Requests with the same identity key are serialised by the per-identity lock
//! (`identity.rs`).
//!
//! A call without an idempotency key that repeats an identical call from the same principal
//! and session while that call's confirmation waits for the user, or shortly after the user
//! decided it, joins it and gets its outcome (`retry.rs`): a host that retries after its
//! inline wait never opens a second confirmation, and never runs the action twice.
//!
//! A runtime may tag its request only with a phone session of its own (`foreign_session`).
//!
//! A request the user approved on a background job's review runs through the same pipeline
//! with [`ToolBridge::invoke_reviewed`] (`reviewed.rs`): the review satisfies its Confirm or
//! Park, only when the store holds the job's claimed approval of exactly this request.

mod approvals;
mod audit;
mod authority;
mod confirm;
mod execute;
mod explain;
mod grants;
mod identity;
mod os_dialogs;
mod records;
mod retry;
mod reviewed;
mod routing;
mod sessions;
mod settle;
mod tasks;
mod types;
mod wait;
mod world;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use openphone_clock::Clock;
use openphone_device::PhoneDevice;
use openphone_policy::{
    Autonomy, Caller, Context, Decision, Requirement, Role, RuntimeAuthorisation, StandingApproval,
    ToolPolicy, ToolSelector,
};
use openphone_protocol::endpoint::{Event, SessionUpdated};
use openphone_protocol::{Command, ErrorCode, Registry, ToolRequest, ToolResult, ToolStatus};
use openphone_protocol::{DenialDetails, PendingConfirmation};
use openphone_store as store;
use openphone_store::{ConfirmationRecord, RequestCheck, Scope, SessionStatus, Store};
use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::devices::{DeviceGrants, Devices};
use crate::events::{Audience, EventBus};
use crate::invocation::{Answer, Invocation};
use crate::locks::{read, write};
use crate::request::{NormalizedRequest, Rejection, normalize, validate};
use crate::services;

pub use approvals::ApprovalError;
pub use audit::ACCESS_LOG_TARGET;
use audit::{Attempt, Unaudited};
pub use authority::{RESOLVED_BY_CONFIGURATION, Withdrawn};
pub use explain::{EXPLANATION_KEY, explanation_of};
pub use grants::{GOAL_GRANT_MAX_MS, GOAL_PRINCIPAL, goal_scope};
use identity::IdentityLocks;
pub use reviewed::ReviewedApproval;
pub use tasks::MAX_TASK_SCOPES;
pub use types::{BridgeError, ConfirmDecision, ConfirmingHost, Operator, RecoveryReport};
pub use wait::{Waited, waiting_on};
pub use world::{Injected, WorldError};

/// Configuration the bridge applies to every request.
#[derive(Debug, Clone, Default)]
pub struct BridgeConfig {
    /// Global and per-runtime allow/deny lists (policy layer 2).
    pub tool_policy: ToolPolicy,
    /// Every configured runtime's current authorisation (enabled, grants, ceiling), by
    /// runtime id. A confirmation approved later is decided again under its runtime's entry
    /// here, and refused when the runtime is gone (`confirm.rs`). `None` — no runtime
    /// configuration, as in embedded use and tests — keeps the authorisation each request
    /// carried.
    pub runtimes: Option<BTreeMap<String, RuntimeAuthorisation>>,
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
    /// scope → execution-context (task) id, for the scopes used most recently (`tasks.rs`).
    tasks: Mutex<tasks::TaskCache>,
    /// identity key → the lock held while one request with that identity is replayed,
    /// confirmed or executed, so two of them never both execute.
    identity_locks: IdentityLocks,
    /// Serialises expiry, so a confirmation is timed out (and announced) once.
    expiry: tokio::sync::Mutex<()>,
    /// Wakes the daemon's expiry timer when something new may expire (`crate::expiry`).
    pub(crate) expiry_wake: tokio::sync::Notify,
    /// The standing approvals last read from the store, by runtime.
    approvals: Mutex<ApprovalCache>,
    /// Proofs already serialised for the audit (`audit.rs`).
    proofs: Mutex<audit::ProofCache>,
    /// Session grants withdrawn because their outcome could not be recorded: never applied,
    /// even if their revocation could not be written (`grants.rs`).
    withdrawn_grants: Mutex<std::collections::HashSet<i64>>,
    /// Runtime-owned command families served by other crates (`services::RuntimeService`).
    services: services::Installed,
    pub(crate) gating: crate::elevation::Gating, // elevated mode, `[wake]` (seed 002 §2)
    /// Every phone by id (`device` is the first of them); a request is routed by its
    /// `device_id` (`crate::devices`).
    devices: Devices,
    /// Which phones each runtime may act on (`[[runtimes]] devices`).
    device_grants: RwLock<DeviceGrants>,
}

/// What the policy inputs of one request are built from (`ToolBridge::with_policy_input`).
#[derive(Clone, Copy)]
struct PolicyRequest<'a> {
    caller: &'a Caller,
    command: &'a Command,
    req: &'a NormalizedRequest,
    session_autonomy: Option<Autonomy>,
    context: &'a Context,
}

/// Standing approvals as of one `Store::approvals_generation`.
#[derive(Default)]
struct ApprovalCache {
    generation: u64,
    by_runtime: HashMap<String, Arc<Vec<store::StandingApproval>>>,
}

impl std::fmt::Debug for ToolBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolBridge").finish_non_exhaustive()
    }
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
        Self::with_devices(
            registry,
            store,
            Devices::single(device),
            clock,
            events,
            config,
        )
    }

    /// Installs a service for runtime-owned commands (background jobs, live watchers): the
    /// bridge runs the commands it serves through it, after validation, policy and any
    /// confirmation, exactly as it runs device commands. Installed services take precedence
    /// over the core's own, in installation order.
    pub fn install_service(&self, service: Arc<dyn services::RuntimeService>) {
        self.services.install(service);
    }

    /// The store the bridge records into.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The command registry the bridge resolves against.
    pub fn registry(&self) -> &'static Registry {
        self.registry
    }

    /// The configuration the bridge applies now (tool policy, the runtimes' authorisation).
    pub fn config(&self) -> BridgeConfig {
        read(&self.config).clone()
    }

    /// The event bus the bridge publishes on.
    pub fn events(&self) -> &Arc<EventBus> {
        &self.events
    }

    /// The bridge's clock: the one clock that confirmation expiry, recorded times and every
    /// caller's comparison with them read.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// The bridge's clock reading, in Unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// How many request scopes hold a cached task id (at most [`MAX_TASK_SCOPES`]): for
    /// diagnostics and the tests that pin the bound.
    pub fn cached_task_scopes(&self) -> usize {
        crate::locks::lock(&self.tasks).len()
    }

    /// Replaces the configuration (e.g. after a config reload).
    pub fn set_config(&self, config: BridgeConfig) {
        *write(&self.config) = config;
    }

    /// Handles one tool call ([`Invocation`]: caller, context, request); a request that needs
    /// confirmation is answered at once with `needs_confirmation` and its `confirmation_id`
    /// (see [`ToolBridge::wait_for_final`]).
    pub async fn call(&self, invocation: Invocation) -> ToolResult {
        let Invocation {
            caller,
            context,
            request,
            device,
            answer,
        } = invocation;
        let started = self.now_ms();
        let keyed = retry::explicitly_keyed(&request);
        let mut req = self.normalize_on(request, device);
        req.answer_as_text = answer == Answer::Text;
        // Boxed for the reason given in `ToolBridge::invoke`.
        Box::pin(self.process(&caller, req, keyed, context, started, None)).await
    }

    /// Handles one tool request; a request that needs confirmation is answered at once with
    /// `needs_confirmation` and its `confirmation_id` (see [`ToolBridge::wait_for_final`]).
    /// [`ToolBridge::call`] takes the same parts as one [`Invocation`].
    pub async fn invoke(
        &self,
        caller: &Caller,
        request: ToolRequest,
        context: Context,
    ) -> ToolResult {
        let started = self.now_ms();
        let keyed = retry::explicitly_keyed(&request);
        let req = normalize(request);
        // Boxed: the request's future is ~12 KB (every stage of a call), and a caller that embeds
        // it (the endpoint's per-request task, rmcp's handler) would be copied whole at each spawn
        // and poll hand-off; a box is moved as one pointer (issue 34: memcpy was ~5 % of a call).
        Box::pin(self.process(caller, req, keyed, context, started, None)).await
    }

    /// The pipeline. `keyed`: the request carried an idempotency key of its own. `review`:
    /// the request was approved on a background review (`reviewed.rs`,
    /// [`ToolBridge::invoke_reviewed`]).
    async fn process(
        &self,
        caller: &Caller,
        req: NormalizedRequest,
        keyed: bool,
        context: Context,
        started: i64,
        review: Option<&ReviewedApproval>,
    ) -> ToolResult {
        let runtime = caller.runtime.clone();
        let mut req = req;
        let routed = self.route_device(caller, &mut req);
        let attempt = Attempt::new(self, caller, &req, started);
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
                return attempt.finish(result).await;
            }
        };
        let command = validated.command;
        let params_digest = validated.params_digest.clone();
        if let Some(refusal) = routed {
            return attempt.finish(refusal).await;
        }
        if let Some(refusal) = self.foreign_session(caller, &req) {
            return attempt.finish(refusal).await;
        }

        // Step 2 — decide.
        let session_autonomy = self.session_autonomy(caller, req.phone_session_id.as_deref());
        let decision = self.decide(caller, command, &req, session_autonomy, &context);
        let decision = reviewed::satisfied(decision, review);
        let attempt = attempt.decided(command, &params_digest, &decision);
        if let Requirement::Deny {
            code,
            policy_detail,
            reason,
        } = &decision.requirement
        {
            let details = self.denial_details(caller, command, &decision, policy_detail.as_str());
            let result = ToolResult::failure(&runtime, &req.request_id, *code, reason.clone())
                .with_details(details);
            let explanation =
                self.explanation(caller, command, &req, session_autonomy, &context, &decision);
            let result = attempt
                .finish(explain::with_explanation(result, Some(&explanation)))
                .await;
            self.publish_result(caller, &result);
            return result;
        }

        // Step 3 — replay (mutating commands only: reads are never recorded).
        let identity = self.identity_of(&runtime, &req, &command.name, &params_digest);
        // Held until this request is final, so a second request with the same identity
        // waits and then finds the recorded result (or the live confirmation).
        let _identity_guard = if command.mutating {
            Some(self.lock_identity(&identity).await)
        } else {
            None
        };
        if command.mutating {
            let scope = Scope::new(runtime.clone(), &req.runtime_session_id);
            match self
                .store
                .remember_request_async(
                    &scope,
                    &req.request_id,
                    &command.name,
                    &params_digest,
                    started,
                )
                .await
            {
                Ok(RequestCheck::New | RequestCheck::Repeat(_)) => {}
                Ok(RequestCheck::Conflict(entry)) => {
                    return attempt
                        .finish(ToolResult::failure(
                            &runtime,
                            &req.request_id,
                            ErrorCode::IdempotencyConflict,
                            format!(
                                "request id {:?} already names a request for {} with other params",
                                req.request_id, entry.tool
                            ),
                        ))
                        .await;
                }
                Err(e) => return attempt.internal_error(e).await,
            }
            // A confirmation of this request that ran out of time a moment ago is timed out
            // first, so that is replayed rather than the user asked a second time.
            if let Err(e) = self.expire_overdue(&identity).await {
                return attempt.internal_error(e).await;
            }
            match self.store.find_final(&identity) {
                Ok(Some(recorded)) => {
                    let Some(stored) = parse_result(&recorded.result) else {
                        let e = format!("unreadable recorded result for {}", identity.describe());
                        return attempt.internal_error(e).await;
                    };
                    // Recorded before this request arrived: a replay.
                    let result = stored.readdressed(&runtime, &req.request_id);
                    return attempt
                        .finish_confirmation(result, None, store::AuditConfirmation::Replayed)
                        .await;
                }
                Ok(None) => {}
                Err(e) => return attempt.internal_error(e).await,
            }
            // A direct execution of this very request began and never recorded its outcome
            // (the daemon died, or the record could not be written): its result is unknown,
            // and it is never run again.
            match self.store.find_execution(&identity) {
                Ok(Some(interrupted)) => {
                    let result = match self.settle_interrupted(&interrupted) {
                        Ok(result) => result,
                        Err(e) => return attempt.audit_unavailable(&e, Unaudited::NothingRan),
                    };
                    return attempt
                        .finish_confirmation(
                            result.readdressed(&runtime, &req.request_id),
                            None,
                            store::AuditConfirmation::Replayed,
                        )
                        .await;
                }
                Ok(None) => {}
                Err(e) => return attempt.internal_error(e).await,
            }
            // A confirmation for this very request is still waiting or executing: point at it,
            // whatever this attempt's own verdict is (an Allow now must not run it a second
            // time).
            match self.live_confirmation(&identity) {
                Ok(Some(live)) if live.state == store::ConfirmationState::Pending => {
                    return self
                        .confirm(&attempt, command, &decision, identity, context, keyed)
                        .await;
                }
                Ok(Some(live)) => {
                    let result = needs_confirmation(&runtime, &req.request_id, &live);
                    return attempt
                        .finish_confirmation(
                            result,
                            Some(live.confirmation_id.clone()),
                            store::AuditConfirmation::Approved,
                        )
                        .await;
                }
                Ok(None) => {}
                Err(e) => return attempt.internal_error(e).await,
            }
        }

        // A call without an idempotency key that retries an identical call waiting for the
        // user (or decided a moment ago) joins it instead of asking the user again
        // (`retry.rs`). Held until this request is answered, so of two identical calls
        // arriving together the second finds the first's confirmation.
        let retry_key = match review {
            None => Self::retry_key(caller, &req, keyed, command, &decision, &context),
            Some(_) => None,
        };
        let _retry_guard = match &retry_key {
            Some(key) => Some(self.lock_key(key.lock_key().to_owned()).await),
            None => None,
        };
        if let Some(key) = &retry_key
            && let Some(joined) = self.join_retry(&attempt, command, key).await
        {
            return joined;
        }

        // A reviewed request runs only if it is what the job's approved review holds.
        if let Some(review) = review
            && let Err(why) = self.check_review(caller, &req, command, review)
        {
            let result = reviewed::refused(&runtime, &req.request_id, &why);
            return attempt.finish(result).await;
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
                let explanation =
                    self.explanation(caller, command, &req, session_autonomy, &context, &decision);
                return attempt
                    .finish(explain::with_explanation(result, Some(&explanation)))
                    .await;
            }
            return self
                .confirm(&attempt, command, &decision, identity, context, keyed)
                .await;
        }

        // Step 5 — execute; step 6 — record. A state-changing request runs only after its
        // executing record and the audit record of the attempt are durable; a read is given
        // out only once its audit record is written.
        let result = if command.mutating {
            self.execute_recorded(&attempt, &identity, command, &context, review.is_some())
                .await
        } else {
            let result = self.execute(caller, &req, command, started).await;
            attempt
                .finish_executed(result, self.now_ms() - started)
                .await
        };
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
        let inputs = PolicyRequest {
            caller,
            command,
            req,
            session_autonomy,
            context,
        };
        self.with_policy_input(&inputs, false, openphone_policy::decide)
    }

    /// Builds the policy inputs of a request — the tool policy, platform support, the
    /// runtime's standing approvals, the caller's own active phone session, now — and hands
    /// them to `f`: the one place `decide` and `explain` (`explain.rs`) get them from. The
    /// session is looked up only when a session grant could apply, or when `with_session`
    /// asks for it (an explanation names it).
    fn with_policy_input<T>(
        &self,
        r: &PolicyRequest<'_>,
        with_session: bool,
        f: impl FnOnce(&openphone_policy::PolicyInput<'_>) -> T,
    ) -> T {
        let PolicyRequest {
            caller,
            command,
            req,
            session_autonomy,
            context,
        } = *r;
        let config = read(&self.config);
        let approvals = self.standing_approvals(&caller.runtime);
        // Session grants apply only inside their phone session while it is active and the
        // caller's own.
        let in_session = (with_session || approvals.iter().any(|a| a.session.is_some()))
            .then(|| self.own_session(caller, req.phone_session_id.as_deref()))
            .flatten()
            .map(|s| s.phone_session_id)
            // A goal's background step: its grants are scoped to the goal (`grants.rs`).
            .or_else(|| grants::goal_context_scope(caller, context));
        // An elevation lifts only its runtime's own foreground calls: never a background run,
        // never `builtin` doing a creator's work (a job's, goal's or watcher's session).
        let elevation = crate::authority::elevation_applies(caller, req.session_scope(), context)
            .then(|| self.elevation_for(&caller.runtime))
            .flatten();
        let input = openphone_policy::PolicyInput {
            command,
            caller,
            request_autonomy: req.autonomy.as_deref(),
            session_autonomy,
            tool_policy: &config.tool_policy,
            platform_supported: self.platform_supports_on(command, req.device_id.as_deref()),
            context,
            standing_approvals: &approvals,
            phone_session_id: in_session.as_deref(),
            params: &req.params,
            now_ms: u64::try_from(self.now_ms()).unwrap_or(0),
            elevation: elevation.as_ref(),
        };
        f(&input)
    }

    /// Whether this daemon can run `command`: the device supports it, or (for a runtime-owned
    /// command such as `openphone.memory.save`) the core serves it itself.
    pub fn supports(&self, command: &Command) -> bool {
        self.platform_supports(command)
    }

    fn platform_supports(&self, command: &Command) -> bool {
        self.platform_supports_on(command, None)
    }

    /// The runtime's standing approvals active now (policy layer 7). Read from the store once
    /// per change of the approvals (`Store::approvals_generation`), not for every call.
    fn standing_approvals(&self, runtime: &str) -> Vec<StandingApproval> {
        let now = self.now_ms();
        let generation = self.store.approvals_generation();
        let cached = {
            let cache = crate::locks::lock(&self.approvals);
            (cache.generation == generation)
                .then(|| cache.by_runtime.get(runtime).cloned())
                .flatten()
        };
        let rows = match cached {
            Some(rows) => rows,
            None => {
                let rows = match self.store.list_approvals(Some(runtime)) {
                    Ok(rows) => Arc::new(rows),
                    Err(e) => {
                        tracing::error!(error = %e, "reading standing approvals");
                        return Vec::new();
                    }
                };
                let mut cache = crate::locks::lock(&self.approvals);
                if cache.generation != generation {
                    cache.by_runtime.clear();
                    cache.generation = generation;
                }
                cache
                    .by_runtime
                    .insert(runtime.to_owned(), Arc::clone(&rows));
                rows
            }
        };
        let withdrawn = crate::locks::lock(&self.withdrawn_grants);
        rows.iter()
            .filter(|r| r.is_active(now))
            .filter(|r| !withdrawn.contains(&r.approval_id))
            .filter_map(|row| {
                let tool = ToolSelector::parse(&row.tool).ok()?;
                let constraints = match &row.constraints {
                    Value::Object(map) => map.clone().into_iter().collect(),
                    _ => Default::default(),
                };
                Some(StandingApproval {
                    id: row.approval_id.to_string(),
                    runtime: row.runtime.clone(),
                    tool,
                    constraints,
                    expires_at_ms: row.expires_at_ms.and_then(|t| u64::try_from(t).ok()),
                    background: row.background,
                    enabled: row.enabled,
                    session: row.phone_session_id.clone(),
                })
            })
            .collect()
    }

    fn denial_details(
        &self,
        caller: &Caller,
        command: &Command,
        decision: &Decision,
        policy: &str,
    ) -> Map<String, Value> {
        DenialDetails {
            policy: policy.to_owned(),
            tool: command.name.clone(),
            runtime: caller.runtime.clone(),
            autonomy: decision.effective_autonomy.as_str().to_owned(),
            risk: command.risk.as_str().to_owned(),
            phone_platform: self.device.profile().platform.clone(),
        }
        .to_map()
    }

    /// Publishes `event` to `runtime` and to operators.
    fn publish(&self, event: &Event, runtime: &str) {
        let audience = Audience {
            runtime: Some(runtime.to_owned()),
            operators: true,
        };
        if let Err(e) = self.events.publish(event, audience) {
            tracing::error!(error = %e, "publishing an event");
        }
    }

    fn publish_result(&self, caller: &Caller, result: &ToolResult) {
        // Every call publishes its result; building the event is skipped when no one reads
        // tool results.
        if self.events.wants_tool_results() {
            let audience = Audience {
                runtime: Some(caller.runtime.clone()),
                operators: true,
            };
            // A result that is text only serialises as its object (`ToolResult`'s `Serialize`).
            if let Err(e) = self.events.publish_tool_result(result, audience) {
                tracing::error!(error = %e, "publishing an event");
            }
        }
    }
}

fn result_json(result: &ToolResult) -> Value {
    serde_json::to_value(result).unwrap_or(Value::Null)
}

fn parse_result(value: &Value) -> Option<ToolResult> {
    serde_json::from_value(value.clone()).ok()
}

/// The `needs_confirmation` answer pointing at `record`.
fn needs_confirmation(runtime: &str, request_id: &str, record: &ConfirmationRecord) -> ToolResult {
    ToolResult::needs_confirmation(
        runtime,
        request_id,
        "waiting for the user to approve this request on the phone",
        &PendingConfirmation {
            confirmation_id: record.confirmation_id.clone(),
            summary: record.summary.clone(),
            timeout_ms: Some(record.expires_at_ms - record.created_at_ms),
            expires_at_ms: Some(record.expires_at_ms),
        },
    )
}
