//! The "done when": "by 18:00 move my dentist appointment to Friday and tell Alice"
//! with a scripted plan, against the simulated phone through the real bridge: it plans, parks
//! the calendar edit for approval, resumes after the approval, verifies the effect on the
//! phone, reports deltas (Telegram rendering included), and at the deadline delivers a
//! summary.

use openphone_clock::Clock;
use openphone_goals::DeltaReport;
use openphone_goals::model::{ActionState, AttemptOutcome, BlockerKind, GoalState};
use openphone_goals::report::{ReportReason, telegram_messages};
use openphone_store::ReportDelivery;

use super::support::{DAY, DENTIST_START, Harness, MIN, dentist_spec};

fn state_of(h: &Harness, goal: &str, action: &str) -> ActionState {
    h.engine.get(goal).unwrap().action(action).unwrap().state
}

#[tokio::test]
async fn the_dentist_goal_runs_end_to_end_with_two_approvals() {
    let h = Harness::new();
    let goal = h
        .engine
        .create(&dentist_spec(h.clock.now_ms()), Harness::owner())
        .unwrap();
    assert_eq!(goal.state, GoalState::Active);
    assert_eq!(goal.checkpoints.len(), 4);

    // One tick: the read runs (allowed in the background), the edit is parked for approval.
    let t1 = h.engine.tick(&goal.id).await.unwrap();
    assert_eq!(state_of(&h, &goal.id, "find"), ActionState::Done);
    assert_eq!(state_of(&h, &goal.id, "tell"), ActionState::Planned);
    let g = h.engine.get(&goal.id).unwrap();
    let mv = g.action("move").unwrap();
    assert_eq!(mv.state, ActionState::NeedsApproval);
    assert_eq!(mv.decision.as_ref().unwrap().outcome, "park");
    assert_eq!(mv.decision.as_ref().unwrap().layer, "background_context");
    let cid = mv.resume_token.clone().unwrap();
    assert!(cid.starts_with("runtime-confirm-"), "{cid}");
    assert_eq!(
        mv.attempts[0].idempotency_key,
        format!("{}:move:1", goal.id)
    );
    assert_eq!(g.state, GoalState::Blocked);
    let approval = g
        .blockers
        .iter()
        .find(|b| b.kind == BlockerKind::Approval)
        .unwrap();
    assert_eq!(
        approval.how_to_resolve,
        format!("openphone confirmations approve {cid}")
    );
    assert!(
        h.phone_actions().is_empty(),
        "nothing changed on the phone before approval"
    );
    let parked_report = t1.reports.last().unwrap();
    assert_eq!(parked_report.reason, ReportReason::Blocked);
    assert!(
        parked_report
            .new_blockers
            .iter()
            .any(|b| b.how_to_resolve.contains(&cid))
    );

    // Ticks change nothing while the approval waits.
    h.clock.advance(5 * MIN);
    let idle = h.engine.tick(&goal.id).await.unwrap();
    assert!(idle.transitions.is_empty());

    // The user approves; the next tick sees the executed request and verifies the effect.
    h.approve(&cid).await;
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    let mv = g.action("move").unwrap();
    assert_eq!(mv.state, ActionState::Done);
    assert_eq!(mv.attempts.len(), 1);
    assert_eq!(mv.attempts[0].outcome, AttemptOutcome::Ok);
    let event = h
        .phone
        .snapshot()
        .events
        .into_iter()
        .find(|e| e.id == 103)
        .unwrap();
    assert_eq!(event.start_ms, DENTIST_START + DAY);

    // Telling Alice is on the risk floor: its own approval.
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    let tell = g.action("tell").unwrap();
    assert_eq!(tell.state, ActionState::NeedsApproval);
    let cid2 = tell.resume_token.clone().unwrap();
    h.approve(&cid2).await;
    let done = h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(g.state, GoalState::Done, "{:#?}", g.blockers);
    assert!(g.blockers.is_empty());
    assert_eq!(done.reports.last().unwrap().reason, ReportReason::Done);
    assert_eq!(h.phone_actions().len(), 2, "{:?}", h.phone_actions());

    // Every transition was stored, with its source, in order.
    let log = h.store.goal_transitions(&goal.id).unwrap();
    let moves: Vec<String> = log
        .iter()
        .filter(|t| t.transition.action_id == "move")
        .map(|t| {
            format!(
                "{}>{}:{}",
                t.transition.from_state, t.transition.to_state, t.transition.source
            )
        })
        .collect();
    assert_eq!(
        moves,
        [
            "PLANNED>READY:dependency",
            "READY>NEEDS_APPROVAL:policy",
            "NEEDS_APPROVAL>RUNNING:user",
            "RUNNING>VERIFYING:executor",
            "VERIFYING>DONE:verifier"
        ]
    );

    // Reports were stored for Telegram delivery, and render within Telegram's rules.
    let reports = h.store.goal_reports(&goal.id).unwrap();
    assert!(reports.len() >= 3);
    assert!(
        reports
            .iter()
            .all(|r| r.channel == "telegram" && r.delivery == ReportDelivery::Pending)
    );
    let last: DeltaReport = serde_json::from_value(reports.last().unwrap().report.clone()).unwrap();
    let messages = telegram_messages(&last);
    assert_eq!(messages.len(), 1);
    assert!(
        messages[0].starts_with(
            "*Goal done — by 18:00 move my dentist appointment to Friday and tell Alice \\("
        ),
        "{}",
        messages[0]
    );

    // Artifacts were written.
    let dir = h.dir.path().join("data").join("artifacts").join(&goal.id);
    let status = std::fs::read_to_string(dir.join("status.md")).unwrap();
    assert!(
        status.contains("**State:** done — 3/3 actions done"),
        "{status}"
    );
    assert!(dir.join("plan.json").exists());
    assert!(std::fs::read_dir(dir.join("runs")).unwrap().count() >= 3);
}

#[tokio::test]
async fn at_the_deadline_the_summary_and_blockers_report_is_delivered_whatever_happened() {
    let h = Harness::new();
    let goal = h.ticked_dentist().await;
    h.engine.tick(&goal.id).await.unwrap();
    // Nobody answers. T-120 is met (every approval was requested), T-60 and T-15 are missed.
    h.clock.advance(4 * 60 * MIN + MIN);
    let t = h.engine.tick(&goal.id).await.unwrap();
    assert_eq!(t.reports.last().unwrap().reason, ReportReason::Checkpoint);
    h.clock.advance(60 * MIN);
    let t = h.engine.tick(&goal.id).await.unwrap();
    assert_eq!(
        t.reports.last().unwrap().reason,
        ReportReason::CheckpointMissed
    );
    h.clock.advance(45 * MIN);
    let t = h.engine.tick(&goal.id).await.unwrap();
    let last = t.reports.last().unwrap();
    assert_eq!(last.reason, ReportReason::CheckpointMissed);
    assert!(
        last.checkpoints[0].starts_with("T-15 MISSED"),
        "{:?}",
        last.checkpoints
    );
    h.clock.advance(15 * MIN);
    let t = h.engine.tick(&goal.id).await.unwrap();
    let summary = t.reports.last().unwrap();
    assert_eq!(summary.reason, ReportReason::Deadline);
    assert_eq!(summary.state, GoalState::Failed);
    // The approval was asked again every ten minutes until the deadline, then blocked.
    assert!(summary.approvals_waiting.is_empty(), "{summary:?}");
    assert_eq!(summary.new_blockers.len(), 1, "{summary:?}");
    assert_eq!(
        summary.new_blockers[0].how_to_resolve,
        format!("openphone goals retry {} move", goal.id)
    );
    assert!(
        summary.checkpoints[0].starts_with("T MISSED"),
        "{:?}",
        summary.checkpoints
    );
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(g.state, GoalState::Failed);
    assert!(h.phone_actions().is_empty());
}

#[tokio::test]
async fn checkpoints_that_fell_while_the_daemon_was_down_run_late() {
    let mut h = Harness::new();
    let goal = h.ticked_dentist().await;
    // Down for five hours and ten minutes.
    h.clock.advance(5 * 60 * MIN + 10 * MIN);
    h.restart();
    let t = h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    let late: Vec<_> = g
        .checkpoints
        .iter()
        .filter(|c| c.late)
        .map(|c| c.label.clone())
        .collect();
    assert_eq!(late, ["T-120", "T-60"]);
    assert!(
        t.reports
            .iter()
            .any(|r| r.checkpoints.iter().any(|c| c.contains("(late)")))
    );
}

#[tokio::test]
async fn a_declined_approval_blocks_with_a_retry_command_and_never_stops_silently() {
    let h = Harness::new();
    let goal = h.ticked_dentist().await;
    h.engine.tick(&goal.id).await.unwrap();
    let cid = h
        .engine
        .get(&goal.id)
        .unwrap()
        .action("move")
        .unwrap()
        .resume_token
        .clone()
        .unwrap();
    h.decline(&cid).await;
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    let mv = g.action("move").unwrap();
    assert_eq!(mv.state, ActionState::Blocked);
    assert_eq!(mv.resume_token.as_deref(), Some("retry:move"));
    assert_eq!(g.state, GoalState::Blocked);
    assert_eq!(
        g.blockers
            .iter()
            .map(|b| b.how_to_resolve.clone())
            .collect::<Vec<_>>(),
        [format!("openphone goals retry {} move", goal.id)]
    );
    // Retry: a new attempt with a new key, a new confirmation.
    h.engine.retry(&goal.id, Some("move")).await.unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    let mv = g.action("move").unwrap();
    assert_eq!(mv.state, ActionState::NeedsApproval);
    assert_eq!(mv.attempts.len(), 2);
    assert_eq!(
        mv.attempts[1].idempotency_key,
        format!("{}:move:2", goal.id)
    );
    assert_ne!(mv.resume_token.as_deref(), Some(cid.as_str()));
}

#[tokio::test]
async fn aborting_a_goal_withdraws_its_pending_approval_so_a_late_approval_runs_nothing() {
    let h = Harness::new();
    let goal = h.ticked_dentist().await;
    let cid = h
        .engine
        .get(&goal.id)
        .unwrap()
        .action("move")
        .unwrap()
        .resume_token
        .clone()
        .unwrap();
    let g = h.engine.abort(&goal.id, None).await.unwrap();
    assert_eq!(g.state, GoalState::Aborted);
    assert!(g.actions.iter().all(|a| a.state.is_terminal()));
    let operator = openphone_core::Operator::from_caller(&openphone_policy::Caller::operator(
        "cli",
        openphone_policy::Transport::Cli,
        "tester",
    ))
    .unwrap();
    assert!(
        h.bridge
            .resolve(&operator, &cid, openphone_core::ConfirmDecision::Approve)
            .await
            .is_err()
    );
    assert!(h.phone_actions().is_empty());
    // Ticking an aborted goal does nothing.
    assert!(
        h.engine
            .tick(&goal.id)
            .await
            .unwrap()
            .transitions
            .is_empty()
    );
}
