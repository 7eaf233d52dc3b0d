//! Issue 32 item 6: the policy-aware planner proposes the policy-compatible alternative of a
//! step itself — from the manifest (`safer_alternative`: a draft instead of a send; asking the
//! user when nothing safer is allowed) and through the built-in model when one is attached —
//! and says why in the plan (`proposal`, `goals explain`).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use openphone_goals::explain::explain;
use openphone_goals::model::{ActionKind, ActionState, GoalState};
use openphone_goals::{AgentBackend, Backends, GoalEngine, GoalSpec};
use serde_json::json;

use super::support::{DAY, DENTIST, DENTIST_START, Harness};

const ALICE: &str = "+49 151 2345 6789";

/// "Tell Alice" at medium risk: `openphone.messages.send` (high) is denied by `goal_risk`.
fn tell_alice() -> GoalSpec {
    serde_json::from_value(json!({
        "objective": "tell Alice the dentist moved",
        "risk_level": "medium",
        "plan": [{"id": "tell", "title": "Tell Alice", "kind": "tool",
                  "command": "openphone.messages.send",
                  "params": {"to": ALICE, "body": "The dentist moved to Friday."}}]
    }))
    .unwrap()
}

#[tokio::test]
async fn a_denied_send_gets_the_manifests_draft_proposed_with_the_reason() {
    let h = Harness::new();
    let goal = h.engine.create(&tell_alice(), Harness::owner()).unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    let tell = g.action("tell").unwrap();
    assert_eq!(tell.state, ActionState::Blocked);
    assert_eq!(tell.alternatives, vec!["tell-safer".to_owned()]);
    let safer = g.action("tell-safer").unwrap();
    assert_eq!(
        safer.kind,
        ActionKind::Tool {
            command: "openphone.messages.draft".to_owned(),
            params: serde_json::from_value(
                json!({"to": ALICE, "body": "The dentist moved to Friday."})
            )
            .unwrap(),
        }
    );
    // The draft asks for approval (the background context has nobody to confirm it): a
    // better decision than the send's denial.
    assert_eq!(safer.state, ActionState::NeedsApproval, "{safer:#?}");
    let proposal = safer.proposal.as_ref().unwrap();
    assert_eq!(proposal.replaces, "tell");
    assert_eq!(proposal.by, "manifest");
    assert!(proposal.why.contains("denied by goal_risk"), "{proposal:?}");
    assert!(
        proposal
            .why
            .contains("safer alternative openphone.messages.draft"),
        "{proposal:?}"
    );
    assert!(safer.optional && g.plan_version == 2, "a re-plan: {g:#?}");
    let transitions = h.engine.transitions(&goal.id).unwrap();
    let lines = explain(&g, "tell", &transitions).unwrap();
    assert!(
        lines.iter().any(|l| l.starts_with(
            "the planner proposed tell-safer (tool) in its place: tell would be denied"
        )),
        "{lines:#?}"
    );
    let lines = explain(&g, "tell-safer", &transitions).unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("proposed by the planner (manifest) as the alternative of tell")),
        "{lines:#?}"
    );
    assert!(h.phone_actions().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn a_denied_step_with_nothing_safer_gets_a_question_to_the_user() {
    let h = Harness::new();
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "move the dentist", "autonomy": "observe_only",
        "plan": [{"id": "move", "title": "Move the dentist", "kind": "tool",
                  "command": "openphone.calendar.update",
                  "params": {"event_id": DENTIST, "start_at": DENTIST_START + DAY}}]
    }))
    .unwrap();
    let goal = h.engine.create(&spec, Harness::owner()).unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    let ask = g.action("move-ask").unwrap();
    assert_eq!(ask.state, ActionState::Running);
    let ActionKind::AskUser { question } = &ask.kind else {
        panic!("{ask:?}")
    };
    assert!(
        question.contains("openphone.calendar.update is denied"),
        "{question}"
    );
    assert!(
        ask.proposal
            .as_ref()
            .unwrap()
            .why
            .contains("asking the user needs no permission"),
        "{ask:?}"
    );
    let g = h.engine.answer(&goal.id, "move-ask", "done").await.unwrap();
    assert_eq!(g.action("move-ask").unwrap().state, ActionState::Done);
    h.engine.tick(&goal.id).await.unwrap();
    assert_eq!(h.engine.get(&goal.id).unwrap().state, GoalState::Done);
}

/// The built-in model as the planner: one scripted answer, the prompts it was given.
struct ScriptedModel {
    answer: String,
    prompts: Mutex<Vec<(String, String)>>,
}

#[async_trait]
impl AgentBackend for ScriptedModel {
    async fn agent_turn(&self, session: &str, prompt: &str) -> Result<String, String> {
        self.prompts
            .lock()
            .unwrap()
            .push((session.to_owned(), prompt.to_owned()));
        Ok(self.answer.clone())
    }
}

fn with_model(h: &Harness, answer: &str) -> (GoalEngine, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel {
        answer: answer.to_owned(),
        prompts: Mutex::new(Vec::new()),
    });
    let engine = GoalEngine::new(
        Arc::clone(&h.store),
        Arc::clone(&h.bridge),
        Backends {
            agent: Some(model.clone() as Arc<dyn AgentBackend>),
            jobs: None,
        },
        None,
    );
    (engine, model)
}

#[tokio::test]
async fn the_builtin_model_proposes_the_alternative_when_one_is_attached() {
    let h = Harness::new();
    let (engine, model) = with_model(
        &h,
        "Here it is: {\"kind\": \"ask_user\", \"title\": \"Ask the user to text Alice\", \
         \"question\": \"Could you text Alice that the dentist moved to Friday?\", \
         \"why\": \"only the user may send messages for this goal\"}",
    );
    let goal = engine.create(&tell_alice(), Harness::owner()).unwrap();
    engine.tick(&goal.id).await.unwrap();
    let g = engine.get(&goal.id).unwrap();
    let alt = g.action("tell-model").unwrap();
    assert_eq!(alt.state, ActionState::Running, "{alt:#?}");
    assert_eq!(alt.title, "Ask the user to text Alice");
    let proposal = alt.proposal.as_ref().unwrap();
    assert_eq!(proposal.by, "model");
    assert!(
        proposal
            .why
            .contains("the built-in model proposes: only the user may send messages"),
        "{proposal:?}"
    );
    let prompts = model.prompts.lock().unwrap();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0].0, format!("goal:{}:tell", goal.id));
    // The model was told the step, its decision and the manifest's default.
    assert!(
        prompts[0].1.contains("denied by goal_risk"),
        "{}",
        prompts[0].1
    );
    assert!(prompts[0].1.contains("messages.draft"), "{}", prompts[0].1);
}

#[tokio::test]
async fn a_model_proposal_the_policy_would_refuse_too_leaves_the_manifests() {
    let h = Harness::new();
    // A call is high risk as well: denied by the same ceiling.
    let (engine, _model) = with_model(
        &h,
        "{\"kind\": \"tool\", \"command\": \"openphone.calls.place\", \
         \"params\": {\"number\": \"+49 151 2345 6789\"}, \"why\": \"call her instead\"}",
    );
    let goal = engine.create(&tell_alice(), Harness::owner()).unwrap();
    engine.tick(&goal.id).await.unwrap();
    let g = engine.get(&goal.id).unwrap();
    assert!(g.action("tell-model").is_none());
    let safer = g.action("tell-safer").unwrap();
    let proposal = safer.proposal.as_ref().unwrap();
    assert_eq!(proposal.by, "manifest");
    assert!(
        proposal.why.contains(
            "the built-in model's proposal was not used: openphone.calls.place would be denied"
        ),
        "{proposal:?}"
    );
}

/// After the user declined a step's approval, the planner's alternative ran without asking:
/// a declined share put the same text on the clipboard. An alternative of a step the user
/// declined is itself asked (a yes/no question, `goals answer`); nothing runs until they
/// agree, and a no drops it.
#[tokio::test]
async fn regression_a_declined_share_put_its_text_on_the_clipboard_without_asking() {
    let h = Harness::new();
    // The clipboard is allowed for background work (a standing approval): the planner's
    // alternative of the share would run at once.
    h.store
        .create_approval(
            &openphone_store::NewStandingApproval {
                runtime: "builtin".to_owned(),
                tool: "openphone.clipboard.set".to_owned(),
                constraints: json!({}),
                expires_at_ms: None,
                background: true,
                phone_session_id: None,
                confirmation_id: None,
                created_by: Some("test".to_owned()),
                note: None,
            },
            openphone_clock::Clock::now_ms(&h.clock),
        )
        .unwrap();
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "share the dentist's address",
        "risk_level": "high",
        "autonomy": "trusted_actions",
        "plan": [{"id": "share", "title": "Share the address", "kind": "tool",
                  "command": "openphone.share.text",
                  "params": {"text": "Dr. Weiss, Hauptstr. 1"}}]
    }))
    .unwrap();
    let goal = h.engine.create(&spec, Harness::owner()).unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    let share = g.action("share").unwrap();
    assert_eq!(share.state, ActionState::NeedsApproval, "{g:#?}");
    assert_eq!(share.alternatives, vec!["share-safer".to_owned()], "{g:#?}");
    let cid = share.resume_token.clone().unwrap();
    h.decline(&cid).await;
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(g.action("share").unwrap().state, ActionState::Blocked);
    let safer = g.action("share-safer").unwrap();
    assert_eq!(safer.state, ActionState::Blocked, "{safer:#?}");
    let blocker = g
        .blockers
        .iter()
        .find(|b| b.action_id.as_deref() == Some("share-safer"))
        .unwrap();
    assert!(blocker.reason.contains("declined share"), "{blocker:?}");
    assert_eq!(
        blocker.how_to_resolve,
        format!(
            "openphone goals answer {} share-safer yes (or no to drop it)",
            goal.id
        )
    );
    assert!(
        h.phone_actions().is_empty(),
        "nothing ran: {:?}",
        h.phone_actions()
    );
    assert!(
        h.engine
            .answer(&goal.id, "share-safer", "maybe")
            .await
            .is_err()
    );
    // The user agrees: it runs.
    h.engine
        .answer(&goal.id, "share-safer", "yes")
        .await
        .unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(
        g.action("share-safer").unwrap().state,
        ActionState::Done,
        "{g:#?}"
    );
    assert_eq!(h.phone_actions().len(), 1, "{:?}", h.phone_actions());
}

/// The user's no drops the alternative of the step they declined; nothing runs.
#[tokio::test]
async fn a_no_to_the_alternative_of_a_declined_step_drops_it() {
    let h = Harness::new();
    let spec: GoalSpec = serde_json::from_value(json!({
        "objective": "share the dentist's address",
        "risk_level": "high",
        "plan": [{"id": "share", "title": "Share the address", "kind": "tool",
                  "command": "openphone.share.text", "params": {"text": "Hauptstr. 1"},
                  "alternatives": ["copy"]},
                 {"id": "copy", "title": "Copy it", "kind": "tool", "optional": true,
                  "command": "openphone.clipboard.set", "params": {"text": "Hauptstr. 1"}}]
    }))
    .unwrap();
    let goal = h.engine.create(&spec, Harness::owner()).unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    let cid = h
        .engine
        .get(&goal.id)
        .unwrap()
        .action("share")
        .unwrap()
        .resume_token
        .clone()
        .unwrap();
    h.decline(&cid).await;
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(
        g.action("copy").unwrap().state,
        ActionState::Blocked,
        "{g:#?}"
    );
    h.engine.answer(&goal.id, "copy", "no").await.unwrap();
    h.engine.tick(&goal.id).await.unwrap();
    let g = h.engine.get(&goal.id).unwrap();
    assert_eq!(
        g.action("copy").unwrap().state,
        ActionState::Aborted,
        "{g:#?}"
    );
    assert!(h.phone_actions().is_empty(), "{:?}", h.phone_actions());
}
