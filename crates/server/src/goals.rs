//! The daemon's side of goals (`docs/goals.md`): one [`GoalEngine`] over the daemon's store
//! and bridge, and the driver that ticks goals when something happens and when they fall due.
//!
//! A goal is ticked
//! - at start, every goal that is not finished (late checkpoints, attempts a killed process
//!   left running: the engine re-sends their idempotency key first, never a blind re-run);
//! - when a confirmation of one of its actions is resolved (the `runtime.confirmation.resolved`
//!   event of a request whose id is `goal_<id>:<action>:<n>`);
//! - when something happens that it waits for (`goals.md` §3's triggers, all read from the
//!   bridge's event bus): a message, call or notification on the phone, a watcher firing or a
//!   runtime's final message that a RUNNING `wait` is waiting `on` (the engine ingests it into
//!   the goal first, [`GoalEngine::observe`]; a goal blocked only on its success criteria is
//!   ticked on every such event too), and any change of an agent job a RUNNING `job` action
//!   waits for (`background_job.updated`, `background_job.failure_alert`);
//! - when the endpoint changed it (created, planned, answered, retried, resumed) or asked
//!   (`goals.tick`), and when [`GoalDriver::wake`] is called (the `openphone.goals.*` tools);
//! - when its `next_wake` falls due (one timer for the earliest goal, no polling).
//!
//! Ticks of one goal never overlap: a wake that arrives while the goal ticks runs one more tick
//! afterwards. After each tick the driver publishes the `goal.*` events and sends the pending
//! delta reports (`Deliverer`: the phone's shade, a webhook, Telegram; the bot token never
//! reaches a log or an error).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use openphone_core::{Audience, ToolBridge};
use openphone_goals::delivery::{BridgeOutbox, Deliverer, DeliveryConfig, Outbox, TelegramConfig};
use openphone_goals::report::render_plain;
use openphone_goals::{
    ActionState, Backends, Goal, GoalEngine, GoalState, GoalsError, Happening, TickOutcome,
    Transition, waiting_jobs,
};
use openphone_protocol::endpoint::{Event, GoalEvent};
use openphone_store::Store;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

use crate::config::GoalsConfig;

/// The artifacts directory under the data directory (`<data dir>/artifacts/<goal-id>/`).
pub const ARTIFACTS_DIR: &str = "artifacts";
/// Reports sent per delivery round.
const DELIVERY_BATCH: usize = 50;
/// How often reports whose delivery failed are tried again.
const DELIVERY_RETRY: Duration = Duration::from_secs(60);
/// The soonest a goal is ticked again by time after a tick.
const MIN_RETICK_MS: i64 = 1_000;
/// The longest the timer sleeps before looking again (a clock that jumped is noticed).
const MAX_SLEEP: Duration = Duration::from_secs(300);
/// Job changes remembered for goals that have not recorded their job yet.
const RECENT_JOBS: usize = 256;

enum Msg {
    /// Tick this goal.
    Wake(String),
    /// A tick of this goal (any caller's) found its next wake by time.
    Due(String, Option<i64>),
    /// A tick the loop started for this goal ended.
    Done(String),
}

/// The goal driver of a daemon.
pub struct GoalDriver {
    engine: Arc<GoalEngine>,
    bridge: Arc<ToolBridge>,
    deliverer: Deliverer,
    /// One delivery round at a time (a report is never sent twice by racing rounds).
    delivering: tokio::sync::Mutex<()>,
    tx: mpsc::UnboundedSender<Msg>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<Msg>>>,
    jobs: Mutex<JobWaits>,
}

/// The agent jobs that changed while no goal was found waiting for them: a job can change
/// before the tick that created it has stored its id.
#[derive(Default)]
struct JobWaits {
    recent: std::collections::VecDeque<i64>,
}

impl std::fmt::Debug for GoalDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoalDriver").finish_non_exhaustive()
    }
}

/// The delivery settings of the `[goals]` table.
pub fn delivery_config(config: &GoalsConfig) -> DeliveryConfig {
    fn set(v: &Option<String>) -> Option<&str> {
        v.as_deref().map(str::trim).filter(|t| !t.is_empty())
    }
    let telegram = match (
        set(&config.telegram_bot_token),
        set(&config.telegram_chat_id),
    ) {
        (Some(token), Some(chat)) => Some(TelegramConfig {
            api_base: set(&config.telegram_api)
                .unwrap_or(openphone_goals::delivery::TELEGRAM_API)
                .trim_end_matches('/')
                .to_owned(),
            bot_token: token.to_owned(),
            chat_id: chat.to_owned(),
        }),
        _ => None,
    };
    DeliveryConfig {
        webhook_url: set(&config.webhook_url).map(str::to_owned),
        telegram,
    }
}

impl GoalDriver {
    /// The engine over the daemon's `store` and bridge with the `agent_turn` / `job`
    /// `backends` (`crate::goal_backends::goal_backends`), artifacts under
    /// `<data_dir>/artifacts`, reports delivered as `config` says. Nothing runs until
    /// [`GoalDriver::start`].
    pub fn new(
        bridge: &Arc<ToolBridge>,
        store: &Arc<Store>,
        data_dir: &Path,
        backends: Backends,
        config: &GoalsConfig,
    ) -> Arc<Self> {
        let engine = Arc::new(GoalEngine::new(
            Arc::clone(store),
            Arc::clone(bridge),
            backends,
            Some(data_dir.join(ARTIFACTS_DIR)),
        ));
        let deliverer = Deliverer::new(
            Arc::clone(store),
            delivery_config(config),
            Some(Arc::new(BridgeOutbox(Arc::clone(bridge))) as Arc<dyn Outbox>),
        );
        let (tx, rx) = mpsc::unbounded_channel();
        Arc::new(GoalDriver {
            engine,
            bridge: Arc::clone(bridge),
            deliverer,
            delivering: tokio::sync::Mutex::new(()),
            tx,
            rx: Mutex::new(Some(rx)),
            jobs: Mutex::new(JobWaits::default()),
        })
    }

    /// The engine (the endpoint's `goals.*` methods use it).
    pub fn engine(&self) -> &Arc<GoalEngine> {
        &self.engine
    }

    /// Asks for a tick of `goal_id` soon (coalesced with one already running). Never blocks.
    pub fn wake(&self, goal_id: &str) {
        let _ = self.tx.send(Msg::Wake(goal_id.to_owned()));
    }

    /// [`GoalDriver::wake`] as a callback, for services that must not hold the driver.
    pub fn waker(&self) -> Arc<dyn Fn(&str) + Send + Sync> {
        let tx = self.tx.clone();
        Arc::new(move |goal_id: &str| {
            let _ = tx.send(Msg::Wake(goal_id.to_owned()));
        })
    }

    /// Ticks `goal_id` now, publishes its events, delivers its reports and re-arms its timer.
    pub async fn tick(&self, goal_id: &str) -> Result<TickOutcome, GoalsError> {
        let before = self.engine.get(goal_id)?;
        let outcome = self.engine.tick(goal_id).await?;
        let _ = self
            .tx
            .send(Msg::Due(goal_id.to_owned(), outcome.next_wake));
        match self.engine.get(goal_id) {
            Ok(after) => {
                self.publish_tick(&before, &after, &outcome);
                self.note_jobs(&after);
            }
            Err(e) => {
                tracing::warn!(goal = goal_id, error = %e, "goals: reading a goal after its tick failed")
            }
        }
        self.deliver().await;
        Ok(outcome)
    }

    /// Publishes `goal.created` (or `goal.updated`) for a change the endpoint made, and
    /// `goal.report` for the reports it made (those after the first `reports_before`), and
    /// delivers them.
    pub async fn changed(&self, goal: &Goal, created: bool, reports_before: usize) {
        let event = summary(goal, openphone_goals::engine::next_wake(goal));
        self.publish(if created {
            Event::GoalCreated(event)
        } else {
            Event::GoalUpdated(event)
        });
        self.publish_new_reports(goal, reports_before);
        self.deliver().await;
    }

    /// Starts the driver: every unfinished goal is ticked at once, then on wakes, resolved
    /// confirmations and timers, until `shutdown`.
    pub fn start(self: &Arc<Self>, shutdown: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        let Some(rx) = self
            .rx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Vec::new();
        };
        match self.engine.list(&[], None) {
            Ok(goals) => {
                for goal in goals.iter().filter(|g| !g.state.is_terminal()) {
                    self.wake(&goal.id);
                }
            }
            Err(e) => tracing::error!(error = %e, "goals: listing goals at start failed"),
        }
        // Goals never read tool results: the bus need not build them for this reader.
        let events = self.bridge.events().subscribe_quiet();
        vec![
            tokio::spawn(Arc::clone(self).run(rx, shutdown.clone())),
            tokio::spawn(Arc::clone(self).triggers(events, shutdown.clone())),
            tokio::spawn(Arc::clone(self).retry_deliveries(shutdown)),
        ]
    }

    /// The loop: wakes (coalesced per goal, each tick in its own task) and the timer.
    async fn run(
        self: Arc<Self>,
        mut rx: mpsc::UnboundedReceiver<Msg>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        // Goals ticking now, and whether another tick was asked for meanwhile.
        let mut ticking: HashMap<String, bool> = HashMap::new();
        // The next wake by time of each goal.
        let mut due: BTreeMap<String, i64> = BTreeMap::new();
        loop {
            let now = self.engine.now();
            let sleep = due
                .values()
                .min()
                .map(|at| Duration::from_millis(u64::try_from(at - now).unwrap_or(0)))
                .unwrap_or(MAX_SLEEP)
                .min(MAX_SLEEP);
            let msg = tokio::select! {
                msg = rx.recv() => match msg {
                    Some(msg) => Some(msg),
                    None => return,
                },
                () = tokio::time::sleep(sleep) => None,
                () = crate::shutdown::stopped(&mut shutdown) => return,
            };
            let mut start = Vec::new();
            match msg {
                Some(Msg::Wake(id)) => start.push(id),
                Some(Msg::Due(id, next)) => {
                    match next {
                        // A wake the tick left in the past (a paused goal's elapsed backoff,
                        // an expiry the bridge has not applied yet) is looked at again a
                        // little later, never in a tight loop.
                        Some(at) => due.insert(id, at.max(self.engine.now() + MIN_RETICK_MS)),
                        None => due.remove(&id),
                    };
                }
                Some(Msg::Done(id)) => {
                    if ticking.remove(&id) == Some(true) {
                        // Asked again while it ticked: once more.
                        start.push(id);
                    }
                }
                None => {
                    let now = self.engine.now();
                    let ripe: Vec<String> = due
                        .iter()
                        .filter(|(_, at)| **at <= now)
                        .map(|(id, _)| id.clone())
                        .collect();
                    for id in ripe {
                        due.remove(&id);
                        start.push(id);
                    }
                }
            }
            for id in start {
                if let Some(again) = ticking.get_mut(&id) {
                    *again = true;
                    continue;
                }
                ticking.insert(id.clone(), false);
                let driver = Arc::clone(&self);
                tokio::spawn(async move {
                    if let Err(e) = driver.tick(&id).await {
                        tracing::warn!(goal = %id, code = e.code(), error = %e, "goals: a tick failed");
                    }
                    let _ = driver.tx.send(Msg::Done(id));
                });
            }
        }
    }

    /// What happens on the bus wakes the goals it concerns: a resolved confirmation of a
    /// goal's request, an event a goal's `wait` is waiting `on`, a change of an agent job a
    /// goal's `job` action waits for.
    async fn triggers(
        self: Arc<Self>,
        mut events: openphone_core::QuietSubscription,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = crate::shutdown::stopped(&mut shutdown) => return,
            };
            match event {
                Ok(event) => self.on_event(event).await,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    // Missed events may have been resolutions: every open goal looks again.
                    tracing::warn!(
                        missed = n,
                        "goals: the event bus ran ahead; waking every open goal"
                    );
                    if let Ok(goals) = self.engine.list(&[], None) {
                        for goal in goals.iter().filter(|g| !g.state.is_terminal()) {
                            self.wake(&goal.id);
                        }
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    async fn on_event(&self, event: openphone_core::events::Event) {
        let name = event.name.as_str();
        if name == "runtime.confirmation.resolved" {
            let request = event
                .payload
                .get("request_id")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("");
            if let Some(goal) = goal_of_request(request) {
                self.wake(goal);
            }
        } else if name == "background_job.updated" || name == "background_job.failure_alert" {
            if let Some(job) = event
                .payload
                .get("job_id")
                .and_then(serde_json::Value::as_i64)
            {
                self.job_changed(job);
            }
        } else if openphone_protocol::endpoint::GOAL_WAIT_EVENTS.contains(&name) {
            let happening = Happening {
                event: event.name.clone(),
                payload: event.payload,
                at: self.engine.now(),
                audience: event.audience.runtime,
            };
            match self.engine.observe(&happening).await {
                Ok(goals) => goals.iter().for_each(|g| self.wake(g)),
                Err(e) => {
                    tracing::warn!(event = name, code = e.code(), error = %e, "goals: ingesting an event failed")
                }
            }
        }
    }

    fn waits(&self) -> std::sync::MutexGuard<'_, JobWaits> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Job `job` changed: the goals waiting for it are ticked (or, when none is found, the
    /// change is remembered for the tick that records it).
    fn job_changed(&self, job: i64) {
        let open = match self.engine.list(
            &[GoalState::Active, GoalState::Blocked, GoalState::Paused],
            None,
        ) {
            Ok(goals) => goals,
            Err(e) => {
                tracing::warn!(job, error = %e, "goals: listing goals for a job change failed");
                return;
            }
        };
        let waiting: Vec<&Goal> = open
            .iter()
            .filter(|g| waiting_jobs(g).contains(&job))
            .collect();
        if waiting.is_empty() {
            let mut waits = self.waits();
            if waits.recent.len() >= RECENT_JOBS {
                waits.recent.pop_front();
            }
            waits.recent.push_back(job);
        }
        for goal in waiting {
            self.wake(&goal.id);
        }
    }

    /// After a tick: a job `goal` waits for that changed before it was recorded wakes the goal
    /// again.
    fn note_jobs(&self, goal: &Goal) {
        let jobs = waiting_jobs(goal);
        let again = {
            let mut waits = self.waits();
            let before = waits.recent.len();
            waits.recent.retain(|j| !jobs.contains(j));
            waits.recent.len() != before
        };
        if again {
            self.wake(&goal.id);
        }
    }

    /// Reports whose delivery failed are tried again every minute (from the stored report;
    /// the goal is never re-run for it).
    async fn retry_deliveries(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut every = tokio::time::interval(DELIVERY_RETRY);
        loop {
            tokio::select! {
                _ = every.tick() => self.deliver().await,
                () = crate::shutdown::stopped(&mut shutdown) => return,
            }
        }
    }

    /// One delivery round.
    async fn deliver(&self) {
        let _one = self.delivering.lock().await;
        match self.deliverer.deliver_pending(DELIVERY_BATCH).await {
            Ok(done) => {
                for d in done.iter().filter(|d| !d.error.is_empty()) {
                    tracing::warn!(
                        goal = %d.goal_id,
                        seq = d.seq,
                        state = ?d.state,
                        error = %d.error,
                        "goals: a report was not delivered"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "goals: delivering reports failed"),
        }
    }

    fn publish_tick(&self, before: &Goal, after: &Goal, outcome: &TickOutcome) {
        for t in &outcome.transitions {
            if t.to == ActionState::NeedsApproval {
                let mut event = summary(after, outcome.next_wake);
                event.action_id = Some(t.action_id.clone());
                event.confirmation_id = confirmation_of(after, &t.action_id);
                event.detail = Some(t.reason.clone());
                self.publish(Event::GoalApprovalRequested(event));
            } else if t.from == ActionState::NeedsApproval {
                let mut event = summary(after, outcome.next_wake);
                event.action_id = Some(t.action_id.clone());
                event.confirmation_id = confirmation_of(before, &t.action_id);
                event.detail = Some(format!("{}: {}", t.to, t.reason));
                self.publish(Event::GoalApprovalResolved(event));
            }
        }
        if !outcome.transitions.is_empty()
            || before.state != after.state
            || before.checkpoints != after.checkpoints
        {
            let mut event = summary(after, outcome.next_wake);
            if !outcome.transitions.is_empty() {
                event.detail = Some(
                    outcome
                        .transitions
                        .iter()
                        .map(line)
                        .collect::<Vec<_>>()
                        .join("\n"),
                );
            }
            self.publish(Event::GoalUpdated(event));
        }
        for report in &outcome.reports {
            let mut event = summary(after, outcome.next_wake);
            event.report = Some(render_plain(report));
            self.publish(Event::GoalReport(event));
        }
    }

    /// `goal.report` for the reports a change made: those after the first `reports_before`.
    fn publish_new_reports(&self, goal: &Goal, reports_before: usize) {
        let reports = match self.engine.reports(&goal.id) {
            Ok(reports) => reports,
            Err(e) => {
                tracing::warn!(goal = %goal.id, error = %e, "goals: reading reports failed");
                return;
            }
        };
        for stored in reports.iter().skip(reports_before) {
            if let Ok(report) = serde_json::from_value(stored.report.clone()) {
                let mut event = summary(goal, openphone_goals::engine::next_wake(goal));
                event.report = Some(render_plain(&report));
                self.publish(Event::GoalReport(event));
            }
        }
    }

    fn publish(&self, event: Event) {
        let audience = Audience {
            runtime: None,
            operators: true,
        };
        if let Err(e) = self.bridge.events().publish(&event, audience) {
            tracing::warn!(error = %e, "goals: publishing an event failed");
        }
    }
}

/// The goal a request belongs to: `goal_<ulid>:<action>:<n>` → `goal_<ulid>`.
pub fn goal_of_request(request_id: &str) -> Option<&str> {
    let (goal, rest) = request_id.split_once(':')?;
    (goal.starts_with("goal_") && !rest.is_empty()).then_some(goal)
}

fn confirmation_of(goal: &Goal, action: &str) -> Option<String> {
    goal.action(action)
        .and_then(|a| a.last_attempt())
        .and_then(|a| a.confirmation_id.clone())
}

fn line(t: &Transition) -> String {
    format!(
        "{} {} -> {} ({}) {}",
        t.action_id,
        t.from,
        t.to,
        t.source.as_str(),
        t.reason
    )
}

/// The goal at a glance, as every `goal.*` event carries it.
pub fn summary(goal: &Goal, next_wake: Option<i64>) -> GoalEvent {
    GoalEvent {
        goal_id: goal.id.clone(),
        objective: goal.objective.clone(),
        state: goal.state.as_str().to_owned(),
        plan_version: goal.plan_version,
        done: goal
            .actions
            .iter()
            .filter(|a| a.state == ActionState::Done)
            .count(),
        total: goal.actions.len(),
        blockers: goal.blockers.len(),
        next_wake_at: next_wake,
        action_id: None,
        confirmation_id: None,
        detail: None,
        report: None,
    }
}
