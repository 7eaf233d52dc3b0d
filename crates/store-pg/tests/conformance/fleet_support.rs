//! Set-ups shared by the fleet tests (`*_fleet.rs`): daemons on one fresh schema, and one call
//! run on several daemons at once.

use std::sync::{Arc, Barrier};
use std::thread;

use openphone_store_pg::testing::{SchemaGuard, fresh_schema, test_url};
use openphone_store_pg::{PgConfig, PgStore};

/// The configuration of daemon `name` on the schema of `base`: host id `<base's>-<name>`, its
/// own label and data directory.
pub fn host_config(base: &PgConfig, name: &str) -> PgConfig {
    let mut config = base.clone();
    config.host_id = format!("{}-{name}", base.host_id);
    config.label = name.to_owned();
    config.data_dir = base.data_dir.join(name);
    config
}

/// Daemons named `names` ([`host_config`]) on one fresh schema, and the schema's configuration
/// (drop the stores before the guard).
pub fn hosts(names: &[&str]) -> (Vec<PgStore>, PgConfig, SchemaGuard) {
    let url = test_url().expect("OPENPHONE_TEST_PG_URL");
    let (config, guard) = fresh_schema(&url);
    let stores = names
        .iter()
        .map(|name| PgStore::open(&host_config(&config, name)).unwrap())
        .collect();
    (stores, config, guard)
}

/// The configurations of two daemons (host ids `host-a`, `host-b`) on one fresh schema;
/// `None` when no server is configured.
pub fn two_host_configs() -> Option<(PgConfig, PgConfig, SchemaGuard)> {
    let (config, guard) = fresh_schema(&test_url()?);
    let mut a = config.clone();
    a.host_id = "host-a".to_owned();
    let mut b = config;
    b.host_id = "host-b".to_owned();
    Some((a, b, guard))
}

/// [`two_host_configs`] opened, to share between threads. The guard comes first, so that
/// `let Some((_schema, stores))` drops the stores before it.
pub fn two_daemons() -> Option<(SchemaGuard, [Arc<PgStore>; 2])> {
    let (a, b, guard) = two_host_configs()?;
    let stores = [
        Arc::new(PgStore::open(&a).unwrap()),
        Arc::new(PgStore::open(&b).unwrap()),
    ];
    Some((guard, stores))
}

/// Runs `f(store, t)` on `per_store` threads of every store at once (released together by a
/// barrier): thread `t` runs on `stores[t % stores.len()]`. Returns the results in thread order.
pub fn race<T: Send + 'static>(
    stores: &[Arc<PgStore>],
    per_store: usize,
    f: impl Fn(&PgStore, usize) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let f = Arc::new(f);
    let n = stores.len() * per_store;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|t| {
            let (store, barrier, f) = (
                Arc::clone(&stores[t % stores.len()]),
                Arc::clone(&barrier),
                Arc::clone(&f),
            );
            thread::spawn(move || {
                barrier.wait();
                f(&store, t)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}
