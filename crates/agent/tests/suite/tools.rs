//! Tool calls through the bridge: confirmation, approval and denial, several calls in one
//! turn, arguments the model gets wrong.

use openphone_core::ConfirmDecision;
use openphone_fake_model::{Script, StreamMode};
use openphone_store::SessionStatus;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::*;

const ALICE: &str = "4915123456789";

fn roles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tell_alice_im_late_waits_for_the_user_then_sends() {
    let agent = Agent::start().await;
    agent.fake.push(Script::tool_call(
        "contacts_search",
        json!({"query": "Alice", "reason": "find Alice's number"}),
    ));
    agent.fake.push(
        Script::tool_call(
            "messages_send",
            json!({"to": "+49 151 2345 6789", "body": "I'm 10 minutes late",
                   "reason": "tell Alice you are running late"}),
        )
        .with_content("I'll text Alice that you're 10 minutes late."),
    );
    agent
        .fake
        .push(Script::text("Done: Alice knows you're 10 minutes late."));
    let mut events = agent.events.subscribe();

    let accepted = agent.ask("tell Alice I'm 10 minutes late");
    assert_eq!(accepted.runtime, "builtin");
    let id = accepted.phone_session_id;
    let confirmation = agent.pending_confirmation(&id).await;
    assert_eq!(
        agent.session(&id).status,
        SessionStatus::WaitingForConfirmation
    );
    assert!(
        agent.sms_to(ALICE).is_empty(),
        "nothing is sent before approval"
    );
    assert_eq!(
        agent.fake.requests().len(),
        2,
        "the loop waits for the user"
    );

    agent.decide(&confirmation, ConfirmDecision::Approve).await;
    let session = agent.finished(&id).await;
    assert_eq!(session.status, SessionStatus::Completed, "{session:?}");
    assert_eq!(agent.sms_to(ALICE), ["I'm 10 minutes late"]);

    // The model was offered the manifest's tools under their model-tool names.
    let first = &agent.fake.requests()[0];
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"messages_send") && tools.contains(&"contacts_search"));
    let send = registry().resolve("openphone.messages.send").unwrap();
    let offered = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "messages_send")
        .unwrap();
    assert_eq!(offered["function"]["parameters"], send.input_schema);
    assert_eq!(first["messages"][0]["role"], "system");
    assert_eq!(
        first["messages"][1]["content"],
        "tell Alice I'm 10 minutes late"
    );

    // Then it was told what happened.
    let third = sent_messages(&agent.fake, 2);
    assert_eq!(
        roles(&third),
        ["system", "user", "assistant", "tool", "assistant", "tool"]
    );
    let told = third[5]["content"].as_str().unwrap();
    assert!(
        told.starts_with("The user approved messages_send on the phone and it ran."),
        "{told}"
    );
    assert!(told.contains("<untrusted_data source=\"tool_result:openphone.messages.send\">"));

    // The reply streamed as deltas, then the final message.
    let streamed = messages_of(&mut events, &id, true).await;
    let (last, deltas) = streamed.split_last().unwrap();
    assert_eq!(last.0, "runtime.message.final");
    assert_eq!(last.1["text"], "Done: Alice knows you're 10 minutes late.");
    let text: String = deltas
        .iter()
        .map(|(_, p)| p["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        text,
        "I'll text Alice that you're 10 minutes late.\n\nDone: Alice knows you're 10 minutes late."
    );

    // The transcript holds every message, the result digests and the outcome.
    let transcript = agent.transcript(&id);
    let stored: Vec<&str> = transcript.iter().map(|e| e.role.as_str()).collect();
    assert_eq!(
        stored,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "status"
        ]
    );
    let sent = &transcript[4].body;
    assert_eq!(sent["tool"], "openphone.messages.send");
    assert_eq!(sent["status"], "ok");
    assert_eq!(sent["confirmation_id"], confirmation.as_str());
    assert_eq!(sent["request_id"], format!("builtin-{id}-2"));
    assert!(
        sent["result_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(transcript[6].body["outcome"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_action_is_reported_and_the_turn_ends_cleanly() {
    let agent = Agent::start().await;
    agent.fake.push(Script::tool_call(
        "messages_send",
        json!({"to": "+49 151 2345 6789", "body": "running late", "reason": "tell Alice"}),
    ));
    agent
        .fake
        .push(Script::text("Understood, I did not send anything."));
    let id = agent.ask("tell Alice I'm late").phone_session_id;
    let confirmation = agent.pending_confirmation(&id).await;
    agent.decide(&confirmation, ConfirmDecision::Deny).await;
    let session = agent.finished(&id).await;
    assert_eq!(session.status, SessionStatus::Completed);
    assert!(agent.sms_to(ALICE).is_empty());
    assert!(
        !agent
            .actions()
            .contains(&"openphone.messages.send".to_owned())
    );
    let second = sent_messages(&agent.fake, 1);
    let told = second.last().unwrap()["content"].as_str().unwrap();
    assert!(
        told.starts_with("The user declined messages_send on the phone: it was NOT done."),
        "{told}"
    );
    assert!(told.contains("user_denied_confirmation"));
    assert_eq!(agent.transcript(&id)[2].body["status"], "denied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_tool_calls_in_one_turn_run_in_order() {
    let agent = Agent::start().await;
    agent.fake.push(Script::tool_calls(vec![
        (
            "contacts_search",
            json!({"query": "Bob", "reason": "find Bob"}),
        ),
        (
            "messages_search",
            json!({"query": "Dinner", "reason": "find the dinner plan"}),
        ),
    ]));
    agent
        .fake
        .push(Script::text("Bob asked about dinner at 19:30."));
    let id = agent.ask("what did Bob ask me?").phone_session_id;
    assert_eq!(agent.finished(&id).await.status, SessionStatus::Completed);
    let second = sent_messages(&agent.fake, 1);
    assert_eq!(
        roles(&second),
        ["system", "user", "assistant", "tool", "tool"]
    );
    let calls = second[2]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    for (call, answer) in calls.iter().zip(&second[3..]) {
        assert_eq!(answer["tool_call_id"], call["id"]);
    }
    assert!(
        second[3]["content"]
            .as_str()
            .unwrap()
            .contains("Bob Nguyen")
    );
    assert!(second[4]["content"].as_str().unwrap().contains("19:30"));
    let ids: Vec<Value> = agent.transcript(&id)[2..4]
        .iter()
        .map(|e| e.body["request_id"].clone())
        .collect();
    assert_eq!(
        ids,
        [
            json!(format!("builtin-{id}-1")),
            json!(format!("builtin-{id}-2"))
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_the_model_gets_wrong_go_back_to_it() {
    let agent = Agent::start().await;
    // Not JSON at all, then JSON the schema refuses, then right.
    agent.fake.push(Script::Reply {
        content: None,
        tool_calls: vec![("contacts_search".into(), "{\"query\": \"Alice\"".into())],
        stream_mode: StreamMode::Auto,
        chunk: 3,
    });
    agent.fake.push(Script::tool_call(
        "contacts_search",
        json!({"query": 42, "reason": "find Alice"}),
    ));
    agent.fake.push(Script::tool_call(
        "not_a_tool",
        json!({"reason": "guessing"}),
    ));
    agent.fake.push(Script::tool_call(
        "contacts_search",
        json!({"query": "Alice", "reason": "find Alice"}),
    ));
    agent
        .fake
        .push(Script::text("Alice Martin: +49 151 2345 6789"));
    let id = agent.ask("what is Alice's number?").phone_session_id;
    assert_eq!(agent.finished(&id).await.status, SessionStatus::Completed);
    let answer = |n: usize| {
        sent_messages(&agent.fake, n).last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(
        answer(1).starts_with("Error invalid_arguments: the arguments are not valid JSON"),
        "{}",
        answer(1)
    );
    assert!(
        answer(2).starts_with("contacts_search failed."),
        "{}",
        answer(2)
    );
    assert!(answer(2).contains("invalid_params"), "{}", answer(2));
    assert!(answer(3).starts_with("Error unknown_tool"), "{}", answer(3));
    assert!(
        answer(4).starts_with("contacts_search ran."),
        "{}",
        answer(4)
    );
    assert!(answer(4).contains("Alice Martin"));
}

/// A screenshot reaches a multimodal model as an image part after the tool results, labelled
/// as data; without `vision` its bytes never reach the model at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_screenshot_is_an_image_for_a_vision_model_and_absent_otherwise() {
    for vision in [true, false] {
        let agent = Agent::with(
            openphone_device::SimState::default_scenario().unwrap(),
            openphone_agent::BuiltinConfig { vision, ..limits() },
        )
        .await;
        agent.fake.push(Script::tool_call(
            "get_screen",
            json!({"include_screenshot": true, "reason": "look at the screen"}),
        ));
        agent.fake.push(Script::text("The home screen."));
        let id = agent.ask("what is on my screen?").phone_session_id;
        assert_eq!(agent.finished(&id).await.status, SessionStatus::Completed);
        let second = sent_messages(&agent.fake, 1);
        let body = serde_json::to_string(&second).unwrap();
        let images: Vec<&Value> = second
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|part| part["type"] == "image_url")
            .collect();
        if vision {
            assert_eq!(
                roles(&second),
                ["system", "user", "assistant", "tool", "user"]
            );
            assert_eq!(images.len(), 1, "{body}");
            let url = images[0]["image_url"]["url"].as_str().unwrap();
            assert!(
                url.starts_with("data:image/"),
                "{}",
                &url[..40.min(url.len())]
            );
            let label = second[4]["content"][0]["text"].as_str().unwrap();
            assert!(label.contains("<untrusted_data"), "{label}");
        } else {
            assert_eq!(roles(&second), ["system", "user", "assistant", "tool"]);
            assert!(images.is_empty());
            assert!(
                !body.contains("data:image/"),
                "no image bytes without vision"
            );
            let tool = second[3]["content"].as_str().unwrap();
            assert!(tool.contains("base64 characters left out"), "{tool}");
        }
    }
}
