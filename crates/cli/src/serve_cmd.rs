//! `openphone serve`: the daemon.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use clap::{Args, ValueEnum};
use openphone_server::{
    ConfigLocation, Daemon, DaemonError, DaemonOptions, DeviceChoice, EndpointInfo,
};

use crate::data_dir::DataDir;

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    data_dir: DataDir,
    /// Address to listen on (loopback unless the config sets `insecure_listen = true`).
    #[arg(
        long,
        value_name = "ADDR",
        env = "OPENPHONE_LISTEN",
        default_value = "127.0.0.1:7788"
    )]
    listen: SocketAddr,
    /// The phone: `sim` (the simulated phone, default scenario), `sim:<scenario.json>`, `adb`
    /// (the only Android phone attached, or $ANDROID_SERIAL) or `adb:<serial>` (a serial from
    /// `adb devices`, or HOST:PORT of a phone on the network). Overrides the config's
    /// `[device]`/`[[devices]]`; without it the config decides (a simulated phone if neither).
    #[arg(long, value_name = "DEVICE")]
    device: Option<String>,
    /// Configuration file (TOML; see docs/openphone.example.toml). Default: $OPENPHONE_CONFIG,
    /// else $XDG_CONFIG_HOME/openphone/config.toml (~/.config/openphone/config.toml) when it
    /// exists; `openphone config path` shows which file is used.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Human)]
    log_format: LogFormat,
    /// Also write an access line on stderr for each audit record of a tool call
    /// (`event="runtime_tool"`: runtime, session, request, tool, risk, status, caller). Off by
    /// default; the audit log always has the call. The config key `[log] access = true` does
    /// the same.
    #[arg(long)]
    access_log: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

/// What the daemon writes on stderr: everything at `info` and above, except rmcp's chatter and,
/// unless `access` is set, the per-call access lines.
fn log_filter(access: bool) -> tracing_subscriber::filter::Targets {
    use tracing_subscriber::filter::LevelFilter;
    // rmcp logs a connecting MCP client's whole `initialize` (its self-declared `clientInfo`,
    // of any size) at INFO: only its warnings and errors are kept. The daemon logs the client
    // itself, escaped and cut (`openphone_protocol::log_value`).
    tracing_subscriber::filter::Targets::new()
        .with_target("rmcp", tracing::Level::WARN)
        .with_target(
            openphone_core::ACCESS_LOG_TARGET,
            if access {
                LevelFilter::INFO
            } else {
                LevelFilter::OFF
            },
        )
        .with_default(tracing::Level::INFO)
}

fn init_logging(format: LogFormat, access: bool) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = log_filter(access);
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        LogFormat::Human => builder.finish().with(filter).try_init(),
        LogFormat::Json => builder.json().finish().with(filter).try_init(),
    };
}

pub fn run(args: ServeArgs) -> Result<ExitCode> {
    // Absolute, so `endpoint.json` names sockets a client in another directory can reach.
    let data_dir = args.data_dir.resolve()?;
    let data_dir = std::path::absolute(&data_dir)
        .with_context(|| format!("making {} absolute", data_dir.display()))?;
    let device = match &args.device {
        Some(raw) => DeviceChoice::parse(raw).map_err(|e| anyhow!(e))?,
        None => DeviceChoice::Config,
    };
    let location = ConfigLocation::resolve(args.config.as_deref());
    let config = location.load()?;
    init_logging(args.log_format, args.access_log || config.log.access);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let started = openphone_clock::Stopwatch::start();
        let daemon = match Daemon::start(DaemonOptions {
            data_dir: data_dir.clone(),
            listen: args.listen,
            device,
            config,
        })
        .await
        {
            Ok(daemon) => daemon,
            Err(DaemonError::Bind { addr, source })
                if source.kind() == std::io::ErrorKind::AddrInUse =>
            {
                return Err(anyhow!(port_in_use(addr, &source, &data_dir)));
            }
            Err(e) => return Err(e.into()),
        };
        tracing::info!(url = %daemon.url(), data_dir = %data_dir.display(),
            ready_ms = started.elapsed().as_millis() as u64, "ready");
        println!(
            "openphone serve: ready on {} (data dir {}, pid {})",
            daemon.url(),
            data_dir.display(),
            std::process::id()
        );
        println!("openphone serve: {}", location.describe());
        // What each phone is, and whether it answered at start: an Android phone that did
        // not is kept (its calls answer the device's error with the fix until it is back).
        for note in daemon.phone_notes() {
            println!("openphone serve: {note}");
        }
        wait_for_signal().await?;
        tracing::info!("shutting down");
        daemon.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(unix)]
async fn wait_for_signal() -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

#[cfg(not(unix))]
async fn wait_for_signal() -> Result<()> {
    tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")
}

/// The message for a port another process holds (issue 12): the OS error once, who holds the
/// port as far as can be known, and how to pick another.
fn port_in_use(addr: SocketAddr, error: &std::io::Error, ours: &Path) -> String {
    let mut lines = vec![format!("cannot listen on {addr}: {error}")];
    match port_holder(addr, ours) {
        Holder::Daemon { data_dir, info } => {
            lines.push(format!(
                "  it is held by the OpenPhone daemon of {} (pid {}, {})",
                data_dir.display(),
                info.pid,
                info.url
            ));
            lines.push(format!(
                "  to use that daemon, pass its data directory: `openphone status --data-dir {}`",
                data_dir.display()
            ));
        }
        Holder::Process { pid, command } => {
            lines.push(format!("  it is held by pid {pid}: {command}"));
        }
        Holder::Unknown(checked) => lines.push(format!(
            "  which process holds it cannot be known from here: it is not the OpenPhone daemon \
             of {checked}{}",
            if Path::new("/proc/net/tcp").exists() {
                ", nor a process of this user (perhaps another user's)"
            } else {
                " (other processes cannot be looked up on this system)"
            }
        )),
    }
    lines.push(format!(
        "  to run this daemon beside it, listen elsewhere: `openphone serve --listen {}:{}` \
         (or `{}:0` for any free port; the CLI and `mcp serve` find it through endpoint.json; \
         also OPENPHONE_LISTEN)",
        addr.ip(),
        addr.port().wrapping_add(1).max(1024),
        addr.ip()
    ));
    lines.join("\n")
}

/// Who holds a port, as far as can be known.
enum Holder {
    /// An OpenPhone daemon whose `endpoint.json` names the port.
    Daemon {
        data_dir: PathBuf,
        info: EndpointInfo,
    },
    /// A process of this user listening there (Linux: `/proc`).
    Process { pid: u32, command: String },
    /// Not known; the data directories that were checked.
    Unknown(String),
}

/// Looks for the holder of `addr`: first an OpenPhone daemon of another data directory we can
/// name (the default one and `OPENPHONE_DATA_DIR`'s; never `ours`, which this process holds
/// locked, so no other daemon serves it), whose `endpoint.json` names the port and whose pid
/// still lives; then, on Linux, the process of this user whose socket listens on the port.
/// Other users' processes and data directories elsewhere cannot be seen.
fn port_holder(addr: SocketAddr, ours: &Path) -> Holder {
    let mut candidates: Vec<PathBuf> = crate::data_dir::default_location().into_iter().collect();
    if let Some(env) = std::env::var_os("OPENPHONE_DATA_DIR").filter(|v| !v.is_empty()) {
        candidates.push(PathBuf::from(env));
    }
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    candidates.retain(|dir| !same(dir, ours));
    candidates.dedup();
    for dir in &candidates {
        let Ok(text) = std::fs::read_to_string(dir.join(openphone_server::ENDPOINT_FILE)) else {
            continue;
        };
        let Ok(info) = serde_json::from_str::<EndpointInfo>(&text) else {
            continue;
        };
        let port = format!(":{}/", addr.port());
        if info.url.contains(&port) && process_alive(info.pid) {
            return Holder::Daemon {
                data_dir: dir.clone(),
                info,
            };
        }
    }
    if let Some((pid, command)) = listening_process(addr.port()) {
        return Holder::Process { pid, command };
    }
    let checked: Vec<String> = candidates.iter().map(|d| d.display().to_string()).collect();
    Holder::Unknown(if checked.is_empty() {
        "a known data directory".to_owned()
    } else {
        checked.join(" or ")
    })
}

/// Whether `pid` still runs (Linux: `/proc/<pid>`; elsewhere assumed, as `endpoint.json` is
/// removed on a clean shutdown).
fn process_alive(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.is_dir() || proc.join(pid.to_string()).exists()
}

/// The pid and command line of this user's process listening on TCP `port` (Linux only: the
/// socket's inode in `/proc/net/tcp{,6}`, then the process holding it among `/proc/*/fd`).
fn listening_process(port: u16) -> Option<(u32, String)> {
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|line| listening_inode(line, port))
                .collect::<Vec<_>>()
        })
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| wanted.iter().any(|w| target.as_os_str() == w.as_str()))
        });
        if holds {
            let raw = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let command = raw
                .split(|b| *b == 0)
                .filter(|part| !part.is_empty())
                .map(|part| String::from_utf8_lossy(part).into_owned())
                .collect::<Vec<_>>()
                .join(" ");
            return Some((pid, format!("`{command}`")));
        }
    }
    None
}

/// The socket inode of one `/proc/net/tcp` line when it listens on `port`
/// (`sl local_address rem_address st … inode`, the port in hex, state `0A` = LISTEN).
fn listening_inode(line: &str, port: u16) -> Option<String> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let local_port = fields.get(1)?.rsplit_once(':')?.1;
    let listening = *fields.get(3)? == "0A";
    (listening && u16::from_str_radix(local_port, 16).ok()? == port)
        .then(|| fields.get(9).map(|inode| (*inode).to_owned()))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    #[test]
    fn access_lines_are_written_only_when_asked_for() {
        let access = openphone_core::ACCESS_LOG_TARGET;
        let quiet = log_filter(false);
        assert!(!quiet.would_enable(access, &Level::INFO));
        assert!(!quiet.would_enable(access, &Level::ERROR));
        assert!(quiet.would_enable("openphone_server::daemon", &Level::INFO));
        assert!(quiet.would_enable("openphone", &Level::INFO));
        assert!(!quiet.would_enable("rmcp::service", &Level::INFO));
        assert!(quiet.would_enable("rmcp::service", &Level::WARN));
        assert!(!quiet.would_enable("openphone_core::bridge", &Level::DEBUG));

        let loud = log_filter(true);
        assert!(loud.would_enable(access, &Level::INFO));
        assert!(!loud.would_enable(access, &Level::DEBUG));
        assert!(loud.would_enable("openphone_server::daemon", &Level::INFO));
        assert!(!loud.would_enable("rmcp::service", &Level::INFO));
    }
}
