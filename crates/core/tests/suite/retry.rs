//! A retry joins what it retries (issue 28, item 9): a call without an idempotency key that
//! repeats an identical call waiting for the user, or decided a moment ago, gets that call's
//! outcome instead of a second confirmation; calls allowed without asking stay separate.

use std::sync::Arc;

use openphone_core::{ConfirmDecision, Waited};
use openphone_policy::Caller;
use openphone_protocol::{ToolRequest, ToolStatus};
use openphone_store::{ConfirmationFilter, ConfirmationState, NewPhoneSession};
use serde_json::json;

use super::support::*;

/// Opening Notes without a key, the reason worded anew each time (a model's retry).
fn open(id: &str) -> ToolRequest {
    with(open_notes(id), |r| {
        r.params["reason"] = json!(format!("take a note ({id})"))
    })
}

fn pending(h: &Harness) -> usize {
    h.bridge.store().count_pending("hermes", h.now()).unwrap()
}

fn all_confirmations(h: &Harness) -> usize {
    h.bridge
        .store()
        .list_confirmations(&ConfirmationFilter::default())
        .unwrap()
        .len()
}

async fn approve(h: &Harness, id: &str) -> openphone_protocol::ToolResult {
    h.bridge
        .resolve(&operator(), id, ConfirmDecision::Approve)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_retry_while_pending_does_not_open_a_second_confirmation() {
    let h = Harness::new();
    let first = h.call(&hermes(), open("r1")).await;
    let id = confirmation_id(&first);
    let retry = h.call(&hermes(), open("r2")).await;
    assert_eq!(retry.status, ToolStatus::NeedsConfirmation, "{retry:?}");
    assert_eq!(
        confirmation_id(&retry),
        id,
        "the retry waits on the same one"
    );
    assert_eq!(retry.request_id, "r2");
    assert_eq!(all_confirmations(&h), 1);

    // The retry waits for the same outcome as the original's caller would.
    let fin = approve(&h, &id).await;
    assert_eq!(fin.status, ToolStatus::Ok, "{fin:?}");
    let waited = h
        .bridge
        .wait_for_final(&retry, std::future::ready(()))
        .await;
    let Waited::Final(waited) = waited else {
        panic!("no final result for the retry: {waited:?}");
    };
    assert_eq!(waited.status, ToolStatus::Ok);
    assert_eq!(waited.request_id, "r2");
    assert_eq!(waited.result, fin.result);
    assert_eq!(h.actions(), 1, "approved once, ran once");
}

#[tokio::test]
async fn a_retry_without_a_key_after_a_late_approval_runs_once() {
    let h = Harness::new();
    let id = confirmation_id(&h.call(&hermes(), open("l1")).await);
    let fin = approve(&h, &id).await;
    assert_eq!(fin.status, ToolStatus::Ok, "{fin:?}");
    // The host only saw "pending" and asks again: the approved call's result, replayed.
    let again = h.call(&hermes(), open("l2")).await;
    assert_eq!(again.status, ToolStatus::Ok, "{again:?}");
    assert!(again.replayed, "recorded before the retry arrived");
    assert_eq!(again.request_id, "l2");
    assert_eq!(again.result, fin.result);
    assert_eq!(all_confirmations(&h), 1);
    assert_eq!(h.actions(), 1);
}

#[tokio::test]
async fn a_joined_denial_stays_a_denial() {
    let h = Harness::new();
    let id = confirmation_id(&h.call(&hermes(), open("d1")).await);
    h.bridge
        .resolve(&operator(), &id, ConfirmDecision::Deny)
        .await
        .unwrap();
    let again = h.call(&hermes(), open("d2")).await;
    assert_eq!(code(&again), Some("user_denied_confirmation"), "{again:?}");
    assert!(again.replayed);
    assert_eq!(pending(&h), 0, "no new confirmation within the window");
    assert_eq!(h.actions(), 0);
}

#[tokio::test]
async fn after_the_window_the_same_call_is_a_new_action() {
    let h = Harness::new();
    let id = confirmation_id(&h.call(&hermes(), open("w1")).await);
    approve(&h, &id).await;
    h.clock.advance(RETRY_WINDOW_PASSED_MS);
    let later = h.call(&hermes(), open("w2")).await;
    assert_eq!(later.status, ToolStatus::NeedsConfirmation, "{later:?}");
    assert_ne!(confirmation_id(&later), id);
}

#[tokio::test]
async fn two_identical_auto_allowed_calls_are_two_actions() {
    let h = Harness::new();
    let trusted = |id: &str| with(open(id), |r| r.autonomy = Some("trusted_actions".into()));
    for id in ["a1", "a2"] {
        let r = h.call(&trusted_hermes(), trusted(id)).await;
        assert_eq!(r.status, ToolStatus::Ok, "{r:?}");
        assert!(!r.replayed);
    }
    assert_eq!(h.actions(), 2);
    assert_eq!(all_confirmations(&h), 0);
}

#[tokio::test]
async fn a_call_allowed_without_asking_does_not_join_an_approved_one() {
    // Asked once and approved; the same call then allowed by autonomy is its own action.
    let h = Harness::new();
    let id = confirmation_id(&h.call(&trusted_hermes(), open("s1")).await);
    approve(&h, &id).await;
    let allowed = with(open("s2"), |r| r.autonomy = Some("trusted_actions".into()));
    let r = h.call(&trusted_hermes(), allowed).await;
    assert_eq!(r.status, ToolStatus::Ok);
    assert!(!r.replayed);
    assert_eq!(h.actions(), 2);
}

#[tokio::test]
async fn keyed_calls_keep_their_key_semantics() {
    let h = Harness::new();
    let keyed = |id: &str, key: &str| {
        let key = key.to_owned();
        with(open_notes(id), move |r| r.idempotency_key = Some(key))
    };
    let a = h.call(&hermes(), keyed("k1", "key-a")).await;
    let same_key = h.call(&hermes(), keyed("k2", "key-a")).await;
    assert_eq!(confirmation_id(&same_key), confirmation_id(&a));
    let other_key = h.call(&hermes(), keyed("k3", "key-b")).await;
    assert_ne!(confirmation_id(&other_key), confirmation_id(&a));
    // A call without a key never joins a keyed one.
    let unkeyed = h.call(&hermes(), open("k4")).await;
    assert_ne!(confirmation_id(&unkeyed), confirmation_id(&a));
    assert_ne!(confirmation_id(&unkeyed), confirmation_id(&other_key));
    assert_eq!(pending(&h), 3);
    // A key equal to the call's own request id is a key too: two such calls are two actions.
    let own = h.call(&hermes(), keyed("k5", "k5")).await;
    let own_again = h.call(&hermes(), keyed("k6", "k6")).await;
    assert_ne!(confirmation_id(&own), confirmation_id(&own_again));
    assert_eq!(pending(&h), 5);
}

#[tokio::test]
async fn other_params_principal_or_phone_session_are_other_actions() {
    let h = Harness::new();
    h.bridge
        .store()
        .create_session(
            &NewPhoneSession {
                phone_session_id: "ps-retry".into(),
                runtime_kind: "hermes".into(),
                runtime_session_id: String::new(),
                attention_id: "attn-r".into(),
                source: "chat".into(),
                autonomy: openphone_store::Autonomy::AskBeforeAction,
                summary: "s".into(),
            },
            h.now(),
        )
        .unwrap();
    let first = confirmation_id(&h.call(&hermes(), open("o1")).await);
    let other_app = with(open("o2"), |r| {
        r.params["package_or_label"] = json!("Clock")
    });
    let in_session = with(open("o3"), |r| r.phone_session_id = Some("ps-retry".into()));
    let other_principal: Caller = {
        let mut c = hermes();
        c.principal = "another-token".into();
        c
    };
    for (caller, req) in [
        (hermes(), other_app),
        (hermes(), in_session),
        (other_principal, open("o4")),
    ] {
        let r = h.call(&caller, req).await;
        assert_eq!(r.status, ToolStatus::NeedsConfirmation, "{r:?}");
        assert_ne!(confirmation_id(&r), first);
    }
    assert_eq!(pending(&h), 4);
}

#[tokio::test]
async fn a_withdrawn_or_timed_out_confirmation_is_asked_again() {
    let h = Harness::new();
    let id = confirmation_id(&h.call(&hermes(), open("t1")).await);
    h.bridge.withdraw(&hermes(), &id).await.unwrap();
    let after_withdraw = h.call(&hermes(), open("t2")).await;
    assert_eq!(after_withdraw.status, ToolStatus::NeedsConfirmation);
    let second = confirmation_id(&after_withdraw);
    assert_ne!(second, id);
    // Expired: the user never decided, so the retry asks again.
    h.clock.advance(31_000);
    h.bridge.expire_due().await;
    let after_timeout = h.call(&hermes(), open("t3")).await;
    assert_eq!(after_timeout.status, ToolStatus::NeedsConfirmation);
    assert_ne!(confirmation_id(&after_timeout), second);
    assert_eq!(h.actions(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_calls_arriving_together_open_one_confirmation() {
    let h = Arc::new(Harness::new());
    let calls = (0..4).map(|i| {
        let h = Arc::clone(&h);
        tokio::spawn(async move { h.call(&hermes(), open(&format!("c{i}"))).await })
    });
    let mut ids = Vec::new();
    for call in calls {
        ids.push(confirmation_id(&call.await.unwrap()));
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(all_confirmations(&h), 1);
}

#[tokio::test]
async fn a_pending_confirmation_is_joined_after_a_restart() {
    let h = Harness::new();
    let id = confirmation_id(&h.call(&hermes(), open("x1")).await);
    // A new bridge on the same data directory (the daemon restarted).
    drop(h.bridge);
    let bridge = bridge_on(h.dir.path(), &h.phone, &h.clock);
    bridge.recover().await.unwrap();
    let again = bridge
        .invoke(
            &hermes(),
            open("x2"),
            openphone_policy::Context::Interactive,
        )
        .await;
    assert_eq!(again.status, ToolStatus::NeedsConfirmation, "{again:?}");
    assert_eq!(confirmation_id(&again), id);
    let state = bridge.store().get_confirmation(&id).unwrap().unwrap().state;
    assert_eq!(state, ConfirmationState::Pending);
}

#[tokio::test]
async fn the_operators_own_calls_are_never_joined() {
    // The user typing the same command twice means it twice.
    let h = Harness::new();
    let user = Caller::operator("cli", openphone_policy::Transport::Cli, "user");
    let first = h.call(&user, open("u1")).await;
    let second = h.call(&user, open("u2")).await;
    assert_eq!(second.status, ToolStatus::NeedsConfirmation, "{second:?}");
    assert_ne!(confirmation_id(&first), confirmation_id(&second));
}
