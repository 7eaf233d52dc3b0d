//! `openphone bench invoke`: a load tool for a running daemon. N concurrent connections (with
//! the operator credential) each invoke a tool M times, waiting for every answer; it prints
//! calls/s, p50, p99 and the daemon's resident memory (now and peak, from /proc on Linux).
//!
//! The endpoint rate-limits each credential (20/s by default): benchmark a daemon started with
//! a config that raises `[limits] rate_per_sec` and `rate_burst`, or the figures measure the
//! limiter. Answers refused with `rate_limited` are counted separately.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::client::DaemonClient;
use crate::data_dir::DataDir;

/// Options of `bench invoke`.
#[derive(Debug, clap::Args)]
pub struct InvokeBench {
    /// Concurrent connections.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Calls per connection.
    #[arg(long, default_value_t = 200)]
    pub calls: usize,
    /// The command to invoke (a read is the sensible choice).
    #[arg(long, default_value = "openphone.screen.get")]
    pub tool: String,
    /// Its params as JSON.
    #[arg(
        long,
        default_value = r#"{"reason": "load test", "include_screenshot": false}"#
    )]
    pub params: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub data_dir: DataDir,
}

#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    ok: usize,
    rate_limited: usize,
    other: usize,
}

/// Resident set size now and at its peak (KiB), from `/proc/<pid>/status`.
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

pub fn invoke(opts: InvokeBench) -> Result<ExitCode> {
    if opts.connections == 0 || opts.calls == 0 {
        bail!("--connections and --calls must be at least 1");
    }
    let params: Value = serde_json::from_str(&opts.params).context("--params is not JSON")?;
    let dir = opts.data_dir.resolve()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let mut clients = Vec::with_capacity(opts.connections);
        for _ in 0..opts.connections {
            clients.push(DaemonClient::connect(&dir).await?);
        }
        let pid = clients.first().map_or(0, |c| c.endpoint.pid);
        let rss_before = rss_kib(pid);
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for (n, mut client) in clients.into_iter().enumerate() {
            let tool = opts.tool.clone();
            let params = params.clone();
            let calls = opts.calls;
            tasks.spawn(async move {
                let mut tally = Tally::default();
                for i in 0..calls {
                    let t = Instant::now();
                    let answer = client
                        .call(
                            "tools.invoke",
                            json!({"request_id": format!("bench-{n}-{i}"), "tool": tool, "params": params}),
                        )
                        .await;
                    tally.latencies.push(t.elapsed());
                    match answer {
                        Ok(r) if r["status"] == "ok" => tally.ok += 1,
                        Ok(_) => tally.other += 1,
                        Err(e) if e.to_string().contains("rate_limited") => tally.rate_limited += 1,
                        Err(_) => tally.other += 1,
                    }
                }
                client.close().await;
                tally
            });
        }
        let mut all = Tally::default();
        while let Some(done) = tasks.join_next().await {
            let t = done.context("a load connection failed")?;
            all.latencies.extend(t.latencies);
            all.ok += t.ok;
            all.rate_limited += t.rate_limited;
            all.other += t.other;
        }
        let elapsed = started.elapsed();
        let rss_after = rss_kib(pid);
        all.latencies.sort_unstable();
        let total = all.latencies.len();
        let at = |q: f64| {
            let i = ((total as f64 * q) as usize).min(total.saturating_sub(1));
            all.latencies.get(i).copied().unwrap_or_default()
        };
        let calls_per_sec = total as f64 / elapsed.as_secs_f64();
        let report = json!({
            "tool": opts.tool,
            "connections": opts.connections,
            "calls": total,
            "ok": all.ok,
            "rate_limited": all.rate_limited,
            "other": all.other,
            "seconds": elapsed.as_secs_f64(),
            "calls_per_sec": calls_per_sec,
            "p50_ms": at(0.50).as_secs_f64() * 1000.0,
            "p99_ms": at(0.99).as_secs_f64() * 1000.0,
            "daemon_pid": pid,
            "daemon_rss_kib_before": rss_before.map(|r| r.0),
            "daemon_rss_kib_after": rss_after.map(|r| r.0),
            "daemon_peak_rss_kib": rss_after.map(|r| r.1),
        });
        if opts.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            println!(
                "{} × {} calls of {}: {:.0} calls/s, p50 {:.2} ms, p99 {:.2} ms ({} ok, {} rate_limited, {} other)",
                opts.connections, opts.calls, opts.tool, calls_per_sec,
                at(0.50).as_secs_f64() * 1000.0, at(0.99).as_secs_f64() * 1000.0,
                all.ok, all.rate_limited, all.other
            );
            match (rss_before, rss_after) {
                (Some(b), Some(a)) => println!(
                    "daemon pid {pid}: RSS {} KiB before, {} KiB after, peak {} KiB",
                    b.0, a.0, a.1
                ),
                _ => println!("daemon pid {pid}: RSS not available (no /proc)"),
            }
        }
        Ok(if all.other == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
    })
}
