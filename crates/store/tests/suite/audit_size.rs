//! How much database one audit record costs: a realistic keyless read (a UUID request id, the
//! seven-verdict policy proof, three digests) must stay at or below 300 bytes of database,
//! table and indexes together. A size bound is a property of the storage format, so it is
//! asserted; how fast appends are is measured by `benches/audit_append.rs`.

use openphone_protocol::digest::sha256_hex;
use openphone_protocol::{Risk, ToolStatus};
use openphone_store::{
    AuditConfirmation, AuditEntry, AuditKind, Autonomy, Caller, PolicyDecision, Store,
};
use serde_json::{Value, json};

use super::support::{T0, data_dir, open, temp};

/// A version-4-shaped UUID made from `i` (deterministic, lowercase, hyphenated).
pub fn uuid(i: u64) -> String {
    let h = sha256_hex(&format!("uuid-{i}"));
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

/// The proof a keyless read gets: all seven layers allow, each with its reason.
pub fn read_proof() -> Value {
    let verdict = |layer: &str, reason: &str| {
        json!({
            "layer": layer,
            "kind": "allow",
            "reason": reason,
            "code": null,
            "policy_detail": null,
            "source": {"kind": "policy", "layer": layer},
        })
    };
    json!([
        verdict(
            "runtime_authorisation",
            "runtime hermes is enabled, its transport websocket is allowed and it is granted the command"
        ),
        verdict("tool_policy", "no tool-policy entry refuses the command"),
        verdict(
            "platform_support",
            "the device backend supports the command"
        ),
        verdict(
            "autonomy",
            "read: runs in every mode (mode ask_before_action)"
        ),
        verdict(
            "risk_floor",
            "low risk and no `confirmation: always`: the floor does not apply"
        ),
        verdict("background_context", "interactive context"),
        verdict("standing_approvals", "read: nothing to approve"),
    ])
}

/// The audit record of the `i`-th keyless `openphone.device.status` call, as the bridge
/// writes it.
pub fn keyless_read(i: u64) -> AuditEntry {
    let request_id = uuid(i);
    let proof = read_proof();
    let proof_digest = sha256_hex(&openphone_protocol::canonical_json(&proof).unwrap());
    AuditEntry {
        audit_id: format!("runtime:hermes:{request_id}"),
        kind: AuditKind::ToolRequest,
        at_ms: T0 + i64::try_from(i).unwrap() * 3,
        runtime: "hermes".to_owned(),
        caller: Caller {
            runtime: "hermes".to_owned(),
            transport: "websocket".to_owned(),
            principal: "token:hermes".to_owned(),
        },
        phone_session_id: None,
        runtime_session_id: Some("global".to_owned()),
        idempotency_key: Some(request_id.clone()),
        request_id,
        tool: Some("openphone.device.status".to_owned()),
        risk: Some(Risk::Low),
        mutating: Some(false),
        autonomy: Some(Autonomy::AskBeforeAction),
        decision: Some(PolicyDecision::Allow),
        proof_digest: Some(proof_digest),
        policy_proof: Some(proof),
        confirmation_id: None,
        confirmation: Some(AuditConfirmation::NotRequired),
        status: Some(ToolStatus::Ok),
        error_code: None,
        duration_ms: Some(i64::try_from(i % 7).unwrap()),
        params_hash: Some(format!("sha256:{}", sha256_hex("{}"))),
        result_digest: Some(format!("sha256:{}", sha256_hex(&format!("result-{i}")))),
        device_id: None,
    }
}

/// Bytes of every b-tree page in use (tables and indexes), through `dbstat`.
fn db_bytes(store: &Store) -> u64 {
    let conn = rusqlite::Connection::open_with_flags(
        store.db_path().unwrap(),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    conn.query_row("SELECT SUM(pgsize) FROM dbstat", [], |row| {
        row.get::<_, i64>(0)
    })
    .map(|n| u64::try_from(n).unwrap())
    .unwrap()
}

#[test]
fn a_keyless_read_costs_at_most_300_bytes_of_database() {
    let dir = temp();
    let store = open(&dir);
    // Warm up: the interned parts (shape, proof) are written once.
    for i in 0..100 {
        store.append_audit(&keyless_read(i)).unwrap();
    }
    let before = db_bytes(&store);
    const N: u64 = 2_000;
    for i in 100..100 + N {
        store.append_audit(&keyless_read(i)).unwrap();
    }
    let after = db_bytes(&store);
    let per_record = (after - before) / N;
    eprintln!("audit storage: {per_record} bytes per keyless read record ({N} records)");
    assert!(
        per_record <= 300,
        "{per_record} bytes per keyless read record (limit 300)"
    );
    // The records read back are the records written, and the chain verifies.
    assert!(store.verify_audit().unwrap().is_intact());
    let back = store.export_audit(100, 1).unwrap().remove(0);
    assert_eq!(back.entry, keyless_read(100));
    drop(store);
    let reader = Store::open_read_only(data_dir(&dir)).unwrap();
    assert_eq!(reader.audit_iter(0, 500).count(), 2_100);
}
