//! `openphone jobs …`: background agent jobs (`agent-jobs.md`; endpoint `jobs.*`, operator
//! only) — create, list, show, runs, stop, pause, resume, wake, approve, deny — and
//! `jobs check-review`, which checks a stored background-confirmation record offline.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use openphone_protocol::display_text;
use openphone_protocol::endpoint::{
    JobEntry, JobIdParams, JobResult, JobsCreate, JobsCreateParams, JobsGet, JobsList,
    JobsListParams, JobsPause, JobsResume, JobsReview, JobsReviewParams, JobsStop, JobsWake,
    Method, NoParams, ReviewDecision,
};
use openphone_protocol::review::ReviewView;
use serde_json::{Map, Value, json};

use crate::client::DaemonClient;
use crate::data_dir::DataDir;
use crate::output::fleet_columns::{FleetColumns, host_text};
use crate::output::{block_on, duration_ms, now_ms, print_json, when, when_ms};

/// `openphone jobs` subcommands.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Create a background job: an agent turn (or a system event, a heartbeat) that runs
    /// later, once or every `--every`. Its state-changing tool calls wait for your review.
    Create {
        /// A short name, shown in lists and notifications.
        #[arg(long)]
        title: String,
        /// What the agent should do each time the job runs.
        #[arg(long)]
        prompt: Option<String>,
        /// agent_turn (default), system_event or heartbeat.
        #[arg(long = "type", value_name = "TYPE")]
        job_type: Option<String>,
        /// First run this long from now, e.g. `30s`, `10m`, `2h` (default: soon).
        #[arg(long, value_name = "DURATION")]
        r#in: Option<String>,
        /// First run at this time: RFC 3339 (`2026-12-01T09:00:00+01:00`), a local time
        /// (`09:00`, `tomorrow 09:00`, `fri 18:30`), relative (`in 2h`) or Unix milliseconds.
        #[arg(long, value_name = "WHEN", conflicts_with = "in")]
        at: Option<String>,
        /// Repeat every DURATION (at least 15 s), e.g. `1h`.
        #[arg(long, value_name = "DURATION")]
        every: Option<String>,
        /// notification (default for agent turns), silent or none.
        #[arg(long)]
        delivery: Option<String>,
        /// The exact words of the completion notification.
        #[arg(long)]
        notification_text: Option<String>,
        /// main (default), isolated, or `session:<id>`.
        #[arg(long)]
        session_target: Option<String>,
        /// Structured input for the runs, a JSON object (passed to the agent as data).
        #[arg(long, value_name = "JSON")]
        payload: Option<String>,
        /// The phone its runs act on, by id (`openphone devices list`); needed only when the
        /// daemon drives several phones.
        #[arg(long, value_name = "ID")]
        device: Option<String>,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The jobs: live ones first by next run, then finished ones, newest first.
    List {
        /// Only jobs whose title or prompt contains this (any case).
        #[arg(long)]
        query: Option<String>,
        /// Only jobs with this status, e.g. awaiting_review.
        #[arg(long)]
        status: Option<String>,
        /// At most this many (default 20, at most 200).
        #[arg(long)]
        limit: Option<usize>,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// One job's full record, with the review it waits on.
    Show {
        job_id: i64,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// One job's attempts: when each was due, started and ended, and how.
    Runs {
        job_id: i64,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stop a job for good (a run in progress is told to stop; a pending review is closed).
    Stop {
        job_id: i64,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Pause a queued job: it keeps its place but does not run until resumed.
    Pause {
        job_id: i64,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Resume a paused job: it runs at the next wake.
    Resume {
        job_id: i64,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run the scheduler now: repair stale runs, start the jobs that are due.
    Wake {
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Approve the state-changing call a background job waits on (its review id from
    /// `jobs list --status awaiting_review` or `jobs show`). The stored call runs once.
    Approve {
        /// `job-confirm-…`.
        confirmation_id: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Deny it: nothing runs; the job goes on, told that you said no.
    Deny {
        /// `job-confirm-…`.
        confirmation_id: String,
        #[command(flatten)]
        data_dir: DataDir,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check a stored background-confirmation record (or a whole job record) offline:
    /// schema, field rules, both digests and the binding. Exit 0 valid, 1 invalid (the
    /// first failure named), 2 unreadable.
    CheckReview {
        /// The record as JSON (`-` for standard input).
        path: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `jobs` subcommand.
pub fn run(cmd: JobsCommand) -> Result<ExitCode> {
    match cmd {
        JobsCommand::Create {
            title,
            prompt,
            job_type,
            r#in,
            at,
            every,
            delivery,
            notification_text,
            session_target,
            payload,
            device,
            data_dir,
            json,
        } => {
            let mut args = Map::new();
            args.insert("title".into(), json!(title));
            if let Some(prompt) = prompt {
                args.insert("prompt".into(), json!(prompt));
            }
            if let Some(t) = job_type {
                args.insert("type".into(), json!(t));
            }
            if let Some(delay) = r#in {
                let ms = duration_ms("--in", &delay)?;
                args.insert("next_run_at".into(), json!(now_ms().saturating_add(ms)));
            }
            if let Some(at) = at {
                args.insert("next_run_at".into(), json!(when_ms("--at", &at)?));
            }
            if let Some(every) = every {
                let ms = duration_ms("--every", &every)?;
                args.insert("interval_ms".into(), json!(ms));
            }
            if let Some(mode) = delivery {
                args.insert("delivery".into(), json!({ "mode": mode }));
            }
            if let Some(text) = notification_text {
                args.insert("notification_text".into(), json!(text));
            }
            if let Some(target) = session_target {
                args.insert("session_target".into(), json!(target));
            }
            if let Some(device) = device {
                args.insert("device_id".into(), json!(device));
            }
            if let Some(payload) = payload {
                let value: Value =
                    serde_json::from_str(&payload).context("--payload must be a JSON object")?;
                if !value.is_object() {
                    bail!("--payload must be a JSON object");
                }
                args.insert("payload".into(), value);
            }
            with_client(&data_dir, |mut client| async move {
                let made = client.call::<JobsCreate>(JobsCreateParams(args)).await?;
                client.close().await;
                if json {
                    print_json(&made)?;
                } else {
                    println!("created: {}", job_line(&made.entry));
                }
                Ok(ExitCode::SUCCESS)
            })
        }
        JobsCommand::List {
            query,
            status,
            limit,
            data_dir,
            json,
        } => with_client(&data_dir, |mut client| async move {
            let list = client
                .call::<JobsList>(JobsListParams {
                    query,
                    status,
                    limit,
                })
                .await?;
            client.close().await;
            if json {
                print_json(&list)?;
            } else if list.jobs.is_empty() {
                println!("no jobs");
            } else {
                // In a fleet, a HOST and a PHONE column before each job (every daemon lists
                // the whole fleet's jobs).
                let columns = FleetColumns::of(
                    list.jobs
                        .iter()
                        .map(|e| (e.host.as_ref(), e.job.device_id.as_deref())),
                );
                if let Some(columns) = &columns {
                    println!("{}", columns.header("JOB"));
                }
                for entry in &list.jobs {
                    match &columns {
                        Some(columns) => println!(
                            "{}{}",
                            columns.cells(entry.host.as_ref(), entry.job.device_id.as_deref()),
                            job_line_in(entry, false)
                        ),
                        None => println!("{}", job_line(entry)),
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }),
        JobsCommand::Show {
            job_id,
            data_dir,
            json,
        } => with_client(&data_dir, |mut client| async move {
            let got = client.call::<JobsGet>(JobIdParams { job_id }).await?;
            client.close().await;
            if json {
                print_json(&got)?;
            } else {
                println!("{}", job_line(&got.entry));
                println!("  created by: {}", display_text(&got.entry.created_by));
                if let Some(host) = &got.entry.host {
                    println!("  host: {}", host_text(Some(host)));
                }
                let job = &got.entry.job;
                for (key, text) in [
                    ("prompt", &job.prompt),
                    ("progress_text", &job.progress_text),
                    ("last_result", &job.last_result),
                ] {
                    if !text.is_empty() {
                        println!("  {key}: {}", display_text(text));
                    }
                }
                if let Some(state) = &got.entry.delivery_state {
                    println!("  delivery: {state}");
                }
                if let Some(review) = review_line(&got.entry) {
                    println!("  {review}");
                }
                println!("  attempts: {}", got.runs.len());
            }
            Ok(ExitCode::SUCCESS)
        }),
        JobsCommand::Runs {
            job_id,
            data_dir,
            json,
        } => with_client(&data_dir, |mut client| async move {
            let got = client.call::<JobsGet>(JobIdParams { job_id }).await?;
            client.close().await;
            if json {
                print_json(&got.runs)?;
            } else if got.runs.is_empty() {
                println!("job {job_id} has not run yet");
            } else {
                for run in &got.runs {
                    println!(
                        "attempt {}: due {} started {} {}{}{}",
                        run.attempt,
                        when(run.intended_at),
                        when(run.started_at),
                        run.outcome.map_or("running", |o| o.as_str()),
                        if run.reason.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", run.reason)
                        },
                        if run.catch_up { " [catch-up]" } else { "" },
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }),
        JobsCommand::Stop {
            job_id,
            data_dir,
            json,
        } => with_client(&data_dir, |mut client| async move {
            let stopped = client.call::<JobsStop>(JobIdParams { job_id }).await?;
            client.close().await;
            if json {
                print_json(&stopped)?;
            } else if stopped.stopped {
                println!("stopped: {}", job_line(&stopped.entry));
            } else {
                println!("already ended: {}", job_line(&stopped.entry));
            }
            Ok(ExitCode::SUCCESS)
        }),
        JobsCommand::Pause {
            job_id,
            data_dir,
            json,
        } => change::<JobsPause>(&data_dir, job_id, json, "paused"),
        JobsCommand::Resume {
            job_id,
            data_dir,
            json,
        } => change::<JobsResume>(&data_dir, job_id, json, "resumed"),
        JobsCommand::Wake { data_dir, json } => with_client(&data_dir, |mut client| async move {
            let woke = client.call::<JobsWake>(NoParams {}).await?;
            client.close().await;
            if json {
                print_json(&woke)?;
            } else {
                println!(
                    "started {} job(s), repaired {}; next wake: {}",
                    woke.claimed.len(),
                    woke.repaired.len(),
                    woke.next_wake_at.map_or_else(|| "none".to_owned(), when)
                );
            }
            Ok(ExitCode::SUCCESS)
        }),
        JobsCommand::Approve {
            confirmation_id,
            data_dir,
            json,
        } => review(&data_dir, confirmation_id, ReviewDecision::Approve, json),
        JobsCommand::Deny {
            confirmation_id,
            data_dir,
            json,
        } => review(&data_dir, confirmation_id, ReviewDecision::Deny, json),
        JobsCommand::CheckReview { path, json } => Ok(crate::jobs_check::run(&path, json)),
    }
}

/// `jobs pause` and `jobs resume`: one job changed, printed as `<done>: <job line>`.
fn change<M>(data_dir: &DataDir, job_id: i64, json: bool, done: &'static str) -> Result<ExitCode>
where
    M: Method<Params = JobIdParams, Result = JobResult>,
{
    with_client(data_dir, |mut client| async move {
        let changed = client.call::<M>(JobIdParams { job_id }).await?;
        client.close().await;
        if json {
            print_json(&changed)?;
        } else {
            println!("{done}: {}", job_line(&changed.entry));
        }
        Ok(ExitCode::SUCCESS)
    })
}

fn review(
    data_dir: &DataDir,
    confirmation_id: String,
    decision: ReviewDecision,
    json: bool,
) -> Result<ExitCode> {
    let tapped = confirmation_id.clone();
    with_client(data_dir, |mut client| async move {
        let answer = client
            .call::<JobsReview>(JobsReviewParams {
                confirmation_id,
                decision,
            })
            .await?;
        client.close().await;
        let applied = answer.code == "background.review_resolved";
        if json {
            print_json(&answer)?;
        } else if answer.code == "job_not_found" {
            println!(
                "no such review: {} (review ids are shown by `openphone jobs list --status \
                 awaiting_review` and `openphone jobs show <job id>`)",
                tapped
            );
        } else if applied {
            println!(
                "{}: job {} resumes with {}",
                match decision {
                    ReviewDecision::Approve => "approved",
                    ReviewDecision::Deny => "denied",
                },
                answer
                    .job_id
                    .map_or_else(|| "?".to_owned(), |id| id.to_string()),
                answer.result_status.as_deref().unwrap_or("its result"),
            );
        } else {
            println!(
                "not applied: {}{}",
                answer.code,
                answer
                    .reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            );
        }
        Ok(if applied {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    })
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

/// `#7 agent_turn "Title" queued (waiting) next Sat 28 Nov 14:05 UTC (in 2 h): progress`.
fn job_line(entry: &JobEntry) -> String {
    job_line_in(entry, true)
}

/// [`job_line`], naming the phone only when `with_phone` (a list with a PHONE column does not).
fn job_line_in(entry: &JobEntry, with_phone: bool) -> String {
    let job = &entry.job;
    let mut line = format!(
        "#{} {} {:?} {} ({})",
        job.id,
        job.job_type,
        job.title.as_str(),
        job.status,
        job.phase,
    );
    // Whose job it is: `operator` (yours), `builtin` (your assistant's) or a runtime's id.
    line.push_str(&format!(" by {}", display_text(&entry.created_by)));
    // The phone its runs act on, on a daemon with several.
    if let Some(device) = job.device_id.as_ref().filter(|_| with_phone) {
        line.push_str(&format!(" on phone {}", display_text(device)));
    }
    let next = job.next_run_at;
    if next > 0 {
        line.push_str(&format!(" next {}", when(next)));
    }
    if !job.progress_text.is_empty() {
        line.push_str(&format!(": {}", display_text(&job.progress_text)));
    }
    if !job.pending_confirmation_id.is_empty() {
        line.push_str(&format!(" [review {}]", job.pending_confirmation_id));
    }
    line
}

/// The review a job waits on, as the user must see it (§9.4): the exact action and the time
/// left, and the commands that decide it.
fn review_line(entry: &JobEntry) -> Option<String> {
    let record = ReviewView::of(&entry.job.pending_tool_request_json)?;
    let id = record.confirmation_id()?;
    // Escaped when the review was made; shown through the one escape again whatever the
    // stored record holds.
    let summary = display_text(record.summary());
    let expires = when(record.expires_at());
    Some(format!(
        "review {id}: {summary} (expires {expires})\n  approve: openphone jobs approve {id}\n  deny:    openphone jobs deny {id}"
    ))
}
