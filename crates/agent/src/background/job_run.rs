//! One background run ([`Jobs::run`]): the job read (its resume, its creator's authority, its
//! context), its session opened, then the one loop ([`crate::turns`]) under the background
//! policy, and the run's end recorded and reported to the scheduler.
//!
//! The background policy: the stop signal and the run's deadline checked before every model
//! call and after every tool call; every message appended to the transcript of
//! `background-job:<id>`; every call through the bridge as `builtin` with the creator's
//! authority in the job's context, where a parked state-changing call ends the run for the
//! user's review, one that cannot be reviewed is refused, a confirmation is withdrawn at once,
//! and the reviewed call of a resumed run is answered with its stored outcome.

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use openphone_clock::Clock;
use openphone_core::{CreatorAuthority, Invocation, ToolBridge, waiting_on};
use openphone_jobs::limits::SUMMARY_MAX_CHARS;
use openphone_jobs::review::{ReviewProposal, ReviewRefused};
use openphone_jobs::{FailureReason, RunContext, RunResult};
use openphone_model::{Message, ModelClient, ModelError, StreamEvent, ToolCall};
use openphone_policy::Caller;
use openphone_protocol::{BUILTIN_RUNTIME_ID, Command, ToolRequest, background_job_session};
use openphone_store::Store;
use serde_json::{Value, json};
use tokio::time::Sleep;

use super::context::Sessions;
use super::report::{RUN_STOPPED, Trace, output_ref, result_text, summary_of};
use super::review::{Resume, blocked, eligible, refused_answer, replayed};
use crate::answers::{describe, is_parked};
use crate::prompt;
use crate::tools::ToolCatalogue;
use crate::transcript::{self, STATUS_ROLE};
use crate::turns::{Answer, Call, Cut, Limits, Loop, TurnPolicy, Unsent};

/// What every background run works with.
#[derive(Debug)]
pub(super) struct Jobs {
    pub(super) bridge: Weak<ToolBridge>,
    pub(super) store: Arc<Store>,
    pub(super) clock: Arc<dyn Clock>,
    /// `None` without a configured model.
    pub(super) client: Option<ModelClient>,
    pub(super) limits: Limits,
    pub(super) caller: Caller,
    pub(super) tools: ToolCatalogue,
    /// The "no model is configured" fix, naming the configuration read.
    pub(super) unconfigured: String,
}

/// How a background run ended.
#[derive(Debug)]
enum End {
    /// The model answered without calling a tool.
    Answer(String),
    /// A state-changing call waits for the user's review.
    Parked(ReviewProposal),
    /// The run failed.
    Failed {
        reason: FailureReason,
        detail: String,
    },
    /// The stop signal fired.
    Stopped,
}

fn job_error(kind: &str, detail: impl Into<String>) -> End {
    End::Failed {
        reason: FailureReason::job_error(kind),
        detail: detail.into(),
    }
}

/// The report of a run that ended before its loop started.
fn result_of(end: End) -> RunResult {
    match end {
        End::Failed { reason, detail } => RunResult::Failed { reason, detail },
        End::Stopped => RunResult::Failed {
            reason: FailureReason::job_error(RUN_STOPPED),
            detail: String::new(),
        },
        End::Answer(answer) => RunResult::completed(answer),
        End::Parked(proposal) => RunResult::Parked { proposal },
    }
}

impl Jobs {
    fn sessions(&self) -> Sessions<'_> {
        Sessions {
            store: &self.store,
            clock: &self.clock,
        }
    }

    /// Runs one claimed job to its end.
    pub(super) async fn run(&self, ctx: RunContext) -> RunResult {
        let Some(client) = self.client.clone() else {
            return RunResult::Failed {
                reason: FailureReason::ModelUnconfigured,
                detail: self.unconfigured.clone(),
            };
        };
        let Some(bridge) = self.bridge.upgrade() else {
            return RunResult::Failed {
                reason: FailureReason::FrameworkUnavailable,
                detail: "the tool bridge is gone (the daemon is stopping)".to_owned(),
            };
        };
        let job_id = match u64::try_from(ctx.job.id) {
            Ok(id) if id > 0 => id,
            _ => return result_of(job_error("invalid_job", format!("job id {}", ctx.job.id))),
        };
        let resume = match Resume::of(&ctx.job) {
            Ok(resume) => resume,
            Err(detail) => return result_of(job_error("checkpoint_unreadable", detail)),
        };
        // Whose authority the run has: its creator's, intersected with `builtin`'s.
        let created_by = match self.store.get_job(ctx.job.id) {
            Ok(Some(row)) => row.created_by,
            Ok(None) => {
                return result_of(job_error(
                    "invalid_job",
                    format!("job {} is gone", ctx.job.id),
                ));
            }
            Err(e) => return result_of(job_error("store_unavailable", e.to_string())),
        };
        let authority = bridge.creator_authority(&self.caller, &created_by);
        let tools = if authority.is_users() {
            self.tools.clone()
        } else {
            self.tools.narrowed(|command| authority.permits(command))
        };
        let session = background_job_session(ctx.job.id);
        let sessions = self.sessions();
        if let Err(e) = sessions.open_session(&bridge, &session, &ctx.job).await {
            return result_of(job_error("store_unavailable", e));
        }
        let prior = sessions.context(&ctx.job.session_target, &authority);
        let checkpoint = resume.as_ref().map(Resume::block);
        let job = &ctx.job;
        let opening = Message::user(prompt::job_turn(
            job.id,
            &job.title,
            &job.prompt,
            &job.payload_json,
            checkpoint.as_ref(),
        ));
        let meta = json!({
            "job_id": job.id,
            "attempt": ctx.attempt,
            "session_target": job.session_target,
            "context_session": prior.from,
            "context_note": prior.note,
            "resumed": resume.is_some(),
        });
        let policy = BackgroundTurn {
            jobs: self,
            authority,
            bridge,
            job_id,
            session,
            resume,
            trace: Vec::new(),
            first_seq: None,
            note: prior.note,
            vision: self.limits.vision,
            ctx,
        };
        let system = prompt::background_system_prompt();
        let mut run = Loop::new(policy, client, tools, self.limits, system, prior.messages);
        let end = match run.answer(opening, meta).await {
            Ok(answer) => End::Answer(answer),
            Err(end) => end,
        };
        let counts = run.counts();
        run.policy.finish(end, counts).await
    }
}

/// The background policy: one run of a claimed job, nobody present.
struct BackgroundTurn<'a> {
    jobs: &'a Jobs,
    /// The authority of the job's creator the run works with (`builtin`, narrowed).
    authority: CreatorAuthority,
    bridge: Arc<ToolBridge>,
    ctx: RunContext,
    job_id: u64,
    /// `background-job:<id>`.
    session: String,
    resume: Option<Resume>,
    /// `<tool> <status>` per call, for `last_result`.
    trace: Vec<String>,
    /// The transcript entry this run's record starts at.
    first_seq: Option<i64>,
    /// A context that could not be read.
    note: Option<String>,
    /// Whether result images are shown to the model.
    vision: bool,
}

impl TurnPolicy for BackgroundTurn<'_> {
    type End = End;

    /// The stop signal and the deadline, checked before every model call and every tool call.
    fn check(&self) -> Result<(), End> {
        if self.ctx.stop.is_stopped() {
            return Err(End::Stopped);
        }
        if self.ctx.remaining_ms() <= 0 {
            return Err(job_error(
                openphone_jobs::reason::RUN_BUDGET_EXCEEDED,
                "the run reached its deadline",
            ));
        }
        Ok(())
    }

    /// After every tool call: a stop ends the run here.
    fn after_call(&self) -> Result<(), End> {
        if self.ctx.stop.is_stopped() {
            return Err(End::Stopped);
        }
        Ok(())
    }

    fn out_of_turns(&self, turns: u32) -> End {
        job_error(
            openphone_jobs::reason::RUN_BUDGET_EXCEEDED,
            format!("the model was still calling tools after {turns} turns"),
        )
    }

    fn out_of_tool_calls(&self, calls: u32) -> End {
        job_error(
            "max_tool_calls_exceeded",
            format!("the run reached its {calls} tool calls"),
        )
    }

    fn budget_end(&self) -> Sleep {
        let remaining = u64::try_from(self.ctx.remaining_ms()).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(remaining))
    }

    fn out_of_time(&self) -> End {
        job_error(
            openphone_jobs::reason::RUN_BUDGET_EXCEEDED,
            "the model did not answer before the run's deadline",
        )
    }

    /// A model call in flight (retry waits included) is dropped the moment the stop fires.
    fn stopped(&self) -> impl Future<Output = End> + Send + 'static {
        let mut stop = self.ctx.stop.clone();
        async move {
            stop.stopped().await;
            End::Stopped
        }
    }

    fn model_failed(&self, error: ModelError) -> End {
        model_failure(error)
    }

    fn on_event(&self) -> Box<dyn FnMut(StreamEvent) + Send> {
        let job_id = self.job_id;
        Box::new(move |event: StreamEvent| {
            if let StreamEvent::Retrying {
                attempt,
                delay,
                reason,
                ..
            } = event
            {
                tracing::info!(job_id, attempt, delay_ms = delay.as_millis() as u64,
                    reason = %reason, "background run: retrying the model call");
            }
        })
    }

    /// Appends a message to the job's transcript.
    async fn keep(&mut self, role: &'static str, body: &Value) -> Result<(), End> {
        let now = self.jobs.clock.now_ms();
        match self
            .jobs
            .store
            .append_transcript_async(&self.session, role, body, now)
            .await
        {
            Ok(entry) => {
                self.first_seq.get_or_insert(entry.seq);
                Ok(())
            }
            Err(e) => Err(job_error("store_unavailable", e.to_string())),
        }
    }

    fn unsent(&mut self, unsent: Unsent<'_>) {
        let line = match unsent {
            Unsent::UnknownTool(name) => format!("{} unknown_tool", short_name(name)),
            Unsent::InvalidArguments(command) => {
                format!("{} invalid_arguments", command.android_tool)
            }
        };
        self.trace.push(line);
    }

    fn not_run_why(&self, end: &End) -> String {
        match end {
            End::Stopped => "the job was stopped".to_owned(),
            End::Failed { reason, .. } => format!("the run ended ({reason})"),
            End::Parked(_) => "the run ended to wait for the user's review".to_owned(),
            End::Answer(_) => "the run ended".to_owned(),
        }
    }

    fn unrecorded(&self, _end: End, failure: End) -> End {
        failure
    }

    /// One tool call: a reviewed call's stored outcome replayed, or the request sent through
    /// the bridge in the job's context. `Err` when the run ends with this call (it was parked
    /// for review).
    async fn call(&mut self, call: Call<'_>) -> Result<Answer, Cut<End>> {
        let Call {
            call,
            command,
            params,
            reason,
            number,
        } = call;
        let digest = openphone_protocol::digest::params_digest(&command.android_tool, &params).ok();
        // §9.9: the reviewed call again → its stored outcome; nothing executes.
        if let Some(resume) = &self.resume
            && resume.tool == command.android_tool
            && digest.as_deref() == Some(resume.params_digest.as_str())
        {
            let (message, meta) = replayed(call, command, resume);
            self.trace.push(format!(
                "{} {}",
                command.android_tool,
                meta["status"].as_str().unwrap_or("replayed")
            ));
            return Ok((message, meta, Vec::new()));
        }
        let request_id = format!("job-{}-{}-{number}", self.ctx.job.id, self.ctx.attempt);
        let request = ToolRequest {
            request_id: request_id.clone(),
            runtime: Some(BUILTIN_RUNTIME_ID.to_owned()),
            runtime_session_id: self.session.clone(),
            phone_session_id: Some(self.session.clone()),
            tool: command.name.clone(),
            params: params.clone(),
            reason,
            autonomy: Some(
                openphone_policy::Autonomy::AskBeforeAction
                    .as_str()
                    .to_owned(),
            ),
            idempotency_key: None,
            timeout_ms: None,
        };
        let result = self
            .bridge
            .call(Invocation::for_creator(
                &self.authority,
                self.job_id,
                request,
            ))
            .await;
        if is_parked(&result) {
            return match eligible(command, &params) {
                Ok(()) => {
                    self.trace.push(format!("{} parked", command.android_tool));
                    let text = format!(
                        "{} is held for the user's review: nothing was run. This run ends here; \
                         the job runs again with the outcome once the user has decided.\n{}",
                        command.android_tool,
                        blocked(command, "pending", None)
                    );
                    let meta = json!({
                        "tool": command.name,
                        "request_id": request_id,
                        "status": "parked",
                        "params_digest": digest,
                    });
                    Err(Cut {
                        end: End::Parked(ReviewProposal {
                            tool: command.android_tool.clone(),
                            command: command.name.clone(),
                            params,
                        }),
                        answer: Some((Message::tool(call.id.clone(), text), meta)),
                    })
                }
                Err(refused) => {
                    self.trace.push(format!(
                        "{} review_refused:{}",
                        command.android_tool,
                        refused.as_str()
                    ));
                    let (message, meta) = refused_answer(call, command, &request_id, refused);
                    Ok((message, meta, Vec::new()))
                }
            };
        }
        if let Some(confirmation_id) = waiting_on(&result) {
            // A confirmation nobody is there to answer: withdrawn at once.
            let (message, meta) = self
                .withdraw(call, command, &request_id, &confirmation_id)
                .await;
            return Ok((message, meta, Vec::new()));
        }
        self.trace.push(format!(
            "{} {}",
            command.android_tool,
            result
                .error
                .as_ref()
                .map_or(result.status.as_str(), |e| e.code.as_str())
        ));
        let digest = (!result.result.is_empty())
            .then(|| openphone_protocol::object_hash(&result.result).ok())
            .flatten();
        let meta = json!({
            "tool": command.name,
            "request_id": request_id,
            "status": result.status.as_str(),
            "error_code": result.error.as_ref().map(|e| e.code.as_str()),
            "result_digest": digest,
        });
        let (text, images) = describe(result, command, false);
        let images = if self.vision { images } else { Vec::new() };
        Ok((Message::tool(call.id.clone(), text), meta, images))
    }
}

impl BackgroundTurn<'_> {
    /// Withdraws a confirmation the bridge asked for in a background run (no user is there to
    /// answer it) and tells the model the call was not done.
    async fn withdraw(
        &mut self,
        call: &ToolCall,
        command: &Command,
        request_id: &str,
        confirmation_id: &str,
    ) -> (Message, Value) {
        match self
            .bridge
            .withdraw(self.authority.caller(), confirmation_id)
            .await
        {
            Ok(_) => {
                self.trace.push(format!(
                    "{} review_refused:not_eligible",
                    command.android_tool
                ));
                let (message, mut meta) =
                    refused_answer(call, command, request_id, ReviewRefused::NotEligible);
                meta["confirmation_id"] = Value::String(confirmation_id.to_owned());
                (message, meta)
            }
            Err(e) => {
                tracing::warn!(error = %e, confirmation = confirmation_id,
                    "withdrawing a confirmation asked for in a background run");
                self.trace.push(format!("{} unknown", command.android_tool));
                let text = format!(
                    "The outcome of {} is unknown: it asked for a confirmation that could not be \
                     withdrawn. Do not try it again; say in your answer that its outcome is \
                     unknown.",
                    command.android_tool
                );
                let meta = json!({
                    "tool": command.name,
                    "request_id": request_id,
                    "status": "unknown",
                    "confirmation_id": confirmation_id,
                });
                (Message::tool(call.id.clone(), text), meta)
            }
        }
    }

    /// Records how the run ended, ends its session and builds the report.
    async fn finish(&mut self, end: End, (turns, tool_calls): (u32, u32)) -> RunResult {
        let (outcome, reason) = match &end {
            End::Answer(_) => ("completed", None),
            End::Parked(_) => ("parked", None),
            End::Failed { reason, .. } => ("failed", Some(reason.to_string())),
            End::Stopped => (
                "stopped",
                Some(FailureReason::job_error(RUN_STOPPED).to_string()),
            ),
        };
        let mut body = transcript::outcome(outcome, reason.as_deref(), turns, tool_calls);
        body["job_id"] = json!(self.ctx.job.id);
        body["attempt"] = json!(self.ctx.attempt);
        match self
            .jobs
            .store
            .append_transcript_async(&self.session, STATUS_ROLE, &body, self.jobs.clock.now_ms())
            .await
        {
            Ok(entry) => {
                self.first_seq.get_or_insert(entry.seq);
            }
            Err(e) => {
                tracing::warn!(error = %e, session = %self.session, "recording how a background run ended");
            }
        }
        self.jobs
            .sessions()
            .close_session(&self.bridge, &self.session, reason)
            .await;
        match end {
            End::Answer(answer) => {
                let answer = answer.trim();
                let summary = summary_of(answer, SUMMARY_MAX_CHARS);
                let answer = if answer.is_empty() {
                    "(The model finished without an answer.)"
                } else {
                    answer
                };
                let trace = Trace {
                    turns,
                    tool_calls,
                    calls: &self.trace,
                    note: self.note.as_deref(),
                    session: &self.session,
                };
                RunResult::Completed {
                    result: result_text(answer, &trace),
                    summary,
                    output_ref: output_ref(&self.session, self.first_seq),
                }
            }
            End::Parked(proposal) => RunResult::Parked { proposal },
            End::Failed { reason, detail } => RunResult::Failed { reason, detail },
            End::Stopped => RunResult::Failed {
                reason: FailureReason::job_error(RUN_STOPPED),
                detail: "the job was stopped; the run ended before its next step".to_owned(),
            },
        }
    }
}

/// The end of a run whose model call failed after the client's retries: `model_unconfigured`
/// when the configuration cannot serve the request, else `job_error:<reason>`
/// (`job_error:model_http_429`, `job_error:model_unreachable`, …).
fn model_failure(error: openphone_model::ModelError) -> End {
    match error.kind() {
        openphone_model::ModelErrorKind::Unconfigured => End::Failed {
            reason: FailureReason::ModelUnconfigured,
            detail: error.detail(),
        },
        _ => job_error(&error.reason(), error.detail()),
    }
}

/// A tool name the model made up, shortened for the trace.
fn short_name(name: &str) -> String {
    openphone_core::summary::cut(&openphone_protocol::log_value(name).to_string(), 40)
}
