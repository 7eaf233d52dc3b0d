//! One foreground run: the work on one attention request, from the user's message to the
//! final answer or a failure with a stable reason, on the one loop (`turns.rs`) under the
//! foreground policy.
//!
//! Before the loop: the session is resumed (a follow-up whose session ended meanwhile is
//! recorded as not run and told so), its stored conversation read back. The policy: the stop
//! signal and the wall-clock budget (waits for the user not counted) checked before every model
//! and tool call; the model's text streamed as `runtime.message` deltas, at most one per
//! [`DELTA_INTERVAL`]; every tool call through the bridge as `builtin` in the phone session,
//! where a confirmation pauses the run until the user decides; every message appended to the
//! session's transcript as it happens. After the loop: the end recorded and reported.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use openphone_clock::{Clock, Stopwatch};
use openphone_core::{Audience, Invocation, RuntimeManager, ToolBridge, Waited, waiting_on};
use openphone_model::{Message, ModelClient, ModelError, StreamEvent, ToolCall};
use openphone_policy::Caller;
use openphone_protocol::endpoint::{
    AttentionRequested, Event, MessagePayload, RuntimeMessageParams,
};
use openphone_protocol::{BUILTIN_RUNTIME_ID, Command, ErrorCode, ToolRequest, ToolResult};
use openphone_store::Store;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::answers::describe;
use crate::config::BuiltinConfig;
use crate::prompt;
use crate::tools::ToolCatalogue;
use crate::transcript::{self, STATUS_ROLE};
use crate::turns::{Answer, Call, Cut, Limits, Loop, TurnPolicy};

/// The shortest time between two streamed deltas of one session.
pub const DELTA_INTERVAL: Duration = Duration::from_millis(100);

/// The error of the final message a follow-up gets when its session ended before it ran.
pub const SESSION_ENDED: &str = "session_ended";

/// How long a stopped run waits for the result of a confirmation the user approved just as
/// the run stopped (its withdrawal came too late).
const LATE_RESULT_WAIT: Duration = Duration::from_secs(5);

/// Why a run is told to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// `sessions.cancel`: the manager fails the session itself.
    Cancelled,
    /// The daemon is stopping: the runtime's shutdown fails the session.
    Shutdown,
}

/// What a foreground run works with, shared by the runs of the built-in runtime.
#[derive(Debug)]
pub(crate) struct Agent {
    pub(crate) bridge: Arc<ToolBridge>,
    pub(crate) manager: Weak<RuntimeManager>,
    pub(crate) store: Arc<Store>,
    pub(crate) clock: Arc<dyn Clock>,
    /// `None` without a configured model.
    pub(crate) client: Option<ModelClient>,
    /// The limits of a run (and the rest of the `[builtin]` table).
    pub(crate) config: BuiltinConfig,
    /// `builtin` under its configured authorisation.
    pub(crate) caller: Caller,
    pub(crate) tools: ToolCatalogue,
    /// The "no model is configured" fix, naming the configuration read.
    pub(crate) unconfigured: String,
}

/// How a run ended.
#[derive(Debug)]
enum Ended {
    /// The model answered without calling a tool.
    Answer(String),
    /// The run failed with a stable reason code and a one-line detail.
    Failed { reason: String, detail: String },
    /// The run was told to stop.
    Stopped(Stop),
    /// The session is no longer this run's to finish (it failed or vanished meanwhile).
    Gone(String),
}

fn failed(reason: &str, detail: impl Into<String>) -> Ended {
    Ended::Failed {
        reason: reason.to_owned(),
        detail: detail.into(),
    }
}

/// Text deltas waiting to be sent, and whether any were sent in this run.
struct Streamer {
    manager: Arc<RuntimeManager>,
    session: String,
    /// The attention request the run answers (named on every message).
    attention_id: String,
    pending: Arc<Mutex<String>>,
    /// Something was streamed in this run.
    streamed: bool,
    /// Something was streamed in the current turn.
    turn_streamed: bool,
}

impl Streamer {
    /// Sends what is pending as one `runtime.message` delta.
    async fn flush(&mut self) {
        let text =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        if text.is_empty() {
            return;
        }
        // Turns are separated by a blank line, so streamed text reads as paragraphs.
        let text = if self.streamed && !self.turn_streamed {
            format!("\n\n{text}")
        } else {
            text
        };
        self.streamed = true;
        self.turn_streamed = true;
        let message = RuntimeMessageParams {
            phone_session_id: self.session.clone(),
            runtime_session_id: None,
            text,
            is_final: false,
            output: None,
            error: None,
            attention_id: Some(self.attention_id.clone()),
        };
        if let Err(e) = send(&self.manager, message).await {
            tracing::debug!(error = %e, session = %self.session, "a streamed delta was refused");
        }
    }
}

/// Hands a message to the manager off the async threads (it writes the session's status).
async fn send(manager: &Arc<RuntimeManager>, message: RuntimeMessageParams) -> Result<(), String> {
    let manager = Arc::clone(manager);
    match tokio::task::spawn_blocking(move || manager.runtime_message(BUILTIN_RUNTIME_ID, message))
        .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// Resolves once the run is told to stop.
async fn stop_signal(rx: &mut watch::Receiver<Option<Stop>>) -> Stop {
    loop {
        if let Some(stop) = *rx.borrow_and_update() {
            return stop;
        }
        if rx.changed().await.is_err() {
            // The sender lives as long as the run; never stop for its absence.
            std::future::pending::<()>().await;
        }
    }
}

/// The foreground policy: a run for a user who is there.
struct Foreground<'a> {
    agent: &'a Agent,
    requested: AttentionRequested,
    stop: watch::Receiver<Option<Stop>>,
    /// Since the run started.
    watch: Stopwatch,
    /// Time spent waiting for the user's decisions (not counted against the budget).
    paused: Duration,
    stream: Streamer,
}

/// Runs one attention request to its end and reports the end to the manager.
pub(crate) async fn run(
    agent: &Agent,
    requested: AttentionRequested,
    stop: watch::Receiver<Option<Stop>>,
) {
    let Some(manager) = agent.manager.upgrade() else {
        return;
    };
    let session = requested.phone_session_id.clone();
    let attention = requested.attention_id.clone();
    let Some(client) = agent.client.clone() else {
        let ended = failed("model_unconfigured", agent.unconfigured.clone());
        report(agent, &manager, &session, &attention, ended, (0, 0)).await;
        return;
    };
    let policy = Foreground {
        agent,
        stream: Streamer {
            manager: Arc::clone(&manager),
            session: session.clone(),
            attention_id: attention.clone(),
            pending: Arc::default(),
            streamed: false,
            turn_streamed: false,
        },
        requested,
        stop,
        watch: Stopwatch::start(),
        paused: Duration::ZERO,
    };
    let (ended, counts) = go(policy, client, &manager).await;
    report(agent, &manager, &session, &attention, ended, counts).await;
}

/// Records how the run ended and tells the manager (a final message, or nothing when the
/// canceller or the shutdown ends the session).
async fn report(
    agent: &Agent,
    manager: &Arc<RuntimeManager>,
    session: &str,
    attention: &str,
    ended: Ended,
    (turns, tool_calls): (u32, u32),
) {
    let (outcome, reason, message) = match ended {
        Ended::Answer(text) => {
            let text = if text.trim().is_empty() {
                "(The model finished without an answer.)".to_owned()
            } else {
                text
            };
            let message = RuntimeMessageParams {
                phone_session_id: session.to_owned(),
                text,
                is_final: true,
                attention_id: Some(attention.to_owned()),
                ..RuntimeMessageParams::default()
            };
            ("completed", None, Some(message))
        }
        Ended::Failed { reason, detail } => {
            tracing::info!(session, reason = %reason, detail = %detail, "built-in run failed");
            let message = RuntimeMessageParams {
                phone_session_id: session.to_owned(),
                text: detail,
                is_final: true,
                error: Some(reason.clone()),
                attention_id: Some(attention.to_owned()),
                ..RuntimeMessageParams::default()
            };
            ("failed", Some(reason), Some(message))
        }
        Ended::Stopped(Stop::Cancelled) => ("cancelled", None, None),
        Ended::Stopped(Stop::Shutdown) => ("interrupted", None, None),
        Ended::Gone(detail) => {
            tracing::info!(session, detail = %detail, "built-in run ended: the session is gone");
            ("gone", Some(SESSION_ENDED.to_owned()), None)
        }
    };
    let body = transcript::outcome(outcome, reason.as_deref(), turns, tool_calls);
    if let Err(e) = agent
        .store
        .append_transcript_async(session, STATUS_ROLE, &body, agent.clock.now_ms())
        .await
    {
        tracing::warn!(error = %e, session, "recording how a built-in run ended");
    }
    if let Some(message) = message
        && let Err(e) = send(manager, message).await
    {
        tracing::warn!(error = %e, session, "reporting the end of a built-in run");
    }
}

/// The run: the session resumed and its conversation read back, then the loop. Returns how it
/// ended and its model turns and tool calls.
async fn go(
    policy: Foreground<'_>,
    client: ModelClient,
    manager: &Arc<RuntimeManager>,
) -> (Ended, (u32, u32)) {
    if let Some(stop) = *policy.stop.borrow() {
        return (Ended::Stopped(stop), (0, 0));
    }
    let agent = policy.agent;
    let session = policy.session().to_owned();
    let resumed = {
        let manager = Arc::clone(manager);
        let session = session.clone();
        tokio::task::spawn_blocking(move || manager.resume_session(BUILTIN_RUNTIME_ID, &session))
            .await
    };
    let user = Message::user(prompt::user_turn(&policy.requested));
    let mut meta = json!({
        "attention_id": policy.requested.attention_id,
        "source": policy.requested.source.as_str(),
    });
    match resumed {
        Ok(Ok(_)) => {}
        // The store could not be read or written: the session is still active.
        Ok(Err(e)) if e.code == ErrorCode::SendFailed => {
            return (failed("store_unavailable", e.message), (0, 0));
        }
        Ok(Err(e)) => {
            // The session ended before this request's turn came (the run ahead of it
            // failed, or it was removed): keep the user's words and say so.
            meta["not_run"] = Value::Bool(true);
            let body = transcript::body(&user, meta);
            if let Err(error) = agent
                .store
                .append_transcript_async(&session, "user", &body, agent.clock.now_ms())
                .await
            {
                tracing::warn!(error = %error, session = %session,
                    "recording a follow-up that did not run");
            }
            policy.ended_before_it_ran(&e.message);
            return (Ended::Gone(e.message), (0, 0));
        }
        Err(e) => return (failed("runtime_unavailable", e.to_string()), (0, 0)),
    }
    let entries = match agent.store.transcript(&session) {
        Ok(entries) => entries,
        Err(e) => return (failed("store_unavailable", e.to_string()), (0, 0)),
    };
    let history = match transcript::history(&entries) {
        Ok(messages) => messages,
        Err(e) => return (failed("transcript_unreadable", e.to_string()), (0, 0)),
    };
    let next_request = transcript::next_request(&entries, &session);
    let config = &agent.config;
    let limits = Limits {
        max_turns: config.max_turns,
        max_tool_calls: config.max_tool_calls,
        max_tokens: config.max_tokens,
        max_history_chars: config.max_history_chars,
        vision: config.vision,
    };
    let tools = agent.tools.clone();
    let mut run = Loop::new(
        policy,
        client,
        tools,
        limits,
        prompt::system_prompt(),
        history,
    )
    .numbered_from(next_request);
    let ended = match run.answer(user, meta).await {
        Ok(answer) => Ended::Answer(answer),
        Err(ended) => ended,
    };
    (ended, run.counts())
}

impl Foreground<'_> {
    fn session(&self) -> &str {
        &self.requested.phone_session_id
    }

    /// Tells the user that this request did not run because its session ended first: a final
    /// message for this attention request, published directly (the manager no longer takes
    /// messages for an ended session).
    fn ended_before_it_ran(&self, detail: &str) {
        let payload = MessagePayload {
            phone_session_id: self.session().to_owned(),
            runtime_session_id: self.requested.runtime_session_id.clone(),
            text: format!(
                "This request was not run: its session ended before its turn came ({detail}). \
                 Ask again to start a new session."
            ),
            output: None,
            error: Some(SESSION_ENDED.to_owned()),
            attention_id: Some(self.requested.attention_id.clone()),
        };
        let audience = Audience {
            runtime: Some(BUILTIN_RUNTIME_ID.to_owned()),
            operators: true,
        };
        if let Err(e) = self
            .agent
            .bridge
            .events()
            .publish(&Event::MessageFinal(payload), audience)
        {
            tracing::warn!(error = %e, session = %self.session(),
                "telling the user a follow-up did not run");
        }
    }

    /// The part of the budget used: the run's time minus the waits for the user.
    fn used(&self) -> Duration {
        self.watch.elapsed().saturating_sub(self.paused)
    }

    /// The tool message, its transcript metadata and its images for the final result of a
    /// request the bridge handled.
    fn answer(
        &self,
        call: &ToolCall,
        command: &Command,
        request_id: &str,
        result: ToolResult,
        confirmation_id: Option<String>,
    ) -> Answer {
        let digest = (!result.result.is_empty())
            .then(|| openphone_protocol::object_hash(&result.result).ok())
            .flatten();
        let meta = json!({
            "tool": command.name,
            "request_id": request_id,
            "status": result.status.as_str(),
            "error_code": result.error.as_ref().map(|e| e.code.as_str()),
            "result_digest": digest,
            "confirmation_id": confirmation_id,
        });
        let (text, images) = describe(result, command, confirmation_id.is_some());
        let images = if self.agent.config.vision {
            images
        } else {
            Vec::new()
        };
        (Message::tool(call.id.clone(), text), meta, images)
    }
}

impl TurnPolicy for Foreground<'_> {
    type End = Ended;

    /// The stop signal and the budget, checked before every model and tool call.
    fn check(&self) -> Result<(), Ended> {
        if let Some(stop) = *self.stop.borrow() {
            return Err(Ended::Stopped(stop));
        }
        if self.used() >= self.agent.config.run_budget() {
            return Err(failed(
                "run_budget_exceeded",
                format!(
                    "the run used its {} s budget",
                    self.agent.config.run_budget_secs
                ),
            ));
        }
        Ok(())
    }

    fn out_of_turns(&self, turns: u32) -> Ended {
        failed(
            "max_turns_exceeded",
            format!("the model was still calling tools after {turns} turns"),
        )
    }

    fn out_of_tool_calls(&self, calls: u32) -> Ended {
        failed(
            "max_tool_calls_exceeded",
            format!("the run reached its {calls} tool calls"),
        )
    }

    fn budget_end(&self) -> tokio::time::Sleep {
        let remaining = self.agent.config.run_budget().saturating_sub(self.used());
        tokio::time::sleep(remaining)
    }

    fn out_of_time(&self) -> Ended {
        failed(
            "run_budget_exceeded",
            format!(
                "the model did not answer within the run's {} s budget",
                self.agent.config.run_budget_secs
            ),
        )
    }

    fn stopped(&self) -> impl Future<Output = Ended> + Send + 'static {
        let mut stop = self.stop.clone();
        async move { Ended::Stopped(stop_signal(&mut stop).await) }
    }

    fn model_failed(&self, error: ModelError) -> Ended {
        failed(&error.reason(), error.to_string())
    }

    fn on_event(&self) -> Box<dyn FnMut(StreamEvent) + Send> {
        let sink = Arc::clone(&self.stream.pending);
        Box::new(move |event: StreamEvent| match event {
            StreamEvent::TextDelta(text) => sink
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_str(&text),
            StreamEvent::Retrying {
                attempt,
                delay,
                reason,
                ..
            } => {
                tracing::info!(attempt, delay_ms = delay.as_millis() as u64, reason = %reason,
                    "retrying the model call");
            }
            StreamEvent::ToolCallDelta { .. } => {}
        })
    }

    fn stream_every(&self) -> Option<Duration> {
        Some(DELTA_INTERVAL)
    }

    fn turn_started(&mut self) {
        self.stream.turn_streamed = false;
    }

    async fn flush(&mut self) {
        self.stream.flush().await;
    }

    /// Appends a message to the session's stored transcript.
    async fn keep(&mut self, role: &'static str, body: &Value) -> Result<(), Ended> {
        let now = self.agent.clock.now_ms();
        match self
            .agent
            .store
            .append_transcript_async(&self.requested.phone_session_id, role, body, now)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => Err(failed("store_unavailable", e.to_string())),
        }
    }

    /// Why the calls after a run's end were not made.
    fn not_run_why(&self, ended: &Ended) -> String {
        match ended {
            Ended::Stopped(Stop::Cancelled) => "the user cancelled the session".to_owned(),
            Ended::Stopped(Stop::Shutdown) => "the daemon stopped".to_owned(),
            Ended::Failed { reason, .. } => format!("the run ended ({reason})"),
            Ended::Answer(_) | Ended::Gone(_) => "the run ended".to_owned(),
        }
    }

    fn unrecorded(&self, ended: Ended, _failure: Ended) -> Ended {
        ended
    }

    /// One tool call through the bridge as `builtin` in the phone session, a confirmation
    /// waited for. `Err` when the run must end (with the answer to record for this call when
    /// something may have happened).
    async fn call(&mut self, call: Call<'_>) -> Result<Answer, Cut<Ended>> {
        let Call {
            call,
            command,
            params,
            reason,
            number,
        } = call;
        let request_id = format!("builtin-{}-{number}", self.session());
        let request = ToolRequest {
            request_id: request_id.clone(),
            runtime: Some(BUILTIN_RUNTIME_ID.to_owned()),
            runtime_session_id: self.requested.runtime_session_id.clone(),
            phone_session_id: Some(self.session().to_owned()),
            tool: command.name.clone(),
            params,
            reason,
            // The run's own autonomy, whatever happens to the session meanwhile.
            autonomy: Some(self.requested.autonomy.as_str().to_owned()),
            idempotency_key: None,
            timeout_ms: i64::try_from(self.agent.config.confirmation_timeout_secs)
                .ok()
                .map(|secs| secs.saturating_mul(1000)),
        };
        let bridge = &self.agent.bridge;
        let caller = &self.agent.caller;
        let first = bridge.call(Invocation::agent(caller, request)).await;
        let (result, confirmation_id) = match waiting_on(&first) {
            None => (first, None),
            Some(confirmation_id) => {
                // Paused: the session shows `waiting_for_confirmation` (the bridge set it)
                // until the user decides; the wait does not count against the budget.
                let waiting = Stopwatch::start();
                let mut stop = self.stop.clone();
                let waited = bridge
                    .wait_for_final(&first, async move {
                        stop_signal(&mut stop).await;
                    })
                    .await;
                self.paused += waiting.elapsed();
                match waited {
                    Waited::Final(result) => (result, Some(confirmation_id)),
                    Waited::Stopped(_) => {
                        let ended = match *self.stop.borrow() {
                            Some(stop) => Ended::Stopped(stop),
                            None => failed(
                                "confirmation_unavailable",
                                format!(
                                    "the outcome of confirmation {confirmation_id} could not be read"
                                ),
                            ),
                        };
                        let withdrawn = bridge.withdraw(caller, &confirmation_id).await;
                        let Err(e) = withdrawn else {
                            // Withdrawn: the request never runs (the call is answered as
                            // not run).
                            return Err(Cut {
                                end: ended,
                                answer: None,
                            });
                        };
                        // Too late to withdraw: the user decided meanwhile, so the request
                        // may have run. Record what happened, never "nothing was done".
                        tracing::info!(error = %e, confirmation = %confirmation_id,
                            "a stopped run's confirmation was decided before it was withdrawn");
                        let late = bridge
                            .wait_for_final(&first, tokio::time::sleep(LATE_RESULT_WAIT))
                            .await;
                        let answer = match late {
                            Waited::Final(result) => {
                                let (message, meta, _) = self.answer(
                                    call,
                                    command,
                                    &request_id,
                                    result,
                                    Some(confirmation_id),
                                );
                                (message, meta)
                            }
                            Waited::Stopped(_) => {
                                let text = format!(
                                    "The outcome of {} is unknown: the run stopped while the \
                                     user was deciding on it, and its result could not be read. \
                                     It may have run; check the phone before trying it again.",
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
                        };
                        return Err(Cut {
                            end: ended,
                            answer: Some(answer),
                        });
                    }
                }
            }
        };
        Ok(self.answer(call, command, &request_id, result, confirmation_id))
    }
}
