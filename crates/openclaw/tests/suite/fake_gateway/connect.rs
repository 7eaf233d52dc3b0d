//! Connecting: the signed handshake to ready (tools published, device token stored), a wrong
//! token, the watchdog's reconnect, and setup codes (bootstrap token; an expired code).

use super::*;

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
