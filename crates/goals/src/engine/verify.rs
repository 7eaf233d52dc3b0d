//! Checks: an action's `expect` and the goal's success criteria, by read commands through
//! the bridge in the goal's background context (or the attached runtime as a judge).

use openphone_core::Invocation;
use openphone_protocol::{ToolRequest, ToolStatus};
use serde_json::{Map, Value};

use super::schedule::replaced_by_done_alternative;
use super::{GoalEngine, clip, failure_text};
use crate::model::{ActionKind, ActionState, CriterionCheck, EvidenceKind, Goal};

impl GoalEngine {
    /// Runs a read command through the bridge (background context) and tests its result.
    pub(super) async fn read_check(
        &self,
        goal: &Goal,
        session: &str,
        command: &str,
        params: &Map<String, Value>,
        predicate: &crate::predicate::Predicate,
    ) -> (bool, String) {
        let mut params = params.clone();
        params
            .entry("reason")
            .or_insert_with(|| Value::String(format!("check progress of goal {}", goal.id)));
        let request = ToolRequest {
            request_id: format!("{}:check:{}", goal.id, uuid::Uuid::new_v4().simple()),
            runtime: Some(openphone_protocol::BUILTIN_RUNTIME_ID.to_owned()),
            runtime_session_id: session.to_owned(),
            tool: command.to_owned(),
            params: Value::Object(params),
            autonomy: Some(goal.autonomy.clone()),
            ..ToolRequest::default()
        };
        let result = self
            .bridge
            .call(
                Invocation::goal(&self.caller_for(goal), &goal.id, request)
                    .on_device(goal.device_id.clone()),
            )
            .await;
        if result.status != ToolStatus::Ok {
            return (
                false,
                format!("the check could not run: {}", failure_text(&result)),
            );
        }
        predicate.check(&Value::Object(result.result))
    }

    pub(super) async fn expect_holds(&self, goal: &Goal, id: &str) -> (bool, String) {
        let Some(action) = goal.action(id) else {
            return (false, "no such action".to_owned());
        };
        let Some(expect) = &action.expect else {
            return (true, "nothing expected".to_owned());
        };
        self.read_check(
            goal,
            &action.session(&goal.id),
            &expect.command,
            &expect.params,
            &expect.predicate,
        )
        .await
    }

    /// Whether every success criterion holds, and what was found.
    pub async fn criteria_hold(&self, goal: &Goal) -> (bool, String) {
        let mut notes = Vec::new();
        let mut all = true;
        for c in &goal.success_criteria {
            let (ok, note) = match &c.check {
                CriterionCheck::AllActionsDone => {
                    let open: Vec<&str> = goal
                        .actions
                        .iter()
                        .filter(|a| {
                            !a.optional
                                && a.state != ActionState::Done
                                && !matches!(a.kind, ActionKind::Verify)
                        })
                        .filter(|a| !replaced_by_done_alternative(goal, a))
                        .map(|a| a.id.as_str())
                        .collect();
                    (
                        open.is_empty(),
                        if open.is_empty() {
                            "all done".to_owned()
                        } else {
                            format!("open: {}", open.join(", "))
                        },
                    )
                }
                CriterionCheck::ToolPredicate {
                    command,
                    params,
                    predicate,
                } => {
                    self.read_check(
                        goal,
                        &openphone_protocol::goal_session(&goal.id),
                        command,
                        params,
                        predicate,
                    )
                    .await
                }
                CriterionCheck::UserConfirms => {
                    let wanted = format!("criterion:{}", c.id);
                    let ok = goal.evidence.iter().any(|e| {
                        e.kind == EvidenceKind::UserAnswer && e.reference.starts_with(&wanted)
                    });
                    (
                        ok,
                        if ok {
                            "confirmed by the user".to_owned()
                        } else {
                            "not confirmed by the user yet".to_owned()
                        },
                    )
                }
                CriterionCheck::RuntimeJudge { question } => match &self.backends.agent {
                    Some(agent) => match agent
                        .agent_turn_on_device(
                            &openphone_protocol::goal_judge_session(&goal.id),
                            question,
                            goal.device_id.as_deref(),
                        )
                        .await
                    {
                        Ok(answer) => (
                            answer.trim().to_lowercase().starts_with("yes"),
                            clip(&answer),
                        ),
                        Err(e) => (false, e),
                    },
                    None => (false, "no runtime is attached to judge".to_owned()),
                },
            };
            all &= ok;
            notes.push(format!("{}: {}", c.id, note));
        }
        (all, notes.join("; "))
    }
}
