-- PostgreSQL schema of the audit domain (issue 35): part of migration 1, in the order of
-- crates/store-pg/src/migrate.rs. See crates/store-pg/src/audit/mod.rs.
--
-- One hash chain per daemon: `chain` is the daemon's host_id. A record is one row holding the
-- AuditEntry's JSON text (the exact bytes hashed), its hash in SQLite's form 2; `prev_hash`
-- is not stored: it is the hash of the chain's previous row.
CREATE TABLE audit_records (
    chain    TEXT   NOT NULL,
    seq      BIGINT NOT NULL CHECK (seq > 0),
    audit_id TEXT   NOT NULL,
    at_ms    BIGINT NOT NULL,
    entry    TEXT   NOT NULL,
    hash     TEXT   NOT NULL,
    PRIMARY KEY (chain, seq)
);
CREATE INDEX audit_records_audit_id ON audit_records (audit_id);

-- The head of each chain: its last seq and hash, locked FOR UPDATE by every append. Rows are
-- updated in place at every append: fillfactor leaves room on the page for heap-only updates
-- (no new index entry another daemon's serializable read could conflict with).
CREATE TABLE audit_heads (
    chain TEXT PRIMARY KEY,
    seq   BIGINT NOT NULL,
    hash  TEXT   NOT NULL
) WITH (fillfactor = 50);

-- Each chain's head as anchored at its latest append: a rewrite of the chain and its head
-- that leaves this row alone is caught by verify_audit.
CREATE TABLE audit_anchors (
    chain          TEXT PRIMARY KEY,
    seq            BIGINT NOT NULL,
    hash           TEXT   NOT NULL,
    anchored_at_ms BIGINT NOT NULL
) WITH (fillfactor = 50);
