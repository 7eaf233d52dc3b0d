//! The endpoint end to end over a real socket: hello, tools, confirmations, events, refusals.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{RUNTIME_TOKEN, config, connect, error_code, start};

fn tap(request_id: &str, key: &str, wait: bool) -> Value {
    json!({
        "request_id": request_id,
        "tool": "openphone.ui.tap",
        "params": {"x": 10, "y": 20, "reason": "open the app"},
        "idempotency_key": key,
        "wait": wait,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_hello_lists_and_invokes_and_operator_approves() {
    let d = start(config("")).await;
    let health: Value = {
        let addr = d.daemon.addr();
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.unwrap();
        serde_json::from_str(buf.split("\r\n\r\n").nth(1).unwrap()).unwrap()
    };
    assert_eq!(health, json!({"ok": true}));

    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    let hello = rt.hello().await;
    assert_eq!(hello["role"], "runtime");
    assert_eq!(hello["runtime"], "hermes");
    assert_eq!(hello["protocol_version"], 1);
    assert_eq!(hello["phone"]["platform"], "simulated");
    assert!(hello["manifests"]["commands"].as_array().unwrap().len() > 10);

    let tools = rt.call("tools.list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"openphone.screen.get"), "{names:?}");
    assert!(names.contains(&"openphone.ui.tap"));

    let sub = rt
        .call(
            "events.subscribe",
            json!({"events": ["runtime.confirmation.required"]}),
        )
        .await;
    assert_eq!(
        sub["result"]["subscribed"],
        json!(["runtime.confirmation.required"])
    );

    let screen = rt
        .call(
            "tools.invoke",
            json!({"request_id": "r1", "tool": "openphone.screen.get", "params": {}, "reason": "look"}),
        )
        .await;
    assert_eq!(screen["result"]["status"], "ok", "{screen}");

    // The tap parks; the runtime keeps waiting while the operator approves on another connection.
    let tap_id = rt.request("tools.invoke", tap("r2", "k2", true)).await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    let hello = op.hello().await;
    assert_eq!(hello["role"], "operator");
    let pending = loop {
        let list = op.call("confirmations.list", json!({})).await;
        let list = list["result"]["confirmations"].as_array().unwrap().clone();
        if let Some(first) = list.first() {
            break first.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(pending["tool"], "openphone.ui.tap");
    assert_eq!(pending["runtime"], "hermes");
    let cid = pending["confirmation_id"].as_str().unwrap().to_owned();

    // A runtime can never resolve it.
    let refused = rt
        .call(
            "confirmations.resolve",
            json!({"confirmation_id": cid, "decision": "approve"}),
        )
        .await;
    assert_eq!(error_code(&refused), (-32000, "forbidden".into()));

    let approved = op
        .call(
            "confirmations.resolve",
            json!({"confirmation_id": cid, "decision": "approve"}),
        )
        .await;
    assert_eq!(approved["result"]["status"], "ok", "{approved}");
    let again = op
        .call(
            "confirmations.resolve",
            json!({"confirmation_id": cid, "decision": "deny"}),
        )
        .await;
    assert_eq!(error_code(&again).1, "pending_confirmation_not_found");

    let tapped = rt.response(tap_id).await;
    assert_eq!(tapped["result"]["status"], "ok", "{tapped}");
    assert_eq!(tapped["result"]["request_id"], "r2");
    let event = rt.events.pop_front().expect("confirmation event");
    assert_eq!(event["params"]["event"], "runtime.confirmation.required");
    assert_eq!(event["params"]["seq"], 1);

    // wait:false answers needs_confirmation at once; the final result follows as an event.
    let quick = rt.call("tools.invoke", tap("r3", "k3", false)).await;
    assert_eq!(quick["result"]["status"], "needs_confirmation", "{quick}");
    let cid = quick["result"]["result"]["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let denied = op
        .call(
            "confirmations.resolve",
            json!({"confirmation_id": cid, "decision": "deny"}),
        )
        .await;
    assert_eq!(denied["result"]["status"], "denied");
    let result_event = loop {
        let m = rt.next_event().await;
        if m["params"]["event"] == "runtime.tool.result" {
            break m;
        }
    };
    assert_eq!(result_event["params"]["payload"]["request_id"], "r3");
    assert_eq!(result_event["params"]["payload"]["status"], "denied");

    let audit = op.call("audit.query", json!({"limit": 5})).await;
    assert!(!audit["result"]["records"].as_array().unwrap().is_empty());
    let forbidden = rt.call("audit.query", json!({})).await;
    assert_eq!(error_code(&forbidden).1, "forbidden");
    let sessions = rt.call("sessions.list", json!({})).await;
    assert!(sessions["result"]["sessions"].is_array(), "{sessions}");
    d.daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_keep_or_close_the_connection_as_specified() {
    let d = start(config(
        "[limits]\nmax_frame_bytes = 4096\nrate_per_sec = 1.0\nrate_burst = 10.0\n",
    ))
    .await;

    // Wrong bearer token: 401 on the upgrade.
    assert_eq!(
        connect(&d.url(), Some("wrong-token-wrong-token"))
            .await
            .err(),
        Some(401)
    );

    // No token: anything but a hello with a good token is refused and the connection closed.
    let mut anon = connect(&d.url(), None).await.unwrap();
    let r = anon.call("tools.list", json!({})).await;
    assert_eq!(error_code(&r), (-32000, "unauthorized".into()));
    assert_eq!(anon.close_code().await, Some(1008));
    let mut anon = connect(&d.url(), None).await.unwrap();
    let r = anon
        .call("hello", json!({"protocol": {"min": 1, "max": 1}, "client": {"name": "x", "version": "0"}, "token": "nope-nope-nope-nope"}))
        .await;
    assert_eq!(error_code(&r).1, "unauthorized");
    // A hello with a good token in the body works (clients that cannot set headers).
    let mut by_body = connect(&d.url(), None).await.unwrap();
    let r = by_body
        .call("hello", json!({"protocol": {"min": 1, "max": 1}, "client": {"name": "x", "version": "0"}, "token": RUNTIME_TOKEN}))
        .await;
    assert_eq!(r["result"]["runtime"], "hermes");

    // Version without overlap: unsupported_version and close.
    let mut old = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    let r = old
        .call(
            "hello",
            json!({"protocol": {"min": 2, "max": 3}, "client": {"name": "x", "version": "0"}}),
        )
        .await;
    assert_eq!(error_code(&r).1, "unsupported_version");
    assert!(old.close_code().await.is_some());

    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    // Before hello: an error, the connection stays.
    let r = rt.call("tools.list", json!({})).await;
    assert_eq!(error_code(&r).1, "hello_required");
    rt.hello().await;
    // Malformed frame: -32700 and the connection stays open.
    rt.send_raw("{not json").await;
    let r = rt.next_json().await.unwrap();
    assert_eq!(error_code(&r).0, -32700);
    assert_eq!(r["id"], Value::Null);
    // Unknown method: -32601; operator-only methods are forbidden to a runtime.
    let r = rt.call("no.such.method", json!({})).await;
    assert_eq!(error_code(&r).0, -32601);
    for method in ["attention.request", "runtime.list"] {
        let r = rt.call(method, json!({})).await;
        assert_eq!(error_code(&r).1, "forbidden", "{method}");
    }
    // Burst over the rate limit: rate_limited with a retry-after.
    let mut limited = None;
    for _ in 0..20 {
        let r = rt.call("confirmations.list", json!({})).await;
        if error_code(&r).1 == "rate_limited" {
            limited = Some(r);
            break;
        }
    }
    let limited = limited.expect("no rate_limited within 20 requests");
    assert!(limited["error"]["data"]["retry_after_ms"].as_u64().unwrap() > 0);

    // A frame over the limit: close 1009.
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools.list\",\"params\":{{\"pad\":\"{}\"}}}}",
        "x".repeat(8192)
    );
    rt.send_raw(&big).await;
    assert_eq!(rt.close_code().await, Some(1009));
    d.daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_cap_and_operator_events() {
    let d = start(config("[limits]\nmax_in_flight = 1\n")).await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    let sub = op
        .call(
            "events.subscribe",
            json!({"events": ["runtime.confirmation.required", "runtime.confirmation.resolved"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");
    let bad = op
        .call("events.subscribe", json!({"events": ["runtime.made.up"]}))
        .await;
    assert_eq!(error_code(&bad), (-32602, "event_unsupported".into()));

    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let waiting = rt.request("tools.invoke", tap("w1", "w1", true)).await;
    // The operator sees the confirmation as an event, with seq 1.
    let event = op.next_event().await;
    assert_eq!(event["params"]["event"], "runtime.confirmation.required");
    assert_eq!(event["params"]["seq"], 1);
    // The runtime's one in-flight slot is taken by the waiting invoke.
    let refused = rt.call("tools.list", json!({})).await;
    assert_eq!(error_code(&refused).1, "rate_limited", "{refused}");
    let cid = event["params"]["payload"]["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let denied = op
        .call(
            "confirmations.resolve",
            json!({"confirmation_id": cid, "decision": "deny"}),
        )
        .await;
    assert_eq!(denied["result"]["status"], "denied", "{denied}");
    let answer = rt.response(waiting).await;
    assert_eq!(answer["result"]["status"], "denied");
    assert_eq!(
        answer["result"]["error"]["code"],
        "user_denied_confirmation"
    );
    let resolved = op.next_event().await;
    assert_eq!(resolved["params"]["event"], "runtime.confirmation.resolved");
    assert_eq!(resolved["params"]["seq"], 2);
    d.daemon.shutdown().await;
}

/// `screen.get` over the endpoint: the first call builds the screen, the next ones are answered
/// with the text the phone kept (`execute_for_text`), each with its own `captured_at`; the
/// answers are whole and alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screen_get_answers_from_the_kept_text_alike_and_whole() {
    let d = start(config("")).await;
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let mut results = Vec::new();
    for i in 0..3 {
        let before = openphone_clock::Clock::now_ms(&openphone_clock::SystemClock);
        let r = rt
            .call(
                "tools.invoke",
                json!({"request_id": format!("sg{i}"), "tool": "openphone.screen.get",
                       "params": {"reason": "look"}}),
            )
            .await;
        assert_eq!(r["result"]["status"], "ok", "{r}");
        assert_eq!(r["result"]["request_id"], format!("sg{i}"));
        let mut result = r["result"]["result"].clone();
        let at = result["captured_at"].as_i64().expect("captured_at");
        assert!(
            at >= before - 1000,
            "captured_at {at} is this call's time ({before})"
        );
        result.as_object_mut().unwrap().remove("captured_at");
        assert!(result["interactive_elements"].is_array(), "{result}");
        results.push(result);
    }
    assert_eq!(results[1], results[0]);
    assert_eq!(results[2], results[0]);
    d.daemon.shutdown().await;
}

/// The slot of an answered request was freed only after its answer was sent, so a client that
/// sent its next request as soon as the answer arrived could be refused `rate_limited` (seen
/// in CI as `in_flight_cap_and_operator_events` refusing the operator's second subscribe).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_slot_freed_before_the_answer_leaves() {
    let d = start(config(
        "[limits]\nmax_in_flight = 1\nrate_per_sec = 100000.0\nrate_burst = 100000.0\n",
    ))
    .await;
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    for i in 0..500 {
        let r = rt.call("tools.list", json!({})).await;
        assert!(r.get("result").is_some(), "call {i} of one at a time: {r}");
    }
    d.daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_a_waiting_invoke_and_closes_with_1001() {
    let d = start(config("")).await;
    let endpoint = d.dir.path().join("endpoint.json");
    assert!(endpoint.exists());
    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let waiting = rt.request("tools.invoke", tap("s1", "s1", true)).await;
    // Wait until it is parked (the confirmation exists), then stop the daemon.
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    loop {
        let list = op.call("confirmations.list", json!({})).await;
        if !list["result"]["confirmations"]
            .as_array()
            .unwrap()
            .is_empty()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let dir = d.dir;
    let stop = tokio::spawn(d.daemon.shutdown());
    let answer = rt.response(waiting).await;
    assert_eq!(answer["result"]["status"], "needs_confirmation", "{answer}");
    assert_eq!(rt.close_code().await, Some(1001));
    stop.await.unwrap();
    assert!(!dir.path().join("endpoint.json").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_see_a_runtime_come_and_go() {
    let d = start(config("")).await;
    let mut op = connect(&d.url(), Some(&d.operator_token())).await.unwrap();
    op.hello().await;
    let sub = op
        .call(
            "events.subscribe",
            json!({"events": ["runtime.presence.online", "runtime.presence.offline"]}),
        )
        .await;
    assert!(sub.get("result").is_some(), "{sub}");

    let mut rt = connect(&d.url(), Some(RUNTIME_TOKEN)).await.unwrap();
    rt.hello().await;
    let mut online = op.next_event().await;
    assert!(online["params"]["payload"]["sentAtMs"].as_i64().unwrap() > 0);
    online["params"]["payload"]["sentAtMs"] = json!(0);
    assert_eq!(
        online,
        json!({"jsonrpc": "2.0", "method": "event", "params": {
            "event": "runtime.presence.online", "seq": 1,
            "payload": {"trigger": "connect", "runtime": "hermes", "sentAtMs": 0}}})
    );

    drop(rt);
    let mut offline = op.next_event().await;
    offline["params"]["payload"]["sentAtMs"] = json!(0);
    assert_eq!(
        offline,
        json!({"jsonrpc": "2.0", "method": "event", "params": {
            "event": "runtime.presence.offline", "seq": 2,
            "payload": {"trigger": "disconnect", "runtime": "hermes", "sentAtMs": 0,
                        "runtime_manager_status": "offline"}}})
    );
    d.daemon.shutdown().await;
}
