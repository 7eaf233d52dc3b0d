//! [`WatcherStore`] on PostgreSQL.
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

impl WatcherStore for PgStore {
    fn create_watcher(&self, new: &NewWatcher, now_ms: i64) -> Result<WatcherRecord> {
        Err(todo("watchers.create_watcher"))
    }

    fn create_watcher_within(
        &self,
        new: &NewWatcher,
        now_ms: i64,
        max_active: Option<usize>,
    ) -> Result<WatcherRecord> {
        Err(todo("watchers.create_watcher_within"))
    }

    fn count_active_watchers(&self, owner: &str) -> Result<usize> {
        Err(todo("watchers.count_active_watchers"))
    }

    fn get_watcher(&self, watcher_id: i64) -> Result<Option<WatcherRecord>> {
        Err(todo("watchers.get_watcher"))
    }

    fn list_watchers(
        &self,
        text: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<WatcherRecord>> {
        Err(todo("watchers.list_watchers"))
    }

    fn list_watchers_of(
        &self,
        owner: Option<&str>,
        text: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<WatcherRecord>> {
        Err(todo("watchers.list_watchers_of"))
    }

    fn stop_watchers(&self, selector: &WatcherSelector, now_ms: i64) -> Result<Vec<WatcherRecord>> {
        Err(todo("watchers.stop_watchers"))
    }

    fn stop_watchers_of(
        &self,
        owner: Option<&str>,
        selector: &WatcherSelector,
        now_ms: i64,
    ) -> Result<Vec<WatcherRecord>> {
        Err(todo("watchers.stop_watchers_of"))
    }

    fn fire_watcher(&self, new: NewFiring, audit: FiringAudit) -> Result<FireOutcome> {
        Err(todo("watchers.fire_watcher"))
    }

    fn finish_watcher_reaction(
        &self,
        watcher_id: i64,
        firing: i64,
        failed: bool,
        note: &str,
    ) -> Result<bool> {
        Err(todo("watchers.finish_watcher_reaction"))
    }

    fn pending_watcher_reactions(&self) -> Result<Vec<WatcherFiring>> {
        Err(todo("watchers.pending_watcher_reactions"))
    }

    fn watcher_firings(&self, watcher_id: i64) -> Result<Vec<WatcherFiring>> {
        Err(todo("watchers.watcher_firings"))
    }

    fn set_watcher_cursor(&self, watcher_id: i64, cursor: &Value) -> Result<bool> {
        Err(todo("watchers.set_watcher_cursor"))
    }

    fn end_watcher(
        &self,
        watcher_id: i64,
        reason: &str,
        now_ms: i64,
    ) -> Result<Option<WatcherRecord>> {
        Err(todo("watchers.end_watcher"))
    }
}
