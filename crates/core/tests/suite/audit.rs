//! The hash-chained audit log as the bridge writes it.

use openphone_core::ConfirmDecision;
use openphone_store::{AuditConfirmation, AuditKind};
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn every_request_and_transition_is_audited_without_raw_params() {
    let h = Harness::new();
    let secret = "meet me at the secret place";
    let req = request(
        "a1",
        "openphone.messages.draft",
        json!({"body": secret, "to": "+15550001", "reason": "draft"}),
    );
    let id = confirmation_id(&h.call(&hermes(), req).await);
    h.bridge
        .resolve(&operator(), &id, ConfirmDecision::Approve)
        .await
        .unwrap();
    h.call(
        &hermes(),
        request("a2", "openphone.screen.get", json!({"reason": "look"})),
    )
    .await;

    let records = h.bridge.store().export_audit(0, 100).unwrap();
    let kinds: Vec<(AuditKind, Option<AuditConfirmation>)> = records
        .iter()
        .map(|r| (r.entry.kind, r.entry.confirmation))
        .collect();
    assert_eq!(
        kinds,
        [
            (AuditKind::ToolRequest, Some(AuditConfirmation::Pending)),
            (
                AuditKind::ConfirmationTransition,
                Some(AuditConfirmation::Approved)
            ),
            (
                AuditKind::ConfirmationTransition,
                Some(AuditConfirmation::Completed)
            ),
            (AuditKind::ToolRequest, Some(AuditConfirmation::NotRequired)),
        ]
    );
    let first = &records[0].entry;
    assert_eq!(first.audit_id, "runtime:hermes:a1");
    assert_eq!(first.tool.as_deref(), Some("openphone.messages.draft"));
    assert_eq!(first.mutating, Some(true));
    assert!(first.params_hash.as_deref().unwrap().starts_with("sha256:"));
    assert!(first.proof_digest.is_some());
    assert_eq!(
        first
            .policy_proof
            .as_ref()
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        7
    );
    let text = serde_json::to_string(&records).unwrap();
    assert!(
        !text.contains(secret),
        "raw params must never reach the audit log"
    );
    assert!(!text.contains("+15550001"));
    assert!(h.bridge.store().verify_audit().unwrap().is_intact());
}

#[tokio::test]
async fn tampering_with_one_row_breaks_verification_at_that_row() {
    let h = Harness::new();
    for i in 0..4 {
        h.call(
            &hermes(),
            request(
                &format!("t{i}"),
                "openphone.screen.get",
                json!({"reason": "look"}),
            ),
        )
        .await;
    }
    let db = h.bridge.store().db_path().unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let changed = conn
        .execute(
            "UPDATE audit_records SET request_id = 't9' WHERE seq = 3",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    let report = h.bridge.store().verify_audit().unwrap();
    assert!(!report.is_intact());
    assert_eq!(report.first_broken.as_ref().unwrap().seq, 3);
}
