//! What the fleet tests share: a database of their own on the test server, and a host of the
//! fleet (its data directory and a config naming the shared store, its host id and its phone).
//!
//! Needs `OPENPHONE_TEST_PG_URL` (`bash tests/postgres/cluster.sh start`); without it
//! [`fleet_database`] prints that the test is skipped and answers `None`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use openphone_clock::{Clock, SystemClock};
use openphone_store_pg::{PgConfig, testing};

use super::harness::TOKEN;

/// A database of its own on the test server (`None`, after saying so, without a server).
pub(super) fn fleet_database() -> Option<String> {
    let url = testing::test_url()?;
    let admin = PgConfig::new(url.as_str(), "fleet-admin", std::env::temp_dir());
    let mut client = testing::connect(&admin).expect("connect to OPENPHONE_TEST_PG_URL");
    // Unique across processes (pid), runs (time) and tests running at once (counter).
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let stamp = SystemClock.now_ms() % 1_000_000_000;
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = format!("fleet_{}_{stamp}_{n}", std::process::id());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url.as_str(), String::new()),
    };
    let (server, _db) = base.rsplit_once('/').unwrap();
    Some(format!("{server}/{name}{query}"))
}

/// One host of the fleet: its data directory and config file.
pub(super) struct Host {
    pub(super) data: PathBuf,
    pub(super) config: String,
}

/// A host `id` of the fleet on the database at `url`, serving the simulated phone `device`.
pub(super) fn host(dir: &Path, id: &'static str, url: &str, device: &str) -> Host {
    let root = dir.join(id);
    std::fs::create_dir_all(&root).unwrap();
    let config = root.join("openphone.toml");
    std::fs::write(
        &config,
        format!(
            "[[runtimes]]\nid = \"hermes\"\ntoken = \"{TOKEN}\"\n\
             grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n\n\
             [store]\nurl = \"{url}\"\nhost_id = \"{id}\"\n\n\
             [jobs]\nmax_jobs = 1000\n\n\
             [device]\nkind = \"sim\"\nid = \"{device}\"\n"
        ),
    )
    .unwrap();
    Host {
        data: root.join("data"),
        config: config.to_str().unwrap().to_owned(),
    }
}
