//! The PostgreSQL schema and its migrations.
//!
//! `schema_migrations(version, applied_at_ms)` lists the migrations applied. Migration 1 is the
//! whole schema as of issue 35: `schema/fleet.sql`, then each domain's file in the contract's
//! order (sessions, confirmations, replay, audit, approvals, jobs, goals, watchers, outcomes,
//! memory). A later schema change is a new migration appended to the `MIGRATIONS` list, never
//! an edit of an applied one. Opening runs the pending ones under a session advisory lock (keyed by the
//! schema), each in its own transaction, so daemons starting together migrate once; a database
//! migrated by a newer build is refused with [`StoreError::SchemaTooNew`].

use openphone_store::{Result, StoreError};
use postgres::Client;

use crate::error::PgContext;

/// Migration 1: the schema of issue 35.
const MIGRATION_1: &str = concat!(
    include_str!("schema/fleet.sql"),
    "\n",
    include_str!("schema/sessions.sql"),
    "\n",
    include_str!("schema/confirmations.sql"),
    "\n",
    include_str!("schema/replay.sql"),
    "\n",
    include_str!("schema/audit.sql"),
    "\n",
    include_str!("schema/approvals.sql"),
    "\n",
    include_str!("schema/jobs.sql"),
    "\n",
    include_str!("schema/goals.sql"),
    "\n",
    include_str!("schema/watchers.sql"),
    "\n",
    include_str!("schema/outcomes.sql"),
    "\n",
    include_str!("schema/memory.sql"),
);

/// Every migration, by version, oldest first.
const MIGRATIONS: &[(i64, &str)] = &[(1, MIGRATION_1)];

/// The schema version this build writes.
pub const PG_SCHEMA_VERSION: i64 = 1;

/// How long an opener waits for another opener's migrations.
const MIGRATION_LOCK_WAIT: &str = "300s";

/// Brings the schema on `client`'s search path up to [`PG_SCHEMA_VERSION`]; returns the
/// versions it applied (empty when another opener, or an earlier run, already had).
pub(crate) fn migrate(client: &mut Client, now_ms: i64, lock_timeout_ms: u128) -> Result<Vec<i64>> {
    client
        .batch_execute(&format!("SET lock_timeout = '{MIGRATION_LOCK_WAIT}'"))
        .ctx("migrations.lock", "")?;
    client
        .execute(
            "SELECT pg_advisory_lock(hashtextextended('openphone:migrate:' || current_schema(), 0))",
            &[],
        )
        .ctx("migrations.lock", "")?;
    let outcome = apply(client, now_ms);
    let unlocked = client
        .execute(
            "SELECT pg_advisory_unlock(hashtextextended('openphone:migrate:' || current_schema(), 0))",
            &[],
        )
        .ctx("migrations.unlock", "");
    let restored = client
        .batch_execute(&format!("SET lock_timeout = '{lock_timeout_ms}ms'"))
        .ctx("migrations.unlock", "");
    let applied = outcome?;
    unlocked?;
    restored?;
    Ok(applied)
}

fn apply(client: &mut Client, now_ms: i64) -> Result<Vec<i64>> {
    if client
        .query_one("SELECT current_schema() IS NULL", &[])
        .ctx("migrations.schema", "")?
        .get::<_, bool>(0)
    {
        return Err(StoreError::Invalid {
            what: "PostgreSQL schema",
            detail: "no schema on the search path exists (set search_path, or create the schema)"
                .into(),
        });
    }
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                 version       BIGINT PRIMARY KEY,
                 applied_at_ms BIGINT NOT NULL
             )",
        )
        .ctx("migrations.create", "")?;
    let found: i64 = client
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            &[],
        )
        .ctx("migrations.version", "")?
        .get(0);
    if found > PG_SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: PG_SCHEMA_VERSION,
        });
    }
    let mut applied = Vec::new();
    for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
        let id = version.to_string();
        let mut tx = client.transaction().ctx("migrations.apply", &id)?;
        tx.batch_execute(sql).ctx("migrations.apply", &id)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_at_ms) VALUES ($1, $2)",
            &[&version, &now_ms],
        )
        .ctx("migrations.apply", &id)?;
        tx.commit().ctx("migrations.apply", &id)?;
        applied.push(version);
    }
    Ok(applied)
}
