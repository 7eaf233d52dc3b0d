//! The engine that makes watchers fire.
//!
//! - **Device events** ([`Watchers::handle_event`]): each active `message`, `call` and
//!   `notification` watcher looks at the event; a match fires it (a `no_reply` / `no_call`
//!   watcher is instead satisfied and ends).
//! - **Time** ([`Watchers::tick`]): `time` watchers fire when due (a recurring one moves to
//!   its next occurrence, missed ones collapsed); deadlines pass (`no_reply` / `no_call` fire,
//!   the others end); `screen` and `web` watchers are read when their check is due and fire
//!   on a change (`hash_change`) or when the text starts to match (`text_contains`,
//!   `semantic_match`).
//! - **A firing** is one store transaction ([`openphone_store::Store::fire_watcher`]): the
//!   firing row, the watcher's new state (ended unless recurring), the reaction's job and the
//!   `watcher.fired` audit record. Then `watcher.fired` is published and an attention
//!   reaction is delivered. A `dedupe_key` per trigger means the same event never fires a
//!   watcher twice, and a restart finds every firing whose attention reaction had not been
//!   delivered yet ([`Watchers::recover`]).
//!
//! Everything runs one step at a time (events and ticks are serialised), on the bridge's
//! clock; [`Watchers::tick`] takes "now" explicitly so tests drive it on a manual clock.
//!
//! This file holds the engine itself (its setup, the active watchers, the judge, the driver);
//! `events.rs` the device events, `time.rs` time and deadlines, `poll.rs` the `screen` and
//! `web` checks, `fire.rs` a firing and its reaction (and the recovery after a restart). The
//! store handle is the daemon's, handed over at construction: the watchers' tables are theirs.

#![deny(clippy::wildcard_enum_match_arm)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use openphone_core::{RuntimeManager, ToolBridge};
use openphone_device::DeviceEvent;
use openphone_jobs::Scheduler;
use openphone_protocol::Registry;
use openphone_store::{Store, WatcherRecord};
use serde_json::Value;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use crate::judge::Judge;
use crate::spec::{SpecContext, WatcherSpec};

mod events;
mod fire;
mod poll;
mod time;

/// When an agent reaction's job first runs: 15 s after the firing (`agent-jobs.md` §11).
pub const AGENT_JOB_DELAY_MS: i64 = 15_000;
/// The principal the engine's own requests are made as.
const RUNTIME_PRINCIPAL: &str = "watchers";
/// The pause before ticking again when a tick left a watcher due (it could not fire).
const TICK: Duration = Duration::from_secs(1);
/// The longest the driver sleeps between ticks (a wall clock that jumped is noticed).
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// What the engine needs.
pub struct WatchersSetup {
    /// The bridge: the clock, the event bus, the device's events, screen reads, the
    /// creator's authority.
    pub bridge: Arc<ToolBridge>,
    /// The store, for the watchers' own tables (watchers and their firings), handed over by
    /// the daemon at construction.
    pub store: Arc<Store>,
    /// Attention requests (a watcher without a reaction).
    pub manager: Arc<RuntimeManager>,
    /// The command manifest.
    pub registry: &'static Registry,
    /// The job scheduler; without one, watchers with a job reaction are refused at creation.
    pub scheduler: Option<Scheduler>,
    /// The model that judges `semantic_match`; without one, it is refused at creation.
    pub judge: Option<Arc<dyn Judge>>,
}

/// One firing, as the engine reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    pub watcher_id: i64,
    /// 1 for the watcher's first firing.
    pub firing: i64,
    /// `event`, `deadline`, `time` or `poll`.
    pub trigger: String,
    /// `agent_job`, `tool_call` or `attention`.
    pub reaction: String,
    /// The job the reaction created.
    pub job_id: Option<i64>,
    /// The watcher ended with it.
    pub ended: bool,
}

/// Live watchers: the engine, and (through [`crate::WatchersService`]) the
/// `openphone.watchers.*` commands.
pub struct Watchers {
    bridge: Arc<ToolBridge>,
    store: Arc<Store>,
    manager: Arc<RuntimeManager>,
    registry: &'static Registry,
    scheduler: Option<Scheduler>,
    judge: Option<Arc<dyn Judge>>,
    serial: tokio::sync::Mutex<()>,
    /// Raised when a watcher is created: the driver reads when it must next tick again.
    created: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for Watchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watchers")
            .field("jobs", &self.scheduler.is_some())
            .field("judge", &self.judge.is_some())
            .finish_non_exhaustive()
    }
}
fn cursor_i64(cursor: &Value, key: &str) -> Option<i64> {
    cursor.get(key).and_then(Value::as_i64)
}

impl Watchers {
    /// The engine over `setup`. Install its commands with [`Watchers::install`], drive it with
    /// [`Watchers::run`] (or [`Watchers::handle_event`] and [`Watchers::tick`] in tests).
    pub fn new(setup: WatchersSetup) -> Arc<Watchers> {
        Arc::new(Watchers {
            bridge: setup.bridge,
            store: setup.store,
            manager: setup.manager,
            registry: setup.registry,
            scheduler: setup.scheduler,
            judge: setup.judge,
            serial: tokio::sync::Mutex::new(()),
            created: Arc::new(tokio::sync::Notify::new()),
        })
    }

    /// Takes over `openphone.watchers.create/list/stop` on the bridge.
    pub fn install(self: &Arc<Self>) {
        self.bridge.install_service(Arc::new(
            crate::WatchersService::new(
                Arc::clone(&self.store),
                &self.bridge,
                self.registry,
                self.judge.is_some(),
                self.scheduler.is_some(),
            )
            .waking(Arc::clone(&self.created)),
        ));
    }

    /// What creation checks against.
    fn spec_context<'a>(&self, runtime: &'a str, now_ms: i64) -> SpecContext<'a> {
        SpecContext {
            registry: self.registry,
            now_ms,
            judge: self.judge.is_some(),
            jobs: self.scheduler.is_some(),
            runtime,
        }
    }

    /// A stored watcher's spec (a watcher stored before the engine existed is read from its
    /// raw params as creation would read them); `None`, logged, when it cannot be read.
    fn spec_of(&self, w: &WatcherRecord) -> Option<WatcherSpec> {
        WatcherSpec::from_stored(&w.params)
            .or_else(|_| {
                WatcherSpec::from_params(&w.params, &self.spec_context(&w.runtime, w.created_at_ms))
            })
            .map_err(|e| {
                tracing::warn!(watcher = w.watcher_id, error = %e, "a watcher cannot be read; it is skipped");
            })
            .ok()
    }

    /// Why the watcher may not work for its creator now (its source reads what the creator
    /// may not read: `crate::authority`); `None` when it may.
    fn creators_refusal(&self, w: &WatcherRecord, spec: &WatcherSpec) -> Option<String> {
        let command = crate::authority::source_command(spec.source)?;
        let authority = crate::authority::of(&self.bridge, &w.runtime, RUNTIME_PRINCIPAL);
        crate::authority::refusal_of(self.registry, &authority, command)
    }

    fn active(&self) -> Vec<(WatcherRecord, WatcherSpec)> {
        let mut list = match self.store.list_watchers(None, None) {
            Ok(list) => list,
            Err(e) => {
                tracing::error!(error = %e, "watchers: reading the active watchers");
                return Vec::new();
            }
        };
        // In a fleet sharing the store, each daemon runs the watchers made on it: they watch
        // its phones.
        if let Some(fleet) = self.store.fleet() {
            match fleet.watchers_here() {
                Ok(here) => list.retain(|w| here.contains(&w.watcher_id)),
                Err(e) => {
                    tracing::error!(error = %e, "watchers: reading this host's watchers");
                    return Vec::new();
                }
            }
        }
        list.reverse();
        list.into_iter()
            .filter_map(|w| self.spec_of(&w).map(|s| (w, s)))
            .collect()
    }

    async fn judged(&self, spec: &WatcherSpec, content: &str) -> bool {
        let Some(judge) = &self.judge else {
            return false;
        };
        let condition = match (&spec.query, &spec.condition) {
            (Some(q), Some(c)) => format!("{q}\n{c}"),
            (Some(q), None) => q.clone(),
            (None, Some(c)) => c.to_string(),
            (None, None) => return false,
        };
        match judge.judge(&condition, content).await {
            Ok(yes) => yes,
            Err(e) => {
                tracing::warn!(error = %e, "watchers: the judge could not decide; no match");
                false
            }
        }
    }

    /// The driver the daemon spawns: recovers pending reactions, then handles device events
    /// as they come and ticks when a watcher is due by time (`next_due`; at most a minute
    /// apart; a new watcher makes it look again), until `shutdown` resolves. An idle daemon
    /// does not wake for watchers that are not due (issue 34).
    pub async fn run(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let recovered = self.recover().await;
        if recovered > 0 {
            tracing::info!(
                recovered,
                "watchers: delivered reactions a stop had interrupted"
            );
        }
        let mut events = self.bridge.device_events();
        let mut ticked = false;
        loop {
            let now = self.bridge.now_ms();
            let wait = match self.next_due(now) {
                None => MAX_SLEEP,
                // Due now: at once, or a second after a tick that left it due (never a busy loop).
                Some(at) if at <= now => {
                    if ticked {
                        TICK
                    } else {
                        Duration::ZERO
                    }
                }
                Some(at) => Duration::from_millis(u64::try_from(at - now).unwrap_or(0)),
            }
            .min(MAX_SLEEP);
            ticked = false;
            tokio::select! {
                () = self.created.notified() => {}
                () = &mut shutdown => break,
                received = next_event(&mut events) => match received {
                    Ok(event) => {
                        self.handle_event(&event).await;
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "watchers: device events were lost (too many at once)");
                    }
                    Err(RecvError::Closed) => events = None,
                },
                () = tokio::time::sleep(wait) => {
                    self.tick(self.bridge.now_ms()).await;
                    ticked = true;
                }
            }
        }
    }
}

/// The next device event, or never when the device has no stream.
async fn next_event(
    events: &mut Option<broadcast::Receiver<DeviceEvent>>,
) -> Result<DeviceEvent, RecvError> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
