//! [`MemoryStore`] on PostgreSQL.
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

impl MemoryStore for PgStore {
    fn save_memory(&self, new: &NewMemory, now_ms: i64) -> Result<MemoryRecord> {
        Err(todo("memory.save_memory"))
    }

    fn get_memory(&self, memory_id: i64) -> Result<Option<MemoryRecord>> {
        Err(todo("memory.get_memory"))
    }

    fn delete_memory(&self, memory_id: i64) -> Result<bool> {
        Err(todo("memory.delete_memory"))
    }

    fn search_memory(&self, query: Option<&str>, limit: usize) -> Result<Vec<MemoryHit>> {
        Err(todo("memory.search_memory"))
    }
}
