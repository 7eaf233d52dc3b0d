-- Background agent jobs and their attempt ledger on PostgreSQL (issue 35; SQLite's migrations 9,
-- 13 and 14 in one): one column per field of the wire record, the internal `version`,
-- `current_attempt`/`owner` (the fence of the run in progress), `delivery_state`, `created_by`,
-- `device_id`, and for a fleet:
--   host_id      the daemon that created the job (fleet views name it);
--   lease_owner  the daemon (host_id) whose claim runs the job now, or ran it last;
--   lease_epoch  that daemon's incarnation (fleet_hosts.started_at_ms when it claimed).
-- Every write of a claimed run checks the lease (fencing, crates/store-pg/src/jobs/). A lease is
-- dead when its daemon's host lock is not held or the daemon restarted (its started_at_ms moved).
-- JSON columns are TEXT (the exact bytes SQLite keeps); CHECKs cast them to say they are objects.
CREATE TABLE agent_jobs (
    id                        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type                      TEXT NOT NULL
                                  CHECK (type IN ('agent_turn', 'system_event', 'heartbeat')),
    title                     TEXT NOT NULL CHECK (length(title) >= 1),
    prompt                    TEXT NOT NULL,
    payload_json              TEXT NOT NULL CHECK (json_typeof(payload_json::json) = 'object'),
    schedule_json             TEXT NOT NULL CHECK (json_typeof(schedule_json::json) = 'object'),
    session_target            TEXT NOT NULL,
    delivery_json             TEXT NOT NULL CHECK (json_typeof(delivery_json::json) = 'object'),
    status                    TEXT NOT NULL CHECK (status IN ('active', 'queued', 'running',
                                  'waiting', 'awaiting_review', 'paused', 'completed', 'failed',
                                  'stopped', 'dispatched')),
    created_at                BIGINT NOT NULL CHECK (created_at >= 0),
    updated_at                BIGINT NOT NULL CHECK (updated_at >= 0),
    next_run_at               BIGINT NOT NULL CHECK (next_run_at >= 0),
    running_at                BIGINT NOT NULL CHECK (running_at >= 0),
    last_run_at               BIGINT NOT NULL CHECK (last_run_at >= 0),
    last_result               TEXT NOT NULL,
    failure_count             BIGINT NOT NULL CHECK (failure_count >= 0),
    failure_alert_at          BIGINT NOT NULL CHECK (failure_alert_at >= 0),
    phase                     TEXT NOT NULL CHECK (phase IN ('queued', 'running', 'waiting',
                                  'awaiting_review', 'approval_executing', 'denial_resolving',
                                  'resuming', 'completed', 'failed', 'stopped', 'paused',
                                  'waiting_for_runtime', 'review_resolution_unknown')),
    progress_text             TEXT NOT NULL CHECK (length(progress_text) <= 4000),
    progress_current          BIGINT NOT NULL CHECK (progress_current >= 0),
    progress_total            BIGINT NOT NULL CHECK (progress_total >= 0),
    checkpoint_json           TEXT NOT NULL CHECK (json_typeof(checkpoint_json::json) = 'object'),
    pending_confirmation_id   TEXT NOT NULL CHECK (length(pending_confirmation_id) <= 200),
    pending_tool_request_json TEXT NOT NULL
                                  CHECK (json_typeof(pending_tool_request_json::json) = 'object'),
    last_surface_id           TEXT NOT NULL CHECK (length(last_surface_id) <= 160),
    resume_token              TEXT NOT NULL CHECK (length(resume_token) <= 200),
    last_event_at             BIGINT NOT NULL CHECK (last_event_at >= 0),
    unread_result             BOOLEAN NOT NULL,
    paused_at                 BIGINT NOT NULL CHECK (paused_at >= 0),
    version                   BIGINT NOT NULL CHECK (version >= 1),
    current_attempt           BIGINT NOT NULL CHECK (current_attempt >= 0),
    owner                     TEXT NOT NULL,
    delivery_state            TEXT CHECK (delivery_state IN ('pending', 'sent', 'unverified',
                                  'failed', 'suppressed')),
    created_by                TEXT NOT NULL CHECK (length(created_by) >= 1),
    device_id                 TEXT CHECK (device_id IS NULL OR length(device_id) >= 1),
    host_id                   TEXT NOT NULL,
    lease_owner               TEXT,
    lease_epoch               BIGINT,
    CHECK ((lease_owner IS NULL) = (lease_epoch IS NULL))
);
CREATE INDEX agent_jobs_due ON agent_jobs (next_run_at, id) WHERE status IN ('queued', 'active');
CREATE INDEX agent_jobs_running ON agent_jobs (running_at) WHERE status = 'running';
CREATE INDEX agent_jobs_awaiting_review ON agent_jobs (id) WHERE status = 'awaiting_review';
CREATE INDEX agent_jobs_waiting ON agent_jobs (id) WHERE status = 'waiting';
CREATE INDEX agent_jobs_terminal ON agent_jobs (updated_at, id)
    WHERE status IN ('completed', 'failed', 'stopped', 'dispatched');
CREATE INDEX agent_jobs_by_creator ON agent_jobs (created_by, status);
CREATE INDEX agent_jobs_by_confirmation ON agent_jobs (pending_confirmation_id)
    WHERE pending_confirmation_id <> '';

-- The attempt ledger: one row per run attempt, with the lease it ran under.
CREATE TABLE agent_job_runs (
    job_id      BIGINT NOT NULL REFERENCES agent_jobs (id) ON DELETE CASCADE,
    attempt     BIGINT NOT NULL CHECK (attempt >= 1),
    intended_at BIGINT NOT NULL,
    catch_up    BOOLEAN NOT NULL,
    owner       TEXT NOT NULL,
    started_at  BIGINT NOT NULL,
    finished_at BIGINT,
    outcome     TEXT NOT NULL CHECK (outcome IN ('running', 'succeeded', 'failed', 'timed_out',
                    'cancelled', 'interrupted', 'unknown', 'dispatched', 'parked')),
    reason      TEXT NOT NULL,
    output_ref  TEXT NOT NULL,
    lease_owner TEXT,
    lease_epoch BIGINT,
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX agent_job_runs_dispatched ON agent_job_runs (output_ref) WHERE outcome = 'dispatched';

-- Which phones each daemon serves (PgStore::register_devices, called by the daemon with its
-- [[devices]] ids): a daemon claims only jobs naming one of its devices, or naming none.
CREATE TABLE fleet_devices (
    host_id          TEXT NOT NULL REFERENCES fleet_hosts (host_id) ON DELETE CASCADE,
    device_id        TEXT NOT NULL CHECK (length(device_id) >= 1),
    registered_at_ms BIGINT NOT NULL,
    PRIMARY KEY (host_id, device_id)
);
CREATE INDEX fleet_devices_by_device ON fleet_devices (device_id);
