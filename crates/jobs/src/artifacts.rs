//! Artifacts of background jobs (issue 32 item 8; seed 002 §5D: every long task leaves
//! structured artifacts, as goals do). Under `<data dir>/artifacts/jobs/<job id>/`:
//!
//! - `job.json` — the job's spec: type, title, prompt, payload, schedule, session target,
//!   delivery, creator, creation time;
//! - `runs/<attempt>.json` (the attempt zero-padded to 6 digits) — one file per run: its
//!   ledger row (due, started, finished, outcome, reason), the prompt it ran, the tool calls it
//!   made (tool, status, error code, request id, result digest; the arguments unless the
//!   command reads private data, whose arguments are kept only as a digest), the model's answer
//!   and the run's result or failure;
//! - `status.md` — for a person: status, phase, progress, next run, failures, the latest result,
//!   the last runs.
//!
//! Every file is a deterministic render of the store (the job, its attempt ledger, the
//! transcript of `background-job:<id>`), written atomically (temporary file, then rename) and
//! only when its bytes change; a run's file, once its run ended, is never rewritten. The
//! heartbeat's maintenance ([`crate::maintenance`]) prunes them.

use std::io::Write;
use std::path::{Path, PathBuf};

use openphone_protocol::{Registry, background_job_session, display_text};
use openphone_store::{JobRun, RunOutcome, Store, StoredJob, TranscriptEntry};
use serde_json::{Map, Value, json};

/// The longest answer or result text kept in a run's file (characters).
const TEXT_MAX_CHARS: usize = 8_000;
/// Runs listed in `status.md`.
const STATUS_RUNS: usize = 10;
/// Run files kept per job: [`JobArtifacts::write`] renders only the newest this many runs of
/// the ledger (which keeps more), and the heartbeat's retention
/// ([`crate::maintenance::prune`]) removes the files past them — one number, so the writer
/// never recreates what the heartbeat removed.
pub const KEEP_RUNS: usize = 50;
/// Makes the temporary file names of concurrent writers in one process distinct.
static TEMP_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The artifacts of every job, under one root (`<data dir>/artifacts/jobs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobArtifacts {
    root: PathBuf,
}

/// What [`JobArtifacts::write`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Files written (their bytes changed).
    pub files: usize,
}

impl JobArtifacts {
    /// The artifacts under `<data_dir>/artifacts/jobs`.
    pub fn in_data_dir(data_dir: &Path) -> JobArtifacts {
        JobArtifacts::at(data_dir.join("artifacts").join("jobs"))
    }

    /// The artifacts under `root`.
    pub fn at(root: PathBuf) -> JobArtifacts {
        JobArtifacts { root }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of job `id`.
    pub fn dir(&self, id: i64) -> PathBuf {
        self.root.join(id.to_string())
    }

    /// The file of `attempt` of job `id`.
    pub fn run_file(&self, id: i64, attempt: i64) -> PathBuf {
        self.dir(id).join("runs").join(format!("{attempt:06}.json"))
    }

    /// Renders job `id` from `store`: `job.json`, `status.md`, and the file of each of the
    /// newest [`KEEP_RUNS`] runs whose file is missing or still shows it running (older runs'
    /// files are the heartbeat's to remove, never written again). A job no longer stored
    /// writes nothing.
    pub fn write(&self, store: &Store, id: i64, now_ms: i64) -> std::io::Result<Written> {
        let io = |e: openphone_store::StoreError| std::io::Error::other(e.to_string());
        let Some(row) = store.get_job(id).map_err(io)? else {
            return Ok(Written::default());
        };
        let runs = store.job_runs(id).map_err(io)?;
        let mut written = Written::default();
        let dir = self.dir(id);
        let mut spec = serde_json::to_vec_pretty(&spec(&row)).map_err(std::io::Error::other)?;
        spec.push(b'\n');
        written.files += usize::from(write_if_changed(&dir.join("job.json"), &spec)?);
        let mut transcript: Option<Vec<TranscriptEntry>> = None;
        for run in runs.iter().skip(runs.len().saturating_sub(KEEP_RUNS)) {
            let path = self.run_file(id, run.attempt);
            if finished_file(&path) {
                continue;
            }
            let entries = match &transcript {
                Some(entries) => entries,
                None => {
                    transcript.insert(store.transcript(&background_job_session(id)).map_err(io)?)
                }
            };
            let latest = runs.last().map(|r| r.attempt) == Some(run.attempt);
            let record = run_record(&row, run, entries, latest);
            let mut bytes = serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            written.files += usize::from(write_if_changed(&path, &bytes)?);
        }
        let status = status_md(&row, &runs, now_ms);
        written.files += usize::from(write_if_changed(&dir.join("status.md"), status.as_bytes())?);
        Ok(written)
    }
}

/// Whether the run file at `path` records an ended run (it is then never rewritten) — a
/// dispatched run is not over until its runtime replies.
fn finished_file(path: &Path) -> bool {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .is_some_and(|v| {
            v.get("finished_at").is_some_and(|f| !f.is_null())
                && v.get("outcome").and_then(Value::as_str) != Some(RunOutcome::Dispatched.as_str())
        })
}

/// `job.json`: what the job is, not where it is.
pub fn spec(row: &StoredJob) -> Value {
    let job = &row.job;
    json!({
        "id": job.id,
        "type": job.job_type.as_str(),
        "title": job.title,
        "prompt": job.prompt,
        "payload_json": job.payload_json,
        "schedule_json": job.schedule_json,
        "session_target": job.session_target,
        "delivery_json": job.delivery_json,
        "created_by": row.created_by,
        "created_at": job.created_at,
    })
}

/// One run's record: the ledger row, the prompt, the tool calls, the answer and the outcome.
/// `latest`: this is the job's latest attempt, so the job's `last_result` is this run's.
pub fn run_record(
    row: &StoredJob,
    run: &JobRun,
    transcript: &[TranscriptEntry],
    latest: bool,
) -> Value {
    let job = &row.job;
    let calls = tool_calls(transcript, run.attempt);
    let answer = answer(transcript, run.attempt);
    let ended = run.finished_at.is_some();
    let result = (ended && latest && run.outcome != RunOutcome::Parked)
        .then(|| cut(&job.last_result, TEXT_MAX_CHARS));
    json!({
        "job_id": job.id,
        "attempt": run.attempt,
        "type": job.job_type.as_str(),
        "prompt": job.prompt,
        "intended_at": run.intended_at,
        "catch_up": run.catch_up,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "outcome": run.outcome.as_str(),
        "failure": (!run.reason.is_empty()).then(|| run.reason.clone()),
        "tool_calls": calls,
        "answer": answer,
        "result": result,
        "output_ref": (!run.output_ref.is_empty()).then(|| run.output_ref.clone()),
    })
}

/// The transcript entries of one attempt: from the opening message that names it to the
/// status entry that closes it.
fn attempt_entries(transcript: &[TranscriptEntry], attempt: i64) -> &[TranscriptEntry] {
    let opens = |e: &TranscriptEntry| {
        e.role == "user" && e.body.get("attempt").and_then(Value::as_i64) == Some(attempt)
    };
    let Some(start) = transcript.iter().position(opens) else {
        return &[];
    };
    let end = transcript[start..]
        .iter()
        .position(|e| {
            e.role == "status" && e.body.get("attempt").and_then(Value::as_i64) == Some(attempt)
        })
        .map_or(transcript.len(), |offset| start + offset + 1);
    &transcript[start..end]
}

/// The tool calls of one attempt: each call the model made (its name and arguments, the
/// arguments of a private command as a digest only) with the stored answer's status.
fn tool_calls(transcript: &[TranscriptEntry], attempt: i64) -> Vec<Value> {
    let registry = Registry::embedded().ok();
    let entries = attempt_entries(transcript, attempt);
    let mut out = Vec::new();
    for entry in entries.iter().filter(|e| e.role == "assistant") {
        let calls = entry
            .body
            .pointer("/message/tool_calls")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for call in calls {
            let id = call.get("id").and_then(Value::as_str).unwrap_or("");
            let name = call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let raw = call
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .unwrap_or("");
            let arguments: Value = serde_json::from_str(raw).unwrap_or(Value::String(raw.into()));
            let answer = entries.iter().find(|e| {
                e.role == "tool"
                    && e.body
                        .pointer("/message/tool_call_id")
                        .and_then(Value::as_str)
                        == Some(id)
            });
            let meta = |key: &str| answer.and_then(|a| a.body.get(key)).cloned();
            let command = meta("tool")
                .and_then(|t| t.as_str().map(str::to_owned))
                .or_else(|| {
                    registry
                        .and_then(|r| r.resolve(name))
                        .map(|c| c.name.clone())
                });
            let private = command
                .as_deref()
                .and_then(|c| registry.and_then(|r| r.resolve(c)))
                .is_some_and(|c| c.default_exposure.as_str().contains("private"));
            let mut record = Map::new();
            record.insert("tool".into(), json!(name));
            record.insert("command".into(), json!(command));
            record.insert(
                "arguments_digest".into(),
                json!(openphone_protocol::digest::params_digest(name, &arguments).ok()),
            );
            if !private {
                record.insert("arguments".into(), arguments);
            }
            record.insert(
                "status".into(),
                meta("status").unwrap_or(json!("not_answered")),
            );
            for key in [
                "error_code",
                "request_id",
                "result_digest",
                "confirmation_id",
            ] {
                if let Some(value) = meta(key).filter(|v| !v.is_null()) {
                    record.insert(key.into(), value);
                }
            }
            out.push(Value::Object(record));
        }
    }
    out
}

/// The model's last text of one attempt (its answer), if any.
fn answer(transcript: &[TranscriptEntry], attempt: i64) -> Option<String> {
    attempt_entries(transcript, attempt)
        .iter()
        .rev()
        .filter(|e| e.role == "assistant")
        .find_map(|e| {
            e.body
                .pointer("/message/content")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(|t| cut(t, TEXT_MAX_CHARS))
        })
}

fn cut(text: &str, max: usize) -> String {
    crate::model::truncate_chars(text, max)
}

/// `status.md`: the job for a person (text escaped as every notification is).
pub fn status_md(row: &StoredJob, runs: &[JobRun], now_ms: i64) -> String {
    let job = &row.job;
    let mut out = format!("# Job {}: {}\n\n", job.id, display_text(&job.title));
    out.push_str(&format!(
        "**Status:** {} ({}) — {}\n\n",
        job.status.as_str(),
        job.phase.as_str(),
        display_text(&job.progress_text)
    ));
    out.push_str(&format!(
        "**Type:** {} · **created by** {} · **delivery** {}\n\n",
        job.job_type.as_str(),
        row.created_by,
        job.delivery_json
            .get("mode")
            .and_then(Value::as_str)
            .unwrap_or("default")
    ));
    if job.next_run_at > 0 && job.status.is_live() {
        let minutes = (job.next_run_at - now_ms).max(0) / 60_000;
        out.push_str(&format!(
            "**Next run:** at {} (in {minutes} min)\n\n",
            job.next_run_at
        ));
    }
    if job.failure_count > 0 {
        out.push_str(&format!("**Failures in a row:** {}\n\n", job.failure_count));
    }
    if !job.pending_confirmation_id.is_empty() {
        out.push_str(&format!(
            "**Waiting for your review:** `openphone jobs show {}` (review {})\n\n",
            job.id, job.pending_confirmation_id
        ));
    }
    out.push_str("## Latest result\n\n");
    if job.last_result.trim().is_empty() {
        out.push_str("None yet.\n");
    } else {
        out.push_str("```\n");
        out.push_str(&display_text(&cut(&job.last_result, 2_000)));
        out.push_str("\n```\n");
    }
    out.push_str("\n## Runs\n\n");
    if runs.is_empty() {
        out.push_str("None yet.\n");
    }
    for run in runs.iter().rev().take(STATUS_RUNS) {
        let reason = if run.reason.is_empty() {
            String::new()
        } else {
            format!(": {}", display_text(&run.reason))
        };
        out.push_str(&format!(
            "- attempt {} — {}{reason} (started {}, `runs/{:06}.json`)\n",
            run.attempt,
            run.outcome.as_str(),
            run.started_at,
            run.attempt
        ));
    }
    out
}

/// Writes `bytes` to `path` atomically (a temporary file of its own in the same directory,
/// synced, then renamed over it) unless it already holds exactly them. Returns whether it wrote.
pub fn write_if_changed(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    if std::fs::read(path).is_ok_and(|existing| existing == bytes) {
        return Ok(false);
    }
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("an artifact path has no directory"))?;
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // One temporary file per write (process id and a counter): two writers of the same file
    // never share one, so the file renamed into place is always one writer's whole bytes.
    let serial = TEMP_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{serial}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        // Best effort: a temporary file a failed write left is not an artifact.
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    Ok(true)
}
