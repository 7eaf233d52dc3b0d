//! [`AuditStore`] on PostgreSQL.
//!
//! Stubs until the domain is written: each method answers `StoreError::Backend` "not
//! implemented on PostgreSQL yet".

#![allow(unused_variables, unused_imports)]

use std::path::Path;
use std::sync::Arc;

use openphone_store::*;
use serde_json::Value;

use crate::PgStore;

mod append;

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
#[allow(dead_code)] // Called by the domains that audit inside their own writes.
pub(crate) fn append_in(
    tx: &mut postgres::Transaction<'_>,
    chain: &str,
    entry: &AuditEntry,
) -> Result<AuditRecord> {
    let prepared = append::prepare(entry)?;
    append::append_prepared(tx, chain, &prepared)
}

impl PgStore {
    /// Appends `entry` to this daemon's chain in a write of its own.
    async fn append_own_async(&self, entry: &AuditEntry) -> Result<AuditRecord> {
        let prepared = Arc::new(append::prepare(entry)?);
        let chain = self.host_id().to_owned();
        let id = prepared.entry.audit_id.clone();
        self.write_async("audit.append", &id, move |tx| {
            append::append_prepared(tx, &chain, &prepared)
        })
        .await
    }
}

impl AuditStore for PgStore {
    fn append_audit(&self, entry: &AuditEntry) -> Result<AuditRecord> {
        let prepared = Arc::new(append::prepare(entry)?);
        let chain = self.host_id().to_owned();
        let id = prepared.entry.audit_id.clone();
        self.write("audit.append", &id, move |tx| {
            append::append_prepared(tx, &chain, &prepared)
        })
    }

    fn append_audit_async<'a>(&'a self, entry: AuditEntry) -> BoxFuture<'a, Result<AuditRecord>> {
        Box::pin(async move { self.append_own_async(&entry).await })
    }

    /// PostgreSQL has no "committed but not yet fsynced" point a caller can wait for: the
    /// relaxed append is the durable one.
    fn append_audit_relaxed_async<'a>(
        &'a self,
        entry: AuditEntry,
    ) -> BoxFuture<'a, Result<AuditRecord>> {
        Box::pin(async move { self.append_own_async(&entry).await })
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
