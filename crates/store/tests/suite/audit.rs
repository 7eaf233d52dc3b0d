//! The hash-chained audit log: append, export, verify, tamper detection.

use openphone_protocol::digest::sha256_hex;
use openphone_protocol::{Risk, ToolStatus, canonical_json};
use openphone_store::{
    AuditConfirmation, AuditEntry, AuditKind, AuditProblem, Autonomy, Caller, GENESIS_HASH,
    PolicyDecision, Store, StoreError,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{T0, data_dir, digest, open, temp};

fn entry(i: i64) -> AuditEntry {
    AuditEntry {
        audit_id: format!("runtime:openclaw:req-{i}"),
        kind: if i % 2 == 0 {
            AuditKind::ToolRequest
        } else {
            AuditKind::ConfirmationTransition
        },
        at_ms: T0 + i,
        runtime: "openclaw".to_owned(),
        caller: Caller {
            runtime: "openclaw".to_owned(),
            transport: "ws".to_owned(),
            principal: "device-1".to_owned(),
        },
        phone_session_id: Some("phone-sess-1".to_owned()),
        runtime_session_id: Some("sess-1".to_owned()),
        request_id: format!("req-{i}"),
        idempotency_key: Some(format!("key-{i}")),
        tool: Some("openphone.url.open".to_owned()),
        risk: Some(Risk::Medium),
        mutating: Some(true),
        autonomy: Some(Autonomy::AskBeforeAction),
        decision: Some(PolicyDecision::Confirm),
        proof_digest: Some(digest(&format!("proof-{i}"))),
        policy_proof: Some(
            json!([{"layer": "autonomy", "verdict": "confirm", "reason": "ask_before_action", "weight": 0.5}]),
        ),
        confirmation_id: Some(format!("runtime-confirm-{i}")),
        confirmation: Some(AuditConfirmation::Pending),
        status: Some(ToolStatus::NeedsConfirmation),
        error_code: Some("mutating_tool_requires_confirmation".to_owned()),
        duration_ms: Some(3),
        params_hash: Some(format!("sha256:{}", digest(&format!("params-{i}")))),
        result_digest: None,
    }
}

fn fill(store: &Store, n: i64) {
    for i in 1..=n {
        store.append_audit(&entry(i)).unwrap();
    }
}

fn raw(dir: &tempfile::TempDir) -> rusqlite::Connection {
    rusqlite::Connection::open(data_dir(dir).join("openphone.db")).unwrap()
}

#[test]
fn append_links_records_with_the_documented_hash() {
    let dir = temp();
    let store = open(&dir);
    let first = store.append_audit(&entry(1)).unwrap();
    assert_eq!(first.seq, 1);
    assert_eq!(first.prev_hash, GENESIS_HASH);
    assert_eq!(first.entry, entry(1));
    // hash = sha256_hex(prev_hash + "\n" + canonical_json(row without hash))
    let mut body = serde_json::to_value(&first).unwrap();
    body.as_object_mut().unwrap().remove("hash");
    let expected = sha256_hex(&format!(
        "{GENESIS_HASH}\n{}",
        canonical_json(&body).unwrap()
    ));
    assert_eq!(first.hash, expected);

    let second = store.append_audit(&entry(2)).unwrap();
    assert_eq!(
        (second.seq, second.prev_hash.as_str()),
        (2, first.hash.as_str())
    );

    // Minimal entry (validation failure before decide): mostly None.
    let minimal = AuditEntry {
        audit_id: "runtime:openclaw:".to_owned(),
        at_ms: T0,
        runtime: "openclaw".to_owned(),
        status: Some(ToolStatus::Error),
        error_code: Some("missing_request_id".to_owned()),
        ..AuditEntry::default()
    };
    let third = store.append_audit(&minimal).unwrap();
    assert_eq!(third.entry, minimal);

    let report = store.verify_audit().unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(
        (report.checked, report.last_seq, report.last_hash.as_str()),
        (3, 3, third.hash.as_str())
    );

    // Durable across reopen, and appending continues the chain.
    drop(store);
    let store = open(&dir);
    let fourth = store.append_audit(&entry(4)).unwrap();
    assert_eq!(
        (fourth.seq, fourth.prev_hash.as_str()),
        (4, third.hash.as_str())
    );
    assert!(store.verify_audit().unwrap().is_intact());
    assert_eq!(
        store.find_audit("runtime:openclaw:req-2").unwrap(),
        vec![second]
    );
}

#[test]
fn raw_values_in_digest_fields_are_refused() {
    let dir = temp();
    let store = open(&dir);
    let mut e = entry(1);
    e.params_hash = Some("{\"text\":\"hello mum\"}".to_owned());
    assert!(matches!(
        store.append_audit(&e).unwrap_err(),
        StoreError::Invalid {
            what: "audit params_hash",
            ..
        }
    ));
    let mut e = entry(1);
    e.result_digest = Some("the result".to_owned());
    assert!(matches!(
        store.append_audit(&e).unwrap_err(),
        StoreError::Invalid { .. }
    ));
    let mut e = entry(1);
    e.audit_id.clear();
    assert!(matches!(
        store.append_audit(&e).unwrap_err(),
        StoreError::Invalid { .. }
    ));
    assert_eq!(store.verify_audit().unwrap().checked, 0);
}

#[test]
fn empty_log_verifies() {
    let dir = temp();
    let store = open(&dir);
    let report = store.verify_audit().unwrap();
    assert!(report.is_intact());
    assert_eq!(
        (report.checked, report.last_seq, report.last_hash.as_str()),
        (0, 0, GENESIS_HASH)
    );
}

#[test]
fn export_pages_and_iterates_as_jsonl() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 7);
    let page = store.export_audit(0, 3).unwrap();
    assert_eq!(page.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
    let page = store.export_audit(5, 10).unwrap();
    assert_eq!(page.iter().map(|r| r.seq).collect::<Vec<_>>(), [6, 7]);
    let all: Vec<_> = store.audit_iter(0, 2).map(Result::unwrap).collect();
    assert_eq!(all.len(), 7);
    let lines: Vec<String> = all
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    let back: openphone_store::AuditRecord = serde_json::from_str(&lines[3]).unwrap();
    assert_eq!(back, all[3]);
    let value: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(value["caller"]["transport"], "ws");
    assert_eq!(value["confirmation"], "pending");
    assert_eq!(value["status"], "needs_confirmation");
    assert_eq!(value["kind"], "confirmation_transition");
    // Read-only store (offline verify / export next to a daemon).
    let reader = Store::open_read_only(data_dir(&dir)).unwrap();
    assert_eq!(reader.audit_iter(4, 100).count(), 3);
    assert!(reader.verify_audit().unwrap().is_intact());
}

#[test]
fn tampering_with_one_row_breaks_the_chain_at_that_row() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 6);
    assert!(store.verify_audit().unwrap().is_intact());
    raw(&dir)
        .execute("UPDATE audit_log SET status = 'ok' WHERE seq = 4", [])
        .unwrap();
    let report = Store::open_read_only(data_dir(&dir))
        .unwrap()
        .verify_audit()
        .unwrap();
    let broken = report.first_broken.clone().unwrap();
    assert_eq!(broken.seq, 4);
    assert_eq!(broken.audit_id.as_deref(), Some("runtime:openclaw:req-4"));
    assert!(
        matches!(broken.problem, AuditProblem::HashMismatch { .. }),
        "{broken:?}"
    );
    assert_eq!((report.checked, report.last_seq), (4, 3));
    assert!(
        broken
            .to_string()
            .contains("record seq 4 (runtime:openclaw:req-4)"),
        "{broken}"
    );
}

#[test]
fn tampering_with_the_proof_json_is_detected() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 3);
    raw(&dir)
        .execute("UPDATE audit_log SET policy_proof = '[{\"layer\":\"autonomy\",\"verdict\":\"allow\"}]' WHERE seq = 2", [])
        .unwrap();
    let broken = store.verify_audit().unwrap().first_broken.unwrap();
    assert_eq!(broken.seq, 2);
    raw(&dir)
        .execute(
            "UPDATE audit_log SET policy_proof = 'not json' WHERE seq = 2",
            [],
        )
        .unwrap();
    let broken = store.verify_audit().unwrap().first_broken.unwrap();
    assert_eq!(broken.seq, 2);
    assert!(
        matches!(broken.problem, AuditProblem::Undecodable { .. }),
        "{broken:?}"
    );
}

#[test]
fn rewriting_a_row_with_a_fresh_hash_breaks_the_next_link() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 5);
    raw(&dir)
        .execute(
            "UPDATE audit_log SET hash = ?1 WHERE seq = 2",
            [digest("forged")],
        )
        .unwrap();
    let broken = store.verify_audit().unwrap().first_broken.unwrap();
    // Row 2's own hash no longer matches its content.
    assert_eq!(broken.seq, 2);
}

#[test]
fn deleting_a_middle_row_is_detected() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 5);
    raw(&dir)
        .execute("DELETE FROM audit_log WHERE seq = 3", [])
        .unwrap();
    let broken = store.verify_audit().unwrap().first_broken.unwrap();
    assert_eq!(broken.seq, 4);
    assert_eq!(broken.audit_id.as_deref(), Some("runtime:openclaw:req-4"));
    assert_eq!(broken.problem, AuditProblem::SeqGap { expected: 3 });
}

#[test]
fn deleting_and_renumbering_is_detected_by_the_link() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 5);
    let conn = raw(&dir);
    conn.execute("DELETE FROM audit_log WHERE seq = 3", [])
        .unwrap();
    conn.execute("UPDATE audit_log SET seq = seq - 1 WHERE seq > 3", [])
        .unwrap();
    let broken = store.verify_audit().unwrap().first_broken.unwrap();
    assert_eq!(broken.seq, 3);
    assert!(
        matches!(broken.problem, AuditProblem::PrevHashMismatch { .. }),
        "{broken:?}"
    );
}

#[test]
fn deleting_the_newest_rows_is_detected_by_the_head() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 5);
    raw(&dir)
        .execute("DELETE FROM audit_log WHERE seq >= 4", [])
        .unwrap();
    let report = store.verify_audit().unwrap();
    let broken = report.first_broken.unwrap();
    assert_eq!(broken.seq, 5);
    assert_eq!(broken.audit_id, None);
    assert!(
        matches!(
            broken.problem,
            AuditProblem::HeadMismatch {
                head_seq: 5,
                last_seq: 3,
                ..
            }
        ),
        "{broken:?}"
    );
}
