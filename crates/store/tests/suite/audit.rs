//! The hash-chained audit log: append, export, verify, tamper detection.

use openphone_protocol::digest::sha256_hex;
use openphone_protocol::{Risk, ToolStatus, canonical_json};
use openphone_store::{
    AuditConfirmation, AuditEntry, AuditKind, AuditRecord, Autonomy, Caller, GENESIS_HASH,
    PolicyDecision, Store, StoreError,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{T0, digest, open, temp};

pub(super) fn entry(i: i64) -> AuditEntry {
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
        device_id: None,
    }
}

pub(super) fn fill(store: &Store, n: i64) {
    for i in 1..=n {
        store.append_audit(&entry(i)).unwrap();
    }
}

/// The form-2 hash, computed from the record as exported (what an outside verifier does):
/// `sha256_hex(prev_hash + "\n" + seq + "\n" + sha256_hex(canonical_json(body)))`, the body
/// being the record without `seq`, `prev_hash`, `hash` and `policy_proof`, plus
/// `policy_proof_sha256`.
pub fn documented_hash(record: &AuditRecord) -> String {
    let mut body = serde_json::to_value(&record.entry).unwrap();
    let object = body.as_object_mut().unwrap();
    let proof = object.remove("policy_proof").unwrap();
    let proof_sha = match proof {
        Value::Null => Value::Null,
        proof => Value::String(sha256_hex(&canonical_json(&proof).unwrap())),
    };
    object.insert("policy_proof_sha256".to_owned(), proof_sha);
    let body_digest = sha256_hex(&canonical_json(&body).unwrap());
    sha256_hex(&format!(
        "{}\n{}\n{body_digest}",
        record.prev_hash, record.seq
    ))
}

#[test]
fn append_links_records_with_the_documented_hash() {
    let dir = temp();
    let store = open(&dir);
    let first = store.append_audit(&entry(1)).unwrap();
    assert_eq!(first.seq, 1);
    assert_eq!(first.prev_hash, GENESIS_HASH);
    assert_eq!(first.entry, entry(1));
    assert_eq!(first.hash, documented_hash(&first));

    let second = store.append_audit(&entry(2)).unwrap();
    assert_eq!(
        (second.seq, second.prev_hash.as_str()),
        (2, first.hash.as_str())
    );
    assert_eq!(second.hash, documented_hash(&second));

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
    assert_eq!(third.hash, documented_hash(&third));

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
        vec![second.clone()]
    );
    // What was returned is what reads back, `prev_hash` included.
    assert_eq!(
        store.export_audit(0, 10).unwrap(),
        vec![first, second, third, fourth]
    );
}

#[test]
fn every_field_form_reads_back_as_written() {
    let dir = temp();
    let store = open(&dir);
    let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
    let proof = json!([{"layer": "autonomy", "kind": "allow", "reason": "read", "n": 1.5}]);
    let proof_digest = sha256_hex(&canonical_json(&proof).unwrap());
    let mut variants = Vec::new();
    // A UUID request id and phone session, the derived audit id, the key = the request id,
    // the proof digest of the proof itself (bare and prefixed).
    let mut e = entry(1);
    e.request_id = uuid.to_owned();
    e.audit_id = format!("runtime:openclaw:{uuid}");
    e.idempotency_key = Some(uuid.to_owned());
    e.phone_session_id = Some(uuid.to_owned());
    e.policy_proof = Some(proof.clone());
    e.proof_digest = Some(proof_digest.clone());
    variants.push(e.clone());
    e.proof_digest = Some(format!("sha256:{proof_digest}"));
    variants.push(e.clone());
    // An upper-case UUID stays text; an audit id that is not derived; no key; bare digests.
    let mut e = entry(2);
    e.request_id = uuid.to_uppercase();
    e.audit_id = "custom-audit-id".to_owned();
    e.idempotency_key = None;
    e.params_hash = Some(digest("p"));
    e.result_digest = Some(format!("sha256:{}", digest("r")));
    variants.push(e);
    // A proof digest without a proof, a proof without a digest, an empty request id.
    let mut e = entry(3);
    e.policy_proof = None;
    variants.push(e);
    let mut e = entry(4);
    e.proof_digest = None;
    e.request_id = String::new();
    e.audit_id = "runtime:openclaw:".to_owned();
    variants.push(e);
    // A proof digest that names another proof than the one given: both kept as given.
    let mut e = entry(5);
    e.policy_proof = Some(json!({"resolved_by": "operator"}));
    e.proof_digest = Some(proof_digest);
    variants.push(e);
    for v in &variants {
        let written = store.append_audit(v).unwrap();
        assert_eq!(&written.entry, v);
    }
    let back: Vec<AuditEntry> = store
        .export_audit(0, 100)
        .unwrap()
        .into_iter()
        .map(|r| r.entry)
        .collect();
    assert_eq!(back, variants);
    assert!(store.verify_audit().unwrap().is_intact());
    assert_eq!(
        store
            .find_audit(&format!("runtime:openclaw:{uuid}"))
            .unwrap()
            .len(),
        2
    );
    assert_eq!(store.find_audit("custom-audit-id").unwrap().len(), 1);
    assert_eq!(store.find_audit("runtime:openclaw:").unwrap().len(), 1);
    assert_eq!(store.find_audit("runtime:other:req-1").unwrap().len(), 0);
}

/// A caller that names the digest of a proof it has used before for another proof gets its
/// record stored as given: the cached proof is trusted only when equal by value.
#[test]
fn a_proof_digest_is_trusted_only_for_the_proof_it_was_checked_against() {
    let dir = temp();
    let store = open(&dir);
    let proof = json!([{"layer": "tool_policy", "kind": "allow"}]);
    let digest_of_proof = sha256_hex(&canonical_json(&proof).unwrap());
    let mut honest = entry(1);
    honest.policy_proof = Some(proof);
    honest.proof_digest = Some(digest_of_proof.clone());
    store.append_audit(&honest).unwrap();
    let mut other = entry(2);
    other.policy_proof = Some(json!([{"layer": "tool_policy", "kind": "deny"}]));
    other.proof_digest = Some(digest_of_proof);
    store.append_audit(&other).unwrap();
    let back = store.export_audit(0, 10).unwrap();
    assert_eq!(back[0].entry, honest);
    assert_eq!(back[1].entry, other);
    assert!(store.verify_audit().unwrap().is_intact());
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
    // Pages link up: each record's prev_hash is the hash of the one before.
    assert_eq!(all[0].prev_hash, GENESIS_HASH);
    for pair in all.windows(2) {
        assert_eq!(pair[1].prev_hash, pair[0].hash);
    }
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
}
