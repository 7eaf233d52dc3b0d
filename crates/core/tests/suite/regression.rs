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
    // By phone_session_id … (refused outright since issue 28: a runtime tags its calls only
    // with its own sessions)
    let req = with(open_notes("b1"), |r| {
        r.phone_session_id = Some("phone-sess-openclaw".into())
    });
    assert_eq!(code(&h.call(&hermes(), req).await), Some("invalid_params"));
    // … and through a segment of its own runtime_session_id.
    let req = with(open_notes("b2"), |r| {
        r.runtime_session_id = "foo:phone-sess-openclaw".into()
    });
    assert_eq!(code(&h.call(&hermes(), req).await), Some("invalid_params"));
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

// Issue 11, item 4: approval used the policy of the past.

/// The bridge's runtime configuration: these runtimes, with these authorisations.
fn configure(h: &Harness, runtimes: &[(&str, openphone_policy::RuntimeAuthorisation)]) {
    h.bridge.set_config(openphone_core::BridgeConfig {
        runtimes: Some(
            runtimes
                .iter()
                .map(|(id, auth)| ((*id).to_owned(), *auth))
                .collect(),
        ),
        ..Default::default()
    });
}

/// A pending `app.open` of hermes, asked while hermes had every grant.
async fn pending_open(h: &Harness, id: &str) -> String {
    configure(h, &[("hermes", hermes().authorisation())]);
    let parked = h.call(&hermes(), open_notes(id)).await;
    assert_eq!(parked.status, ToolStatus::NeedsConfirmation);
    confirmation_id(&parked)
}

async fn approve(h: &Harness, id: &str) -> openphone_protocol::ToolResult {
    h.bridge
        .resolve(&operator(), id, ConfirmDecision::Approve)
        .await
        .unwrap()
}

fn message(result: &openphone_protocol::ToolResult) -> &str {
    result.error.as_ref().map_or("", |e| e.message.as_str())
}

#[tokio::test]
async fn approving_after_the_runtime_was_disabled_does_not_run() {
    let h = Harness::new();
    let id = pending_open(&h, "d1").await;
    let mut disabled = hermes().authorisation();
    disabled.enabled = false;
    configure(&h, &[("hermes", disabled)]);
    let fin = approve(&h, &id).await;
    assert_eq!(fin.status, ToolStatus::Denied);
    assert_eq!(code(&fin), Some("tool_not_granted"));
    assert!(message(&fin).contains("is disabled"), "{fin:?}");
    assert_eq!(h.actions(), 0);
}

#[tokio::test]
async fn approving_after_grants_were_removed_does_not_run() {
    let h = Harness::new();
    let id = pending_open(&h, "g1").await;
    let mut stripped = hermes().authorisation();
    stripped.grants = openphone_policy::ExposureGrants::REMOTE_DEFAULT;
    configure(&h, &[("hermes", stripped)]);
    let fin = approve(&h, &id).await;
    assert_eq!(fin.status, ToolStatus::Denied);
    assert_eq!(code(&fin), Some("tool_not_granted"));
    assert!(message(&fin).contains("dangerous"), "{fin:?}");
    assert_eq!(h.actions(), 0);
}

#[tokio::test]
async fn approving_after_the_ceiling_was_lowered_to_observe_only_does_not_run() {
    let h = Harness::new();
    let id = pending_open(&h, "c1").await;
    let mut lowered = hermes().authorisation();
    lowered.max_autonomy = openphone_policy::Autonomy::ObserveOnly;
    configure(&h, &[("hermes", lowered)]);
    let fin = approve(&h, &id).await;
    assert_eq!(code(&fin), Some("observe_only_mutation_denied"));
    assert_eq!(h.actions(), 0);
}

#[tokio::test]
async fn approving_after_the_runtime_was_removed_does_not_run() {
    let h = Harness::new();
    let id = pending_open(&h, "x1").await;
    configure(&h, &[("openclaw", hermes().authorisation())]);
    let fin = approve(&h, &id).await;
    assert_eq!(fin.status, ToolStatus::Denied);
    assert_eq!(code(&fin), Some("tool_not_granted"));
    assert!(
        message(&fin).contains("runtime `hermes` is no longer configured"),
        "{fin:?}"
    );
    assert_eq!(h.actions(), 0);
    // A runtime still configured as it was runs once approved (asked after the retry window:
    // within it, the same call without a key gets the refusal again, `retry.rs`).
    configure(&h, &[("hermes", hermes().authorisation())]);
    h.clock.advance(RETRY_WINDOW_PASSED_MS);
    let id = confirmation_id(&h.call(&hermes(), open_notes("x2")).await);
    assert_eq!(approve(&h, &id).await.status, ToolStatus::Ok);
    assert_eq!(h.actions(), 1);
}

#[tokio::test]
async fn a_session_cannot_lift_a_runtime_above_its_ceiling() {
    let h = Harness::new();
    trusted_session(&h, "phone-sess-observer", "hermes");
    let save = |id: &str| {
        with(
            request(
                id,
                "openphone.memory.save",
                json!({"text": "parking: level 3", "reason": "remember"}),
            ),
            |r| r.phone_session_id = Some("phone-sess-observer".into()),
        )
    };
    // An observe_only runtime routed into a trusted session: the mutation is denied.
    let mut observer = hermes();
    observer.max_autonomy = openphone_policy::Autonomy::ObserveOnly;
    let denied = h.call(&observer, save("s1")).await;
    assert_eq!(
        code(&denied),
        Some("observe_only_mutation_denied"),
        "{denied:?}"
    );
    let asked = with(save("s2"), |r| r.autonomy = Some("trusted_actions".into()));
    assert_eq!(
        code(&h.call(&observer, asked).await),
        Some("observe_only_mutation_denied")
    );
    // The default ceiling (ask_before_action) caps it too: the user is asked.
    let capped = h.call(&hermes(), save("s3")).await;
    assert_eq!(capped.status, ToolStatus::NeedsConfirmation);
    // Only a ceiling the user raised lets the trusted session run it.
    assert_eq!(
        h.call(&trusted_hermes(), save("s4")).await.status,
        ToolStatus::Ok
    );
    let saved = h
        .call(
            &trusted_hermes(),
            request(
                "s5",
                "openphone.memory.search",
                json!({"query": "parking", "reason": "recall"}),
            ),
        )
        .await;
    assert_eq!(saved.result["count"], 1, "{saved:?}");
}

#[tokio::test]
async fn pending_confirmations_of_a_disabled_or_removed_runtime_are_withdrawn_at_start() {
    let h = Harness::new();
    let mut openclaw = hermes();
    openclaw.runtime = "openclaw".into();
    let mut mcp = hermes();
    mcp.runtime = "mcp".into();
    configure(
        &h,
        &[
            ("hermes", hermes().authorisation()),
            ("openclaw", openclaw.authorisation()),
            ("mcp", mcp.authorisation()),
        ],
    );
    let of_hermes = confirmation_id(&h.call(&hermes(), open_notes("w1")).await);
    let of_openclaw = confirmation_id(&h.call(&openclaw, open_notes("w2")).await);
    let of_mcp = confirmation_id(&h.call(&mcp, open_notes("w3")).await);
    let op = openphone_policy::Caller::operator("operator", openphone_policy::Transport::Cli, "u");
    let send = request(
        "w4",
        "openphone.messages.send",
        json!({"to": "+100", "body": "hi", "reason": "reply"}),
    );
    let of_operator = confirmation_id(&h.call(&op, send).await);

    // The configuration the daemon restarts with: hermes disabled, openclaw removed.
    let mut disabled = hermes().authorisation();
    disabled.enabled = false;
    configure(&h, &[("hermes", disabled), ("mcp", mcp.authorisation())]);
    let withdrawn = h.bridge.withdraw_unauthorised().await.unwrap();
    let mut got: Vec<(String, String)> = withdrawn
        .iter()
        .map(|w| (w.confirmation_id.clone(), w.reason.clone()))
        .collect();
    got.sort();
    let mut want = vec![
        (
            of_hermes.clone(),
            "runtime `hermes` is disabled in the configuration".to_owned(),
        ),
        (
            of_openclaw.clone(),
            "runtime `openclaw` is no longer configured".to_owned(),
        ),
    ];
    want.sort();
    assert_eq!(got, want);
    for id in [&of_hermes, &of_openclaw] {
        let record = h.bridge.store().get_confirmation(id).unwrap().unwrap();
        assert_eq!(record.state, ConfirmationState::Denied);
        assert_eq!(
            record.resolved_by.as_deref(),
            Some(openphone_core::RESOLVED_BY_CONFIGURATION)
        );
        let result: openphone_protocol::ToolResult =
            serde_json::from_value(record.final_result.unwrap()).unwrap();
        assert_eq!(code(&result), Some("tool_not_granted"));
        assert!(
            message(&result).starts_with("withdrawn: runtime `"),
            "{result:?}"
        );
        // Nothing is left for the user to approve.
        let err = h
            .bridge
            .resolve(&operator(), id, ConfirmDecision::Approve)
            .await
            .unwrap_err();
        assert_eq!(err.code().as_str(), "pending_confirmation_not_found");
    }
    for id in [&of_mcp, &of_operator] {
        let record = h.bridge.store().get_confirmation(id).unwrap().unwrap();
        assert_eq!(record.state, ConfirmationState::Pending, "{id}");
    }
    assert_eq!(h.actions(), 0);
}
