//! [`StoreInfo`] on PostgreSQL.
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

impl StoreInfo for PgStore {
    fn stats(&self) -> Result<StoreStats> {
        Err(todo("info.stats"))
    }

    fn data_dir(&self) -> &Path {
        PgStore::data_dir(self)
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn schema_version(&self) -> Result<i64> {
        Err(todo("info.schema_version"))
    }

    fn fts5_available(&self) -> Result<bool> {
        Err(todo("info.fts5_available"))
    }

    fn approvals_generation(&self) -> u64 {
        0
    }

    fn writer_stats(&self) -> WriterStats {
        WriterStats::default()
    }
}

impl PgStore {
    /// This store as the runtime's [`Store`] (what the daemon holds).
    pub fn into_store(self) -> Store {
        Store::from_backend(Box::new(self))
    }
}
