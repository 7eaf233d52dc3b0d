//! The conformance suite's helpers: the SQLite suite's common ones, and `open` on PostgreSQL.

// Some helpers serve only modules that run on SQLite alone.
#[allow(dead_code)]
#[path = "../../../store/tests/suite/support_common.rs"]
mod common;

pub use common::*;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use openphone_store::Store;
use openphone_store_pg::{PgConfig, PgStore, testing};
use tempfile::TempDir;

/// The schema (and configuration) each test directory's store lives in: opening the same
/// directory again reopens the same schema, as reopening an SQLite data directory does.
fn configs() -> &'static Mutex<HashMap<PathBuf, PgConfig>> {
    static CONFIGS: std::sync::OnceLock<Mutex<HashMap<PathBuf, PgConfig>>> =
        std::sync::OnceLock::new();
    CONFIGS.get_or_init(Default::default)
}

/// The store under test: PostgreSQL, on a schema of its own for `dir`.
pub fn open(dir: &TempDir) -> Store {
    let url = std::env::var(testing::TEST_URL_VAR).expect("OPENPHONE_TEST_PG_URL");
    let config = {
        let mut configs = configs().lock().unwrap();
        configs
            .entry(dir.path().to_path_buf())
            .or_insert_with(|| {
                let (mut config, guard) = testing::fresh_schema(&url);
                // The schema outlives the test's stores (tests reopen it); the throwaway
                // cluster is dropped as a whole.
                std::mem::forget(guard);
                config.data_dir = dir.path().join("data");
                config
            })
            .clone()
    };
    PgStore::open(&config).unwrap().into_store()
}
