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
                    p["auth"]["token"]
                        .as_str()
                        .or(p["auth"]["bootstrapToken"].as_str())
                        .unwrap_or_default(),
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
                // The shared token, or the device token it issued (after a restart).
                assert!(
                    p["auth"]["token"] == TOKEN
                        || p["auth"]["token"] == "dev-token-1"
                        || p["auth"]["bootstrapToken"] == BOOTSTRAP,
                    "{}",
                    p["auth"]
                );
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
                                // The gateway had given up on these (its own deadline passed).
                                "node.invoke.result" if req["params"]["id"].as_str().is_some_and(|id| id.starts_with("late-")) => {
                                    json!({"ok": true, "ignored": true})
                                }
                                // As 2026.9.6 answers: the baseline status request, plus one
                                // queued location request.
                                "node.pending.drain" => json!({"nodeId": "n", "revision": 1, "hasMore": false,
                                    "items": [{"id": "loc-1", "type": "location.request", "priority": "normal"},
                                              {"id": "baseline-status", "type": "status.request", "priority": "default"}]}),
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
    /// The store the bridge records into, opened as the daemon's construction opens it.
    store: Arc<Store>,
    adapter: OpenclawAdapter,
}

fn core(url: &str, token: &str) -> Core {
    core_with(url, |config| config.token = Some(token.to_owned()))
}

/// [`core`] with the `[openclaw]` table edited by `edit` (its token is `TOKEN` before).
fn core_with(url: &str, edit: impl FnOnce(&mut OpenclawConfig)) -> Core {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let (bridge, adapter) = node_with(dir.path(), Arc::clone(&store), url, edit);
    Core {
        _dir: dir,
        bridge,
        store,
        adapter,
    }
}

/// A bridge, manager and adapter over `store` (data directory `dir`), as the daemon builds them.
fn node_over(
    dir: &std::path::Path,
    store: Arc<Store>,
    url: &str,
    token: &str,
) -> (Arc<ToolBridge>, OpenclawAdapter) {
    node_with(dir, store, url, |config| {
        config.token = Some(token.to_owned())
    })
}

/// [`node_over`] with the `[openclaw]` table edited by `edit`.
fn node_with(
    dir: &std::path::Path,
    store: Arc<Store>,
    url: &str,
    edit: impl FnOnce(&mut OpenclawConfig),
) -> (Arc<ToolBridge>, OpenclawAdapter) {
    let registry = Registry::embedded().unwrap();
    let state = SimState::default_scenario().unwrap();
    let clock = ManualClock::new(state.clock.start_ms);
    let phone = Arc::new(SimPhone::new(state, Arc::new(clock.clone())).unwrap());
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
    config.token = Some(TOKEN.to_owned());
    config.grants = Some(vec![
        "safe_read".into(),
        "private_read".into(),
        "dangerous".into(),
    ]);
    config.backoff_initial_ms = 50;
    config.backoff_max_ms = 200;
    config.progress_every_ms = 1_000;
    edit(&mut config);
    let adapter = OpenclawAdapter::new(AdapterSetup {
        config,
        data_dir: dir.to_owned(),
        bridge: bridge.clone(),
        manager,
        registry,
        tool_policy: ToolPolicy::default(),
        version: "0.0.0-test".into(),
    })
    .unwrap();
    (bridge, adapter)
}

/// Opens the data directory again once the previous daemon's last task let go of it.
async fn reopen(dir: &std::path::Path) -> Arc<Store> {
    for _ in 0..200 {
        match Store::open(dir) {
            Ok(store) => return Arc::new(store),
            Err(openphone_store::StoreError::Locked { .. }) => {
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            Err(e) => panic!("reopening the store: {e}"),
        }
    }
    panic!("the previous daemon still holds the store");
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
    // The gateway's view is recorded for `openphone openclaw doctor`.
    let view: Value = serde_json::from_str(
        &std::fs::read_to_string(core._dir.path().join(openphone_openclaw::GATEWAY_VIEW_FILE))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        view["accepted_tools"].as_array().unwrap().len(),
        core.adapter.surface().tools().len()
    );
    // R3.5: the gateway's queue for this node is drained after the connect; the status
    // request is answered with presence.
    let drain = next_request(&mut gw, "node.pending.drain").await;
    assert_eq!(drain["maxItems"], 10);
    loop {
        let event = next_request(&mut gw, "node.event").await;
        let payload: Value = serde_json::from_str(event["payloadJSON"].as_str().unwrap()).unwrap();
        if event["event"] == "node.presence.alive" && payload["trigger"] == "background" {
            break;
        }
    }
    assert_eq!(
        core.adapter.last_pending_drain(),
        Some(json!({"status_requests": 1, "location_requests": 1, "other": 0}))
    );
    // R3.2: a planned close clears the published tools first.
    core.adapter.shutdown().await;
    let cleared = next_request(&mut gw, "node.pluginTools.update").await;
    assert_eq!(cleared["tools"], json!([]));
}

/// §8.4, §8.5 step 2: while an invoke is held for the user, empty progress chunks go out
/// (`seq` from 0, one per `progress_every_ms`), then the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_invoke_sends_empty_progress_chunks_before_its_answer() {
    let mut gw = fake_gateway(Mode::Accept { tick_ms: 30_000 }).await;
    let core = core(&gw.url, TOKEN);
    core.adapter.start();
    core.adapter
        .wait_for(Duration::from_secs(10), Status::is_ready)
        .await;
    // 4 500 ms → held 3 000 ms, a chunk every 1 000 ms.
    invoke(
        &gw,
        &core.adapter.device_id(),
        "inv-p1",
        "openphone.clipboard.set",
        json!({"text": "progress", "reason": "test"}),
        "call_p1",
        4_500,
    );
    for seq in 0..2 {
        let chunk = next_request(&mut gw, "node.invoke.progress").await;
        assert_eq!(chunk["invokeId"], "inv-p1");
        assert_eq!(chunk["nodeId"], core.adapter.device_id().as_str());
        assert_eq!(chunk["seq"], seq);
        assert_eq!(chunk["chunk"], "");
    }
    let receipt = next_request(&mut gw, "node.invoke.result").await;
    assert_eq!(receipt["id"], "inv-p1");
    assert_eq!(receipt["ok"], true, "{receipt}");
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
            .store
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
        .store
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
    expect_posted_outcome(&mut gw, &request_id).await;
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
    let store = &core.store;
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

/// Scans the requests received so far (without waiting) for `agent.request` events.
fn posted_so_far(gw: &mut Gateway) -> Vec<Value> {
    let mut posted = Vec::new();
    while let Ok((method, params)) = gw.requests.try_recv() {
        if method == "node.event" && params["event"] == "agent.request" {
            posted.push(params);
        }
    }
    posted
}

/// R3.3: a deferred request's outcome survives a daemon restart. The user approves after the
/// restart; the outcome is posted once, and a later start does not post it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_after_a_daemon_restart_posts_the_deferred_outcome_once() {
    let mut gw = fake_gateway(Mode::Accept { tick_ms: 30_000 }).await;
    let dir = tempfile::tempdir().unwrap();
    let (bridge, adapter) = node_over(
        dir.path(),
        Arc::new(Store::open(dir.path()).unwrap()),
        &gw.url,
        TOKEN,
    );
    adapter.start();
    adapter
        .wait_for(Duration::from_secs(10), Status::is_ready)
        .await;
    invoke(
        &gw,
        &adapter.device_id(),
        "inv-r1",
        "openphone.clipboard.set",
        json!({"text": "after restart", "reason": "test"}),
        "call_r1",
        2_500,
    );
    let receipt = next_request(&mut gw, "node.invoke.result").await;
    let receipt: Value = serde_json::from_str(receipt["payloadJSON"].as_str().unwrap()).unwrap();
    assert_eq!(receipt["status"], "pending_confirmation", "{receipt}");
    let request_id = receipt["requestId"].as_str().unwrap().to_owned();
    assert_eq!(adapter.deferred_pending(), 1);

    // The daemon stops: nothing of the deferral is left in memory.
    adapter.shutdown().await;
    drop((bridge, adapter));
    let store = reopen(dir.path()).await;
    let (bridge, adapter) = node_over(dir.path(), Arc::clone(&store), &gw.url, TOKEN);
    bridge.recover().await.unwrap();
    adapter.start();
    adapter
        .wait_for(Duration::from_secs(10), Status::is_ready)
        .await;
    assert_eq!(adapter.deferred_pending(), 1, "the outbox row survived");

    approve_as_user(&bridge, &request_id).await;
    expect_posted_outcome(&mut gw, &request_id).await;
    // Marked posted once the gateway answered.
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let row = store.get_deferred_outcome(&request_id).unwrap().unwrap();
            if row.state == openphone_store::OutcomeState::Posted {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await
    .expect("the outcome is marked posted");

    // Another restart: the outbox pass after the connect finds nothing to post.
    adapter.shutdown().await;
    drop((bridge, adapter, store));
    let store = reopen(dir.path()).await;
    let (bridge, adapter) = node_over(dir.path(), store, &gw.url, TOKEN);
    bridge.recover().await.unwrap();
    adapter.start();
    adapter
        .wait_for(Duration::from_secs(10), Status::is_ready)
        .await;
    for _ in 0..400 {
        if adapter.outbox_passes() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        adapter.outbox_passes() > 0,
        "an outbox pass ran after the connect"
    );
    assert!(posted_so_far(&mut gw).is_empty(), "posted once only");
    adapter.shutdown().await;
}

/// R3.4: an outcome with no conversation to post into (an operator's invoke, no
/// `sessionKey`) is not posted, and the audit log lists it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_that_cannot_be_posted_is_listed_in_the_audit_log() {
    let mut gw = fake_gateway(Mode::Accept { tick_ms: 30_000 }).await;
    let core = core(&gw.url, TOKEN);
    core.adapter.start();
    core.adapter
        .wait_for(Duration::from_secs(10), Status::is_ready)
        .await;
    gw.push
        .send(
            json!({"type":"event","event":"node.invoke.request","payload":{
            "id": "inv-cli", "nodeId": core.adapter.device_id(),
            "command": "openphone.clipboard.set",
            "paramsJSON": json!({"text": "cli", "reason": "t"}).to_string(),
            "timeoutMs": 2_500, "idempotencyKey": "cli-uuid-1"}}),
        )
        .unwrap();
    let receipt = next_request(&mut gw, "node.invoke.result").await;
    let receipt: Value = serde_json::from_str(receipt["payloadJSON"].as_str().unwrap()).unwrap();
    let request_id = receipt["requestId"].as_str().unwrap().to_owned();
    approve_as_user(&core.bridge, &request_id).await;
    let store = &core.store;
    // The row is marked first, then the audit record is written.
    let audited = audit_record_named(store, openphone_openclaw::outbox::NOT_POSTED)
        .await
        .expect("an audit record for the outcome not posted");
    let row = store.get_deferred_outcome(&request_id).unwrap().unwrap();
    assert_eq!(row.state, openphone_store::OutcomeState::Failed);
    assert!(row.note.contains("no conversation"), "{}", row.note);
    assert_eq!(audited.entry.request_id, request_id);
    assert!(posted_so_far(&mut gw).is_empty());
    // The status tool still has the outcome.
    gw.push
        .send(
            json!({"type":"event","event":"node.invoke.request","payload":{
            "id": "inv-status", "nodeId": core.adapter.device_id(),
            "command": "openphone.request.status",
            "paramsJSON": json!({"requestId": request_id}).to_string(),
            "timeoutMs": 30_000, "idempotencyKey": "cli-uuid-2"}}),
        )
        .unwrap();
    let status = next_request(&mut gw, "node.invoke.result").await;
    let status: Value = serde_json::from_str(status["payloadJSON"].as_str().unwrap()).unwrap();
    assert_eq!(status["status"], "done", "{status}");
    core.adapter.shutdown().await;
}

/// §8.3: a result the gateway answers `ignored:true` (it had given up) is recorded as late in
/// the audit log, never retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_the_gateway_ignored_is_audited_as_late() {
    let mut gw = fake_gateway(Mode::Accept { tick_ms: 30_000 }).await;
    let core = core(&gw.url, TOKEN);
    core.adapter.start();
    core.adapter
        .wait_for(Duration::from_secs(10), Status::is_ready)
        .await;
    invoke(
        &gw,
        &core.adapter.device_id(),
        "late-1",
        "openphone.apps.search",
        json!({"query": "mail"}),
        "call_late",
        30_000,
    );
    let result = next_request(&mut gw, "node.invoke.result").await;
    assert_eq!(result["id"], "late-1");
    let store = &core.store;
    let late = audit_record_named(store, openphone_openclaw::invoke::LATE_RESULT)
        .await
        .expect("a late-result audit record");
    assert_eq!(late.entry.request_id, "late-1");
    // Never retried: the next result the gateway sees is for another invoke.
    invoke(
        &gw,
        &core.adapter.device_id(),
        "inv-after",
        "openphone.apps.search",
        json!({"query": "maps"}),
        "call_after",
        30_000,
    );
    let next = next_request(&mut gw, "node.invoke.result").await;
    assert_eq!(next["id"], "inv-after");
    core.adapter.shutdown().await;
}

/// The bootstrap token of the fake gateway's setup codes.
const BOOTSTRAP: &str = "boot-ok";

fn setup_code(url: &str, expires_at_ms: u64) -> String {
    URL_SAFE_NO_PAD.encode(
        json!({"url": url, "bootstrapToken": BOOTSTRAP, "expiresAtMs": expires_at_ms}).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setup_code_connects_with_its_bootstrap_token_signed() {
    let mut gw = fake_gateway(Mode::Accept { tick_ms: 30_000 }).await;
    // Far ahead of any clock (the year 2096).
    let code = setup_code(&gw.url, 4_000_000_000_000);
    let core = core_with(&gw.url, |config| {
        config.token = None;
        config.setup_code = Some(code);
    });
    core.adapter.start();
    let connect = next_request(&mut gw, "connect").await;
    assert_eq!(connect["auth"]["bootstrapToken"], BOOTSTRAP, "{connect}");
    assert!(connect["auth"].get("token").is_none(), "{connect}");
    core.adapter
        .wait_for(Duration::from_secs(10), |s| *s == Status::Ready)
        .await;
    core.adapter.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_setup_code_is_auth_failed_naming_the_fix_and_never_sent() {
    let mut gw = fake_gateway(Mode::Accept { tick_ms: 30_000 }).await;
    // Long past on any clock (the bridge's here is the scenario's).
    let code = setup_code(&gw.url, 1_000);
    let core = core_with(&gw.url, |config| {
        config.token = None;
        config.setup_code = Some(code);
    });
    core.adapter.start();
    let status = core
        .adapter
        .wait_for(Duration::from_secs(10), |s| {
            matches!(s, Status::AuthFailed { .. })
        })
        .await;
    assert!(
        status.line().contains("setup code expired"),
        "{}",
        status.line()
    );
    assert!(status.line().contains("openclaw qr"), "{}", status.line());
    assert!(
        gw.requests.try_recv().is_err(),
        "nothing reached the gateway"
    );
    core.adapter.shutdown().await;
}

/// Waits for the `agent.request` node event that posts a deferred outcome into the session:
/// labelled with the request id, a `done` outcome, in the pinned session.
async fn expect_posted_outcome(gw: &mut Gateway, request_id: &str) {
    let posted = loop {
        let event = next_request(gw, "node.event").await;
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
}

/// The first audit record whose tool is `name`, waited for up to 20 s (written after the
/// outbox row or the gateway's reply).
async fn audit_record_named(
    store: &Store,
    name: &str,
) -> Result<openphone_store::AuditRecord, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let found = store
                .export_audit(0, 1_000)
                .unwrap()
                .into_iter()
                .find(|r| r.entry.tool.as_deref() == Some(name));
            if let Some(found) = found {
                break found;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await
}
