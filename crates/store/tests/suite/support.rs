//! The SQLite suite's helpers: the common ones, and `open` on the SQLite store.

#[path = "support_common.rs"]
mod common;

pub use common::*;

use openphone_store::Store;
use tempfile::TempDir;

/// The store under test: SQLite in `<dir>/data`.
pub fn open(dir: &TempDir) -> Store {
    Store::open(dir.path().join("data")).unwrap()
}
