//! The daemon: opens the data directory, recovers confirmations, serves the endpoint, writes
//! `endpoint.json` and `operator.token`, and shuts down cleanly.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use openphone_agent::{BuiltinConfigError, BuiltinRuntime, BuiltinSetup};
use openphone_clock::{Clock, SystemClock};
use openphone_core::{EventBus, RuntimeManager, ToolBridge};
use openphone_protocol::Registry;
use openphone_store::Store;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::auth::generate_token;
use crate::config::{Config, ConfigError};
use crate::principal::Credentials;
use crate::rate::RateLimiter;
use crate::shutdown::stopped;
use crate::state::AppState;

/// `<data-dir>/endpoint.json`.
pub const ENDPOINT_FILE: &str = "endpoint.json";
/// `<data-dir>/operator.token`.
pub const TOKEN_FILE: &str = "operator.token";

/// The contents of `endpoint.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointInfo {
    /// `ws://host:port/v1/runtime`.
    pub url: String,
    pub pid: u32,
    pub started_at_ms: i64,
    /// `http://host:port/mcp`, unless MCP is disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_url: Option<String>,
    /// The local MCP socket behind `openphone mcp serve`, unless MCP is disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_socket: Option<PathBuf>,
    /// The endpoint on a Unix socket (`endpoint.sock`, mode 0600): the operator's way in that
    /// a flood on the TCP port cannot exhaust. Clients of the user's account prefer it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
    /// The config file the daemon read, absolute; absent when it read none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_path: Option<PathBuf>,
    /// Where its configuration came from, in words ("config file /x.toml (named by
    /// OPENPHONE_CONFIG)", "no config file (…)").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_origin: Option<String>,
    /// The shared store of a fleet, when the daemon uses one (absent: SQLite in the data
    /// directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<Box<crate::fleet_host::EndpointStore>>,
}

pub use crate::phones::DeviceChoice;

/// How to start the daemon.
#[derive(Debug, Clone)]
pub struct DaemonOptions {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub device: DeviceChoice,
    pub config: Config,
}

/// Why the daemon did not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The `[builtin]` table cannot be used (a key it names is missing or unreadable).
    #[error("config: {0}")]
    Builtin(#[from] BuiltinConfigError),
    #[error(transparent)]
    Store(#[from] openphone_store::StoreError),
    #[error("the embedded manifests do not load: {0}")]
    Manifests(String),
    #[error("scenario: {0}")]
    Scenario(String),
    /// A phone of `--device` / `[device]` / `[[devices]]` cannot be used.
    #[error("device: {0}")]
    Device(String),
    #[error(
        "refusing to listen on non-loopback {0} without TLS: set `insecure_listen = true` in the config to accept that"
    )]
    NonLoopback(SocketAddr),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot bind the socket {path}: {source}")]
    Socket {
        path: String,
        source: std::io::Error,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("no randomness for the operator token: {0}")]
    Random(String),
    /// The `[jobs]` table cannot be used.
    #[error("config: {0}")]
    Jobs(String),
    #[error("mcp: {0}")]
    Mcp(String),
    /// The `[openclaw]` table or the device identity cannot be used.
    #[error("openclaw: {0}")]
    Openclaw(String),
    #[error("startup recovery failed: {0}")]
    Recovery(String),
    /// The runtimes or their routing are misconfigured.
    #[error("runtimes: {0}")]
    Runtimes(String),
    /// The data directory belongs to another user, or cannot be restricted to this one.
    #[error(transparent)]
    DataDir(#[from] crate::secure_dir::DataDirError),
    /// A token file of the data directory holds a token too weak to use.
    #[error(
        "the token in {path} is refused: {problem}. Fix: delete the file and restart (a new \
         token is generated; give hosts the new one, `openphone mcp token` prints it), or write \
         a token of at least {min} characters into it",
        min = crate::auth::MIN_TOKEN_CHARS
    )]
    WeakToken {
        path: String,
        problem: crate::auth::WeakToken,
    },
}

/// A running daemon.
#[derive(Debug)]
pub struct Daemon {
    addr: SocketAddr,
    data_dir: PathBuf,
    state: Arc<AppState>,
    shutdown: watch::Sender<bool>,
    server: JoinHandle<()>,
    timer: JoinHandle<()>,
    /// The built-in runtime (stopped first at shutdown).
    builtin: BuiltinRuntime,
    /// The job scheduler's driver and its event loop (`background.rs`), the scenario timeline.
    background: Vec<JoinHandle<()>>,
    /// Device events, live watchers (the scenario timeline runs among `background`).
    world: crate::world::World,
    /// The OpenClaw node adapter, with an `[openclaw]` table.
    openclaw: Option<openphone_openclaw::OpenclawAdapter>,
    /// The Hermes adapters (`kind = "hermes"` runtimes).
    hermes: Vec<openphone_hermes::HermesAdapter>,
    /// One line per phone: what it is, whether it answered at start (`phones.rs`).
    phone_notes: Vec<String>,
}

fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<(), DaemonError> {
    use std::io::Write;
    let err = |source| DaemonError::Write {
        path: path.display().to_string(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = opts.open(&tmp).map_err(err)?;
    file.write_all(contents).map_err(err)?;
    file.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

impl Daemon {
    /// Starts the daemon; returns once it accepts connections and `endpoint.json` is written.
    pub async fn start(opts: DaemonOptions) -> Result<Daemon, DaemonError> {
        let DaemonOptions {
            data_dir,
            listen,
            device,
            config,
        } = opts;
        if !listen.ip().is_loopback() && !config.insecure_listen {
            return Err(DaemonError::NonLoopback(listen));
        }
        config.check_mcp()?;
        config.check_endpoint()?;
        config.check_store()?;
        config.goals.check()?;
        let descriptors = crate::front::raise_descriptor_limit();
        let mut runtimes = config.credentials()?;
        // Owned by this user and restricted to it: before the store touches anything (what
        // was open to others is logged), and again, quietly, for the files a new database
        // comes with (SQLite creates them 0644, inside the 0700 directory).
        log_tightened(crate::secure_dir::secure(&data_dir)?);
        let store = crate::store_open::open_store(&config, &data_dir).await?;
        crate::secure_dir::secure(&data_dir)?;
        let registry = Registry::embedded().map_err(|e| DaemonError::Manifests(e.to_string()))?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        // The phones (`phones.rs`): a simulated one from its saved state when there is one
        // (`sim_state.rs`), an Android one through the adb server.
        let open_sim = |id: Option<&str>, scenario: Option<&Path>| {
            let file = crate::sim_state::state_path(&data_dir, id);
            crate::sim_state::open_sim(&file, scenario, clock.clone())
                .map(|(sim, _origin)| sim)
                .map_err(|e| e.to_string())
        };
        let phones = crate::phones::build(device.specs(&config)?, &open_sim)
            .await
            .map_err(DaemonError::Device)?;
        let profile = phones.devices.primary().1.profile();
        let events = Arc::new(EventBus::new(registry, 1024));
        if let Some(fleet) = store.fleet() {
            // The fleet learns which phones this host serves: its due jobs are claimed here,
            // and a request for one of them reaching another host is refused naming this one.
            fleet.register_devices(&phones.devices.ids())?;
        }
        let store = Arc::new(store);
        let manager = Arc::new(
            RuntimeManager::new(
                store.clone(),
                events.clone(),
                clock.clone(),
                config.runtimes_config()?,
            )
            .map_err(|e| DaemonError::Runtimes(e.to_string()))?,
        );
        let bridge = Arc::new(ToolBridge::with_devices(
            registry,
            Arc::clone(&store),
            phones.devices.clone(),
            clock,
            events,
            crate::runtime_policy::bridge_config(&config, &runtimes),
        ));
        bridge.set_device_grants(config.device_grants(&phones.devices.ids())?);
        let report = bridge
            .recover()
            .await
            .map_err(|e| DaemonError::Recovery(e.to_string()))?;
        tracing::info!(
            still_pending = report.still_pending.len(),
            timed_out = report.timed_out.len(),
            result_unknown = report.result_unknown.len(),
            executions_unknown = report.executions_unknown.len(),
            "recovered confirmations and direct executions"
        );

        let token = generate_token().map_err(|e| DaemonError::Random(e.to_string()))?;
        write_file(&data_dir.join(TOKEN_FILE), token.as_bytes(), 0o600)?;

        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|source| DaemonError::Bind {
                addr: listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| DaemonError::Bind {
            addr: listen,
            source,
        })?;

        let mcp_shutdown = openphone_mcp::CancellationToken::new();
        let mcp = if config.mcp.enabled && !addr.ip().is_loopback() {
            tracing::warn!(%addr, "MCP is served on loopback only: not on this address");
            None
        } else if config.mcp.enabled {
            Some(mcp_state(
                &data_dir,
                &config,
                &mut runtimes,
                &bridge,
                registry,
                addr,
                mcp_shutdown.clone(),
            )?)
        } else {
            None
        };
        // The runtimes as configured now (the default MCP runtime included): pending
        // confirmations of disabled or removed runtimes are withdrawn before anything is served.
        let withdrawn = crate::runtime_policy::apply(&bridge, &config, &runtimes)
            .await
            .map_err(|e| DaemonError::Recovery(e.to_string()))?;
        if !withdrawn.is_empty() {
            tracing::info!(
                withdrawn = withdrawn.len(),
                "withdrew pending confirmations"
            );
        }
        let setup = builtin_setup(&config, &runtimes, &bridge, &store, &manager, registry);
        // The agent_turn runner is bound below, once every tool it may offer is installed.
        let agent_turn = openphone_jobs::LateRunner::new();
        let jobs = crate::background::scheduler(
            Arc::clone(&store),
            &bridge,
            // system_event runs a watcher's stored tool call; agent_turn the built-in loop.
            crate::background::runners(
                &bridge,
                registry,
                Arc::clone(&store),
                &data_dir,
                config.builtin.as_ref(),
            )
            .with(openphone_jobs::JobType::AgentTurn, agent_turn.runner()),
            &config.jobs,
        );
        // The job tools are on the bridge before any tool list is built (the built-in runtime,
        // its background runs, OpenClaw's surface): each offers what the bridge serves when
        // it is built (issue 32).
        crate::background::install_tools(&jobs, &bridge);
        // The goal engine with its agent_turn / job backends, its driver, and the
        // `openphone.goals.*` commands on the bridge (which wake the driver).
        let goals = crate::goals::GoalDriver::new(
            &bridge,
            &store,
            &data_dir,
            crate::goal_backends::goal_backends(&setup, config.builtin.as_ref(), &jobs)?,
            &config.goals,
        );
        crate::goal_backends::install_tools(&bridge, goals.engine(), goals.waker());
        agent_turn.bind(
            openphone_agent::AgentTurnRunner::from_setup(
                &setup,
                config.builtin.as_ref(),
                Some(config.jobs.background_runtime.clone()),
            )
            .map_err(|e| DaemonError::Jobs(e.to_string()))?,
        );
        let builtin = builtin_runtime(&config, setup).await?;
        let openclaw = match &config.openclaw {
            Some(table) => {
                let adapter =
                    openphone_openclaw::OpenclawAdapter::new(openphone_openclaw::AdapterSetup {
                        config: table.clone(),
                        data_dir: data_dir.clone(),
                        bridge: bridge.clone(),
                        manager: manager.clone(),
                        registry,
                        tool_policy: config.tool_policy.clone(),
                        version: env!("CARGO_PKG_VERSION").to_owned(),
                    })
                    .map_err(|e| DaemonError::Openclaw(e.to_string()))?;
                adapter.start();
                tracing::info!(
                    url = %table.url,
                    device = %adapter.device_id(),
                    commands = adapter.surface().commands().len(),
                    "OpenClaw node adapter started"
                );
                Some(adapter)
            }
            None => None,
        };
        let hermes = crate::hermes::start(&config, &data_dir, &bridge, &manager, registry)
            .map_err(DaemonError::Runtimes)?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let mut background = crate::background::start(
            &jobs,
            &bridge,
            &manager,
            registry,
            Arc::clone(&store),
            &data_dir,
            shutdown_rx.clone(),
        );
        // Goals: every unfinished goal is ticked at start (late checkpoints, crash recovery).
        background.extend(goals.start(shutdown_rx.clone()));
        let shared_store = crate::fleet_host::endpoint_store(&store, &config);
        if shared_store.is_some() {
            background.push(tokio::spawn(crate::fleet_host::touch_host(
                Arc::clone(&store),
                shutdown_rx.clone(),
            )));
        }
        // The phone's world: device events to the bus, live watchers.
        let world = crate::world::start(crate::world::WorldSetup {
            bridge: bridge.clone(),
            store: Arc::clone(&store),
            manager: manager.clone(),
            registry,
            scheduler: Some(jobs.clone()),
            judge: match &config.builtin {
                Some(builtin) => Some(Arc::new(
                    openphone_agent::ModelJudge::from_config(builtin, bridge.clock())
                        .map_err(DaemonError::Builtin)?,
                ) as Arc<dyn openphone_watchers::Judge>),
                None => None,
            },
            shutdown: shutdown_rx.clone(),
        });
        // The simulated phone's scenario timeline (the phone itself is the bridge's), started
        // once the world listens, so an event due at start-up reaches the bus and the watchers.
        for sim in &phones.sims {
            background.push(crate::sim_state::spawn_saver(
                sim.clone(),
                shutdown_rx.clone(),
            ));
            background.push(tokio::spawn({
                let (sim, mut stop) = (sim.clone(), shutdown_rx.clone());
                async move {
                    sim.run_timeline(async move { stopped(&mut stop).await })
                        .await;
                }
            }));
        }
        let state = Arc::new(AppState {
            bridge: bridge.clone(),
            runtimes: manager,
            registry,
            profile,
            credentials: Credentials::new(token, runtimes),
            tool_policy: config.tool_policy.clone(),
            rate: RateLimiter::new(
                config.limits.rate_per_sec,
                config.limits.rate_burst,
                bridge.clock(),
            ),
            limits: config.limits.clone(),
            shutdown: shutdown_rx.clone(),
            connections: AtomicUsize::new(0),
            connection_closed: Notify::new(),
            mcp,
            front: crate::front::Front::new(
                &config.limits,
                config.endpoint.extra_allowed_origins.clone(),
                descriptors,
            ),
            jobs,
            goals,
            dashboard: addr
                .ip()
                .is_loopback()
                .then(crate::dashboard::Dashboard::default),
            phones: phones.specs.clone(),
        });
        let mcp_socket = if state.mcp.is_some() {
            let listener = crate::mcp::bind_socket(&data_dir).map_err(|e| {
                DaemonError::Mcp(format!("cannot bind {}: {e}", crate::mcp::SOCKET_FILE))
            })?;
            tokio::spawn(crate::mcp::serve_socket(state.clone(), listener));
            Some(data_dir.join(crate::mcp::SOCKET_FILE))
        } else {
            None
        };
        let socket_path = data_dir.join(crate::front::ENDPOINT_SOCKET_FILE);
        let local = crate::front::bind_socket(&data_dir).map_err(|source| DaemonError::Socket {
            path: socket_path.display().to_string(),
            source,
        })?;
        // The TCP port behind the front door's caps, and endpoint.sock beside it.
        let server = tokio::spawn({
            use crate::front::serve::{App, Listener, serve};
            let tcp = serve(
                state.clone(),
                Listener::Tcp(listener),
                crate::routes::app(state.clone()),
            );
            let local = serve(
                state.clone(),
                Listener::Local(local),
                App::new(crate::routes::local_router(state.clone())),
            );
            async move {
                tokio::join!(tcp, local);
            }
        });
        let mut stop = shutdown_rx;
        let retention = config.store.retention();
        let timer = tokio::spawn(crate::expiry_timer::run(
            bridge,
            store,
            retention,
            async move { stopped(&mut stop).await },
        ));

        let info = EndpointInfo {
            url: format!("ws://{addr}/v1/runtime"),
            pid: std::process::id(),
            started_at_ms: state.bridge.now_ms(),
            mcp_url: state.mcp.as_ref().map(|_| format!("http://{addr}/mcp")),
            mcp_socket,
            socket: Some(socket_path),
            config_path: config.path.clone(),
            config_origin: config.origin.clone(),
            store: shared_store,
        };
        let text = serde_json::to_vec_pretty(&info).map_err(|e| DaemonError::Write {
            path: ENDPOINT_FILE.into(),
            source: std::io::Error::other(e),
        })?;
        write_file(&data_dir.join(ENDPOINT_FILE), &text, 0o600)?;
        Ok(Daemon {
            addr,
            data_dir,
            state,
            shutdown: shutdown_tx,
            server,
            timer,
            builtin,
            background,
            world,
            openclaw,
            hermes,
            phone_notes: phones.notes,
        })
    }

    /// One line per phone: what it is and whether it answered at start (an Android phone
    /// that did not is kept: its calls answer the device's error until it is back).
    pub fn phone_notes(&self) -> &[String] {
        &self.phone_notes
    }

    /// The goal engine (its driver lives in the endpoint's state).
    pub fn goal_engine(&self) -> &Arc<openphone_goals::GoalEngine> {
        self.state.goals.engine()
    }

    /// The job scheduler (`jobs.*`): its jobs, as a front end reads them.
    pub fn jobs(&self) -> &openphone_jobs::Scheduler {
        &self.state.jobs
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `ws://<addr>/v1/runtime`.
    pub fn url(&self) -> String {
        format!("ws://{}/v1/runtime", self.addr)
    }

    /// Stops accepting, lets in-flight requests answer, closes connections, removes
    /// `endpoint.json`, and releases the data directory.
    pub async fn shutdown(self) {
        // Built-in runs stop before their next model or tool call; their sessions fail with
        // `daemon_stopped` (the transcripts stay).
        self.builtin.shutdown().await;
        // The gateway's copy of the phone tools is cleared before the socket closes.
        if let Some(openclaw) = &self.openclaw {
            openclaw.shutdown().await;
        }
        for hermes in &self.hermes {
            hermes.shutdown().await;
        }
        if let Some(mcp) = &self.state.mcp {
            // Interrupted MCP calls keep their confirmations pending for after a restart.
            mcp.backend.begin_shutdown();
            mcp.shutdown.cancel();
        }
        let _ = self.shutdown.send(true);
        let _ = self.server.await;
        let _ = self.timer.await;
        // The scheduler aborts its runs; rows left `running` are repaired at the next start.
        for task in self.background {
            let _ = task.await;
        }
        self.world.stopped().await;
        let state = self.state;
        let all_closed = async {
            while state.connections.load(Ordering::SeqCst) > 0 {
                let notified = state.connection_closed.notified();
                if state.connections.load(Ordering::SeqCst) == 0 {
                    break;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(15), all_closed)
            .await
            .is_err()
        {
            tracing::warn!("connections still open at shutdown deadline");
        }
        let _ = std::fs::remove_file(self.data_dir.join(ENDPOINT_FILE));
        let _ = std::fs::remove_file(self.data_dir.join(crate::mcp::SOCKET_FILE));
        let _ = std::fs::remove_file(self.data_dir.join(crate::front::ENDPOINT_SOCKET_FILE));
        tracing::info!("stopped");
    }
}

/// What the built-in runtime is built from, under the `builtin` entry of the bridge's runtime
/// table.
fn builtin_setup(
    config: &Config,
    runtimes: &[crate::config::RuntimeCredential],
    bridge: &Arc<ToolBridge>,
    store: &Arc<Store>,
    manager: &Arc<RuntimeManager>,
    registry: &'static Registry,
) -> BuiltinSetup {
    let authorisation = crate::runtime_policy::bridge_config(config, runtimes)
        .runtimes
        .and_then(|table| table.get(openphone_protocol::BUILTIN_RUNTIME_ID).copied())
        .unwrap_or_else(|| openphone_policy::Caller::builtin("daemon").authorisation());
    BuiltinSetup {
        bridge: Arc::clone(bridge),
        manager: Arc::clone(manager),
        // The daemon's construction hands the runs their store.
        store: Arc::clone(store),
        registry,
        authorisation,
        tool_policy: config.tool_policy.clone(),
        config_origin: config.origin.clone(),
    }
}

/// The built-in runtime, attached to the manager: configured by `[builtin]` (the API key read
/// now), or unconfigured without it. Built after the runtime services (jobs, goals) are on the
/// bridge, so its tool list offers them. Built-in sessions a previous daemon left active fail
/// with `daemon_stopped`.
async fn builtin_runtime(
    config: &Config,
    setup: BuiltinSetup,
) -> Result<BuiltinRuntime, DaemonError> {
    let builtin = BuiltinRuntime::from_config(setup, config.builtin.as_ref())?;
    let interrupted = builtin.recover().await;
    if interrupted > 0 {
        tracing::info!(
            sessions = interrupted,
            "built-in sessions interrupted by the previous stop marked failed"
        );
    }
    match &config.builtin {
        Some(table) => tracing::info!(
            base_url = %table.base_url,
            model = %table.model,
            tools = builtin.tool_names().len(),
            "built-in runtime configured"
        ),
        None => tracing::info!("built-in runtime not configured (no [builtin] table)"),
    }
    builtin.attach();
    Ok(builtin)
}

/// Logs what [`crate::secure_dir::secure`] tightened.
fn log_tightened(tightened: Vec<crate::secure_dir::Tightened>) {
    for t in tightened {
        tracing::warn!(path = %t.path.display(), from = %format!("{:o}", t.from),
            to = %format!("{:o}", t.to), "restricted to its owner: it was open to other users");
    }
}

/// Reads a secret file of the data directory, or creates it with `make` (mode 0600). Kept
/// across restarts, so hosts configured with it keep working.
fn persistent_secret(
    path: &Path,
    make: impl FnOnce() -> Result<Vec<u8>, DaemonError>,
) -> Result<Vec<u8>, DaemonError> {
    match std::fs::read(path) {
        Ok(bytes) if !bytes.is_empty() => return Ok(bytes),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(DaemonError::Write {
                path: path.display().to_string(),
                source,
            });
        }
    }
    let bytes = make()?;
    write_file(path, &bytes, 0o600)?;
    Ok(bytes)
}

/// The default MCP runtime's token: read from `path` (a present file must hold a usable
/// token: not empty, no inner whitespace, at least 16 characters), or generated into it.
fn mcp_token(path: &Path) -> Result<String, DaemonError> {
    let weak = |problem| DaemonError::WeakToken {
        path: path.display().to_string(),
        problem,
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let token = generate_token().map_err(|e| DaemonError::Random(e.to_string()))?;
            write_file(path, token.as_bytes(), 0o600)?;
            return Ok(token);
        }
        Err(source) => {
            return Err(DaemonError::Write {
                path: path.display().to_string(),
                source,
            });
        }
    };
    let text = String::from_utf8(bytes).map_err(|_| weak(crate::auth::WeakToken::NotText))?;
    let token = text.trim();
    crate::auth::check_token(token).map_err(weak)?;
    Ok(token.to_owned())
}

/// The MCP backend and its files: the default MCP runtime (unless configured) with its token in
/// `mcp.token`, and the key sealing `requestState`s in `mcp-state.key`.
#[allow(clippy::too_many_arguments)]
fn mcp_state(
    data_dir: &Path,
    config: &Config,
    runtimes: &mut Vec<crate::config::RuntimeCredential>,
    bridge: &Arc<ToolBridge>,
    registry: &'static Registry,
    addr: SocketAddr,
    shutdown: openphone_mcp::CancellationToken,
) -> Result<crate::mcp::McpState, DaemonError> {
    let random = |n: usize| -> Result<Vec<u8>, DaemonError> {
        let mut bytes = vec![0u8; n];
        getrandom::fill(&mut bytes).map_err(|e| DaemonError::Random(e.to_string()))?;
        Ok(bytes)
    };
    let default_id = config.mcp.default_runtime.clone();
    if !runtimes.iter().any(|r| r.id == default_id) {
        let token = mcp_token(&data_dir.join(crate::mcp::MCP_TOKEN_FILE))?;
        runtimes.push(crate::config::RuntimeCredential {
            id: default_id,
            token,
            enabled: true,
            // The user's own desktop host: every class, every mutation confirmed.
            grants: openphone_policy::ExposureGrants::ALL,
            max_autonomy: openphone_policy::Autonomy::AskBeforeAction,
            trust_client_confirmation: false,
            // Never a WebSocket runtime: over MCP `mcp: false` commands stay out of reach.
            mcp_only: true,
        });
    }
    let key = persistent_secret(&data_dir.join(crate::mcp::STATE_KEY_FILE), || random(32))?;
    let seal = openphone_mcp::StateSeal::new(&key).map_err(DaemonError::Mcp)?;
    let table =
        openphone_mcp::ToolTable::new(registry).map_err(|e| DaemonError::Mcp(e.to_string()))?;
    let page_addr = if addr.ip().is_unspecified() {
        SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
    } else {
        addr
    };
    let settings = openphone_mcp::McpSettings {
        local_confirmation_wait: Duration::from_millis(config.mcp.local_confirmation_wait_ms),
        progress_interval: Duration::from_secs(5),
        elicitation_timeout: Duration::from_millis(config.mcp.elicitation_timeout_ms),
        confirmation_timeout_ms: config.mcp.confirmation_timeout_ms,
        approval_url_base: Some(format!("http://{page_addr}/confirmations/")),
    };
    let backend = openphone_mcp::McpBackend::new(
        bridge.clone(),
        table,
        config.tool_policy.clone(),
        settings,
        Some(seal),
    );
    Ok(crate::mcp::McpState {
        backend: Arc::new(backend),
        extra_origins: config.mcp.http.extra_allowed_origins.clone(),
        shutdown,
    })
}

/// Drops stored results past `retention` (in rounds of the store's batch, off the async
/// threads); the audit log is never touched. A failure is logged and retried next time.
pub(crate) async fn prune_results(
    store: &Arc<Store>,
    now: i64,
    retention: openphone_store::Retention,
) {
    let store = Arc::clone(store);
    let pruned = tokio::task::spawn_blocking(move || {
        let mut total = 0usize;
        loop {
            let report = store.prune_replay(now, retention)?;
            total += report.final_results;
            if !report.more {
                return Ok::<usize, openphone_store::StoreError>(total);
            }
        }
    })
    .await;
    match pruned {
        Ok(Ok(0)) => {}
        Ok(Ok(n)) => tracing::info!(results = n, "stored results past their retention dropped"),
        Ok(Err(e)) => tracing::warn!(error = %e, "dropping stored results past their retention"),
        Err(e) => tracing::warn!(error = %e, "the retention task failed"),
    }
}
