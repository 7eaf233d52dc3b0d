//! [`ReplayStore`] on PostgreSQL.
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

impl ReplayStore for PgStore {
    fn begin_execution(&self, execution: &Execution) -> Result<AuditRecord> {
        Err(todo("replay.begin_execution"))
    }

    fn begin_execution_async<'a>(
        &'a self,
        execution: Execution,
    ) -> BoxFuture<'a, Result<AuditRecord>> {
        Box::pin(async { Err(todo("replay.begin_execution_async")) })
    }

    fn finish_execution(
        &self,
        identity: &IdentityKey,
        request_id: &str,
        result: &Value,
        outcome: &AuditEntry,
        now_ms: i64,
    ) -> Result<FinalResult> {
        Err(todo("replay.finish_execution"))
    }

    fn finish_execution_async<'a>(
        &'a self,
        identity: IdentityKey,
        request_id: String,
        result: Value,
        outcome: AuditEntry,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<FinalResult>> {
        Box::pin(async { Err(todo("replay.finish_execution_async")) })
    }

    fn find_execution(&self, identity: &IdentityKey) -> Result<Option<Execution>> {
        Err(todo("replay.find_execution"))
    }

    fn list_executions(&self) -> Result<Vec<Execution>> {
        Err(todo("replay.list_executions"))
    }

    fn record_final(
        &self,
        identity: &IdentityKey,
        request_id: &str,
        result: &Value,
        now_ms: i64,
    ) -> Result<FinalResult> {
        Err(todo("replay.record_final"))
    }

    fn find_final(&self, identity: &IdentityKey) -> Result<Option<FinalResult>> {
        Err(todo("replay.find_final"))
    }

    fn remember_request(
        &self,
        scope: &Scope,
        request_id: &str,
        tool: &str,
        params_digest: &str,
        now_ms: i64,
    ) -> Result<RequestCheck> {
        Err(todo("replay.remember_request"))
    }

    fn remember_request_async<'a>(
        &'a self,
        scope: &'a Scope,
        request_id: &'a str,
        tool: &'a str,
        params_digest: &'a str,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<RequestCheck>> {
        Box::pin(async { Err(todo("replay.remember_request_async")) })
    }

    fn find_request(&self, scope: &Scope, request_id: &str) -> Result<Option<RequestEntry>> {
        Err(todo("replay.find_request"))
    }

    fn count_final_results(&self) -> Result<usize> {
        Err(todo("replay.count_final_results"))
    }

    fn prune_replay(&self, now_ms: i64, retention: Retention) -> Result<PruneReport> {
        Err(todo("replay.prune_replay"))
    }
}
