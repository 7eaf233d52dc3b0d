-- Phone sessions and their transcripts (SessionStore; port of the SQLite migrations 1, 8, 14).
-- A session belongs to the daemon whose phone it drives (host_id): a restarting daemon fails
-- only its own active sessions. Reads and status writes by id are fleet-wide.
-- row_seq orders sessions created in the same millisecond (SQLite's rowid).
CREATE TABLE phone_sessions (
    phone_session_id   TEXT PRIMARY KEY,
    row_seq            BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    host_id            TEXT NOT NULL CHECK (length(host_id) >= 1),
    created_at_ms      BIGINT NOT NULL,
    updated_at_ms      BIGINT NOT NULL,
    runtime_kind       TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL,
    attention_id       TEXT NOT NULL,
    source             TEXT NOT NULL,
    autonomy           TEXT NOT NULL,
    summary            TEXT NOT NULL,
    status             TEXT NOT NULL CHECK (status IN ('created', 'waiting_for_runtime',
                           'running', 'waiting_for_confirmation', 'completed', 'failed')),
    audit_log_id       TEXT NOT NULL,
    failure_reason     TEXT,
    device_id          TEXT CHECK (device_id IS NULL OR length(device_id) >= 1)
);
CREATE INDEX phone_sessions_created ON phone_sessions (created_at_ms, row_seq);
CREATE INDEX phone_sessions_runtime ON phone_sessions (runtime_kind, status);
CREATE INDEX phone_sessions_host ON phone_sessions (host_id, created_at_ms, row_seq);

-- The conversation of a phone session, numbered from 1 within it; its rows go with the session.
CREATE TABLE session_transcripts (
    phone_session_id TEXT NOT NULL
        REFERENCES phone_sessions (phone_session_id) ON DELETE CASCADE,
    seq              BIGINT NOT NULL,
    role             TEXT NOT NULL,
    body_json        TEXT NOT NULL,
    created_at_ms    BIGINT NOT NULL,
    PRIMARY KEY (phone_session_id, seq)
);
