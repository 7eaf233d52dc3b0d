//! `openphone goals …`: the goal runtime layer (`docs/goals.md`). Today: `simulate`, which
//! runs a goal offline in simulated time against the simulated phone and prints its timeline.
//! The daemon-side commands (create, plan, list, show, tick, approve, pause, resume, retry,
//! abort, explain, export) need the endpoint's `goals.*` methods, which are not built yet.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use openphone_device::SimState;
use openphone_goals::sim::{Rules, SimInput, simulate};

use crate::client_cmd::block_on;

/// `openphone goals` subcommands.
#[derive(Debug, Subcommand)]
pub enum GoalsCommand {
    /// Run a goal in simulated time against the simulated phone, with scripted approvals,
    /// answers and runtime replies; print the timeline (same input, same output).
    Simulate {
        /// The goal file: a goal, or `{"goal": …, "replies": {"<action>": "…"}}`.
        goal: PathBuf,
        /// A simulated-phone scenario (`SCENARIO.md`); the demo scenario otherwise.
        #[arg(long)]
        scenario: Option<PathBuf>,
        /// Scripted decisions: `{"rules": [{"action", "decision", "text", "after_ms"}]}`.
        #[arg(long)]
        approvals: Option<PathBuf>,
    },
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Runs a `goals` subcommand.
pub fn run(cmd: GoalsCommand) -> Result<ExitCode> {
    match cmd {
        GoalsCommand::Simulate {
            goal,
            scenario,
            approvals,
        } => {
            let input: SimInput = serde_json::from_str(&read(&goal)?)
                .with_context(|| format!("{} is not a goal file", goal.display()))?;
            let phone = match &scenario {
                Some(path) => Some(
                    SimState::from_file(path)
                        .with_context(|| format!("loading the scenario {}", path.display()))?,
                ),
                None => None,
            };
            let rules: Rules = match &approvals {
                Some(path) => serde_json::from_str(&read(path)?)
                    .with_context(|| format!("{} is not a rules file", path.display()))?,
                None => Rules::default(),
            };
            let dir = tempfile::tempdir().context("creating the simulation's data directory")?;
            let data = dir.path().join("data");
            let sim = block_on(async {
                simulate(input, phone, &rules, &data)
                    .await
                    .map_err(anyhow::Error::from)
            })?;
            for line in &sim.timeline {
                println!("{line}");
            }
            Ok(if sim.state == openphone_goals::GoalState::Done {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
