-- Standing approvals, session grants and runtime settings (ApprovalStore; port of the SQLite
-- migrations 2 and 3). Fleet-wide: an approval the user made applies on every host.
CREATE TABLE standing_approvals (
    approval_id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    runtime          TEXT NOT NULL,
    tool             TEXT NOT NULL,
    constraints_json TEXT NOT NULL,
    expires_at_ms    BIGINT,
    background       BOOLEAN NOT NULL,
    enabled          BOOLEAN NOT NULL,
    created_at_ms    BIGINT NOT NULL,
    updated_at_ms    BIGINT NOT NULL,
    phone_session_id TEXT,
    confirmation_id  TEXT,
    created_by       TEXT,
    note             TEXT,
    revoked_at_ms    BIGINT,
    revoked_by       TEXT
);
CREATE INDEX standing_approvals_lookup ON standing_approvals (runtime, tool);

-- The approvals' generation: bumped in the same transaction as every write to
-- standing_approvals, read by every daemon before it trusts its cache of them (approvals.rs).
CREATE TABLE approvals_version (
    singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    version   BIGINT NOT NULL CHECK (version >= 0)
);
INSERT INTO approvals_version (singleton, version) VALUES (TRUE, 0);

CREATE TABLE runtime_settings (
    key           TEXT PRIMARY KEY,
    value_json    TEXT NOT NULL,
    updated_at_ms BIGINT NOT NULL
);
