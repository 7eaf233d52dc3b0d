-- The daemons of the fleet (issue 35): one row per host_id, written by PgStore::open.
-- A LIVE daemon holds the session advisory lock hashtextextended('openphone:host:<schema>:<host_id>', 0)
-- on its writer connection; this row only records who it was and when it was last seen.
CREATE TABLE fleet_hosts (
    host_id         TEXT PRIMARY KEY,
    started_at_ms   BIGINT NOT NULL,
    last_seen_at_ms BIGINT NOT NULL,
    pid             BIGINT NOT NULL,
    label           TEXT NOT NULL
);
