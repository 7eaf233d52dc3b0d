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
