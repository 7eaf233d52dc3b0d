//! Tests of the compact audit storage: the encodings round-trip, a rolled-back append leaves
//! nothing the next one could take for granted, a shape's id is a function of its text.

use openphone_protocol::ToolStatus;
use rusqlite::Connection;
use rusqlite::types::Value as SqlValue;

use super::append::{append_prepared, prepare};
use super::encoding::{encode_id, join_digest, split_digest, to_hex, uuid_text};
use super::layout::{RECORD_COLUMNS, digest_shape_id, shape_id};
use super::proofs::proof_digest;
use super::read::Interned;
use crate::audit::AuditEntry;

#[test]
fn uuids_round_trip_and_only_canonical_ones_are_packed() {
    let id = "0f8fad5b-d9cb-469f-a165-70867728950e";
    let SqlValue::Blob(bytes) = encode_id(id) else {
        panic!("a canonical UUID is packed");
    };
    assert_eq!(uuid_text(&bytes), id);
    for text in [
        "0F8FAD5B-D9CB-469F-A165-70867728950E",
        "0f8fad5bd9cb469fa16570867728950e",
        "req-1",
        "",
        "0f8fad5b-d9cb-469f-a165-70867728950e ",
    ] {
        assert_eq!(encode_id(text), SqlValue::Text(text.to_owned()), "{text:?}");
    }
}

#[test]
fn digests_keep_their_text_form() {
    let hex = "ab".repeat(32);
    for text in [hex.clone(), format!("sha256:{hex}")] {
        let (bytes, form) = split_digest(&text).unwrap();
        assert_eq!(join_digest(&bytes, form), text);
    }
    assert!(split_digest(&"AB".repeat(32)).is_none());
    assert!(split_digest("sha256:xyz").is_none());
}

fn migrated() -> Connection {
    let mut conn = Connection::open_in_memory().unwrap();
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    crate::migrations::migrate(&mut conn, crate::SCHEMA_VERSION).unwrap();
    conn
}

fn read_entry(i: i64) -> AuditEntry {
    let proof = serde_json::json!([{"layer": "autonomy", "kind": "allow", "i": i % 2}]);
    AuditEntry {
        audit_id: format!("runtime:r:req-{i}"),
        runtime: "r".to_owned(),
        request_id: format!("req-{i}"),
        proof_digest: Some(to_hex(&proof_digest(&proof).unwrap())),
        policy_proof: Some(proof),
        status: Some(ToolStatus::Ok),
        ..AuditEntry::default()
    }
}

fn all(conn: &Connection) -> Vec<AuditEntry> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {RECORD_COLUMNS} FROM audit_records ORDER BY seq"
        ))
        .unwrap();
    let mut rows = stmt.query([]).unwrap();
    let mut interned = Interned::new(conn);
    let mut out = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        out.push(interned.decode(row).unwrap().decoded.unwrap().entry);
    }
    out
}

/// A write that interned a shape and a proof and was then rolled back (its savepoint, or
/// the batch's whole transaction) leaves nothing behind that the next append could take
/// for granted: it interns them again.
#[test]
fn an_append_after_a_rolled_back_one_interns_again() {
    let conn = migrated();
    for undo in ["ROLLBACK TO job; RELEASE job", "ROLLBACK"] {
        conn.execute_batch(if undo == "ROLLBACK" {
            "BEGIN"
        } else {
            "SAVEPOINT job"
        })
        .unwrap();
        append_prepared(&conn, prepare(read_entry(1)).unwrap()).unwrap();
        conn.execute_batch(undo).unwrap();
        let count: i64 = conn
            .query_row("SELECT COUNT(*) FROM audit_shapes", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 0, "{undo}");
    }
    for i in 1..=4 {
        append_prepared(&conn, prepare(read_entry(i)).unwrap()).unwrap();
    }
    assert_eq!(all(&conn), (1..=4).map(read_entry).collect::<Vec<_>>());
    let (shapes, proofs): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT COUNT(*) FROM audit_shapes), (SELECT COUNT(*) FROM audit_proofs)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((shapes, proofs), (1, 2));
}

#[test]
fn a_shape_id_is_a_function_of_its_text() {
    let a = prepare(read_entry(1)).unwrap();
    let b = prepare(read_entry(3)).unwrap();
    assert_eq!((a.shape_id, &a.shape_text), (b.shape_id, &b.shape_text));
    assert_eq!(a.shape_id, shape_id(&a.shape_text));
    let mut other = read_entry(1);
    other.status = Some(ToolStatus::Error);
    assert_ne!(prepare(other).unwrap().shape_id, a.shape_id);
}

#[test]
fn the_shape_id_cache_answers_what_the_digest_does() {
    let texts: Vec<String> = (0..300).map(|i| format!("{{\"kind\":\"k{i}\"}}")).collect();
    // Twice over more texts than the cache holds: first answers, remembered answers, and
    // answers after the cache was emptied all equal the digest.
    for _ in 0..2 {
        for text in &texts {
            assert_eq!(shape_id(text), digest_shape_id(text), "{text}");
        }
    }
    assert_ne!(shape_id(&texts[0]), shape_id(&texts[1]));
}

#[test]
fn a_derived_audit_id_is_recognised_in_place() {
    let mut entry = read_entry(1);
    for (runtime, request_id) in [
        ("hermes", "r-1"),
        ("a:b", "c"),
        ("a", "b:c"),
        ("", ""),
        ("x", ""),
    ] {
        entry.runtime = runtime.to_owned();
        entry.request_id = request_id.to_owned();
        entry.audit_id = openphone_protocol::audit_id(runtime, request_id);
        assert!(
            super::append::is_derived_id(&entry),
            "{runtime:?} {request_id:?}"
        );
        for other in [
            format!("{}x", entry.audit_id),
            format!("runtime:{runtime}{request_id}"),
            format!("runtime:{runtime}:{request_id}").replacen("runtime:", "runtime;", 1),
        ] {
            entry.audit_id = other;
            assert!(
                !super::append::is_derived_id(&entry),
                "{:?}",
                entry.audit_id
            );
        }
    }
}

/// A shape's text is its id's preimage and is stored: its bytes for a record with every
/// shape field set (strings that need escaping too) are fixed.
#[test]
fn a_shape_text_is_pinned() {
    use crate::audit::{AuditConfirmation, AuditKind, Caller as AuditCaller, PolicyDecision};
    let entry = AuditEntry {
        audit_id: "custom \"id\"".to_owned(),
        kind: AuditKind::BackgroundEvent,
        runtime: "hermes".to_owned(),
        caller: AuditCaller {
            runtime: "hermes".to_owned(),
            transport: "ws\n".to_owned(),
            principal: "é😀\\".to_owned(),
        },
        runtime_session_id: Some("rs".to_owned()),
        request_id: "req-1".to_owned(),
        idempotency_key: Some("k".to_owned()),
        tool: Some("sms.send".to_owned()),
        risk: Some(openphone_protocol::Risk::High),
        mutating: Some(false),
        autonomy: Some(crate::wire::Autonomy::TrustedActions),
        decision: Some(PolicyDecision::Deny),
        confirmation: Some(AuditConfirmation::Replayed),
        status: Some(ToolStatus::Denied),
        error_code: Some("policy_denied".to_owned()),
        params_hash: Some(format!("sha256:{}", "a".repeat(64))),
        result_digest: Some("b".repeat(64)),
        device_id: Some("phone-2".to_owned()),
        ..AuditEntry::default()
    };
    let p = prepare(entry).unwrap();
    assert_eq!(
        p.shape_text,
        concat!(
            r#"{"kind":"background_event","runtime":"hermes","#,
            r#""caller":{"runtime":"hermes","transport":"ws\n","principal":"é😀\\"},"#,
            r#""runtime_session_id":"rs","tool":"sms.send","risk":"high","mutating":false,"#,
            r#""autonomy":"trusted_actions","decision":"deny","confirmation":"replayed","#,
            r#""status":"denied","error_code":"policy_denied","audit_id":"stored","#,
            r#""idempotency_key":"stored","params_hash":"prefixed","result_digest":"bare","#,
            r#""proof_digest":"absent","proof_digest_text":"bare","device_id":"phone-2"}"#,
        )
    );
    assert_eq!(p.shape_id, 4428495085402989758);
}

/// Every stored byte of the audit tables, in order: what two appends must agree on.
fn stored_bytes(conn: &Connection) -> Vec<Vec<SqlValue>> {
    let mut out = Vec::new();
    for sql in [
        "SELECT * FROM audit_records ORDER BY seq",
        "SELECT * FROM audit_shapes ORDER BY id",
        "SELECT * FROM audit_proofs ORDER BY digest",
        "SELECT * FROM audit_head",
    ] {
        let mut stmt = conn.prepare(sql).unwrap();
        let columns = stmt.column_count();
        let mut rows = stmt.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            out.push((0..columns).map(|i| row.get(i).unwrap()).collect());
        }
    }
    out
}

/// A proof given beside the entry ([`AuditProof`], the bridge's per-call path) is stored
/// exactly as the same proof inside the entry: same rows, same interned proof and shape, same
/// hashes, and it reads back as the entry with its proof — with a correct claimed digest, a
/// mismatching one, and none.
#[test]
fn a_proven_append_stores_what_the_entry_append_stores() {
    use super::append::prepare_proven;
    use super::proofs::AuditProof;
    let (old, new) = (migrated(), migrated());
    let mut entries: Vec<AuditEntry> = (1..=4).map(read_entry).collect();
    entries[2].proof_digest = Some("c".repeat(64));
    entries[3].proof_digest = None;
    for entry in &entries {
        let by_entry = append_prepared(&old, prepare(entry.clone()).unwrap()).unwrap();
        let mut bare = entry.clone();
        let proof = AuditProof::new(bare.policy_proof.take().unwrap()).unwrap();
        let by_proof = append_prepared(&new, prepare_proven(bare, &proof).unwrap()).unwrap();
        assert_eq!(
            (by_proof.seq, &by_proof.prev_hash, &by_proof.hash),
            (by_entry.seq, &by_entry.prev_hash, &by_entry.hash)
        );
    }
    assert_eq!(stored_bytes(&new), stored_bytes(&old));
    assert_eq!(all(&new), entries);
}

/// A claimed `proof_digest` that is not the proof's own never becomes the proof's key on the
/// proven path: the proof is interned under its own digest (computed by [`AuditProof::new`]
/// from the proof, never taken from the caller) and the claim is kept beside it, as the entry
/// path does. A proof given both inside the entry and beside it is refused.
#[test]
fn a_proven_append_keys_a_proof_by_its_own_digest_not_a_mismatching_claim() {
    use super::append::prepare_proven;
    use super::proofs::AuditProof;
    let conn = migrated();
    let mut entry = read_entry(1);
    let value = entry.policy_proof.take().unwrap();
    let own = proof_digest(&value).unwrap();
    let proof = AuditProof::new(value.clone()).unwrap();
    assert_eq!(proof.digest_hex(), to_hex(&own));
    entry.proof_digest = Some("d".repeat(64));
    append_prepared(&conn, prepare_proven(entry.clone(), &proof).unwrap()).unwrap();
    let (key, claim): (Vec<u8>, Option<Vec<u8>>) = conn
        .query_row("SELECT proof, proof_digest FROM audit_records", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(key, own.to_vec());
    assert_eq!(claim, Some(vec![0xdd; 32]));
    let read = all(&conn).remove(0);
    assert_eq!(read.proof_digest.as_deref(), Some(&*"d".repeat(64)));
    assert_eq!(read.policy_proof, Some(value.clone()));

    let mut both = entry;
    both.policy_proof = Some(value);
    let refused = prepare_proven(both, &proof).err().unwrap();
    assert!(refused.to_string().contains("policy_proof"), "{refused}");
}

/// Through the store: the proven append (durable and relaxed, with and without a proof)
/// returns the record's seq, and the log reads back the entries with their proofs and
/// verifies intact, its head the hash the entry path gives the same records.
#[tokio::test]
async fn the_proven_append_through_the_store_reads_back_and_verifies() {
    use super::proofs::AuditProof;
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let proven = crate::Store::open(a.path().join("data")).unwrap();
    let plain = crate::Store::open(b.path().join("data")).unwrap();
    let mut entries: Vec<AuditEntry> = (1..=4).map(read_entry).collect();
    entries[3].policy_proof = None;
    entries[3].proof_digest = None;
    for (i, entry) in entries.iter().enumerate() {
        let mut bare = entry.clone();
        let proof = bare
            .policy_proof
            .take()
            .map(|p| AuditProof::new(p).unwrap());
        let seq = proven
            .append_audit_proven_async(bare, proof, i % 2 == 0)
            .await
            .unwrap();
        assert_eq!(seq, i as i64 + 1);
        plain.append_audit_async(entry.clone()).await.unwrap();
    }
    let read: Vec<AuditEntry> = proven
        .export_audit(0, 10)
        .unwrap()
        .into_iter()
        .map(|r| r.entry)
        .collect();
    assert_eq!(read, entries);
    let report = proven.verify_audit().unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.last_hash, plain.verify_audit().unwrap().last_hash);
}
