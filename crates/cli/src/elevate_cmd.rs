//! `openphone elevate`: elevated mode (`docs/security.md`, Elevated mode). Grants one runtime
//! a higher autonomy ceiling for a while (`runtime.elevate`), or ends it now (`--revoke`,
//! `runtime.revoke_elevation`). The daemon checks everything (the configuration's cap and
//! longest duration, the runtime's configured ceiling) and audits the grant, its expiry and a
//! revocation; `openphone status` and `openphone runtimes list` show active elevations.

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use openphone_protocol::endpoint::{
    ElevationInfo, RuntimeElevate, RuntimeElevateParams, RuntimeRevokeElevation,
    RuntimeRevokeElevationParams,
};

use crate::client::DaemonClient;
use crate::data_dir::DataDir;
use crate::output::{block_on, duration_ms, print_json};

/// `openphone elevate <runtime> --to <level> --for <duration>` or `openphone elevate --revoke
/// <runtime>`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  openphone elevate hermes --to trusted_actions --for 10m\n  \
                        openphone elevate --revoke hermes\n\n\
                        While it lasts, the runtime's requests that ask for the level (their \
                        `autonomy`, or their session's) run in it; high-risk commands still ask \
                        you, and background runs still park for review. The configuration caps \
                        the level and the duration ([elevation] in the config file)."
)]
pub struct ElevateArgs {
    /// The runtime to elevate (a configured runtime id, e.g. hermes).
    #[arg(required_unless_present = "revoke", conflicts_with = "revoke")]
    pub runtime: Option<String>,
    /// The autonomy ceiling to grant: ask_before_action or trusted_actions.
    #[arg(long, required_unless_present = "revoke", conflicts_with = "revoke")]
    pub to: Option<String>,
    /// How long: 90s, 10m, 1h (at most `[elevation] max_duration_secs` in the configuration).
    #[arg(
        long = "for",
        value_name = "DURATION",
        required_unless_present = "revoke",
        conflicts_with = "revoke"
    )]
    pub duration: Option<String>,
    /// End this runtime's elevation now instead.
    #[arg(long, value_name = "RUNTIME")]
    pub revoke: Option<String>,
    #[command(flatten)]
    pub data_dir: DataDir,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ElevateArgs) -> Result<ExitCode> {
    let dir = args.data_dir.resolve()?;
    if let Some(runtime) = args.revoke {
        return block_on(async {
            let mut client = DaemonClient::connect(&dir).await?;
            let result = client
                .call::<RuntimeRevokeElevation>(RuntimeRevokeElevationParams {
                    runtime: runtime.clone(),
                })
                .await?;
            client.close().await;
            if args.json {
                print_json(&result)?;
            } else {
                match &result.revoked {
                    Some(e) => println!(
                        "revoked: {} is back to its configured ceiling ({})",
                        e.runtime, e.grant_id
                    ),
                    None => println!("{runtime} had no elevation"),
                }
            }
            Ok(ExitCode::SUCCESS)
        });
    }
    let (Some(runtime), Some(to), Some(duration)) = (args.runtime, args.to, args.duration) else {
        bail!("give a runtime, --to and --for, or --revoke <runtime>");
    };
    let ms = duration_ms("--for", &duration)?;
    if ms % 1_000 != 0 {
        bail!("--for {duration:?}: give whole seconds");
    }
    let duration_secs = u64::try_from(ms / 1_000)?;
    block_on(async {
        let mut client = DaemonClient::connect(&dir).await?;
        let result = client
            .call::<RuntimeElevate>(RuntimeElevateParams {
                runtime,
                to,
                duration_secs,
            })
            .await?;
        client.close().await;
        if args.json {
            print_json(&result)?;
        } else {
            println!("elevated: {}", elevation_line(&result.elevation));
            if let Some(old) = &result.replaced {
                println!("(replaces {})", old.grant_id);
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// `hermes → trusted_actions until Sat 28 Nov 08:10 UTC (in 2 h) (elev-…)`.
pub(crate) fn elevation_line(e: &ElevationInfo) -> String {
    let until = crate::output::when(e.expires_at_ms);
    format!(
        "{} → {} until {until} ({})",
        e.runtime,
        e.to.as_str(),
        e.grant_id
    )
}
