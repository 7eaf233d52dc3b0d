#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(pg_conformance)]
//! The store's conformance suite on PostgreSQL: the behavioural modules of
//! `crates/store/tests/suite/` (the SQLite suite runs the same files), each test on a fresh
//! schema of the server named by `OPENPHONE_TEST_PG_URL`. Compiled only when that variable is
//! set (see `build.rs`); the modules that describe SQLite's files (locks, migrations, the
//! writer's batches, the on-disk audit layout) stay in the SQLite suite.

#[path = "conformance/fleet_support.rs"]
mod fleet_support;
#[path = "conformance/support.rs"]
mod support;

#[path = "conformance/approvals_fleet.rs"]
mod approvals_fleet;
#[path = "../../store/tests/suite/approvals_settings.rs"]
mod approvals_settings;
#[path = "../../store/tests/suite/audit.rs"]
mod audit;
#[path = "../../store/tests/suite/audit_anchor.rs"]
mod audit_anchor;
#[path = "conformance/audit_fleet.rs"]
mod audit_fleet;
#[path = "conformance/audit_pg.rs"]
mod audit_pg;
#[path = "../../store/tests/suite/confirmations.rs"]
mod confirmations;
#[path = "conformance/confirmations_fleet.rs"]
mod confirmations_fleet;
#[path = "conformance/confirmations_pg.rs"]
mod confirmations_pg;
#[path = "../../store/tests/suite/executions.rs"]
mod executions;
#[path = "../../store/tests/suite/goals.rs"]
mod goals;
#[path = "conformance/goals_fleet.rs"]
mod goals_fleet;
#[path = "../../store/tests/suite/jobs.rs"]
mod jobs;
#[path = "conformance/jobs_fleet.rs"]
mod jobs_fleet;
#[path = "../../store/tests/suite/memory.rs"]
mod memory;
#[path = "conformance/memory_pg.rs"]
mod memory_pg;
#[path = "../../store/tests/suite/outcomes.rs"]
mod outcomes;
#[path = "conformance/outcomes_fleet.rs"]
mod outcomes_fleet;
#[path = "../../store/tests/suite/replay.rs"]
mod replay;
#[path = "conformance/replay_fleet.rs"]
mod replay_fleet;
#[path = "../../store/tests/suite/retention.rs"]
mod retention;
#[path = "conformance/retention_pg.rs"]
mod retention_pg;
#[path = "../../store/tests/suite/sessions.rs"]
mod sessions;
#[path = "../../store/tests/suite/stats.rs"]
mod stats;
#[path = "conformance/stats_pg.rs"]
mod stats_pg;
#[path = "../../store/tests/suite/transcripts.rs"]
mod transcripts;
#[path = "../../store/tests/suite/watchers.rs"]
mod watchers;
