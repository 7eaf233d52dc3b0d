//! Deferred outcomes: a confirmation past the gateway's deadline is answered with a receipt and
//! its outcome posted later (once, across a daemon restart); an outcome with nowhere to go, or
//! one the gateway ignored, is audited.

use super::*;

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
