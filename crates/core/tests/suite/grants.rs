//! Session grants (`accept_for_session`): made only after the approval is recorded and the
//! request ran; never by a confirming host; never left standing by a crash (review of issue 14).

use openphone_core::{BridgeConfig, ConfirmDecision, ConfirmingHost};
use openphone_policy::{ToolList, ToolPolicy, ToolSelector};
use openphone_protocol::ErrorCode;
use openphone_store::{Autonomy, NewPhoneSession, NewStandingApproval, Resolution};

use super::support::*;

fn session(h: &Harness, id: &str) {
    h.bridge
        .store()
        .create_session(
            &NewPhoneSession {
                phone_session_id: id.into(),
                runtime_kind: "hermes".into(),
                runtime_session_id: String::new(),
                attention_id: "attn-g".into(),
                source: "chat".into(),
                autonomy: Autonomy::AskBeforeAction,
                summary: "s".into(),
            },
            h.now(),
        )
        .unwrap();
}

fn in_session(id: &str) -> openphone_protocol::ToolRequest {
    with(open_notes(id), |r| r.phone_session_id = Some("ps-1".into()))
}

fn grants(h: &Harness) -> Vec<openphone_store::StandingApproval> {
    h.bridge.store().list_approvals(Some("hermes")).unwrap()
}

#[tokio::test]
async fn a_request_denied_after_approval_makes_no_grant() {
    let h = Harness::new();
    session(&h, "ps-1");
    let first = h.call(&hermes(), in_session("g1")).await;
    let id = confirmation_id(&first);
    // The user forbids the tool before approving: the approval cannot run it.
    h.bridge.set_config(BridgeConfig {
        tool_policy: ToolPolicy {
            global: ToolList {
                deny: vec![ToolSelector::parse("openphone.app.open").unwrap()],
                ..ToolList::default()
            },
            ..ToolPolicy::default()
        },
        runtimes: None,
    });
    let fin = h
        .bridge
        .resolve(&operator(), &id, ConfirmDecision::AcceptForSession)
        .await
        .unwrap();
    assert_eq!(code(&fin), Some("tool_not_granted"), "{fin:?}");
    assert!(
        grants(&h).is_empty(),
        "no grant for a request that did not run"
    );
}

#[tokio::test]
async fn a_confirming_host_cannot_make_a_session_grant() {
    let h = Harness::new();
    session(&h, "ps-1");
    let first = h.call(&hermes(), in_session("g2")).await;
    let id = confirmation_id(&first);
    let host = ConfirmingHost::new("hermes", "mcp_elicitation");
    let fin = h
        .bridge
        .resolve_as_host(
            &host,
            &id,
            ConfirmDecision::AcceptForSession,
            ErrorCode::UserDeniedConfirmation,
        )
        .await
        .unwrap();
    assert_eq!(fin.status, openphone_protocol::ToolStatus::Ok);
    assert!(
        grants(&h).is_empty(),
        "a host's prompt approves one request"
    );
    // The next one asks again (after the retry window: within it, the same call without a
    // key would get the approved call's result, `retry.rs`).
    h.clock.advance(RETRY_WINDOW_PASSED_MS);
    let next = h.call(&hermes(), in_session("g3")).await;
    assert_eq!(
        next.status,
        openphone_protocol::ToolStatus::NeedsConfirmation
    );
}

#[tokio::test]
async fn an_operator_grant_covers_the_next_step_and_names_itself() {
    let h = Harness::new();
    session(&h, "ps-1");
    let first = h.call(&hermes(), in_session("g4")).await;
    let id = confirmation_id(&first);
    let fin = h
        .bridge
        .resolve(&operator(), &id, ConfirmDecision::AcceptForSession)
        .await
        .unwrap();
    assert_eq!(fin.status, openphone_protocol::ToolStatus::Ok);
    let rows = grants(&h);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].confirmation_id.as_deref(), Some(id.as_str()));
    let next = h.call(&hermes(), in_session("g5")).await;
    assert_eq!(next.status, openphone_protocol::ToolStatus::Ok, "{next:?}");
}

#[tokio::test]
async fn a_grant_left_by_a_crash_before_its_outcome_is_revoked_at_start() {
    let h = Harness::new();
    session(&h, "ps-1");
    let first = h.call(&hermes(), in_session("g6")).await;
    let id = confirmation_id(&first);
    // The daemon approved, made the grant, and stopped before recording the outcome.
    let store = h.bridge.store();
    store
        .resolve(&id, Resolution::Approve, "cli:user", h.now())
        .unwrap();
    let grant = store
        .create_approval(
            &NewStandingApproval {
                runtime: "hermes".into(),
                tool: "openphone.app.open".into(),
                constraints: serde_json::json!({}),
                phone_session_id: Some("ps-1".into()),
                confirmation_id: Some(id.clone()),
                ..NewStandingApproval::default()
            },
            h.now(),
        )
        .unwrap();
    let report = h.bridge.recover().await.unwrap();
    assert_eq!(report.result_unknown, std::slice::from_ref(&id));
    let after = store.get_approval(grant.approval_id).unwrap().unwrap();
    assert!(after.revoked_at_ms.is_some() && !after.enabled, "{after:?}");
    h.clock.advance(RETRY_WINDOW_PASSED_MS);
    let next = h.call(&hermes(), in_session("g7")).await;
    assert_eq!(
        next.status,
        openphone_protocol::ToolStatus::NeedsConfirmation
    );
}
