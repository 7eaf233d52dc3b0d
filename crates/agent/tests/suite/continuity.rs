//! A phone session's conversation continues across follow-ups and daemon restarts.

use openphone_fake_model::Script;
use openphone_protocol::endpoint::AttentionRequestParams;
use openphone_store::SessionStatus;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::*;

fn contents(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .skip(1)
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn pair(role: &str, content: &str) -> (String, String) {
    (role.to_owned(), content.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_in_the_same_session_sees_the_conversation() {
    let agent = Agent::start().await;
    agent.fake.push(Script::text("Hello! How can I help?"));
    agent.fake.push(Script::text("You said hi."));
    let id = agent.ask("hi").phone_session_id;
    assert_eq!(agent.finished(&id).await.status, SessionStatus::Completed);

    let again = agent.ask_in(&id, "what did I just say?");
    assert_eq!(again.phone_session_id, id);
    assert_eq!(agent.finished(&id).await.status, SessionStatus::Completed);
    assert_eq!(
        contents(&sent_messages(&agent.fake, 1)),
        [
            pair("user", "hi"),
            pair("assistant", "Hello! How can I help?"),
            pair("user", "what did I just say?"),
        ]
    );
    let sessions = agent.store.list_sessions(&Default::default()).unwrap();
    assert_eq!(sessions.len(), 1, "no second session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn main_continues_the_latest_chat_and_failed_sessions_stay_closed() {
    let agent = Agent::start().await;
    agent.fake.push(Script::text("first answer"));
    agent.fake.push(Script::text("second answer"));
    let id = agent.ask("first").phone_session_id;
    agent.finished(&id).await;
    let main = agent
        .manager
        .request_attention(
            AttentionRequestParams {
                text: "second".into(),
                session_target: Some("main".into()),
                ..AttentionRequestParams::default()
            },
            None,
        )
        .unwrap();
    assert_eq!(main.phone_session_id, id);
    agent.finished(&id).await;

    agent.fake.set_fallback(Script::status(400));
    let broken = agent.ask("third").phone_session_id;
    assert_ne!(broken, id);
    agent.finished(&broken).await;
    let error = agent
        .manager
        .request_attention(
            AttentionRequestParams {
                text: "again".into(),
                session_target: Some(format!("session:{broken}")),
                ..AttentionRequestParams::default()
            },
            None,
        )
        .unwrap_err();
    assert_eq!(error.code.as_str(), "session_mismatch");
    for (target, code) in [
        ("session:phone-sess-nope", "session_mismatch"),
        ("sessions", "invalid_params"),
    ] {
        let error = agent
            .manager
            .request_attention(
                AttentionRequestParams {
                    text: "x".into(),
                    session_target: Some(target.into()),
                    ..AttentionRequestParams::default()
                },
                None,
            )
            .unwrap_err();
        assert_eq!(error.code.as_str(), code, "{target}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_the_transcript_and_the_session_continues() {
    let agent = Agent::start().await;
    agent.fake.push(Script::tool_call(
        "contacts_search",
        json!({"query": "Carla", "reason": "find Carla"}),
    ));
    agent
        .fake
        .push(Script::text("Carla Rossi: +39 333 123 4567"));
    let id = agent.ask("Carla's number?").phone_session_id;
    agent.finished(&id).await;
    let before = agent.transcript(&id);
    assert_eq!(before.len(), 5);

    let (dir, fake) = agent.stop().await;
    let agent = Agent::open(
        dir,
        openphone_device::SimState::default_scenario().unwrap(),
        limits(),
        fake,
    )
    .await;
    assert_eq!(agent.transcript(&id), before, "nothing lost");
    agent.fake.push(Script::text("It is an Italian number."));
    agent.ask_in(&id, "which country is that?");
    assert_eq!(agent.finished(&id).await.status, SessionStatus::Completed);
    let last = sent_messages(&agent.fake, 2);
    assert_eq!(
        last.iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(last[4]["content"], "Carla Rossi: +39 333 123 4567");
    // The request ids keep counting in the continued session.
    assert_eq!(before[2].body["request_id"], format!("builtin-{id}-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_by_a_stop_fails_its_session_with_a_reason() {
    let agent = Agent::start().await;
    agent.fake.set_fallback(Script::Hang);
    let id = agent.ask("slow question").phone_session_id;
    agent
        .until(&id, |_| !agent.fake.requests().is_empty())
        .await;
    let (dir, fake) = agent.stop().await;
    let agent = Agent::open(
        dir,
        openphone_device::SimState::default_scenario().unwrap(),
        limits(),
        fake,
    )
    .await;
    let session = agent.session(&id);
    assert_eq!(session.status, SessionStatus::Failed);
    assert_eq!(session.failure_reason.as_deref(), Some("daemon_stopped"));
    assert_eq!(agent.transcript(&id)[0].role, "user");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_to_a_busy_session_waits_its_turn() {
    let agent = Agent::start().await;
    agent.fake.push(Script::tool_call(
        "messages_send",
        json!({"to": "+49 151 2345 6789", "body": "on my way", "reason": "tell Alice"}),
    ));
    agent.fake.push(Script::text("Sent."));
    agent.fake.push(Script::text("Nothing else is pending."));
    let id = agent.ask("tell Alice I'm on my way").phone_session_id;
    let confirmation = agent.pending_confirmation(&id).await;
    let again = agent.ask_in(&id, "anything else?");
    assert_eq!(again.phone_session_id, id);
    assert_eq!(
        agent.session(&id).status,
        SessionStatus::WaitingForConfirmation,
        "the follow-up does not hide the pending confirmation"
    );
    agent
        .decide(&confirmation, openphone_core::ConfirmDecision::Approve)
        .await;
    agent.until(&id, |_| agent.fake.requests().len() == 3).await;
    assert_eq!(agent.finished(&id).await.status, SessionStatus::Completed);
    let last = contents(&sent_messages(&agent.fake, 2));
    assert_eq!(last.last().unwrap(), &pair("user", "anything else?"));
    assert_eq!(last[last.len() - 2], pair("assistant", "Sent."));
    let outcomes = agent
        .transcript(&id)
        .iter()
        .filter(|e| e.role == "status")
        .count();
    assert_eq!(outcomes, 2);
}
