-- PostgreSQL schema of the replay domain (issue 35): part of migration 1, in the order of
-- crates/store-pg/src/migrate.rs. Written by crates/store-pg/src/replay/.
--
-- Replay is fleet-wide: a request's identity key (runtime, runtime_session_id, tool,
-- params_digest, idempotency_key) names one final result, one tombstone, one execution in
-- flight, whichever daemon of the fleet it reached. Rows are keyed by `identity`, the SHA-256
-- of canonical_json([runtime, runtime_session_id, tool, params_digest, idempotency_key]) (the
-- SQLite store's tombstone key), so one 32-byte index serves final results, tombstones and
-- executions. `seq` orders rows of equal time as SQLite's rowid does.

-- Final results for replay (runtime-protocol.md §10.3). `status`/`error_code` are the result's
-- own, copied out when it is recorded, so pruning can leave a tombstone without reading the JSON.
CREATE TABLE final_results (
    identity           BYTEA PRIMARY KEY,
    seq                BIGINT GENERATED ALWAYS AS IDENTITY,
    runtime            TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL,
    tool               TEXT NOT NULL,
    params_digest      TEXT NOT NULL,
    idempotency_key    TEXT NOT NULL,
    request_id         TEXT NOT NULL,
    result_json        TEXT NOT NULL,
    status             TEXT,
    error_code         TEXT,
    recorded_at_ms     BIGINT NOT NULL
);
CREATE UNIQUE INDEX final_results_seq ON final_results (seq);
CREATE INDEX final_results_recorded ON final_results (recorded_at_ms, seq);

-- The request-id index (§10.2): detects a request id reused for another body.
CREATE TABLE request_ids (
    runtime            TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL,
    request_id         TEXT NOT NULL,
    seq                BIGINT GENERATED ALWAYS AS IDENTITY,
    tool               TEXT NOT NULL,
    params_digest      TEXT NOT NULL,
    recorded_at_ms     BIGINT NOT NULL,
    PRIMARY KEY (runtime, runtime_session_id, request_id)
);
CREATE UNIQUE INDEX request_ids_seq ON request_ids (seq);
CREATE INDEX request_ids_recorded ON request_ids (recorded_at_ms, seq);

-- What is left of a final result pruned by retention: a retry is answered
-- `execution_result_unknown`, never run again.
CREATE TABLE final_tombstones (
    identity       BYTEA PRIMARY KEY,
    request_id     TEXT NOT NULL,
    status         TEXT,
    error_code     TEXT,
    recorded_at_ms BIGINT NOT NULL,
    pruned_at_ms   BIGINT NOT NULL
);

-- Direct executions in flight: written with the attempt's audit record before the side effect,
-- removed with the final result. `host_id` is the daemon running it: after a restart a daemon
-- settles only its own (`PgStore::list_executions`), never another live daemon's.
CREATE TABLE executions (
    identity           BYTEA PRIMARY KEY,
    runtime            TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL,
    tool               TEXT NOT NULL,
    params_digest      TEXT NOT NULL,
    idempotency_key    TEXT NOT NULL,
    request_id         TEXT NOT NULL,
    attempt_json       TEXT NOT NULL,
    started_at_ms      BIGINT NOT NULL,
    host_id            TEXT NOT NULL
);
CREATE INDEX executions_host ON executions (host_id, started_at_ms, request_id);
