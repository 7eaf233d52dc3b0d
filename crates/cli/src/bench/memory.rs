//! `openphone bench memory`: what the daemon holds and how often it wakes, the figures of
//! issue 34's "memory for a phone" (docs/benchmarks.md).
//!
//! It starts `openphone serve` (this binary, or `--binary`) on loopback in a fresh data
//! directory with the defaults plus a runtime `bench` and raised rate limits, then reads
//! (Linux `/proc`):
//!
//! 1. idle: the resident set after `--settle` seconds, split by mapping (the binary's own
//!    pages, shared libraries, the `[heap]`, anonymous mappings — thread stacks and malloc's
//!    other arenas — and the rest), and the threads;
//! 2. idle wake-ups: the context switches of every thread over `--wake-secs` seconds, per
//!    second, with the threads that woke;
//! 3. after `--calls` `tools.invoke` calls of `openphone.device.status` over `--connections`
//!    WebSocket connections (`openphone bench invoke`);
//! 4. after `--jobs` heartbeat jobs created through `jobs.create`, and again once the
//!    scheduler has run them (or `--jobs-wait` seconds have passed; the jobs not run yet are
//!    counted).
//!
//! The daemon is killed at the end and its data directory removed (`--keep` keeps it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use openphone_clock::Stopwatch;
use serde_json::{Value, json};

/// Options of `bench memory`.
#[derive(Debug, clap::Args)]
pub struct MemoryBench {
    /// Seconds between the daemon's start and the idle reading.
    #[arg(long, value_name = "SECS", default_value = "3", value_parser = super::positive_secs)]
    pub settle: f64,
    /// Seconds over which idle wake-ups are counted.
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = super::positive_secs)]
    pub wake_secs: f64,
    /// `tools.invoke` calls (`openphone.device.status`) before the second reading; 0 skips it.
    #[arg(long, default_value_t = 100_000)]
    pub calls: usize,
    /// Heartbeat jobs created and run before the third reading; 0 skips it.
    #[arg(long, default_value_t = 10_000)]
    pub jobs: usize,
    /// Seconds to wait, after the jobs are created, for the scheduler to run them (the
    /// reading says how many were still waiting).
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = super::positive_secs)]
    pub jobs_wait: f64,
    /// WebSocket connections the calls and job creations go over.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// The directory the daemon's data directory is made in (default: the system's temporary
    /// directory; a tmpfs makes every fsync free, which changes only the speed).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The `openphone` binary to run as the daemon (default: this one).
    #[arg(long, value_name = "FILE")]
    pub binary: Option<PathBuf>,
    /// Keep the data directory (its path is printed).
    #[arg(long)]
    pub keep: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The daemon under measurement; killed when dropped.
struct Daemon {
    child: Child,
    pid: u32,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long the daemon may take to write `endpoint.json`.
const START_TIMEOUT: Duration = Duration::from_secs(60);

pub fn memory(opts: MemoryBench) -> Result<ExitCode> {
    if opts.connections == 0 {
        bail!("--connections must be at least 1");
    }
    let binary = match &opts.binary {
        Some(path) => path.clone(),
        None => std::env::current_exe().context("finding this program's path")?,
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix("openphone-bench-memory-");
    let work = match &opts.dir {
        Some(dir) => builder.tempdir_in(dir),
        None => builder.tempdir(),
    }
    .context("making the benchmark's directory")?;
    let data = work.path().join("data");
    let token = format!("bench-{}", uuid::Uuid::new_v4().simple());
    let config = work.path().join("openphone.toml");
    std::fs::write(
        &config,
        format!(
            "[[runtimes]]\nid = \"bench\"\ntoken = \"{token}\"\ngrants = [\"safe_read\", \"private_read\"]\n\n\
             [limits]\nrate_per_sec = 1000000.0\nrate_burst = 1000000.0\n\n\
             [jobs]\nmax_jobs = {}\n",
            opts.jobs.max(200) + 100
        ),
    )
    .context("writing the benchmark's config")?;
    let log = std::fs::File::create(work.path().join("daemon.log")).context("daemon.log")?;
    let child = Command::new(&binary)
        .arg("serve")
        .arg("--data-dir")
        .arg(&data)
        .args(["--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("daemon.log")?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {} serve", binary.display()))?;
    let pid = child.id();
    let daemon = Daemon { child, pid };
    let endpoint = wait_for_endpoint(&data, work.path())?;

    let mut readings = Vec::new();
    std::thread::sleep(Duration::from_secs_f64(opts.settle));
    readings.push(reading("idle", daemon.pid)?);
    let wakeups = wake_ups(daemon.pid, Duration::from_secs_f64(opts.wake_secs))?;

    let invoke = |extra: &[&str], calls: usize| -> Result<Value> {
        let per = calls.div_ceil(opts.connections);
        let connections = opts.connections.to_string();
        let per = per.to_string();
        let out = Command::new(&binary)
            .args(["bench", "invoke", "--url", &endpoint, "--token", &token])
            .args(["--connections", &connections, "--calls", &per, "--json"])
            .args(extra)
            .stderr(Stdio::inherit())
            .output()
            .context("running openphone bench invoke")?;
        serde_json::from_slice(&out.stdout).context("reading bench invoke's JSON report")
    };
    let mut loads = Vec::new();
    if opts.calls > 0 {
        let params = r#"{"reason": "benchmark"}"#;
        let report = invoke(
            &["--tool", "openphone.device.status", "--params", params],
            opts.calls,
        )?;
        loads.push(json!({"load": "calls", "report": report}));
        readings.push(reading(&format!("after {} calls", opts.calls), daemon.pid)?);
    }
    if opts.jobs > 0 {
        let params = r#"{"title": "bench", "type": "heartbeat"}"#;
        let operator = super::read_token_file(&data.join(openphone_server::TOKEN_FILE))?;
        let per = opts.jobs.div_ceil(opts.connections).to_string();
        let connections = opts.connections.to_string();
        let out = Command::new(&binary)
            .args(["bench", "invoke", "--url", &endpoint, "--token", &operator])
            .args(["--connections", &connections, "--calls", &per, "--json"])
            .args(["--method", "jobs.create", "--params", params])
            .stderr(Stdio::inherit())
            .output()
            .context("running openphone bench invoke --method jobs.create")?;
        let report: Value =
            serde_json::from_slice(&out.stdout).context("reading bench invoke's JSON report")?;
        readings.push(reading(
            &format!("after creating {} jobs", opts.jobs),
            daemon.pid,
        )?);
        let (secs, waiting) = wait_for_jobs(&data, Duration::from_secs_f64(opts.jobs_wait))?;
        loads.push(
            json!({"load": "jobs", "report": report, "seconds_waited": secs,
                          "jobs_not_run": waiting}),
        );
        readings.push(reading(&format!("after {} jobs", opts.jobs), daemon.pid)?);
    }
    drop(daemon);
    let kept = if opts.keep { Some(work.keep()) } else { None };
    let report = json!({
        "binary": binary,
        "readings": readings,
        "idle_wakeups": wakeups,
        "loads": loads,
        "kept": kept,
    });
    if opts.json {
        crate::output::print_json(&report)?;
    } else {
        print_text(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// Waits for the daemon's `endpoint.json`; its WebSocket URL.
fn wait_for_endpoint(data: &Path, work: &Path) -> Result<String> {
    let started = Stopwatch::start();
    while started.elapsed() < START_TIMEOUT {
        if let Ok(info) = super::read_endpoint(data) {
            return Ok(info.url);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = std::fs::read_to_string(work.join("daemon.log")).unwrap_or_default();
    bail!("the daemon did not start in {START_TIMEOUT:?}; its log:\n{log}")
}

/// Waits until no job is queued or running, at most `limit`; the seconds it waited and the
/// jobs not run yet.
fn wait_for_jobs(data: &Path, limit: Duration) -> Result<(f64, usize)> {
    use openphone_store::{JobFilter, JobStatus, Store};
    let started = Stopwatch::start();
    let store = Store::open_read_only(data).context("opening the daemon's store read-only")?;
    let filter = JobFilter {
        statuses: vec![
            JobStatus::Active,
            JobStatus::Queued,
            JobStatus::Running,
            JobStatus::Waiting,
        ],
        ..JobFilter::default()
    };
    loop {
        let waiting = store.list_jobs(&filter).context("listing jobs")?.len();
        if waiting == 0 || started.elapsed() >= limit {
            return Ok((started.elapsed().as_secs_f64(), waiting));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// One reading of the daemon's memory: `/proc/<pid>/status` and `/proc/<pid>/smaps`.
fn reading(label: &str, pid: u32) -> Result<Value> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status (is this Linux?)"))?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps"))
        .with_context(|| format!("reading /proc/{pid}/smaps"))?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    Ok(json!({
        "label": label,
        "rss_kib": field("VmRSS:"),
        "peak_rss_kib": field("VmHWM:"),
        "anon_kib": field("RssAnon:"),
        "file_kib": field("RssFile:"),
        "threads": field("Threads:"),
        "by_mapping_kib": by_mapping(&smaps, exe.as_deref()),
    }))
}

/// The resident KiB of `smaps` by kind of mapping, and the number of anonymous mappings.
fn by_mapping(smaps: &str, exe: Option<&Path>) -> Value {
    let mut kib: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut anon_maps = 0u64;
    let mut kind = "other";
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            // A mapping's header: range perms offset dev inode [path].
            let path = words.nth(4).unwrap_or("");
            kind = if path.is_empty() {
                anon_maps += 1;
                "anonymous (thread stacks, malloc arenas)"
            } else if path == "[heap]" {
                "heap (main arena)"
            } else if path == "[stack]" {
                "main stack"
            } else if exe.is_some_and(|e| Path::new(path) == e) {
                "binary"
            } else if path.contains(".so") {
                "shared libraries"
            } else {
                "other"
            };
        } else if first == "Rss:" {
            let value: u64 = words.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            *kib.entry(kind).or_default() += value;
        }
    }
    json!({"kib": kib, "anonymous_mappings": anon_maps})
}

/// The context switches of every thread over `window`: per second, and by thread name.
fn wake_ups(pid: u32, window: Duration) -> Result<Value> {
    let before = switches(pid)?;
    let started = Stopwatch::start();
    std::thread::sleep(window);
    let after = switches(pid)?;
    let secs = started.elapsed().as_secs_f64();
    let mut by_thread: BTreeMap<String, u64> = BTreeMap::new();
    let mut total = 0u64;
    for (tid, (name, n)) in &after {
        let was = before.get(tid).map_or(0, |(_, n)| *n);
        let delta = n.saturating_sub(was);
        total += delta;
        if delta > 0 {
            *by_thread.entry(name.clone()).or_default() += delta;
        }
    }
    Ok(json!({
        "seconds": secs,
        "switches": total,
        "per_second": total as f64 / secs,
        "by_thread": by_thread,
    }))
}

/// Voluntary plus involuntary context switches per thread id, with the thread's name.
fn switches(pid: u32) -> Result<BTreeMap<u64, (String, u64)>> {
    let dir = format!("/proc/{pid}/task");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {dir}"))? {
        let Ok(entry) = entry else { continue };
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let mut name = String::new();
        let mut n = 0u64;
        for line in status.lines() {
            if let Some(v) = line.strip_prefix("Name:") {
                name = v.trim().to_owned();
            } else if let Some(v) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                n += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
        out.insert(tid, (name, n));
    }
    Ok(out)
}

/// The report as `print_text` reads it: this bench's own JSON (built above), read back through
/// types rather than by key.
#[derive(serde::Deserialize)]
struct Report {
    binary: Option<String>,
    #[serde(default)]
    readings: Vec<Reading>,
    idle_wakeups: Option<Wakeups>,
    #[serde(default)]
    loads: Vec<Load>,
    kept: Option<String>,
}

#[derive(serde::Deserialize)]
struct Reading {
    label: String,
    rss_kib: Option<u64>,
    peak_rss_kib: Option<u64>,
    anon_kib: Option<u64>,
    file_kib: Option<u64>,
    threads: Option<u64>,
    by_mapping_kib: Option<Mappings>,
}

#[derive(serde::Deserialize)]
struct Mappings {
    #[serde(default)]
    kib: BTreeMap<String, u64>,
    anonymous_mappings: Option<u64>,
}

#[derive(serde::Deserialize)]
struct Wakeups {
    seconds: f64,
    switches: u64,
    per_second: f64,
    #[serde(default)]
    by_thread: BTreeMap<String, u64>,
}

#[derive(serde::Deserialize)]
struct Load {
    load: String,
    report: LoadReport,
    seconds_waited: Option<f64>,
    jobs_not_run: Option<u64>,
}

#[derive(serde::Deserialize)]
struct LoadReport {
    calls: Option<u64>,
    calls_per_sec: Option<f64>,
    /// By error code (`bench invoke`'s report), printed as it is.
    #[serde(default)]
    errors: Value,
}

fn print_text(report: &Value) {
    let report: Report = match serde_json::from_value(report.clone()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench memory: cannot print the report as text ({e}); use --json");
            return;
        }
    };
    let mb = |v: Option<u64>| v.map_or("?".to_owned(), |k| format!("{:.1} MB", k as f64 / 1024.0));
    let num = |v: Option<u64>| v.map_or("?".to_owned(), |n| n.to_string());
    println!("daemon: {}", report.binary.as_deref().unwrap_or("?"));
    for r in &report.readings {
        println!(
            "{:<22} RSS {:>9}  peak {:>9}  anon {:>9}  file {:>9}  threads {}",
            r.label,
            mb(r.rss_kib),
            mb(r.peak_rss_kib),
            mb(r.anon_kib),
            mb(r.file_kib),
            num(r.threads),
        );
        if let Some(m) = &r.by_mapping_kib {
            for (kind, kib) in &m.kib {
                println!("    {kind:<42} {:>9}", mb(Some(*kib)));
            }
            println!("    anonymous mappings: {}", num(m.anonymous_mappings));
        }
    }
    if let Some(w) = &report.idle_wakeups {
        println!(
            "idle wake-ups: {:.2}/s ({} context switches in {:.1} s)",
            w.per_second, w.switches, w.seconds,
        );
        for (name, n) in &w.by_thread {
            println!("    {name:<20} {n}");
        }
    }
    for load in &report.loads {
        let r = &load.report;
        println!(
            "load {}: {} calls, {:.0}/s, errors {}{}",
            load.load,
            num(r.calls),
            r.calls_per_sec.unwrap_or(0.0),
            r.errors,
            load.seconds_waited
                .map(|s| format!(
                    "; {} not run yet {s:.0} s after the last was created",
                    num(load.jobs_not_run)
                ))
                .unwrap_or_default(),
        );
    }
    if let Some(dir) = &report.kept {
        println!("data directory kept: {dir}");
    }
}
