//! `openphone audit …`: offline checks of the hash-chained audit log. These read the database
//! directly (read-only, without the daemon's lock), so they work next to a running daemon.
//!
//! `head` prints the chain's head as an anchor (`<seq>:<hash>`); kept somewhere the data
//! directory's owner cannot rewrite, it lets `verify --anchor` prove later that the log still
//! holds exactly the records up to that seq — which an offline delete-and-re-hash breaks even
//! though the rewritten chain verifies on its own.
//!
//! On a fleet's shared PostgreSQL store (the configuration has `[store] url`; see
//! `fleet_cmd::open_offline`) every daemon has a chain of its own, named by its host id, and
//! each chain's head is anchored in the store at every append: `verify` checks every chain and
//! its stored anchor and names a broken chain, `head` prints every chain's head, `export`
//! streams every chain (or the one `--host` names), each record carrying `"host"`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Subcommand, ValueEnum};
use openphone_store::{
    AnchorCheck, AuditAnchor, AuditEntry, AuditRecord, BrokenRecord, VerifyReport,
};
use openphone_store_pg::PgStore;
use serde::Serialize;

use crate::data_dir::DataDir;
use crate::fleet_cmd::{ConfigFile, Offline, open_offline};

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the audit chain (on a fleet's shared store: every host's chain and its stored
    /// anchor); exits 1 and names the first broken record (and its chain) when it is not
    /// intact, or the seq of an anchor the log no longer holds.
    Verify {
        #[command(flatten)]
        data_dir: DataDir,
        #[command(flatten)]
        config: ConfigFile,
        /// Also prove the log still holds exactly the records up to this anchor's seq:
        /// `<seq>:<hash>` as printed by `openphone audit head` earlier (on a shared store, of
        /// this host's chain). Repeatable.
        #[arg(long, value_name = "SEQ:HASH")]
        anchor: Vec<AuditAnchor>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print the chain's head as an anchor, `<seq>:<hash>`, to keep outside the data
    /// directory (see `audit verify --anchor`); on a shared store, every host's chain's head.
    Head {
        #[command(flatten)]
        data_dir: DataDir,
        #[command(flatten)]
        config: ConfigFile,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stream the audit log to stdout, oldest first (on a shared store: chain by chain, each
    /// record carrying `"host": "<chain>"`).
    Export {
        #[command(flatten)]
        data_dir: DataDir,
        #[command(flatten)]
        config: ConfigFile,
        /// Only the chain of this host (`[store] host_id`; a shared store only).
        #[arg(long, value_name = "HOST")]
        host: Option<String>,
        /// Only the records naming this phone (`device_id`: a daemon with one phone names it
        /// only when the request did).
        #[arg(long, value_name = "DEVICE")]
        device: Option<String>,
        /// Only the records of this goal (`goal_…`): its actions' requests and their
        /// confirmations, and the operator's acts on it (`goals create`, `plan`, `retry`, …).
        #[arg(long, value_name = "GOAL")]
        goal: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Jsonl)]
        format: Format,
        /// Start after this sequence number (of each chain, on a shared store).
        #[arg(long, default_value_t = 0)]
        after: i64,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    /// One JSON record per line.
    Jsonl,
}

/// `audit verify --json`.
#[derive(Serialize)]
struct VerifyOutput<'a> {
    /// The chain is intact and every anchor holds.
    intact: bool,
    checked: u64,
    last_seq: i64,
    last_hash: &'a str,
    first_broken: &'a Option<BrokenRecord>,
    /// One per `--anchor`, in order (absent without anchors).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    anchors: &'a [AnchorCheck],
}

/// `audit head --json`.
#[derive(Serialize)]
struct HeadOutput<'a> {
    seq: i64,
    hash: &'a str,
    /// `<seq>:<hash>`, the value `audit verify --anchor` takes.
    anchor: String,
}

fn open(data_dir: &DataDir, config: &ConfigFile) -> Result<Offline> {
    let dir = data_dir.resolve()?;
    open_offline(&dir, config, || {
        format!("cannot open the audit log in {}", dir.display())
    })
}

pub fn run(cmd: AuditCommand) -> Result<ExitCode> {
    match cmd {
        AuditCommand::Verify {
            data_dir,
            config,
            anchor,
            json,
        } => {
            let store = match open(&data_dir, &config)? {
                Offline::Sqlite(store) => store,
                Offline::Shared(store) => return verify_chains(&store, &anchor, json),
            };
            let report = store.verify_audit_anchored(&anchor)?;
            let chain = &report.chain;
            if json {
                let out = VerifyOutput {
                    intact: report.is_intact(),
                    checked: chain.checked,
                    last_seq: chain.last_seq,
                    last_hash: &chain.last_hash,
                    first_broken: &chain.first_broken,
                    anchors: &report.anchors,
                };
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                if let Some(broken) = &chain.first_broken {
                    println!(
                        "audit chain broken at {broken} ({} records checked)",
                        chain.checked
                    );
                } else {
                    println!(
                        "audit chain intact: {} records, head {}",
                        chain.checked, chain.last_hash
                    );
                }
                for check in &report.anchors {
                    println!("{check}");
                }
            }
            Ok(if report.is_intact() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        AuditCommand::Head {
            data_dir,
            config,
            json,
        } => {
            let store = match open(&data_dir, &config)? {
                Offline::Sqlite(store) => store,
                Offline::Shared(store) => return chain_heads(&store, json),
            };
            let head = store.audit_head()?;
            if json {
                let out = HeadOutput {
                    seq: head.seq,
                    hash: &head.hash,
                    anchor: head.to_string(),
                };
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!("{head}");
            }
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Export {
            data_dir,
            config,
            host,
            device,
            goal,
            format: Format::Jsonl,
            after,
        } => {
            let filter = Filter { goal, device };
            let store = match open(&data_dir, &config)? {
                Offline::Sqlite(store) => store,
                Offline::Shared(store) => return export_chains(&store, host, &filter, after),
            };
            if let Some(host) = host {
                bail!(
                    "--host {host}: this store is the data directory's SQLite database, with one \
                     chain; --host selects a chain of a fleet's shared store (docs/fleet.md)"
                );
            }
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            for record in store.audit_iter(after, 500) {
                let record = record?;
                if !filter.keeps(&record.entry) {
                    continue;
                }
                serde_json::to_writer(&mut out, &record)?;
                out.write_all(b"\n")?;
            }
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Whether an audit record belongs to goal `goal_id`: every request of its actions carries
/// the request id and idempotency key `goal_<id>:<action>:<n>` (their confirmations keep the
/// request's id) and runs in the runtime session `goal:<goal_id>:<action>`; the operator's acts
/// on it are recorded under `goal_<id>:op:<method>-<uuid>`.
pub fn belongs_to_goal(entry: &openphone_store::AuditEntry, goal_id: &str) -> bool {
    let prefix = format!("{goal_id}:");
    let session = openphone_protocol::goal_action_sessions_prefix(goal_id);
    entry.request_id.starts_with(&prefix)
        || entry
            .idempotency_key
            .as_deref()
            .is_some_and(|k| k.starts_with(&prefix))
        || entry
            .runtime_session_id
            .as_deref()
            .is_some_and(|s| s.starts_with(&session))
}

/// What `audit export` keeps: `--goal`, `--device`.
struct Filter {
    goal: Option<String>,
    device: Option<String>,
}

impl Filter {
    fn keeps(&self, entry: &AuditEntry) -> bool {
        self.goal
            .as_deref()
            .is_none_or(|goal| belongs_to_goal(entry, goal))
            && self
                .device
                .as_deref()
                .is_none_or(|device| entry.device_id.as_deref() == Some(device))
    }
}

/// One chain in `audit verify --json` on a shared store.
#[derive(Serialize)]
struct ChainOutput<'a> {
    /// The chain's daemon (`host_id`).
    host: &'a str,
    /// The chain verifies and its stored anchor holds.
    intact: bool,
    checked: u64,
    last_seq: i64,
    last_hash: &'a str,
    /// The first thing wrong: a broken record, or the stored anchor as a head mismatch.
    first_broken: Option<BrokenRecord>,
    /// The chain's stored anchor checked against the chain (absent: none stored).
    stored_anchor: &'a Option<AnchorCheck>,
}

/// `audit verify --json` on a shared store.
#[derive(Serialize)]
struct FleetVerifyOutput<'a> {
    /// Every chain is intact and every `--anchor` holds.
    intact: bool,
    /// Records checked, in every chain.
    checked: u64,
    chains: Vec<ChainOutput<'a>>,
    /// The hosts whose chain is not intact.
    broken_hosts: Vec<&'a str>,
    /// One per `--anchor`, in order, checked against this host's chain (absent without).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    anchors: &'a [AnchorCheck],
}

/// `audit verify` on a shared store: every chain and its stored anchor, and `--anchor`s against
/// this host's chain.
fn verify_chains(store: &PgStore, anchors: &[AuditAnchor], json: bool) -> Result<ExitCode> {
    let chains = store.verify_audit_chains()?;
    let checks = if anchors.is_empty() {
        Vec::new()
    } else {
        openphone_store::AuditStore::verify_audit_anchored(store, anchors)?.anchors
    };
    let broken: Vec<&str> = chains
        .iter()
        .filter(|c| !c.is_intact())
        .map(|c| c.chain.as_str())
        .collect();
    let intact = broken.is_empty() && checks.iter().all(AnchorCheck::holds);
    let checked: u64 = chains.iter().map(|c| c.report.checked).sum();
    if json {
        let out = FleetVerifyOutput {
            intact,
            checked,
            chains: chains
                .iter()
                .map(|c| ChainOutput {
                    host: &c.chain,
                    intact: c.is_intact(),
                    checked: c.report.checked,
                    last_seq: c.report.last_seq,
                    last_hash: &c.report.last_hash,
                    first_broken: c.first_broken(),
                    stored_anchor: &c.anchor,
                })
                .collect(),
            broken_hosts: broken.clone(),
            anchors: &checks,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        if chains.is_empty() {
            println!("no audit chains yet: no daemon of the fleet has audited anything");
        }
        for chain in &chains {
            println!("{chain}");
        }
        if broken.is_empty() {
            println!(
                "audit intact: {} chain{}, {checked} records",
                chains.len(),
                if chains.len() == 1 { "" } else { "s" }
            );
        } else {
            println!(
                "audit BROKEN in the chain of host {} ({checked} records checked)",
                broken.join(", host ")
            );
        }
        for check in &checks {
            println!("chain {}: {check}", store.host_id());
        }
    }
    Ok(if intact {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One chain in `audit head --json` on a shared store.
#[derive(Serialize)]
struct ChainHead<'a> {
    /// The chain's daemon (`host_id`).
    host: &'a str,
    seq: i64,
    hash: &'a str,
    /// `<seq>:<hash>`, what `audit verify --anchor` takes (on that host).
    anchor: String,
    /// The anchor the chain's latest append stored, and when (Unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    stored_anchor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    anchored_at_ms: Option<i64>,
}

/// `audit head` on a shared store: every chain's head, one per line (`<host> <seq>:<hash>`).
fn chain_heads(store: &PgStore, json: bool) -> Result<ExitCode> {
    let chains = store.audit_chains()?;
    if json {
        let heads: Vec<ChainHead<'_>> = chains
            .iter()
            .map(|c| ChainHead {
                host: &c.chain,
                seq: c.head.seq,
                hash: &c.head.hash,
                anchor: c.head.to_string(),
                stored_anchor: c.anchor.as_ref().map(ToString::to_string),
                anchored_at_ms: c.anchored_at_ms,
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "chains": heads }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    if chains.is_empty() {
        println!("no audit chains yet: no daemon of the fleet has audited anything");
    }
    for c in &chains {
        let this = if c.chain == store.host_id() {
            "  (this host)"
        } else {
            ""
        };
        println!("{} {}{this}", c.chain, c.head);
    }
    Ok(ExitCode::SUCCESS)
}

/// `audit export` on a shared store: every chain (or `--host`'s), chain by chain, each record
/// with `"host": "<chain>"`.
fn export_chains(
    store: &PgStore,
    host: Option<String>,
    filter: &Filter,
    after: i64,
) -> Result<ExitCode> {
    let known: Vec<String> = store.audit_chains()?.into_iter().map(|c| c.chain).collect();
    let chains = match host {
        Some(host) if known.contains(&host) => vec![host],
        Some(host) => bail!(
            "no audit chain of host {host:?} in the shared store; its chains: {}",
            if known.is_empty() {
                "none yet".to_owned()
            } else {
                known.join(", ")
            }
        ),
        None => known,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    write_chains(store, &chains, after, filter, &mut out)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The records of `chains` after `after` (each chain's seq) that `filter` keeps, as JSON lines
/// with their chain's `"host"`, chain by chain.
fn write_chains(
    store: &PgStore,
    chains: &[String],
    after: i64,
    filter: &Filter,
    out: &mut impl Write,
) -> Result<()> {
    for chain in chains {
        let mut after_seq = after;
        loop {
            let page = store.export_audit_chain(chain, after_seq, 500)?;
            let Some((_, last)) = page.last() else { break };
            after_seq = last.seq;
            for (chain, record) in &page {
                if filter.keeps(&record.entry) {
                    write_with_host(out, chain, record)?;
                }
            }
        }
    }
    Ok(())
}

/// For `goals export`: goal `goal`'s records as JSON lines (as `audit export --goal` streams
/// them; on a shared store every chain's, each with `"host"`) and the audit's verification
/// (on a shared store, of every chain).
pub fn goal_slice(data_dir: &std::path::Path, goal: &str) -> Result<(Vec<u8>, VerifyReport)> {
    let offline = open_offline(data_dir, &ConfigFile::default(), || {
        "cannot open the audit log for the goal's audit slice".to_owned()
    })?;
    let filter = Filter {
        goal: Some(goal.to_owned()),
        device: None,
    };
    let mut slice = Vec::new();
    match offline {
        Offline::Sqlite(store) => {
            for record in store.audit_iter(0, 500) {
                let record = record?;
                if filter.keeps(&record.entry) {
                    serde_json::to_writer(&mut slice, &record)?;
                    slice.push(b'\n');
                }
            }
            Ok((slice, store.verify_audit()?))
        }
        Offline::Shared(store) => {
            let chains: Vec<String> = store.audit_chains()?.into_iter().map(|c| c.chain).collect();
            write_chains(&store, &chains, 0, &filter, &mut slice)?;
            Ok((slice, openphone_store::AuditStore::verify_audit(&store)?))
        }
    }
}

/// One exported record as a JSON line with its chain's `"host"`.
fn write_with_host(out: &mut impl Write, chain: &str, record: &AuditRecord) -> Result<()> {
    let mut value = serde_json::to_value(record)?;
    if let Some(map) = value.as_object_mut() {
        map.insert("host".into(), chain.into());
    }
    serde_json::to_writer(&mut *out, &value)?;
    out.write_all(b"\n")?;
    Ok(())
}
