//! [`HermesAdapter`]: a `kind = "hermes"` runtime inside the daemon. At start it serves the
//! phone's tools on a loopback endpoint (`tools.rs`), writes the Hermes plugin that calls it
//! (`plugin.rs`), and starts (or finds) Hermes' API server (`process.rs`). As a
//! [`LocalRuntime`] it turns attention requests routed to its runtime into Hermes runs
//! (`runs.rs`) whose replies come back as runtime messages.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use openphone_core::{LocalRuntime, RuntimeManager, ToolBridge};
use openphone_policy::{Caller, ToolPolicy, Transport};
use openphone_protocol::Registry;
use openphone_protocol::endpoint::{AttentionRequested, RuntimeMessageParams};
use tokio::process::Child;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{HermesConfig, HermesConfigError};
use crate::plugin::{self, ToolSurface};
use crate::process::{self, ApiServer};
use crate::sessions::Sessions;

/// The gateway's log in the data directory.
pub const GATEWAY_LOG: &str = "hermes-gateway.log";

/// What the adapter is built from.
#[derive(Debug, Clone)]
pub struct AdapterSetup {
    pub config: HermesConfig,
    /// The data directory (the gateway's log).
    pub data_dir: PathBuf,
    /// The one bridge every tool request goes through.
    pub bridge: Arc<ToolBridge>,
    /// The manager replies go through (held weakly: it holds the adapter).
    pub manager: Arc<RuntimeManager>,
    pub registry: &'static Registry,
    /// The configured tool policy (profiles, allow and deny lists).
    pub tool_policy: ToolPolicy,
}

/// Where the adapter stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// `enabled = false`.
    Disabled,
    /// Writing the plugin, starting Hermes, waiting for its API server.
    Starting,
    /// Hermes' API server answers; turns are accepted.
    Ready,
    /// Hermes could not be started or went away; the reason says what to fix.
    Failed { reason: String },
}

impl Status {
    /// `disabled`, `starting`, `ready`, `failed: <reason>`.
    pub fn line(&self) -> String {
        match self {
            Status::Disabled => "disabled".into(),
            Status::Starting => "starting".into(),
            Status::Ready => "ready".into(),
            Status::Failed { reason } => format!("failed: {reason}"),
        }
    }
}

/// The adapter. Cheap to clone.
#[derive(Debug, Clone)]
pub struct HermesAdapter {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) config: HermesConfig,
    pub(crate) data_dir: PathBuf,
    pub(crate) bridge: Arc<ToolBridge>,
    pub(crate) manager: Weak<RuntimeManager>,
    pub(crate) caller: Caller,
    pub(crate) surface: ToolSurface,
    pub(crate) http: reqwest::Client,
    pub(crate) status: watch::Sender<Status>,
    pub(crate) api: Mutex<Option<ApiServer>>,
    /// The token the plugin presents to the tool endpoint.
    pub(crate) tool_token: String,
    pub(crate) sessions: Mutex<Sessions>,
    pub(crate) shutdown: watch::Sender<bool>,
    pub(crate) tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The pid of the gateway the adapter started.
    pub(crate) gateway_pid: Mutex<Option<u32>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl HermesAdapter {
    /// Checks the configuration and builds the adapter; [`HermesAdapter::start`] starts it.
    pub fn new(setup: AdapterSetup) -> Result<HermesAdapter, HermesConfigError> {
        setup.config.check()?;
        // `Transport` has no in-process-runtime variant; a new one would change the audit's
        // `transport` values and every exhaustive match over it, so the adapter's caller is
        // labelled as the remote-runtime transport it stands in for (security review, low).
        let caller = Caller::remote(
            &setup.config.runtime_id,
            Transport::Websocket,
            "hermes-agent",
        )
        .with_authorisation(setup.config.authorisation);
        let bridge = setup.bridge;
        let surface = ToolSurface::new(setup.registry, &caller, &setup.tool_policy, |c| {
            bridge.offers(c)
        });
        let status = if setup.config.enabled {
            Status::Starting
        } else {
            Status::Disabled
        };
        let tool_token = process::random_token().unwrap_or_default();
        let http = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_default();
        Ok(HermesAdapter {
            inner: Arc::new(Inner {
                config: setup.config,
                data_dir: setup.data_dir,
                bridge,
                manager: Arc::downgrade(&setup.manager),
                caller,
                surface,
                http,
                status: watch::Sender::new(status),
                api: Mutex::new(None),
                tool_token,
                sessions: Mutex::new(Sessions::default()),
                shutdown: watch::Sender::new(false),
                tasks: Mutex::new(Vec::new()),
                gateway_pid: Mutex::new(None),
            }),
        })
    }

    /// Attaches to the manager and starts Hermes (unless disabled). Must run inside a Tokio
    /// runtime.
    pub fn start(&self) {
        if let Some(manager) = self.inner.manager.upgrade() {
            manager.set_adapter(&self.inner.config.runtime_id, Arc::new(self.clone()));
        }
        if !self.inner.config.enabled {
            return;
        }
        let inner = Arc::clone(&self.inner);
        let task = tokio::spawn(async move {
            if let Err(reason) = Arc::clone(&inner).bring_up().await {
                tracing::warn!(runtime = %inner.config.runtime_id, %reason, "Hermes adapter not started");
                inner.set_status(Status::Failed { reason });
            }
        });
        lock(&self.inner.tasks).push(task);
    }

    /// Stops the turns, the tool endpoint and the gateway it started; detaches.
    pub async fn shutdown(&self) {
        self.inner.shutdown.send_replace(true);
        let tasks: Vec<JoinHandle<()>> = lock(&self.inner.tasks).drain(..).collect();
        for task in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
        self.inner.end_all_turns("the daemon is stopping");
        if let Some(manager) = self.inner.manager.upgrade() {
            manager.clear_adapter(&self.inner.config.runtime_id);
        }
    }

    pub fn status(&self) -> Status {
        self.inner.status.borrow().clone()
    }

    /// Waits until the status satisfies `pred` (or `limit` passes); returns the last status.
    pub async fn wait_for(&self, limit: Duration, pred: impl Fn(&Status) -> bool) -> Status {
        let mut rx = self.inner.status.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|s| pred(s))).await;
        self.status()
    }

    /// The phone tools Hermes is given.
    pub fn surface(&self) -> &ToolSurface {
        &self.inner.surface
    }

    /// The pid of the `hermes gateway` the adapter started (`None` with `api_url`).
    pub fn gateway_pid(&self) -> Option<u32> {
        *lock(&self.inner.gateway_pid)
    }

    /// The Hermes session a phone session's turns run in, once it has had one.
    pub fn hermes_session(&self, phone_session_id: &str) -> Option<String> {
        lock(&self.inner.sessions).hermes_session_of(phone_session_id)
    }
}

impl Inner {
    pub(crate) fn set_status(&self, status: Status) {
        let was_ready = *self.status.borrow() == Status::Ready;
        let now_ready = status == Status::Ready;
        let changed = self.status.send_if_modified(|current| {
            let changed = *current != status;
            *current = status.clone();
            changed
        });
        if changed {
            tracing::info!(runtime = %self.config.runtime_id, status = %status.line(), "Hermes status");
        }
        if was_ready != now_ready
            && let Some(manager) = self.manager.upgrade()
        {
            manager.adapter_presence(&self.config.runtime_id, now_ready);
        }
    }

    pub(crate) async fn stopping(&self) {
        let mut rx = self.shutdown.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    pub(crate) fn api(&self) -> Option<ApiServer> {
        lock(&self.api).clone()
    }

    /// The tool endpoint, the plugin, then Hermes' API server.
    async fn bring_up(self: Arc<Self>) -> Result<(), String> {
        let tool_url = crate::tools::serve(Arc::clone(&self)).await?;
        let env = |k: &str| std::env::var_os(k);
        let (home, owned) = self.config.resolve_home(&self.data_dir);
        std::fs::create_dir_all(&home)
            .map_err(|e| format!("creating Hermes' home {}: {e}", home.display()))?;
        if owned {
            // The adapter's own home: only this user reads it (the plugin's token, sessions).
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("making Hermes' home {} private: {e}", home.display()))?;
        }
        let lockdown = process::write_tool_lockdown(&self.data_dir).map_err(|e| {
            format!(
                "writing the Hermes tool lockdown into {}: {e}",
                self.data_dir.display()
            )
        })?;
        plugin::install(&home, &self.surface, &tool_url, &self.tool_token)
            .map_err(|e| format!("writing the openphone plugin into {}: {e}", home.display()))?;
        let command = self.config.resolve_command(env("PATH").as_deref());
        if !plugin::enabled_in(&home) {
            let command = command.clone().map_err(|e| e.to_string())?;
            process::enable_plugin(&command, &home, &lockdown).await?;
        }
        let log = self.data_dir.join(GATEWAY_LOG);
        let (api, child) = match &self.config.api_url {
            Some(url) => {
                let key = std::env::var(crate::config::API_KEY_ENV).map_err(|_| {
                    format!(
                        "`api_url` is set but {} (the API server's key) is not in the daemon's \
                         environment",
                        crate::config::API_KEY_ENV
                    )
                })?;
                let root = crate::config::api_root(url).unwrap_or_else(|| url.clone());
                (ApiServer { root, key }, None)
            }
            None => {
                let command = command.map_err(|e| e.to_string())?;
                let (child, api) = process::spawn_gateway(&command, &home, &lockdown, &log)?;
                *lock(&self.gateway_pid) = child.id();
                (api, Some(child))
            }
        };
        let mut child = child;
        let limit = Duration::from_millis(self.config.start_timeout_ms);
        let log_ref = child.is_some().then_some(log.as_path());
        let healthy = tokio::select! {
            r = process::wait_healthy(&self.http, &api, child.as_mut(), limit, log_ref) => r,
            () = self.stopping() => Err("the daemon is stopping".to_owned()),
        };
        healthy?;
        if let Some(pid) = child.as_ref().and_then(Child::id) {
            let port = api
                .root
                .rsplit(':')
                .next()
                .and_then(|p| p.parse::<u16>().ok());
            let owned = port.map(|p| process::listener_belongs_to(p, pid));
            if !matches!(owned, Some(Ok(true))) {
                return Err(format!(
                    "the API server at {} is not the hermes gateway the daemon started (pid \
                     {pid}); another process holds the port ({owned:?})",
                    api.root
                ));
            }
        }
        *lock(&self.api) = Some(api.clone());
        tracing::info!(runtime = %self.config.runtime_id, api = %api.root, home = %home.display(),
            tools = self.surface.tools().len(), "Hermes API server ready");
        self.set_status(Status::Ready);
        if let Some(mut child) = child {
            // Watch the gateway: its exit is a failure the user sees; a stop kills it.
            tokio::select! {
                exit = child.wait() => {
                    let reason = match exit {
                        Ok(status) => format!("hermes gateway exited ({status}); see {}", log.display()),
                        Err(e) => format!("waiting for hermes gateway: {e}"),
                    };
                    self.set_status(Status::Failed { reason: reason.clone() });
                    self.end_all_turns(&reason);
                }
                () = self.stopping() => {
                    let _ = child.kill().await;
                }
            }
        } else {
            self.stopping().await;
        }
        Ok(())
    }

    /// Ends every turn in flight with `reason` (their replies cannot come).
    pub(crate) fn end_all_turns(&self, reason: &str) {
        let orphaned = lock(&self.sessions).drain_runs();
        for run in orphaned {
            self.reply_final(
                &run.phone_session_id,
                &run.attention_id,
                format!("Hermes stopped before the reply: {reason}"),
                Some("runtime_disconnected".to_owned()),
            );
        }
    }

    /// Sends a runtime message for a phone session.
    pub(crate) fn reply(&self, message: RuntimeMessageParams) {
        let Some(manager) = self.manager.upgrade() else {
            return;
        };
        if let Err(e) = manager.runtime_message(&self.config.runtime_id, message) {
            tracing::debug!(error = %e, "a Hermes reply for a session that has ended");
        }
    }

    pub(crate) fn reply_final(
        &self,
        phone_session_id: &str,
        attention_id: &str,
        text: String,
        error: Option<String>,
    ) {
        let runtime_session_id = lock(&self.sessions).hermes_session_of(phone_session_id);
        self.reply(RuntimeMessageParams {
            phone_session_id: phone_session_id.to_owned(),
            runtime_session_id,
            text,
            is_final: true,
            output: None,
            error,
            attention_id: Some(attention_id.to_owned()),
        });
    }
}

impl LocalRuntime for HermesAdapter {
    fn attend(&self, requested: AttentionRequested) {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(Arc::clone(&self.inner).run_turn(requested));
            }
            Err(_) => self.inner.reply_final(
                &requested.phone_session_id,
                &requested.attention_id,
                "the Hermes adapter was called outside the daemon's async runtime".into(),
                Some("runtime_unavailable".into()),
            ),
        }
    }

    fn cancel(&self, phone_session_id: &str) -> bool {
        let run = lock(&self.inner.sessions).take_run(phone_session_id);
        let Some(run) = run else {
            return false;
        };
        let inner = Arc::clone(&self.inner);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { inner.stop_run(&run.run_id).await });
        }
        true
    }

    fn configured(&self) -> Result<(), String> {
        match self.status() {
            Status::Ready => Ok(()),
            Status::Failed { reason } => Err(format!("failed: {reason}")),
            other => Err(other.line()),
        }
    }

    fn detail(&self) -> Option<String> {
        Some(self.status().line())
    }
}
