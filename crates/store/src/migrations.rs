//! Versioned schema migrations, in code.
//!
//! `PRAGMA user_version` is the schema version; `schema_migrations` lists every migration applied
//! (for people reading the file). Each migration runs once, in its own `IMMEDIATE` transaction
//! that also bumps `user_version`, so a crash mid-migration leaves the previous version intact.
//! Migrations are append-only: never edit one that has shipped, add a new one.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{Result, SqlContext, StoreError};

/// One migration: its version (1-based, consecutive), a name, and its SQL.
pub(crate) struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every migration, in order.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "sessions_confirmations_replay_audit",
        sql: r#"
CREATE TABLE schema_migrations (
    version INTEGER PRIMARY KEY,
    name    TEXT NOT NULL
);

CREATE TABLE phone_sessions (
    phone_session_id   TEXT PRIMARY KEY,
    created_at_ms      INTEGER NOT NULL,
    updated_at_ms      INTEGER NOT NULL,
    runtime_kind       TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL,
    attention_id       TEXT NOT NULL,
    source             TEXT NOT NULL,
    autonomy           TEXT NOT NULL,
    summary            TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('created', 'waiting_for_runtime',
                           'running', 'waiting_for_confirmation', 'completed', 'failed')),
    audit_log_id       TEXT NOT NULL,
    failure_reason     TEXT
);
CREATE INDEX phone_sessions_created ON phone_sessions (created_at_ms);
CREATE INDEX phone_sessions_runtime ON phone_sessions (runtime_kind, status);

CREATE TABLE confirmations (
    confirmation_id    TEXT PRIMARY KEY,
    runtime            TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL,
    tool               TEXT NOT NULL,
    params_digest      TEXT NOT NULL,
    idempotency_key    TEXT NOT NULL,
    request_id         TEXT NOT NULL,
    request_json       TEXT NOT NULL,
    phone_session_id   TEXT,
    summary            TEXT NOT NULL,
    risk               TEXT NOT NULL,
    created_at_ms      INTEGER NOT NULL,
    expires_at_ms      INTEGER NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'completed',
                           'denied', 'timeout', 'result_unknown')),
    resolved_at_ms     INTEGER,
    resolved_by        TEXT,
    final_result_json  TEXT
);
CREATE INDEX confirmations_identity ON confirmations
    (runtime, runtime_session_id, tool, params_digest, idempotency_key, state);
CREATE INDEX confirmations_state ON confirmations (state, expires_at_ms);

CREATE TABLE final_results (
    runtime            TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL,
    tool               TEXT NOT NULL,
    params_digest      TEXT NOT NULL,
    idempotency_key    TEXT NOT NULL,
    request_id         TEXT NOT NULL,
    result_json        TEXT NOT NULL,
    recorded_at_ms     INTEGER NOT NULL,
    PRIMARY KEY (runtime, runtime_session_id, tool, params_digest, idempotency_key)
);
CREATE INDEX final_results_recorded ON final_results (recorded_at_ms);

CREATE TABLE request_ids (
    runtime            TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL,
    request_id         TEXT NOT NULL,
    tool               TEXT NOT NULL,
    params_digest      TEXT NOT NULL,
    recorded_at_ms     INTEGER NOT NULL,
    PRIMARY KEY (runtime, runtime_session_id, request_id)
);
CREATE INDEX request_ids_recorded ON request_ids (recorded_at_ms);

CREATE TABLE audit_log (
    seq                INTEGER PRIMARY KEY,
    audit_id           TEXT NOT NULL,
    kind               TEXT NOT NULL,
    at_ms              INTEGER NOT NULL,
    runtime            TEXT NOT NULL,
    caller_runtime     TEXT NOT NULL,
    caller_transport   TEXT NOT NULL,
    caller_principal   TEXT NOT NULL,
    phone_session_id   TEXT,
    runtime_session_id TEXT,
    request_id         TEXT NOT NULL,
    idempotency_key    TEXT,
    tool               TEXT,
    risk               TEXT,
    mutating           INTEGER,
    autonomy           TEXT,
    decision           TEXT,
    proof_digest       TEXT,
    policy_proof       TEXT,
    confirmation_id    TEXT,
    confirmation       TEXT,
    status             TEXT,
    error_code         TEXT,
    duration_ms        INTEGER,
    params_hash        TEXT,
    result_digest      TEXT,
    prev_hash          TEXT NOT NULL,
    hash               TEXT NOT NULL
);
CREATE INDEX audit_log_request ON audit_log (runtime, request_id);

CREATE TABLE audit_head (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL,
    hash TEXT NOT NULL
);
"#,
    },
    Migration {
        version: 2,
        name: "standing_approvals_settings",
        sql: r#"
CREATE TABLE standing_approvals (
    approval_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    runtime          TEXT NOT NULL,
    tool             TEXT NOT NULL,
    constraints_json TEXT NOT NULL,
    expires_at_ms    INTEGER,
    background       INTEGER NOT NULL,
    enabled          INTEGER NOT NULL,
    created_at_ms    INTEGER NOT NULL,
    updated_at_ms    INTEGER NOT NULL
);
CREATE INDEX standing_approvals_lookup ON standing_approvals (runtime, tool);

CREATE TABLE runtime_settings (
    key           TEXT PRIMARY KEY,
    value_json    TEXT NOT NULL,
    updated_at_ms INTEGER NOT NULL
);
"#,
    },
    Migration {
        version: 3,
        name: "memory_fts5",
        sql: r#"
CREATE TABLE memories (
    memory_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    text          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    subject       TEXT NOT NULL,
    confidence    REAL,
    created_at_ms INTEGER NOT NULL
);
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    text, kind, subject, content = 'memories', content_rowid = 'memory_id'
);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text, kind, subject)
    VALUES (new.memory_id, new.text, new.kind, new.subject);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, kind, subject)
    VALUES ('delete', old.memory_id, old.text, old.kind, old.subject);
END;
CREATE TRIGGER memories_au AFTER UPDATE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, kind, subject)
    VALUES ('delete', old.memory_id, old.text, old.kind, old.subject);
    INSERT INTO memories_fts (rowid, text, kind, subject)
    VALUES (new.memory_id, new.text, new.kind, new.subject);
END;
"#,
    },
    Migration {
        version: 4,
        name: "watchers",
        sql: r#"
CREATE TABLE watchers (
    watcher_id    INTEGER PRIMARY KEY AUTOINCREMENT,
    runtime       TEXT NOT NULL,
    title         TEXT NOT NULL,
    source        TEXT NOT NULL,
    params_json   TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('active', 'stopped')),
    created_at_ms INTEGER NOT NULL,
    stopped_at_ms INTEGER
);
CREATE INDEX watchers_state ON watchers (state, watcher_id);
"#,
    },
    Migration {
        version: 5,
        name: "executions_store_meta",
        sql: r#"
CREATE TABLE executions (
    runtime            TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL,
    tool               TEXT NOT NULL,
    params_digest      TEXT NOT NULL,
    idempotency_key    TEXT NOT NULL,
    request_id         TEXT NOT NULL,
    attempt_json       TEXT NOT NULL,
    started_at_ms      INTEGER NOT NULL,
    PRIMARY KEY (runtime, runtime_session_id, tool, params_digest, idempotency_key)
);

CREATE TABLE store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"#,
    },
    Migration {
        version: 6,
        name: "compact_audit_replay_tombstones",
        // Audit records from now on go to the compact tables (`audit_storage/`): shapes and
        // proofs interned, digests as bytes, `prev_hash` implied. `audit_log` keeps the
        // records written before, unchanged (form-1 hashes), and receives no new rows.
        // `final_tombstones`: what is left of a stored result pruned by retention, so a keyed
        // retry of that request is answered, never run again (`replay.rs`).
        sql: r#"
CREATE TABLE audit_shapes (
    id    INTEGER PRIMARY KEY,
    shape TEXT NOT NULL
) STRICT;

CREATE TABLE audit_proofs (
    digest BLOB PRIMARY KEY,
    proof  TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE audit_records (
    seq              INTEGER PRIMARY KEY,
    shape            INTEGER NOT NULL REFERENCES audit_shapes (id),
    at_ms            INTEGER NOT NULL,
    request_id       ANY NOT NULL,
    phone_session_id ANY,
    idempotency_key  TEXT,
    audit_id         TEXT,
    confirmation_id  TEXT,
    duration_ms      INTEGER,
    params_hash      BLOB,
    result_digest    BLOB,
    proof            BLOB REFERENCES audit_proofs (digest),
    proof_digest     BLOB,
    hash             BLOB NOT NULL
) STRICT;
CREATE INDEX audit_records_request ON audit_records (request_id);
CREATE INDEX audit_records_audit_id ON audit_records (audit_id) WHERE audit_id IS NOT NULL;

CREATE TABLE final_tombstones (
    identity       BLOB PRIMARY KEY,
    request_id     TEXT NOT NULL,
    status         TEXT,
    error_code     TEXT,
    recorded_at_ms INTEGER NOT NULL,
    pruned_at_ms   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
"#,
    },
    Migration {
        version: 7,
        name: "approval_scopes",
        // Standing approvals the user manages, and session grants (`accept_for_session`): a
        // grant is a standing approval scoped to one phone session, made by approving one
        // confirmation. A revoked approval keeps its row (who revoked it, and when).
        sql: r#"
ALTER TABLE standing_approvals ADD COLUMN phone_session_id TEXT;
ALTER TABLE standing_approvals ADD COLUMN confirmation_id TEXT;
ALTER TABLE standing_approvals ADD COLUMN created_by TEXT;
ALTER TABLE standing_approvals ADD COLUMN note TEXT;
ALTER TABLE standing_approvals ADD COLUMN revoked_at_ms INTEGER;
ALTER TABLE standing_approvals ADD COLUMN revoked_by TEXT;
"#,
    },
    Migration {
        version: 8,
        name: "session_transcripts",
        // The conversation of a phone session (the built-in runtime's messages, tool calls and
        // result digests), numbered within the session; its rows go with the session.
        sql: r#"
CREATE TABLE session_transcripts (
    phone_session_id TEXT NOT NULL,
    seq              INTEGER NOT NULL,
    role             TEXT NOT NULL,
    body_json        TEXT NOT NULL,
    created_at_ms    INTEGER NOT NULL,
    PRIMARY KEY (phone_session_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER phone_sessions_drop_transcript AFTER DELETE ON phone_sessions
BEGIN
    DELETE FROM session_transcripts WHERE phone_session_id = old.phone_session_id;
END;
"#,
    },
    Migration {
        version: 9,
        name: "agent_jobs",
        // Background agent jobs (`agent-jobs.md` §2): one column per field of the wire record,
        // plus the internal `version` (optimistic concurrency), `current_attempt` and `owner`
        // (the fence of the run in progress) and `delivery_state`; ids from AUTOINCREMENT's
        // persisted counter, never reused. Beside it the attempt ledger, one row per run,
        // deleted with its job.
        sql: r#"
CREATE TABLE agent_jobs (
    id                        INTEGER PRIMARY KEY AUTOINCREMENT,
    type                      TEXT NOT NULL
                                  CHECK (type IN ('agent_turn', 'system_event', 'heartbeat')),
    title                     TEXT NOT NULL CHECK (length(title) >= 1),
    prompt                    TEXT NOT NULL,
    payload_json              TEXT NOT NULL CHECK (json_type(payload_json) = 'object'),
    schedule_json             TEXT NOT NULL CHECK (json_type(schedule_json) = 'object'),
    session_target            TEXT NOT NULL,
    delivery_json             TEXT NOT NULL CHECK (json_type(delivery_json) = 'object'),
    status                    TEXT NOT NULL CHECK (status IN ('active', 'queued', 'running',
                                  'waiting', 'awaiting_review', 'paused', 'completed', 'failed',
                                  'stopped', 'dispatched')),
    created_at                INTEGER NOT NULL CHECK (created_at >= 0),
    updated_at                INTEGER NOT NULL CHECK (updated_at >= 0),
    next_run_at               INTEGER NOT NULL CHECK (next_run_at >= 0),
    running_at                INTEGER NOT NULL CHECK (running_at >= 0),
    last_run_at               INTEGER NOT NULL CHECK (last_run_at >= 0),
    last_result               TEXT NOT NULL,
    failure_count             INTEGER NOT NULL CHECK (failure_count >= 0),
    failure_alert_at          INTEGER NOT NULL CHECK (failure_alert_at >= 0),
    phase                     TEXT NOT NULL CHECK (phase IN ('queued', 'running', 'waiting',
                                  'awaiting_review', 'approval_executing', 'denial_resolving',
                                  'resuming', 'completed', 'failed', 'stopped', 'paused',
                                  'waiting_for_runtime', 'review_resolution_unknown')),
    progress_text             TEXT NOT NULL CHECK (length(progress_text) <= 4000),
    progress_current          INTEGER NOT NULL CHECK (progress_current >= 0),
    progress_total            INTEGER NOT NULL CHECK (progress_total >= 0),
    checkpoint_json           TEXT NOT NULL CHECK (json_type(checkpoint_json) = 'object'),
    pending_confirmation_id   TEXT NOT NULL CHECK (length(pending_confirmation_id) <= 200),
    pending_tool_request_json TEXT NOT NULL
                                  CHECK (json_type(pending_tool_request_json) = 'object'),
    last_surface_id           TEXT NOT NULL CHECK (length(last_surface_id) <= 160),
    resume_token              TEXT NOT NULL CHECK (length(resume_token) <= 200),
    last_event_at             INTEGER NOT NULL CHECK (last_event_at >= 0),
    unread_result             INTEGER NOT NULL CHECK (unread_result IN (0, 1)),
    paused_at                 INTEGER NOT NULL CHECK (paused_at >= 0),
    version                   INTEGER NOT NULL CHECK (version >= 1),
    current_attempt           INTEGER NOT NULL CHECK (current_attempt >= 0),
    owner                     TEXT NOT NULL,
    delivery_state            TEXT CHECK (delivery_state IN ('pending', 'sent', 'unverified',
                                  'failed', 'suppressed'))
) STRICT;
CREATE INDEX agent_jobs_due ON agent_jobs (next_run_at, id)
    WHERE status IN ('queued', 'active');
CREATE INDEX agent_jobs_running ON agent_jobs (running_at) WHERE status = 'running';
CREATE INDEX agent_jobs_awaiting_review ON agent_jobs (id) WHERE status = 'awaiting_review';
CREATE INDEX agent_jobs_waiting ON agent_jobs (id) WHERE status = 'waiting';
CREATE INDEX agent_jobs_terminal ON agent_jobs (updated_at, id)
    WHERE status IN ('completed', 'failed', 'stopped', 'dispatched');

CREATE TABLE agent_job_runs (
    job_id      INTEGER NOT NULL REFERENCES agent_jobs (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL CHECK (attempt >= 1),
    intended_at INTEGER NOT NULL,
    catch_up    INTEGER NOT NULL CHECK (catch_up IN (0, 1)),
    owner       TEXT NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    outcome     TEXT NOT NULL CHECK (outcome IN ('running', 'succeeded', 'failed', 'timed_out',
                    'cancelled', 'interrupted', 'unknown', 'dispatched', 'parked')),
    reason      TEXT NOT NULL,
    output_ref  TEXT NOT NULL,
    PRIMARY KEY (job_id, attempt)
) STRICT, WITHOUT ROWID;
"#,
    },
    Migration {
        version: 10,
        name: "watcher_firings",
        // Live watchers (`openphone-watchers`): each watcher's firing count, last firing, the
        // engine's cursor (next check, last page hash, …) and why it ended; beside it one row
        // per firing. A firing is written in one transaction with the watcher's new state, the
        // job its reaction creates and its audit record, so a restart neither loses nor
        // repeats one; `dedupe_key` makes the same trigger fire a watcher at most once.
        sql: r#"
ALTER TABLE watchers ADD COLUMN fire_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE watchers ADD COLUMN last_fired_at_ms INTEGER;
ALTER TABLE watchers ADD COLUMN cursor_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE watchers ADD COLUMN end_reason TEXT;

CREATE TABLE watcher_firings (
    watcher_id     INTEGER NOT NULL REFERENCES watchers (watcher_id),
    firing         INTEGER NOT NULL CHECK (firing >= 1),
    dedupe_key     TEXT NOT NULL,
    fired_at_ms    INTEGER NOT NULL,
    trigger        TEXT NOT NULL,
    event_json     TEXT NOT NULL CHECK (json_type(event_json) = 'object'),
    reaction       TEXT NOT NULL CHECK (reaction IN ('agent_job', 'tool_call', 'attention')),
    job_id         INTEGER,
    reaction_state TEXT NOT NULL CHECK (reaction_state IN ('pending', 'done', 'failed')),
    reaction_note  TEXT NOT NULL,
    PRIMARY KEY (watcher_id, firing),
    UNIQUE (watcher_id, dedupe_key)
) STRICT;
CREATE INDEX watcher_firings_pending ON watcher_firings (watcher_id, firing)
    WHERE reaction_state = 'pending';
"#,
    },
    Migration {
        version: 11,
        name: "goals",
        // The goal runtime layer (`openphone-goals`, `docs/spec/goals.md`): one row per goal
        // holding its whole document (plan graph, actions with attempts, blockers, evidence,
        // checkpoints) as JSON, written only by compare-and-set on `version`; beside it the
        // append-only log of action transitions (written in the same transaction as the
        // document that results from them, so a transition is durable before its side effect
        // starts) and the delta reports with their own delivery state.
        sql: r#"
CREATE TABLE goals (
    goal_id        TEXT PRIMARY KEY,
    state          TEXT NOT NULL,
    version        INTEGER NOT NULL CHECK (version >= 1),
    deadline_at_ms INTEGER,
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    goal_json      TEXT NOT NULL CHECK (json_type(goal_json) = 'object')
) STRICT;
CREATE INDEX goals_by_state ON goals (state, updated_at_ms);

CREATE TABLE goal_transitions (
    goal_id    TEXT NOT NULL REFERENCES goals (goal_id),
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    action_id  TEXT NOT NULL,
    from_state TEXT NOT NULL,
    to_state   TEXT NOT NULL,
    source     TEXT NOT NULL,
    reason     TEXT NOT NULL,
    at_ms      INTEGER NOT NULL,
    PRIMARY KEY (goal_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE goal_reports (
    goal_id        TEXT NOT NULL REFERENCES goals (goal_id),
    seq            INTEGER NOT NULL CHECK (seq >= 1),
    created_at_ms  INTEGER NOT NULL,
    channel        TEXT NOT NULL,
    report_json    TEXT NOT NULL CHECK (json_type(report_json) = 'object'),
    delivery_state TEXT NOT NULL CHECK (delivery_state IN ('pending', 'sent', 'failed', 'suppressed')),
    attempts       INTEGER NOT NULL DEFAULT 0,
    last_error     TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (goal_id, seq)
) STRICT, WITHOUT ROWID;
CREATE INDEX goal_reports_pending ON goal_reports (created_at_ms)
    WHERE delivery_state = 'pending';
"#,
    },
    Migration {
        version: 12,
        name: "deferred_outcomes",
        // The outbox of deferred outcomes (`openphone-openclaw`, `openclaw-node.md` §8.5):
        // a request a remote runtime was answered with a pending receipt, until its outcome
        // has been posted into the runtime's conversation (at most once) or could not be.
        sql: r#"
CREATE TABLE deferred_outcomes (
    request_id        TEXT PRIMARY KEY,
    runtime           TEXT NOT NULL,
    command           TEXT NOT NULL,
    params_digest     TEXT NOT NULL,
    session_key       TEXT,
    receipt_json      TEXT NOT NULL CHECK (json_type(receipt_json) = 'object'),
    first_result_json TEXT NOT NULL CHECK (json_type(first_result_json) = 'object'),
    state             TEXT NOT NULL CHECK (state IN ('waiting', 'ready', 'posting', 'posted',
                          'failed')),
    outcome_json      TEXT CHECK (outcome_json IS NULL OR json_type(outcome_json) = 'object'),
    note              TEXT NOT NULL,
    created_at_ms     INTEGER NOT NULL,
    updated_at_ms     INTEGER NOT NULL
) STRICT;
CREATE INDEX deferred_outcomes_open ON deferred_outcomes (runtime, created_at_ms)
    WHERE state IN ('waiting', 'ready', 'posting');
"#,
    },
    Migration {
        version: 13,
        name: "agent_job_creators",
        // Every background job names who created it (issue 28): `operator` for the user's own
        // (the endpoint's `jobs.create`, the CLI, the dashboard), `builtin` for the built-in
        // runtime, else the runtime id. A runtime sees, stops and counts against its quota only
        // its own jobs, and its jobs run with its authority. Jobs stored before this version
        // were made before anyone was told apart: they get `operator`, except where the store
        // itself shows a runtime made them — the reaction job of a runtime's watcher (its
        // firing names the job) and a job bound to a runtime's phone session
        // (`session:<id>`) — which become that runtime's, so an upgrade never hands a runtime's
        // recurring job the user's authority. (`owner` is already the column of the run's
        // fence, so the creator has its own name.)
        sql: r#"
ALTER TABLE agent_jobs ADD COLUMN created_by TEXT NOT NULL DEFAULT 'operator'
    CHECK (length(created_by) >= 1);
UPDATE agent_jobs SET created_by = (
    SELECT w.runtime FROM watcher_firings f JOIN watchers w ON w.watcher_id = f.watcher_id
    WHERE f.job_id = agent_jobs.id AND w.runtime NOT IN ('operator', 'builtin')
    ORDER BY f.fired_at_ms LIMIT 1)
WHERE EXISTS (
    SELECT 1 FROM watcher_firings f JOIN watchers w ON w.watcher_id = f.watcher_id
    WHERE f.job_id = agent_jobs.id AND w.runtime NOT IN ('operator', 'builtin'));
UPDATE agent_jobs SET created_by = (
    SELECT s.runtime_kind FROM phone_sessions s
    WHERE 'session:' || s.phone_session_id = agent_jobs.session_target)
WHERE created_by = 'operator' AND EXISTS (
    SELECT 1 FROM phone_sessions s
    WHERE 'session:' || s.phone_session_id = agent_jobs.session_target
      AND s.runtime_kind NOT IN ('operator', 'builtin', ''));
CREATE INDEX agent_jobs_by_creator ON agent_jobs (created_by, status);
"#,
    },
    Migration {
        version: 14,
        name: "device_ids",
        // Several phones, one daemon (issue 30): a phone session and a background job name the
        // device they act on (`[[devices]] id`). NULL is the daemon's only (default) device, as
        // every row stored before this version was. Audit records name theirs in the shape.
        sql: r#"
ALTER TABLE phone_sessions ADD COLUMN device_id TEXT CHECK (device_id IS NULL OR length(device_id) >= 1);
ALTER TABLE agent_jobs ADD COLUMN device_id TEXT CHECK (device_id IS NULL OR length(device_id) >= 1);
"#,
    },
    Migration {
        version: 15,
        name: "execution_attempt_proof",
        // An executing record's attempt names its policy proof by digest (`attempt_proof`, the
        // key of `audit_proofs`, where the attempt's own audit record interns it in the same
        // transaction) instead of carrying its text: three quarters of every row, written and
        // deleted once per direct execution (issue 34). NULL: the proof (if any) is inside
        // `attempt_json`, as in every row written before this version.
        sql: r#"
ALTER TABLE executions ADD COLUMN attempt_proof BLOB
    CHECK (attempt_proof IS NULL OR length(attempt_proof) = 32);
"#,
    },
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 15;

/// Reads `PRAGMA user_version`.
pub(crate) fn current_version(conn: &Connection) -> Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
        .ctx("migrations.read_version", "")
}

/// Applies every migration above the database's version, up to `target`.
pub(crate) fn migrate(conn: &mut Connection, target: i64) -> Result<()> {
    let found = current_version(conn)?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for migration in MIGRATIONS
        .iter()
        .filter(|m| m.version > found && m.version <= target)
    {
        let id = migration.version.to_string();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .ctx("migrations.begin", &id)?;
        // Re-check under the write lock: a read-only opener never migrates, but be exact.
        let now = current_version(&tx)?;
        if now >= migration.version {
            continue;
        }
        tx.execute_batch(migration.sql)
            .ctx("migrations.apply", migration.name)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES (?1, ?2)",
            (migration.version, migration.name),
        )
        .ctx("migrations.record", migration.name)?;
        tx.pragma_update(None, "user_version", migration.version)
            .ctx("migrations.bump_version", migration.name)?;
        tx.commit().ctx("migrations.commit", migration.name)?;
    }
    Ok(())
}
