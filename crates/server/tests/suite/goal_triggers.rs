//! Issue 32 items 4 and 5 on the real daemon: a goal's `job` step runs until its job's run
//! finishes (the goal reported `done` while the job was still queued), and a goal reacts to the
//! phone — a `wait` on an incoming message ends when `sim.inject` delivers it, without waiting
//! for its timer.

use std::time::Duration;

use openphone_fake_model::{FakeModel, Script};
use openphone_goals::{ActionState, EvidenceKind, Goal, GoalSpec, GoalState, Owner};
use openphone_jobs::JobStatus;
use serde_json::json;

use super::support::{config, connect, start};

fn owner() -> Owner {
    Owner {
        surface: "test".to_owned(),
        phone_session: None,
        runtime: None,
    }
}

fn builtin(fake: &FakeModel) -> String {
    format!(
        "[builtin]\nbase_url = \"{}\"\nmodel = \"fake-model\"\nrequest_timeout_secs = 10\n",
        fake.url()
    )
}

/// The goal once `done(goal)` holds, read every 100 ms for at most 60 s (the daemon's driver
/// ticks it; nothing here ticks it by hand).
async fn until(
    engine: &openphone_goals::GoalEngine,
    id: &str,
    done: impl Fn(&Goal) -> bool,
) -> Goal {
    for _ in 0..600 {
        let goal = engine.get(id).unwrap();
        if done(&goal) {
            return goal;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{id} never got there: {:#?}", engine.get(id).unwrap());
}

fn job_of(goal: &Goal, action: &str) -> i64 {
    goal.action(action)
        .unwrap()
        .last_attempt()
        .unwrap()
        .job_id
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_step_is_not_done_while_its_job_is_still_queued() {
    let fake = FakeModel::start().await;
    fake.push(Script::text("Reminder: the dentist is on Friday."));
    let d = start(config(&builtin(&fake))).await;
    let engine = d.daemon.goal_engine();
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "remind me of the dentist",
        "plan": [{"id": "remind", "title": "Remind me", "kind": "job",
                  "prompt": "Remind me of the dentist"}]
    }))
    .unwrap();
    let goal = engine.create(&spec, owner()).unwrap();
    engine.tick(&goal.id).await.unwrap();
    let goal = engine.get(&goal.id).unwrap();
    let remind = goal.action("remind").unwrap();
    // Before the fix: DONE ("job 1 scheduled") and the goal `done`, the job still queued.
    assert_eq!(remind.state, ActionState::Running, "{remind:?}");
    assert_eq!(goal.state, GoalState::Active);
    let job = job_of(&goal, "remind");
    assert_eq!(
        remind.resume_token.as_deref(),
        Some(format!("job:{job}").as_str())
    );
    assert_eq!(
        d.daemon.jobs().get(job).unwrap().job.status,
        JobStatus::Queued
    );

    // The job's run (the scheduler's first wake is 15 s away: wake it now). The goal is
    // ticked by the job's change, not by hand.
    d.daemon.jobs().wake().await.unwrap();
    let goal = until(engine, &goal.id, |g| g.state.is_terminal()).await;
    assert_eq!(goal.state, GoalState::Done, "{goal:#?}");
    assert_eq!(
        d.daemon.jobs().get(job).unwrap().job.status,
        JobStatus::Completed
    );
    let said = goal
        .evidence
        .iter()
        .find(|e| e.kind == EvidenceKind::Message)
        .unwrap();
    assert!(said.reference.contains("dentist is on Friday"), "{said:?}");
    let transitions = engine.transitions(&goal.id).unwrap();
    let to_verifying = transitions
        .iter()
        .find(|t| t.transition.to_state == "VERIFYING")
        .unwrap();
    assert_eq!(
        to_verifying.transition.reason,
        format!("job {job} finished")
    );
    d.daemon.shutdown().await;
    fake.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_step_whose_run_fails_takes_the_step_failure_path_and_its_job_stops() {
    let fake = FakeModel::start().await;
    fake.set_fallback(Script::status(500));
    let d = start(config(&builtin(&fake))).await;
    let engine = d.daemon.goal_engine();
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "remind me of the dentist",
        "retry_budget": {"per_action": 1, "per_goal": 1},
        "plan": [{"id": "remind", "title": "Remind me", "kind": "job",
                  "prompt": "Remind me of the dentist"}]
    }))
    .unwrap();
    let goal = engine.create(&spec, owner()).unwrap();
    engine.tick(&goal.id).await.unwrap();
    let job = job_of(&engine.get(&goal.id).unwrap(), "remind");
    d.daemon.jobs().wake().await.unwrap();
    let goal = until(engine, &goal.id, |g| {
        g.action("remind").unwrap().state == ActionState::Blocked
    })
    .await;
    let blocker = goal
        .blockers
        .iter()
        .find(|b| b.action_id.as_deref() == Some("remind"))
        .unwrap();
    assert!(
        blocker.reason.contains(&format!("job {job} failed")),
        "{blocker:?}"
    );
    assert_eq!(
        blocker.how_to_resolve,
        format!("openphone goals retry {} remind", goal.id)
    );
    // The failed job does not retry beside the step: the step's own retry path owns it.
    assert_eq!(
        d.daemon.jobs().get(job).unwrap().job.status,
        JobStatus::Stopped
    );
    d.daemon.shutdown().await;
    fake.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_waiting_for_a_reply_moves_when_the_message_arrives() {
    let d = start(config("")).await;
    let engine = d.daemon.goal_engine();
    let until_ms = engine.now() + 3_600_000;
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "when Bob answers, look up the dentist",
        "plan": [
            {"id": "reply", "title": "Wait for Bob's answer", "kind": "wait",
             "until_ms": until_ms,
             "on": {"event": "phone.message.received",
                    "where": [{"pointer": "/address", "op": "equals", "value": "+49 170 555 0101"},
                              {"pointer": "/text", "op": "contains", "value": "yes"}]}},
            {"id": "find", "title": "Find the dentist", "kind": "tool",
             "command": "openphone.calendar.search", "params": {"query": "Dentist"},
             "depends_on": ["reply"]}
        ]
    }))
    .unwrap();
    let goal = engine.create(&spec, owner()).unwrap();
    engine.tick(&goal.id).await.unwrap();
    let waiting = engine.get(&goal.id).unwrap();
    assert_eq!(waiting.action("reply").unwrap().state, ActionState::Running);
    assert_eq!(
        waiting.action("reply").unwrap().resume_token.as_deref(),
        Some("event:phone.message.received")
    );

    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    // Not the awaited reply: the goal keeps waiting.
    let r = op
        .call(
            "sim.inject",
            json!({"kind": "message", "address": "+49 170 555 0101", "text": "let me check"}),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let r = op
        .call(
            "sim.inject",
            json!({"kind": "message", "address": "+49 170 555 0101", "text": "yes, Friday works"}),
        )
        .await;
    assert!(r.get("result").is_some(), "{r}");

    let goal = until(engine, &goal.id, |g| g.state.is_terminal()).await;
    assert_eq!(goal.state, GoalState::Done, "{goal:#?}");
    assert!(engine.now() < until_ms, "its timer never came");
    let reply: Vec<_> = goal
        .evidence
        .iter()
        .filter(|e| e.action_id.as_deref() == Some("reply"))
        .collect();
    assert_eq!(
        reply.len(),
        1,
        "only the matching message ended it: {reply:?}"
    );
    assert!(
        reply[0].reference.contains("yes, Friday works"),
        "{reply:?}"
    );
    assert_eq!(goal.action("find").unwrap().state, ActionState::Done);
    d.daemon.shutdown().await;
}

/// Issue 32 item 6 on the real daemon: with `[builtin]` configured, the built-in model (a
/// scripted provider on loopback) is the planner's: a step denied by the goal's risk ceiling
/// gets the model's alternative, with the model's reason in the plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_model_proposes_the_alternative_of_a_denied_step() {
    let fake = FakeModel::start().await;
    fake.push(Script::text(
        "{\"kind\": \"ask_user\", \"title\": \"Ask the user to text Alice\", \
         \"question\": \"Could you tell Alice the dentist moved to Friday?\", \
         \"why\": \"this goal may not send messages itself\"}",
    ));
    let d = start(config(&builtin(&fake))).await;
    let engine = d.daemon.goal_engine();
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "tell Alice the dentist moved",
        "risk_level": "medium",
        "plan": [{"id": "tell", "title": "Tell Alice", "kind": "tool",
                  "command": "openphone.messages.send",
                  "params": {"to": "+49 151 2345 6789", "body": "The dentist moved to Friday."}}]
    }))
    .unwrap();
    let goal = engine.create(&spec, owner()).unwrap();
    engine.tick(&goal.id).await.unwrap();
    let goal = engine.get(&goal.id).unwrap();
    assert_eq!(goal.action("tell").unwrap().state, ActionState::Blocked);
    let alt = goal.action("tell-model").unwrap();
    assert_eq!(alt.state, ActionState::Running, "{alt:#?}");
    let proposal = alt.proposal.as_ref().unwrap();
    assert_eq!(proposal.by, "model");
    assert!(
        proposal
            .why
            .contains("the built-in model proposes: this goal may not send messages itself"),
        "{proposal:?}"
    );
    // The model was asked once, in the step's own session, and told the step's decision.
    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(requests[0].to_string().contains("denied by goal_risk"));
    d.daemon.shutdown().await;
    fake.shutdown().await;
}

/// A daemon on the existing data dir `dir` (a restart).
async fn restart_on(dir: &std::path::Path) -> openphone_server::Daemon {
    openphone_server::Daemon::start(openphone_server::DaemonOptions {
        data_dir: dir.to_path_buf(),
        listen: "127.0.0.1:0".parse().unwrap(),
        device: openphone_server::DeviceChoice::Sim,
        config: config(""),
    })
    .await
    .unwrap()
}

/// A `job` step's job was created before its id was recorded: a daemon killed in between
/// left the step RUNNING without a job, recovery marked it `outcome_unknown` while the orphan
/// job still ran, and a retry created a second job. The job is made under the attempt's key
/// and recovery adopts it: one job per attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_crash_between_creating_a_goals_job_and_recording_it_orphaned_the_job() {
    let d = start(config("")).await;
    let engine = d.daemon.goal_engine();
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "remind me of the dentist",
        "plan": [{"id": "remind", "title": "Remind me", "kind": "job",
                  "prompt": "Remind me of the dentist", "run_at": engine.now() + 3_600_000}]
    }))
    .unwrap();
    let goal = engine.create(&spec, owner()).unwrap();
    engine.tick(&goal.id).await.unwrap();
    let job = job_of(&engine.get(&goal.id).unwrap(), "remind");
    let goal_id = goal.id.clone();
    let dir = d.dir;
    d.daemon.shutdown().await;

    // What a daemon killed right after creating the job leaves behind: the step RUNNING, its
    // attempt without the job's id.
    {
        let store = openphone_store::Store::open(dir.path()).unwrap();
        let stored = store.get_goal(&goal_id).unwrap().unwrap();
        let mut g = openphone_goals::engine::from_stored(&stored).unwrap();
        let action = g.action_mut("remind").unwrap();
        action.resume_token = None;
        action.attempts.last_mut().unwrap().job_id = None;
        g.evidence.clear();
        store
            .update_goal(
                &openphone_goals::engine::to_stored(&g).unwrap(),
                vec![],
                vec![],
            )
            .unwrap();
    }

    let daemon = restart_on(dir.path()).await;
    let engine = daemon.goal_engine();
    engine.tick(&goal_id).await.unwrap();
    let g = engine.get(&goal_id).unwrap();
    let remind = g.action("remind").unwrap();
    assert_eq!(remind.state, ActionState::Running, "{remind:?}");
    assert_eq!(job_of(&g, "remind"), job, "the orphan job is adopted");
    let jobs = daemon.jobs().list(None, None).unwrap();
    assert_eq!(jobs.len(), 1, "one job per attempt: {jobs:?}");
    daemon.shutdown().await;
}

/// A goal's own `agent_turn` is offered the phone's and the job commands, never the goal
/// commands (a goal turn does not make, re-plan or stop goals), whatever order the daemon
/// installs them in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goals_own_turn_is_not_offered_the_goal_commands() {
    let fake = FakeModel::start().await;
    fake.push(Script::text("Looked."));
    let d = start(config(&builtin(&fake))).await;
    let engine = d.daemon.goal_engine();
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "look at the calendar",
        "plan": [{"id": "look", "title": "Look", "kind": "agent_turn",
                  "prompt": "What is on my calendar?"}]
    }))
    .unwrap();
    let goal = engine.create(&spec, owner()).unwrap();
    engine.tick(&goal.id).await.unwrap();
    let requests = fake.requests();
    let tools: Vec<String> = requests.last().expect("the goal's turn asked the model")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert!(tools.iter().any(|t| t.contains("calendar")), "{tools:?}");
    assert!(
        tools.iter().any(|t| t.contains("background_job")),
        "{tools:?}"
    );
    assert!(!tools.iter().any(|t| t.contains("goals")), "{tools:?}");
    d.daemon.shutdown().await;
    fake.shutdown().await;
}
