//! `openphone openclaw status | pair | unpair | reset-identity | tools | doctor`
//! (`docs/openclaw.md`).
//!
//! `status` and `pair` ask the running daemon (`runtime.list`) for the adapter's status line
//! and print the next step with the exact OpenClaw command; `pair` waits until the phone is
//! `ready` (or the time is up). `tools` derives the declared surface from a config file, offline,
//! with the gateway command that allowlists it. `unpair` forgets the device identity and tokens
//! (daemon stopped), so the next start is a new device; `reset-identity --yes` does the same
//! and makes the new identity at once. `doctor` lists, per declared command, whether the
//! gateway accepted it, that it needs the gateway's allowlist, and the phone policy's verdict,
//! with the exact commands that close each gap (R4.1).

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
    /// Replace this phone's OpenClaw device identity with a new one (stop the daemon first):
    /// the stored device tokens go too, and the gateway sees a new device to pair.
    ResetIdentity {
        #[command(flatten)]
        data_dir: DataDir,
        /// Confirm: the old identity cannot be brought back.
        #[arg(long)]
        yes: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Per declared command: declared, accepted by the gateway, needs the gateway's allowlist,
    /// OS permission, OpenPhone policy verdict; then the exact commands that fix each gap.
    Doctor {
        /// The daemon's config file (with an `[openclaw]` table; default: what
        /// `openphone config path` names).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The commands and tools this phone publishes to the gateway under a config file, and the
    /// gateway command that allowlists them (offline).
    Tools {
        /// The daemon's config file (with an `[openclaw]` table; default: what
        /// `openphone config path` names).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
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
        OpenclawCommand::ResetIdentity {
            data_dir,
            yes,
            json,
        } => reset_identity(&data_dir.resolve()?, yes, json),
        OpenclawCommand::Doctor {
            config,
            data_dir,
            json,
        } => doctor(config.as_deref(), &data_dir.resolve()?, json),
        OpenclawCommand::Tools { config, json } => {
            let (_, surface, _) = surface_of(config.as_deref())?;
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

/// The config file's `[openclaw]` table, the surface it declares, and the caller it runs as.
fn surface_of(
    config: Option<&std::path::Path>,
) -> Result<(
    openphone_server::config::Config,
    openphone_openclaw::CommandSurface,
    openphone_policy::Caller,
)> {
    // The same resolution as `serve`: --config, OPENPHONE_CONFIG, the XDG default.
    let location = openphone_server::ConfigLocation::resolve(config);
    if location.path.is_none() {
        bail!(
            "{}; the [openclaw] table is read from the daemon's config file",
            location.describe()
        );
    }
    let cfg = location.load()?;
    let Some(table) = cfg.openclaw.as_ref() else {
        bail!("{} has no [openclaw] table", location.describe());
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
    let surface =
        openphone_openclaw::CommandSurface::new(registry, &caller, &cfg.tool_policy, |_| true);
    Ok((cfg, surface, caller))
}

fn reset_identity(dir: &std::path::Path, yes: bool, json: bool) -> Result<ExitCode> {
    if !yes {
        bail!(
            "--yes is required: the current device identity is deleted for good and the \
             gateway will see a new device to pair"
        );
    }
    if dir.join("endpoint.json").exists() {
        bail!(
            "a daemon seems to serve {} (endpoint.json exists): stop it first",
            dir.display()
        );
    }
    let old = openphone_openclaw::DeviceIdentity::load(dir)?;
    let tokens = openphone_openclaw::TokenStore::new(dir).clear()?;
    let key = openphone_openclaw::DeviceIdentity::path(dir);
    if old.is_some() {
        std::fs::remove_file(&key).with_context(|| format!("removing {}", key.display()))?;
    }
    let _ = std::fs::remove_file(dir.join(openphone_openclaw::GATEWAY_VIEW_FILE));
    if !dir.exists() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    let new = openphone_openclaw::DeviceIdentity::load_or_create(dir)?;
    let old_id = old
        .as_ref()
        .map(openphone_openclaw::DeviceIdentity::device_id);
    let remove = old_id
        .as_ref()
        .map(|id| format!("openclaw devices remove {id}"));
    if json {
        print_json(&serde_json::json!({
            "old_device_id": old_id,
            "new_device_id": new.device_id(),
            "tokens_removed": tokens,
            "gateway_cleanup": remove,
        }))?;
    } else {
        match &old_id {
            Some(id) => println!("replaced device {id} with {}", new.device_id()),
            None => println!("no earlier identity; created device {}", new.device_id()),
        }
        println!("removed {tokens} device token(s); the next start pairs as the new device");
        if let Some(remove) = remove {
            println!("remove the old device on the gateway: {remove}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One row of `doctor`.
#[derive(serde::Serialize)]
struct DoctorRow {
    command: String,
    tool: String,
    declared: bool,
    /// Whether the gateway accepted the tool in its last `node.pluginTools.update` reply
    /// (`None`: no reply recorded yet).
    effective: Option<bool>,
    /// Custom (`openphone.*`) commands are in no default gateway list.
    needs_allowlist: bool,
    /// OS permission: the simulated phone needs none.
    os_permission: &'static str,
    /// `allow`, `confirm` or `deny` at the runtime's autonomy ceiling.
    policy: &'static str,
    policy_reason: String,
}

fn doctor(config: Option<&std::path::Path>, dir: &std::path::Path, json: bool) -> Result<ExitCode> {
    use openphone_policy::{Context as PolicyContext, PolicyInput, Requirement};

    let (cfg, surface, caller) = surface_of(config)?;
    let registry = openphone_protocol::Registry::embedded()
        .map_err(|e| anyhow::anyhow!("the embedded manifests do not load: {e}"))?;
    // What the gateway accepted last (written by the daemon), and its live status if it runs.
    let view: Option<openphone_openclaw::GatewayView> =
        std::fs::read_to_string(dir.join(openphone_openclaw::GATEWAY_VIEW_FILE))
            .ok()
            .and_then(|t| openphone_openclaw::GatewayView::from_file_text(&t));
    let accepted: Option<Vec<String>> = view.as_ref().map(|v| v.accepted_tools.clone());
    let status = if dir.join("endpoint.json").exists() {
        block_on(status_line(dir)).ok()
    } else {
        None
    };
    let now_ms = u64::try_from(openphone_clock::Clock::now_ms(
        &openphone_clock::SystemClock,
    ))
    .unwrap_or_default();
    let params = serde_json::json!({});
    let mut rows = Vec::new();
    for tool in surface.tools() {
        let (policy, reason) = match registry.resolve(&tool.command) {
            // The adapter's own status command: answered by the adapter, read-only.
            None => ("allow", "answered by the adapter itself".to_owned()),
            Some(command) => {
                let decision = openphone_policy::decide(&PolicyInput {
                    command,
                    caller: &caller,
                    request_autonomy: None,
                    session_autonomy: None,
                    tool_policy: &cfg.tool_policy,
                    platform_supported: true,
                    context: &PolicyContext::Interactive,
                    standing_approvals: &[],
                    phone_session_id: None,
                    params: &params,
                    now_ms,
                    elevation: None,
                });
                match decision.requirement {
                    Requirement::Allow => ("allow", String::new()),
                    Requirement::Confirm { reason, .. } => ("confirm", reason),
                    Requirement::Deny { reason, .. } => ("deny", reason),
                }
            }
        };
        rows.push(DoctorRow {
            command: tool.command.clone(),
            tool: tool.name.clone(),
            declared: true,
            effective: accepted.as_ref().map(|a| a.contains(&tool.name)),
            needs_allowlist: tool.command.starts_with("openphone."),
            os_permission: "none needed (simulated phone)",
            policy,
            policy_reason: reason,
        });
    }
    let missing: Vec<&DoctorRow> = rows.iter().filter(|r| r.effective != Some(true)).collect();
    let mut fixes = Vec::new();
    if let Some(id) = status
        .as_deref()
        .and_then(|s| s.strip_prefix("pairing_pending "))
    {
        fixes.push(format!("openclaw devices approve {id}"));
    }
    if !missing.is_empty() {
        fixes.push(surface.allow_command());
        fixes.push("openclaw nodes pending".to_owned());
        fixes.push("openclaw nodes approve <requestId>".to_owned());
    }
    if json {
        print_json(&serde_json::json!({
            "status": status,
            "device_id": view.as_ref().map(|v| v.device_id.as_str()),
            "gateway_view_at_ms": view.as_ref().map(|v| v.updated_at_ms),
            "commands": rows,
            "fixes": fixes,
        }))?;
    } else {
        match &status {
            Some(line) => println!("openclaw: {line}"),
            None => println!("openclaw: daemon not running (showing its last gateway view)"),
        }
        if accepted.is_none() {
            println!("the gateway has not answered a tool update yet: effective is unknown");
        }
        println!(
            "{:<34} {:<9} {:<9} {:<9} policy",
            "command", "declared", "gateway", "allowlist"
        );
        for r in &rows {
            let effective = match r.effective {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "?",
            };
            println!(
                "{:<34} {:<9} {:<9} {:<9} {}{}",
                r.command,
                "yes",
                effective,
                if r.needs_allowlist { "needed" } else { "-" },
                r.policy,
                if r.policy_reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", r.policy_reason)
                }
            );
        }
        if fixes.is_empty() {
            println!("\nno gaps: every declared command is effective on the gateway");
        } else {
            println!(
                "\n{} command(s) not effective on the gateway; on the gateway host run:",
                missing.len()
            );
            for fix in &fixes {
                println!("  {fix}");
            }
            println!("(merge the allowlist with the gateway's existing entries)");
        }
    }
    Ok(if fixes.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
