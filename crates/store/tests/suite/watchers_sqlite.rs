//! Durable watchers: what only the SQLite store's files show (its migrations).

use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{data_dir, open, temp};

#[test]
fn watchers_of_schema_9_keep_their_rows_after_migration_10() {
    let dir = temp();
    openphone_store::testing::create_db_at_version(&data_dir(&dir), 9).unwrap();
    {
        let conn = rusqlite::Connection::open(data_dir(&dir).join("openphone.db")).unwrap();
        conn.execute(
            "INSERT INTO watchers (runtime, title, source, params_json, state, created_at_ms) \
             VALUES ('openclaw', 'old', 'message', '{\"source\":\"message\"}', 'active', 5)",
            [],
        )
        .unwrap();
    }
    let store = open(&dir);
    let old = store.list_watchers(None, None).unwrap();
    assert_eq!(old.len(), 1);
    assert_eq!(
        (old[0].fire_count, &old[0].cursor, &old[0].end_reason),
        (0, &json!({}), &None)
    );
}
