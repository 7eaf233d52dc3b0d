//! `ToolBridge::explain`: a dry run that writes nothing and agrees with what `invoke` decides;
//! the explanation every denied or waiting result carries.

use std::collections::BTreeMap;

use openphone_core::{BridgeConfig, explanation_of};
use openphone_policy::{Autonomy, Context, ExposureGrants, RuntimeAuthorisation};
use openphone_protocol::endpoint::{Explanation, PolicyChangeKind, PolicyOutcome};
use openphone_protocol::{ErrorCode, ToolRequest, ToolStatus};
use serde_json::json;

use super::support::*;

fn tap(id: &str) -> ToolRequest {
    request(
        id,
        "openphone.ui.tap",
        json!({"x": 10, "y": 20, "reason": "tap"}),
    )
}

/// What the store and the phone hold: audit records, confirmations, final results, actions.
fn footprint(h: &Harness) -> (usize, usize, usize, usize) {
    let store = h.bridge.store();
    (
        store.export_audit(0, 100_000).unwrap().len(),
        store.list_confirmations(&Default::default()).unwrap().len(),
        store.count_final_results().unwrap(),
        h.actions(),
    )
}

fn explain(h: &Harness, req: ToolRequest) -> Explanation {
    h.bridge
        .explain(&hermes(), req, Context::Interactive)
        .unwrap()
}

#[tokio::test]
async fn explain_writes_nothing_and_publishes_nothing() {
    let h = Harness::new();
    // something in the log first, so "unchanged" is not "still empty"
    let first = h.call(&hermes(), open_notes("seed")).await;
    assert_eq!(first.status, ToolStatus::NeedsConfirmation);
    let before = footprint(&h);
    let mut events = h.bridge.events().subscribe();

    let requests = [
        tap("x1"),
        with(tap("x2"), |r| r.autonomy = Some("observe_only".into())),
        request("x3", "openphone.screen.get", json!({"reason": "look"})),
        request(
            "x4",
            "openphone.messages.send",
            json!({"to": "+100", "body": "hi", "reason": "reply"}),
        ),
        open_notes("seed"),
    ];
    for req in requests {
        explain(&h, req);
    }
    let bg = h
        .bridge
        .explain(&hermes(), tap("x5"), Context::job(7))
        .unwrap();
    assert_eq!(bg.decision, PolicyOutcome::Park);

    assert_eq!(footprint(&h), before);
    assert!(events.try_recv().is_err(), "no event was published");
}

#[tokio::test]
async fn explain_agrees_with_invoke_and_invoke_carries_the_same_explanation() {
    let h = Harness::new();
    let cases = [
        (
            tap("a1"),
            PolicyOutcome::Confirm,
            ToolStatus::NeedsConfirmation,
        ),
        (
            with(tap("a2"), |r| r.autonomy = Some("observe_only".into())),
            PolicyOutcome::Deny,
            ToolStatus::Denied,
        ),
        (
            request("a3", "openphone.screen.get", json!({"reason": "look"})),
            PolicyOutcome::Allow,
            ToolStatus::Ok,
        ),
        (
            request(
                "a4",
                "openphone.messages.send",
                json!({"to": "+100", "body": "hi", "reason": "reply"}),
            ),
            PolicyOutcome::Confirm,
            ToolStatus::NeedsConfirmation,
        ),
    ];
    for (req, decision, status) in cases {
        let dry = explain(&h, req.clone());
        assert_eq!(dry.decision, decision, "{}", req.tool);
        let result = h.call(&hermes(), req.clone()).await;
        assert_eq!(result.status, status, "{}: {:?}", req.tool, result.error);
        match explanation_of(&result) {
            Some(carried) => assert_eq!(carried, dry, "{}", req.tool),
            None => assert_eq!(decision, PolicyOutcome::Allow, "{}", req.tool),
        }
    }
    // the risk floor: one-shot, nothing but the floor to change
    let send = explain(
        &h,
        request(
            "a5",
            "openphone.messages.send",
            json!({"to": "+100", "body": "hi", "reason": "reply"}),
        ),
    );
    assert!(send.one_shot);
    assert_eq!(
        send.changes.iter().map(|c| c.kind).collect::<Vec<_>>(),
        [PolicyChangeKind::RiskFloor]
    );
    // a background park carries it too
    let parked = h.bridge.invoke(&hermes(), tap("a6"), Context::job(1)).await;
    assert_eq!(
        parked.error.as_ref().map(|e| e.code),
        Some(ErrorCode::BackgroundConfirmationRequired)
    );
    let carried = explanation_of(&parked).unwrap();
    assert_eq!(carried.decision, PolicyOutcome::Park);
}

#[tokio::test]
async fn an_invalid_request_answers_its_validation_error() {
    let h = Harness::new();
    let err = h
        .bridge
        .explain(
            &hermes(),
            request(
                "v1",
                "openphone.ui.tap",
                json!({"reason": "no coordinates"}),
            ),
            Context::Interactive,
        )
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::InvalidParams);
    assert!(err.1.contains('x'), "{}", err.1);
    let err = h
        .bridge
        .explain(
            &hermes(),
            request("v2", "openphone.nope", json!({"reason": "r"})),
            Context::Interactive,
        )
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::UnknownTool);
}

#[tokio::test]
async fn explain_uses_the_runtimes_current_authorisation() {
    let h = Harness::new();
    // hermes is now configured with `safe_read` only; openclaw is not configured at all
    let mut runtimes = BTreeMap::new();
    runtimes.insert(
        "hermes".to_owned(),
        RuntimeAuthorisation {
            enabled: true,
            grants: ExposureGrants::REMOTE_DEFAULT,
            max_autonomy: Autonomy::AskBeforeAction,
        },
    );
    h.bridge.set_config(BridgeConfig {
        runtimes: Some(runtimes),
        ..BridgeConfig::default()
    });
    let e = explain(&h, tap("c1"));
    assert_eq!(e.decision, PolicyOutcome::Deny);
    assert_eq!(e.changes[0].kind, PolicyChangeKind::GrantExposure);
    assert_eq!(e.changes[0].value.as_deref(), Some("dangerous"));

    let mut other = hermes();
    other.runtime = "openclaw".to_owned();
    let err = h
        .bridge
        .explain(&other, tap("c2"), Context::Interactive)
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::RuntimeNotConfigured);
}
