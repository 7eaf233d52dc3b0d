//! [`BuiltinRuntime`]: the daemon's own runtime. It takes the attention requests the
//! [`RuntimeManager`] routes to `builtin`, runs one bounded loop per request on its own task
//! (runs of one session one after another), and keeps a stop signal per run for
//! cancellation and shutdown.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use openphone_core::{BUILTIN_NOT_CONFIGURED, LocalRuntime};
use openphone_model::{ModelClient, ModelConfig};
use openphone_protocol::BUILTIN_RUNTIME_ID;
use openphone_protocol::endpoint::{AttentionRequested, RuntimeMessageParams};
use openphone_store::{ConfirmationFilter, ConfirmationState, SessionFilter, TranscriptEntry};
use tokio::sync::{Notify, watch};

use crate::config::{BuiltinConfig, BuiltinConfigError};
use crate::run::{self, Agent, Stop};
use crate::setup::BuiltinSetup;

/// The reason sessions interrupted by a daemon stop (or found active after a crash) fail with.
pub const DAEMON_STOPPED: &str = "daemon_stopped";

/// How long [`BuiltinRuntime::shutdown`] waits for running loops to stop.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(10);

/// The built-in runtime. Cheap to clone (one shared state).
#[derive(Debug, Clone)]
pub struct BuiltinRuntime {
    inner: Arc<Inner>,
}

/// The shared state of the runtime and its runs.
#[derive(Debug)]
pub(crate) struct Inner {
    /// What every run works with.
    agent: Agent,
    runs: Mutex<Runs>,
    idle: Notify,
}

#[derive(Debug, Default)]
struct Runs {
    next: u64,
    shutting_down: bool,
    sessions: HashMap<String, SessionRuns>,
}

/// The runs of one session: the gate that makes them take turns, and each one's stop signal.
#[derive(Debug)]
struct SessionRuns {
    gate: Arc<tokio::sync::Mutex<()>>,
    stops: BTreeMap<u64, watch::Sender<Option<Stop>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Attempts of an interactive model call while nothing accepts connections at the URL.
const INTERACTIVE_CONNECT_ATTEMPTS: u32 = 2;

impl BuiltinRuntime {
    /// The runtime for a `[builtin]` table, or an unconfigured one without it (attention
    /// requests then answer `runtime_not_configured` with the fix). The API key is read
    /// now; a table that cannot be used is an error naming the key.
    pub fn from_config(
        setup: BuiltinSetup,
        config: Option<&BuiltinConfig>,
    ) -> Result<BuiltinRuntime, BuiltinConfigError> {
        let Some(config) = config else {
            return Ok(BuiltinRuntime::build(
                setup,
                BuiltinConfig::new("", ""),
                None,
            ));
        };
        let mut model = config.model_config()?;
        // Someone waits on `ask`: a model server that is not running is said at once (one
        // retry for a restart in progress), not after the whole backoff (issue 31).
        model.connect_attempts = Some(INTERACTIVE_CONNECT_ATTEMPTS);
        let client = ModelClient::with_clock(model, setup.bridge.clock())
            .map_err(|e| BuiltinConfigError(e.detail()))?;
        Ok(BuiltinRuntime::build(setup, config.clone(), Some(client)))
    }

    /// The runtime with a model client built by the caller (tests set its retry policy);
    /// `config` gives the limits of a run.
    pub fn with_client(
        setup: BuiltinSetup,
        config: BuiltinConfig,
        client: ModelClient,
    ) -> BuiltinRuntime {
        BuiltinRuntime::build(setup, config, Some(client))
    }

    /// [`BuiltinRuntime::with_client`] from a model configuration.
    pub fn with_model(
        setup: BuiltinSetup,
        config: BuiltinConfig,
        model: ModelConfig,
    ) -> Result<BuiltinRuntime, BuiltinConfigError> {
        let client = ModelClient::with_clock(model, setup.bridge.clock())
            .map_err(|e| BuiltinConfigError(e.detail()))?;
        Ok(BuiltinRuntime::with_client(setup, config, client))
    }

    fn build(
        setup: BuiltinSetup,
        config: BuiltinConfig,
        client: Option<ModelClient>,
    ) -> BuiltinRuntime {
        let (caller, tools) = setup.caller_and_tools();
        let unconfigured = setup.unconfigured(BUILTIN_NOT_CONFIGURED);
        let bridge = setup.bridge;
        BuiltinRuntime {
            inner: Arc::new(Inner {
                agent: Agent {
                    store: setup.store,
                    clock: bridge.clock(),
                    bridge,
                    manager: Arc::downgrade(&setup.manager),
                    client,
                    config,
                    caller,
                    tools,
                    unconfigured,
                },
                runs: Mutex::new(Runs::default()),
                idle: Notify::new(),
            }),
        }
    }

    /// Attaches this runtime to its manager ([`RuntimeManager::set_local`](openphone_core::RuntimeManager::set_local)).
    pub fn attach(&self) {
        if let Some(manager) = self.inner.agent.manager.upgrade() {
            manager.set_local(Arc::new(self.clone()));
        }
    }

    /// Whether a model is configured.
    pub fn is_configured(&self) -> bool {
        self.inner.agent.client.is_some()
    }

    /// The model-tool names offered to the model.
    pub fn tool_names(&self) -> Vec<String> {
        self.inner.agent.tools.names().map(str::to_owned).collect()
    }

    /// Runs in progress or queued.
    pub fn running(&self) -> usize {
        lock(&self.inner.runs)
            .sessions
            .values()
            .map(|s| s.stops.len())
            .sum()
    }

    /// The stored transcript of a session.
    pub fn transcript(
        &self,
        phone_session_id: &str,
    ) -> Result<Vec<TranscriptEntry>, openphone_store::StoreError> {
        self.inner.agent.store.transcript(phone_session_id)
    }

    /// At start: the pending confirmations of `builtin` that no run waits for (a previous
    /// daemon stopped or crashed mid-run) are withdrawn, so approving one can never run an
    /// orphaned request, and the built-in sessions still active fail with
    /// [`DAEMON_STOPPED`]; their transcripts stay. Returns how many sessions failed.
    pub async fn recover(&self) -> usize {
        let withdrawn = self.inner.withdraw_orphans().await;
        if withdrawn > 0 {
            tracing::info!(
                confirmations = withdrawn,
                "withdrew the pending confirmations of interrupted built-in runs"
            );
        }
        self.inner.fail_active(DAEMON_STOPPED)
    }

    /// Stops every run (each stops before its next model or tool call; a confirmation it
    /// waits on is withdrawn), waits for them up to ten seconds, fails the sessions that were
    /// still active with [`DAEMON_STOPPED`] and detaches from the manager. New requests are
    /// refused from now on.
    pub async fn shutdown(&self) {
        {
            let mut runs = lock(&self.inner.runs);
            runs.shutting_down = true;
            for session in runs.sessions.values() {
                for stop in session.stops.values() {
                    stop.send_replace(Some(Stop::Shutdown));
                }
            }
        }
        let all_done = async {
            loop {
                let notified = self.inner.idle.notified();
                if self.running() == 0 {
                    break;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(SHUTDOWN_WAIT, all_done).await.is_err() {
            tracing::warn!(
                running = self.running(),
                "built-in runs still going at the shutdown deadline"
            );
        }
        let failed = self.inner.fail_active(DAEMON_STOPPED);
        if failed > 0 {
            tracing::info!(
                sessions = failed,
                "built-in sessions stopped with the daemon"
            );
        }
        if let Some(manager) = self.inner.agent.manager.upgrade() {
            manager.clear_local();
        }
    }
}

impl Inner {
    /// Withdraws every pending confirmation of `builtin` whose session has no run here
    /// (goal actions' confirmations excepted). Returns how many were withdrawn.
    async fn withdraw_orphans(&self) -> usize {
        let pending = match self.agent.store.list_confirmations(&ConfirmationFilter {
            state: Some(ConfirmationState::Pending),
            runtime: Some(BUILTIN_RUNTIME_ID.to_owned()),
            limit: None,
        }) {
            Ok(pending) => pending,
            Err(e) => {
                tracing::error!(error = %e, "listing the pending confirmations of builtin");
                return 0;
            }
        };
        let mut withdrawn = 0;
        for record in pending {
            // The goal layer's own requests (key `goal_<id>:<action>:<n>`, no phone session)
            // are not a built-in run's: the goal engine waits on them across restarts.
            if record.phone_session_id.is_none()
                && record.request_id.starts_with("goal_")
                && openphone_protocol::goal_of(&record.identity.runtime_session_id).is_some()
            {
                continue;
            }
            let running = record
                .phone_session_id
                .as_deref()
                .is_some_and(|session| lock(&self.runs).sessions.contains_key(session));
            if running {
                continue;
            }
            match self
                .agent
                .bridge
                .withdraw(&self.agent.caller, &record.confirmation_id)
                .await
            {
                Ok(_) => withdrawn += 1,
                Err(e) => tracing::warn!(error = %e, confirmation = %record.confirmation_id,
                    "withdrawing the confirmation of an interrupted built-in run"),
            }
        }
        withdrawn
    }

    /// Fails every active built-in session with `reason` through a final message.
    fn fail_active(&self, reason: &str) -> usize {
        let Some(manager) = self.agent.manager.upgrade() else {
            return 0;
        };
        let sessions = match self.agent.store.list_sessions(&SessionFilter {
            runtime: Some(BUILTIN_RUNTIME_ID.to_owned()),
            status: None,
            limit: None,
        }) {
            Ok(sessions) => sessions,
            Err(e) => {
                tracing::error!(error = %e, "listing built-in sessions");
                return 0;
            }
        };
        let mut failed = 0;
        for session in sessions.into_iter().filter(|s| s.status.is_active()) {
            let message = RuntimeMessageParams {
                phone_session_id: session.phone_session_id.clone(),
                runtime_session_id: None,
                text: "The daemon stopped before this request was finished.".to_owned(),
                is_final: true,
                output: None,
                error: Some(reason.to_owned()),
                attention_id: None,
            };
            match manager.runtime_message(BUILTIN_RUNTIME_ID, message) {
                Ok(_) => failed += 1,
                Err(e) => tracing::warn!(error = %e, session = %session.phone_session_id,
                    "failing an interrupted built-in session"),
            }
        }
        failed
    }

    /// Forgets a finished run.
    fn finish(&self, phone_session_id: &str, run: u64) {
        let mut runs = lock(&self.runs);
        if let Some(session) = runs.sessions.get_mut(phone_session_id) {
            session.stops.remove(&run);
            if session.stops.is_empty() {
                runs.sessions.remove(phone_session_id);
            }
        }
        drop(runs);
        self.idle.notify_waiters();
    }

    /// Ends a session that could not be started, with `reason`.
    fn refuse(&self, requested: &AttentionRequested, reason: &str, detail: &str) {
        let Some(manager) = self.agent.manager.upgrade() else {
            return;
        };
        let message = RuntimeMessageParams {
            phone_session_id: requested.phone_session_id.clone(),
            runtime_session_id: None,
            text: detail.to_owned(),
            is_final: true,
            output: None,
            error: Some(reason.to_owned()),
            attention_id: Some(requested.attention_id.clone()),
        };
        if let Err(e) = manager.runtime_message(BUILTIN_RUNTIME_ID, message) {
            tracing::warn!(error = %e, "failing a built-in session that could not start");
        }
    }
}

impl LocalRuntime for BuiltinRuntime {
    fn attend(&self, requested: AttentionRequested) {
        let handle = match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle,
            Err(_) => {
                self.inner.refuse(
                    &requested,
                    "runtime_unavailable",
                    "the built-in runtime was called outside the daemon's async runtime",
                );
                return;
            }
        };
        let (tx, rx) = watch::channel(None);
        let session = requested.phone_session_id.clone();
        let (run, gate) = {
            let mut runs = lock(&self.inner.runs);
            if runs.shutting_down {
                drop(runs);
                self.inner.refuse(
                    &requested,
                    DAEMON_STOPPED,
                    "the daemon is stopping; ask again once it is back",
                );
                return;
            }
            runs.next += 1;
            let run = runs.next;
            let entry = runs
                .sessions
                .entry(session.clone())
                .or_insert_with(|| SessionRuns {
                    gate: Arc::new(tokio::sync::Mutex::new(())),
                    stops: BTreeMap::new(),
                });
            entry.stops.insert(run, tx);
            (run, Arc::clone(&entry.gate))
        };
        let inner = Arc::clone(&self.inner);
        handle.spawn(async move {
            {
                // Runs of one session take turns: a follow-up waits for the turn before it.
                let _turn = gate.lock().await;
                run::run(&inner.agent, requested, rx).await;
            }
            inner.finish(&session, run);
        });
    }

    fn cancel(&self, phone_session_id: &str) -> bool {
        let runs = lock(&self.inner.runs);
        match runs.sessions.get(phone_session_id) {
            Some(session) => {
                for stop in session.stops.values() {
                    stop.send_replace(Some(Stop::Cancelled));
                }
                !session.stops.is_empty()
            }
            None => false,
        }
    }

    fn configured(&self) -> Result<(), String> {
        match self.inner.agent.client {
            Some(_) => Ok(()),
            None => Err(self.inner.agent.unconfigured.clone()),
        }
    }
}
