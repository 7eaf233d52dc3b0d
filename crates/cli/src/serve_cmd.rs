//! `openphone serve`: the daemon.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use clap::{Args, ValueEnum};
use openphone_server::{Config, Daemon, DaemonOptions, DeviceChoice};

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
    /// The phone: `sim` (default scenario) or `sim:<scenario.json>`.
    #[arg(long, value_name = "DEVICE", default_value = "sim")]
    device: String,
    /// Configuration file (TOML; see docs/openphone.example.toml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Human)]
    log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

fn init_logging(format: LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

pub fn run(args: ServeArgs) -> Result<ExitCode> {
    let data_dir = args.data_dir.resolve()?;
    let device = DeviceChoice::parse(&args.device).map_err(|e| anyhow!(e))?;
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    init_logging(args.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let started = openphone_clock::Stopwatch::start();
        let daemon = Daemon::start(DaemonOptions {
            data_dir: data_dir.clone(),
            listen: args.listen,
            device,
            config,
        })
        .await?;
        tracing::info!(url = %daemon.url(), data_dir = %data_dir.display(),
            ready_ms = started.elapsed().as_millis() as u64, "ready");
        println!(
            "openphone serve: ready on {} (data dir {}, pid {})",
            daemon.url(),
            data_dir.display(),
            std::process::id()
        );
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
