//! The heartbeat (issue 32 item 9; seed 001: "wake the agent runtime for maintenance; silent
//! by default"). A `heartbeat` job's run is [`MaintenanceRunner`], which does three things
//! and reports each in the run's result (the job's `last_result`, its run artifact, and the
//! `assistant.background_job.maintenance` audit record the daemon writes):
//!
//! 1. **Model health** — the agent runtime is woken with one tiny, tool-less request to the
//!    background model ([`HealthProbe`]); a failure is reported as `model: FAILED (<why>)` in
//!    the result and the job's progress line, never as a failed run (a heartbeat that failed
//!    six times would give up for good, and the next one is what tells you the model is back).
//! 2. **Stale-state repair** — attempts the ledger still shows `running` while their job is not
//!    running that attempt (a report lost to a crash) are closed as `interrupted`; the
//!    artifacts of every live job are rendered again from the store (`job.json`, `status.md`,
//!    a run file a crash left unwritten).
//! 3. **Retention** — artifact directories of jobs no longer stored are removed, and each job
//!    keeps the files of its newest [`KEEP_RUNS`] runs.
//!
//! Silent by default: the `heartbeat` type's default delivery mode is `silent`.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use openphone_store::{AttemptFinish, JobFilter, RunOutcome, Store};
use serde_json::{Value, json};

use crate::artifacts::JobArtifacts;
use crate::runner::{JobRunner, RunContext, RunResult};

/// Run files kept per job by the heartbeat's retention: the artifacts' own number, so the
/// writer renders exactly the runs the retention keeps.
pub use crate::artifacts::KEEP_RUNS;
/// Jobs looked at per heartbeat (live ones first).
const JOBS_PER_HEARTBEAT: usize = 500;

/// A check that the agent runtime's model answers.
#[async_trait]
pub trait HealthProbe: Send + Sync + 'static {
    /// The model checked (for the report).
    fn model(&self) -> String;
    /// One request; `Err` says why it failed.
    async fn check(&self) -> Result<(), String>;
}

/// The `heartbeat` runner: the daemon's maintenance.
#[derive(Clone)]
pub struct MaintenanceRunner {
    store: Arc<Store>,
    artifacts: JobArtifacts,
    probe: Option<Arc<dyn HealthProbe>>,
}

impl std::fmt::Debug for MaintenanceRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaintenanceRunner")
            .field("artifacts", &self.artifacts)
            .field("probe", &self.probe.as_ref().map(|p| p.model()))
            .finish()
    }
}

/// What one heartbeat did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MaintenanceReport {
    /// `None` without a model; else whether it answered, and why not.
    pub model: Option<(String, Result<(), String>)>,
    /// Ledger attempts closed as interrupted.
    pub attempts_closed: usize,
    /// Jobs whose artifacts were rendered again.
    pub jobs_rendered: usize,
    /// Artifact files the rendering changed.
    pub files_written: usize,
    /// Artifact directories of jobs no longer stored, removed.
    pub orphans_removed: usize,
    /// Run files past [`KEEP_RUNS`], removed.
    pub runs_pruned: usize,
    /// What could not be done.
    pub problems: Vec<String>,
}

impl MaintenanceReport {
    /// The report as JSON (the audit record's data).
    pub fn to_json(&self) -> Value {
        json!({
            "model": self.model.as_ref().map(|(model, outcome)| json!({
                "model": model,
                "ok": outcome.is_ok(),
                "error": outcome.as_ref().err(),
            })),
            "attempts_closed": self.attempts_closed,
            "jobs_rendered": self.jobs_rendered,
            "files_written": self.files_written,
            "orphans_removed": self.orphans_removed,
            "runs_pruned": self.runs_pruned,
            "problems": self.problems,
        })
    }

    /// The one-line result: `maintenance: model ok (…); …`.
    pub fn line(&self) -> String {
        let model = match &self.model {
            None => "model: not configured".to_owned(),
            Some((model, Ok(()))) => format!("model: ok ({model})"),
            Some((model, Err(why))) => format!("model: FAILED ({model}: {why})"),
        };
        let mut line = format!(
            "maintenance: {model}; repair: {} stale attempt(s) closed, {} job(s) re-rendered \
             ({} file(s) written); retention: {} orphan artifact dir(s), {} old run file(s) removed",
            self.attempts_closed,
            self.jobs_rendered,
            self.files_written,
            self.orphans_removed,
            self.runs_pruned
        );
        if !self.problems.is_empty() {
            line.push_str("; problems: ");
            line.push_str(&self.problems.join("; "));
        }
        line
    }
}

impl MaintenanceRunner {
    /// Maintenance over `store` and `artifacts`, checking the model with `probe` (none without
    /// a configured model).
    pub fn new(
        store: Arc<Store>,
        artifacts: JobArtifacts,
        probe: Option<Arc<dyn HealthProbe>>,
    ) -> MaintenanceRunner {
        MaintenanceRunner {
            store,
            artifacts,
            probe,
        }
    }

    /// One round of maintenance at `now_ms` (`running_job`: the heartbeat's own job and
    /// attempt, left alone).
    pub async fn maintain(
        &self,
        now_ms: i64,
        running_job: Option<(i64, i64)>,
    ) -> MaintenanceReport {
        let mut report = MaintenanceReport::default();
        if let Some(probe) = &self.probe {
            report.model = Some((probe.model(), probe.check().await));
        }
        let store = Arc::clone(&self.store);
        let artifacts = self.artifacts.clone();
        let offline = tokio::task::spawn_blocking(move || {
            let mut report = MaintenanceReport::default();
            repair_and_prune(&store, &artifacts, now_ms, running_job, &mut report);
            report
        })
        .await;
        match offline {
            Ok(offline) => {
                report.attempts_closed = offline.attempts_closed;
                report.jobs_rendered = offline.jobs_rendered;
                report.files_written = offline.files_written;
                report.orphans_removed = offline.orphans_removed;
                report.runs_pruned = offline.runs_pruned;
                report.problems = offline.problems;
            }
            Err(e) => report
                .problems
                .push(format!("the maintenance task failed: {e}")),
        }
        report
    }
}

/// Repair and retention, off the async threads.
fn repair_and_prune(
    store: &Store,
    artifacts: &JobArtifacts,
    now_ms: i64,
    running_job: Option<(i64, i64)>,
    report: &mut MaintenanceReport,
) {
    let jobs = match store.list_jobs(&JobFilter {
        limit: Some(JOBS_PER_HEARTBEAT),
        ..JobFilter::default()
    }) {
        Ok(jobs) => jobs,
        Err(e) => {
            report.problems.push(format!("reading jobs: {e}"));
            return;
        }
    };
    for row in &jobs {
        let id = row.job.id;
        let runs = match store.job_runs(id) {
            Ok(runs) => runs,
            Err(e) => {
                report
                    .problems
                    .push(format!("reading job {id}'s runs: {e}"));
                continue;
            }
        };
        for run in runs.iter().filter(|r| r.outcome == RunOutcome::Running) {
            let current =
                row.job.status == openphone_store::JobStatus::Running && row.attempt == run.attempt;
            if current || running_job == Some((id, run.attempt)) {
                continue;
            }
            let finish = AttemptFinish {
                attempt: run.attempt,
                owner: run.owner.clone(),
                outcome: RunOutcome::Interrupted,
                reason: "closed by the heartbeat: its job is no longer running this attempt"
                    .to_owned(),
                output_ref: String::new(),
                finished_at: now_ms,
            };
            // Checked against the job's current row in the same statement: `row` was read
            // before, and an attempt claimed since is its job's live run, not a stale one.
            match store.close_stale_job_run(id, &finish) {
                Ok(true) => report.attempts_closed += 1,
                Ok(false) => {}
                Err(e) => report
                    .problems
                    .push(format!("closing job {id}'s attempt: {e}")),
            }
        }
        if row.job.status.is_live() || !artifacts.dir(id).exists() {
            match artifacts.write(store, id, now_ms) {
                Ok(written) => {
                    report.jobs_rendered += 1;
                    report.files_written += written.files;
                }
                Err(e) => report.problems.push(format!("rendering job {id}: {e}")),
            }
        }
    }
    prune(store, artifacts.root(), KEEP_RUNS, report);
}

/// Removes the artifact directories of jobs no longer stored and, in every job's `runs/`, the
/// files past the newest `keep`.
pub fn prune(store: &Store, root: &Path, keep: usize, report: &mut MaintenanceReport) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i64>().ok())
        else {
            continue;
        };
        match store.get_job(id) {
            Ok(None) => match std::fs::remove_dir_all(&path) {
                Ok(()) => report.orphans_removed += 1,
                Err(e) => report
                    .problems
                    .push(format!("removing {}: {e}", path.display())),
            },
            Ok(Some(_)) => {
                let Ok(runs) = std::fs::read_dir(path.join("runs")) else {
                    continue;
                };
                let mut files: Vec<_> = runs
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "json"))
                    .collect();
                // Zero-padded attempt numbers: the name order is the attempt order.
                files.sort();
                let excess = files.len().saturating_sub(keep);
                for old in files.into_iter().take(excess) {
                    match std::fs::remove_file(&old) {
                        Ok(()) => report.runs_pruned += 1,
                        Err(e) => report
                            .problems
                            .push(format!("removing {}: {e}", old.display())),
                    }
                }
            }
            Err(e) => report.problems.push(format!("reading job {id}: {e}")),
        }
    }
}

#[async_trait]
impl JobRunner for MaintenanceRunner {
    async fn run(&self, ctx: RunContext) -> RunResult {
        let report = self
            .maintain(ctx.clock.now_ms(), Some((ctx.job.id, ctx.attempt)))
            .await;
        let summary = match &report.model {
            Some((model, Err(why))) => Some(format!("Model check failed ({model}): {why}")),
            _ => None,
        };
        RunResult::Completed {
            result: report.line(),
            summary,
            output_ref: String::new(),
        }
    }
}
