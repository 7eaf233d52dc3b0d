//! `openphone dev crash-test`: crash safety as a property (issue 11).
//!
//! One data directory, `--cycles` rounds. Each round starts a real daemon (this binary's
//! `serve`), lets `--concurrency` workers send state-changing calls — the operator's own
//! invoke and a runtime at `trusted_actions` (both run without a confirmation), and a runtime
//! at `ask_before_action` whose confirmation the operator then approves or denies — and kills
//! the daemon with SIGKILL at a random moment. Every call has an idempotency key and a memory
//! text of its own (`openphone.memory.save`, whose side effect is durable and countable).
//! The next round first retries every unanswered call with its key. At the end a last daemon
//! settles whatever is left, every acknowledged call is retried once more, and the database
//! is checked:
//!
//! - 0 lost acknowledged results (the retry replays exactly what was acknowledged, and an
//!   acknowledged saved memory is there);
//! - 0 double executions (no memory text saved twice);
//! - 0 unapproved executions (no denied confirmation ran);
//! - 0 unaudited executions (each direct run has its attempt record, each approval its
//!   transition record, written before the side effect);
//! - no executing record or approved confirmation left unsettled, and the audit chain verifies;
//! - 0 lost read records: the workers also make safe reads (`openphone.screen.get`), whose
//!   answer leaves once the audit record is in the write-ahead log, before its fsync
//!   (docs/security.md, "What is durable when"); every one answered `ok` must have its
//!   record after the kills.

mod conn;
mod ledger;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use openphone_protocol::endpoint::{
    ConfirmDecision, ConfirmationsResolve, ConfirmationsResolveParams, ToolsInvoke,
    ToolsInvokeParams,
};
use openphone_protocol::{ToolResult, ToolStatus};
use openphone_server::{ENDPOINT_FILE, EndpointInfo, TOKEN_FILE};
use openphone_store::Store;
use serde::Serialize;
use serde_json::json;

use conn::{Answer, Conn};
use ledger::{Call, Decision, Findings, Ledger, Outcome, Path as CallPath};

/// `openphone dev crash-test` options.
#[derive(Debug, Args)]
pub struct CrashTestArgs {
    /// Kill cycles (each: start the daemon, load it, SIGKILL it at a random moment).
    #[arg(long, default_value_t = 20)]
    cycles: u32,
    /// Workers sending calls at once (each with an operator and a runtime connection).
    #[arg(long, default_value_t = 6)]
    concurrency: usize,
    /// The daemon is killed this long after the workers start, at the earliest (ms)…
    #[arg(long, default_value_t = 20)]
    min_kill_ms: u64,
    /// …and at the latest (ms); the moment is uniform in between.
    #[arg(long, default_value_t = 300)]
    max_kill_ms: u64,
    /// Seed of the random choices (default: a random one, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Run in this (new or empty) directory and keep it; by default a temporary directory,
    /// removed after a run whose invariants hold.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The `openphone` binary to run as the daemon (default: this one), e.g. an older build,
    /// to see the test catch what it was written for.
    #[arg(long, value_name = "PATH")]
    daemon: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// What a run did and found.
#[derive(Debug, Serialize)]
struct Report {
    seed: u64,
    cycles: u32,
    data_dir: PathBuf,
    calls: usize,
    direct_operator: usize,
    direct_runtime: usize,
    confirmed: usize,
    /// Calls a kill left unanswered (at least once), then retried with their key.
    cut_by_kill: usize,
    findings: Findings,
    invariants_hold: bool,
}

/// SplitMix64: small, seedable, good enough to choose paths and kill moments.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi.saturating_sub(lo) + 1)
    }
}

fn lock(ledger: &Mutex<Ledger>) -> std::sync::MutexGuard<'_, Ledger> {
    ledger.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs the crash test.
pub fn run(args: CrashTestArgs) -> Result<ExitCode> {
    if args.cycles == 0 || args.concurrency == 0 || args.min_kill_ms > args.max_kill_ms {
        bail!("--cycles and --concurrency must be at least 1, and --min-kill-ms ≤ --max-kill-ms");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(crash_test(args))
}

const RUNTIME: &str = "crashbot";

async fn crash_test(args: CrashTestArgs) -> Result<ExitCode> {
    let seed = args
        .seed
        .unwrap_or_else(|| (uuid::Uuid::new_v4().as_u128() & u128::from(u64::MAX)) as u64);
    let mut rng = Rng(seed);
    let temporary = args.data_dir.is_none();
    let dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("openphone-crash-test-{seed:016x}")),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if dir.join(openphone_store::DB_FILE).exists() {
        bail!(
            "{} already holds a database: use a new directory",
            dir.display()
        );
    }
    let token = uuid::Uuid::new_v4().simple().to_string();
    let config = dir.join("crash-test.toml");
    std::fs::write(&config, config_text(&token))
        .with_context(|| format!("writing {}", config.display()))?;
    let exe = match &args.daemon {
        Some(path) => path.clone(),
        None => std::env::current_exe().context("finding the openphone binary")?,
    };
    let ledger = Arc::new(Mutex::new(Ledger::new(format!("crash-{seed:016x}"))));
    let mut cut_by_kill = 0;

    for cycle in 0..args.cycles {
        let mut daemon = Daemon::start(&exe, &dir, &config).await?;
        let mut workers = Vec::new();
        for _ in 0..args.concurrency {
            let worker = Worker {
                url: daemon.url.clone(),
                operator: daemon.operator_token.clone(),
                runtime: token.clone(),
                ledger: ledger.clone(),
                rng: Rng(rng.next()),
                new_calls: true,
            };
            workers.push(tokio::spawn(worker.run()));
        }
        tokio::time::sleep(Duration::from_millis(
            rng.between(args.min_kill_ms, args.max_kill_ms),
        ))
        .await;
        daemon.kill()?;
        for worker in workers {
            let _ = worker.await;
        }
        cut_by_kill += lock(&ledger).after_kill();
        if !args.json {
            let ledger = lock(&ledger);
            eprintln!(
                "cycle {}/{}: {} calls, {} unanswered",
                cycle + 1,
                args.cycles,
                ledger.calls.len(),
                ledger.unanswered()
            );
        }
    }

    // The last daemon is not killed under load: it settles every call, then the checks run.
    let mut daemon = Daemon::start(&exe, &dir, &config).await?;
    let mut findings = Findings::default();
    settle(&daemon, &token, &ledger).await?;
    verify_replays(&daemon, &token, &ledger, &mut findings).await?;
    {
        let store = Store::open_read_only(&dir)?;
        findings.check_store(&store, &lock(&ledger))?;
    }
    daemon.kill()?;

    let ledger = lock(&ledger);
    let count = |path| ledger.calls.iter().filter(|c| c.path == path).count();
    let report = Report {
        seed,
        cycles: args.cycles,
        data_dir: dir.clone(),
        calls: ledger.calls.len(),
        direct_operator: count(CallPath::DirectOperator),
        direct_runtime: count(CallPath::DirectRuntime),
        confirmed: count(CallPath::Confirmed),
        cut_by_kill,
        invariants_hold: findings.holds(),
        findings,
    };
    print_report(&report, args.json)?;
    if !report.invariants_hold {
        return Ok(ExitCode::from(1));
    }
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(ExitCode::SUCCESS)
}

fn config_text(token: &str) -> String {
    format!(
        "[[runtimes]]\nid = \"{RUNTIME}\"\ntoken = \"{token}\"\n\
         grants = [\"safe_read\", \"private_read\", \"dangerous\"]\n\
         max_autonomy = \"trusted_actions\"\n\n\
         [limits]\nmax_in_flight = 64\nrate_per_sec = 100000.0\nrate_burst = 100000.0\n\n\
         [mcp]\nenabled = false\n"
    )
}

fn print_report(report: &Report, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
        return Ok(());
    }
    let f = &report.findings;
    println!(
        "crash test: {} kill -9 cycles, seed {}, data dir {}",
        report.cycles,
        report.seed,
        report.data_dir.display()
    );
    println!(
        "calls: {} (direct by the operator {}, direct by a runtime {}, confirmed {}: approved \
         {}, denied {})",
        report.calls,
        report.direct_operator,
        report.direct_runtime,
        report.confirmed,
        f.approved,
        f.denied
    );
    println!(
        "cut by a kill and retried with their key: {}; answered execution_result_unknown: {}",
        report.cut_by_kill, f.result_unknown
    );
    println!("memories saved: {}", f.memories_saved);
    println!("lost acknowledged results: {}", f.lost_acknowledged_results);
    println!("double executions: {}", f.double_executions);
    println!("unapproved executions: {}", f.unapproved_executions);
    println!("unaudited executions: {}", f.unaudited_executions);
    println!("unsettled records: {}", f.unsettled_records);
    println!(
        "safe reads answered: {}; their audit records lost: {}",
        f.reads_answered, f.lost_read_records
    );
    println!(
        "audit chain: {} ({} records)",
        if f.audit_chain_intact {
            "intact"
        } else {
            "BROKEN"
        },
        f.audit_records
    );
    for problem in &f.problems {
        println!("  problem: {problem}");
    }
    println!(
        "invariants: {}",
        if report.invariants_hold {
            "hold"
        } else {
            "VIOLATED"
        }
    );
    Ok(())
}

/// A daemon started from this binary on the test's data directory.
struct Daemon {
    child: Child,
    url: String,
    operator_token: String,
}

impl Daemon {
    /// Starts `serve` on a free loopback port and waits until its `endpoint.json` names it.
    async fn start(exe: &Path, dir: &Path, config: &Path) -> Result<Daemon> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("crash-test-serve.log"))
            .context("opening the daemon log")?;
        let mut child = Command::new(exe)
            .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "json"])
            .arg("--config")
            .arg(config)
            .arg("--data-dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting openphone serve")?;
        // Up to 30 s, 10 ms apart (counted: no clock is read).
        for _ in 0..3000 {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "openphone serve exited with {status}; see {}",
                    dir.join("crash-test-serve.log").display()
                );
            }
            if let Ok(text) = std::fs::read_to_string(dir.join(ENDPOINT_FILE))
                && let Ok(info) = serde_json::from_str::<EndpointInfo>(&text)
                && info.pid == child.id()
            {
                let token = std::fs::read_to_string(dir.join(TOKEN_FILE))?;
                return Ok(Daemon {
                    child,
                    url: info.url,
                    operator_token: token.trim().to_owned(),
                });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        bail!("openphone serve did not become ready within 30 s")
    }

    /// SIGKILL, then reap.
    fn kill(&mut self) -> Result<()> {
        self.child.kill().context("killing the daemon")?;
        self.child.wait().context("reaping the daemon")?;
        Ok(())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One worker: takes unanswered calls (retries) first, then makes new ones, until its
/// connections fail (the daemon was killed) or, with `new_calls` false, nothing is left.
struct Worker {
    url: String,
    operator: String,
    runtime: String,
    ledger: Arc<Mutex<Ledger>>,
    rng: Rng,
    new_calls: bool,
}

impl Worker {
    async fn run(mut self) -> Result<()> {
        let mut operator = Conn::open(&self.url, &self.operator).await?;
        let mut runtime = Conn::open(&self.url, &self.runtime).await?;
        loop {
            if self.new_calls && self.rng.next().is_multiple_of(3) {
                safe_read(&mut runtime, &self.ledger).await?;
                continue;
            }
            let call = {
                let mut ledger = lock(&self.ledger);
                match ledger.claim_retry() {
                    Some(call) => call,
                    None if self.new_calls => {
                        let (path, decision) = match self.rng.next() % 3 {
                            0 => (CallPath::DirectOperator, None),
                            1 => (CallPath::DirectRuntime, None),
                            _ if self.rng.next() % 10 < 6 => {
                                (CallPath::Confirmed, Some(Decision::Approve))
                            }
                            _ => (CallPath::Confirmed, Some(Decision::Deny)),
                        };
                        ledger.add(path, decision)
                    }
                    None => return Ok(()),
                }
            };
            perform(&call, &mut operator, &mut runtime, &self.ledger).await?;
        }
    }
}

/// One safe read on the runtime's connection; its request id goes in the ledger when it is
/// answered `ok`.
async fn safe_read(runtime: &mut Conn, ledger: &Mutex<Ledger>) -> Result<()> {
    let request_id = format!("read-{}", uuid::Uuid::new_v4().simple());
    let params = ToolsInvokeParams {
        request_id: request_id.clone(),
        tool: "openphone.screen.get".into(),
        params: Some(json!({"reason": "crash test", "include_ui_tree": false})),
        ..ToolsInvokeParams::default()
    };
    if let Answer::Result(result) = runtime.call::<ToolsInvoke>(params).await?
        && result.status == ToolStatus::Ok
    {
        lock(ledger).reads.push(request_id);
    }
    Ok(())
}

/// Sends `call` once (and its decision, for a confirmed one); records a final answer.
async fn perform(
    call: &Call,
    operator: &mut Conn,
    runtime: &mut Conn,
    ledger: &Mutex<Ledger>,
) -> Result<()> {
    let acknowledge =
        |result: &ToolResult| lock(ledger).acknowledge(call.index, Outcome::of(result));
    match call.path {
        CallPath::DirectOperator | CallPath::DirectRuntime => {
            let conn = match call.path {
                CallPath::DirectOperator => operator,
                CallPath::DirectRuntime | CallPath::Confirmed => runtime,
            };
            if let Some(result) = invoke(conn, call, "trusted_actions").await?
                && result.status != ToolStatus::NeedsConfirmation
            {
                acknowledge(&result);
            }
        }
        CallPath::Confirmed => {
            let Some(first) = invoke(runtime, call, "ask_before_action").await? else {
                return Ok(());
            };
            let Some(pending) = first.pending_confirmation() else {
                acknowledge(&first);
                return Ok(());
            };
            lock(ledger).set_confirmation(call.index, &pending.confirmation_id);
            let decision = match call.decision {
                Some(Decision::Deny) => ConfirmDecision::Deny,
                Some(Decision::Approve) | None => ConfirmDecision::Approve,
            };
            let params = ConfirmationsResolveParams {
                confirmation_id: pending.confirmation_id,
                decision,
            };
            // Refused: resolved already (the answer was lost to a kill); the runtime's next
            // keyed retry gets the final result.
            if let Answer::Result(result) = operator.call::<ConfirmationsResolve>(params).await? {
                acknowledge(&result);
            }
        }
    }
    Ok(())
}

/// `tools.invoke` of the call's memory save with its key; `None` when the daemon refused the
/// call itself (a JSON-RPC error such as `rate_limited`).
async fn invoke(conn: &mut Conn, call: &Call, autonomy: &str) -> Result<Option<ToolResult>> {
    let params = ToolsInvokeParams {
        request_id: format!("req-{}", uuid::Uuid::new_v4().simple()),
        tool: "openphone.memory.save".into(),
        params: Some(json!({"text": call.text, "reason": "crash test"})),
        autonomy: Some(autonomy.into()),
        idempotency_key: Some(call.key.clone()),
        timeout_ms: Some(600_000),
        wait: Some(false),
        ..ToolsInvokeParams::default()
    };
    Ok(match conn.call::<ToolsInvoke>(params).await? {
        Answer::Result(result) => Some(result),
        Answer::Refused(_) => None,
    })
}

/// Retries every unanswered call (no kill) until each has a final answer.
async fn settle(daemon: &Daemon, token: &str, ledger: &Arc<Mutex<Ledger>>) -> Result<()> {
    for _ in 0..100 {
        if lock(ledger).unanswered() == 0 {
            return Ok(());
        }
        let worker = Worker {
            url: daemon.url.clone(),
            operator: daemon.operator_token.clone(),
            runtime: token.to_owned(),
            ledger: ledger.clone(),
            rng: Rng(0),
            new_calls: false,
        };
        worker.run().await?;
        lock(ledger).release();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!(
        "{} calls still have no final answer after 100 rounds of retries",
        lock(ledger).unanswered()
    )
}

/// Retries every acknowledged call once more with its key: each must be a replay of what
/// was acknowledged.
async fn verify_replays(
    daemon: &Daemon,
    token: &str,
    ledger: &Arc<Mutex<Ledger>>,
    findings: &mut Findings,
) -> Result<()> {
    let calls = lock(ledger).calls.clone();
    let mut operator = Conn::open(&daemon.url, &daemon.operator_token).await?;
    let mut runtime = Conn::open(&daemon.url, token).await?;
    for call in &calls {
        let (conn, autonomy) = match call.path {
            CallPath::DirectOperator => (&mut operator, "trusted_actions"),
            CallPath::DirectRuntime => (&mut runtime, "trusted_actions"),
            CallPath::Confirmed => (&mut runtime, "ask_before_action"),
        };
        match invoke(conn, call, autonomy).await? {
            Some(replay) => findings.check_replay(call, &replay),
            None => bail!("the daemon refused the keyed retry of call {}", call.index),
        }
    }
    Ok(())
}
