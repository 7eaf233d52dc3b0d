//! `openphone bench bridge`: the ToolBridge in this process, on a fresh SQLite file in a
//! temporary data directory and the simulated phone, with N concurrent tasks on a
//! multi-thread runtime: the daemon's whole decision and recording path without any
//! transport.
//!
//! Two operations (`--op`):
//! - `read`: `openphone.device.status` by a runtime (`bench`, transport websocket, every
//!   exposure class granted), the trivial read of the endpoint benchmarks, asked as the
//!   endpoint's `tools.invoke` asks (`Invocation::answered_as_text`: a kept answer comes back
//!   as its text);
//! - `mutation`: `openphone.clipboard.set` by the operator under `trusted_actions`, a
//!   mutation the policy allows without a confirmation, with its executing record.
//!
//! Every call writes its audit record durably before it is answered, so concurrency is what
//! lets the store commit many calls' records in one transaction.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use openphone_clock::{Clock, Stopwatch, SystemClock};
use openphone_core::{BridgeConfig, EventBus, Invocation, ToolBridge};
use openphone_device::{PhoneDevice, SimPhone};
use openphone_policy::{Caller, ExposureGrants, Transport};
use openphone_protocol::{Registry, ToolRequest, ToolStatus};
use openphone_store::Store;
use serde_json::{Value, json};

use super::{Load, Outcome, Pacer, Run, gather};

/// The operation each task repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Op {
    /// `openphone.device.status` by a runtime.
    Read,
    /// `openphone.clipboard.set` by the operator under `trusted_actions`.
    Mutation,
}

/// Options of `bench bridge`.
#[derive(Debug, clap::Args)]
pub struct BridgeBench {
    /// Concurrent tasks, each making one call at a time.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// The operation.
    #[arg(long, value_enum, default_value = "read")]
    pub op: Op,
    /// Where to create the temporary data directory (default: the system's temporary
    /// directory). Durable commits cost what this file system's fsync costs: a tmpfs
    /// makes them free.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    #[command(flatten)]
    pub load: Load,
}

/// A data directory removed when dropped.
struct TempDataDir(PathBuf);

impl TempDataDir {
    fn create(parent: &Path) -> Result<TempDataDir> {
        let path = parent.join(format!("openphone-bench-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir(&path)
            .with_context(|| format!("creating the data directory {}", path.display()))?;
        Ok(TempDataDir(path))
    }
}

impl Drop for TempDataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What one task sends: the caller, the tool, its params and the requested autonomy.
struct Work {
    caller: Caller,
    tool: &'static str,
    params: Value,
    autonomy: Option<&'static str>,
}

impl Work {
    fn of(op: Op) -> Work {
        match op {
            Op::Read => Work {
                // A runtime configured with every exposure class (the status is private_read).
                caller: Caller {
                    grants: ExposureGrants::ALL,
                    ..Caller::remote("bench", Transport::Websocket, "bench")
                },
                tool: "openphone.device.status",
                params: json!({"reason": "bridge benchmark"}),
                autonomy: None,
            },
            Op::Mutation => Work {
                caller: Caller::operator("cli", Transport::Cli, "bench"),
                tool: "openphone.clipboard.set",
                params: json!({"text": "benchmark clipboard text", "reason": "bridge benchmark"}),
                autonomy: Some("trusted_actions"),
            },
        }
    }
}

/// A bridge as the daemon builds one: the embedded manifests, the store in `dir`, the
/// simulated phone on the system clock.
fn build_bridge(dir: &Path) -> Result<(ToolBridge, Arc<Store>)> {
    let registry = Registry::embedded().context("loading the embedded manifests")?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let phone = SimPhone::with_default_scenario(Arc::clone(&clock))
        .context("building the simulated phone")?;
    let phone: Arc<dyn PhoneDevice> = Arc::new(phone);
    let store = Arc::new(
        Store::open(dir).with_context(|| format!("opening a store in {}", dir.display()))?,
    );
    let bridge = ToolBridge::new(
        registry,
        Arc::clone(&store),
        phone,
        clock,
        Arc::new(EventBus::new(registry, 1024)),
        BridgeConfig::default(),
    );
    Ok((bridge, store))
}

/// `bench bridge`.
pub fn bridge(opts: BridgeBench) -> Result<ExitCode> {
    let plan = opts.load.plan(opts.concurrency, "--concurrency")?;
    let parent = opts.dir.clone().unwrap_or_else(std::env::temp_dir);
    let data = TempDataDir::create(&parent)?;
    let rt = opts.load.runtime()?;
    let code = rt.block_on(async {
        let (bridge, store) = build_bridge(&data.0)?;
        let bridge = Arc::new(bridge);
        let work = Arc::new(Work::of(opts.op));
        let started = Stopwatch::start();
        let mut tasks = tokio::task::JoinSet::new();
        for n in 0..opts.concurrency {
            let bridge = Arc::clone(&bridge);
            let work = Arc::clone(&work);
            tasks.spawn(async move {
                let mut pacer = Pacer::new(plan, started);
                while pacer.more() {
                    let (i, call) = pacer.begin();
                    let request = ToolRequest {
                        request_id: format!("bench-{n}-{i}"),
                        tool: work.tool.to_owned(),
                        params: work.params.clone(),
                        autonomy: work.autonomy.map(str::to_owned),
                        ..ToolRequest::default()
                    };
                    let result = bridge
                        .call(Invocation::runtime(&work.caller, request).answered_as_text())
                        .await;
                    let outcome = match (result.status, &result.error) {
                        (ToolStatus::Ok, _) => Outcome::Ok,
                        (_, Some(e)) => Outcome::failed(format!("tool:{}", e.code.as_str())),
                        (status, None) => Outcome::failed(format!("tool:{}", status.as_str())),
                    };
                    pacer.record(call, outcome);
                }
                pacer.finish()
            });
        }
        let all = gather(tasks).await?;
        let target = format!("in-process ({})", data.0.display());
        // The store's writer over the whole run (warm-up included): how many writes each
        // call made, and how many of them shared a commit.
        let writer = store.as_sqlite().map(|s| s.writer_stats());
        Run {
            mode: "bridge",
            target: &target,
            tool: work.tool,
            extra: vec![
                ("concurrency", json!(opts.concurrency)),
                (
                    "op",
                    json!(match opts.op {
                        Op::Read => "read",
                        Op::Mutation => "mutation",
                    }),
                ),
                ("store_writes", json!(writer.map(|w| w.writes))),
                ("store_commits", json!(writer.map(|w| w.batches))),
                ("largest_commit", json!(writer.map(|w| w.largest_batch))),
                (
                    "checkpoints",
                    json!(writer.map(|w| w.background_checkpoints
                        + w.inline_checkpoints
                        + w.tail_checkpoints)),
                ),
                (
                    "inline_checkpoints",
                    json!(writer.map(|w| w.inline_checkpoints)),
                ),
                (
                    "tail_checkpoints",
                    json!(writer.map(|w| w.tail_checkpoints)),
                ),
            ],
            plan,
            started,
            server_pid: None,
            rss_before: None,
        }
        .report(all, opts.load.json)
    });
    // The bridge (and its store's writer) are gone with the runtime's tasks; the directory
    // goes with `data`.
    drop(rt);
    drop(data);
    code
}
