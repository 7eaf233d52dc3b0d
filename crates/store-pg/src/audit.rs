//! [`AuditStore`] on PostgreSQL.
//!
//! Stubs until the domain is written: each method answers `StoreError::Backend` "not
//! implemented on PostgreSQL yet".

#![allow(unused_variables, unused_imports)]

use std::path::Path;

use openphone_store::*;
use serde_json::Value;

use crate::PgStore;

fn todo(op: &'static str) -> StoreError {
    StoreError::Backend {
        op,
        id: String::new(),
        detail: "not implemented on PostgreSQL yet".to_owned(),
    }
}

/// Appends `entry` to the audit chain `chain` (this daemon's `host_id`) inside `tx`, and
/// anchors the new head: what every domain that audits in its own transaction calls (the
/// executing record of a direct execution, a resolved confirmation, a watcher's firing).
pub(crate) fn append_in(
    tx: &mut postgres::Transaction<'_>,
    chain: &str,
    entry: &AuditEntry,
) -> Result<AuditRecord> {
    Err(todo("audit.append_in"))
}

impl AuditStore for PgStore {
    fn append_audit(&self, entry: &AuditEntry) -> Result<AuditRecord> {
        Err(todo("audit.append_audit"))
    }

    fn append_audit_async<'a>(&'a self, entry: AuditEntry) -> BoxFuture<'a, Result<AuditRecord>> {
        Box::pin(async { Err(todo("audit.append_audit_async")) })
    }

    fn append_audit_relaxed_async<'a>(
        &'a self,
        entry: AuditEntry,
    ) -> BoxFuture<'a, Result<AuditRecord>> {
        Box::pin(async { Err(todo("audit.append_audit_relaxed_async")) })
    }

    fn export_audit(&self, after_seq: i64, limit: usize) -> Result<Vec<AuditRecord>> {
        Err(todo("audit.export_audit"))
    }

    fn find_audit(&self, audit_id: &str) -> Result<Vec<AuditRecord>> {
        Err(todo("audit.find_audit"))
    }

    fn verify_audit(&self) -> Result<VerifyReport> {
        Err(todo("audit.verify_audit"))
    }

    fn audit_head(&self) -> Result<AuditAnchor> {
        Err(todo("audit.audit_head"))
    }

    fn verify_audit_anchored(&self, anchors: &[AuditAnchor]) -> Result<AnchoredReport> {
        Err(todo("audit.verify_audit_anchored"))
    }
}
