//! The audit log's tamper detection on PostgreSQL: the twins of `audit_sqlite.rs` and
//! `audit_anchor_sqlite.rs`, editing the tables with SQL as someone with write access to the
//! database would (one row per record: its JSON text, its hash; the head; the anchor).

use openphone_store::{
    AnchorOutcome, AuditAnchor, AuditEntry, AuditProblem, AuditStore, BrokenRecord,
};
use openphone_store_pg::testing::{self, SchemaGuard};
use openphone_store_pg::{PgConfig, PgStore};
use pretty_assertions::assert_eq;

use super::audit::entry;
use super::support::digest;

/// A store on a fresh schema, and SQL on that schema. Fields drop in order: the store before
/// its schema.
pub struct Pg {
    pub store: PgStore,
    pub config: PgConfig,
    _guard: SchemaGuard,
}

impl Pg {
    pub fn new() -> Pg {
        let url = std::env::var(testing::TEST_URL_VAR).expect("OPENPHONE_TEST_PG_URL");
        let (config, guard) = testing::fresh_schema(&url);
        Pg {
            store: PgStore::open(&config).unwrap(),
            config,
            _guard: guard,
        }
    }

    /// Runs `sql` on the store's schema on a connection of its own.
    pub fn sql(&self, sql: &str) {
        testing::admin_sql(&self.config, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// The first broken record after `sql` ran.
    fn broken_after(&self, sql: &str) -> BrokenRecord {
        self.sql(sql);
        self.store
            .verify_audit()
            .unwrap()
            .first_broken
            .unwrap_or_else(|| panic!("still intact after {sql}"))
    }
}

fn filled(n: i64) -> Pg {
    let pg = Pg::new();
    for i in 1..=n {
        pg.store.append_audit(&entry(i)).unwrap();
    }
    assert!(pg.store.verify_audit().unwrap().is_intact());
    pg
}

/// `jsonb_set` on record `seq`'s stored JSON (the text it keeps is re-rendered by jsonb: the
/// hash covers the record, not the bytes).
fn set_field(seq: i64, path: &str, value: &str) -> String {
    format!(
        "UPDATE audit_records SET entry = jsonb_set(entry::jsonb, '{{{path}}}', '{value}')::text \
         WHERE seq = {seq}"
    )
}

#[test]
fn editing_a_record_breaks_the_chain_at_that_record() {
    for sql in [
        set_field(4, "duration_ms", "99"),
        "UPDATE audit_records SET entry = jsonb_set(entry::jsonb, '{at_ms}', \
         to_jsonb((entry::jsonb->>'at_ms')::bigint + 1))::text WHERE seq = 4"
            .to_owned(),
        set_field(4, "request_id", "\"forged\""),
        set_field(
            4,
            "params_hash",
            &format!("\"sha256:{}\"", digest("forged")),
        ),
        set_field(4, "confirmation_id", "null"),
        set_field(4, "policy_proof", "[]"),
    ] {
        let pg = filled(6);
        let broken = pg.broken_after(&sql);
        assert_eq!(broken.seq, 4, "{sql}");
        assert!(
            matches!(broken.problem, AuditProblem::HashMismatch { .. }),
            "{sql}: {broken:?}"
        );
        assert_eq!(broken.audit_id.as_deref(), Some("runtime:openclaw:req-4"));
        assert!(
            broken
                .to_string()
                .contains("record seq 4 (runtime:openclaw:req-4)"),
            "{broken}"
        );
    }
}

#[test]
fn a_row_that_does_not_decode_is_named() {
    for sql in [
        "UPDATE audit_records SET entry = 'not json' WHERE seq = 3",
        "UPDATE audit_records SET entry = '{}' WHERE seq = 3",
        "UPDATE audit_records SET entry = jsonb_set(entry::jsonb, '{kind}', '\"nonsense\"')::text \
         WHERE seq = 3",
        // The indexed column must name the record's own id.
        "UPDATE audit_records SET audit_id = 'runtime:openclaw:req-1' WHERE seq = 3",
    ] {
        let pg = filled(4);
        let broken = pg.broken_after(sql);
        assert_eq!(broken.seq, 3, "{sql}");
        assert!(
            matches!(broken.problem, AuditProblem::Undecodable { .. }),
            "{sql}: {broken:?}"
        );
    }
}

#[test]
fn an_edited_audit_id_column_does_not_make_find_answer_another_record() {
    let pg = filled(4);
    pg.sql("UPDATE audit_records SET audit_id = 'runtime:openclaw:req-1' WHERE seq = 3");
    let found = pg.store.find_audit("runtime:openclaw:req-1").unwrap();
    assert_eq!(found.iter().map(|r| r.seq).collect::<Vec<_>>(), [1]);
}

#[test]
fn rewriting_a_row_with_a_fresh_hash_breaks_it() {
    let pg = filled(5);
    let broken = pg.broken_after(&format!(
        "UPDATE audit_records SET hash = '{}' WHERE seq = 2",
        digest("forged")
    ));
    assert_eq!(broken.seq, 2);
    assert!(
        matches!(broken.problem, AuditProblem::HashMismatch { .. }),
        "{broken:?}"
    );
}

#[test]
fn deleting_a_middle_row_is_detected() {
    let pg = filled(5);
    let broken = pg.broken_after("DELETE FROM audit_records WHERE seq = 3");
    assert_eq!(broken.seq, 4);
    assert_eq!(broken.problem, AuditProblem::SeqGap { expected: 3 });
}

#[test]
fn deleting_and_renumbering_is_detected_by_the_next_hash() {
    let pg = filled(5);
    let broken = pg.broken_after(
        "DELETE FROM audit_records WHERE seq = 3; \
         UPDATE audit_records SET seq = seq + 1000 WHERE seq > 3; \
         UPDATE audit_records SET seq = seq - 1001 WHERE seq > 1000",
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
    let pg = filled(5);
    let broken = pg.broken_after("DELETE FROM audit_records WHERE seq >= 4");
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

#[test]
fn deleting_the_newest_rows_and_moving_the_head_is_caught_by_the_anchor() {
    let pg = filled(5);
    let broken = pg.broken_after(
        "DELETE FROM audit_records WHERE seq >= 4; \
         UPDATE audit_heads SET (seq, hash) = (SELECT seq, hash FROM audit_records WHERE seq = 3)",
    );
    assert_eq!(broken.seq, 5, "{broken:?}");
    let chains = pg.store.verify_audit_chains().unwrap();
    assert_eq!(chains.len(), 1);
    assert!(chains[0].report.is_intact(), "the records and head agree");
    assert_eq!(
        chains[0].anchor.as_ref().unwrap().outcome,
        AnchorOutcome::Missing { last_seq: 3 }
    );
    // Removing the anchor row too leaves a chain with records and no anchor: still caught.
    let broken = pg.broken_after("DELETE FROM audit_anchors");
    assert_eq!(broken.seq, 1, "{broken:?}");
    let text = pg.store.verify_audit_chains().unwrap()[0].to_string();
    assert!(text.contains("anchor is missing"), "{text}");
}

/// Twin of `an_offline_rewrite_verifies_but_fails_its_anchor`: delete a record, renumber and
/// re-hash the whole chain through the store itself (head and stored anchor included).
#[test]
fn an_offline_rewrite_verifies_but_fails_its_anchor() {
    let pg = Pg::new();
    let store = &pg.store;
    for i in 1..=5 {
        store.append_audit(&super::audit_anchor::entry(i)).unwrap();
    }
    let at_five = store.audit_head().unwrap();
    for i in 6..=8 {
        store.append_audit(&super::audit_anchor::entry(i)).unwrap();
    }
    let at_eight = store.audit_head().unwrap();
    let early = store.export_audit(1, 1).unwrap().remove(0);
    let early = AuditAnchor {
        seq: early.seq,
        hash: early.hash,
    };
    let kept: Vec<AuditEntry> = store
        .export_audit(0, 100)
        .unwrap()
        .into_iter()
        .filter(|r| r.seq != 4)
        .map(|r| r.entry)
        .collect();
    pg.sql("DELETE FROM audit_records; DELETE FROM audit_heads; DELETE FROM audit_anchors");
    for e in &kept {
        store.append_audit(e).unwrap();
    }

    let plain = store.verify_audit().unwrap();
    assert!(plain.is_intact(), "the rewritten chain verifies: {plain:?}");
    assert_eq!(plain.last_seq, 7);
    let report = store
        .verify_audit_anchored(&[early, at_five.clone(), at_eight])
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
    assert!(report.anchors[1].to_string().contains("FAILS at seq 5"));
}

/// Twin of `an_anchor_past_a_broken_link_cannot_be_proved`.
#[test]
fn an_anchor_past_a_broken_link_cannot_be_proved() {
    let pg = Pg::new();
    let store = &pg.store;
    for i in 1..=6 {
        store.append_audit(&super::audit_anchor::entry(i)).unwrap();
    }
    let head = store.audit_head().unwrap();
    let two = AuditAnchor {
        seq: 2,
        hash: store.export_audit(1, 1).unwrap().remove(0).hash,
    };
    pg.sql(&set_field(4, "request_id", "\"forged\""));
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
