//! `openphone-null-server`: the ceiling references of `bench/run.sh` (docs/benchmarks.md).
//!
//! Three modes, each a server (or a probe) that does the least work its protocol allows, so
//! what it reaches is what this machine's loopback network, tokio and the protocol's framing
//! allow — the ceiling a daemon doing real work can approach, measured in the same run:
//!
//! - `ws` (the default): a WebSocket server on `/v1/runtime` speaking the smallest useful part
//!   of the daemon's endpoint protocol (`docs/endpoint.md`): bearer token, `hello`,
//!   `tools.invoke` answered with a fixed tool result (`ws.rs`).
//! - `mcp`: a Streamable HTTP MCP server on `/mcp` answering `initialize`,
//!   `notifications/initialized`, `tools/call` (both eras, 2025-11-25 with sessions and
//!   2026-07-28 stateless) and `DELETE` with fixed, correctly shaped answers (`mcp.rs`).
//! - `fsync`: no server: writes and fsyncs a file the way SQLite commits a WAL transaction,
//!   for a few seconds, and prints the fsync latency and rate of that disk (`fsync.rs`).
//!
//! The tool results are the daemon's own answers on the simulated phone, captured once into
//! `bench/fixtures/` (`openphone.device.status`, and `openphone.screen.get` without a
//! screenshot), so the frames have the daemon's shape and size.
//!
//! Usage:
//!   openphone-null-server [ws] --token TOKEN [--listen 127.0.0.1:0] [--durable-log FILE [--pipelined] | --durable-sqlite FILE] [--work-us N]
//!   openphone-null-server mcp [--token TOKEN] [--listen 127.0.0.1:0] [--durable-log FILE [--pipelined] | --durable-sqlite FILE] [--work-us N]
//!   openphone-null-server fsync --dir DIR [--secs 2] [--frames 3] [--awake 0]
//! Either server takes `--durable-log FILE` (or `--durable-sqlite FILE`): then every tool
//! call's answer waits until a record of it is appended to FILE (or inserted into the SQLite
//! database FILE) and fsynced, by one group-commit thread (`durable.rs`) — the floor of a
//! durable answer on this machine. `--work-us N` (with either) adds about N µs of CPU work
//! per call before the record is queued (`work.rs`): how the floor falls as a server does more.
//!
//! The servers print one line, `listening on <url>`, once they accept connections, and stop
//! on SIGINT or SIGTERM. The probe prints one JSON object.

use std::process::ExitCode;

mod durable;
mod fsync;
mod mcp;
mod work;
mod ws;

/// The daemon's `openphone.device.status` result, captured once from the simulated phone.
pub(crate) const DEVICE_STATUS: &str = include_str!("../../fixtures/device-status.json");

/// The daemon's `openphone.screen.get` result (`include_screenshot: false`), captured once
/// from the simulated phone.
pub(crate) const SCREEN_GET: &str = include_str!("../../fixtures/screen-get.json");

const USAGE: &str =
    "usage: openphone-null-server [ws] --token TOKEN [--listen ADDR:PORT] [--durable-log FILE [--pipelined] | --durable-sqlite FILE] [--work-us N]
       openphone-null-server mcp [--token TOKEN] [--listen ADDR:PORT] [--durable-log FILE [--pipelined] | --durable-sqlite FILE] [--work-us N]
       openphone-null-server fsync --dir DIR [--secs SECONDS] [--frames N] [--awake THREADS]";

/// What to run.
#[derive(Debug, PartialEq)]
enum Mode {
    Ws {
        listen: String,
        token: String,
        durable: Option<durable::Spec>,
    },
    Mcp {
        listen: String,
        token: Option<String>,
        durable: Option<durable::Spec>,
    },
    Fsync(fsync::Probe),
}

/// Reads the command line (without the program name).
fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Mode, String> {
    let mut args = args.into_iter().peekable();
    let mode = match args.peek().map(String::as_str) {
        Some("ws" | "mcp" | "fsync") => args.next().unwrap_or_default(),
        _ => "ws".to_owned(),
    };
    let mut listen = "127.0.0.1:0".to_owned();
    let mut token = None;
    let mut dir = None;
    let mut durable = None;
    let mut pipelined = false;
    let mut sqlite = None;
    let mut work_us = None;
    let mut secs = 2.0_f64;
    let mut frames = 3_usize;
    let mut awake = 0_usize;
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match (mode.as_str(), arg.as_str()) {
            (_, "-h" | "--help") => return Err(USAGE.to_owned()),
            ("ws" | "mcp", "--listen") => listen = value("--listen")?,
            ("ws" | "mcp", "--token") => token = Some(value("--token")?),
            ("ws" | "mcp", "--durable-log") => {
                durable = Some(std::path::PathBuf::from(value("--durable-log")?));
            }
            ("ws" | "mcp", "--pipelined") => pipelined = true,
            ("ws" | "mcp", "--durable-sqlite") => {
                sqlite = Some(std::path::PathBuf::from(value("--durable-sqlite")?));
            }
            ("ws" | "mcp", "--work-us") => {
                let v = value("--work-us")?;
                work_us = Some(v.parse().ok().filter(|n| *n <= work::MAX_WORK_US).ok_or(
                    format!(
                        "--work-us must be a whole number of µs from 0 to {}, not {v:?}",
                        work::MAX_WORK_US
                    ),
                )?);
            }
            ("fsync", "--dir") => dir = Some(value("--dir")?),
            ("fsync", "--secs") => {
                let v = value("--secs")?;
                secs = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0 && *s <= 3600.0)
                    .ok_or(format!(
                        "--secs must be a number of seconds above 0 (at most 3600), not {v:?}"
                    ))?;
            }
            ("fsync", "--frames") => {
                let v = value("--frames")?;
                frames = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=512).contains(n))
                    .ok_or(format!(
                        "--frames must be a whole number from 1 to 512, not {v:?}"
                    ))?;
            }
            ("fsync", "--awake") => {
                let v = value("--awake")?;
                awake = v.parse().ok().filter(|n| *n <= 64).ok_or(format!(
                    "--awake must be a whole number from 0 to 64, not {v:?}"
                ))?;
            }
            (mode, other) => {
                return Err(format!(
                    "unknown argument {other:?} for mode {mode}; {USAGE}"
                ));
            }
        }
    }
    if let Some(t) = &token
        && (t.is_empty() || t.chars().any(char::is_whitespace))
    {
        return Err("--token must be non-empty and without whitespace".to_owned());
    }
    if pipelined && durable.is_none() {
        return Err("--pipelined needs --durable-log".to_owned());
    }
    if work_us.is_some() && durable.is_none() && sqlite.is_none() {
        return Err("--work-us needs --durable-log or --durable-sqlite".to_owned());
    }
    let work_us = work_us.unwrap_or(0);
    let durable = match (durable, sqlite) {
        (Some(_), Some(_)) => {
            return Err("--durable-log and --durable-sqlite exclude each other".to_owned());
        }
        (Some(path), None) => Some(durable::Spec {
            path,
            kind: if pipelined {
                durable::Kind::FilePipelined
            } else {
                durable::Kind::File
            },
            work_us,
        }),
        (None, Some(path)) => Some(durable::Spec {
            path,
            kind: durable::Kind::Sqlite,
            work_us,
        }),
        (None, None) => None,
    };
    match mode.as_str() {
        "mcp" => Ok(Mode::Mcp {
            listen,
            token,
            durable,
        }),
        "fsync" => {
            let dir = dir.ok_or(format!("fsync needs --dir; {USAGE}"))?;
            Ok(Mode::Fsync(fsync::Probe {
                dir: dir.into(),
                secs,
                frames,
                awake,
            }))
        }
        _ => {
            let token = token.ok_or(format!("--token is required; {USAGE}"))?;
            Ok(Mode::Ws {
                listen,
                token,
                durable,
            })
        }
    }
}

fn main() -> ExitCode {
    let mode = match parse_args(std::env::args().skip(1)) {
        Ok(mode) => mode,
        Err(e) => {
            eprintln!("openphone-null-server: {e}");
            return ExitCode::from(2);
        }
    };
    if let Mode::Fsync(probe) = mode {
        return match fsync::run(&probe) {
            Ok(report) => {
                println!("{report}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("openphone-null-server fsync: {e}");
                ExitCode::from(2)
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("openphone-null-server: cannot start tokio: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async move {
        match mode {
            Mode::Ws {
                listen,
                token,
                durable,
            } => ws::run(&listen, token, durable.as_ref()).await,
            Mode::Mcp {
                listen,
                token,
                durable,
            } => mcp::run(&listen, token, durable.as_ref()).await,
            Mode::Fsync(_) => Ok(()),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("openphone-null-server: {e}");
            ExitCode::from(2)
        }
    }
}

/// Binds `listen`; prints `listening on {scheme}://{addr}{path}`.
pub(crate) async fn bind(
    listen: &str,
    scheme: &str,
    path: &str,
) -> Result<tokio::net::TcpListener, String> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("no local address: {e}"))?;
    println!("listening on {scheme}://{addr}{path}");
    Ok(listener)
}

/// Resolves on SIGINT or SIGTERM.
pub(crate) async fn stopped() -> Result<(), String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    Ok(())
}

/// A fixture as compact JSON (the servers send it so, as the daemon does).
pub(crate) fn compact(fixture: &str, name: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(fixture)
        .map_err(|e| format!("the built-in fixture {name} is not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Mode, String> {
        parse_args(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn the_websocket_mode_is_the_default_and_needs_a_token() {
        assert_eq!(
            parse(&["--token", "t"]).unwrap(),
            Mode::Ws {
                listen: "127.0.0.1:0".to_owned(),
                token: "t".to_owned(),
                durable: None
            }
        );
        assert_eq!(
            parse(&["--token", "t", "--durable-log", "/tmp/x"]).unwrap(),
            Mode::Ws {
                listen: "127.0.0.1:0".to_owned(),
                token: "t".to_owned(),
                durable: Some(durable::Spec {
                    path: "/tmp/x".into(),
                    kind: durable::Kind::File,
                    work_us: 0
                })
            }
        );
        assert_eq!(
            parse(&["--token", "t", "--durable-log", "/tmp/x", "--pipelined"]).unwrap(),
            Mode::Ws {
                listen: "127.0.0.1:0".to_owned(),
                token: "t".to_owned(),
                durable: Some(durable::Spec {
                    path: "/tmp/x".into(),
                    kind: durable::Kind::FilePipelined,
                    work_us: 0
                })
            }
        );
        assert_eq!(
            parse(&[
                "--token",
                "t",
                "--durable-sqlite",
                "/tmp/x.db",
                "--work-us",
                "20"
            ])
            .unwrap(),
            Mode::Ws {
                listen: "127.0.0.1:0".to_owned(),
                token: "t".to_owned(),
                durable: Some(durable::Spec {
                    path: "/tmp/x.db".into(),
                    kind: durable::Kind::Sqlite,
                    work_us: 20
                })
            }
        );
        assert!(
            parse(&[
                "--token",
                "t",
                "--durable-sqlite",
                "a",
                "--durable-log",
                "b"
            ])
            .unwrap_err()
            .contains("exclude each other")
        );
        assert!(
            parse(&["--token", "t", "--pipelined"])
                .unwrap_err()
                .contains("--pipelined needs --durable-log")
        );
        assert!(
            parse(&["--token", "t", "--durable-log"])
                .unwrap_err()
                .contains("--durable-log needs a value")
        );
        assert!(parse(&["ws"]).unwrap_err().contains("--token is required"));
        assert!(
            parse(&["--token", "a b"])
                .unwrap_err()
                .contains("whitespace")
        );
    }

    #[test]
    fn the_work_per_call_needs_a_durable_log_and_a_number_in_range() {
        let work = |args: &[&str]| parse(args).unwrap_err();
        assert!(
            work(&["--token", "t", "--work-us", "10"])
                .contains("--work-us needs --durable-log or --durable-sqlite")
        );
        for bad in ["-1", "10001", "ten", ""] {
            let err = work(&["--token", "t", "--durable-log", "/tmp/x", "--work-us", bad]);
            assert!(
                err.contains("--work-us must be a whole number"),
                "{bad}: {err}"
            );
        }
        assert!(work(&["fsync", "--dir", "x", "--work-us", "1"]).contains("unknown argument"));
        assert_eq!(
            parse(&["mcp", "--durable-log", "/tmp/x", "--work-us", "10000"]).unwrap(),
            Mode::Mcp {
                listen: "127.0.0.1:0".to_owned(),
                token: None,
                durable: Some(durable::Spec {
                    path: "/tmp/x".into(),
                    kind: durable::Kind::File,
                    work_us: 10_000
                })
            }
        );
    }

    #[test]
    fn the_mcp_mode_takes_an_optional_token() {
        assert_eq!(
            parse(&["mcp", "--listen", "127.0.0.1:9"]).unwrap(),
            Mode::Mcp {
                listen: "127.0.0.1:9".to_owned(),
                token: None,
                durable: None
            }
        );
        assert!(
            parse(&["fsync", "--dir", "x", "--durable-log", "y"])
                .unwrap_err()
                .contains("unknown argument")
        );
        assert!(
            parse(&["mcp", "--dir", "x"])
                .unwrap_err()
                .contains("unknown argument")
        );
    }

    #[test]
    fn the_fsync_probe_checks_its_numbers() {
        assert_eq!(
            parse(&["fsync", "--dir", "/tmp", "--secs", "0.5"]).unwrap(),
            Mode::Fsync(fsync::Probe {
                dir: "/tmp".into(),
                secs: 0.5,
                frames: 3,
                awake: 0
            })
        );
        assert!(parse(&["fsync"]).unwrap_err().contains("needs --dir"));
        assert!(
            parse(&["fsync", "--dir", "d", "--secs", "-1"])
                .unwrap_err()
                .contains("--secs")
        );
        assert!(
            parse(&["fsync", "--dir", "d", "--frames", "0"])
                .unwrap_err()
                .contains("--frames")
        );
        assert!(parse(&["fsync", "--dir", "d", "--token", "t"]).is_err());
        assert!(
            parse(&["fsync", "--dir", "d", "--awake", "x"])
                .unwrap_err()
                .contains("--awake")
        );
    }

    #[test]
    fn the_fixtures_are_json_objects() {
        for (text, name) in [(DEVICE_STATUS, "device-status"), (SCREEN_GET, "screen-get")] {
            assert!(compact(text, name).unwrap().is_object(), "{name}");
        }
    }
}
