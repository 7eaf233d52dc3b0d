//! `openphone goals …`: the goal runtime layer (`docs/goals.md`). `simulate` runs a goal
//! offline in simulated time; every other command talks to the running daemon through the
//! endpoint's `goals.*` methods (operator only): create, plan, list, show, tick, approve,
//! answer, pause, resume, retry, abort, explain, export.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use openphone_device::SimState;
use openphone_goals::sim::{Rules, SimInput, simulate};
use openphone_protocol::display_text;
use openphone_protocol::endpoint::{
    ConfirmDecision, ConfirmationsResolve, ConfirmationsResolveParams, GoalActionParams,
    GoalIdParams, GoalRecord, GoalResult, GoalsAbort, GoalsAnswer, GoalsAnswerParams, GoalsCreate,
    GoalsCreateParams, GoalsExplain, GoalsExplainParams, GoalsExport, GoalsGet, GoalsList,
    GoalsListParams, GoalsPause, GoalsPlan, GoalsPlanParams, GoalsResume, GoalsRetry, GoalsTick,
    Method,
};
use serde_json::{Value, json};

use crate::client::DaemonClient;
use crate::client_cmd::{block_on, print_json};
use crate::data_dir::DataDir;
use crate::output::fleet_columns::FleetColumns;
use crate::output::when;

/// `openphone goals` subcommands.
#[derive(Debug, Subcommand)]
pub enum GoalsCommand {
    /// Create a goal from a JSON file (see docs/goals.md, "A goal"): an objective, optional
    /// deadline and success criteria, and usually a plan. The daemon starts working on it at
    /// once; `goals show <goal>` tells you where it stands.
    Create {
        /// The goal file: a goal spec, or `{"goal": <spec>, …}` as `goals simulate` takes.
        file: PathBuf,
        /// The phone the goal acts on (an id from `openphone devices list`); overrides the
        /// file's `device_id`. Without either, the daemon's only phone.
        #[arg(long, value_name = "ID")]
        device: Option<String>,
        /// The deadline, overriding the file's `deadline_at`/`deadline_in`: RFC 3339
        /// (`2026-12-01T18:00:00+01:00`), a local time (`18:00`, `tomorrow 18:00`, `fri 09:00`)
        /// or relative (`in 6h`).
        #[arg(long, value_name = "WHEN")]
        deadline: Option<String>,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Give a goal a plan, or a new one: actions that started are kept, the rest replaced.
    Plan {
        /// The goal's id (`goal_…`).
        goal: String,
        /// The plan file: a JSON list of actions, or `{"plan": [...]}`.
        file: PathBuf,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The goals, most recently changed first.
    List {
        /// Only goals in this state: draft, active, blocked, paused, done, failed, aborted.
        #[arg(long)]
        state: Option<String>,
        /// At most this many (default 20, at most 200).
        #[arg(long)]
        limit: Option<usize>,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// One goal: its actions and their states, what blocks it and the command that resolves
    /// each blocker, and its latest report.
    Show {
        goal: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON (the document, its transitions and reports) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run one tick of the goal now (the daemon also ticks it by itself when something
    /// happens or a timer falls due).
    Tick {
        goal: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Approve the action that waits for your approval: its stored request runs once, and the
    /// goal moves on. The same as `openphone confirmations approve <id>` with the action's
    /// confirmation id.
    Approve {
        goal: String,
        /// The action's id in the plan (e.g. `move`).
        action: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON (the request's final result) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Answer a question the goal asked you (an `ask_user` action).
    Answer {
        goal: String,
        action: String,
        /// Your answer.
        text: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Pause a goal: nothing new starts until `goals resume` (deadline checkpoints still
    /// fire).
    Pause {
        goal: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Resume a paused goal.
    Resume {
        goal: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Try a BLOCKED action again (or every blocked one), with its retry budget renewed.
    Retry {
        goal: String,
        /// Only this action.
        action: Option<String>,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Abort the goal (every unfinished action), or one action. Approvals it waited on are
    /// withdrawn, so approving them later runs nothing.
    Abort {
        goal: String,
        /// Only this action (its alternatives, if any, may run instead).
        action: Option<String>,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Why an action ran, waits or is blocked: its transitions, the policy's decision layer
    /// by layer, its attempts.
    Explain {
        goal: String,
        action: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write the goal's artifacts (plan.json, runs/, status.md, transitions.json, rebuilt
    /// from the store), its reports, its audit slice and the audit chain's verification into
    /// one directory.
    Export {
        goal: String,
        /// The directory to write (default `./<goal>-export`); it must not exist or be empty.
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON (what was written) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run a goal in simulated time against the simulated phone, with scripted approvals,
    /// answers and runtime replies; print the timeline (same input, same output). No daemon
    /// needed.
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

/// A goal file's JSON, read strictly: a key given twice is refused, naming it.
fn read_json(path: &Path) -> Result<Value> {
    openphone_goals::spec::parse_goal_file(&read(path)?)
        .map_err(|e| anyhow::anyhow!("{}: {}: {}", path.display(), e.field, e.message))
}

/// Runs a `goals` subcommand.
pub fn run(cmd: GoalsCommand) -> Result<ExitCode> {
    match cmd {
        GoalsCommand::Create {
            file,
            device,
            deadline,
            data_dir,
            json,
        } => {
            // The simulator's file wraps the goal: `{"goal": …, "replies": …}`.
            let mut spec = openphone_goals::spec::goal_in_file(read_json(&file)?);
            if let (Some(device), Some(obj)) = (device, spec.as_object_mut()) {
                obj.insert("device_id".to_owned(), serde_json::Value::String(device));
            }
            if let (Some(raw), Some(obj)) = (deadline, spec.as_object_mut()) {
                let at = crate::output::when_ms("--deadline", &raw)?;
                obj.remove("deadline_in");
                obj.insert("deadline_at".to_owned(), json!(at));
            }
            one::<GoalsCreate>(&data_dir, GoalsCreateParams { goal: spec }, json, "created")
        }
        GoalsCommand::Plan {
            goal,
            file,
            data_dir,
            json,
        } => {
            let Some(plan) = openphone_goals::spec::plan_in_file(read_json(&file)?) else {
                bail!(
                    "{}: expected a list of actions or {{\"plan\": [...]}}",
                    file.display()
                );
            };
            let params = GoalsPlanParams {
                goal_id: goal,
                plan,
            };
            one::<GoalsPlan>(&data_dir, params, json, "planned")
        }
        GoalsCommand::List {
            state,
            limit,
            data_dir,
            json,
        } => with_client(&data_dir, |mut client| async move {
            let list = client
                .call::<GoalsList>(GoalsListParams { state, limit })
                .await?;
            client.close().await;
            if json {
                print_json(&list)?;
            } else if list.goals.is_empty() {
                println!("no goals");
            } else {
                // In a fleet, a HOST and a PHONE column before each goal.
                let columns = FleetColumns::of(
                    list.goals
                        .iter()
                        .map(|g| (g.host.as_ref(), g.device_id.as_deref())),
                );
                if let Some(columns) = &columns {
                    println!("{}", columns.header("GOAL"));
                }
                for g in &list.goals {
                    let cells = columns
                        .map(|c| c.cells(g.host.as_ref(), g.device_id.as_deref()))
                        .unwrap_or_default();
                    println!(
                        "{cells}{} {} {}/{} done{}{}: {}",
                        g.goal_id,
                        g.state,
                        g.done,
                        g.total,
                        if g.blockers > 0 {
                            format!(", {} blocker(s)", g.blockers)
                        } else {
                            String::new()
                        },
                        g.deadline_at
                            .map(|d| format!(", deadline {}", when(d)))
                            .unwrap_or_default(),
                        g.objective
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }),
        GoalsCommand::Show {
            goal,
            data_dir,
            json,
        } => with_client(&data_dir, |mut client| async move {
            let got = client
                .call::<GoalsGet>(GoalIdParams { goal_id: goal })
                .await?;
            client.close().await;
            if json {
                print_json(&got)?;
            } else {
                print_goal(&got.goal);
                if let Some(last) = got.reports.last() {
                    println!(
                        "latest report (#{}, {} {}):",
                        last.seq, last.channel, last.delivery
                    );
                    for line in last.text.lines() {
                        println!("  {line}");
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }),
        GoalsCommand::Tick {
            goal,
            data_dir,
            json,
        } => with_client(&data_dir, |mut client| async move {
            let ticked = client
                .call::<GoalsTick>(GoalIdParams { goal_id: goal })
                .await?;
            client.close().await;
            if json {
                print_json(&ticked)?;
            } else {
                println!(
                    "ticked: {} transition(s), {} report(s); next wake: {}",
                    ticked.transitions,
                    ticked.reports,
                    ticked.next_wake_at.map_or_else(|| "none".to_owned(), when)
                );
                print_goal(&ticked.goal);
            }
            Ok(ExitCode::SUCCESS)
        }),
        GoalsCommand::Approve {
            goal,
            action,
            data_dir,
            json,
        } => with_client(&data_dir, |mut client| async move {
            let got = client
                .call::<GoalsGet>(GoalIdParams {
                    goal_id: goal.clone(),
                })
                .await?;
            let found = got.goal.actions.into_iter().find(|a| a.id == action);
            let Some(found) = found else {
                bail!("goal_action_not_found: goal {goal} has no action {action:?}");
            };
            if found.state != "NEEDS_APPROVAL" {
                bail!(
                    "action {action} of {goal} does not wait for an approval (it is {})",
                    found.state
                );
            }
            let Some(cid) = found
                .attempts
                .last()
                .and_then(|a| a.confirmation_id.clone())
            else {
                bail!(
                    "action {action} of {goal} has no confirmation yet; try `openphone goals tick {goal}`"
                );
            };
            let result = client
                .call::<ConfirmationsResolve>(ConfirmationsResolveParams {
                    confirmation_id: cid.clone(),
                    decision: ConfirmDecision::Approve,
                })
                .await?;
            client.close().await;
            if json {
                print_json(&result)?;
            } else {
                let status = serde_json::to_value(result.status)?;
                println!(
                    "approved {action} ({cid}): {}",
                    status.as_str().unwrap_or("?")
                );
            }
            Ok(ExitCode::SUCCESS)
        }),
        GoalsCommand::Answer {
            goal,
            action,
            text,
            data_dir,
            json,
        } => {
            let params = GoalsAnswerParams {
                goal_id: goal,
                action_id: action,
                text,
            };
            one::<GoalsAnswer>(&data_dir, params, json, "answered")
        }
        GoalsCommand::Pause {
            goal,
            data_dir,
            json,
        } => one::<GoalsPause>(&data_dir, GoalIdParams { goal_id: goal }, json, "paused"),
        GoalsCommand::Resume {
            goal,
            data_dir,
            json,
        } => one::<GoalsResume>(&data_dir, GoalIdParams { goal_id: goal }, json, "resumed"),
        GoalsCommand::Retry {
            goal,
            action,
            data_dir,
            json,
        } => one::<GoalsRetry>(
            &data_dir,
            GoalActionParams {
                goal_id: goal,
                action_id: action,
            },
            json,
            "retrying",
        ),
        GoalsCommand::Abort {
            goal,
            action,
            data_dir,
            json,
        } => one::<GoalsAbort>(
            &data_dir,
            GoalActionParams {
                goal_id: goal,
                action_id: action,
            },
            json,
            "aborted",
        ),
        GoalsCommand::Explain {
            goal,
            action,
            data_dir,
            json,
        } => with_client(&data_dir, |mut client| async move {
            let explained = client
                .call::<GoalsExplain>(GoalsExplainParams {
                    goal_id: goal,
                    action_id: action,
                })
                .await?;
            client.close().await;
            if json {
                print_json(&explained)?;
            } else {
                for line in &explained.lines {
                    println!("{line}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }),
        GoalsCommand::Export {
            goal,
            out,
            data_dir,
            json,
        } => export(&data_dir, &goal, out, json),
        GoalsCommand::Simulate {
            goal,
            scenario,
            approvals,
        } => {
            let input: SimInput = serde_json::from_value(read_json(&goal)?)
                .with_context(|| format!("{} is not a goal file", goal.display()))?;
            let phone = match &scenario {
                Some(path) => Some(
                    SimState::from_file(path)
                        .with_context(|| format!("loading the scenario {}", path.display()))?,
                ),
                None => None,
            };
            let rules: Rules = match &approvals {
                Some(path) => serde_json::from_value(read_json(path)?)
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

/// `goals export`: the daemon rebuilds the artifacts; the audit slice and the chain's
/// verification are read from the store directly (read-only).
fn export(data_dir: &DataDir, goal: &str, out: Option<PathBuf>, json: bool) -> Result<ExitCode> {
    let dir = data_dir.resolve()?;
    let out = out.unwrap_or_else(|| PathBuf::from(format!("{goal}-export")));
    if out.exists()
        && std::fs::read_dir(&out)
            .with_context(|| format!("reading {}", out.display()))?
            .next()
            .is_some()
    {
        bail!(
            "{} exists and is not empty; pass another --out",
            out.display()
        );
    }
    let goal_id = goal.to_owned();
    let exported = block_on(async move {
        let mut client = DaemonClient::connect(&dir).await?;
        let exported = client.call::<GoalsExport>(GoalIdParams { goal_id }).await?;
        client.close().await;
        Ok(exported)
    })?;
    let mut written = Vec::new();
    let mut write = |rel: &str, bytes: &[u8]| -> Result<()> {
        let path = out.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        written.push(rel.to_owned());
        Ok(())
    };
    for file in &exported.files {
        // Names come from the daemon: only plain relative paths are written.
        if Path::new(&file.path)
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            bail!(
                "the daemon sent an export file with an unsafe path {:?}",
                file.path
            );
        }
        write(&file.path, file.content.as_bytes())?;
    }
    write(
        "goal.json",
        serde_json::to_string_pretty(&serde_json::to_value(&exported.goal)?)?.as_bytes(),
    )?;
    write(
        "reports.json",
        serde_json::to_string_pretty(&exported.reports)?.as_bytes(),
    )?;
    // On a fleet's shared store: every host's records of the goal, and every chain verified.
    let (slice, verify) = crate::audit_cmd::goal_slice(&data_dir.resolve()?, goal)?;
    let records = slice.iter().filter(|b| **b == b'\n').count();
    write("audit.jsonl", &slice)?;
    write(
        "audit-verify.json",
        serde_json::to_string_pretty(&verify)?.as_bytes(),
    )?;
    if json {
        print_json(&json!({
            "out": out.display().to_string(),
            "files": written,
            "audit_records": records,
            "audit_intact": verify.is_intact(),
        }))?;
    } else {
        println!(
            "exported {goal} to {}: {} file(s), {records} audit record(s); audit chain {}",
            out.display(),
            written.len(),
            if verify.is_intact() {
                "intact"
            } else {
                "BROKEN"
            }
        );
    }
    Ok(if verify.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `pause`, `resume`, `retry`, `abort`: one change, printed as `<done>: <goal>`.
fn one<M>(data_dir: &DataDir, params: M::Params, json: bool, done: &'static str) -> Result<ExitCode>
where
    M: Method<Result = GoalResult>,
    M::Params: Send + 'static,
{
    with_client(data_dir, |mut client| async move {
        let result = client.call::<M>(params).await?;
        client.close().await;
        changed(&result, json, done)
    })
}

fn changed(result: &GoalResult, json: bool, done: &str) -> Result<ExitCode> {
    if json {
        print_json(result)?;
    } else {
        println!("{done}: {}", result.goal.id);
        print_goal(&result.goal);
    }
    Ok(ExitCode::SUCCESS)
}

fn with_client<F, Fut>(data_dir: &DataDir, f: F) -> Result<ExitCode>
where
    F: FnOnce(DaemonClient) -> Fut,
    Fut: std::future::Future<Output = Result<ExitCode>>,
{
    let dir = data_dir.resolve()?;
    block_on(async move {
        let client = DaemonClient::connect(&dir).await?;
        f(client).await
    })
}

/// The goal for a person: objective, state, actions, blockers with their commands.
fn print_goal(goal: &GoalRecord) {
    println!("{} [{}] {}", goal.id, goal.state, goal.objective);
    if let Some(deadline) = goal.deadline_at {
        println!("  deadline: {}", when(deadline));
    }
    for c in &goal.checkpoints {
        println!(
            "  checkpoint {} {}: {} [{}]",
            c.label,
            when(c.at),
            display_text(&c.contract),
            c.outcome
        );
    }
    for a in &goal.actions {
        println!("  - {} [{}] {}", a.id, a.state, a.title);
        if let Some(p) = &a.proposal {
            println!("    proposed by the planner ({}): {}", p.by, p.why);
        }
    }
    for b in &goal.blockers {
        println!(
            "  blocked ({}): {}\n    resolve: {}",
            b.kind, b.reason, b.how_to_resolve
        );
    }
}
