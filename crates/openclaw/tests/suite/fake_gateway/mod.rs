//! The adapter against a fake gateway on loopback written here (protocol shapes only; the
//! real gateway is the opt-in peer suite), with the real bridge, store, manager and simulated
//! phone.
//!
//! This file holds the fake gateway and the daemon core it talks to; the tests are in `connect`
//! (handshake, auth, watchdog, setup codes), `invokes` and `deferred` (outcomes posted later).

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

mod connect;
mod deferred;
mod invokes;

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

/// The bootstrap token of the fake gateway's setup codes.
const BOOTSTRAP: &str = "boot-ok";

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
