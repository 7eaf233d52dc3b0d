//! The daemon's side of background jobs: the scheduler's driver, the job tools on the bridge,
//! and what turns the scheduler's events into things a person sees — `background_job.*`
//! events for operators, the completion and failure notifications in the phone's shade
//! (delivery, `agent-jobs.md` §4), and audit records for what no tool request records
//! (catch-up runs §6.6, discarded late reports §8, failed deliveries §4).

mod origin;
mod taps;

use std::path::Path;
use std::sync::Arc;

use openphone_core::{Audience, RuntimeManager, ToolBridge};
use openphone_device::SystemNotification;
use openphone_jobs::AgentJobExt;
use openphone_jobs::delivery::{self, Announcement, completion_body, failure_body};
use openphone_jobs::{
    AgentJob, BridgeReviewExecutor, DeliveryMode, DeliveryState, JobArtifacts, JobTools, JobType,
    MaintenanceRunner, ReviewAnswer, Runners, Scheduler, SchedulerConfig, SchedulerEvent,
};
use openphone_protocol::Registry;
use openphone_protocol::endpoint::JobsReviewResult;
use openphone_protocol::endpoint::{BackgroundJobEvent, Event};
use openphone_store::{AuditEntry, AuditKind, Store};

use crate::config::JobsConfig;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// How often undelivered results are posted again.
const RETRY_EVERY: std::time::Duration = std::time::Duration::from_secs(60);
/// How far back results are still worth posting again (a day).
const RETRY_WINDOW_MS: i64 = 24 * 60 * 60 * 1000;
/// Most deliveries retried per round.
const RETRY_BATCH: usize = 50;

/// How often a daemon sharing its store with others (a fleet) looks for due jobs they made
/// and for runs of daemons that died: the scheduler's minimum delay between wakes (15 s).
pub const FLEET_POLL_MS: i64 = openphone_jobs::limits::MIN_WAKE_DELAY_MS;

/// The scheduler of this daemon over `store` (the jobs' tables, handed over by the daemon's
/// construction) and the bridge's clock, with `runners`, keeping at most `jobs.max_jobs` jobs,
/// each runtime at most `jobs.max_jobs_per_runtime` live ones.
pub fn scheduler(
    store: Arc<Store>,
    bridge: &ToolBridge,
    runners: Runners,
    jobs: &JobsConfig,
) -> Scheduler {
    let mut config = SchedulerConfig::with_random_owner();
    config.max_jobs = jobs.max_jobs;
    config.max_jobs_per_runtime = jobs.max_jobs_per_runtime;
    if store.as_sqlite().is_none() {
        // A store shared with other daemons (docs/fleet.md): look at it every 15 s.
        config.poll_ms = Some(FLEET_POLL_MS);
    }
    Scheduler::new(store, bridge.clock(), config, runners)
}

/// The runners of the job types other than `agent_turn` (bound by the daemon once the tools
/// it offers are installed): `system_event` runs a watcher's stored tool call; `heartbeat` is
/// the maintenance of [`MaintenanceRunner`] over `store` and the artifacts under `data_dir`,
/// checking the `[builtin]` model (its background model) when one is configured.
pub fn runners(
    bridge: &Arc<ToolBridge>,
    registry: &'static Registry,
    store: Arc<Store>,
    data_dir: &Path,
    builtin: Option<&openphone_agent::BuiltinConfig>,
) -> Runners {
    let probe = builtin.and_then(|config| {
        match openphone_agent::background::ModelHealth::from_config(config, bridge.clock()) {
            Ok(health) => Some(Arc::new(health) as Arc<dyn openphone_jobs::HealthProbe>),
            Err(e) => {
                tracing::warn!(error = %e, "jobs: the heartbeat cannot check the model");
                None
            }
        }
    });
    let maintenance = MaintenanceRunner::new(store, JobArtifacts::in_data_dir(data_dir), probe);
    openphone_watchers::runners(Arc::clone(bridge), registry)
        .with(JobType::Heartbeat, Arc::new(maintenance))
}

/// Installs the job tools (`openphone.jobs.*`) on the bridge. Done before anything builds a
/// tool list from what the bridge serves (issue 32: the built-in runtime was never offered
/// them).
pub fn install_tools(scheduler: &Scheduler, bridge: &ToolBridge) {
    bridge.install_service(Arc::new(JobTools::new(scheduler)));
}

/// Starts the driver and the event loop. Wakes at start (repairing what a previous process
/// left running, catching up missed runs), then at every scheduled wake, until `shutdown`.
/// `store` is the scheduler's own (its jobs' delivery state); notifications go to the phone
/// through the bridge, results of jobs made in a runtime's session back to that session
/// through `manager`, and every job's artifacts under `data_dir`.
pub fn start(
    scheduler: &Scheduler,
    bridge: &Arc<ToolBridge>,
    manager: &Arc<RuntimeManager>,
    registry: &'static Registry,
    store: Arc<Store>,
    data_dir: &Path,
    shutdown: watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    // An approved review runs its stored call through the bridge (`invoke_reviewed`).
    scheduler.set_review_executor(Arc::new(BridgeReviewExecutor::new(
        Arc::clone(bridge),
        registry,
    )));
    // Every event: a dropped one would lose a review's notification, an audit record, a
    // result's delivery or a job's artifacts.
    let events = scheduler.subscribe_all();
    let taps = bridge.device_events();
    let replies = tokio::spawn(origin::replies(
        scheduler.clone(),
        Arc::clone(bridge),
        Arc::clone(&store),
        shutdown.clone(),
    ));
    let glue = Arc::new(Glue {
        bridge: Arc::clone(bridge),
        manager: Arc::clone(manager),
        store,
        artifacts: JobArtifacts::in_data_dir(data_dir),
    });
    let listener = tokio::spawn(Arc::clone(&glue).listen(events, shutdown.clone()));
    let retry = tokio::spawn(Arc::clone(&glue).retry_deliveries(shutdown.clone()));
    let mut tasks = Vec::new();
    if let Some(taps) = taps {
        tasks.push(tokio::spawn(taps::review_taps(
            scheduler.clone(),
            taps,
            shutdown.clone(),
        )));
    }
    let driver = tokio::spawn({
        let scheduler = scheduler.clone();
        let mut stop = shutdown;
        async move {
            scheduler
                .run(async move { crate::shutdown::stopped(&mut stop).await })
                .await;
        }
    });
    tasks.push(driver);
    tasks.push(listener);
    tasks.push(retry);
    tasks.push(replies);
    tasks
}

/// The answer of `jobs.review`.
pub fn review_result(answer: &ReviewAnswer) -> JobsReviewResult {
    JobsReviewResult {
        code: answer.code.as_str().to_owned(),
        reason: answer.reason.clone(),
        job_id: answer.job_id,
        result_status: answer.result_status.clone(),
    }
}

struct Glue {
    bridge: Arc<ToolBridge>,
    /// Results go back to the runtime session a job was made in through it.
    manager: Arc<RuntimeManager>,
    /// The scheduler's store: its jobs and their delivery state.
    store: Arc<Store>,
    /// Every job's files (`<data dir>/artifacts/jobs/<id>/`).
    artifacts: JobArtifacts,
}

impl Glue {
    async fn listen(
        self: Arc<Self>,
        mut events: mpsc::UnboundedReceiver<SchedulerEvent>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = crate::shutdown::stopped(&mut shutdown) => return,
            };
            match event {
                Some(event) => self.handle(event).await,
                // The scheduler is gone.
                None => return,
            }
        }
    }

    async fn handle(&self, event: SchedulerEvent) {
        if let Some(job_id) = event_job(&event) {
            self.write_artifacts(job_id).await;
        }
        match event {
            SchedulerEvent::Created { job } => self.publish(Event::JobCreated(view(&job))),
            SchedulerEvent::Claimed {
                job_id,
                attempt,
                intended_at,
                started_at,
                catch_up,
            } => {
                if catch_up {
                    self.audit(
                        "assistant.background_job.catch_up",
                        json!({
                            "job_id": job_id, "attempt": attempt,
                            "intended_at": intended_at, "started_at": started_at,
                        }),
                    );
                }
                self.publish_current(job_id);
            }
            SchedulerEvent::Finished {
                job,
                summary,
                delivery,
                attempt,
                ..
            } => {
                self.publish(Event::JobUpdated(view(&job)));
                if job.job_type == JobType::Heartbeat {
                    // What the maintenance did, recorded (silent by default: no notification).
                    self.audit(
                        "assistant.background_job.maintenance",
                        json!({"job_id": job.id, "attempt": attempt, "result": job.last_result}),
                    );
                }
                // Only a completion is announced here: a failure's pending delivery is its
                // alert, posted on `FailureAlert` (issue 32: never also "<title> finished").
                if delivery == Some(DeliveryState::Pending)
                    && delivery::announcement(&job) == Announcement::Completion
                {
                    self.deliver(&job, summary.as_deref()).await;
                }
            }
            SchedulerEvent::FailureAlert { job_id, notify, .. } => {
                let Some(job) = self.current(job_id) else {
                    return;
                };
                self.publish(Event::JobFailureAlert(view(&job)));
                if notify {
                    self.alert(&job).await;
                }
            }
            SchedulerEvent::Repaired { job, .. } => self.publish(Event::JobUpdated(view(&job))),
            SchedulerEvent::Discarded {
                job_id,
                attempt,
                status,
            } => {
                self.audit(
                    "assistant.background_job.report_discarded",
                    json!({
                        "job_id": job_id, "attempt": attempt,
                        "status": status.map(|s| s.as_str()),
                    }),
                );
            }
            SchedulerEvent::Stopped { job_id } => self.publish_current(job_id),
            SchedulerEvent::ReviewRequired {
                job_id,
                confirmation_id,
                title,
                summary,
                expires_at,
                ..
            } => {
                // Shown whatever the delivery mode: a request for a decision (§4).
                let minutes = ((expires_at - self.bridge.now_ms()).max(0) + 59_999) / 60_000;
                let notification = SystemNotification {
                    key: delivery::review_key(&confirmation_id),
                    title: delivery::review_title(&title),
                    body: delivery::review_body(&summary, minutes),
                    actions: vec![
                        ("approve".to_owned(), "Approve".to_owned()),
                        ("deny".to_owned(), "Deny".to_owned()),
                    ],
                };
                if let Err(e) = self.bridge.post_notification(&notification).await {
                    tracing::warn!(job_id, error = %e, "jobs: posting a review notification failed");
                }
                if let Some(job) = self.current(job_id) {
                    let mut event = view(&job);
                    event.confirmation_id = Some(confirmation_id);
                    event.detail = Some(summary);
                    event.expires_at = Some(expires_at);
                    self.publish(Event::JobReviewRequired(event));
                }
            }
            SchedulerEvent::ReviewResolved {
                job_id,
                confirmation_id,
                title,
                resolution,
                result_status,
                alert,
                ..
            } => {
                let key = delivery::review_key(&confirmation_id);
                if let Err(e) = self.bridge.withdraw_notification(&key).await {
                    tracing::warn!(job_id, error = %e, "jobs: withdrawing a review notification failed");
                }
                if alert {
                    // An approved action whose outcome is unknown after a crash: the user is
                    // told whatever the delivery mode (§9.10).
                    if let Err(e) = self
                        .bridge
                        .post_notification(&outcome_unknown_notification(job_id, &title))
                        .await
                    {
                        tracing::warn!(job_id, error = %e, "jobs: posting an unknown-outcome alert failed");
                    }
                }
                if let Some(job) = self.current(job_id) {
                    let mut event = view(&job);
                    event.confirmation_id = Some(confirmation_id);
                    event.detail = Some(resolution.as_str().to_owned());
                    event.outcome = result_status;
                    self.publish(Event::JobReviewResolved(event));
                }
            }
        }
    }

    /// The completion notification (§4): posted only in `notification` mode, recorded as
    /// `sent` only when the phone confirms it; a failure is audited and leaves
    /// `unread_result` set. A runtime's job delivers to its creator instead
    /// ([`Glue::to_creator`]).
    async fn deliver(&self, job: &AgentJob, summary: Option<&str>) {
        if job.delivery_mode() != DeliveryMode::Notification {
            return;
        }
        let origin = origin::deliver(
            &self.manager,
            &self.bridge,
            job,
            &completion_body(job, summary),
            false,
        )
        .await;
        if self.to_creator(job, completion_body(job, summary), false, origin) {
            return;
        }
        let notification = SystemNotification {
            key: delivery::result_key(job.id),
            title: delivery::completion_title(job),
            body: completion_body(job, summary),
            actions: Vec::new(),
        };
        let (state, outcome) = match self.bridge.post_notification(&notification).await {
            Ok(_) => (DeliveryState::Sent, "sent"),
            Err(e) => {
                tracing::warn!(job_id = job.id, error = %e, "jobs: delivering a result failed");
                self.audit(
                    "assistant.background_job.delivery_failed",
                    json!({ "job_id": job.id, "error": e.code() }),
                );
                (DeliveryState::Failed, "failed")
            }
        };
        if let Err(e) = delivery::record_delivery(&self.store, job.id, job.last_run_at, state) {
            tracing::warn!(job_id = job.id, error = %e, "jobs: recording a delivery failed");
        }
        let mut event = view(job);
        event.outcome = Some(outcome.to_owned());
        self.publish(Event::JobDelivered(event));
    }

    /// Delivery retries (§4): at start and every minute, the results of the last day whose
    /// delivery is still `pending` or `failed` are posted again from the stored job — the
    /// notification's key makes a repeat an update in place, never a second notification;
    /// the job is never run again for it.
    async fn retry_deliveries(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut every = tokio::time::interval(RETRY_EVERY);
        loop {
            tokio::select! {
                _ = every.tick() => {}
                () = crate::shutdown::stopped(&mut shutdown) => return,
            }
            let since = self.bridge.now_ms() - RETRY_WINDOW_MS;
            let rows = match self.store.undelivered_jobs(since, RETRY_BATCH) {
                Ok(rows) => rows,
                Err(e) => {
                    tracing::warn!(error = %e, "jobs: reading undelivered results failed");
                    continue;
                }
            };
            for row in rows {
                let job = row.job;
                if job.delivery_mode() != DeliveryMode::Notification {
                    continue;
                }
                match delivery::announcement(&job) {
                    Announcement::Completion => self.deliver(&job, None).await,
                    Announcement::FailureAlert => self.alert(&job).await,
                    Announcement::OutcomeUnknown => self.outcome_unknown(&job).await,
                }
            }
        }
    }

    /// The alert of an approved action whose outcome is unknown (§9.10), posted again from
    /// the stored job by the delivery retry.
    async fn outcome_unknown(&self, job: &AgentJob) {
        let notification = outcome_unknown_notification(job.id, &job.title);
        let state = match self.bridge.post_notification(&notification).await {
            Ok(_) => DeliveryState::Sent,
            Err(e) => {
                tracing::warn!(job_id = job.id, error = %e, "jobs: posting an unknown-outcome alert failed");
                DeliveryState::Failed
            }
        };
        if let Err(e) = delivery::record_delivery(&self.store, job.id, job.last_run_at, state) {
            tracing::warn!(job_id = job.id, error = %e, "jobs: recording an alert's delivery failed");
        }
    }

    /// The failure alert (§7.6): one notification per job, updated in place (to its creator
    /// for a runtime's job).
    async fn alert(&self, job: &AgentJob) {
        let body = failure_body(job, self.bridge.now_ms());
        let origin = origin::deliver(&self.manager, &self.bridge, job, &body, true).await;
        if self.to_creator(job, body, true, origin) {
            return;
        }
        let notification = SystemNotification {
            key: delivery::failure_key(job.id),
            title: delivery::failure_title(job),
            body: failure_body(job, self.bridge.now_ms()),
            actions: Vec::new(),
        };
        let state = match self.bridge.post_notification(&notification).await {
            Ok(_) => DeliveryState::Sent,
            Err(e) => {
                tracing::warn!(job_id = job.id, error = %e, "jobs: posting a failure alert failed");
                self.audit(
                    "assistant.background_job.delivery_failed",
                    json!({ "job_id": job.id, "alert": true, "error": e.code() }),
                );
                DeliveryState::Failed
            }
        };
        if let Err(e) = delivery::record_delivery(&self.store, job.id, job.last_run_at, state) {
            tracing::warn!(job_id = job.id, error = %e, "jobs: recording an alert's delivery failed");
        }
    }

    /// What a runtime's job delivers goes to the runtime that created it, never into the
    /// user's notification shade (issue 28): `background_job.delivered` addressed to that
    /// runtime (and operators) with the body in `detail`; the delivery is recorded as
    /// `unverified` (the event bus does not confirm that the runtime was connected to read it)
    /// with a `background_event` audit record naming the creator — `sent` instead when the
    /// result was handed to the runtime's own session it was made in (`origin`: Some(true)).
    /// `false` for the user's own jobs, which the caller delivers to the phone.
    fn to_creator(&self, job: &AgentJob, body: String, alert: bool, origin: Option<bool>) -> bool {
        let created_by = match self.store.get_job(job.id) {
            Ok(Some(row)) => row.created_by,
            Ok(None) => return true,
            Err(e) => {
                // Unknown owner: deliver to nobody rather than to the wrong one.
                tracing::warn!(job_id = job.id, error = %e, "jobs: reading a job's creator failed");
                return true;
            }
        };
        if openphone_store::is_user_creator(&created_by) {
            return false;
        }
        let mut event = view(job);
        event.detail = Some(body);
        event.outcome = Some(if alert { "failure_alert" } else { "delivered" }.to_owned());
        let audience = Audience {
            runtime: Some(created_by.clone()),
            operators: true,
        };
        let state = match self
            .bridge
            .events()
            .publish(&Event::JobDelivered(event), audience)
        {
            Ok(_) if origin == Some(true) => DeliveryState::Sent,
            Ok(_) => DeliveryState::Unverified,
            Err(e) => {
                tracing::warn!(job_id = job.id, error = %e, "jobs: delivering to a runtime failed");
                DeliveryState::Failed
            }
        };
        self.audit(
            "assistant.background_job.delivered_to_creator",
            json!({
                "job_id": job.id, "created_by": created_by, "alert": alert,
                "state": state.as_str(),
            }),
        );
        if let Err(e) = delivery::record_delivery(&self.store, job.id, job.last_run_at, state) {
            tracing::warn!(job_id = job.id, error = %e, "jobs: recording a delivery failed");
        }
        true
    }

    /// Renders job `job_id`'s artifacts from the store (off the async threads); a failure is
    /// logged, never fatal.
    async fn write_artifacts(&self, job_id: i64) {
        let (store, artifacts, now) = (
            Arc::clone(&self.store),
            self.artifacts.clone(),
            self.bridge.now_ms(),
        );
        let written =
            tokio::task::spawn_blocking(move || artifacts.write(&store, job_id, now)).await;
        match written {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(job_id, error = %e, "jobs: writing a job's artifacts failed")
            }
            Err(e) => tracing::warn!(job_id, error = %e, "jobs: the artifacts task failed"),
        }
    }

    fn current(&self, job_id: i64) -> Option<AgentJob> {
        match self.store.get_job(job_id) {
            Ok(row) => row.map(|r| r.job),
            Err(e) => {
                tracing::warn!(job_id, error = %e, "jobs: reading a job for its event failed");
                None
            }
        }
    }

    fn publish_current(&self, job_id: i64) {
        if let Some(job) = self.current(job_id) {
            self.publish(Event::JobUpdated(view(&job)));
        }
    }

    fn publish(&self, event: Event) {
        let audience = Audience {
            runtime: None,
            operators: true,
        };
        if let Err(e) = self.bridge.events().publish(&event, audience) {
            tracing::warn!(error = %e, "jobs: publishing an event failed");
        }
    }

    /// A `background_event` audit record: `what` names it, `payload` holds ids and
    /// lifecycle data only.
    fn audit(&self, what: &str, payload: Value) {
        audit_background(&self.bridge, what, payload);
    }
}

/// Appends a `background_event` record (`what`, with `payload` as its data) to the audit log.
pub fn audit_background(bridge: &ToolBridge, what: &str, payload: Value) {
    let now_ms = bridge.now_ms();
    let request_id = format!("{what}-{}", uuid::Uuid::new_v4());
    let entry = AuditEntry {
        audit_id: format!("background:{request_id}"),
        kind: AuditKind::BackgroundEvent,
        at_ms: now_ms,
        runtime: "daemon".into(),
        caller: openphone_store::Caller {
            runtime: "daemon".into(),
            transport: "internal".into(),
            principal: "scheduler".into(),
        },
        request_id,
        tool: Some(what.to_owned()),
        policy_proof: Some(payload),
        ..Default::default()
    };
    if let Err(e) = bridge.record_background_event(entry) {
        tracing::error!(error = %e, event = what, "jobs: an audit record could not be written");
    }
}

/// The job an event concerns (its artifacts are rendered again).
fn event_job(event: &SchedulerEvent) -> Option<i64> {
    match event {
        SchedulerEvent::Created { job }
        | SchedulerEvent::Finished { job, .. }
        | SchedulerEvent::Repaired { job, .. } => Some(job.id),
        SchedulerEvent::Claimed { job_id, .. }
        | SchedulerEvent::FailureAlert { job_id, .. }
        | SchedulerEvent::Stopped { job_id }
        | SchedulerEvent::ReviewRequired { job_id, .. }
        | SchedulerEvent::ReviewResolved { job_id, .. } => Some(*job_id),
        SchedulerEvent::Discarded { .. } => None,
    }
}

/// The alert of an approved action whose outcome is unknown after a crash (§9.10).
fn outcome_unknown_notification(job_id: i64, title: &str) -> SystemNotification {
    SystemNotification {
        key: delivery::failure_key(job_id),
        title: delivery::stopped_title(title),
        body: "The daemon stopped while an action you approved was running; whether it took \
               effect is unknown, and it is not run again."
            .to_owned(),
        actions: Vec::new(),
    }
}

/// A job as its events carry it (the view of §10).
pub fn view(job: &AgentJob) -> BackgroundJobEvent {
    BackgroundJobEvent {
        job_id: job.id,
        title: job.title.clone(),
        status: job.status.as_str().to_owned(),
        phase: job.phase.as_str().to_owned(),
        progress_text: job.progress_text.clone(),
        unread_result: job.unread_result,
        failure_count: job.failure_count,
        next_run_at: job.next_run_at,
        confirmation_id: (!job.pending_confirmation_id.is_empty())
            .then(|| job.pending_confirmation_id.clone()),
        detail: None,
        outcome: None,
        expires_at: None,
    }
}
