//! `openphone audit verify | export` on a data directory the core wrote.

use std::sync::Arc;

use openphone_core::{BridgeConfig, EventBus, ToolBridge};
use openphone_device::SimPhone;
use openphone_policy::{Caller, Context, Transport};
use openphone_protocol::{Registry, ToolRequest};
use openphone_store::Store;
use serde_json::{Value, json};

use super::support::run;

/// Writes `n` audited requests into a fresh data directory.
async fn data_dir_with_audit(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::embedded().unwrap();
    let (phone, clock) = SimPhone::demo().unwrap();
    let bridge = ToolBridge::new(
        registry,
        Arc::new(Store::open(dir.path()).unwrap()),
        Arc::new(phone),
        Arc::new(clock),
        Arc::new(EventBus::new(registry, 16)),
        BridgeConfig::default(),
    );
    let caller = Caller::remote("hermes", Transport::Websocket, "t");
    for i in 0..n {
        let req = ToolRequest {
            request_id: format!("r{i}"),
            tool: "openphone.screen.get".into(),
            params: json!({"reason": "look"}),
            ..ToolRequest::default()
        };
        bridge.invoke(&caller, req, Context::Interactive).await;
    }
    dir
}

#[tokio::test]
async fn verify_passes_then_names_the_tampered_record() {
    let dir = data_dir_with_audit(5).await;
    let path = dir.path().to_str().unwrap();
    let (code, out, err) = run(&["audit", "verify", "--data-dir", path], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("audit chain intact: 5 records"), "{out}");

    let conn = rusqlite::Connection::open(dir.path().join("openphone.db")).unwrap();
    conn.execute(
        "UPDATE audit_records SET request_id = 'forged' WHERE seq = 4",
        [],
    )
    .unwrap();
    let (code, out, _) = run(&["audit", "verify", "--data-dir", path, "--json"], "");
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["intact"], false);
    assert_eq!(v["first_broken"]["seq"], 4);
}

#[tokio::test]
async fn export_streams_one_json_record_per_line() {
    let dir = data_dir_with_audit(3).await;
    let path = dir.path().to_str().unwrap();
    let (code, out, err) = run(
        &["audit", "export", "--format", "jsonl", "--data-dir", path],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["seq"], 1);
    assert_eq!(lines[2]["audit_id"], "runtime:hermes:r2");
    assert_eq!(lines[1]["prev_hash"], lines[0]["hash"]);
    let (_, out, _) = run(&["audit", "export", "--after", "2", "--data-dir", path], "");
    assert_eq!(out.lines().count(), 1);
}

#[test]
fn a_missing_data_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let (code, _, err) = run(
        &["audit", "verify", "--data-dir", missing.to_str().unwrap()],
        "",
    );
    assert_eq!(code, 2);
    assert!(err.contains("cannot open the audit log in"), "{err}");
}

/// `audit head --json` → `(seq, "<seq>:<hash>")`.
fn head(path: &str) -> (i64, String) {
    let (code, out, err) = run(&["audit", "head", "--json", "--data-dir", path], "");
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let anchor = v["anchor"].as_str().unwrap().to_owned();
    assert_eq!(
        anchor,
        format!("{}:{}", v["seq"], v["hash"].as_str().unwrap())
    );
    let (_, text, _) = run(&["audit", "head", "--data-dir", path], "");
    assert_eq!(text.trim(), anchor, "the text form is the anchor itself");
    (v["seq"].as_i64().unwrap(), anchor)
}

/// Issue 11, item 6: delete a row of the SQLite file and re-hash the chain, and `audit verify`
/// said intact — there was nothing outside the database to compare with. A head shipped
/// earlier (`audit head`) now catches it: `verify --anchor` fails naming the seq.
#[tokio::test]
async fn an_offline_rewrite_passes_verify_but_fails_the_anchor() {
    let dir = data_dir_with_audit(5).await;
    let path = dir.path().to_str().unwrap();
    let (seq, anchor) = head(path);
    assert_eq!(seq, 5);
    let (code, out, err) = run(
        &["audit", "verify", "--anchor", &anchor, "--data-dir", path],
        "",
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("anchor {anchor} holds")), "{out}");
    // An older head, as a cron job would have shipped it after record 4.
    let (_, export, _) = run(&["audit", "export", "--after", "3", "--data-dir", path], "");
    let fourth: Value = serde_json::from_str(export.lines().next().unwrap()).unwrap();
    let older = format!("4:{}", fourth["hash"].as_str().unwrap());

    // The attacker: delete record 3, renumber, and re-hash every later record and the head
    // with the documented formula, straight in the database file.
    let db = dir.path().join("openphone.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("DELETE FROM audit_records WHERE seq = 3", [])
        .unwrap();
    conn.execute("UPDATE audit_records SET seq = seq - 1 WHERE seq > 3", [])
        .unwrap();
    drop(conn);
    rehash(&db);

    let (code, out, err) = run(&["audit", "verify", "--data-dir", path], "");
    assert_eq!(code, 0, "plain verify is fooled: {out}{err}");
    assert!(out.starts_with("audit chain intact: 4 records"), "{out}");

    let (code, out, _) = run(
        &["audit", "verify", "--anchor", &anchor, "--data-dir", path],
        "",
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("anchor {anchor} FAILS at seq 5")),
        "{out}"
    );
    let (code, out, _) = run(
        &[
            "audit",
            "verify",
            "--anchor",
            &anchor,
            "--json",
            "--data-dir",
            path,
        ],
        "",
    );
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["intact"], false);
    assert_eq!(v["first_broken"], Value::Null, "the chain itself verifies");
    assert_eq!(v["anchors"][0]["seq"], 5);
    assert_eq!(v["anchors"][0]["outcome"], "missing");

    // The older anchor's record still exists, with another hash.
    let (code, out, _) = run(
        &[
            "audit",
            "verify",
            "--anchor",
            &older,
            "--json",
            "--data-dir",
            path,
        ],
        "",
    );
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["anchors"][0]["seq"], 4);
    assert_eq!(v["anchors"][0]["outcome"], "differs");
    let (_, out, _) = run(
        &["audit", "verify", "--anchor", &older, "--data-dir", path],
        "",
    );
    assert!(
        out.contains(&format!("anchor {older} FAILS at seq 4")),
        "{out}"
    );
    // A malformed anchor is a clear usage error.
    let (code, _, err) = run(
        &["audit", "verify", "--anchor", "5", "--data-dir", path],
        "",
    );
    assert_eq!(code, 2);
    assert!(err.contains("<seq>:<hash>"), "{err}");
}

/// Recomputes every record's hash and the head in place, as the store's crate docs define it
/// (form 2): `sha256_hex(prev_hash + "\n" + seq + "\n" + sha256_hex(canonical_json(body)))`,
/// the body being the record without `seq`, `prev_hash`, `hash` and `policy_proof`, plus
/// `policy_proof_sha256`.
fn rehash(db: &std::path::Path) {
    let records: Vec<openphone_store::AuditRecord> = {
        let store = Store::open_read_only(db.parent().unwrap()).unwrap();
        store.audit_iter(0, 100).map(Result::unwrap).collect()
    };
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut prev = openphone_store::GENESIS_HASH.to_owned();
    for record in records {
        let sha = openphone_protocol::digest::sha256_hex;
        let mut body = serde_json::to_value(&record.entry).unwrap();
        let object = body.as_object_mut().unwrap();
        let proof = object.remove("policy_proof").unwrap();
        let proof_sha =
            (!proof.is_null()).then(|| sha(&openphone_protocol::canonical_json(&proof).unwrap()));
        object.insert("policy_proof_sha256".into(), proof_sha.into());
        let body = sha(&openphone_protocol::canonical_json(&body).unwrap());
        let hash = sha(&format!("{prev}\n{}\n{body}", record.seq));
        conn.execute(
            &format!("UPDATE audit_records SET hash = x'{hash}' WHERE seq = ?1"),
            [record.seq],
        )
        .unwrap();
        prev = hash;
        conn.execute(
            "UPDATE audit_head SET seq = ?1, hash = ?2 WHERE id = 1",
            rusqlite::params![record.seq, prev],
        )
        .unwrap();
    }
}
