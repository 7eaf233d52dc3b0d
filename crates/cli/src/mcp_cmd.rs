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
use openphone_server::{HELLO_KEY, MCP_TOKEN_FILE, SOCKET_FILE};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::data_dir::DataDir;

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
        /// to 5 s for it.
        #[arg(long)]
        autostart: bool,
    },
    /// Print the default MCP runtime's token (`Authorization: Bearer <token>` on `/mcp`).
    Token {
        #[command(flatten)]
        data_dir: DataDir,
    },
    /// Print ready-to-paste MCP configuration for a host.
    Config {
        /// The host: claude-desktop, cursor, codex (stdio) or http (Streamable HTTP clients).
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
}

pub fn run(cmd: McpCommand) -> Result<ExitCode> {
    match cmd {
        McpCommand::Serve {
            data_dir,
            token_file,
            autostart,
        } => serve(&data_dir.resolve()?, token_file.as_deref(), autostart),
        McpCommand::Token { data_dir } => {
            let dir = data_dir.resolve()?;
            println!("{}", read_token(&dir, None)?);
            Ok(ExitCode::SUCCESS)
        }
        McpCommand::Config { host, data_dir } => {
            println!("{}", host_config(host, &data_dir.resolve()?)?);
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
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "no MCP token at {} (start the daemon once with `openphone serve`; it creates it)",
            path.display()
        )
    })?;
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
            let endpoint = std::fs::read_to_string(data_dir.join(openphone_server::ENDPOINT_FILE))
                .ok()
                .and_then(|t| serde_json::from_str::<openphone_server::EndpointInfo>(&t).ok())
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

fn serve(data_dir: &Path, token_file: Option<&Path>, autostart: bool) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let outcome = runtime.block_on(async {
        match connect(data_dir, token_file, autostart).await {
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

async fn connect(
    data_dir: &Path,
    token_file: Option<&Path>,
    autostart: bool,
) -> Result<BufReader<UnixStream>, Unavailable> {
    let token = read_token(data_dir, token_file).map_err(|e| Unavailable(format!("{e:#}")));
    let socket = data_dir.join(SOCKET_FILE);
    let stream = match UnixStream::connect(&socket).await {
        Err(first) if autostart => {
            start_daemon(data_dir).map_err(|e| Unavailable(format!("{e:#}")))?;
            // Retry every 100 ms for up to 5 s; the last refusal is the one reported.
            let mut last = first;
            let retry = async {
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    match UnixStream::connect(&socket).await {
                        Ok(s) => return s,
                        Err(e) => last = e,
                    }
                }
            };
            match tokio::time::timeout(Duration::from_secs(5), retry).await {
                Ok(s) => Ok(s),
                Err(_) => Err(last),
            }
        }
        other => other,
    };
    let stream = stream.map_err(|e| {
        Unavailable(format!(
            "no daemon answers at {} ({e}); start it with `openphone serve --data-dir {}`",
            socket.display(),
            data_dir.display()
        ))
    })?;
    // The token is read after connecting only so a missing token names the better fix.
    let token = token?;
    let mut stream = BufReader::new(stream);
    let hello = json!({HELLO_KEY: {"token": token}});
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
    let reply: Value = serde_json::from_str(line.trim()).unwrap_or(Value::Null);
    match reply.get(HELLO_KEY).and_then(Value::as_str) {
        Some("ok") => Ok(stream),
        _ => Err(Unavailable(format!(
            "the daemon refused the MCP token: {}",
            reply
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no reason given")
        ))),
    }
}

fn start_daemon(data_dir: &Path) -> Result<()> {
    let exe = std::env::current_exe().context("locating the openphone binary")?;
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(data_dir.join("daemon.log"))
        .context("opening daemon.log")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group: the host stopping this front end does not stop the daemon.
        cmd.process_group(0);
    }
    cmd.spawn()
        .map(|_| ())
        .map_err(|e| anyhow!("starting `openphone serve`: {e}"))
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
