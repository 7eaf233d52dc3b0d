//! Invokes through the bridge: progress chunks while an invoke is held, unknown commands and
//! key replays, and the autonomy of a completed `observe_only` session.

use super::*;

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
