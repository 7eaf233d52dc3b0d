//! `openphone devices list [--json]`: every Android phone the adb server sees, with its state
//! (`device`, `unauthorized`, `offline`), and every phone the daemon is configured with,
//! marking the ones the running daemon drives. With a daemon up, its phones come from it
//! (`devices.list`); without one, from the configuration file `serve` would read (`--config`,
//! `OPENPHONE_CONFIG`, the XDG default), else the default simulated phone. The adb server is reached the way `adb` itself does
//! (`ANDROID_ADB_SERVER_PORT`, `adb` on `PATH` or under `ANDROID_HOME`; started once if it
//! is not running).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use openphone_protocol::endpoint::{DeviceInfo, DevicesList, NoParams};
use openphone_server::Config;
use openphone_server::config::DeviceKind;
use serde::Serialize;

use crate::client::{DaemonClient, NoDaemon};
use crate::data_dir::DataDir;
use crate::output::{block_on, print_json};

/// `openphone devices` subcommands.
#[derive(Debug, Subcommand)]
pub enum DevicesCommand {
    /// List attached Android phones (adb) and the daemon's phones, with their state and which
    /// ones the running daemon uses.
    List {
        #[command(flatten)]
        data_dir: DataDir,
        /// The configuration file to read the phones from when no daemon runs (default: what
        /// `openphone config path` names).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// One phone the adb server lists.
#[derive(Debug, Serialize)]
struct Attached {
    serial: String,
    /// `device`, `unauthorized`, `offline`, …, as adb says.
    state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    transport: String,
    /// The id of the daemon's phone that drives it, when the running daemon uses it.
    #[serde(skip_serializing_if = "Option::is_none")]
    used_by: Option<String>,
}

/// One phone of the daemon (running or configured).
#[derive(Debug, Serialize)]
struct Configured {
    #[serde(flatten)]
    device: DeviceInfo,
    /// Whether a running daemon drives it now.
    in_use: bool,
}

/// The whole listing (`--json`).
#[derive(Debug, Serialize)]
struct Listing {
    /// `running` (the phones below are the daemon's) or `not_running` (they are the
    /// configuration's).
    daemon: &'static str,
    attached: Vec<Attached>,
    /// Why the adb server could not be asked, with the fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    adb_problem: Option<String>,
    configured: Vec<Configured>,
}

/// Runs a `devices` subcommand.
pub fn run(cmd: DevicesCommand) -> Result<ExitCode> {
    let DevicesCommand::List {
        data_dir,
        config,
        json,
    } = cmd;
    let dir = data_dir.resolve()?;
    block_on(async move {
        let (daemon, configured) = match DaemonClient::connect(&dir).await {
            Ok(mut client) => {
                let list = client.call::<DevicesList>(NoParams {}).await?;
                client.close().await;
                ("running", list.devices)
            }
            Err(e) if e.downcast_ref::<NoDaemon>().is_some() => {
                ("not_running", from_config(config.as_deref()).await?)
            }
            Err(e) => return Err(e),
        };
        let (attached, adb_problem) =
            match openphone_adb::list_devices(&openphone_adb::AdbConfig::from_env()).await {
                Ok(list) => (list, None),
                Err(e) => (Vec::new(), Some(e.to_string())),
            };
        let running = daemon == "running";
        let attached = attached
            .into_iter()
            .map(|d| Attached {
                used_by: configured
                    .iter()
                    .find(|c| running && c.kind == "adb" && c.serial.as_deref() == Some(&d.serial))
                    .map(|c| c.id.clone()),
                serial: d.serial,
                state: d.state,
                model: d.model,
                transport: d.transport,
            })
            .collect();
        let listing = Listing {
            daemon,
            attached,
            adb_problem,
            configured: configured
                .into_iter()
                .map(|device| Configured {
                    device,
                    in_use: running,
                })
                .collect(),
        };
        if json {
            print_json(&listing)?;
        } else {
            print(&listing);
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// The phones a configuration names (the default simulated phone without `[device]` or
/// `[[devices]]`), each looked up now.
async fn from_config(path: Option<&std::path::Path>) -> Result<Vec<DeviceInfo>> {
    // The same resolution as `serve`: --config, OPENPHONE_CONFIG, the XDG default, none.
    let config: Config = openphone_server::ConfigLocation::resolve(path).load()?;
    let specs = openphone_server::DeviceChoice::Config.specs(&config)?;
    let mut out = Vec::with_capacity(specs.len());
    for spec in specs {
        let (kind, serial, state, problem) = match &spec.kind {
            DeviceKind::Sim { .. } => ("sim", None, "device".to_owned(), None),
            DeviceKind::Adb { serial, adb_path } => {
                let probe =
                    openphone_server::phones::adb_state(serial.as_deref(), adb_path.as_deref())
                        .await;
                ("adb", probe.serial, probe.state, probe.problem)
            }
        };
        let runtimes: Vec<String> = config
            .runtimes
            .iter()
            .filter(|r| r.devices.as_ref().is_some_and(|d| d.contains(&spec.id)))
            .map(|r| r.id.clone())
            .collect();
        let limited = config.runtimes.iter().any(|r| r.devices.is_some());
        out.push(DeviceInfo {
            id: spec.id.clone(),
            kind: kind.to_owned(),
            spec: spec.label(),
            serial,
            state,
            problem,
            runtimes: limited.then_some(runtimes),
        });
    }
    Ok(out)
}

fn print(listing: &Listing) {
    println!("Android phones the adb server sees:");
    match &listing.adb_problem {
        Some(problem) => println!("  (adb not available: {problem})"),
        None if listing.attached.is_empty() => {
            println!("  (none: plug a phone in with USB debugging on, or `adb connect HOST:PORT`)")
        }
        None => {}
    }
    for d in &listing.attached {
        let model = d.model.as_deref().unwrap_or("?");
        let used = d
            .used_by
            .as_deref()
            .map(|id| format!("  ← the daemon's phone {id:?}"))
            .unwrap_or_default();
        println!(
            "  {:<24} {:<13} {model} ({}){used}",
            d.serial, d.state, d.transport
        );
    }
    match listing.daemon {
        "running" => println!("Phones of the running daemon:"),
        _ => println!("Phones of the configuration (no daemon runs):"),
    }
    for c in &listing.configured {
        let d = &c.device;
        let serial = d
            .serial
            .as_deref()
            .map(|s| format!(" serial {s}"))
            .unwrap_or_default();
        let mark = if c.in_use { "*" } else { " " };
        println!("{mark} {:<16} {:<28} {}{serial}", d.id, d.spec, d.state);
        if let Some(problem) = &d.problem {
            println!("      {problem}");
        }
        if let Some(runtimes) = &d.runtimes {
            println!(
                "      runtimes granted it: {}",
                if runtimes.is_empty() {
                    "none of the limited ones".to_owned()
                } else {
                    runtimes.join(", ")
                }
            );
        }
    }
}
