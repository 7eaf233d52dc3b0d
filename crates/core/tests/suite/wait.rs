//! The one wait for a request's final result, and what `replayed` means: the result was
//! recorded before the request it answers arrived.

use std::future::{pending, ready};

use openphone_core::{ConfirmDecision, Waited};
use openphone_protocol::{ToolResult, ToolStatus};
use openphone_store::ConfirmationState;
use pretty_assertions::assert_eq;

use super::support::*;

/// Waits for `first`'s final result while the operator approves it (the wait subscribes
/// first: `join!` polls it before the approval).
async fn approve_while_waiting(h: &Harness, first: &ToolResult) -> Waited {
    let id = confirmation_id(first);
    let (waited, resolved) = tokio::join!(h.bridge.wait_for_final(first, pending()), async {
        tokio::task::yield_now().await;
        h.bridge
            .resolve(&operator(), &id, ConfirmDecision::Approve)
            .await
    });
    resolved.unwrap();
    waited
}

#[tokio::test]
async fn a_result_obtained_by_waiting_is_not_replayed() {
    let h = Harness::new();
    let first = h.call(&hermes(), open_notes("w1")).await;
    assert_eq!(first.status, ToolStatus::NeedsConfirmation);
    let Waited::Final(result) = approve_while_waiting(&h, &first).await else {
        panic!("the approval ends the wait");
    };
    assert_eq!(
        (result.status, result.replayed),
        (ToolStatus::Ok, false),
        "{:?}",
        result.error
    );
    assert_eq!(
        (result.request_id.as_str(), result.audit_id.as_str()),
        ("w1", "runtime:hermes:w1")
    );
    assert_eq!(h.actions(), 1);
}

#[tokio::test]
async fn a_keyed_retry_after_the_final_result_is_recorded_is_replayed() {
    let h = Harness::new();
    let keyed = |id: &str| with(open_notes(id), |r| r.idempotency_key = Some("key-1".into()));
    let first = h.call(&hermes(), keyed("k1")).await;
    let Waited::Final(fin) = approve_while_waiting(&h, &first).await else {
        panic!("the approval ends the wait");
    };
    assert!(!fin.replayed);

    // The retry (a new request id, the same idempotency key) arrives after the result was
    // recorded: answered from the store, re-addressed, marked replayed, nothing runs again.
    let retry = h.call(&hermes(), keyed("k2")).await;
    assert_eq!(
        retry,
        ToolResult {
            request_id: "k2".into(),
            audit_id: "runtime:hermes:k2".into(),
            replayed: true,
            ..fin
        }
    );
    assert_eq!(h.actions(), 1);
    // Waiting on a final answer returns it as it is.
    assert_eq!(
        h.bridge.wait_for_final(&retry, pending()).await,
        Waited::Final(retry.clone())
    );
}

#[tokio::test]
async fn a_keyed_retry_that_joins_the_pending_confirmation_and_waits_is_not_replayed() {
    let h = Harness::new();
    let keyed = |id: &str| with(open_notes(id), |r| r.idempotency_key = Some("key-2".into()));
    let first = h.call(&hermes(), keyed("j1")).await;
    let retry = h.call(&hermes(), keyed("j2")).await;
    assert_eq!(confirmation_id(&retry), confirmation_id(&first));
    let Waited::Final(result) = approve_while_waiting(&h, &retry).await else {
        panic!("the approval ends the wait");
    };
    assert_eq!(
        (
            result.status,
            result.request_id.as_str(),
            result.audit_id.as_str(),
            result.replayed
        ),
        (ToolStatus::Ok, "j2", "runtime:hermes:j2", false)
    );
    assert_eq!(h.actions(), 1);
}

#[tokio::test]
async fn stop_ends_the_wait_with_the_first_answer_and_leaves_the_confirmation_pending() {
    let h = Harness::new();
    let first = h.call(&hermes(), open_notes("s1")).await;
    let waited = h.bridge.wait_for_final(&first, ready(())).await;
    assert_eq!(waited, Waited::Stopped(first.clone()));
    let record = h
        .bridge
        .store()
        .get_confirmation(&confirmation_id(&first))
        .unwrap()
        .unwrap();
    assert_eq!(record.state, ConfirmationState::Pending);
    assert_eq!(h.actions(), 0);
}

#[tokio::test]
async fn a_final_result_already_recorded_wins_over_a_stop_already_complete() {
    let h = Harness::new();
    let first = h.call(&hermes(), open_notes("f1")).await;
    h.bridge
        .resolve(&operator(), &confirmation_id(&first), ConfirmDecision::Deny)
        .await
        .unwrap();
    let Waited::Final(result) = h.bridge.wait_for_final(&first, ready(())).await else {
        panic!("the recorded denial is the answer");
    };
    assert_eq!(
        (result.status, result.request_id.as_str(), result.replayed),
        (ToolStatus::Denied, "f1", false)
    );
}

#[tokio::test]
async fn the_wait_times_out_the_confirmation_by_the_bridge_clock() {
    let h = Harness::new();
    let req = with(open_notes("e1"), |r| r.timeout_ms = Some(5_000));
    let first = h.call(&hermes(), req).await;
    h.clock.advance(5_000);
    let waited = h.bridge.wait_for_final(&first, pending()).await;
    let Waited::Final(result) = waited else {
        panic!("expiry ends the wait");
    };
    assert_eq!(
        (result.status, result.request_id.as_str(), result.replayed),
        (ToolStatus::Timeout, "e1", false)
    );
    assert_eq!(h.actions(), 0);
}

#[tokio::test]
async fn the_bridge_reads_the_one_injected_clock() {
    let h = Harness::new();
    assert_eq!(h.bridge.now_ms(), h.now());
    h.clock.advance(1_234);
    assert_eq!(h.bridge.now_ms(), h.now());
    assert_eq!(h.bridge.clock().now_ms(), h.now());
}
