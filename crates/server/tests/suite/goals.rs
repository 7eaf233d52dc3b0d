//! Issue 18: the goal engine's backends in the real daemon — an `agent_turn` action worked by
//! the built-in loop against a fake OpenAI-compatible provider on loopback (its tool call
//! through the bridge), a `job` action creating a real agent job in the store (and running until
//! that job's run finishes), and without a
//! `[builtin]` table an `agent_turn` BLOCKED naming what is missing.

use openphone_fake_model::{FakeModel, Script};
use openphone_goals::{ActionState, EvidenceKind, GoalSpec, Owner};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{config, start};

fn owner() -> Owner {
    Owner {
        surface: "test".to_owned(),
        phone_session: None,
        runtime: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_turn_runs_on_the_builtin_model_and_a_job_action_creates_a_real_job() {
    let fake = FakeModel::start().await;
    fake.push(Script::tool_call(
        "calendar_search",
        json!({"query": "Dentist", "reason": "find the appointment"}),
    ));
    fake.push(Script::text("The dentist is on Thursday."));
    let d = start(config(&format!(
        "[builtin]\nbase_url = \"{}\"\nmodel = \"fake-model\"\nrequest_timeout_secs = 10\n",
        fake.url()
    )))
    .await;
    let engine = d.daemon.goal_engine();
    let run_at = engine.now() + 3_600_000;
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "find the dentist and remind me",
        "plan": [
            {"id": "ask", "title": "Find the dentist", "kind": "agent_turn",
             "prompt": "When is my dentist appointment?"},
            {"id": "later", "title": "Remind me", "kind": "job",
             "prompt": "Remind me of the dentist", "run_at": run_at, "depends_on": ["ask"]}
        ]
    }))
    .unwrap();
    let goal = engine.create(&spec, owner()).unwrap();
    engine.tick(&goal.id).await.unwrap();
    let goal = engine.get(&goal.id).unwrap();

    let ask = goal.action("ask").unwrap();
    assert_eq!(ask.state, ActionState::Done, "{ask:?}");
    let said = goal
        .evidence
        .iter()
        .find(|e| e.action_id.as_deref() == Some("ask") && e.kind == EvidenceKind::Message)
        .unwrap();
    assert!(said.reference.contains("Thursday"), "{said:?}");
    assert!(
        said.reference.starts_with(&format!("goal:{}:ask", goal.id)),
        "the isolated session: {said:?}"
    );
    // The model's tool call went through the bridge: its answer carried the phone's calendar.
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let second = requests[1].to_string();
    assert!(second.contains("Dentist"), "{second}");

    // The job is scheduled an hour from now: the step runs until the job's run finishes
    // (issue 32 item 4; `goal_triggers.rs` follows a job to its end).
    let later = goal.action("later").unwrap();
    assert_eq!(later.state, ActionState::Running, "{later:?}");
    assert_eq!(goal.state, openphone_goals::GoalState::Active);
    let job_ref = goal
        .evidence
        .iter()
        .find(|e| e.action_id.as_deref() == Some("later"))
        .unwrap();
    let job_id: i64 = job_ref
        .reference
        .strip_prefix("job ")
        .unwrap()
        .parse()
        .unwrap();
    let job = d.daemon.jobs().get(job_id).unwrap().job;
    assert_eq!(job.title, "Remind me");
    assert_eq!(job.prompt, "Remind me of the dentist");
    assert_eq!(job.next_run_at, run_at);
    d.daemon.shutdown().await;
    fake.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_builtin_an_agent_turn_is_blocked_naming_what_is_missing() {
    let d = start(config("")).await;
    let engine = d.daemon.goal_engine();
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "ask the model",
        "plan": [{"id": "ask", "title": "Ask", "kind": "agent_turn", "prompt": "Hello?"}]
    }))
    .unwrap();
    let goal = engine.create(&spec, owner()).unwrap();
    engine.tick(&goal.id).await.unwrap();
    let goal = engine.get(&goal.id).unwrap();
    let ask = goal.action("ask").unwrap();
    assert_eq!(ask.state, ActionState::Blocked, "{ask:?}");
    let blocker = goal
        .blockers
        .iter()
        .find(|b| b.action_id.as_deref() == Some("ask"))
        .unwrap();
    assert!(blocker.reason.contains("[builtin]"), "{blocker:?}");
    assert!(!blocker.how_to_resolve.is_empty());
    d.daemon.shutdown().await;
}
