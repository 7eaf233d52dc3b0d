//! An audit log written at schema 5 (one text row per record, form-1 hashes) survives the
//! upgrade: it verifies, its anchors hold, it exports the same records, and new records chain
//! on from its head in the compact form.

use openphone_protocol::canonical_json;
use openphone_protocol::digest::sha256_hex;
use openphone_protocol::{Risk, ToolStatus};
use openphone_store::{
    AnchorOutcome, AuditAnchor, AuditConfirmation, AuditEntry, AuditKind, AuditProblem,
    AuditRecord, Autonomy, Caller, GENESIS_HASH, PolicyDecision, Store,
};
use pretty_assertions::assert_eq;
use rusqlite::params;
use serde_json::{Value, json};

use super::audit_size::keyless_read;
use super::support::{T0, data_dir, digest, temp};

fn old_entry(i: i64) -> AuditEntry {
    AuditEntry {
        audit_id: format!("runtime:openclaw:req-{i}"),
        kind: AuditKind::ToolRequest,
        at_ms: T0 + i,
        runtime: "openclaw".to_owned(),
        caller: Caller {
            runtime: "openclaw".to_owned(),
            transport: "websocket".to_owned(),
            principal: "token:openclaw".to_owned(),
        },
        phone_session_id: (i % 2 == 0).then(|| "phone-sess-1".to_owned()),
        runtime_session_id: Some("sess-1".to_owned()),
        request_id: format!("req-{i}"),
        idempotency_key: Some(format!("key-{i}")),
        tool: Some("openphone.url.open".to_owned()),
        risk: Some(Risk::Medium),
        mutating: Some(true),
        autonomy: Some(Autonomy::AskBeforeAction),
        decision: Some(PolicyDecision::Confirm),
        proof_digest: Some(digest(&format!("proof-{i}"))),
        policy_proof: Some(json!([{"layer": "autonomy", "kind": "confirm", "weight": 0.5}])),
        confirmation_id: Some(format!("runtime-confirm-{i}")),
        confirmation: Some(AuditConfirmation::Pending),
        status: Some(ToolStatus::NeedsConfirmation),
        error_code: Some("mutating_tool_requires_confirmation".to_owned()),
        duration_ms: None,
        params_hash: Some(format!("sha256:{}", digest(&format!("params-{i}")))),
        result_digest: None,
        device_id: None,
    }
}

/// Writes `n` records the way schema 5 did: every field a column, the proof as JSON text,
/// `hash = sha256_hex(prev_hash + "\n" + canonical_json(record without hash))`.
fn write_schema_5_log(dir: &std::path::Path, n: i64) -> Vec<AuditRecord> {
    openphone_store::testing::create_db_at_version(dir, 5).unwrap();
    let conn = rusqlite::Connection::open(dir.join("openphone.db")).unwrap();
    let mut prev = GENESIS_HASH.to_owned();
    let mut records = Vec::new();
    for i in 1..=n {
        let entry = old_entry(i);
        let mut hashed = serde_json::to_value(&entry).unwrap();
        hashed["seq"] = json!(i);
        hashed["prev_hash"] = json!(prev);
        let hash = sha256_hex(&format!("{prev}\n{}", canonical_json(&hashed).unwrap()));
        let e = &entry;
        conn.execute(
            "INSERT INTO audit_log (seq, audit_id, kind, at_ms, runtime, caller_runtime, \
             caller_transport, caller_principal, phone_session_id, runtime_session_id, \
             request_id, idempotency_key, tool, risk, mutating, autonomy, decision, \
             proof_digest, policy_proof, confirmation_id, confirmation, status, error_code, \
             duration_ms, params_hash, result_digest, prev_hash, hash) VALUES (?1, ?2, ?3, \
             ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, \
             ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28)",
            params![
                i,
                e.audit_id,
                "tool_request",
                e.at_ms,
                e.runtime,
                e.caller.runtime,
                e.caller.transport,
                e.caller.principal,
                e.phone_session_id,
                e.runtime_session_id,
                e.request_id,
                e.idempotency_key,
                e.tool,
                "medium",
                true,
                "ask_before_action",
                "confirm",
                e.proof_digest,
                e.policy_proof.as_ref().map(Value::to_string),
                e.confirmation_id,
                "pending",
                "needs_confirmation",
                e.error_code,
                e.duration_ms,
                e.params_hash,
                e.result_digest,
                prev,
                hash,
            ],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO audit_head (id, seq, hash) VALUES (1, ?1, ?2) \
             ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
            params![i, hash],
        )
        .unwrap();
        records.push(AuditRecord {
            seq: i,
            entry,
            prev_hash: prev.clone(),
            hash: hash.clone(),
        });
        prev = hash;
    }
    records
}

#[test]
fn an_old_log_verifies_exports_and_chains_on_after_the_upgrade() {
    let dir = temp();
    let written = write_schema_5_log(&data_dir(&dir), 5);
    let old_anchor = AuditAnchor {
        seq: 5,
        hash: written[4].hash.clone(),
    };
    let early_anchor = AuditAnchor {
        seq: 2,
        hash: written[1].hash.clone(),
    };

    let store = Store::open(data_dir(&dir)).unwrap();
    assert_eq!(store.audit_head().unwrap(), old_anchor);
    assert!(store.verify_audit().unwrap().is_intact());
    assert_eq!(store.export_audit(0, 100).unwrap(), written);

    // New records continue the chain from the old head, in the compact form.
    let mut new = Vec::new();
    for i in 0..4 {
        new.push(store.append_audit(&keyless_read(i)).unwrap());
    }
    assert_eq!(
        (new[0].seq, new[0].prev_hash.as_str()),
        (6, old_anchor.hash.as_str())
    );
    let report = store
        .verify_audit_anchored(&[early_anchor, old_anchor, store.audit_head().unwrap()])
        .unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.chain.checked, 9);

    // One log: pages cross from the old rows into the new ones.
    let mut all = written.clone();
    all.extend(new.iter().cloned());
    assert_eq!(store.export_audit(0, 100).unwrap(), all);
    let paged: Vec<AuditRecord> = store.audit_iter(0, 2).map(Result::unwrap).collect();
    assert_eq!(paged, all);
    assert_eq!(store.export_audit(4, 2).unwrap(), all[4..6].to_vec());
    assert_eq!(
        store.find_audit("runtime:openclaw:req-3").unwrap(),
        vec![written[2].clone()]
    );
    assert_eq!(
        store.find_audit(&new[1].entry.audit_id).unwrap(),
        vec![new[1].clone()]
    );
    drop(store);
    let reader = Store::open_read_only(data_dir(&dir)).unwrap();
    assert!(reader.verify_audit().unwrap().is_intact());
    assert_eq!(reader.export_audit(0, 100).unwrap(), all);
}

#[test]
fn tampering_on_either_side_of_the_upgrade_is_detected() {
    let edit = |dir: &tempfile::TempDir, sql: &str| {
        let conn = rusqlite::Connection::open(data_dir(dir).join("openphone.db")).unwrap();
        conn.pragma_update(None, "foreign_keys", false).unwrap();
        conn.execute_batch(sql).unwrap();
        Store::open_read_only(data_dir(dir))
            .unwrap()
            .verify_audit()
            .unwrap()
            .first_broken
            .unwrap()
    };
    let setup = || {
        let dir = temp();
        write_schema_5_log(&data_dir(&dir), 3);
        let store = Store::open(data_dir(&dir)).unwrap();
        for i in 0..3 {
            store.append_audit(&keyless_read(i)).unwrap();
        }
        dir
    };

    let dir = setup();
    let broken = edit(&dir, "UPDATE audit_log SET status = 'ok' WHERE seq = 2");
    assert_eq!(broken.seq, 2);
    assert!(matches!(broken.problem, AuditProblem::HashMismatch { .. }));

    // The last old record removed: the first new one no longer follows on.
    let dir = setup();
    let broken = edit(&dir, "DELETE FROM audit_log WHERE seq = 3");
    assert_eq!(
        (broken.seq, broken.problem),
        (4, AuditProblem::SeqGap { expected: 3 })
    );

    // Renumbered into the gap: the first new record's hash covers the old head.
    let dir = setup();
    let broken = edit(
        &dir,
        "DELETE FROM audit_log WHERE seq = 3; UPDATE audit_records SET seq = seq - 1",
    );
    assert_eq!(broken.seq, 3);
    assert!(matches!(broken.problem, AuditProblem::HashMismatch { .. }));

    // An anchor taken before the upgrade fails once the old part is rewritten.
    let dir = setup();
    let anchor = Store::open_read_only(data_dir(&dir))
        .unwrap()
        .export_audit(1, 1)
        .unwrap()
        .remove(0);
    let anchor = AuditAnchor {
        seq: anchor.seq,
        hash: anchor.hash,
    };
    edit(&dir, "UPDATE audit_log SET hash = 'x' WHERE seq = 2");
    let report = Store::open_read_only(data_dir(&dir))
        .unwrap()
        .verify_audit_anchored(&[anchor])
        .unwrap();
    assert!(matches!(
        report.anchors[0].outcome,
        AnchorOutcome::Unverifiable { broken_seq: 2 }
    ));
}

/// Found in review: the offline tools of a newer binary (`audit verify`, `export`, `head`)
/// open a database read-only without migrating it; one the running older daemon still keeps
/// at schema 5 has no compact tables, and they failed with "no such table".
#[test]
fn offline_tools_read_a_database_not_yet_migrated() {
    let dir = temp();
    write_schema_5_log(&data_dir(&dir), 3);
    let reader = Store::open_read_only(data_dir(&dir)).unwrap();
    let report = reader.verify_audit().unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.checked, 3);
    let all = reader.export_audit(0, 10).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(reader.find_audit(&all[1].entry.audit_id).unwrap().len(), 1);
    let head = reader.audit_head().unwrap();
    assert_eq!((head.seq, head.hash.as_str()), (3, all[2].hash.as_str()));
    let anchored = reader.verify_audit_anchored(&[head]).unwrap();
    assert!(anchored.is_intact(), "{anchored:?}");
}
