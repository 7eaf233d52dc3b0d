//! Opening the daemon's store: SQLite in the data directory, or a fleet's PostgreSQL server
//! (`[store] url`, docs/fleet.md).

use std::path::Path;

use openphone_store::Store;

use crate::config::{Config, ConfigError};
use crate::daemon::DaemonError;

/// The store: SQLite in the data directory, or the fleet's PostgreSQL server when `[store]
/// names one (docs/fleet.md) — then the data directory is still locked (it holds the
/// tokens and `endpoint.json`), and the server is reached from a blocking thread (its
/// client must not run on a runtime worker).
pub(crate) async fn open_store(config: &Config, data_dir: &Path) -> Result<Store, DaemonError> {
    let pg = config
        .store
        .postgres(data_dir)
        .map_err(|message| ConfigError::Parse {
            path: "store".into(),
            message,
        })?;
    let Some(pg) = pg else {
        return Ok(Store::open(data_dir)?);
    };
    let lock = openphone_store::lock_data_dir(data_dir, &openphone_store::Holder::current())?;
    let opened = tokio::task::spawn_blocking(move || openphone_store_pg::PgStore::open(&pg))
        .await
        .map_err(|e| openphone_store::StoreError::Backend {
            op: "store.open",
            id: String::new(),
            detail: format!("opening the PostgreSQL store stopped: {e}"),
        })??;
    Ok(Store::with_lock(Box::new(opened), lock))
}
