//! Durable confirmations: approve, deny, timeout, replay, identity (issue 4 acceptance).

use openphone_core::{BridgeError, ConfirmDecision, Waited};
use openphone_protocol::ToolStatus;
use openphone_store::ConfirmationState;
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn approve_executes_the_stored_request_exactly_once() {
    let h = Harness::new();
    let parked = h.call(&hermes(), open_notes("a1")).await;
    assert_eq!(parked.status, ToolStatus::NeedsConfirmation);
    assert_eq!(code(&parked), Some("mutating_tool_requires_confirmation"));
    let id = confirmation_id(&parked);
    assert!(id.starts_with("runtime-confirm-"));
    assert_eq!(parked.result["expires_at_ms"], json!(h.now() + 30_000));
    assert!(
        parked.result["summary"]
            .as_str()
            .unwrap()
            .starts_with("openphone.app.open: take a note")
    );
    assert_eq!(h.actions(), 0, "nothing runs before approval");

    let fin = h
        .bridge
        .resolve(&operator(), &id, ConfirmDecision::Approve)
        .await
        .unwrap();
    assert_eq!(fin.status, ToolStatus::Ok, "{:?}", fin.error);
    let log = h.phone.action_log();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].tool, "openphone.app.open");
    let screen = h
        .phone
        .execute_sync(
            "openphone.screen.get",
            &json!({"reason": "check", "include_activity": true}),
        )
        .unwrap();
    assert!(
        screen.to_string().contains("Notes"),
        "Notes is on screen: {screen}"
    );

    // A second resolution loses.
    let late = h
        .bridge
        .resolve(&operator(), &id, ConfirmDecision::Approve)
        .await;
    assert!(matches!(
        late,
        Err(BridgeError::PendingConfirmationNotFound(_))
    ));
    let late = h
        .bridge
        .resolve(&operator(), &id, ConfirmDecision::Deny)
        .await;
    assert!(matches!(
        late,
        Err(BridgeError::PendingConfirmationNotFound(_))
    ));
    assert_eq!(h.actions(), 1);
    let record = h.bridge.store().get_confirmation(&id).unwrap().unwrap();
    assert_eq!(record.state, ConfirmationState::Completed);
}

#[tokio::test]
async fn deny_answers_denied_and_changes_nothing() {
    let h = Harness::new();
    let id = confirmation_id(&h.call(&hermes(), open_notes("d1")).await);
    let fin = h
        .bridge
        .resolve(&operator(), &id, ConfirmDecision::Deny)
        .await
        .unwrap();
    assert_eq!(fin.status, ToolStatus::Denied);
    assert_eq!(code(&fin), Some("user_denied_confirmation"));
    assert_eq!(h.actions(), 0);
    // The runtime retrying the same request gets the recorded denial, not a new prompt.
    let again = h.call(&hermes(), open_notes("d1")).await;
    assert_eq!(again.status, ToolStatus::Denied);
    assert!(again.replayed);
}

#[tokio::test]
async fn timeout_answers_timeout_and_changes_nothing() {
    let h = Harness::new();
    let req = with(open_notes("t1"), |r| r.timeout_ms = Some(5_000));
    let parked = h.call(&hermes(), req).await;
    let id = confirmation_id(&parked);
    h.clock.advance(5_000);
    assert_eq!(h.bridge.expire_due().await, 1);
    let record = h.bridge.store().get_confirmation(&id).unwrap().unwrap();
    assert_eq!(record.state, ConfirmationState::Timeout);
    let late = h
        .bridge
        .resolve(&operator(), &id, ConfirmDecision::Approve)
        .await;
    assert!(matches!(
        late,
        Err(BridgeError::PendingConfirmationNotFound(_))
    ));
    assert_eq!(h.actions(), 0);
    let Waited::Final(fin) = h
        .bridge
        .wait_for_final(&parked, std::future::pending())
        .await
    else {
        panic!("the expired confirmation has a final result");
    };
    assert_eq!(
        (fin.status, code(&fin)),
        (ToolStatus::Timeout, Some("timeout"))
    );
    // Regression: expiry once finished the same confirmation twice (two audit records).
    assert_eq!(h.bridge.expire_due().await, 0);
    let timeouts = h
        .bridge
        .store()
        .export_audit(0, 100)
        .unwrap()
        .into_iter()
        .filter(|r| r.entry.confirmation == Some(openphone_store::AuditConfirmation::Timeout))
        .count();
    assert_eq!(timeouts, 1);
}

#[tokio::test]
async fn approving_after_expiry_is_refused_even_before_the_timer_runs() {
    let h = Harness::new();
    let req = with(open_notes("x1"), |r| r.timeout_ms = Some(1_000));
    let id = confirmation_id(&h.call(&hermes(), req).await);
    h.clock.advance(1_000);
    let late = h
        .bridge
        .resolve(&operator(), &id, ConfirmDecision::Approve)
        .await;
    assert!(matches!(
        late,
        Err(BridgeError::PendingConfirmationNotFound(_))
    ));
    assert_eq!(h.actions(), 0);
    assert_eq!(
        h.bridge
            .store()
            .get_confirmation(&id)
            .unwrap()
            .unwrap()
            .state,
        ConfirmationState::Timeout
    );
}

#[tokio::test]
async fn replay_with_the_same_idempotency_key_returns_the_stored_result_without_a_second_effect() {
    let h = Harness::new();
    let first = with(open_notes("req-1"), |r| {
        r.idempotency_key = Some("open-notes-once".into())
    });
    let id = confirmation_id(&h.call(&hermes(), first).await);
    let fin = h
        .bridge
        .resolve(&operator(), &id, ConfirmDecision::Approve)
        .await
        .unwrap();
    assert_eq!(fin.status, ToolStatus::Ok);

    // A retry: new request id, same key, tool and params.
    let retry = with(open_notes("req-2"), |r| {
        r.idempotency_key = Some("open-notes-once".into())
    });
    let replay = h.call(&hermes(), retry).await;
    assert_eq!(replay.status, ToolStatus::Ok);
    assert!(replay.replayed);
    assert_eq!(replay.request_id, "req-2");
    assert_eq!(replay.audit_id, "runtime:hermes:req-2");
    assert_eq!(replay.result, fin.result);
    assert_eq!(h.actions(), 1, "a replay never executes");
}

#[tokio::test]
async fn the_same_key_with_other_params_gets_its_own_confirmation() {
    let h = Harness::new();
    let first = with(open_notes("k1"), |r| {
        r.idempotency_key = Some("shared".into())
    });
    let first_id = confirmation_id(&h.call(&hermes(), first).await);
    h.bridge
        .resolve(&operator(), &first_id, ConfirmDecision::Approve)
        .await
        .unwrap();

    let other = with(
        request(
            "k2",
            "openphone.app.open",
            json!({"package_or_label": "Clock", "reason": "timer"}),
        ),
        |r| r.idempotency_key = Some("shared".into()),
    );
    let result = h.call(&hermes(), other).await;
    assert_eq!(
        result.status,
        ToolStatus::NeedsConfirmation,
        "never the old approval"
    );
    assert_ne!(confirmation_id(&result), first_id);
    assert_eq!(h.actions(), 1);
}

#[tokio::test]
async fn a_duplicate_while_pending_points_at_the_same_confirmation() {
    let h = Harness::new();
    let key = |r: &mut openphone_protocol::ToolRequest| r.idempotency_key = Some("dup".into());
    let a = h.call(&hermes(), with(open_notes("p1"), key)).await;
    h.clock.advance(1_000);
    let b = h.call(&hermes(), with(open_notes("p2"), key)).await;
    assert_eq!(confirmation_id(&a), confirmation_id(&b));
    assert_eq!(
        a.result["expires_at_ms"], b.result["expires_at_ms"],
        "expiry is not extended"
    );
}

#[tokio::test]
async fn an_approval_never_satisfies_another_runtime_or_session() {
    let h = Harness::new();
    let key = |r: &mut openphone_protocol::ToolRequest| r.idempotency_key = Some("k".into());
    let id = confirmation_id(&h.call(&hermes(), with(open_notes("s1"), key)).await);
    h.bridge
        .resolve(&operator(), &id, ConfirmDecision::Approve)
        .await
        .unwrap();
    // Same key and body from another runtime session: a new confirmation.
    let other_session = with(open_notes("s2"), |r| {
        r.idempotency_key = Some("k".into());
        r.runtime_session_id = "thread-9".into();
    });
    assert_eq!(
        h.call(&hermes(), other_session).await.status,
        ToolStatus::NeedsConfirmation
    );
    // From another runtime: a new confirmation.
    let mut other = hermes();
    other.runtime = "my-agent".into();
    assert_eq!(
        h.call(&other, with(open_notes("s3"), key)).await.status,
        ToolStatus::NeedsConfirmation
    );
    assert_eq!(h.actions(), 1);
}

#[tokio::test]
async fn a_request_id_reused_for_another_body_is_a_conflict() {
    let h = Harness::new();
    h.call(&hermes(), open_notes("same-id")).await;
    let other = request(
        "same-id",
        "openphone.app.open",
        json!({"package_or_label": "Clock", "reason": "r"}),
    );
    let result = h.call(&hermes(), other).await;
    assert_eq!(code(&result), Some("idempotency_conflict"));
}

#[tokio::test]
async fn approval_rechecks_policy_and_a_new_deny_wins() {
    let h = Harness::new();
    let id = confirmation_id(&h.call(&hermes(), open_notes("r1")).await);
    let policy: openphone_policy::ToolPolicy =
        serde_json::from_value(json!({"global": {"deny": ["group:apps"]}})).unwrap();
    h.bridge.set_config(openphone_core::BridgeConfig {
        tool_policy: policy,
        ..Default::default()
    });
    let fin = h
        .bridge
        .resolve(&operator(), &id, ConfirmDecision::Approve)
        .await
        .unwrap();
    assert_eq!(fin.status, ToolStatus::Denied);
    assert_eq!(code(&fin), Some("tool_not_granted"));
    assert_eq!(h.actions(), 0);
}

#[tokio::test]
async fn invoke_and_wait_answers_after_the_operator_approves() {
    let h = std::sync::Arc::new(Harness::new());
    let waiter = {
        let h = h.clone();
        tokio::spawn(async move {
            h.bridge
                .invoke_and_wait(
                    &hermes(),
                    open_notes("w1"),
                    openphone_policy::Context::Interactive,
                )
                .await
        })
    };
    // Find the pending confirmation once it exists, then approve it.
    let id = loop {
        let pending = h
            .bridge
            .store()
            .list_confirmations(&Default::default())
            .unwrap();
        if let Some(c) = pending.first() {
            break c.confirmation_id.clone();
        }
        tokio::task::yield_now().await;
    };
    h.bridge
        .resolve(&operator(), &id, ConfirmDecision::Approve)
        .await
        .unwrap();
    let result = waiter.await.unwrap();
    assert_eq!(result.status, ToolStatus::Ok);
    assert_eq!(result.request_id, "w1");
    assert!(
        !result.replayed,
        "obtained by waiting, not recorded before the call"
    );
    assert_eq!(h.actions(), 1);
}

#[tokio::test]
async fn at_most_32_pending_confirmations_per_runtime() {
    let h = Harness::new();
    // Each a different app: identical calls without a key would join one confirmation.
    let open = |i: usize| {
        with(open_notes(&format!("m{i}")), |r| {
            r.params["package_or_label"] = json!(format!("App {i}"))
        })
    };
    for i in 0..32 {
        let r = h.call(&hermes(), open(i)).await;
        assert_eq!(r.status, ToolStatus::NeedsConfirmation);
    }
    let over = h.call(&hermes(), open(32)).await;
    assert_eq!(
        (over.status, code(&over)),
        (ToolStatus::Denied, Some("rate_limited"))
    );
}

#[tokio::test]
async fn invalid_params_are_refused_before_policy_with_the_field_named() {
    let h = Harness::new();
    let r = h
        .call(
            &hermes(),
            request(
                "v1",
                "openphone.ui.tap",
                json!({"x": "left", "reason": "r"}),
            ),
        )
        .await;
    assert_eq!(code(&r), Some("invalid_params"));
    let message = &r.error.as_ref().unwrap().message;
    assert!(
        message.contains("x:") && message.contains("y:"),
        "{message}"
    );
    let r = h
        .call(
            &hermes(),
            request("v2", "openphone.ui.tap", json!({"x": 1, "y": 2})),
        )
        .await;
    assert_eq!(code(&r), Some("missing_reason"));
    let r = h
        .call(
            &hermes(),
            request(
                "",
                "openphone.ui.tap",
                json!({"x": 1, "y": 2, "reason": "r"}),
            ),
        )
        .await;
    assert_eq!(code(&r), Some("missing_request_id"));
    let r = h
        .call(
            &hermes(),
            request("v3", "openphone.teleport", json!({"reason": "r"})),
        )
        .await;
    assert_eq!(code(&r), Some("unknown_tool"));
    let r = h
        .call(
            &hermes(),
            with(open_notes("v4"), |r| r.runtime = Some("openclaw".into())),
        )
        .await;
    assert_eq!(code(&r), Some("runtime_mismatch"));
    let r = h
        .call(
            &hermes(),
            request(
                "v5",
                "tap",
                json!({"x": 1, "y": 2, "reason": "r", "_runtime": "builtin"}),
            ),
        )
        .await;
    assert_eq!(code(&r), Some("invalid_params"));
    assert_eq!(h.actions(), 0);
}
