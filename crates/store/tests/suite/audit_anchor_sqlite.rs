//! Anchors on SQLite's files: an offline rewrite of the database file (delete, renumber,
//! re-hash) and a forged row. The PostgreSQL twins are in
//! `crates/store-pg/tests/conformance/audit_pg.rs`.

use openphone_store::{AnchorOutcome, AuditAnchor, AuditEntry, Store};
use pretty_assertions::assert_eq;

use super::audit_anchor::fill;
use super::support::{data_dir, open, temp};

/// What an attacker with write access to the file does: delete the record `seq`, renumber the
/// rest and re-hash the whole chain (with the store's own hashing), head included.
fn delete_and_rehash(dir: &tempfile::TempDir, seq: i64) {
    let db = data_dir(dir).join("openphone.db");
    let kept: Vec<AuditEntry> = Store::open_read_only(data_dir(dir))
        .unwrap()
        .audit_iter(0, 100)
        .map(Result::unwrap)
        .filter(|r| r.seq != seq)
        .map(|r| r.entry)
        .collect();
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch("DELETE FROM audit_records; DELETE FROM audit_head;")
        .unwrap();
    drop(conn);
    let store = Store::open(data_dir(dir)).unwrap();
    for e in &kept {
        store.append_audit(e).unwrap();
    }
}

/// Issue 11, item 6: delete a row, re-hash, and `audit verify` said intact — there was
/// nothing outside the database to compare with.
#[test]
fn an_offline_rewrite_verifies_but_fails_its_anchor() {
    let dir = temp();
    let (early, at_five, at_eight) = {
        let store = open(&dir);
        fill(&store, 1, 5);
        let at_five = store.audit_head().unwrap();
        fill(&store, 6, 8);
        let at_eight = store.audit_head().unwrap();
        let early = store.export_audit(1, 1).unwrap().remove(0);
        let early = AuditAnchor {
            seq: early.seq,
            hash: early.hash,
        };
        (early, at_five, at_eight)
    };
    assert_eq!((early.seq, at_five.seq, at_eight.seq), (2, 5, 8));

    delete_and_rehash(&dir, 4);

    let store = Store::open_read_only(data_dir(&dir)).unwrap();
    let plain = store.verify_audit().unwrap();
    assert!(plain.is_intact(), "the rewritten chain verifies: {plain:?}");
    assert_eq!(plain.last_seq, 7);

    let report = store
        .verify_audit_anchored(&[early.clone(), at_five.clone(), at_eight.clone()])
        .unwrap();
    assert!(!report.is_intact());
    let outcomes: Vec<(i64, bool)> = report.anchors.iter().map(|a| (a.seq, a.holds())).collect();
    assert_eq!(outcomes, vec![(2, true), (5, false), (8, false)]);
    assert!(
        matches!(&report.anchors[1].outcome, AnchorOutcome::Differs { found } if *found != at_five.hash),
        "{:?}",
        report.anchors[1]
    );
    assert_eq!(
        report.anchors[2].outcome,
        AnchorOutcome::Missing { last_seq: 7 }
    );
    let text = report.anchors[1].to_string();
    assert!(text.contains("FAILS at seq 5"), "{text}");
    assert!(text.contains(&at_five.to_string()), "{text}");
}

#[test]
fn an_anchor_past_a_broken_link_cannot_be_proved() {
    let dir = temp();
    let store = open(&dir);
    fill(&store, 1, 6);
    let head = store.audit_head().unwrap();
    let two = AuditAnchor {
        seq: 2,
        hash: store.export_audit(1, 1).unwrap().remove(0).hash,
    };
    rusqlite::Connection::open(data_dir(&dir).join("openphone.db"))
        .unwrap()
        .execute(
            "UPDATE audit_records SET request_id = 'forged' WHERE seq = 4",
            [],
        )
        .unwrap();
    let report = store.verify_audit_anchored(&[two, head]).unwrap();
    assert!(
        report.anchors[0].holds(),
        "records before the break still prove"
    );
    assert_eq!(
        report.anchors[1].outcome,
        AnchorOutcome::Unverifiable { broken_seq: 4 }
    );
}
