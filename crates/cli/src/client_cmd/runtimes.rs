//! `openphone runtimes list | select`: the configured runtimes and which one each surface
//! is routed to.

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;
use openphone_protocol::endpoint::{
    RuntimeList, RuntimeListParams, RuntimeSelect, RuntimeSelectParams,
};

use crate::client::DaemonClient;
use crate::data_dir::DataDir;
use crate::output::{block_on, print_json};

#[derive(Debug, Subcommand)]
pub enum RuntimesCommand {
    /// Runtimes with their status and the surfaces routed to them.
    List {
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Routes a surface (chat, volume, background) to a runtime.
    Select {
        /// chat, volume or background.
        surface: String,
        /// A configured runtime id.
        runtime: String,
        #[command(flatten)]
        data_dir: DataDir,
    },
}

pub fn runtimes(cmd: RuntimesCommand) -> Result<ExitCode> {
    match cmd {
        RuntimesCommand::List { data_dir, json } => {
            let dir = data_dir.resolve()?;
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let list = client
                    .call::<RuntimeList>(RuntimeListParams::default())
                    .await?;
                client.close().await;
                if json {
                    print_json(&list)?;
                } else {
                    println!("runtimes: {}", list.status.as_str());
                    for r in &list.runtimes {
                        let surfaces: Vec<&str> = r.surfaces.iter().map(|s| s.as_str()).collect();
                        println!(
                            "{:<16} {:<10} {:<14} {}",
                            r.id,
                            r.kind.as_str(),
                            r.status.as_str(),
                            surfaces.join(",")
                        );
                    }
                }
                Ok(ExitCode::SUCCESS)
            })
        }
        RuntimesCommand::Select {
            surface,
            runtime,
            data_dir,
        } => {
            let dir = data_dir.resolve()?;
            block_on(async {
                let mut client = DaemonClient::connect(&dir).await?;
                let r = client
                    .call::<RuntimeSelect>(RuntimeSelectParams { surface, runtime })
                    .await?;
                client.close().await;
                println!("{} → {}", r.surface.as_str(), r.runtime);
                Ok(ExitCode::SUCCESS)
            })
        }
    }
}
