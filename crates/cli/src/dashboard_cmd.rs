//! `openphone dashboard`: opens the daemon's web dashboard in the browser with a one-time login
//! link (`docs/dashboard.md`). The link carries a code from `dashboard.login` in its fragment:
//! it works once, for 60 seconds, and is exchanged by the page for a session cookie, so the
//! operator token never appears in a URL.

use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, Result};
use clap::Args;
use openphone_protocol::endpoint::{DashboardLogin, NoParams};
use serde::Serialize;

use crate::client::DaemonClient;
use crate::client_cmd::block_on;
use crate::data_dir::DataDir;

#[derive(Debug, Args)]
pub struct DashboardArgs {
    #[command(flatten)]
    data_dir: DataDir,
    /// Print the one-time link instead of opening a browser.
    #[arg(long)]
    no_open: bool,
    /// Print JSON (`url`, `expires_at_ms`) instead of text; implies --no-open.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct LoginLink {
    url: String,
    expires_at_ms: i64,
}

/// `http://<host:port>` of the daemon's endpoint URL (`ws://<host:port>/v1/runtime`).
fn http_base(endpoint_url: &str) -> Result<String> {
    let rest = endpoint_url
        .strip_prefix("ws://")
        .or_else(|| endpoint_url.strip_prefix("wss://"))
        .with_context(|| format!("unexpected endpoint url {endpoint_url:?}"))?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let scheme = if endpoint_url.starts_with("wss://") {
        "https"
    } else {
        "http"
    };
    Ok(format!("{scheme}://{authority}"))
}

/// Opens `url` with `$BROWSER`, else the desktop's opener.
fn open_browser(url: &str) -> Result<()> {
    let opener = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| {
            if cfg!(target_os = "macos") {
                "open".to_owned()
            } else {
                "xdg-open".to_owned()
            }
        });
    Command::new(&opener)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {opener}"))?;
    Ok(())
}

pub fn run(args: DashboardArgs) -> Result<ExitCode> {
    let dir = args.data_dir.resolve()?;
    let (login, base) = block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        let login = client.call::<DashboardLogin>(NoParams {}).await?;
        let base = http_base(&client.endpoint.url)?;
        client.close().await;
        Ok((login, base))
    })?;
    let link = LoginLink {
        url: format!("{base}{}", login.login_path),
        expires_at_ms: login.expires_at_ms,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&link)?);
        return Ok(ExitCode::SUCCESS);
    }
    if !args.no_open {
        match open_browser(&link.url) {
            Ok(()) => {
                println!("Opened the dashboard in your browser ({base}/ui/).");
                println!("If it did not open, this link logs you in once, within 60 s:");
            }
            Err(e) => println!("Could not open a browser ({e:#}); open this link within 60 s:"),
        }
    } else {
        println!("Open this link within 60 s (it works once):");
    }
    println!("{}", link.url);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_http_base_comes_from_the_endpoint_url() {
        assert_eq!(
            http_base("ws://127.0.0.1:7788/v1/runtime").unwrap(),
            "http://127.0.0.1:7788"
        );
        assert_eq!(
            http_base("ws://[::1]:80/v1/runtime").unwrap(),
            "http://[::1]:80"
        );
        assert!(http_base("http://x/").is_err());
    }
}
