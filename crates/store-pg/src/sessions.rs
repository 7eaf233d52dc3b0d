//! [`SessionStore`] on PostgreSQL.
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

impl SessionStore for PgStore {
    fn create_session(&self, new: &NewPhoneSession, now_ms: i64) -> Result<PhoneSession> {
        Err(todo("sessions.create_session"))
    }

    fn get_session(&self, phone_session_id: &str) -> Result<Option<PhoneSession>> {
        Err(todo("sessions.get_session"))
    }

    fn update_session_status(
        &self,
        phone_session_id: &str,
        status: SessionStatus,
        failure_reason: Option<&str>,
        now_ms: i64,
    ) -> Result<PhoneSession> {
        Err(todo("sessions.update_session_status"))
    }

    fn update_active_session_status(
        &self,
        phone_session_id: &str,
        status: SessionStatus,
        failure_reason: Option<&str>,
        now_ms: i64,
    ) -> Result<Option<PhoneSession>> {
        Err(todo("sessions.update_active_session_status"))
    }

    fn reopen_session(&self, phone_session_id: &str, now_ms: i64) -> Result<Option<PhoneSession>> {
        Err(todo("sessions.reopen_session"))
    }

    fn set_session_autonomy(
        &self,
        phone_session_id: &str,
        autonomy: Autonomy,
        now_ms: i64,
    ) -> Result<PhoneSession> {
        Err(todo("sessions.set_session_autonomy"))
    }

    fn set_session_device(
        &self,
        phone_session_id: &str,
        device_id: Option<&str>,
    ) -> Result<PhoneSession> {
        Err(todo("sessions.set_session_device"))
    }

    fn set_session_runtime_session_id(
        &self,
        phone_session_id: &str,
        runtime_session_id: &str,
        now_ms: i64,
    ) -> Result<PhoneSession> {
        Err(todo("sessions.set_session_runtime_session_id"))
    }

    fn list_sessions(&self, filter: &SessionFilter) -> Result<Vec<PhoneSession>> {
        Err(todo("sessions.list_sessions"))
    }

    fn fail_active_sessions(
        &self,
        runtime: &str,
        reason: &str,
        now_ms: i64,
    ) -> Result<Vec<PhoneSession>> {
        Err(todo("sessions.fail_active_sessions"))
    }

    fn prune_sessions(&self, keep: usize) -> Result<usize> {
        Err(todo("sessions.prune_sessions"))
    }

    fn append_transcript(
        &self,
        phone_session_id: &str,
        role: &str,
        body: &Value,
        now_ms: i64,
    ) -> Result<TranscriptEntry> {
        Err(todo("sessions.append_transcript"))
    }

    fn append_transcript_async<'a>(
        &'a self,
        phone_session_id: &'a str,
        role: &'a str,
        body: &'a Value,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<TranscriptEntry>> {
        Box::pin(async { Err(todo("sessions.append_transcript_async")) })
    }

    fn transcript(&self, phone_session_id: &str) -> Result<Vec<TranscriptEntry>> {
        Err(todo("sessions.transcript"))
    }
}
