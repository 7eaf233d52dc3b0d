-- The outbox of deferred outcomes (openclaw-node.md §8.5): a request a remote runtime was
-- answered with a pending receipt, until its outcome has been posted into the runtime's
-- conversation (at most once) or could not be. host_id names the daemon whose runtime
-- connection got the receipt: its outbox lists only its own rows (a daemon's restart fails
-- its own rows left `posting`, never another live daemon's).
CREATE TABLE deferred_outcomes (
    request_id        TEXT COLLATE "C" PRIMARY KEY,
    host_id           TEXT NOT NULL,
    runtime           TEXT NOT NULL,
    command           TEXT NOT NULL,
    params_digest     TEXT NOT NULL,
    session_key       TEXT,
    receipt_json      TEXT NOT NULL CHECK (json_typeof(receipt_json::json) = 'object'),
    first_result_json TEXT NOT NULL CHECK (json_typeof(first_result_json::json) = 'object'),
    state             TEXT NOT NULL CHECK (state IN ('waiting', 'ready', 'posting', 'posted',
                          'failed')),
    outcome_json      TEXT CHECK (outcome_json IS NULL
                          OR json_typeof(outcome_json::json) = 'object'),
    note              TEXT NOT NULL,
    created_at_ms     BIGINT NOT NULL,
    updated_at_ms     BIGINT NOT NULL
);
CREATE INDEX deferred_outcomes_open ON deferred_outcomes (host_id, runtime, created_at_ms)
    WHERE state IN ('waiting', 'ready', 'posting');
