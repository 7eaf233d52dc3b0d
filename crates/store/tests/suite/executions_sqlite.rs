//! The executing record on disk (SQLite): it names its attempt's policy proof by its
//! `audit_proofs` key instead of carrying the proof's text (schema 15), reads rows written
//! before that, and refuses a row whose named proof is missing or given twice.

use openphone_store::StoreError;
use pretty_assertions::assert_eq;

use super::executions::begun_proven;
use super::support::{data_dir, open, temp};

fn raw(dir: &tempfile::TempDir) -> rusqlite::Connection {
    rusqlite::Connection::open(data_dir(dir).join("openphone.db")).unwrap()
}

/// The row's `attempt_json` and `attempt_proof`.
fn stored_row(dir: &tempfile::TempDir) -> (serde_json::Value, Option<Vec<u8>>) {
    raw(dir)
        .query_row(
            "SELECT attempt_json, attempt_proof FROM executions",
            [],
            |row| {
                let text: String = row.get(0)?;
                Ok((serde_json::from_str(&text).unwrap(), row.get(1)?))
            },
        )
        .unwrap()
}

#[test]
fn an_executing_record_names_its_proof_instead_of_carrying_it() {
    let dir = temp();
    let (key, execution) = begun_proven(&dir);
    let (attempt_json, proof_key) = stored_row(&dir);
    assert!(attempt_json.get("policy_proof").is_none_or(|p| p.is_null()));
    let proof_key = proof_key.expect("the row names the proof");
    // The key is the one the attempt's audit record interned the proof under.
    let (interned, record_key): (String, Vec<u8>) = raw(&dir)
        .query_row(
            "SELECT p.proof, r.proof FROM audit_records r JOIN audit_proofs p ON p.digest = r.proof",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!(record_key, proof_key);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&interned).unwrap(),
        execution.attempt.policy_proof.clone().unwrap()
    );
    assert_eq!(open(&dir).find_execution(&key).unwrap(), Some(execution));
}

#[test]
fn an_executing_record_written_with_its_proof_inside_still_reads() {
    // Rows written before schema 15 carry the proof in `attempt_json` and no key.
    let dir = temp();
    let (key, execution) = begun_proven(&dir);
    let whole = serde_json::to_string(&execution.attempt).unwrap();
    raw(&dir)
        .execute(
            "UPDATE executions SET attempt_json = ?1, attempt_proof = NULL",
            [&whole],
        )
        .unwrap();
    assert_eq!(open(&dir).find_execution(&key).unwrap(), Some(execution));
}

#[test]
fn an_executing_record_whose_named_proof_is_missing_or_doubled_is_corrupt() {
    let dir = temp();
    let (key, execution) = begun_proven(&dir);
    let (_, proof_key) = stored_row(&dir);
    // A key no proof is interned under: refused, never read as an attempt without a proof.
    raw(&dir)
        .execute("UPDATE executions SET attempt_proof = zeroblob(32)", [])
        .unwrap();
    let err = open(&dir).find_execution(&key).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("missing"), "{err}");
    let err = open(&dir).list_executions().unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");

    // A proof both inside the attempt and named beside it: which one holds is unknown.
    let whole = serde_json::to_string(&execution.attempt).unwrap();
    raw(&dir)
        .execute(
            "UPDATE executions SET attempt_json = ?1, attempt_proof = ?2",
            rusqlite::params![whole, proof_key],
        )
        .unwrap();
    let err = open(&dir).find_execution(&key).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
}
