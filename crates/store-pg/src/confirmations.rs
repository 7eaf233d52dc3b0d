//! [`ConfirmationStore`] on PostgreSQL.
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

impl ConfirmationStore for PgStore {
    fn insert_pending(
        &self,
        new: &NewConfirmation,
        max_pending_per_runtime: usize,
    ) -> Result<PendingInsert> {
        Err(todo("confirmations.insert_pending"))
    }

    fn get_confirmation(&self, confirmation_id: &str) -> Result<Option<ConfirmationRecord>> {
        Err(todo("confirmations.get_confirmation"))
    }

    fn find_pending(
        &self,
        identity: &IdentityKey,
        now_ms: i64,
    ) -> Result<Option<ConfirmationRecord>> {
        Err(todo("confirmations.find_pending"))
    }

    fn find_joinable(
        &self,
        runtime: &str,
        runtime_session_id: &str,
        tool: &str,
        resolved_since_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<ConfirmationRecord>> {
        Err(todo("confirmations.find_joinable"))
    }

    fn list_confirmations(&self, filter: &ConfirmationFilter) -> Result<Vec<ConfirmationRecord>> {
        Err(todo("confirmations.list_confirmations"))
    }

    fn next_pending_expiry(&self) -> Result<Option<i64>> {
        Err(todo("confirmations.next_pending_expiry"))
    }

    fn count_pending(&self, runtime: &str, now_ms: i64) -> Result<usize> {
        Err(todo("confirmations.count_pending"))
    }

    fn resolve(
        &self,
        confirmation_id: &str,
        decision: Resolution,
        resolved_by: &str,
        now_ms: i64,
    ) -> Result<ConfirmationRecord> {
        Err(todo("confirmations.resolve"))
    }

    fn complete(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
    ) -> Result<ConfirmationRecord> {
        Err(todo("confirmations.complete"))
    }

    fn complete_audited(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
        entry: AuditEntry,
    ) -> Result<ConfirmationRecord> {
        Err(todo("confirmations.complete_audited"))
    }

    fn attach_final_result(
        &self,
        confirmation_id: &str,
        final_result: &Value,
        now_ms: i64,
    ) -> Result<ConfirmationRecord> {
        Err(todo("confirmations.attach_final_result"))
    }

    fn expire_due(&self, now_ms: i64) -> Result<Vec<ConfirmationRecord>> {
        Err(todo("confirmations.expire_due"))
    }

    fn recover_after_restart(&self, now_ms: i64) -> Result<Recovery> {
        Err(todo("confirmations.recover_after_restart"))
    }
}
