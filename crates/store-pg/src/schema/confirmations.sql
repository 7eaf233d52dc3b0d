-- Durable confirmations (runtime-protocol.md §10.1): the fleet's shared inbox. Any daemon may
-- resolve any row; every transition is one conditional UPDATE whose row count decides the
-- single winner. host_id names the daemon that created the row (the one whose phone would act):
-- its start-up recovery settles only its own rows, and the per-runtime cap counts per daemon.
-- Ids compare and sort byte-wise (COLLATE "C"), as SQLite's TEXT does.
CREATE TABLE confirmations (
    confirmation_id    TEXT COLLATE "C" PRIMARY KEY,
    host_id            TEXT NOT NULL,
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
    created_at_ms      BIGINT NOT NULL,
    expires_at_ms      BIGINT NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'completed',
                           'denied', 'timeout', 'result_unknown')),
    resolved_at_ms     BIGINT,
    resolved_by        TEXT,
    final_result_json  TEXT
);
CREATE INDEX confirmations_identity ON confirmations
    (runtime, runtime_session_id, tool, params_digest, idempotency_key, state);
CREATE INDEX confirmations_state ON confirmations (state, expires_at_ms);
CREATE INDEX confirmations_host ON confirmations (host_id, state, created_at_ms);
