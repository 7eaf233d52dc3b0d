//! `openphone mcp …`: the stdio MCP server a host launches (a pipe into the daemon's
//! `mcp.sock`), the default MCP token, and ready-to-paste host configuration.
//!
//! `mcp serve` holds no state: every MCP message goes to the daemon, which owns confirmations,
//! results and audit, so a host may kill and respawn it between calls and lose nothing. When
//! the daemon is unreachable (and `--autostart` did not help) it still answers MCP on stdio —
//! the tool list from the bundled manifest, and `daemon_unavailable` with the fix for every
//! call — because hosts show a crashed server only as an opaque failure. stdout carries MCP
//! only; diagnostics go to stderr.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Subcommand, ValueEnum};
use openphone_protocol::{McpHello, McpHelloAnswer, McpHelloReply};
use openphone_server::{ENDPOINT_FILE, EndpointInfo, MCP_TOKEN_FILE, SOCKET_FILE};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::data_dir::DataDir;

#[path = "mcp_hermes.rs"]
mod hermes;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Serve MCP on stdin/stdout for a host (Claude Desktop, Codex, Cursor, …), through the
    /// running daemon. This is the command to put in a host's MCP configuration.
    Serve {
        #[command(flatten)]
        data_dir: DataDir,
        /// Read the runtime token from this file instead of the data directory's `mcp.token`
        /// (for a runtime of its own configured in `[[runtimes]]`). `OPENPHONE_MCP_TOKEN`
        /// overrides both.
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        /// Start `openphone serve` for the data directory when no daemon answers, then wait up
        /// to 10 s for it to be ready (its log: `daemon.log` in the data directory).
        #[arg(long)]
        autostart: bool,
        /// The config file for the daemon `--autostart` starts (default: as `openphone config
        /// path` resolves it: $OPENPHONE_CONFIG, else ~/.config/openphone/config.toml).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The address for the daemon `--autostart` starts (default: $OPENPHONE_LISTEN, else
        /// 127.0.0.1:7788).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
    },
    /// Print the default MCP runtime's token (`Authorization: Bearer <token>` on `/mcp`).
    Token {
        #[command(flatten)]
        data_dir: DataDir,
    },
    /// Print ready-to-paste MCP configuration for a host.
    Config {
        /// The host: claude-desktop, cursor, codex, hermes (stdio), http (Streamable HTTP
        /// clients) or hermes-http. The hermes entries carry the token (the default runtime's,
        /// or `OPENPHONE_MCP_TOKEN` when set).
        host: Host,
        #[command(flatten)]
        data_dir: DataDir,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Host {
    ClaudeDesktop,
    Cursor,
    Codex,
    Http,
    /// Hermes Agent's `config.yaml`, stdio (the token in `env:`, no autostart).
    Hermes,
    /// Hermes Agent's `config.yaml`, Streamable HTTP to the running daemon's address.
    HermesHttp,
}

pub fn run(cmd: McpCommand) -> Result<ExitCode> {
    match cmd {
        McpCommand::Serve {
            data_dir,
            token_file,
            autostart,
            config,
            listen,
        } => {
            let start = autostart.then(|| Autostart {
                config: openphone_server::ConfigLocation::resolve(config.as_deref()).path,
                listen,
            });
            serve(&data_dir.resolve()?, token_file.as_deref(), start)
        }
        McpCommand::Token { data_dir } => {
            let dir = data_dir.resolve()?;
            println!("{}", read_token(&dir, None)?);
            Ok(ExitCode::SUCCESS)
        }
        McpCommand::Config { host, data_dir } => {
            // A host starts the server from a directory of its own: the path must be absolute.
            let dir = data_dir.resolve()?;
            let dir = std::path::absolute(&dir)
                .with_context(|| format!("making {} absolute", dir.display()))?;
            println!("{}", host_config(host, &dir)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn read_token(data_dir: &Path, token_file: Option<&Path>) -> Result<String> {
    if let Some(t) = std::env::var("OPENPHONE_MCP_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        return Ok(t.trim().to_owned());
    }
    let path = token_file.map_or_else(|| data_dir.join(MCP_TOKEN_FILE), Path::to_path_buf);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && token_file.is_none() => bail!(
            "no MCP token at {} yet: start the daemon once with `openphone serve --data-dir {}` \
             (it creates it)",
            path.display(),
            data_dir.display()
        ),
        Err(e) => bail!("cannot read the MCP token at {}: {e}", path.display()),
    };
    let token = text.trim();
    if token.is_empty() {
        bail!("{} is empty", path.display());
    }
    Ok(token.to_owned())
}

fn host_config(host: Host, data_dir: &Path) -> Result<String> {
    let exe = std::env::current_exe().context("locating the openphone binary")?;
    let exe = exe.display().to_string();
    let dir = data_dir.display().to_string();
    let args = json!(["mcp", "serve", "--autostart", "--data-dir", dir]);
    Ok(match host {
        Host::Hermes => {
            let url = endpoint_info(data_dir).and_then(|info| info.mcp_url);
            hermes::stdio_entry(&exe, data_dir, &read_token(data_dir, None)?, url.as_deref())
        }
        Host::HermesHttp => {
            let url = endpoint_info(data_dir)
                .and_then(|info| info.mcp_url)
                .ok_or_else(|| {
                    anyhow!(
                        "no running daemon for {}: start it with `openphone serve --data-dir \
                         {}`, then run this again (the entry needs its address)",
                        data_dir.display(),
                        data_dir.display()
                    )
                })?;
            hermes::http_entry(&url, &read_token(data_dir, None)?)
        }
        Host::ClaudeDesktop | Host::Cursor => {
            serde_json::to_string_pretty(&json!({"mcpServers": {"openphone": {
                "command": exe, "args": args}}}))?
        }
        Host::Codex => format!(
            "[mcp_servers.openphone]\ncommand = {}\nargs = {}\n",
            Value::String(exe),
            args
        ),
        Host::Http => {
            let endpoint = endpoint_info(data_dir)
                .and_then(|info| info.mcp_url)
                .unwrap_or_else(|| "http://127.0.0.1:7788/mcp".into());
            serde_json::to_string_pretty(&json!({"mcpServers": {"openphone": {
                "type": "http", "url": endpoint,
                "headers": {"Authorization": "Bearer <the output of `openphone mcp token`>"}}}}))?
        }
    })
}

/// Why the pipe could not be set up; served to the host as `daemon_unavailable`.
struct Unavailable(String);

/// How `--autostart` starts the daemon: the config file resolved here (passed as `--config`,
/// so the daemon reads the file this command resolved) and the listen address.
struct Autostart {
    config: Option<PathBuf>,
    listen: Option<String>,
}

fn serve(
    data_dir: &Path,
    token_file: Option<&Path>,
    autostart: Option<Autostart>,
) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let outcome = runtime.block_on(async {
        match connect(data_dir, token_file, autostart.as_ref()).await {
            Ok(stream) => pipe(stream).await,
            Err(Unavailable(reason)) => {
                eprintln!("openphone mcp: {reason}; answering every call with daemon_unavailable");
                openphone_mcp::serve_unavailable(reason, tokio::io::stdin(), tokio::io::stdout())
                    .await;
                Ok(())
            }
        }
    });
    // stdin is read on a blocking thread that cannot be interrupted: leave without waiting.
    runtime.shutdown_timeout(Duration::from_millis(100));
    outcome.map(|()| ExitCode::SUCCESS)
}

/// How long `--autostart` waits for the daemon it started: 200 polls 50 ms apart (counted, so
/// no clock is read). A fresh daemon is ready in well under a second.
const AUTOSTART_POLLS: u32 = 200;
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// After the started daemon exited: polls left for another daemon of the same data directory
/// (one that won its lock, e.g. a second host launching at the same moment) to come up.
const EXITED_GRACE_POLLS: u32 = 20;

async fn connect(
    data_dir: &Path,
    token_file: Option<&Path>,
    autostart: Option<&Autostart>,
) -> Result<BufReader<UnixStream>, Unavailable> {
    let socket = data_dir.join(SOCKET_FILE);
    let stream = match (UnixStream::connect(&socket).await, autostart) {
        (Ok(stream), _) => stream,
        (Err(_), Some(start)) => autostart_daemon(data_dir, &socket, start).await?,
        (Err(e), None) => return Err(Unavailable(no_daemon(data_dir, &socket, &e))),
    };
    // Read only once a daemon answers: it writes `mcp.token` before it binds the socket, so a
    // daemon started a moment ago has written it by now (issue 12).
    let token = read_token(data_dir, token_file).map_err(|e| Unavailable(format!("{e:#}")))?;
    hello(stream, &token).await
}

/// Why nothing answers on `socket`, with the fix.
fn no_daemon(data_dir: &Path, socket: &Path, error: &std::io::Error) -> String {
    if let Some(reason) = no_mcp(data_dir, None) {
        return reason;
    }
    format!(
        "no daemon answers at {} ({error}); start it with `openphone serve --data-dir {}`, or \
         pass --autostart",
        socket.display(),
        data_dir.display()
    )
}

/// When the daemon `endpoint.json` names (other than `except`) serves no MCP: why.
fn no_mcp(data_dir: &Path, except: Option<u32>) -> Option<String> {
    let info = endpoint_info(data_dir)?;
    (info.mcp_socket.is_none() && Some(info.pid) != except).then(|| {
        format!(
            "the daemon of {} (pid {}) does not serve MCP: `[mcp] enabled = false` in its \
             config, or it listens on a non-loopback address",
            data_dir.display(),
            info.pid
        )
    })
}

/// `endpoint.json` of `data_dir`, when there is one that parses.
fn endpoint_info(data_dir: &Path) -> Option<EndpointInfo> {
    let text = std::fs::read_to_string(data_dir.join(ENDPOINT_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Starts `openphone serve` for `data_dir` and waits until it is ready: its `endpoint.json`
/// (written last, after `mcp.token` and the socket) names it, and its socket accepts. When it
/// exits first (the port is taken, the config is bad, another daemon won the data directory),
/// the error quotes what it logged.
async fn autostart_daemon(
    data_dir: &Path,
    socket: &Path,
    start: &Autostart,
) -> Result<UnixStream, Unavailable> {
    let mut started = start_daemon(data_dir, start).map_err(|e| Unavailable(format!("{e:#}")))?;
    let pid = started.child.id();
    let mut exited: Option<(std::process::ExitStatus, u32)> = None;
    for _ in 0..AUTOSTART_POLLS {
        let ours = endpoint_info(data_dir)
            // After our daemon exited, a daemon that won the lock is as good.
            .is_some_and(|info| info.pid == pid || exited.is_some());
        if ours && let Ok(stream) = UnixStream::connect(socket).await {
            return Ok(stream);
        }
        exited = match exited {
            None => started.child.try_wait().ok().flatten().map(|s| (s, 0)),
            Some((status, polls)) if polls >= EXITED_GRACE_POLLS => {
                // It lost the data directory to a daemon that serves no MCP: say that.
                if let Some(reason) = no_mcp(data_dir, Some(pid)) {
                    return Err(Unavailable(reason));
                }
                return Err(Unavailable(format!(
                    "`openphone serve --data-dir {}` (started by --autostart) exited ({status}) \
                     before it was ready{}",
                    data_dir.display(),
                    started.log_tail()
                )));
            }
            Some((status, polls)) => Some((status, polls + 1)),
        };
        tokio::time::sleep(POLL_INTERVAL).await;
    }
    Err(Unavailable(format!(
        "`openphone serve --data-dir {}` (started by --autostart, pid {pid}) was not ready \
         within {} s{}",
        data_dir.display(),
        u64::from(AUTOSTART_POLLS) * POLL_INTERVAL.as_millis() as u64 / 1000,
        started.log_tail()
    )))
}

/// Says the hello line with `token` and waits for the daemon's answer.
async fn hello(stream: UnixStream, token: &str) -> Result<BufReader<UnixStream>, Unavailable> {
    let mut stream = BufReader::new(stream);
    let hello = serde_json::to_string(&McpHello::new(token)).unwrap_or_default();
    let answer = async {
        stream
            .get_mut()
            .write_all(format!("{hello}\n").as_bytes())
            .await?;
        let mut line = String::new();
        stream.read_line(&mut line).await?;
        Ok::<_, std::io::Error>(line)
    };
    let line = match tokio::time::timeout(Duration::from_secs(10), answer).await {
        Ok(Ok(line)) => line,
        Ok(Err(e)) => {
            return Err(Unavailable(format!(
                "the daemon closed the MCP socket: {e}"
            )));
        }
        Err(_) => {
            return Err(Unavailable(
                "the daemon did not answer the MCP hello".into(),
            ));
        }
    };
    let reply: Option<McpHelloReply> = serde_json::from_str(line.trim()).ok();
    match reply {
        Some(McpHelloReply {
            answer: McpHelloAnswer::Ok,
            ..
        }) => Ok(stream),
        _ => Err(Unavailable(format!(
            "the daemon refused the MCP token: {}",
            reply
                .as_ref()
                .and_then(|r| r.message.as_deref())
                .unwrap_or("no reason given")
        ))),
    }
}

/// A daemon `--autostart` started, and where its log begins.
struct Started {
    child: std::process::Child,
    log: PathBuf,
    log_from: u64,
}

impl Started {
    /// `: <its last log lines> (log: <path>)`, or nothing when it logged nothing.
    fn log_tail(&self) -> String {
        let text = std::fs::read(&self.log).unwrap_or_default();
        let from = usize::try_from(self.log_from).unwrap_or(usize::MAX);
        let own = String::from_utf8_lossy(text.get(from..).unwrap_or_default()).into_owned();
        let lines: Vec<&str> = own.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
        if tail.is_empty() {
            String::new()
        } else {
            format!(": {tail} (log: {})", self.log.display())
        }
    }
}

fn start_daemon(data_dir: &Path, start: &Autostart) -> Result<Started> {
    let exe = std::env::current_exe().context("locating the openphone binary")?;
    // The user's alone, as the daemon keeps it: the directory 0700, the log 0600.
    let mut dir = std::fs::DirBuilder::new();
    dir.recursive(true);
    let mut log = std::fs::OpenOptions::new();
    log.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        dir.mode(0o700);
        log.mode(0o600);
    }
    dir.create(data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let log_path = data_dir.join("daemon.log");
    let log = log.open(&log_path).context("opening daemon.log")?;
    let log_from = log.metadata().map(|m| m.len()).unwrap_or(0);
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("serve").arg("--data-dir").arg(data_dir);
    if let Some(config) = &start.config {
        cmd.arg("--config").arg(config);
    }
    if let Some(listen) = &start.listen {
        cmd.arg("--listen").arg(listen);
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group: the host stopping this front end does not stop the daemon.
        cmd.process_group(0);
    }
    let child = cmd
        .spawn()
        .map_err(|e| anyhow!("starting `openphone serve`: {e}"))?;
    Ok(Started {
        child,
        log: log_path,
        log_from,
    })
}

/// Copies stdin to the daemon and the daemon to stdout until the daemon closes the connection
/// (after stdin's end, within 2 s).
async fn pipe(stream: BufReader<UnixStream>) -> Result<()> {
    let buffered = stream.buffer().to_vec();
    let (read, mut write) = stream.into_inner().into_split();
    let mut stdout = tokio::io::stdout();
    if !buffered.is_empty() {
        stdout.write_all(&buffered).await?;
        stdout.flush().await?;
    }
    let to_daemon = async move {
        let mut stdin = tokio::io::stdin();
        let copied = tokio::io::copy(&mut stdin, &mut write).await;
        let _ = write.shutdown().await;
        copied
    };
    let from_daemon = async move {
        let mut read = read;
        let copied = tokio::io::copy(&mut read, &mut stdout).await;
        let _ = stdout.flush().await;
        copied
    };
    tokio::pin!(from_daemon);
    tokio::select! {
        r = &mut from_daemon => { r.context("reading from the daemon")?; }
        r = to_daemon => {
            r.context("reading stdin")?;
            // stdin ended: let the daemon finish what is in flight and close.
            let _ = tokio::time::timeout(Duration::from_secs(2), &mut from_daemon).await;
        }
    }
    Ok(())
}
