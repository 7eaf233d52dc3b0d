//! `goals.*` (operator only): goals as the user creates, steers and inspects them
//! (`goals.md` §10). Every change goes through the goal engine, which owns the transition
//! table; the driver then ticks the goal, publishes its `goal.*` events and delivers its
//! reports. Acts that change a goal are recorded in the audit log first, under the request id
//! `goal_<id>:op:<method>-<uuid>`, so the goal's audit slice (`openphone goals export`,
//! `openphone audit export --goal`) holds them.

use openphone_goals::artifacts::{plan_json, runs, status_md};
use openphone_goals::{
    ActionSpec, Goal, GoalSpec, GoalState, GoalsError, Owner, action_record, goal_record,
    report_info, transition_info,
};
use openphone_protocol::ErrorCode;
use openphone_protocol::endpoint::{
    EndpointErrorCode, ErrorObject, GoalActionParams, GoalExportFile, GoalIdParams, GoalResult,
    GoalSummary, GoalsAnswerParams, GoalsCreateParams, GoalsExplainParams, GoalsExplainResult,
    GoalsExportResult, GoalsGetResult, GoalsListParams, GoalsListResult, GoalsPlanParams,
    GoalsTickResult,
};
use openphone_store::{GoalReport, GoalTransition};
use serde_json::Value;

use crate::conn::{Conn, internal};
use crate::goals::GoalDriver;

/// Most goals `goals.list` returns.
const LIST_MAX: usize = 200;
/// What `goals.list` returns without a limit.
const LIST_DEFAULT: usize = 20;

fn driver(conn: &Conn) -> &GoalDriver {
    &conn.state.goals
}

fn invalid(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(
        EndpointErrorCode::Catalogue(ErrorCode::InvalidParams),
        message,
    )
}

/// A goal error on the endpoint, with its catalogue code.
fn error(e: GoalsError) -> ErrorObject {
    let code = match e.code() {
        "invalid_params" => ErrorCode::InvalidParams,
        "goal_not_found" => ErrorCode::GoalNotFound,
        "goal_action_not_found" => ErrorCode::GoalActionNotFound,
        "goal_state_conflict" => ErrorCode::GoalStateConflict,
        _ => return internal(e),
    };
    ErrorObject::new(EndpointErrorCode::Catalogue(code), e.to_string())
}

/// A failed read of the goal's stored transitions or reports (the store's own message).
fn unread(e: GoalsError) -> ErrorObject {
    match e {
        GoalsError::Store(e) => internal(e),
        other => internal(other),
    }
}

/// `goal_<id>` checked before anything is recorded about it.
fn existing(conn: &Conn, goal_id: &str) -> Result<Goal, ErrorObject> {
    driver(conn).engine().get(goal_id).map_err(error)
}

fn reports_of(conn: &Conn, goal_id: &str) -> Result<Vec<GoalReport>, ErrorObject> {
    driver(conn).engine().reports(goal_id).map_err(unread)
}

fn transitions_of(conn: &Conn, goal_id: &str) -> Result<Vec<GoalTransition>, ErrorObject> {
    driver(conn).engine().transitions(goal_id).map_err(unread)
}

/// Records the operator's act on `goal_id` before it takes effect.
fn audit(conn: &Conn, goal_id: &str, what: &str, args: &Value) -> Result<(), ErrorObject> {
    let request_id = format!("{goal_id}:op:{what}-{}", uuid::Uuid::new_v4());
    conn.state
        .audit_operator_action_as(&conn.session.caller, what, args, request_id)
        .map_err(|e| {
            ErrorObject::new(
                EndpointErrorCode::Catalogue(ErrorCode::AuditUnavailable),
                format!("the audit record could not be written, so nothing changed: {e}"),
            )
        })
}

/// One operator change of an existing goal: checked, audited first, applied by `apply` on the
/// engine, its events and reports published; the changed goal.
async fn change<F, Fut>(
    conn: &Conn,
    goal_id: &str,
    what: &str,
    args: &Value,
    apply: F,
) -> Result<Goal, ErrorObject>
where
    F: FnOnce(std::sync::Arc<openphone_goals::GoalEngine>) -> Fut,
    Fut: std::future::Future<Output = Result<Goal, GoalsError>>,
{
    existing(conn, goal_id)?;
    audit(conn, goal_id, what, args)?;
    let before = reports_of(conn, goal_id)?.len();
    let goal = apply(std::sync::Arc::clone(driver(conn).engine()))
        .await
        .map_err(error)?;
    driver(conn).changed(&goal, false, before).await;
    Ok(goal)
}

fn answer_with(goal: &Goal) -> GoalResult {
    GoalResult {
        goal: goal_record(goal),
    }
}

/// Ticks the goal after a change and answers with the document after the tick. A failed tick
/// is logged: the change itself is stored, and the driver looks again at its next wake.
async fn tick_after(conn: &Conn, goal: Goal) -> Result<GoalResult, ErrorObject> {
    let id = goal.id.clone();
    if let Err(e) = driver(conn).tick(&id).await {
        tracing::warn!(goal = %id, error = %e, "goals: the tick after a change failed");
    }
    let goal = driver(conn).engine().get(&id).unwrap_or(goal);
    Ok(GoalResult {
        goal: goal_record(&goal),
    })
}

/// `goals.list {state?, limit?}`.
pub(super) fn list(conn: &Conn, p: GoalsListParams) -> Result<GoalsListResult, ErrorObject> {
    let states = match p.state.as_deref().map(str::trim) {
        None | Some("") => Vec::new(),
        Some(raw) => vec![GoalState::parse(raw).ok_or_else(|| {
            invalid(format!(
                "state: {raw:?} is not a goal state (draft, active, blocked, paused, done, \
                 failed, aborted)"
            ))
        })?],
    };
    let limit = p.limit.unwrap_or(LIST_DEFAULT);
    if limit == 0 {
        return Err(invalid("limit: must be at least 1"));
    }
    let goals = driver(conn)
        .engine()
        .list_with_hosts(&states, Some(limit.min(LIST_MAX)))
        .map_err(error)?;
    let goals: Vec<GoalSummary> = goals
        .into_iter()
        .map(|(g, host)| GoalSummary {
            goal_id: g.id.clone(),
            objective: g.objective.clone(),
            state: g.state.as_str().to_owned(),
            deadline_at: g.deadline_at,
            done: g
                .actions
                .iter()
                .filter(|a| a.state == openphone_goals::ActionState::Done)
                .count(),
            total: g.actions.len(),
            blockers: g.blockers.len(),
            updated_at: g.updated_at,
            // The phone is given with the host only: a lone daemon's list is as it was.
            device_id: host.as_ref().and(g.device_id.clone()),
            host,
        })
        .collect();
    Ok(GoalsListResult {
        count: goals.len(),
        goals,
    })
}

/// `goals.get {goal_id}`: the document, its transitions and its reports.
pub(super) fn get(conn: &Conn, p: GoalIdParams) -> Result<GoalsGetResult, ErrorObject> {
    let goal = existing(conn, &p.goal_id)?;
    let transitions = transitions_of(conn, &goal.id)?
        .iter()
        .map(transition_info)
        .collect();
    let reports = reports_of(conn, &goal.id)?
        .iter()
        .map(report_info)
        .collect();
    Ok(GoalsGetResult {
        goal: goal_record(&goal),
        transitions,
        reports,
    })
}

/// `goals.create {goal}`: audited first, created, then ticked at once.
pub(super) async fn create(conn: &Conn, p: GoalsCreateParams) -> Result<GoalResult, ErrorObject> {
    if !p.goal.is_object() {
        return Err(invalid("goal: must be a JSON object (a goal spec)"));
    }
    let spec: GoalSpec = serde_json::from_value(p.goal.clone())
        .map_err(|e| invalid(format!("goal: not a goal spec: {e}")))?;
    // A phone that is not configured is refused with the ids before anything is made.
    if let Some(device) = spec.device_id.as_deref() {
        conn.state
            .bridge
            .devices()
            .resolve(Some(device))
            .map_err(|e| invalid(e.to_string()))?;
    }
    let engine = driver(conn).engine();
    let id = openphone_goals::ids::goal_id(engine.now());
    audit(conn, &id, "goals.create", &p.goal)?;
    let owner = Owner {
        surface: "endpoint".to_owned(),
        phone_session: None,
        runtime: Some(conn.session.caller.runtime.clone()),
    };
    let goal = engine.create_with_id(&spec, owner, &id).map_err(error)?;
    driver(conn).changed(&goal, true, 0).await;
    tick_after(conn, goal).await
}

/// `goals.plan {goal_id, plan}`: a plan, or a re-plan of what has not started.
pub(super) async fn plan(conn: &Conn, p: GoalsPlanParams) -> Result<GoalResult, ErrorObject> {
    let plan: Vec<ActionSpec> = p
        .plan
        .iter()
        .enumerate()
        .map(|(i, a)| {
            serde_json::from_value(a.clone())
                .map_err(|e| invalid(format!("plan[{i}]: not an action: {e}")))
        })
        .collect::<Result<_, _>>()?;
    let args = Value::Array(p.plan.clone());
    let (p, plan) = (&p, &plan);
    let goal = change(conn, &p.goal_id, "goals.plan", &args, |engine| async move {
        engine.submit_plan(&p.goal_id, plan).await
    })
    .await?;
    tick_after(conn, goal).await
}

/// `goals.tick {goal_id}`: one tick now.
pub(super) async fn tick(conn: &Conn, p: GoalIdParams) -> Result<GoalsTickResult, ErrorObject> {
    existing(conn, &p.goal_id)?;
    let outcome = driver(conn).tick(&p.goal_id).await.map_err(error)?;
    let goal = existing(conn, &p.goal_id)?;
    Ok(GoalsTickResult {
        goal: goal_record(&goal),
        transitions: outcome.transitions.len(),
        reports: outcome.reports.len(),
        next_wake_at: outcome.next_wake,
    })
}

/// `goals.answer {goal_id, action_id, text}`.
pub(super) async fn answer(conn: &Conn, p: GoalsAnswerParams) -> Result<GoalResult, ErrorObject> {
    let args = serde_json::json!({"action_id": p.action_id, "text_chars": p.text.chars().count()});
    let p = &p;
    let goal = change(
        conn,
        &p.goal_id,
        "goals.answer",
        &args,
        |engine| async move { engine.answer(&p.goal_id, &p.action_id, &p.text).await },
    )
    .await?;
    tick_after(conn, goal).await
}

/// `goals.retry {goal_id, action_id?}`.
pub(super) async fn retry(conn: &Conn, p: GoalActionParams) -> Result<GoalResult, ErrorObject> {
    let args = serde_json::to_value(&p).map_err(internal)?;
    let p = &p;
    let goal = change(
        conn,
        &p.goal_id,
        "goals.retry",
        &args,
        |engine| async move { engine.retry(&p.goal_id, p.action_id.as_deref()).await },
    )
    .await?;
    tick_after(conn, goal).await
}

/// `goals.pause {goal_id}`.
pub(super) async fn pause(conn: &Conn, p: GoalIdParams) -> Result<GoalResult, ErrorObject> {
    let args = serde_json::to_value(&p).map_err(internal)?;
    let p = &p;
    let goal = change(
        conn,
        &p.goal_id,
        "goals.pause",
        &args,
        |engine| async move { engine.pause(&p.goal_id).await },
    )
    .await?;
    Ok(answer_with(&goal))
}

/// `goals.resume {goal_id}`: resumed, then ticked.
pub(super) async fn resume(conn: &Conn, p: GoalIdParams) -> Result<GoalResult, ErrorObject> {
    let args = serde_json::to_value(&p).map_err(internal)?;
    let p = &p;
    let goal = change(
        conn,
        &p.goal_id,
        "goals.resume",
        &args,
        |engine| async move { engine.resume(&p.goal_id).await },
    )
    .await?;
    tick_after(conn, goal).await
}

/// `goals.abort {goal_id, action_id?}`: the goal, or one action (its confirmation withdrawn).
pub(super) async fn abort(conn: &Conn, p: GoalActionParams) -> Result<GoalResult, ErrorObject> {
    let args = serde_json::to_value(&p).map_err(internal)?;
    let p = &p;
    let goal = change(
        conn,
        &p.goal_id,
        "goals.abort",
        &args,
        |engine| async move { engine.abort(&p.goal_id, p.action_id.as_deref()).await },
    )
    .await?;
    if p.action_id.is_some() {
        // An alternative of the aborted action may start now.
        return tick_after(conn, goal).await;
    }
    Ok(answer_with(&goal))
}

/// `goals.explain {goal_id, action_id}`.
pub(super) fn explain(
    conn: &Conn,
    p: GoalsExplainParams,
) -> Result<GoalsExplainResult, ErrorObject> {
    let goal = existing(conn, &p.goal_id)?;
    let transitions = transitions_of(conn, &goal.id)?;
    let lines = openphone_goals::explain::explain(&goal, &p.action_id, &transitions)
        .ok_or_else(|| error(GoalsError::NoAction(p.action_id.clone())))?;
    let action = goal
        .action(&p.action_id)
        .map(action_record)
        .unwrap_or_default();
    Ok(GoalsExplainResult {
        goal_id: goal.id.clone(),
        action_id: p.action_id.clone(),
        lines,
        action,
        transitions: transitions
            .iter()
            .filter(|t| t.transition.action_id == p.action_id)
            .map(transition_info)
            .collect(),
    })
}

/// `goals.export {goal_id}`: the artifacts rebuilt from the store now.
pub(super) fn export(conn: &Conn, p: GoalIdParams) -> Result<GoalsExportResult, ErrorObject> {
    let goal = existing(conn, &p.goal_id)?;
    let transitions = transitions_of(conn, &goal.id)?;
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let mut files = vec![GoalExportFile {
        path: "plan.json".to_owned(),
        content: pretty(&plan_json(&goal)),
    }];
    for (name, run) in runs(&goal) {
        files.push(GoalExportFile {
            path: format!("runs/{name}"),
            content: pretty(&run),
        });
    }
    files.push(GoalExportFile {
        path: "status.md".to_owned(),
        content: status_md(&goal, driver(conn).engine().now()),
    });
    files.push(GoalExportFile {
        path: "transitions.json".to_owned(),
        content: pretty(&serde_json::to_value(&transitions).map_err(internal)?),
    });
    let reports = reports_of(conn, &goal.id)?
        .iter()
        .map(report_info)
        .collect();
    Ok(GoalsExportResult {
        goal: goal_record(&goal),
        files,
        reports,
    })
}
