//! The append inside a caller's transaction, on the server named by `OPENPHONE_TEST_PG_URL`
//! (skipped, saying so, without one).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use openphone_store::AuditEntry;

use crate::testing::{connect, fresh_schema, test_url};

/// The append turns sequential scans off for its own statements only: the transaction it runs
/// in (a domain's write that audits) goes on with its own setting.
#[test]
fn an_append_inside_a_write_leaves_the_planner_settings_of_that_write_alone() {
    let Some(url) = test_url() else { return };
    let (config, _schema) = fresh_schema(&url);
    // Opening migrates the schema.
    drop(crate::PgStore::open(&config).unwrap());
    let mut client = connect(&config).unwrap();
    let entry = AuditEntry {
        audit_id: "runtime:test:1".to_owned(),
        runtime: "test".to_owned(),
        request_id: "1".to_owned(),
        ..AuditEntry::default()
    };
    for setting in ["on", "off"] {
        let mut tx = client.transaction().unwrap();
        tx.batch_execute(&format!("SET LOCAL enable_seqscan = {setting}"))
            .unwrap();
        let record = super::append_in(&mut tx, "host-c", &entry).unwrap();
        assert_eq!(record.seq, 1);
        let now: String = tx
            .query_one("SELECT current_setting('enable_seqscan')", &[])
            .unwrap()
            .get(0);
        assert_eq!(now, setting);
        tx.rollback().unwrap();
    }
}

/// What `prepare` keeps of a record is what its stored text reads back as, whether it parsed
/// that text (a proof with a float, or deeply nested) or took the record as it was.
#[test]
fn a_prepared_record_is_what_its_text_reads_back_as() {
    use serde_json::{Value, json};
    let mut deep = json!("leaf");
    for _ in 0..70 {
        deep = json!([deep]);
    }
    let proofs = [
        None,
        Some(Value::Null),
        Some(json!([{"layer": "autonomy", "verdict": "allow", "n": 3, "neg": -4}])),
        Some(json!({"ratio": 0.1, "big": 1e300, "tiny": 5e-324, "x": [1.5, 2.25]})),
        Some(json!({"s": "q\"uo\\te\n\u{1} é 😀", "u": u64::MAX, "i": i64::MIN})),
        Some(deep),
    ];
    for proof in proofs {
        let entry = AuditEntry {
            audit_id: "runtime:t:1".to_owned(),
            runtime: "t".to_owned(),
            request_id: "1".to_owned(),
            tool: Some("a \"tool\"\n".to_owned()),
            at_ms: i64::MIN,
            duration_ms: Some(i64::MAX),
            device_id: Some("phone-2".to_owned()),
            policy_proof: proof,
            ..AuditEntry::default()
        };
        let p = super::append::prepare(&entry).unwrap();
        let back: AuditEntry = serde_json::from_str(&p.text).unwrap();
        assert_eq!(p.entry, back);
        assert_eq!(p.text, serde_json::to_string(&entry).unwrap());
        assert_eq!(p.body_digest, super::append::body_digest(&back).unwrap());
    }
}

/// A proof nested deeper than the JSON parser reads is refused before it is stored, as it
/// always was (it could not be read back).
#[test]
fn a_proof_too_deep_to_read_back_is_refused() {
    let mut deep = serde_json::json!(1);
    for _ in 0..200 {
        deep = serde_json::json!([deep]);
    }
    let entry = AuditEntry {
        audit_id: "runtime:t:1".to_owned(),
        policy_proof: Some(deep),
        ..AuditEntry::default()
    };
    assert!(super::append::prepare(&entry).is_err());
}
