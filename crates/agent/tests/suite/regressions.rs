//! Regression tests for the review of the built-in loop (issue 15): request ids that repeat
//! after the history trim, follow-ups dropped behind a failed run, an unbounded history,
//! confirmations left approvable after a crash, a late approval recorded as "nothing was
//! done", and the autonomy of the loop's tool requests.

use std::time::Duration;

use openphone_agent::BuiltinConfig;
use openphone_agent::transcript::{self, IMAGE_PLACEHOLDER};
use openphone_core::ConfirmDecision;
use openphone_device::SimState;
use openphone_fake_model::Script;
use openphone_model::Message;
use openphone_policy::{Caller, Context};
use openphone_protocol::ToolRequest;
use openphone_store::{Autonomy, ConfirmationState, NewPhoneSession, Resolution, SessionStatus};
use serde_json::{Value, json};

use super::support::*;

const ALICE: &str = "4915123456789";

fn send_to_alice(body: &str) -> Script {
    Script::tool_call(
        "messages_send",
        json!({"to": "+49 151 2345 6789", "body": body, "reason": "tell Alice"}),
    )
}

/// Waits until the session waits for the user or has ended.
async fn settled(agent: &Agent, id: &str) -> SessionStatus {
    agent
        .until(id, |s| {
            s.status == SessionStatus::WaitingForConfirmation || !s.status.is_active()
        })
        .await
        .status
}

/// Checks that `messages` (as sent, system prompt first) is a conversation a model accepts:
/// it opens with a user message and every tool result directly follows the assistant turn
/// that called it, each call answered.
fn assert_valid(messages: &[Message]) {
    assert!(matches!(messages.first(), Some(Message::System { .. })));
    assert!(
        matches!(messages.get(1), Some(Message::User { .. })),
        "the history starts with a user message: {:?}",
        messages.get(1)
    );
    let mut at = 1;
    while at < messages.len() {
        match &messages[at] {
            Message::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    at += 1;
                    match messages.get(at) {
                        Some(Message::Tool { tool_call_id, .. }) => {
                            assert_eq!(tool_call_id, &call.id, "message {at}")
                        }
                        other => panic!("call {} is not answered at {at}: {other:?}", call.id),
                    }
                }
            }
            Message::Tool { tool_call_id, .. } => {
                panic!("tool result {tool_call_id} at {at} follows no call")
            }
            _ => {}
        }
        at += 1;
    }
}

fn sent(agent: &Agent, n: usize) -> Vec<Message> {
    sent_messages(&agent.fake, n)
        .into_iter()
        .map(|m| serde_json::from_value(m).unwrap())
        .collect()
}

fn image_parts(messages: &[Value]) -> usize {
    messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|part| part["type"] == "image_url")
        .count()
}

/// Issue 1: the request number came from the trimmed history, so after 200 messages a new
/// call reused `builtin-<session>-1` and the bridge replayed the first send's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_after_the_history_trim_never_reuses_a_request_id() {
    let agent = Agent::start().await;
    agent.fake.push(send_to_alice("on my way"));
    agent.fake.push(Script::text("Sent."));
    let id = agent.ask("tell Alice I'm on my way").phone_session_id;
    let confirmation = agent.pending_confirmation(&id).await;
    agent.decide(&confirmation, ConfirmDecision::Approve).await;
    assert_eq!(agent.finished(&id).await.status, SessionStatus::Completed);
    assert_eq!(agent.sms_to(ALICE), ["on my way"]);

    // A long conversation afterwards: the first send falls out of the trimmed history.
    for i in 0..(transcript::MAX_HISTORY_MESSAGES / 2 + 10) {
        for (role, message) in [
            ("user", Message::user(format!("question {i}"))),
            ("assistant", Message::assistant(format!("answer {i}"))),
        ] {
            let body = transcript::body(&message, json!({}));
            agent.store.append_transcript(&id, role, &body, 1).unwrap();
        }
    }

    agent.fake.push(send_to_alice("on my way"));
    agent.fake.push(Script::text("Sent again."));
    agent.ask_in(&id, "send it again");
    assert_eq!(
        settled(&agent, &id).await,
        SessionStatus::WaitingForConfirmation,
        "the same send asks again: it is a new request, never a replay"
    );
    let second = agent.pending_confirmation(&id).await;
    assert_ne!(second, confirmation);
    agent.decide(&second, ConfirmDecision::Approve).await;
    assert_eq!(agent.finished(&id).await.status, SessionStatus::Completed);
    assert_eq!(agent.sms_to(ALICE), ["on my way", "on my way"]);
    let ids: Vec<Value> = agent
        .transcript(&id)
        .iter()
        .filter(|e| e.role == "tool")
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

/// Issue 2: a follow-up queued behind a run that failed was dropped without a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_queued_behind_a_failing_run_gets_a_final_error() {
    let limits = BuiltinConfig {
        max_turns: 1,
        ..limits()
    };
    let agent = Agent::with(SimState::default_scenario().unwrap(), limits).await;
    agent
        .fake
        .push(send_to_alice("on my way").with_content("Texting Alice."));
    agent.fake.set_fallback(Script::text("never asked"));
    let mut events = agent.events.subscribe();
    let first = agent.ask("tell Alice I'm on my way");
    let id = first.phone_session_id.clone();
    let confirmation = agent.pending_confirmation(&id).await;
    let follow_up = agent.ask_in(&id, "and tell Bob too");
    assert_eq!(follow_up.phone_session_id, id);
    agent.decide(&confirmation, ConfirmDecision::Deny).await;

    // The first run fails (its one turn was used); the follow-up is told it did not run.
    let mut finals = Vec::new();
    let mut deltas = Vec::new();
    while finals.len() < 2 {
        for (name, payload) in messages_of(&mut events, &id, true).await {
            if name == "runtime.message.final" {
                finals.push(payload);
            } else {
                deltas.push(payload);
            }
        }
    }
    assert_eq!(finals[0]["error"], "max_turns_exceeded");
    assert_eq!(finals[0]["attention_id"], first.attention_id.as_str());
    assert_eq!(finals[1]["error"], "session_ended");
    assert_eq!(finals[1]["attention_id"], follow_up.attention_id.as_str());
    assert!(
        finals[1]["text"].as_str().unwrap().contains("was not run"),
        "{}",
        finals[1]
    );
    assert!(!deltas.is_empty());
    for delta in &deltas {
        assert_eq!(delta["attention_id"], first.attention_id.as_str());
    }
    let session = agent.finished(&id).await;
    assert_eq!(
        session.failure_reason.as_deref(),
        Some("max_turns_exceeded")
    );
    assert_eq!(agent.fake.requests().len(), 1, "the follow-up never ran");
    // The user's words are kept, marked as not run.
    let transcript = agent.transcript(&id);
    let kept = transcript
        .iter()
        .find(|e| e.body["attention_id"] == follow_up.attention_id.as_str())
        .expect("the follow-up is in the transcript");
    assert_eq!(kept.body["not_run"], true);
    assert_eq!(kept.body["message"]["content"], "and tell Bob too");
    let last = transcript.last().unwrap();
    assert_eq!(last.body["outcome"], "gone");
    assert_eq!(last.body["reason"], "session_ended");
}

/// Issue 3: every turn re-sent up to 200 messages of any size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_history_is_sent_within_its_budget_and_stays_valid() {
    const BUDGET: usize = 5_000;
    let limits = BuiltinConfig {
        max_history_chars: BUDGET as u32,
        ..limits()
    };
    let agent = Agent::with(SimState::default_scenario().unwrap(), limits).await;
    agent.fake.push(Script::text("Hello."));
    let id = agent.ask("hi").phone_session_id;
    agent.finished(&id).await;
    // Forty earlier exchanges, each with a 3 000-character tool result: about 130 000
    // characters in all, still about 12 000 with every result shortened.
    for i in 0..40 {
        let call = openphone_model::ToolCall {
            id: format!("call_old_{i}"),
            name: "contacts_search".into(),
            arguments: json!({"query": format!("q{i}")}).to_string(),
        };
        let messages = [
            (Message::user(format!("question {i}")), json!({})),
            (
                Message::Assistant {
                    content: None,
                    tool_calls: vec![call],
                },
                json!({}),
            ),
            (
                Message::tool(
                    format!("call_old_{i}"),
                    format!("contacts_search ran. Its result:\n{}", "x".repeat(3000)),
                ),
                json!({"tool": "openphone.contacts.search", "status": "ok",
                       "result_digest": format!("sha256:{i:064}")}),
            ),
            (Message::assistant(format!("answer {i}")), json!({})),
        ];
        for (message, meta) in messages {
            let body = transcript::body(&message, meta);
            let role = transcript::role_of(&message);
            agent.store.append_transcript(&id, role, &body, 1).unwrap();
        }
    }
    agent.fake.push(Script::text("Still here."));
    agent.ask_in(&id, "what did we talk about?");
    assert_eq!(agent.finished(&id).await.status, SessionStatus::Completed);

    let request = sent(&agent, 1);
    assert_valid(&request);
    let history: usize = request[1..].iter().map(transcript::chars).sum();
    assert!(history <= BUDGET, "{history} characters sent");
    assert_eq!(
        request.last().unwrap(),
        &Message::user("what did we talk about?")
    );
    // The newest exchanges are kept, their results shortened to one line first.
    let text = serde_json::to_string(&request).unwrap();
    assert!(text.contains("answer 39"), "the latest exchange is kept");
    assert!(
        text.contains("left out to save space: tool openphone.contacts.search, status ok"),
        "results are shortened to a headline"
    );
    assert!(
        !text.contains("question 0\""),
        "the oldest exchanges are left out"
    );
}

/// Issue 3: a screenshot stayed in the messages and was re-sent on every later turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_screenshot_is_not_sent_again_on_the_following_turn() {
    let agent = Agent::with(
        SimState::default_scenario().unwrap(),
        BuiltinConfig {
            vision: true,
            ..limits()
        },
    )
    .await;
    agent.fake.push(Script::tool_call(
        "get_screen",
        json!({"include_screenshot": true, "reason": "look at the screen"}),
    ));
    agent.fake.push(Script::tool_call(
        "contacts_search",
        json!({"query": "Alice", "reason": "find Alice"}),
    ));
    agent.fake.push(Script::text("Done."));
    let id = agent
        .ask("what is on my screen, and who is Alice?")
        .phone_session_id;
    assert_eq!(agent.finished(&id).await.status, SessionStatus::Completed);
    assert_eq!(image_parts(&sent_messages(&agent.fake, 1)), 1);
    let third = sent_messages(&agent.fake, 2);
    assert_eq!(image_parts(&third), 0, "the screenshot is sent once");
    let body = serde_json::to_string(&third).unwrap();
    assert!(body.contains(IMAGE_PLACEHOLDER), "a placeholder stays");
    assert!(!body.contains("data:image/"));
}

/// Issue 4: after a crash, the pending confirmations of interrupted runs stayed approvable
/// with no loop behind them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_withdraws_the_confirmations_of_interrupted_runs() {
    let agent = Agent::start().await;
    // What a crash mid-run leaves: an active built-in session with a pending confirmation
    // and no loop (made directly, without a run).
    let id = "phone-sess-crashed";
    agent
        .store
        .create_session(
            &NewPhoneSession {
                phone_session_id: id.into(),
                runtime_kind: "builtin".into(),
                runtime_session_id: id.into(),
                attention_id: "attn-crashed".into(),
                source: "chat".into(),
                autonomy: Autonomy::AskBeforeAction,
                summary: "tell Alice".into(),
            },
            1,
        )
        .unwrap();
    let request = ToolRequest {
        request_id: format!("builtin-{id}-1"),
        runtime: Some("builtin".into()),
        runtime_session_id: id.into(),
        phone_session_id: Some(id.into()),
        tool: "openphone.messages.send".into(),
        params: json!({"to": "+49 151 2345 6789", "body": "orphan", "reason": "tell Alice"}),
        reason: None,
        autonomy: Some("ask_before_action".into()),
        idempotency_key: None,
        timeout_ms: None,
    };
    let first = agent
        .bridge
        .invoke(&Caller::builtin("daemon"), request, Context::Interactive)
        .await;
    let confirmation = openphone_core::waiting_on(&first).expect("a confirmation");
    assert_eq!(
        settled(&agent, id).await,
        SessionStatus::WaitingForConfirmation
    );

    // The daemon dies: everything is dropped without a shutdown, then it starts again.
    let (dir, fake) = agent.crash();
    let agent = Agent::open(dir, SimState::default_scenario().unwrap(), limits(), fake).await;
    let record = agent
        .store
        .get_confirmation(&confirmation)
        .unwrap()
        .unwrap();
    assert_eq!(record.state, ConfirmationState::Denied, "withdrawn");
    assert_eq!(record.final_result.unwrap()["status"], "cancelled");
    let session = agent.session(id);
    assert_eq!(session.status, SessionStatus::Failed);
    assert_eq!(session.failure_reason.as_deref(), Some("daemon_stopped"));
    // Nothing is left to approve.
    let operator = openphone_core::Operator::from_caller(&Caller::operator(
        "cli",
        openphone_policy::Transport::Cli,
        "user",
    ))
    .unwrap();
    assert!(
        agent
            .bridge
            .resolve(&operator, &confirmation, ConfirmDecision::Approve)
            .await
            .is_err()
    );
    assert!(agent.sms_to(ALICE).is_empty());
}

/// Issue 5: when the user decided just as the run stopped, the withdrawal failed, yet the
/// transcript said "Nothing was done".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_decided_as_the_run_stops_is_never_recorded_as_not_run() {
    let agent = Agent::start().await;
    agent.fake.push(send_to_alice("on my way"));
    agent.fake.set_fallback(Script::text("never asked"));
    let id = agent.ask("tell Alice I'm on my way").phone_session_id;
    let confirmation = agent.pending_confirmation(&id).await;
    // The user's approval lands (the request is executing, its result not yet recorded) at
    // the moment the session is cancelled: the run can no longer withdraw it.
    agent
        .store
        .resolve(&confirmation, Resolution::Approve, "cli:user", 2)
        .unwrap();
    let (_, stopped) = agent.manager.cancel_session(&id).unwrap();
    assert!(stopped);
    for _ in 0..1000 {
        if agent.builtin.running() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(agent.builtin.running(), 0);
    let transcript = agent.transcript(&id);
    let answer = transcript.iter().find(|e| e.role == "tool").unwrap();
    assert_eq!(answer.body["status"], "unknown");
    let text = answer.body["message"]["content"].as_str().unwrap();
    assert!(text.contains("is unknown"), "{text}");
    assert!(!text.contains("Nothing was done"), "{text}");
}

/// Issue 6: the loop's tool requests carried no autonomy, so the effective one depended on
/// the session still being active.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_requests_carry_the_runs_autonomy() {
    let agent = Agent::start().await;
    agent.fake.push(send_to_alice("hi"));
    agent.fake.push(Script::text("Waiting."));
    let id = agent.ask("tell Alice hi").phone_session_id;
    let confirmation = agent.pending_confirmation(&id).await;
    let record = agent
        .store
        .get_confirmation(&confirmation)
        .unwrap()
        .unwrap();
    assert_eq!(
        record.request["request"]["autonomy"],
        agent.session(&id).autonomy.as_str(),
        "{}",
        record.request
    );
    agent.decide(&confirmation, ConfirmDecision::Deny).await;
    agent.finished(&id).await;
}
