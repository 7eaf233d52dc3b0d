//! The adapter against a fake gateway on loopback written here (protocol shapes only; the
//! real gateway is the opt-in peer suite), with the real bridge, store, manager and simulated
//! phone.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use futures_util::{SinkExt, StreamExt};
use openphone_clock::ManualClock;
use openphone_core::{
    BridgeConfig, EventBus, RuntimeEntry, RuntimeKind, RuntimeManager, RuntimesConfig, ToolBridge,
};
use openphone_device::{SimPhone, SimState};
use openphone_openclaw::{AdapterSetup, OpenclawAdapter, OpenclawConfig, Status};
use openphone_policy::ToolPolicy;
use openphone_protocol::Registry;
use openphone_store::Store;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

const TOKEN: &str = "fake-gateway-token";

/// What the fake gateway does with a connect.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Accept { tick_ms: u64 },
    WrongToken,
}

/// What the test sees: every request the node sent (method, params), and a way to push
/// events to the node.
struct Gateway {
    url: String,
    requests: mpsc::UnboundedReceiver<(String, Value)>,
    push: mpsc::UnboundedSender<Value>,
    connects: Arc<std::sync::atomic::AtomicUsize>,
}

async fn fake_gateway(mode: Mode) -> Gateway {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let (req_tx, requests) = mpsc::unbounded_channel();
    let (push, push_rx) = mpsc::unbounded_channel::<Value>();
    let push_rx = Arc::new(tokio::sync::Mutex::new(push_rx));
    let connects = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = connects.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let req_tx = req_tx.clone();
            let push_rx = push_rx.clone();
            tokio::spawn(async move {
                let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
                let nonce = "nonce-1";
                let ts = 1_795_317_836_985u64;
                ws.send(Message::text(json!({"type":"event","event":"connect.challenge","payload":{"nonce":nonce,"ts":ts}}).to_string())).await.unwrap();
                let Some(Ok(Message::Text(text))) = ws.next().await else {
                    return;
                };
                let connect: Value = serde_json::from_str(text.as_str()).unwrap();
                let p = &connect["params"];
                // The device proof must verify over the v3 payload.
                let device = &p["device"];
                let key_bytes: [u8; 32] = URL_SAFE_NO_PAD
                    .decode(device["publicKey"].as_str().unwrap())
                    .unwrap()
                    .try_into()
                    .unwrap();
                let key = VerifyingKey::from_bytes(&key_bytes).unwrap();
                let payload = format!(
                    "v3|{}|{}|{}|{}||{}|{}|{}|android|android",
                    device["id"].as_str().unwrap(),
                    p["client"]["id"].as_str().unwrap(),
                    p["client"]["mode"].as_str().unwrap(),
                    p["role"].as_str().unwrap(),
                    device["signedAt"],
                    p["auth"]["token"].as_str().unwrap_or_default(),
                    device["nonce"].as_str().unwrap(),
                );
                let sig: [u8; 64] = URL_SAFE_NO_PAD
                    .decode(device["signature"].as_str().unwrap())
                    .unwrap()
                    .try_into()
                    .unwrap();
                key.verify(payload.as_bytes(), &Signature::from_bytes(&sig))
                    .expect("the v3 signature verifies");
                assert_eq!(device["nonce"], nonce);
                assert_eq!(device["signedAt"], ts);
                let _ = req_tx.send(("connect".to_owned(), p.clone()));
                let tick_ms = match mode {
                    Mode::WrongToken => {
                        ws.send(Message::text(json!({"type":"res","id":"connect","ok":false,"error":{"code":"INVALID_REQUEST","message":"unauthorized: gateway token mismatch","details":{"code":"AUTH_TOKEN_MISMATCH","authReason":"token_mismatch","recommendedNextStep":"retry_with_device_token"}}}).to_string())).await.unwrap();
                        let _ = ws.close(None).await;
                        return;
                    }
                    Mode::Accept { tick_ms } => tick_ms,
                };
                assert_eq!(p["auth"]["token"], TOKEN);
                ws.send(Message::text(json!({"type":"res","id":"connect","ok":true,"payload":{"type":"hello-ok","protocol":4,
                    "server":{"version":"fake","connId":"c1"},"features":{"methods":[],"events":[]},
                    "auth":{"method":"token","role":"node","scopes":[],"deviceToken":"dev-token-1","issuedAtMs":1},
                    "policy":{"tickIntervalMs":tick_ms,"maxPayload":26214400}}}).to_string())).await.unwrap();
                let mut push_rx = push_rx.lock().await;
                loop {
                    tokio::select! {
                        frame = ws.next() => {
                            let Some(Ok(Message::Text(text))) = frame else { return };
                            let req: Value = serde_json::from_str(text.as_str()).unwrap();
                            let method = req["method"].as_str().unwrap_or_default().to_owned();
                            let answer = match method.as_str() {
                                "node.pluginTools.update" => json!({"tools": req["params"]["tools"]}),
                                _ => json!({"ok": true}),
                            };
                            let _ = req_tx.send((method, req["params"].clone()));
                            ws.send(Message::text(json!({"type":"res","id":req["id"],"ok":true,"payload":answer}).to_string())).await.unwrap();
                        }
                        Some(event) = push_rx.recv() => {
                            ws.send(Message::text(event.to_string())).await.unwrap();
                        }
                    }
                }
            });
        }
    });
    Gateway {
        url,
        requests,
        push,
        connects,
    }
}

struct Core {
    _dir: tempfile::TempDir,
    bridge: Arc<ToolBridge>,
    adapter: OpenclawAdapter,
}

fn core(url: &str, token: &str) -> Core {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::embedded().unwrap();
    let state = SimState::default_scenario().unwrap();
    let clock = ManualClock::new(state.clock.start_ms);
    let phone = Arc::new(SimPhone::new(state, Arc::new(clock.clone())).unwrap());
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let events = Arc::new(EventBus::new(registry, 1024));
    let bridge = Arc::new(ToolBridge::new(
        registry,
        store.clone(),
        phone,
        Arc::new(clock.clone()),
        events.clone(),
        BridgeConfig::default(),
    ));
    let manager = Arc::new(
        RuntimeManager::new(
            store,
            events,
            Arc::new(clock),
            RuntimesConfig {
                runtimes: vec![RuntimeEntry {
                    id: "openclaw".into(),
                    kind: RuntimeKind::Openclaw,
                    enabled: true,
                }],
                routing: Default::default(),
            },
        )
        .unwrap(),
    );
    let mut config = OpenclawConfig::new(url);
    config.token = Some(token.to_owned());
    config.grants = Some(vec![
        "safe_read".into(),
        "private_read".into(),
        "dangerous".into(),
    ]);
    config.backoff_initial_ms = 50;
    config.backoff_max_ms = 200;
    let adapter = OpenclawAdapter::new(AdapterSetup {
        config,
        data_dir: dir.path().to_owned(),
        bridge: bridge.clone(),
        manager,
        registry,
        tool_policy: ToolPolicy::default(),
        version: "0.0.0-test".into(),
    })
    .unwrap();
    Core {
        _dir: dir,
        bridge,
        adapter,
    }
}

async fn next_request(gw: &mut Gateway, method: &str) -> Value {
    loop {
        let (m, params) = tokio::time::timeout(Duration::from_secs(20), gw.requests.recv())
            .await
            .expect("a request in time")
            .expect("gateway alive");
        if m == method {
            return params;
        }
    }
}

fn invoke(
    gw: &Gateway,
    node: &str,
    id: &str,
    command: &str,
    params: Value,
    key: &str,
    timeout_ms: u64,
) {
    gw.push
        .send(
            json!({"type":"event","event":"node.invoke.request","payload":{
            "id": id, "nodeId": node, "command": command, "paramsJSON": params.to_string(),
            "timeoutMs": timeout_ms, "idempotencyKey": key, "sessionKey": "agent:main:main"}}),
        )
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_handshake_reaches_ready_publishes_tools_and_stores_the_device_token() {
    let mut gw = fake_gateway(Mode::Accept { tick_ms: 30_000 }).await;
    let core = core(&gw.url, TOKEN);
    core.adapter.start();
    let connect = next_request(&mut gw, "connect").await;
    assert_eq!(connect["client"]["id"], "openclaw-android");
    assert_eq!(connect["role"], "node");
    assert!(
        connect["commands"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "openphone.request.status")
    );
    let tools = next_request(&mut gw, "node.pluginTools.update").await;
    assert_eq!(
        tools["tools"].as_array().unwrap().len(),
        core.adapter.surface().tools().len()
    );
    let status = core
        .adapter
        .wait_for(Duration::from_secs(10), Status::is_ready)
        .await;
    assert_eq!(status, Status::Ready);
    assert_eq!(core.adapter.last_auth_method().as_deref(), Some("token"));
    let stored = std::fs::read_to_string(core._dir.path().join("openclaw-tokens.json")).unwrap();
    assert!(stored.contains("dev-token-1"));
    core.adapter.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invokes_run_through_the_bridge_unknown_commands_get_unsupported_command_and_keys_replay() {
    let mut gw = fake_gateway(Mode::Accept { tick_ms: 30_000 }).await;
    let core = core(&gw.url, TOKEN);
    core.adapter.start();
    core.adapter
        .wait_for(Duration::from_secs(10), Status::is_ready)
        .await;
    let node = core.adapter.device_id();

    invoke(
        &gw,
        &node,
        "inv-1",
        "openphone.nope",
        json!({}),
        "k0",
        30_000,
    );
    let result = next_request(&mut gw, "node.invoke.result").await;
    assert_eq!(result["ok"], false);
    assert_eq!(result["error"]["code"], "UNSUPPORTED_COMMAND");

    let params = json!({"query": "mail"});
    invoke(
        &gw,
        &node,
        "inv-2",
        "openphone.apps.search",
        params,
        "k1",
        30_000,
    );
    let read = next_request(&mut gw, "node.invoke.result").await;
    assert_eq!(read["ok"], true, "{read}");
    assert!(read.get("error").is_none());

    // A mutating call: confirmed once, and its replay (same key) answers the recorded result
    // without asking again.
    let params = json!({"text": "once", "reason": "test"});
    invoke(
        &gw,
        &node,
        "inv-3",
        "openphone.clipboard.set",
        params.clone(),
        "k2",
        30_000,
    );
    let pending = loop {
        let list = core
            .bridge
            .store()
            .list_confirmations(&openphone_store::ConfirmationFilter::default())
            .unwrap();
        if let Some(c) = list.first() {
            break c.confirmation_id.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    approve_as_user(&core.bridge, &pending).await;
    let first = next_request(&mut gw, "node.invoke.result").await;
    assert_eq!(first["ok"], true, "{first}");
    invoke(
        &gw,
        &node,
        "inv-4",
        "openphone.clipboard.set",
        params,
        "k2",
        30_000,
    );
    let again = next_request(&mut gw, "node.invoke.result").await;
    let payload: Value = serde_json::from_str(again["payloadJSON"].as_str().unwrap()).unwrap();
    let confirmations = core
        .bridge
        .store()
        .list_confirmations(&openphone_store::ConfirmationFilter::default())
        .unwrap();
    assert_eq!(confirmations.len(), 1, "no second confirmation");
    assert_eq!(payload["replayed"], true, "{payload}");
    core.adapter.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_past_the_deadline_defers_then_posts_the_outcome_and_a_duplicate_attaches() {
    let mut gw = fake_gateway(Mode::Accept { tick_ms: 30_000 }).await;
    let core = core(&gw.url, TOKEN);
    core.adapter.start();
    core.adapter
        .wait_for(Duration::from_secs(10), Status::is_ready)
        .await;
    let node = core.adapter.device_id();
    let params = json!({"text": "hi", "reason": "test"});
    // 2 500 ms → held for 1 000 ms, then the pending receipt.
    invoke(
        &gw,
        &node,
        "inv-d1",
        "openphone.clipboard.set",
        params.clone(),
        "call_1",
        2_500,
    );
    let receipt = next_request(&mut gw, "node.invoke.result").await;
    assert_eq!(receipt["ok"], true);
    let receipt: Value = serde_json::from_str(receipt["payloadJSON"].as_str().unwrap()).unwrap();
    assert_eq!(receipt["status"], "pending_confirmation");
    let request_id = receipt["requestId"].as_str().unwrap().to_owned();
    // The model's retry (a new tool-call id) attaches instead of asking twice.
    invoke(
        &gw,
        &node,
        "inv-d2",
        "openphone.clipboard.set",
        params,
        "call_2",
        2_500,
    );
    let dup = next_request(&mut gw, "node.invoke.result").await;
    let dup: Value = serde_json::from_str(dup["payloadJSON"].as_str().unwrap()).unwrap();
    assert_eq!(dup["requestId"], request_id.as_str());
    assert_eq!(core.adapter.deferred_pending(), 1);
    // The user approves later: the outcome is posted into the session as a new turn.
    approve_as_user(&core.bridge, &request_id).await;
    let posted = loop {
        let event = next_request(&mut gw, "node.event").await;
        if event["event"] == "agent.request" {
            break event;
        }
    };
    let payload: Value = serde_json::from_str(posted["payloadJSON"].as_str().unwrap()).unwrap();
    assert_eq!(payload["sessionKey"], "agent:main:main");
    let message = payload["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "[OpenPhone] Outcome of phone request {request_id}"
        )),
        "{message}"
    );
    assert!(message.contains("\"status\":\"done\""), "{message}");
    core.adapter.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_ends_in_auth_failed_with_the_reason_and_no_retry_storm() {
    let gw = fake_gateway(Mode::WrongToken).await;
    let core = core(&gw.url, "not-the-token");
    core.adapter.start();
    let status = core
        .adapter
        .wait_for(Duration::from_secs(10), |s| {
            matches!(s, Status::AuthFailed { .. })
        })
        .await;
    assert_eq!(
        status.line(),
        "auth_failed: AUTH_TOKEN_MISMATCH: token_mismatch"
    );
    // Backoff is 50–200 ms here: a retrying adapter would have connected many times.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(gw.connects.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(core.adapter.attempts(), 1);
    core.adapter.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_closes_a_silent_connection_and_reconnects() {
    let mut gw = fake_gateway(Mode::Accept { tick_ms: 200 }).await;
    let core = core(&gw.url, TOKEN);
    core.adapter.start();
    next_request(&mut gw, "connect").await;
    // No tick ever comes: after 2 × 200 ms the adapter closes and connects again.
    next_request(&mut gw, "connect").await;
    assert!(gw.connects.load(std::sync::atomic::Ordering::SeqCst) >= 2);
    core.adapter.shutdown().await;
}

/// Regression (found against the real gateway): an agent acting later in the conversation of
/// an `observe_only` phone session whose turn had completed got a confirmation prompt instead
/// of a denial, because only active sessions lent their autonomy. The invoke now carries the
/// session's autonomy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_a_completed_observe_only_session_still_denies_mutating_invokes() {
    let mut gw = fake_gateway(Mode::Accept { tick_ms: 30_000 }).await;
    let core = core(&gw.url, TOKEN);
    core.adapter.start();
    core.adapter
        .wait_for(Duration::from_secs(10), Status::is_ready)
        .await;
    let store = core.bridge.store();
    store
        .create_session(
            &openphone_store::NewPhoneSession {
                phone_session_id: "phone-sess-obs".into(),
                runtime_kind: "openclaw".into(),
                runtime_session_id: "phone-sess-obs".into(),
                attention_id: "attn-1".into(),
                source: "chat".into(),
                autonomy: openphone_store::Autonomy::ObserveOnly,
                summary: "observe".into(),
            },
            1,
        )
        .unwrap();
    store
        .update_session_status(
            "phone-sess-obs",
            openphone_store::SessionStatus::Completed,
            None,
            2,
        )
        .unwrap();
    gw.push
        .send(
            json!({"type":"event","event":"node.invoke.request","payload":{
            "id": "inv-o", "nodeId": core.adapter.device_id(), "command": "openphone.clipboard.set",
            "paramsJSON": json!({"text": "x", "reason": "t"}).to_string(), "timeoutMs": 30_000,
            "idempotencyKey": "call_o", "sessionKey": "agent:main:openphone-phone-sess-obs"}}),
        )
        .unwrap();
    let result = next_request(&mut gw, "node.invoke.result").await;
    assert_eq!(result["ok"], false, "{result}");
    assert_eq!(result["error"]["code"], "PHONE_POLICY_DENIED", "{result}");
    let pending = store
        .list_confirmations(&openphone_store::ConfirmationFilter::default())
        .unwrap();
    assert!(pending.is_empty(), "no confirmation is asked");
    core.adapter.shutdown().await;
}

/// The user approves confirmation `id`, as `openphone confirmations approve` does.
async fn approve_as_user(bridge: &openphone_core::ToolBridge, id: &str) {
    let operator = openphone_core::Operator::from_caller(&openphone_policy::Caller::operator(
        "cli",
        openphone_policy::Transport::Cli,
        "user",
    ))
    .unwrap();
    bridge
        .resolve(&operator, id, openphone_core::ConfirmDecision::Approve)
        .await
        .unwrap();
}
