//! The audit log on SQLite's files: tamper detection by editing the database file (the
//! compact rows, the interned shapes and proofs) and a read-only store next to a daemon. The
//! PostgreSQL twins of the tamper tests are in `crates/store-pg/tests/conformance/audit_pg.rs`.

use openphone_protocol::canonical_json;
use openphone_protocol::digest::sha256_hex;
use openphone_store::{AuditProblem, BrokenRecord, Store};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::audit::fill;
use super::support::{data_dir, digest, open, temp};

/// A hand-made connection to the database file, as someone editing it would open one: foreign
/// keys off (this build of SQLite turns them on by default).
fn raw(dir: &tempfile::TempDir) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(data_dir(dir).join("openphone.db")).unwrap();
    conn.pragma_update(None, "foreign_keys", false).unwrap();
    conn
}

#[test]
fn export_and_verify_work_on_a_read_only_store() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 7);
    // Read-only store (offline verify / export next to a daemon).
    let reader = Store::open_read_only(data_dir(&dir)).unwrap();
    assert_eq!(reader.audit_iter(4, 100).count(), 3);
    assert!(reader.verify_audit().unwrap().is_intact());
}

/// The first broken record after `sql` ran on the database file, read by a fresh read-only
/// store (nothing cached).
fn broken_after(dir: &tempfile::TempDir, sql: &str) -> BrokenRecord {
    raw(dir).execute_batch(sql).unwrap();
    let report = Store::open_read_only(data_dir(dir))
        .unwrap()
        .verify_audit()
        .unwrap();
    report
        .first_broken
        .unwrap_or_else(|| panic!("still intact after {sql}"))
}

#[test]
fn editing_a_record_breaks_the_chain_at_that_record() {
    for sql in [
        "UPDATE audit_records SET duration_ms = 99 WHERE seq = 4",
        "UPDATE audit_records SET at_ms = at_ms + 1 WHERE seq = 4",
        "UPDATE audit_records SET request_id = 'forged' WHERE seq = 4",
        "UPDATE audit_records SET params_hash = randomblob(32) WHERE seq = 4",
        "UPDATE audit_records SET confirmation_id = NULL WHERE seq = 4",
    ] {
        let dir = temp();
        let store = open(&dir);
        fill(&store, 6);
        assert!(store.verify_audit().unwrap().is_intact());
        let broken = broken_after(&dir, sql);
        assert_eq!(broken.seq, 4, "{sql}");
        assert!(
            matches!(broken.problem, AuditProblem::HashMismatch { .. }),
            "{sql}: {broken:?}"
        );
        if !sql.contains("request_id") {
            assert_eq!(broken.audit_id.as_deref(), Some("runtime:openclaw:req-4"));
            assert!(
                broken
                    .to_string()
                    .contains("record seq 4 (runtime:openclaw:req-4)"),
                "{broken}"
            );
        }
    }
}

#[test]
fn a_row_that_contradicts_its_shape_does_not_decode() {
    for sql in [
        // The shape says the audit id is derived: a stored one is not part of the record.
        "UPDATE audit_records SET audit_id = 'runtime:openclaw:req-3' WHERE seq = 3",
        "UPDATE audit_records SET idempotency_key = NULL WHERE seq = 3",
        "UPDATE audit_records SET proof_digest = NULL WHERE seq = 3",
        "UPDATE audit_records SET phone_session_id = x'01' WHERE seq = 3",
        "UPDATE audit_records SET params_hash = x'00' WHERE seq = 3",
        "UPDATE audit_records SET hash = x'00' WHERE seq = 3",
        "UPDATE audit_records SET shape = 12345 WHERE seq = 3",
    ] {
        let dir = temp();
        let store = open(&dir);
        fill(&store, 4);
        let broken = broken_after(&dir, sql);
        assert_eq!(broken.seq, 3, "{sql}");
        assert!(
            matches!(broken.problem, AuditProblem::Undecodable { .. }),
            "{sql}: {broken:?}"
        );
    }
}

#[test]
fn editing_an_interned_shape_breaks_its_first_record() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 6);
    // Records 2, 4, 6 share a shape (tool requests); 1, 3, 5 another.
    let broken = broken_after(
        &dir,
        "UPDATE audit_shapes SET shape = replace(shape, '\"status\":\"needs_confirmation\"',          '\"status\":\"ok\"') WHERE shape LIKE '%\"kind\":\"tool_request\"%'",
    );
    assert_eq!(broken.seq, 2);
    let AuditProblem::Undecodable { detail } = &broken.problem else {
        panic!("{broken:?}");
    };
    assert!(detail.contains("does not match its content"), "{detail}");

    // Pointing a record at a well-formed shape of other content breaks its hash.
    let dir = temp();
    let store = open(&dir);
    fill(&store, 6);
    let broken = broken_after(
        &dir,
        "UPDATE audit_records SET shape = (SELECT shape FROM audit_records WHERE seq = 1)          WHERE seq = 4",
    );
    assert_eq!(broken.seq, 4);
    assert!(
        matches!(broken.problem, AuditProblem::HashMismatch { .. }),
        "{broken:?}"
    );

    // A missing shape (foreign keys are off on a hand-made connection).
    let dir = temp();
    let store = open(&dir);
    fill(&store, 3);
    let broken = broken_after(&dir, "DELETE FROM audit_shapes");
    assert_eq!(broken.seq, 1);
    assert!(broken.to_string().contains("missing"), "{broken}");
}

#[test]
fn editing_an_interned_proof_is_detected() {
    // Every record of `fill` carries the same proof: an edit breaks the first of them.
    let dir = temp();
    let store = open(&dir);
    fill(&store, 3);
    let broken = broken_after(
        &dir,
        "UPDATE audit_proofs SET proof = '[{\"layer\":\"autonomy\",\"verdict\":\"allow\"}]'",
    );
    assert_eq!(broken.seq, 1);
    assert!(
        broken.to_string().contains("does not match its digest"),
        "{broken}"
    );
    let broken = broken_after(&dir, "UPDATE audit_proofs SET proof = 'not json'");
    assert_eq!(broken.seq, 1);
    assert!(
        matches!(broken.problem, AuditProblem::Undecodable { .. }),
        "{broken:?}"
    );
    let broken = broken_after(&dir, "DELETE FROM audit_proofs");
    assert!(broken.to_string().contains("missing"), "{broken}");
    // Replacing the proof and its key consistently breaks the records' hashes instead.
    let dir = temp();
    let store = open(&dir);
    fill(&store, 3);
    let other = json!([{"layer": "autonomy", "verdict": "allow"}]);
    let other_digest = sha256_hex(&canonical_json(&other).unwrap());
    let broken = broken_after(
        &dir,
        &format!(
            "INSERT INTO audit_proofs VALUES (x'{other_digest}', '{other}'); \
             UPDATE audit_records SET proof = x'{other_digest}' WHERE seq = 3"
        ),
    );
    assert_eq!(broken.seq, 3);
    assert!(
        matches!(broken.problem, AuditProblem::HashMismatch { .. }),
        "{broken:?}"
    );
}

#[test]
fn rewriting_a_row_with_a_fresh_hash_breaks_it() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 5);
    let broken = broken_after(
        &dir,
        &format!(
            "UPDATE audit_records SET hash = x'{}' WHERE seq = 2",
            digest("forged")
        ),
    );
    // Row 2's own hash no longer matches its content.
    assert_eq!(broken.seq, 2);
}

#[test]
fn deleting_a_middle_row_is_detected() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 5);
    let broken = broken_after(&dir, "DELETE FROM audit_records WHERE seq = 3");
    assert_eq!(broken.seq, 4);
    assert_eq!(broken.problem, AuditProblem::SeqGap { expected: 3 });
}

#[test]
fn deleting_and_renumbering_is_detected_by_the_next_hash() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 5);
    let broken = broken_after(
        &dir,
        "DELETE FROM audit_records WHERE seq = 3; \
         UPDATE audit_records SET seq = seq - 1 WHERE seq > 3",
    );
    // The old record 4, now 3: its hash covers the old record 3's hash and its old seq.
    assert_eq!(broken.seq, 3);
    assert_eq!(broken.audit_id.as_deref(), Some("runtime:openclaw:req-4"));
    assert!(
        matches!(broken.problem, AuditProblem::HashMismatch { .. }),
        "{broken:?}"
    );
}

#[test]
fn deleting_the_newest_rows_is_detected_by_the_head() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 5);
    let broken = broken_after(&dir, "DELETE FROM audit_records WHERE seq >= 4");
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
