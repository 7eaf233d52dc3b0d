//! `openphone fleet`: the daemons sharing this host's store (issue 35, docs/fleet.md), and how
//! the offline commands (`audit …`, `store stats`, `fleet`) find the store they read:
//! [`open_offline`].
//!
//! The store is the one the configuration names: `--config`, else what `openphone config path`
//! names; when neither has `[store] url`, the configuration of the daemon that last served the
//! data directory (its `endpoint.json` names it) when that daemon used a shared store. A
//! configuration with `[store] url` means the shared PostgreSQL store, opened as a viewer
//! (`PgStore::open_viewer`: no host lock, no migration, no writes); otherwise the data
//! directory's SQLite database, opened read-only.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use clap::Args;
use openphone_clock::{Clock, SystemClock, human};
use openphone_server::{ConfigLocation, ENDPOINT_FILE, EndpointInfo};
use openphone_store::{Fleet, FleetHost, Store};
use openphone_store_pg::{PgConfig, PgStore, display_url};
use serde::Serialize;

use crate::data_dir::DataDir;
use crate::output::print_json;

/// `--config` of the offline commands.
#[derive(Debug, Clone, Default, Args)]
pub struct ConfigFile {
    /// The configuration that names the store, as `serve --config` (default: what `openphone
    /// config path` names, else the config of the daemon that served the data directory).
    /// With `[store] url` the shared PostgreSQL store is read, else the data directory's
    /// SQLite database.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// The store an offline command reads.
#[allow(clippy::large_enum_variant)] // One per process, never moved around.
pub enum Offline {
    /// The data directory's SQLite database, read-only.
    Sqlite(Store),
    /// A fleet's PostgreSQL store, as a viewer.
    Shared(PgStore),
}

/// The shared store's settings when the configuration names one (see the module's doc).
pub fn shared_config(data_dir: &Path, flag: &ConfigFile) -> Result<Option<PgConfig>> {
    let location = ConfigLocation::resolve(flag.config.as_deref());
    let config = location
        .load()
        .map_err(|e| anyhow!("{e} (it says which store to read; pass --config to name one)"))?;
    let named = |config: &openphone_server::Config, file: String| {
        config
            .store
            .postgres(data_dir)
            .map_err(|e| anyhow!("{file}: [store] {e}"))
    };
    let file = location.path.as_ref().map_or_else(
        || "the default configuration".into(),
        |p| p.display().to_string(),
    );
    if let Some(pg) = named(&config, file)? {
        return Ok(Some(pg));
    }
    if flag.config.is_some() {
        return Ok(None);
    }
    // The daemon serving this data directory may have been started with another config.
    let Ok(text) = std::fs::read_to_string(data_dir.join(ENDPOINT_FILE)) else {
        return Ok(None);
    };
    let Ok(endpoint) = serde_json::from_str::<EndpointInfo>(&text) else {
        return Ok(None);
    };
    let (Some(_), Some(path)) = (endpoint.store, endpoint.config_path) else {
        return Ok(None);
    };
    let daemon_config = ConfigLocation::resolve(Some(&path)).load().map_err(|e| {
        anyhow!(
            "the daemon of {} used a shared store named in {e}",
            data_dir.display()
        )
    })?;
    named(&daemon_config, path.display().to_string())
}

/// Opens the store the offline commands read (see the module's doc); `sqlite_context` words
/// an error opening the SQLite database.
pub fn open_offline(
    data_dir: &Path,
    flag: &ConfigFile,
    sqlite_context: impl FnOnce() -> String,
) -> Result<Offline> {
    match shared_config(data_dir, flag)? {
        Some(pg) => PgStore::open_viewer(&pg)
            .map(Offline::Shared)
            .with_context(|| format!("cannot open the shared store {}", display_url(&pg.url))),
        None => Store::open_read_only(data_dir)
            .map(Offline::Sqlite)
            .with_context(sqlite_context),
    }
}

/// `openphone fleet --json`.
#[derive(Debug, Serialize)]
struct FleetOutput<'a> {
    /// Whether the store is shared (PostgreSQL) with other daemons.
    shared: bool,
    /// `sqlite` or `postgres`.
    store: &'static str,
    /// The server (no user, password or options), when shared.
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    /// This host's id (`[store] host_id`), when shared.
    #[serde(skip_serializing_if = "Option::is_none")]
    host_id: Option<&'a str>,
    /// The daemons that hold their host lock now.
    hosts_live: usize,
    /// Every daemon the store knows, by host id.
    hosts: &'a [FleetHost],
    /// What to do to share the store, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<&'static str>,
}

const NOT_SHARED_HINT: &str = "this host's store is SQLite in its data directory, not shared \
     with other daemons. To run a fleet, point every daemon at one PostgreSQL database: \
     `[store] url = \"postgres://user@host:5432/db\"` and a `host_id` of its own in each \
     daemon's config (docs/fleet.md)";

/// `openphone fleet`.
pub fn run(data_dir: &DataDir, config: &ConfigFile, json: bool) -> Result<ExitCode> {
    let dir = data_dir.resolve()?;
    let Some(pg) = shared_config(&dir, config)? else {
        if json {
            print_json(&FleetOutput {
                shared: false,
                store: "sqlite",
                url: None,
                host_id: None,
                hosts_live: 0,
                hosts: &[],
                hint: Some(NOT_SHARED_HINT),
            })?;
        } else {
            println!("store: SQLite in {} (not shared)", dir.display());
            println!("{NOT_SHARED_HINT}");
        }
        return Ok(ExitCode::SUCCESS);
    };
    let url = display_url(&pg.url);
    let store =
        PgStore::open_viewer(&pg).with_context(|| format!("cannot open the shared store {url}"))?;
    let hosts = store.hosts()?;
    let live = hosts.iter().filter(|h| h.live).count();
    if json {
        print_json(&FleetOutput {
            shared: true,
            store: "postgres",
            url: Some(url),
            host_id: Some(store.host_id()),
            hosts_live: live,
            hosts: &hosts,
            hint: None,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "store: PostgreSQL {url} as host {} ({live} of {} hosts live)",
        store.host_id(),
        hosts.len()
    );
    if hosts.is_empty() {
        println!("no daemon has joined the fleet yet");
    }
    print!(
        "{}",
        hosts_table(&hosts, store.host_id(), SystemClock.now_ms())
    );
    Ok(ExitCode::SUCCESS)
}

/// The fleet's daemons, one per line: host id (`*` marks this host), live or not, when last
/// seen, the label and the phones.
fn hosts_table(hosts: &[FleetHost], this: &str, now_ms: i64) -> String {
    use std::fmt::Write as _;
    let width = hosts
        .iter()
        .map(|h| h.host_id.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let mut out = String::new();
    for h in hosts {
        let mark = if h.host_id == this { "*" } else { " " };
        let state = if h.live { "live" } else { "down" };
        let phones = if h.device_ids.is_empty() {
            "no phones".to_owned()
        } else {
            h.device_ids.join(", ")
        };
        let label = if h.label == h.host_id {
            String::new()
        } else {
            format!(" ({})", h.label)
        };
        let _ = writeln!(
            out,
            "{mark} {:<width$}  {state}  last seen {}{label}  phones: {phones}",
            h.host_id,
            human::format_local(h.last_seen_at_ms, now_ms),
        );
    }
    out
}

/// The shared store of a daemon, as `openphone status` shows it.
#[derive(Debug, Serialize)]
pub struct StatusStore {
    /// `postgres`.
    pub kind: String,
    /// The server, without user, password or options.
    pub url: String,
    /// The daemon's host id.
    pub host_id: String,
    /// The fleet's daemons running now (absent when the store could not be asked).
    pub hosts_live: Option<usize>,
}

impl StatusStore {
    /// How many hosts are live, asked of the store with the daemon's own configuration.
    pub fn ask(
        store: openphone_server::EndpointStore,
        config: Option<&Path>,
        data_dir: &Path,
    ) -> StatusStore {
        let hosts_live = config.and_then(|path| {
            let flag = ConfigFile {
                config: Some(path.to_path_buf()),
            };
            let pg = shared_config(data_dir, &flag).ok().flatten()?;
            let hosts = PgStore::open_viewer(&pg).ok()?.hosts().ok()?;
            Some(hosts.iter().filter(|h| h.live).count())
        });
        StatusStore {
            kind: store.kind,
            url: store.url,
            host_id: store.host_id,
            hosts_live,
        }
    }

    /// `store: PostgreSQL postgres://db:5432/fleet as host a (2 hosts live)`.
    pub fn line(&self) -> String {
        let count = self.hosts_live.map_or_else(
            || "hosts live unknown".to_owned(),
            |n| format!("{n} host{} live", if n == 1 { "" } else { "s" }),
        );
        format!(
            "store: PostgreSQL {} as host {} ({count})",
            self.url, self.host_id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_table_marks_this_host_and_names_the_phones() {
        let host = |id: &str, live: bool, phones: &[&str]| FleetHost {
            host_id: id.into(),
            label: id.into(),
            started_at_ms: 0,
            last_seen_at_ms: 1_000,
            live,
            device_ids: phones.iter().map(|p| (*p).to_owned()).collect(),
        };
        let table = hosts_table(
            &[
                host("fleet-a", true, &["phone-a"]),
                host("fleet-b", false, &[]),
            ],
            "fleet-a",
            31_000,
        );
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("* fleet-a  live"), "{table}");
        assert!(lines[0].contains("phones: phone-a"), "{table}");
        assert!(lines[0].contains("30 s ago"), "{table}");
        assert!(lines[1].starts_with("  fleet-b  down"), "{table}");
        assert!(lines[1].contains("no phones"), "{table}");
    }
}
