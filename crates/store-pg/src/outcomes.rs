//! [`OutcomeStore`] on PostgreSQL.
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

impl OutcomeStore for PgStore {
    fn insert_deferred_outcome(&self, new: &NewDeferredOutcome, now_ms: i64) -> Result<()> {
        Err(todo("outcomes.insert_deferred_outcome"))
    }

    fn get_deferred_outcome(&self, request_id: &str) -> Result<Option<DeferredOutcome>> {
        Err(todo("outcomes.get_deferred_outcome"))
    }

    fn list_deferred_outcomes(
        &self,
        runtime: &str,
        states: &[OutcomeState],
    ) -> Result<Vec<DeferredOutcome>> {
        Err(todo("outcomes.list_deferred_outcomes"))
    }

    fn deferred_outcome_known(
        &self,
        request_id: &str,
        outcome: &Value,
        now_ms: i64,
    ) -> Result<bool> {
        Err(todo("outcomes.deferred_outcome_known"))
    }

    fn move_deferred_outcome(
        &self,
        request_id: &str,
        from: OutcomeState,
        to: OutcomeState,
        note: &str,
        now_ms: i64,
    ) -> Result<bool> {
        Err(todo("outcomes.move_deferred_outcome"))
    }
}
