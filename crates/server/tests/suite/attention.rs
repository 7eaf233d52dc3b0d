//! The attention flow over the endpoint: an operator asks, the routed runtime receives the
//! request, uses a tool, replies; a disconnect fails its active sessions.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{Client, RUNTIME_TOKEN, config, connect, error_code, start};

/// The next event with this name (others are skipped).
async fn event_named(c: &mut Client, name: &str) -> Value {
    loop {
        let e = c.next_event().await;
        if e["params"]["event"] == name {
            return e["params"]["payload"].clone();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_reaches_the_routed_runtime_and_its_reply_reaches_the_operator() {
    let d = start(config("\n[routing]\nchat = \"hermes\"\n")).await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    // Before the runtime connects: runtime_not_connected, and no session.
    let r = op
        .call(
            "attention.request",
            json!({"surface": "chat", "text": "hi"}),
        )
        .await;
    assert_eq!(error_code(&r).1, "runtime_not_connected");

    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let sub = rt
        .call(
            "events.subscribe",
            json!({"events": ["runtime.attention.requested"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");
    let sub = op
        .call(
            "events.subscribe",
            json!({"events": ["runtime.message.final", "runtime.session.updated"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");
    let listed = op.call("runtime.list", json!({})).await;
    let hermes = listed["result"]["runtimes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "hermes")
        .unwrap()
        .clone();
    assert_eq!(
        (hermes["status"].clone(), hermes["surfaces"].clone()),
        (json!("connected"), json!(["chat"]))
    );

    let asked = op
        .call(
            "attention.request",
            json!({"surface": "chat", "text": "What is on my screen?", "include_screen": true}),
        )
        .await;
    let accepted = asked["result"].clone();
    assert_eq!(accepted["status"], "sent", "{asked}");
    let session = accepted["phone_session_id"].as_str().unwrap().to_owned();

    let attention = event_named(&mut rt, "runtime.attention.requested").await;
    assert_eq!(attention["phone_session_id"], session);
    assert_eq!(attention["text"], "What is on my screen?");
    assert_eq!(attention["screen"]["trust"], "untrusted_data");

    // The runtime works in its session, then replies.
    let screen = rt
        .call(
            "tools.invoke",
            json!({"request_id": "s1", "tool": "openphone.screen.get", "params": {"reason": "answer"},
                   "phone_session_id": session}),
        )
        .await;
    assert_eq!(screen["result"]["status"], "ok", "{screen}");
    let reply = rt
        .call(
            "runtime.message",
            json!({"phone_session_id": session, "text": "The home screen.", "final": true}),
        )
        .await;
    assert_eq!(reply["result"]["status"], "completed", "{reply}");
    let fin = event_named(&mut op, "runtime.message.final").await;
    assert_eq!(
        (fin["phone_session_id"].clone(), fin["text"].clone()),
        (json!(session), json!("The home screen."))
    );

    // An operator cannot post runtime messages; a runtime cannot ask for attention.
    let r = op
        .call(
            "runtime.message",
            json!({"phone_session_id": session, "text": "x", "final": true}),
        )
        .await;
    assert_eq!(error_code(&r).1, "forbidden");
    let r = rt
        .call("attention.request", json!({"surface": "chat", "text": "x"}))
        .await;
    assert_eq!(error_code(&r).1, "forbidden");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_disconnect_fails_its_active_sessions() {
    let d = start(config("\n[routing]\nchat = \"hermes\"\n")).await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let asked = op
        .call("attention.request", json!({"text": "remind me later"}))
        .await;
    let session = asked["result"]["phone_session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    op.call(
        "events.subscribe",
        json!({"events": ["runtime.session.updated"]}),
    )
    .await;
    drop(rt);
    loop {
        let update = event_named(&mut op, "runtime.session.updated").await;
        if update["phone_session_id"] == session && update["status"] == "failed" {
            assert!(update["reason"].as_str().unwrap().contains("disconnected"));
            break;
        }
    }
    let got = op
        .call("sessions.get", json!({"phone_session_id": session}))
        .await;
    assert_eq!(got["result"]["session"]["status"], "failed", "{got}");
    let r = op
        .call(
            "runtime.select",
            json!({"surface": "volume", "runtime": "hermes"}),
        )
        .await;
    assert_eq!(r["result"]["runtime"], "hermes");
    let r = op
        .call(
            "runtime.select",
            json!({"surface": "elsewhere", "runtime": "hermes"}),
        )
        .await;
    assert_eq!(error_code(&r).0, -32602);
}
