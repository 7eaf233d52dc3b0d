//! Regression tests named after the bugs they pin (found in review of the trusted core).

use openphone_core::ConfirmDecision;
use openphone_protocol::ToolStatus;
use openphone_store::{Autonomy, ConfirmationState, NewPhoneSession, Resolution};
use serde_json::json;

use super::support::*;

fn trusted_session(h: &Harness, id: &str, runtime: &str) {
    h.bridge
        .store()
        .create_session(
            &NewPhoneSession {
                phone_session_id: id.into(),
                runtime_kind: runtime.into(),
                runtime_session_id: String::new(),
                attention_id: "attn-x".into(),
                source: "chat".into(),
                autonomy: Autonomy::TrustedActions,
                summary: "s".into(),
            },
            h.now(),
        )
        .unwrap();
}

#[tokio::test]
async fn runtime_cannot_borrow_another_runtimes_trusted_session() {
    let h = Harness::new();
    trusted_session(&h, "phone-sess-openclaw", "openclaw");
    // By phone_session_id …
    let req = with(open_notes("b1"), |r| {
        r.phone_session_id = Some("phone-sess-openclaw".into())
    });
    assert_eq!(
        h.call(&hermes(), req).await.status,
        ToolStatus::NeedsConfirmation
    );
    // … and through a segment of its own runtime_session_id.
    let req = with(open_notes("b2"), |r| {
        r.runtime_session_id = "foo:phone-sess-openclaw".into()
    });
    assert_eq!(
        h.call(&hermes(), req).await.status,
        ToolStatus::NeedsConfirmation
    );
    assert_eq!(h.actions(), 0);
    // Nor may it move that session's status.
    let session = h
        .bridge
        .store()
        .get_session("phone-sess-openclaw")
        .unwrap()
        .unwrap();
    assert_eq!(session.status.as_str(), "created");
    // The owner's own trusted session does allow it.
    trusted_session(&h, "phone-sess-hermes", "hermes");
    let req = with(open_notes("b3"), |r| {
        r.phone_session_id = Some("phone-sess-hermes".into())
    });
    assert_eq!(h.call(&trusted_hermes(), req).await.status, ToolStatus::Ok);
}

#[tokio::test]
async fn pending_request_retried_with_an_allowing_verdict_runs_once() {
    let h = Harness::new();
    let key = |r: &mut openphone_protocol::ToolRequest| r.idempotency_key = Some("once".into());
    let parked = h.call(&trusted_hermes(), with(open_notes("p1"), key)).await;
    assert_eq!(parked.status, ToolStatus::NeedsConfirmation);
    // The retry asks for trusted_actions (which alone would allow it): it must point at the
    // pending confirmation instead of running.
    let retry = with(open_notes("p2"), |r| {
        key(r);
        r.autonomy = Some("trusted_actions".into());
    });
    let again = h.call(&trusted_hermes(), retry).await;
    assert_eq!(again.status, ToolStatus::NeedsConfirmation);
    assert_eq!(confirmation_id(&again), confirmation_id(&parked));
    assert_eq!(h.actions(), 0);
    h.bridge
        .resolve(
            &operator(),
            &confirmation_id(&parked),
            ConfirmDecision::Approve,
        )
        .await
        .unwrap();
    assert_eq!(h.actions(), 1);
}

#[tokio::test]
async fn concurrent_identical_allowed_requests_execute_once() {
    let h = std::sync::Arc::new(Harness::new());
    let req = |id: &str| {
        with(open_notes(id), |r| {
            r.idempotency_key = Some("twin".into());
            r.autonomy = Some("trusted_actions".into());
        })
    };
    let caller = trusted_hermes();
    let (a, b) = tokio::join!(h.call(&caller, req("c1")), h.call(&caller, req("c2")));
    assert_eq!((a.status, b.status), (ToolStatus::Ok, ToolStatus::Ok));
    assert!(a.replayed ^ b.replayed, "one executed, the other replayed");
    assert_eq!(h.actions(), 1);
}

#[tokio::test]
async fn approved_but_unfinished_confirmation_becomes_result_unknown_and_never_runs() {
    let h = Harness::new();
    let key = |r: &mut openphone_protocol::ToolRequest| r.idempotency_key = Some("crashy".into());
    let id = confirmation_id(&h.call(&hermes(), with(open_notes("u1"), key)).await);
    // The daemon "stopped" right after the approval was recorded, before any result.
    h.bridge
        .store()
        .resolve(&id, Resolution::Approve, "cli:user", h.now())
        .unwrap();
    let Harness {
        dir,
        clock,
        phone,
        bridge,
    } = h;
    drop(bridge);
    let bridge = bridge_on(dir.path(), &phone, &clock);
    let report = bridge.recover().await.unwrap();
    assert_eq!(report.result_unknown, std::slice::from_ref(&id));
    let record = bridge.store().get_confirmation(&id).unwrap().unwrap();
    assert_eq!(record.state, ConfirmationState::ResultUnknown);
    let h = Harness {
        dir,
        clock,
        phone,
        bridge,
    };
    let retry = h.call(&hermes(), with(open_notes("u2"), key)).await;
    assert_eq!(
        (retry.status, code(&retry)),
        (ToolStatus::Error, Some("execution_result_unknown"))
    );
    assert!(retry.replayed);
    assert_eq!(h.actions(), 0, "never re-run");
    let late = h
        .bridge
        .resolve(&operator(), &id, ConfirmDecision::Approve)
        .await;
    assert!(late.is_err());
}

#[tokio::test]
async fn deny_returns_the_session_to_running() {
    let h = Harness::new();
    trusted_session(&h, "phone-sess-h", "hermes");
    h.bridge
        .store()
        .update_session_status(
            "phone-sess-h",
            openphone_store::SessionStatus::Running,
            None,
            h.now(),
        )
        .unwrap();
    let req = with(
        request(
            "s1",
            "openphone.share.text",
            json!({"text": "hi", "reason": "share"}),
        ),
        |r| r.phone_session_id = Some("phone-sess-h".into()),
    );
    let id = confirmation_id(&h.call(&hermes(), req).await);
    let status = |h: &Harness| {
        h.bridge
            .store()
            .get_session("phone-sess-h")
            .unwrap()
            .unwrap()
            .status
    };
    assert_eq!(status(&h).as_str(), "waiting_for_confirmation");
    h.bridge
        .resolve(&operator(), &id, ConfirmDecision::Deny)
        .await
        .unwrap();
    assert_eq!(status(&h).as_str(), "running");
}

#[tokio::test]
async fn a_blank_params_reason_is_missing() {
    let h = Harness::new();
    let r = h
        .call(
            &hermes(),
            request("r1", "openphone.screen.get", json!({"reason": "   "})),
        )
        .await;
    assert_eq!(code(&r), Some("missing_reason"));
}
