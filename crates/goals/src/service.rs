//! The goal commands for runtimes and MCP (`goals.md` §10), a runtime-owned service of the
//! tool bridge: `openphone.goals.create` (`goal_create`), `.list` (`goal_list`), `.get`
//! (`goal_get`), `.plan` (`goal_plan`) and `.stop` (`goal_stop`) — project additions to the
//! manifest, with the capability and risk of the job commands.
//!
//! The bridge has validated the params against the manifest and decided the policy (creating,
//! planning and stopping change state: confirmed like any such command) before
//! [`GoalTools::execute`] runs. Ownership is this module's: a runtime that creates a goal is
//! its `owner`, and its `planner` unless it says `manual`; only the planner may submit plans,
//! only the owner may read, list or stop it (the operator may do everything). Anything else is
//! `forbidden`, naming who may. After create, plan and stop the `wake` callback (the daemon's
//! goal driver) is told the goal id so its tick runs now.

// The runtime-goal check must examine every action kind and criterion: a new one must be
// named here, not pass unexamined.
#![warn(clippy::wildcard_enum_match_arm)]

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use openphone_core::services::{RuntimeService, ServiceCall};
use openphone_device::DeviceError;
use openphone_policy::Role;
use openphone_protocol::ErrorCode;
use openphone_store::StoreError;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::engine::{GoalEngine, goal_json};
use crate::error::GoalsError;
use crate::model::{ActionState, Criterion, Goal, GoalState, Owner};
use crate::spec::{ActionSpec, GoalSpec};

/// `openphone.goals.create`.
pub const CREATE: &str = "openphone.goals.create";
/// `openphone.goals.list`.
pub const LIST: &str = "openphone.goals.list";
/// `openphone.goals.get`.
pub const GET: &str = "openphone.goals.get";
/// `openphone.goals.plan`.
pub const PLAN: &str = "openphone.goals.plan";
/// `openphone.goals.stop`.
pub const STOP: &str = "openphone.goals.stop";

/// Goals a list answers with unless `limit` says otherwise, and at most.
const LIST_DEFAULT: usize = 20;
const LIST_MAX: usize = 50;

/// What `create` takes besides `reason` (the fields of [`GoalSpec`]).
const CREATE_FIELDS: &[&str] = &[
    "objective",
    "success_criteria",
    "deadline_at",
    "risk_level",
    "autonomy",
    "planner",
    "delivery",
    "max_parallel",
    "retry_budget",
    "checkpoints",
    "plan",
    "device_id",
];

/// Told a goal id after a change, so the goal's tick runs now.
pub type Wake = Arc<dyn Fn(&str) + Send + Sync>;

/// The goal commands over one [`GoalEngine`]. The engine is held weakly (it holds the bridge
/// this service is installed on); once it is gone the commands answer `framework_unavailable`.
#[derive(Clone)]
pub struct GoalTools {
    engine: Weak<GoalEngine>,
    wake: Wake,
}

impl std::fmt::Debug for GoalTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoalTools")
            .field("engine", &(self.engine.strong_count() > 0))
            .finish_non_exhaustive()
    }
}

impl GoalTools {
    /// The commands over `engine`; `wake` is called with a goal id after each change.
    pub fn new(engine: &Arc<GoalEngine>, wake: Wake) -> GoalTools {
        GoalTools {
            engine: Arc::downgrade(engine),
            wake,
        }
    }

    fn engine(&self) -> Result<Arc<GoalEngine>, DeviceError> {
        self.engine
            .upgrade()
            .ok_or_else(|| DeviceError::DeviceOffline {
                reason: "the goal engine has stopped (the daemon is shutting down)".to_owned(),
            })
    }
}

/// Who is asking, as far as goal ownership goes.
struct Who<'a> {
    runtime: &'a str,
    operator: bool,
}

impl Who<'_> {
    fn from<'a>(call: &ServiceCall<'a>) -> Who<'a> {
        Who {
            runtime: call.caller.runtime.as_str(),
            operator: call.caller.role == Role::Operator,
        }
    }

    fn owns(&self, goal: &Goal) -> bool {
        self.operator || goal.owner.runtime.as_deref() == Some(self.runtime)
    }

    /// Owner or planner: who may read it.
    fn sees(&self, goal: &Goal) -> bool {
        self.owns(goal) || goal.planner == self.runtime
    }
}

/// A runtime's goal may not do what the runtime itself may not. The goal's steps run as the
/// goal layer (runtime `builtin`), so for a runtime caller every command the goal would run —
/// each `tool` action, each `expect` read, each `tool_predicate` criterion — is decided by the
/// bridge's own policy for that runtime (its grants and whether it is enabled, its tool policy,
/// its transport): a denial by any of those layers is `forbidden`, naming the step, the command
/// and the layer. Steps that hand work to the built-in runtime's own judgement (`agent_turn`,
/// `job`, a `runtime_judge` criterion) would use the built-in runtime's tools and grants, so a
/// runtime's goal may not have them. The operator is not limited.
fn within_grants(
    engine: &GoalEngine,
    call: &ServiceCall<'_>,
    plan: &[ActionSpec],
    criteria: &[Criterion],
) -> Result<(), DeviceError> {
    let caller = call.caller;
    if caller.role == Role::Operator {
        return Ok(());
    }
    let refuse = |what: String, why: String| -> DeviceError {
        forbidden(format!(
            "{what}: {why}; a goal may only do what runtime `{}` may",
            caller.runtime
        ))
    };
    let mut commands: Vec<(String, &str, &Map<String, Value>)> = Vec::new();
    let no_params = Map::new();
    for action in plan {
        let what = format!("action {:?}", action.id);
        match &action.kind {
            // Waiting on a phone event reads it (its payload can be matched and is evidence):
            // the runtime needs the read grant of the command that reads such events.
            crate::model::ActionKind::Wait { on: Some(on), .. } => {
                if let Some(command) = wait_read_command(&on.event) {
                    commands.push((
                        format!("{what} (waits on {})", on.event),
                        command,
                        &no_params,
                    ));
                }
            }
            crate::model::ActionKind::Tool { command, params } => {
                commands.push((what.clone(), command, params));
            }
            crate::model::ActionKind::AgentTurn { .. } | crate::model::ActionKind::Job { .. } => {
                return Err(refuse(
                    what,
                    "agent_turn and job steps run on the built-in runtime with its own tools, \
                     so only the operator's goals may have them"
                        .to_owned(),
                ));
            }
            // No command of their own: nothing to decide for the runtime.
            crate::model::ActionKind::Wait { on: None, .. }
            | crate::model::ActionKind::AskUser { .. }
            | crate::model::ActionKind::Verify => {}
        }
        if let Some(expect) = &action.expect {
            commands.push((format!("{what} (expect)"), &expect.command, &expect.params));
        }
    }
    for criterion in criteria {
        let what = format!("success_criteria {:?}", criterion.id);
        match &criterion.check {
            crate::model::CriterionCheck::ToolPredicate {
                command, params, ..
            } => commands.push((what, command, params)),
            crate::model::CriterionCheck::RuntimeJudge { .. } => {
                return Err(refuse(
                    what,
                    "a runtime_judge criterion asks the built-in runtime, so only the \
                     operator's goals may have one"
                        .to_owned(),
                ));
            }
            // Read from the goal's own record: nothing the runtime runs.
            crate::model::CriterionCheck::AllActionsDone
            | crate::model::CriterionCheck::UserConfirms => {}
        }
    }
    let bridge = engine.bridge();
    for (what, command, params) in commands {
        let mut params = params.clone();
        params
            .entry("reason")
            .or_insert_with(|| Value::String("goal step".to_owned()));
        let request = openphone_protocol::ToolRequest {
            request_id: format!("goal-grant-check-{}", call.now_ms),
            runtime: Some(caller.runtime.clone()),
            runtime_session_id: call.runtime_session_id.to_owned(),
            phone_session_id: None,
            tool: command.to_owned(),
            params: Value::Object(params),
            reason: None,
            autonomy: None,
            idempotency_key: None,
            timeout_ms: None,
        };
        let explained =
            match bridge.explain(caller, request, openphone_policy::Context::Interactive) {
                Ok(explained) => explained,
                // An unknown command or bad params are the engine's to refuse, naming the field.
                Err((
                    ErrorCode::InvalidParams | ErrorCode::UnknownTool | ErrorCode::UnknownCommand,
                    _,
                )) => continue,
                Err((code, message)) => {
                    return Err(refuse(
                        format!("{what} uses {command}"),
                        format!("{code}: {message}"),
                    ));
                }
            };
        let denied = explained.layers.iter().find(|l| {
            l.verdict == openphone_protocol::endpoint::PolicyOutcome::Deny
                && matches!(
                    l.layer,
                    openphone_protocol::endpoint::PolicyLayer::RuntimeAuthorisation
                        | openphone_protocol::endpoint::PolicyLayer::ToolPolicy
                )
        });
        if let Some(layer) = denied {
            return Err(refuse(
                format!("{what} uses {}", explained.tool),
                format!("{} (layer {})", layer.reason, layer.layer),
            ));
        }
    }
    Ok(())
}

/// The command whose grant a runtime needs to wait on phone event `event` (a wait reads the
/// event: its payload is matched and kept as evidence). `None`: an event that is not the
/// phone's (`runtime.message.final`, `watcher.fired`), which a runtime's goal only ever sees
/// for its own sessions and watchers (the engine's event intake decides).
fn wait_read_command(event: &str) -> Option<&'static str> {
    if event.starts_with("phone.message.") {
        Some("openphone.messages.search")
    } else if event.starts_with("phone.notification.") {
        Some("openphone.notifications.list")
    } else if event.starts_with("phone.call.") {
        Some("openphone.calls.search")
    } else if event.starts_with("phone.") {
        // A phone event no read command covers yet: refused by naming an unknown command
        // would be silent; the message read is the strictest phone read.
        Some("openphone.messages.search")
    } else {
        None
    }
}

fn forbidden(message: String) -> DeviceError {
    DeviceError::Refused {
        code: "forbidden",
        message,
    }
}

fn owner_name(goal: &Goal) -> String {
    goal.owner
        .runtime
        .clone()
        .unwrap_or_else(|| format!("the {}", goal.owner.surface))
}

/// A goal error as the bridge reports it: bad input is `invalid_params` naming the field; the
/// rest keep the goal layer's codes (`goal_not_found`, `goal_action_not_found`,
/// `goal_state_conflict`, `store_unavailable`).
fn device_error(error: GoalsError) -> DeviceError {
    match error {
        GoalsError::Invalid(invalid) => DeviceError::InvalidInput {
            field: invalid.field,
            message: invalid.message,
        },
        GoalsError::Internal(message) => DeviceError::Internal { message },
        GoalsError::Store(StoreError::Conflict { .. }) => DeviceError::Refused {
            code: "goal_state_conflict",
            message: "the goal changed meanwhile; read it again and retry".to_owned(),
        },
        other @ (GoalsError::NotFound(_)
        | GoalsError::NoAction(_)
        | GoalsError::Illegal(_)
        | GoalsError::Corrupt(..)
        | GoalsError::Store(_)) => DeviceError::Refused {
            code: other.code(),
            message: other.to_string(),
        },
    }
}

/// The tool's own arguments: without `reason` (the audit's).
fn tool_args(params: &Value) -> Map<String, Value> {
    params
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| k.as_str() != "reason")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn required_text(args: &Map<String, Value>, key: &str) -> Result<String, DeviceError> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| DeviceError::invalid(key, "must be a non-empty string"))
}

fn first_line(message: &str) -> String {
    // serde's messages end with " at line 1 column N" for values read from text; not here.
    message.lines().next().unwrap_or(message).to_owned()
}

/// Items of an array param, each read as `T`; errors name `field[i]`.
fn items<T: DeserializeOwned>(field: &str, value: &Value) -> Result<Vec<T>, DeviceError> {
    let list = value
        .as_array()
        .ok_or_else(|| DeviceError::invalid(field, "must be an array"))?;
    list.iter()
        .enumerate()
        .map(|(i, item)| {
            serde_json::from_value(item.clone()).map_err(|e| {
                DeviceError::invalid(format!("{field}[{i}]"), first_line(&e.to_string()))
            })
        })
        .collect()
}

/// The plan param: at least one action.
fn plan_of(args: &Map<String, Value>) -> Result<Vec<ActionSpec>, DeviceError> {
    let value = args
        .get("plan")
        .ok_or_else(|| DeviceError::invalid("plan", "is required"))?;
    let plan: Vec<ActionSpec> = items("plan", value)?;
    if plan.is_empty() {
        return Err(DeviceError::invalid(
            "plan",
            "must name at least one action",
        ));
    }
    Ok(plan)
}

/// A [`GoalSpec`] from `create`'s arguments, every error naming its field.
fn spec_of(args: &Map<String, Value>) -> Result<GoalSpec, DeviceError> {
    if let Some(unknown) = args.keys().find(|k| !CREATE_FIELDS.contains(&k.as_str())) {
        return Err(DeviceError::invalid(
            unknown.as_str(),
            format!("unknown field; known: {}", CREATE_FIELDS.join(", ")),
        ));
    }
    required_text(args, "objective")?;
    if let Some(plan) = args.get("plan") {
        items::<ActionSpec>("plan", plan)?;
    }
    if let Some(criteria) = args.get("success_criteria") {
        items::<Criterion>("success_criteria", criteria)?;
    }
    serde_json::from_value(Value::Object(args.clone())).map_err(|whole| {
        // Name the field: read each one alone beside a valid objective.
        let field = args
            .iter()
            .find(|(key, value)| {
                let mut one = Map::new();
                one.insert("objective".to_owned(), json!("x"));
                one.insert((*key).clone(), (*value).clone());
                serde_json::from_value::<GoalSpec>(Value::Object(one)).is_err()
            })
            .map_or("params", |(key, _)| key.as_str());
        DeviceError::invalid(field, first_line(&whole.to_string()))
    })
}

/// The planner a runtime may name: itself (the default) or `manual`. The operator may name
/// anyone.
fn planner_of(args: &Map<String, Value>, who: &Who<'_>) -> Result<String, DeviceError> {
    let Some(value) = args.get("planner") else {
        return Ok(if who.operator {
            "manual".to_owned()
        } else {
            who.runtime.to_owned()
        });
    };
    let planner = value
        .as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| DeviceError::invalid("planner", "must be a non-empty string"))?;
    if who.operator || planner == "manual" || planner == who.runtime {
        Ok(planner.to_owned())
    } else {
        Err(DeviceError::invalid(
            "planner",
            format!(
                "a runtime may name only itself ({:?}) or \"manual\" as the planner, not {planner:?}",
                who.runtime
            ),
        ))
    }
}

/// The short view `list` answers with.
pub fn summary(goal: &Goal) -> Value {
    let done = goal
        .actions
        .iter()
        .filter(|a| a.state == ActionState::Done)
        .count();
    let blockers: Vec<Value> = goal
        .blockers
        .iter()
        .map(|b| {
            json!({
                "action_id": b.action_id,
                "kind": b.kind,
                "reason": b.reason,
                "how_to_resolve": b.how_to_resolve,
            })
        })
        .collect();
    json!({
        "goal_id": goal.id,
        "objective": goal.objective,
        "state": goal.state,
        "deadline_at": goal.deadline_at,
        "risk_level": goal.risk_level,
        "planner": goal.planner,
        "plan_version": goal.plan_version,
        "progress": {"done": done, "total": goal.actions.len()},
        "blockers": blockers,
        "updated_at": goal.updated_at,
    })
}

/// The full view `get` and `plan` answer with: the goal and its permission envelope with the
/// approval packages (`approval.rs`).
fn full(engine: &GoalEngine, goal: &Goal) -> Value {
    json!({
        "goal": goal_json(goal),
        "envelope": crate::approval::envelope(engine, goal),
    })
}

impl GoalTools {
    fn create(&self, engine: &GoalEngine, call: &ServiceCall<'_>) -> Result<Value, DeviceError> {
        let who = Who::from(call);
        let mut args = tool_args(call.params);
        let planner = planner_of(&args, &who)?;
        args.remove("planner");
        let mut spec = spec_of(&args)?;
        spec.planner = Some(planner);
        if call.caller.role != Role::Operator {
            // No escalation: a runtime's goal runs at most at the runtime's own ceiling.
            spec.autonomy = Some(
                openphone_policy::effective_autonomy(
                    spec.autonomy.as_deref(),
                    None,
                    call.caller.max_autonomy,
                    false,
                )
                .as_str()
                .to_owned(),
            );
        }
        within_grants(
            engine,
            call,
            spec.plan.as_deref().unwrap_or_default(),
            &spec.success_criteria,
        )?;
        let owner = Owner {
            surface: if who.operator { "operator" } else { "runtime" }.to_owned(),
            phone_session: call.phone_session_id.map(str::to_owned),
            runtime: Some(who.runtime.to_owned()),
        };
        let goal = engine.create(&spec, owner).map_err(device_error)?;
        (self.wake)(&goal.id);
        Ok(full(engine, &goal))
    }

    fn list(&self, engine: &GoalEngine, call: &ServiceCall<'_>) -> Result<Value, DeviceError> {
        let who = Who::from(call);
        let args = tool_args(call.params);
        let states = match args.get("state") {
            None => Vec::new(),
            Some(v) => {
                let text = v.as_str().map(str::trim).unwrap_or_default();
                let state = GoalState::parse(text).ok_or_else(|| {
                    DeviceError::invalid(
                        "state",
                        "must be draft, active, blocked, paused, done, failed or aborted",
                    )
                })?;
                vec![state]
            }
        };
        let limit = openphone_core::services::limit(call.params, LIST_DEFAULT, LIST_MAX)?;
        let goals: Vec<Value> = engine
            .list(&states, None)
            .map_err(device_error)?
            .iter()
            .filter(|g| who.sees(g))
            .take(limit)
            .map(summary)
            .collect();
        Ok(json!({ "count": goals.len(), "goals": goals }))
    }

    fn readable(
        &self,
        engine: &GoalEngine,
        call: &ServiceCall<'_>,
    ) -> Result<(Goal, Map<String, Value>), DeviceError> {
        let args = tool_args(call.params);
        let id = required_text(&args, "goal_id")?;
        let goal = engine.get(&id).map_err(device_error)?;
        if !Who::from(call).sees(&goal) {
            return Err(forbidden(format!(
                "goal {id} belongs to {}; only its owner or planner may use it",
                owner_name(&goal)
            )));
        }
        Ok((goal, args))
    }

    fn get(&self, engine: &GoalEngine, call: &ServiceCall<'_>) -> Result<Value, DeviceError> {
        let (goal, _) = self.readable(engine, call)?;
        Ok(full(engine, &goal))
    }

    async fn plan(
        &self,
        engine: &GoalEngine,
        call: &ServiceCall<'_>,
    ) -> Result<Value, DeviceError> {
        let (goal, args) = self.readable(engine, call)?;
        let who = Who::from(call);
        if !who.operator && goal.planner != who.runtime {
            return Err(forbidden(format!(
                "goal {} is planned by {:?}; only its planner may submit plans",
                goal.id, goal.planner
            )));
        }
        let plan = plan_of(&args)?;
        within_grants(engine, call, &plan, &[])?;
        let goal = engine
            .submit_plan(&goal.id, &plan)
            .await
            .map_err(device_error)?;
        (self.wake)(&goal.id);
        Ok(full(engine, &goal))
    }

    async fn stop(
        &self,
        engine: &GoalEngine,
        call: &ServiceCall<'_>,
    ) -> Result<Value, DeviceError> {
        let (goal, args) = self.readable(engine, call)?;
        if !Who::from(call).owns(&goal) {
            return Err(forbidden(format!(
                "goal {} belongs to {}; only its owner may stop it",
                goal.id,
                owner_name(&goal)
            )));
        }
        let action = match args.get("action_id") {
            None => None,
            Some(_) => Some(required_text(&args, "action_id")?),
        };
        if let Some(a) = &action
            && goal.action(a).is_none()
        {
            return Err(device_error(GoalsError::NoAction(a.clone())));
        }
        let goal = engine
            .abort(&goal.id, action.as_deref())
            .await
            .map_err(device_error)?;
        (self.wake)(&goal.id);
        Ok(
            json!({ "goal": summary(&goal), "stopped": action.unwrap_or_else(|| "goal".to_owned()) }),
        )
    }
}

#[async_trait]
impl RuntimeService for GoalTools {
    fn serves(&self, name: &str) -> bool {
        matches!(name, CREATE | LIST | GET | PLAN | STOP)
    }

    async fn execute(&self, call: ServiceCall<'_>) -> Result<Value, DeviceError> {
        let engine = self.engine()?;
        match call.name {
            CREATE => self.create(&engine, &call),
            LIST => self.list(&engine, &call),
            GET => self.get(&engine, &call),
            PLAN => self.plan(&engine, &call).await,
            STOP => self.stop(&engine, &call).await,
            other => Err(DeviceError::UnsupportedTool {
                tool: other.to_owned(),
            }),
        }
    }
}
