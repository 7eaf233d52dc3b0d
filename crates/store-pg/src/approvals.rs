//! [`ApprovalStore`] on PostgreSQL.
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

impl ApprovalStore for PgStore {
    fn create_approval(&self, new: &NewStandingApproval, now_ms: i64) -> Result<StandingApproval> {
        Err(todo("approvals.create_approval"))
    }

    fn get_approval(&self, approval_id: i64) -> Result<Option<StandingApproval>> {
        Err(todo("approvals.get_approval"))
    }

    fn list_approvals(&self, runtime: Option<&str>) -> Result<Vec<StandingApproval>> {
        Err(todo("approvals.list_approvals"))
    }

    fn active_approvals(
        &self,
        runtime: &str,
        tool: &str,
        now_ms: i64,
    ) -> Result<Vec<StandingApproval>> {
        Err(todo("approvals.active_approvals"))
    }

    fn set_approval_enabled(
        &self,
        approval_id: i64,
        enabled: bool,
        now_ms: i64,
    ) -> Result<StandingApproval> {
        Err(todo("approvals.set_approval_enabled"))
    }

    fn revoke_approval(
        &self,
        approval_id: i64,
        revoked_by: &str,
        now_ms: i64,
    ) -> Result<StandingApproval> {
        Err(todo("approvals.revoke_approval"))
    }

    fn delete_approval(&self, approval_id: i64) -> Result<bool> {
        Err(todo("approvals.delete_approval"))
    }

    fn get_setting(&self, key: &str) -> Result<Option<Value>> {
        Err(todo("approvals.get_setting"))
    }

    fn set_setting(&self, key: &str, value: &Value, now_ms: i64) -> Result<()> {
        Err(todo("approvals.set_setting"))
    }

    fn delete_setting(&self, key: &str) -> Result<bool> {
        Err(todo("approvals.delete_setting"))
    }

    fn list_settings(&self) -> Result<Vec<Setting>> {
        Err(todo("approvals.list_settings"))
    }
}
