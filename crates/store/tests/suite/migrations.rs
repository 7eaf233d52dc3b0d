//! Versioned migrations.

use openphone_store::{SCHEMA_VERSION, Store, StoreError};

use super::support::{T0, data_dir, temp};

fn migration_rows(dir: &std::path::Path) -> Vec<(i64, String)> {
    let conn = rusqlite::Connection::open(dir.join("openphone.db")).unwrap();
    let mut stmt = conn
        .prepare("SELECT version, name FROM schema_migrations ORDER BY version")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn fresh_database_is_at_the_latest_version() {
    let dir = temp();
    let store = Store::open(data_dir(&dir)).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert!(store.fts5_available().unwrap());
    drop(store);
    let rows = migration_rows(&data_dir(&dir));
    assert_eq!(rows.len() as i64, SCHEMA_VERSION);
    assert_eq!(
        rows[0],
        (1, "sessions_confirmations_replay_audit".to_owned())
    );
}

#[test]
fn older_database_is_upgraded_and_reopening_is_idempotent() {
    let dir = temp();
    openphone_store::testing::create_db_at_version(&data_dir(&dir), 1).unwrap();
    // Data written at version 1 survives the upgrade.
    {
        let conn = rusqlite::Connection::open(data_dir(&dir).join("openphone.db")).unwrap();
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, 1);
        conn.execute(
            "INSERT INTO phone_sessions VALUES ('phone-sess-old', 1, 1, 'builtin', '', 'attn-1', \
             'chat', 'ask_before_action', 's', 'running', 'phone-session:phone-sess-old', NULL)",
            [],
        )
        .unwrap();
        let has_watchers: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'watchers'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(has_watchers, 0);
    }
    let store = Store::open(data_dir(&dir)).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert!(store.get_session("phone-sess-old").unwrap().is_some());
    store
        .set_setting("after", &serde_json::json!(true), T0)
        .unwrap();
    drop(store);
    assert_eq!(migration_rows(&data_dir(&dir)).len() as i64, SCHEMA_VERSION);

    // Reopen twice: nothing applied again, nothing lost.
    for _ in 0..2 {
        let store = Store::open(data_dir(&dir)).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(
            store.get_setting("after").unwrap(),
            Some(serde_json::json!(true))
        );
    }
    assert_eq!(migration_rows(&data_dir(&dir)).len() as i64, SCHEMA_VERSION);
}

/// Jobs stored before the creator column are the user's unless the store shows a runtime made
/// them: an upgrade must not hand a runtime's recurring job the user's authority.
#[test]
fn an_upgrade_keeps_a_runtimes_stored_jobs_the_runtimes() {
    let dir = temp();
    openphone_store::testing::create_db_at_version(&data_dir(&dir), 12).unwrap();
    {
        let conn = rusqlite::Connection::open(data_dir(&dir).join("openphone.db")).unwrap();
        let job = |id: i64, target: &str| {
            conn.execute(
                "INSERT INTO agent_jobs (id, type, title, prompt, payload_json, schedule_json, \
                 session_target, delivery_json, status, created_at, updated_at, next_run_at, \
                 running_at, last_run_at, last_result, failure_count, failure_alert_at, phase, \
                 progress_text, progress_current, progress_total, checkpoint_json, \
                 pending_confirmation_id, pending_tool_request_json, last_surface_id, \
                 resume_token, last_event_at, unread_result, paused_at, version, \
                 current_attempt, owner) \
                 VALUES (?1, 'agent_turn', 'job', 'p', '{}', '{}', ?2, '{}', 'active', 1, 1, 1, \
                 0, 0, '', 0, 0, 'queued', '', 0, 0, '{}', '', '{}', '', '', 0, 0, 0, 1, 0, '')",
                rusqlite::params![id, target],
            )
            .unwrap();
        };
        for (id, kind) in [("phone-sess-h", "hermes"), ("phone-sess-b", "builtin")] {
            conn.execute(
                "INSERT INTO phone_sessions VALUES (?1, 1, 1, ?2, '', 'attn-1', 'chat', \
                 'ask_before_action', 's', 'running', 'audit', NULL)",
                rusqlite::params![id, kind],
            )
            .unwrap();
        }
        for (id, runtime) in [(1, "hermes"), (2, "operator")] {
            conn.execute(
                "INSERT INTO watchers VALUES (?1, ?2, 'w', 'message', '{}', 'active', 1, NULL, \
                 0, NULL, '{}', NULL)",
                rusqlite::params![id, runtime],
            )
            .unwrap();
        }
        job(1, "isolated"); // a reaction of hermes' watcher
        job(2, "session:phone-sess-h"); // bound to hermes' session
        job(3, "main"); // nothing shows who made it
        job(4, "session:phone-sess-b"); // the user's assistant's session
        job(5, "isolated"); // a reaction of the user's watcher
        for (watcher, job_id) in [(1, 1), (2, 5)] {
            conn.execute(
                "INSERT INTO watcher_firings VALUES (?1, 1, 'k' || ?2, 1, 'event', '{}', \
                 'agent_job', ?2, 'done', '')",
                rusqlite::params![watcher, job_id],
            )
            .unwrap();
        }
    }
    drop(Store::open(data_dir(&dir)).unwrap());
    let conn = rusqlite::Connection::open(data_dir(&dir).join("openphone.db")).unwrap();
    let creators: Vec<(i64, String)> = conn
        .prepare("SELECT id, created_by FROM agent_jobs ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        creators,
        [
            (1, "hermes".to_owned()),
            (2, "hermes".to_owned()),
            (3, "operator".to_owned()),
            (4, "operator".to_owned()),
            (5, "operator".to_owned()),
        ]
    );
}

#[test]
fn newer_database_is_refused() {
    let dir = temp();
    drop(Store::open(data_dir(&dir)).unwrap());
    {
        let conn = rusqlite::Connection::open(data_dir(&dir).join("openphone.db")).unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
    }
    let err = Store::open(data_dir(&dir)).unwrap_err();
    assert!(
        matches!(err, StoreError::SchemaTooNew { found, supported } if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION),
        "{err:?}"
    );
    assert!(matches!(
        Store::open_read_only(data_dir(&dir)).unwrap_err(),
        StoreError::SchemaTooNew { .. }
    ));
}

#[test]
fn pragmas_are_set() {
    let dir = temp();
    let _store = Store::open(data_dir(&dir)).unwrap();
    let conn = rusqlite::Connection::open(data_dir(&dir).join("openphone.db")).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}
