//! `openphone doctor`: checks what a working set-up needs — the config file (found, valid),
//! the data directory and its modes, the daemon (and whether it read that same config file), the model server, the OpenClaw gateway (when
//! configured) and the phones — and prints each problem with its fix. Exit 0 when nothing is
//! wrong, 1 otherwise.

use std::net::ToSocketAddrs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use openphone_protocol::endpoint::{DevicesList, NoParams};
use openphone_server::{Config, ConfigLocation};
use serde::Serialize;

use crate::client::DaemonClient;
use crate::data_dir::DataDir;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    data_dir: DataDir,
    /// The config file to check (default: what `openphone config path` names).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// One check's outcome.
#[derive(Debug, Serialize)]
struct Check {
    /// `config`, `data_dir`, `daemon`, `daemon_config`, `model`, `openclaw`, `device`.
    name: &'static str,
    /// `ok`, `note` (worth knowing, not wrong) or `problem`.
    status: &'static str,
    detail: String,
    /// For a problem: what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

fn ok(name: &'static str, detail: String) -> Check {
    Check {
        name,
        status: "ok",
        detail,
        fix: None,
    }
}

fn note(name: &'static str, detail: String, fix: String) -> Check {
    Check {
        name,
        status: "note",
        detail,
        fix: Some(fix),
    }
}

fn problem(name: &'static str, detail: String, fix: String) -> Check {
    Check {
        name,
        status: "problem",
        detail,
        fix: Some(fix),
    }
}

/// How long one network check waits.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

pub fn run(args: DoctorArgs) -> Result<ExitCode> {
    let dir = args.data_dir.resolve()?;
    let location = ConfigLocation::resolve(args.config.as_deref());
    let mut checks = Vec::new();
    let config = match crate::config_cmd::validate(&location) {
        Ok(config) => {
            checks.push(ok("config", format!("valid: {}", location.describe())));
            Some(config)
        }
        Err(message) => {
            checks.push(problem(
                "config",
                message,
                "fix the file (`openphone config check` names the line), or point --config / \
                 OPENPHONE_CONFIG at another"
                    .into(),
            ));
            None
        }
    };
    checks.push(data_dir_check(&dir));
    let devices = crate::output::block_on(daemon_check(&dir, &location))?;
    checks.push(devices.0);
    if let Some(config) = &config {
        checks.push(model_check(config, &location));
        if let Some(openclaw) = &config.openclaw {
            checks.push(match reach(&openclaw.url) {
                Ok(addr) => ok(
                    "openclaw",
                    format!("gateway {} answers ({addr})", openclaw.url),
                ),
                Err(e) => problem(
                    "openclaw",
                    format!("gateway {} cannot be reached: {e}", openclaw.url),
                    "start the OpenClaw gateway (`openclaw gateway`), or fix [openclaw] url in \
                     the config"
                        .into(),
                ),
            });
        }
    }
    checks.extend(devices.1);
    let problems = checks.iter().filter(|c| c.status == "problem").count();
    if args.json {
        crate::output::print_json(&serde_json::json!({
            "healthy": problems == 0,
            "data_dir": dir,
            "config": location.path,
            "checks": checks,
        }))?;
    } else {
        for c in &checks {
            let mark = match c.status {
                "ok" => "ok     ",
                "note" => "note   ",
                _ => "PROBLEM",
            };
            println!("{mark} {:<9} {}", c.name, c.detail);
            if let Some(fix) = &c.fix {
                println!("        {:<9} fix: {fix}", "");
            }
        }
        if problems == 0 {
            println!("healthy");
        } else {
            println!("{problems} problem(s)");
        }
    }
    Ok(if problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The data directory is the user's alone: 0700, its files 0600.
fn data_dir_check(dir: &Path) -> Check {
    let Ok(meta) = std::fs::metadata(dir) else {
        return note(
            "data_dir",
            format!("{} does not exist yet", dir.display()),
            format!(
                "`openphone serve --data-dir {}` creates it (0700)",
                dir.display()
            ),
        );
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return problem(
                "data_dir",
                format!(
                    "{} has mode {mode:04o}: other users can reach it",
                    dir.display()
                ),
                format!(
                    "`chmod 700 {}` (the daemon also tightens it at every start)",
                    dir.display()
                ),
            );
        }
        let loose: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let meta = entry.metadata().ok()?;
                let mode = meta.permissions().mode() & 0o777;
                (meta.is_file() && mode & 0o077 != 0)
                    .then(|| format!("{} ({mode:04o})", entry.file_name().to_string_lossy()))
            })
            .collect();
        if !loose.is_empty() {
            return problem(
                "data_dir",
                format!(
                    "files in {} other users can read: {}",
                    dir.display(),
                    loose.join(", ")
                ),
                format!(
                    "`chmod 600` them, or restart `openphone serve --data-dir {}`, which \
                     tightens them",
                    dir.display()
                ),
            );
        }
        ok(
            "data_dir",
            format!("{} (mode {mode:04o}, files 0600)", dir.display()),
        )
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        ok("data_dir", dir.display().to_string())
    }
}

/// Whether the daemon answers, and (when it does) its phones.
async fn daemon_check(dir: &Path, location: &ConfigLocation) -> Result<(Check, Vec<Check>)> {
    let start = format!("`openphone serve --data-dir {}`", dir.display());
    let mut client = match DaemonClient::connect(dir).await {
        Ok(client) => client,
        Err(e) => {
            return Ok((
                problem(
                    "daemon",
                    format!("no daemon answers for {}: {e:#}", dir.display()),
                    format!("start it: {start}"),
                ),
                Vec::new(),
            ));
        }
    };
    let daemon = ok(
        "daemon",
        format!(
            "running at {} (pid {})",
            client.endpoint.url, client.endpoint.pid
        ),
    );
    let same_config = config_match(&client.endpoint, location, dir);
    let mut devices = match client.call::<DevicesList>(NoParams::default()).await {
        Ok(list) => list
            .devices
            .into_iter()
            .map(|d| {
                if d.state == "device" {
                    ok("device", format!("{} ({}) answers", d.id, d.spec))
                } else {
                    problem(
                        "device",
                        format!("{} ({}) is {}", d.id, d.spec, d.state),
                        d.problem.unwrap_or_else(|| {
                            "see docs/android.md for the device states and their fixes".into()
                        }),
                    )
                }
            })
            .collect(),
        Err(e) => vec![problem(
            "device",
            format!("the daemon did not list its phones: {e:#}"),
            "see the daemon's log".into(),
        )],
    };
    client.close().await;
    if let Some(check) = same_config {
        devices.insert(0, check);
    }
    Ok((daemon, devices))
}

/// Whether the running daemon read the config file this command resolves (`endpoint.json`'s
/// `config_path`); `None` from a daemon that does not say.
fn config_match(
    endpoint: &openphone_server::EndpointInfo,
    location: &ConfigLocation,
    dir: &Path,
) -> Option<Check> {
    let said = endpoint.config_origin.as_ref()?;
    let absolute = |p: &Path| {
        std::fs::canonicalize(p)
            .or_else(|_| std::path::absolute(p))
            .unwrap_or_else(|_| p.to_path_buf())
    };
    let daemon = endpoint.config_path.as_deref().map(absolute);
    let here = location.path.as_deref().map(absolute);
    if daemon == here {
        return Some(ok(
            "daemon_config",
            format!("the daemon read the same: {said}"),
        ));
    }
    Some(problem(
        "daemon_config",
        format!(
            "the daemon read {said}, but this shell resolves {}",
            location.describe()
        ),
        format!(
            "restart the daemon with this config: `openphone stop --data-dir {0}`, then              `openphone serve --data-dir {0}` from this shell (or point --config /              OPENPHONE_CONFIG at the file the daemon read)",
            dir.display()
        ),
    ))
}

/// The model server of `[builtin]` (and of `[builtin.background_model]`) accepts connections.
fn model_check(config: &Config, location: &ConfigLocation) -> Check {
    let Some(builtin) = &config.builtin else {
        return note(
            "model",
            format!("no model configured ({})", location.describe()),
            "`ask` and background jobs need one: add a [builtin] table with base_url and model \
             (README: Use a local model)"
                .into(),
        );
    };
    let mut urls = vec![builtin.base_url.clone()];
    if let Some(background) = &builtin.background_model {
        urls.push(background.base_url.clone());
    }
    for url in &urls {
        if let Err(e) = reach(url) {
            return problem(
                "model",
                format!("the model server at {url} cannot be reached: {e}"),
                format!(
                    "start it (Ollama: `ollama serve`; llama.cpp: `llama-server … --port N`), \
                     or fix base_url in [builtin] of {}",
                    location
                        .path
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "the config".into())
                ),
            );
        }
    }
    ok(
        "model",
        format!(
            "{} at {} accepts connections",
            builtin.model,
            urls.join(", ")
        ),
    )
}

/// Connects to the host and port of an http(s)/ws(s) URL; the address that answered.
pub fn reach(url: &str) -> std::result::Result<String, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("{url:?} is not a URL"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        && !authority.ends_with(']');
    let target = if has_port {
        authority.to_owned()
    } else {
        let port = match scheme {
            "https" | "wss" => 443,
            _ => 80,
        };
        format!("{authority}:{port}")
    };
    let addrs = target
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {target}: {e}"))?;
    let mut last = format!("{target} resolves to no address");
    for addr in addrs {
        match std::net::TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(_) => return Ok(addr.to_string()),
            Err(e) => last = format!("{addr}: {e}"),
        }
    }
    Err(last)
}
