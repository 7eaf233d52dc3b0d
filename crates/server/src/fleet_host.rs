//! This daemon's place in a fleet sharing one store (docs/fleet.md): what `endpoint.json` says
//! about the shared store, and the housekeeping tick that marks the daemon seen.

use std::sync::Arc;
use std::time::Duration;

use openphone_store::Store;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::config::Config;
use crate::shutdown::stopped;

/// The shared store a daemon of a fleet uses, in `endpoint.json` (docs/fleet.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointStore {
    /// `postgres`.
    pub kind: String,
    /// The server without user, password or options: `postgres://host:port/dbname`.
    pub url: String,
    /// This daemon's id in the fleet (`[store] host_id`).
    pub host_id: String,
}

/// What `endpoint.json` says of `store` (`None`: not shared, SQLite in the data directory).
pub(crate) fn endpoint_store(store: &Store, config: &Config) -> Option<Box<EndpointStore>> {
    store.fleet().map(|fleet| {
        Box::new(EndpointStore {
            kind: "postgres".into(),
            url: config
                .store
                .url
                .as_deref()
                .map(openphone_store_pg::display_url)
                .unwrap_or_default(),
            host_id: fleet.host_id().to_owned(),
        })
    })
}

/// How often a daemon on a shared store marks itself seen (`Fleet::touch`).
const TOUCH_EVERY: Duration = Duration::from_secs(30);

/// Marks this daemon seen in the fleet's store every [`TOUCH_EVERY`] until shutdown (from a
/// blocking thread: the store's client must not run on a runtime worker).
pub(crate) async fn touch_host(store: Arc<Store>, mut shutdown: watch::Receiver<bool>) {
    let mut every = tokio::time::interval(TOUCH_EVERY);
    loop {
        tokio::select! {
            _ = every.tick() => {}
            () = stopped(&mut shutdown) => return,
        }
        let store = Arc::clone(&store);
        let touched =
            tokio::task::spawn_blocking(move || store.fleet().map_or(Ok(()), |f| f.touch())).await;
        match touched {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "fleet: marking this host seen failed"),
            Err(e) => tracing::warn!(error = %e, "fleet: marking this host seen stopped"),
        }
    }
}
