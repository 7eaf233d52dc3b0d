-- PostgreSQL schema of the watchers domain (issue 35): part of migration 1, in the order of
-- crates/store-pg/src/migrate.rs. Durable watcher records (what was asked for, whether it is
-- active, the engine's cursor) and their firings, each firing committed with the job its reaction
-- creates and its audit record; `dedupe_key` makes one trigger fire a watcher at most once, across
-- the fleet. A watcher observes one phone, so it belongs to the daemon serving that phone
-- (`host_id`): a daemon's watcher engine runs only its own host's watchers.
CREATE TABLE watchers (
    watcher_id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host_id          TEXT NOT NULL,
    runtime          TEXT NOT NULL,
    title            TEXT NOT NULL,
    source           TEXT NOT NULL,
    params_json      TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('active', 'stopped')),
    created_at_ms    BIGINT NOT NULL,
    stopped_at_ms    BIGINT,
    fire_count       BIGINT NOT NULL DEFAULT 0,
    last_fired_at_ms BIGINT,
    cursor_json      TEXT NOT NULL DEFAULT '{}',
    end_reason       TEXT
);
CREATE INDEX watchers_state ON watchers (state, watcher_id);
CREATE INDEX watchers_host ON watchers (host_id, state, watcher_id);

CREATE TABLE watcher_firings (
    watcher_id     BIGINT NOT NULL REFERENCES watchers (watcher_id),
    firing         BIGINT NOT NULL CHECK (firing >= 1),
    dedupe_key     TEXT NOT NULL,
    fired_at_ms    BIGINT NOT NULL,
    trigger        TEXT NOT NULL,
    event_json     TEXT NOT NULL CHECK (jsonb_typeof(event_json::jsonb) = 'object'),
    reaction       TEXT NOT NULL CHECK (reaction IN ('agent_job', 'tool_call', 'attention')),
    job_id         BIGINT,
    reaction_state TEXT NOT NULL CHECK (reaction_state IN ('pending', 'done', 'failed')),
    reaction_note  TEXT NOT NULL,
    PRIMARY KEY (watcher_id, firing),
    UNIQUE (watcher_id, dedupe_key)
);
CREATE INDEX watcher_firings_pending ON watcher_firings (fired_at_ms, watcher_id, firing)
    WHERE reaction_state = 'pending';
