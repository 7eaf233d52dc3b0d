//! `openphone store …`: offline views of the data directory's database. `stats` opens it
//! read-only (without the daemon's lock), so it works next to a running daemon. With a
//! configuration naming a fleet's shared PostgreSQL store (`[store] url`), `stats` reads that
//! store, as a viewer (`fleet_cmd::open_offline`).

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use openphone_clock::{Clock, SystemClock};
use openphone_store::StoreStats;

use crate::data_dir::DataDir;
use crate::fleet_cmd::{ConfigFile, Offline, open_offline};

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Per table: rows and bytes (tables and indexes); the database and WAL file sizes; the
    /// audit log's records and bytes per record; stored results, their bytes and ages.
    Stats {
        #[command(flatten)]
        data_dir: DataDir,
        #[command(flatten)]
        config: ConfigFile,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: StoreCommand) -> Result<ExitCode> {
    match cmd {
        StoreCommand::Stats {
            data_dir,
            config,
            json,
        } => {
            let dir = data_dir.resolve()?;
            let context = || format!("cannot read the database in {}", dir.display());
            let stats = match open_offline(&dir, &config, context)? {
                Offline::Sqlite(store) => store.stats().with_context(context)?,
                Offline::Shared(store) => openphone_store::StoreInfo::stats(&store)
                    .context("cannot read the shared store")?,
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&stats)?);
            } else {
                print!("{}", render(&stats, SystemClock.now_ms()));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `1.5 MiB`, `312 B`.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

fn opt_size(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "-".to_owned(), size)
}

/// How long before `now_ms` the time `at_ms` was: `3.2 d`, `5 h`, `40 s`.
fn age(now_ms: i64, at_ms: i64) -> String {
    let secs = (now_ms - at_ms).max(0) / 1000;
    match secs {
        s if s < 120 => format!("{s} s"),
        s if s < 2 * 3600 => format!("{} min", s / 60),
        s if s < 2 * 86_400 => format!("{} h", s / 3600),
        s => format!("{:.1} d", s as f64 / 86_400.0),
    }
}

fn render(stats: &StoreStats, now_ms: i64) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "database {} (schema {})",
        stats.db_path, stats.schema_version
    );
    let _ = writeln!(
        out,
        "  file {}, WAL {}; {} pages of {} bytes, {} free",
        size(stats.db_file_bytes),
        size(stats.wal_file_bytes),
        stats.page_count,
        stats.page_size,
        stats.free_pages
    );
    if !stats.dbstat {
        let _ = writeln!(
            out,
            "  (this SQLite has no dbstat: per-table bytes are not available)"
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<28} {:>10} {:>11} {:>11} {:>11}",
        "table", "rows", "table", "indexes", "total"
    );
    for t in &stats.tables {
        let _ = writeln!(
            out,
            "{:<28} {:>10} {:>11} {:>11} {:>11}",
            t.name,
            t.rows.map_or_else(|| "-".to_owned(), |n| n.to_string()),
            opt_size(t.table_bytes),
            opt_size(t.index_bytes),
            opt_size(t.bytes()),
        );
    }
    let a = &stats.audit;
    let _ = writeln!(out);
    let _ = write!(
        out,
        "audit log: {} records ({} stored before schema 6), {} shapes, {} proofs, {}",
        a.records,
        a.legacy_records,
        a.shapes,
        a.proofs,
        opt_size(a.bytes)
    );
    match a.bytes_per_record {
        Some(per) => {
            let _ = writeln!(out, ", {per:.0} bytes per record");
        }
        None => {
            let _ = writeln!(out);
        }
    }
    let r = &stats.results;
    let _ = write!(
        out,
        "stored results: {} ({} of result JSON)",
        r.count,
        size(r.result_bytes)
    );
    if let (Some(oldest), Some(newest)) = (r.oldest_ms, r.newest_ms) {
        let _ = write!(
            out,
            ", oldest {} ago, newest {} ago",
            age(now_ms, oldest),
            age(now_ms, newest)
        );
    }
    let _ = writeln!(
        out,
        "; {} pruned (tombstones); {} request ids",
        r.tombstones, r.request_ids
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_ages_read_well() {
        assert_eq!(size(312), "312 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(64 * 1024 * 1024), "64.0 MiB");
        assert_eq!(age(100_000, 60_000), "40 s");
        assert_eq!(age(10 * 3_600_000, 0), "10 h");
        assert_eq!(age(3 * 86_400_000, 0), "3.0 d");
        assert_eq!(age(0, 5_000), "0 s");
    }
}
