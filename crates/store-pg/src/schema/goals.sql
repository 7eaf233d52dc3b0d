-- PostgreSQL schema of the goals domain (issue 35): part of migration 1, in the order of
-- crates/store-pg/src/migrate.rs. The goal runtime's documents (`openphone-goals`,
-- docs/spec/goals.md): one row per goal holding its whole document as JSON text (its exact
-- bytes; nothing queries into it), written only by compare-and-set on `version`, so two daemons
-- ticking one goal cannot both win; beside it the append-only log of action transitions and the
-- delta reports with their own delivery state. Ids sort bytewise (COLLATE "C") as in SQLite.
-- Goals are fleet-wide: `host_id` names the daemon
-- that created the goal (the one whose phone it acts on).
CREATE TABLE goals (
    goal_id        TEXT COLLATE "C" PRIMARY KEY,
    host_id        TEXT NOT NULL,
    state          TEXT NOT NULL,
    version        BIGINT NOT NULL CHECK (version >= 1),
    deadline_at_ms BIGINT,
    created_at_ms  BIGINT NOT NULL,
    updated_at_ms  BIGINT NOT NULL,
    goal_json      TEXT NOT NULL CHECK (jsonb_typeof(goal_json::jsonb) = 'object')
);
CREATE INDEX goals_by_state ON goals (state, updated_at_ms);
CREATE INDEX goals_by_updated ON goals (updated_at_ms DESC, goal_id);
CREATE INDEX goals_by_host ON goals (host_id);

CREATE TABLE goal_transitions (
    goal_id    TEXT COLLATE "C" NOT NULL REFERENCES goals (goal_id),
    seq        BIGINT NOT NULL CHECK (seq >= 1),
    action_id  TEXT NOT NULL,
    from_state TEXT NOT NULL,
    to_state   TEXT NOT NULL,
    source     TEXT NOT NULL,
    reason     TEXT NOT NULL,
    at_ms      BIGINT NOT NULL,
    PRIMARY KEY (goal_id, seq)
);

CREATE TABLE goal_reports (
    goal_id        TEXT COLLATE "C" NOT NULL REFERENCES goals (goal_id),
    seq            BIGINT NOT NULL CHECK (seq >= 1),
    created_at_ms  BIGINT NOT NULL,
    channel        TEXT NOT NULL,
    report_json    TEXT NOT NULL CHECK (jsonb_typeof(report_json::jsonb) = 'object'),
    delivery_state TEXT NOT NULL
        CHECK (delivery_state IN ('pending', 'sent', 'failed', 'suppressed')),
    attempts       BIGINT NOT NULL DEFAULT 0,
    last_error     TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (goal_id, seq)
);
CREATE INDEX goal_reports_pending ON goal_reports (created_at_ms, goal_id, seq)
    WHERE delivery_state = 'pending';
