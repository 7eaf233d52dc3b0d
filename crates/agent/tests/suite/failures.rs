//! Every way a run ends without an answer ends the session with a visible reason.

use openphone_agent::{BuiltinConfig, BuiltinRuntime, BuiltinSetup};
use openphone_device::SimState;
use openphone_fake_model::Script;
use openphone_policy::{Caller, ToolPolicy};
use openphone_protocol::endpoint::{AttentionRequestParams, RuntimeState};
use openphone_store::{ConfirmationState, SessionStatus};
use serde_json::json;

use super::support::*;

async fn failing(limits: BuiltinConfig, scripts: Vec<Script>, fallback: Script) -> (Agent, String) {
    let agent = Agent::with(SimState::default_scenario().unwrap(), limits).await;
    for script in scripts {
        agent.fake.push(script);
    }
    agent.fake.set_fallback(fallback);
    let id = agent.ask("check my messages").phone_session_id;
    (agent, id)
}

fn reason(agent: &Agent, id: &str) -> String {
    let session = agent.session(id);
    assert_eq!(session.status, SessionStatus::Failed, "{session:?}");
    session.failure_reason.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_retried_after_the_wait_it_asks_for() {
    let (agent, id) = failing(
        limits(),
        vec![
            Script::status_with_retry_after(429, "0"),
            Script::text("All quiet."),
        ],
        Script::status(500),
    )
    .await;
    let session = agent.finished(&id).await;
    assert_eq!(session.status, SessionStatus::Completed, "{session:?}");
    assert_eq!(agent.fake.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_error_fails_with_its_status() {
    let (agent, id) = failing(limits(), vec![], Script::status(401)).await;
    agent.finished(&id).await;
    assert_eq!(reason(&agent, &id), "model_http_401");
    assert_eq!(agent.fake.requests().len(), 1, "a 401 is not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_provider_times_out_before_the_budget() {
    let limits = BuiltinConfig {
        request_timeout_secs: 1,
        run_budget_secs: 15,
        ..limits()
    };
    let (agent, id) = failing(limits, vec![], Script::Hang).await;
    agent.finished(&id).await;
    assert_eq!(reason(&agent, &id), "model_timeout");
    assert_eq!(agent.fake.requests().len(), 3, "every attempt was made");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wall_clock_budget_ends_a_run() {
    let limits = BuiltinConfig {
        request_timeout_secs: 30,
        run_budget_secs: 1,
        ..limits()
    };
    let (agent, id) = failing(limits, vec![], Script::Hang).await;
    agent.finished(&id).await;
    assert_eq!(reason(&agent, &id), "run_budget_exceeded");
    let last = agent.transcript(&id).pop().unwrap();
    assert_eq!(last.body["reason"], "run_budget_exceeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_never_stops_calling_tools_hits_max_turns() {
    let limits = BuiltinConfig {
        max_turns: 3,
        ..limits()
    };
    let lookup = Script::tool_call("contacts_search", json!({"query": "A", "reason": "look"}));
    let (agent, id) = failing(limits, vec![], lookup).await;
    agent.finished(&id).await;
    assert_eq!(reason(&agent, &id), "max_turns_exceeded");
    assert_eq!(agent.fake.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_tool_calls_end_the_run_and_the_rest_are_answered() {
    let limits = BuiltinConfig {
        max_tool_calls: 1,
        ..limits()
    };
    let two = Script::tool_calls(vec![
        ("contacts_search", json!({"query": "A", "reason": "look"})),
        ("contacts_search", json!({"query": "B", "reason": "look"})),
    ]);
    let (agent, id) = failing(limits, vec![two], Script::status(500)).await;
    agent.finished(&id).await;
    assert_eq!(reason(&agent, &id), "max_tool_calls_exceeded");
    let transcript = agent.transcript(&id);
    let tools: Vec<_> = transcript.iter().filter(|e| e.role == "tool").collect();
    assert_eq!(tools.len(), 2, "every call has its answer");
    assert_eq!(tools[1].body["status"], "not_run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_while_the_model_thinks_stops_the_run() {
    let (agent, id) = failing(limits(), vec![], Script::Hang).await;
    agent
        .until(&id, |_| !agent.fake.requests().is_empty())
        .await;
    let (session, stopped) = agent.manager.cancel_session(&id).unwrap();
    assert!(stopped);
    assert_eq!(session.status, SessionStatus::Failed);
    assert_eq!(session.failure_reason.as_deref(), Some("cancelled"));
    agent.finished(&id).await;
    assert_eq!(agent.fake.requests().len(), 1, "no further model call");
    assert_eq!(
        agent.transcript(&id).pop().unwrap().body["outcome"],
        "cancelled"
    );
    let again = agent.manager.cancel_session(&id).unwrap_err();
    assert_eq!(again.code.as_str(), "session_mismatch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_while_waiting_for_the_user_withdraws_the_confirmation() {
    let send = Script::tool_call(
        "messages_send",
        json!({"to": "+49 151 2345 6789", "body": "hi", "reason": "say hi"}),
    );
    let (agent, id) = failing(limits(), vec![send], Script::text("never asked")).await;
    let confirmation = agent.pending_confirmation(&id).await;
    let (_, stopped) = agent.manager.cancel_session(&id).unwrap();
    assert!(stopped);
    agent.finished(&id).await;
    assert_eq!(reason(&agent, &id), "cancelled");
    let record = agent
        .store
        .get_confirmation(&confirmation)
        .unwrap()
        .unwrap();
    assert_ne!(record.state, ConfirmationState::Pending);
    assert_eq!(
        agent.fake.requests().len(),
        1,
        "the model is not called again"
    );
    assert!(agent.sms_to("4915123456789").is_empty());
    // The stored conversation stays one a model accepts: the call has its answer.
    let transcript = agent.transcript(&id);
    assert_eq!(transcript[2].role, "tool");
    assert_eq!(transcript[2].body["status"], "not_run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_the_builtin_runtime_says_how_to_configure_one() {
    let agent = Agent::start().await;
    let builtin = |agent: &Agent| {
        agent
            .manager
            .list()
            .into_iter()
            .find(|r| r.id == "builtin")
            .unwrap()
            .status
    };
    assert_eq!(builtin(&agent), RuntimeState::Connected);
    // The daemon attaches an unconfigured runtime when the config has no [builtin] table.
    let setup = BuiltinSetup {
        bridge: agent.bridge.clone(),
        manager: agent.manager.clone(),
        store: agent.store.clone(),
        registry: registry(),
        authorisation: Caller::builtin("daemon").authorisation(),
        tool_policy: ToolPolicy::default(),
        config_origin: None,
    };
    let unconfigured = BuiltinRuntime::from_config(setup, None).unwrap();
    assert!(!unconfigured.is_configured());
    unconfigured.attach();
    assert_eq!(builtin(&agent), RuntimeState::NotConfigured);
    let error = agent
        .manager
        .request_attention(
            AttentionRequestParams {
                text: "hi".into(),
                ..AttentionRequestParams::default()
            },
            None,
        )
        .unwrap_err();
    assert_eq!(error.code.as_str(), "runtime_not_configured");
    assert!(
        error
            .message
            .contains("add a [builtin] table with base_url and model"),
        "{}",
        error.message
    );
    assert!(
        agent
            .store
            .list_sessions(&Default::default())
            .unwrap()
            .is_empty()
    );
}
