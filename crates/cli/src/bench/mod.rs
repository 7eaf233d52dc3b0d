//! `openphone bench`: load tools that reproduce the figures of the performance issue against
//! any server, and the in-process bridge (docs/benchmarks.md).
//!
//! - `invoke` (`invoke.rs`): N WebSocket connections calling `tools.invoke` on the daemon's
//!   endpoint, or on any server speaking it (`--url`, e.g. the null server under `bench/`).
//! - `mcp` (`mcp.rs`): N keep-alive HTTP clients calling an MCP tool over Streamable HTTP, in
//!   the handshake era (2025-11-25: `initialize`, `Mcp-Session-Id`, SSE answers) or the
//!   per-request era (2026-07-28, stateless), against the daemon's `/mcp` or any MCP server.
//! - `bridge` (`bridge.rs`): the ToolBridge in this process on a fresh SQLite file and the
//!   simulated phone, N concurrent tasks on a multi-thread runtime.
//! - `memory` (`memory.rs`): starts a daemon and reads its resident memory at idle, after
//!   100 k calls and after 10 k jobs, and its idle wake-ups per second.
//!
//! Every mode runs either a call count per worker (`--calls`) or for a time (`--duration`,
//! after a `--warmup` whose calls are left out of the figures), and prints calls/s, p50, p90,
//! p99, max and the errors by kind, as text or JSON (`--json`). This file holds what the modes
//! share: the pacing of a worker, the tally, the report.

mod answer;
mod bridge;
mod invoke;
mod mcp;
mod memory;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use openphone_clock::Stopwatch;
use serde_json::{Value, json};

pub use bridge::{BridgeBench, bridge};
pub use invoke::{InvokeBench, invoke};
pub use mcp::{McpBench, mcp};
pub use memory::{MemoryBench, memory};

/// How long a run goes and how its figures are printed (shared by every mode).
#[derive(Debug, Clone, clap::Args)]
pub struct Load {
    /// Calls per connection (or per task); not with --duration.
    #[arg(long, default_value_t = 200, conflicts_with = "duration")]
    pub calls: usize,
    /// Run for this many seconds (after the warm-up) instead of a call count.
    #[arg(long, value_name = "SECS", value_parser = positive_secs)]
    pub duration: Option<f64>,
    /// With --duration: seconds of calls before the measured window, left out of the figures
    /// (default 1).
    #[arg(long, value_name = "SECS", value_parser = non_negative_secs, requires = "duration")]
    pub warmup: Option<f64>,
    /// Worker threads of the async runtime (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// How the load reaches a server besides its URL (shared by `invoke` and `mcp`).
#[derive(Debug, Clone, clap::Args)]
pub struct Server {
    /// The bearer token (default: the data directory's token for the protocol,
    /// operator.token or mcp.token; with --url and no token: none).
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    pub token: Option<String>,
    /// A file holding the bearer token.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The server's process id, to report its memory (default with a data directory: the
    /// daemon's).
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// Seconds to wait for one answer before counting a timeout.
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = positive_secs)]
    pub timeout: f64,
}

impl Server {
    /// The token given with `--token` or `--token-file`, if any.
    fn token(&self) -> Result<Option<String>> {
        match (&self.token, &self.token_file) {
            (Some(t), _) if t.trim().is_empty() => bail!("--token is empty"),
            (Some(t), _) => Ok(Some(t.trim().to_owned())),
            (None, Some(path)) => Ok(Some(read_token_file(path)?)),
            (None, None) => Ok(None),
        }
    }
}

/// The `endpoint.json` of the daemon serving `dir`.
fn read_endpoint(dir: &Path) -> Result<openphone_server::EndpointInfo> {
    std::fs::read_to_string(dir.join(openphone_server::ENDPOINT_FILE))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .with_context(|| {
            format!(
                "no daemon serves {} (no endpoint.json): start one, or pass --url",
                dir.display()
            )
        })
}

/// The longest run or warm-up accepted (a day): a larger number is a typo.
const MAX_SECS: f64 = 86_400.0;

/// Parses a number of seconds greater than zero.
fn positive_secs(text: &str) -> Result<f64, String> {
    let secs = non_negative_secs(text)?;
    if secs == 0.0 {
        return Err("must be more than 0 seconds".to_owned());
    }
    Ok(secs)
}

/// Parses a number of seconds, zero allowed.
fn non_negative_secs(text: &str) -> Result<f64, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("{text:?} is not a number of seconds"));
    }
    if secs > MAX_SECS {
        return Err(format!("at most {MAX_SECS} seconds"));
    }
    Ok(secs)
}

/// The per-call timeout of the network modes, from `--timeout`.
fn call_timeout(secs: f64) -> Duration {
    Duration::from_secs_f64(secs)
}

/// What a worker does: a number of calls, or calls for a time.
#[derive(Debug, Clone, Copy)]
enum Plan {
    /// This many calls per worker, every one counted.
    Count(usize),
    /// Calls until `warmup + measure` has passed since the start; only those that complete
    /// inside `[warmup, warmup + measure]` are counted.
    Timed { warmup: Duration, measure: Duration },
}

impl Load {
    /// The plan, after checking that `workers` (connections or tasks) is usable.
    fn plan(&self, workers: usize, what: &str) -> Result<Plan> {
        if workers == 0 || self.calls == 0 {
            bail!("{what} and --calls must be at least 1");
        }
        if self.threads == Some(0) {
            bail!("--threads must be at least 1");
        }
        Ok(match self.duration {
            Some(secs) => Plan::Timed {
                warmup: Duration::from_secs_f64(self.warmup.unwrap_or(1.0)),
                measure: Duration::from_secs_f64(secs),
            },
            None => Plan::Count(self.calls),
        })
    }

    /// A multi-thread runtime with the asked number of worker threads.
    fn runtime(&self) -> Result<tokio::runtime::Runtime> {
        let threads = self
            .threads
            .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
            .unwrap_or(2);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .context("starting the async runtime")
    }
}

/// How one call ended.
#[derive(Debug)]
enum Outcome {
    Ok,
    /// Failed, with the kind the report counts it under (`rate_limited`, `timeout`,
    /// `connection`, `http_500`, `tool:denied`, …).
    Failed(String),
}

impl Outcome {
    fn failed(kind: impl Into<String>) -> Outcome {
        Outcome::Failed(kind.into())
    }
}

/// The error kind the daemon's rate limiter produces; it is counted apart and does not make
/// the run fail (the figures then measure the limiter, which the report says).
const RATE_LIMITED: &str = "rate_limited";

/// What one worker (or all of them) counted.
#[derive(Debug, Default)]
struct Tally {
    latencies: Vec<Duration>,
    ok: u64,
    errors: BTreeMap<String, u64>,
    /// Every call started, counted or not (warm-up included): what the server had to do.
    issued: u64,
}

impl Tally {
    fn add(&mut self, latency: Duration, outcome: Outcome) {
        self.latencies.push(latency);
        match outcome {
            Outcome::Ok => self.ok += 1,
            Outcome::Failed(kind) => *self.errors.entry(kind).or_default() += 1,
        }
    }

    fn merge(&mut self, other: Tally) {
        self.latencies.extend(other.latencies);
        self.ok += other.ok;
        self.issued += other.issued;
        for (kind, n) in other.errors {
            *self.errors.entry(kind).or_default() += n;
        }
    }
}

/// One worker's pacing: whether to make another call, and which calls count.
struct Pacer {
    plan: Plan,
    /// Started once for the whole run, shared by every worker.
    run: Stopwatch,
    issued: usize,
    tally: Tally,
}

impl Pacer {
    fn new(plan: Plan, run: Stopwatch) -> Pacer {
        Pacer {
            plan,
            run,
            issued: 0,
            tally: Tally::default(),
        }
    }

    /// Whether the worker makes another call.
    fn more(&self) -> bool {
        match self.plan {
            Plan::Count(n) => self.issued < n,
            Plan::Timed { warmup, measure } => self.run.elapsed() < warmup + measure,
        }
    }

    /// The index of the call about to start (unique within the worker) and its stopwatch.
    fn begin(&mut self) -> (usize, Stopwatch) {
        self.issued += 1;
        self.tally.issued += 1;
        (self.issued - 1, Stopwatch::start())
    }

    /// Counts a finished call, unless it ended outside the measured window.
    fn record(&mut self, call: Stopwatch, outcome: Outcome) {
        let latency = call.elapsed();
        if let Plan::Timed { warmup, measure } = self.plan {
            let now = self.run.elapsed();
            if now < warmup || now > warmup + measure {
                return;
            }
        }
        self.tally.add(latency, outcome);
    }

    fn finish(self) -> Tally {
        self.tally
    }
}

/// Waits for every worker and adds up their tallies.
async fn gather(mut tasks: tokio::task::JoinSet<Tally>) -> Result<Tally> {
    let mut all = Tally::default();
    while let Some(done) = tasks.join_next().await {
        all.merge(done.context("a load task failed")?);
    }
    Ok(all)
}

/// Resident set size now and at its peak (KiB), from `/proc/<pid>/status` (Linux).
fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Reads a token file: its content without surrounding whitespace, which must not be empty.
fn read_token_file(path: &Path) -> Result<String> {
    let token = std::fs::read_to_string(path)
        .with_context(|| format!("reading the token file {}", path.display()))?
        .trim()
        .to_owned();
    if token.is_empty() {
        bail!("the token file {} is empty", path.display());
    }
    Ok(token)
}

/// What a finished run was, for its report.
struct Run<'a> {
    /// `invoke`, `mcp` or `bridge`.
    mode: &'static str,
    /// The URL loaded, or `in-process`.
    target: &'a str,
    tool: &'a str,
    /// Extra fields of the mode (`connections`, `era`, `concurrency`, `op`, …).
    extra: Vec<(&'static str, Value)>,
    plan: Plan,
    /// The whole run's stopwatch (count mode: its elapsed time is the run's length).
    started: Stopwatch,
    /// The server's process, for its memory, and its RSS before the run.
    server_pid: Option<u32>,
    rss_before: Option<(u64, u64)>,
}

/// The nearest-rank percentile `q` (0 < q ≤ 1) of sorted latencies, in milliseconds.
fn percentile_ms(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1000.0
}

impl Run<'_> {
    /// Prints the figures; exit 1 when some calls failed for another reason than the rate
    /// limiter.
    fn report(self, mut all: Tally, json_out: bool) -> Result<ExitCode> {
        let (seconds, warmup) = match self.plan {
            Plan::Count(_) => (self.started.elapsed().as_secs_f64(), 0.0),
            Plan::Timed { warmup, measure } => (measure.as_secs_f64(), warmup.as_secs_f64()),
        };
        all.latencies.sort_unstable();
        let calls = all.latencies.len() as u64;
        let rate_limited = all.errors.get(RATE_LIMITED).copied().unwrap_or(0);
        let failed: u64 = all.errors.values().sum();
        let other = failed - rate_limited;
        let calls_per_sec = if seconds > 0.0 {
            calls as f64 / seconds
        } else {
            0.0
        };
        let p = |q| percentile_ms(&all.latencies, q);
        let rss_after = self.server_pid.and_then(rss_kib);
        let mut report = json!({
            "mode": self.mode,
            "target": self.target,
            "tool": self.tool,
            "calls": calls,
            "calls_issued": all.issued,
            "ok": all.ok,
            "rate_limited": rate_limited,
            "other": other,
            "errors": all.errors,
            "seconds": seconds,
            "warmup_seconds": warmup,
            "calls_per_sec": calls_per_sec,
            "p50_ms": p(0.50),
            "p90_ms": p(0.90),
            "p99_ms": p(0.99),
            "max_ms": p(1.0),
        });
        if let Some(obj) = report.as_object_mut() {
            for (k, v) in &self.extra {
                obj.insert((*k).to_owned(), v.clone());
            }
            if let Some(pid) = self.server_pid {
                obj.insert("server_pid".into(), json!(pid));
                // The names of the first version of this report, kept for scripts.
                obj.insert("daemon_pid".into(), json!(pid));
                obj.insert(
                    "daemon_rss_kib_before".into(),
                    json!(self.rss_before.map(|r| r.0)),
                );
                obj.insert("daemon_rss_kib_after".into(), json!(rss_after.map(|r| r.0)));
                obj.insert("daemon_peak_rss_kib".into(), json!(rss_after.map(|r| r.1)));
            }
        }
        if json_out {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            let extra: Vec<String> = self
                .extra
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => format!("{k} {s}"),
                    other => format!("{k} {other}"),
                })
                .collect();
            let window = match self.plan {
                Plan::Count(n) => format!("{n} calls per worker in {seconds:.2} s"),
                Plan::Timed { .. } => {
                    format!("{seconds:.1} s measured after {warmup:.1} s of warm-up")
                }
            };
            println!(
                "{} {} on {} ({}; {window})",
                self.mode,
                self.tool,
                self.target,
                extra.join(", ")
            );
            println!(
                "  {calls} calls: {calls_per_sec:.0} calls/s; p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
                p(0.50),
                p(0.90),
                p(0.99),
                p(1.0)
            );
            let errors = if all.errors.is_empty() {
                "none".to_owned()
            } else {
                all.errors
                    .iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            println!("  {} ok; errors: {errors}", all.ok);
            if rate_limited > 0 {
                println!(
                    "  (rate_limited answers measure the server's limiter: raise its [limits] rate_per_sec and rate_burst)"
                );
            }
            if let Some(pid) = self.server_pid {
                match (self.rss_before, rss_after) {
                    (Some(b), Some(a)) => println!(
                        "  server pid {pid}: RSS {} KiB before, {} KiB after, peak {} KiB",
                        b.0, a.0, a.1
                    ),
                    _ => println!("  server pid {pid}: RSS not available (no /proc entry)"),
                }
            }
        }
        Ok(if other == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let ms: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile_ms(&ms, 0.50), 50.0);
        assert_eq!(percentile_ms(&ms, 0.90), 90.0);
        assert_eq!(percentile_ms(&ms, 0.99), 99.0);
        assert_eq!(percentile_ms(&ms, 1.0), 100.0);
        assert_eq!(percentile_ms(&ms[..1], 0.5), 1.0);
        assert_eq!(percentile_ms(&[], 0.5), 0.0);
    }

    #[test]
    fn seconds_must_be_finite_and_in_range() {
        assert_eq!(positive_secs("2.5"), Ok(2.5));
        assert!(positive_secs("0").unwrap_err().contains("more than 0"));
        assert!(positive_secs("-1").is_err());
        assert!(positive_secs("NaN").is_err());
        assert!(positive_secs("inf").is_err());
        assert!(positive_secs("ten").is_err());
        assert!(positive_secs("1e9").unwrap_err().contains("at most"));
        assert_eq!(non_negative_secs("0"), Ok(0.0));
    }

    #[test]
    fn a_count_run_counts_every_call_and_a_timed_run_only_its_window() {
        let mut count = Pacer::new(Plan::Count(2), Stopwatch::start());
        while count.more() {
            let (_, call) = count.begin();
            count.record(call, Outcome::Ok);
        }
        assert_eq!(count.finish().ok, 2);

        // A warm-up longer than the test: nothing recorded yet, more calls wanted.
        let mut timed = Pacer::new(
            Plan::Timed {
                warmup: Duration::from_secs(3600),
                measure: Duration::from_secs(1),
            },
            Stopwatch::start(),
        );
        assert!(timed.more());
        let (i, call) = timed.begin();
        assert_eq!(i, 0);
        timed.record(call, Outcome::failed("timeout"));
        let t = timed.finish();
        // Made (the server did the work) but not counted.
        assert_eq!(
            (t.ok, t.latencies.len(), t.errors.len(), t.issued),
            (0, 0, 0, 1)
        );

        // A window that has passed: no more calls.
        let over = Pacer::new(
            Plan::Timed {
                warmup: Duration::ZERO,
                measure: Duration::from_nanos(1),
            },
            Stopwatch::start(),
        );
        std::thread::sleep(Duration::from_millis(2));
        assert!(!over.more());
    }

    #[test]
    fn tallies_merge_errors_by_kind() {
        let mut a = Tally::default();
        a.add(Duration::from_millis(1), Outcome::Ok);
        a.add(Duration::from_millis(2), Outcome::failed("timeout"));
        let mut b = Tally::default();
        b.add(Duration::from_millis(3), Outcome::failed("timeout"));
        b.add(Duration::from_millis(4), Outcome::failed(RATE_LIMITED));
        a.merge(b);
        assert_eq!(a.ok, 1);
        assert_eq!(a.latencies.len(), 4);
        assert_eq!(a.errors.get("timeout"), Some(&2));
        assert_eq!(a.errors.get(RATE_LIMITED), Some(&1));
    }
}
