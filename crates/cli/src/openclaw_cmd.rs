//! `openphone openclaw status | pair | unpair | tools` (`docs/openclaw.md`).
//!
//! `status` and `pair` ask the running daemon (`runtime.list`) for the adapter's status line
//! and print the next step with the exact OpenClaw command; `pair` waits until the phone is
//! `ready` (or the time is up). `tools` derives the declared surface from a config file, offline,
//! with the gateway command that allowlists it. `unpair` forgets the device identity and tokens
//! (daemon stopped), so the next start is a new device.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use openphone_protocol::endpoint::{RuntimeList, RuntimeListParams};

use crate::client::DaemonClient;
use crate::client_cmd::{block_on, print_json};
use crate::data_dir::DataDir;

#[derive(Debug, Subcommand)]
pub enum OpenclawCommand {
    /// The adapter's status (`connecting`, `pairing_pending <id>`, `connected_unapproved`,
    /// `ready`, `auth_failed: …`, `offline: …`) and the next step.
    Status {
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print the pairing request and the exact OpenClaw command that approves it, then wait
    /// until the phone is ready.
    Pair {
        #[command(flatten)]
        data_dir: DataDir,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 300)]
        timeout_secs: u64,
    },
    /// Forget this phone's OpenClaw identity and device tokens (stop the daemon first); the
    /// next start pairs as a new device.
    Unpair {
        #[command(flatten)]
        data_dir: DataDir,
    },
    /// The commands and tools this phone publishes to the gateway under a config file, and the
    /// gateway command that allowlists them (offline).
    Tools {
        /// The daemon's config file (with an `[openclaw]` table).
        #[arg(long)]
        config: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: OpenclawCommand) -> Result<ExitCode> {
    match cmd {
        OpenclawCommand::Status { data_dir, json } => {
            let dir = data_dir.resolve()?;
            block_on(async {
                let line = status_line(&dir).await?;
                if json {
                    print_json(&serde_json::json!({"runtime": "openclaw", "status": line}))?;
                } else {
                    println!("openclaw: {line}");
                    if let Some(step) = next_step(&line) {
                        println!("next: {step}");
                    }
                }
                Ok(if line == "ready" {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                })
            })
        }
        OpenclawCommand::Pair {
            data_dir,
            timeout_secs,
        } => {
            let dir = data_dir.resolve()?;
            block_on(async {
                let mut shown = String::new();
                let waited = async {
                    loop {
                        let line = status_line(&dir).await?;
                        if line != shown {
                            println!("openclaw: {line}");
                            if let Some(step) = next_step(&line) {
                                println!("next: {step}");
                            }
                            shown = line.clone();
                        }
                        if line == "ready" {
                            return Ok::<_, anyhow::Error>(ExitCode::SUCCESS);
                        }
                        if line.starts_with("auth_failed") || line.starts_with("stopped") {
                            return Ok(ExitCode::from(1));
                        }
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                };
                match tokio::time::timeout(Duration::from_secs(timeout_secs), waited).await {
                    Ok(code) => code,
                    Err(_) => {
                        eprintln!("not ready within {timeout_secs} s");
                        Ok(ExitCode::from(1))
                    }
                }
            })
        }
        OpenclawCommand::Unpair { data_dir } => {
            let dir = data_dir.resolve()?;
            if dir.join("endpoint.json").exists() {
                bail!(
                    "a daemon seems to serve {} (endpoint.json exists): stop it first",
                    dir.display()
                );
            }
            let identity = openphone_openclaw::DeviceIdentity::load(&dir)?;
            let tokens = openphone_openclaw::TokenStore::new(&dir).clear()?;
            let key = openphone_openclaw::DeviceIdentity::path(&dir);
            match identity {
                Some(identity) => {
                    std::fs::remove_file(&key)
                        .with_context(|| format!("removing {}", key.display()))?;
                    println!(
                        "forgot device {} and {tokens} device token(s); remove it on the \
                         gateway too: openclaw devices remove {}",
                        identity.device_id(),
                        identity.device_id()
                    );
                }
                None => println!("no OpenClaw identity in {}", dir.display()),
            }
            Ok(ExitCode::SUCCESS)
        }
        OpenclawCommand::Tools { config, json } => {
            let cfg = openphone_server::config::Config::load(&config)?;
            let Some(table) = cfg.openclaw.as_ref() else {
                bail!("{} has no [openclaw] table", config.display());
            };
            let registry = openphone_protocol::Registry::embedded()
                .map_err(|e| anyhow::anyhow!("the embedded manifests do not load: {e}"))?;
            let caller = openphone_policy::Caller::remote(
                openphone_openclaw::OPENCLAW,
                openphone_policy::Transport::Openclaw,
                "openclaw-gateway",
            )
            .with_authorisation(table.authorisation()?);
            // The simulated phone supports every manifest command; a real device narrows it.
            let surface = openphone_openclaw::CommandSurface::new(
                registry,
                &caller,
                &cfg.tool_policy,
                |_| true,
            );
            if json {
                let tools: Vec<_> = surface
                    .tools()
                    .iter()
                    .map(|t| serde_json::json!({"command": t.command, "tool": t.name, "mutating": t.mutating}))
                    .collect();
                print_json(&serde_json::json!({
                    "commands": surface.commands(),
                    "tools": tools,
                    "allow": surface.allow_command(),
                }))?;
            } else {
                for t in surface.tools() {
                    println!(
                        "{:<34} {:<34} {}",
                        t.command,
                        t.name,
                        if t.mutating { "mutating" } else { "read" }
                    );
                }
                println!();
                println!("allowlist them on the gateway (merge with existing entries):");
                println!("  {}", surface.allow_command());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn status_line(dir: &std::path::Path) -> Result<String> {
    let mut client = DaemonClient::connect(dir).await?;
    let list = client
        .call::<RuntimeList>(RuntimeListParams::default())
        .await?;
    client.close().await;
    let Some(entry) = list
        .runtimes
        .iter()
        .find(|r| r.id == openphone_openclaw::OPENCLAW)
    else {
        bail!("the daemon has no `openclaw` runtime: add an [openclaw] table to its config");
    };
    Ok(entry
        .detail
        .clone()
        .unwrap_or_else(|| entry.status.as_str().to_owned()))
}

fn next_step(line: &str) -> Option<String> {
    if let Some(id) = line.strip_prefix("pairing_pending ") {
        return Some(format!(
            "approve this phone on the gateway: openclaw devices approve {id}"
        ));
    }
    if line == "connected_unapproved" {
        return Some(
            "approve this phone's commands on the gateway: openclaw nodes pending, then \
             openclaw nodes approve <requestId>"
                .into(),
        );
    }
    if line.starts_with("auth_failed") {
        return Some(
            "fix the [openclaw] credentials (token, token_env, password_env) and restart the \
             daemon"
                .into(),
        );
    }
    None
}
