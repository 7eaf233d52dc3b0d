//! A daemon's worth of parts on a temporary directory: store, simulated phone on a manual
//! clock, bridge, runtime manager with a recording built-in runtime, job scheduler and the
//! watchers engine.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use openphone_clock::{Clock, ManualClock};
use openphone_core::{
    BridgeConfig, EventBus, LocalRuntime, RuntimeManager, RuntimesConfig, ToolBridge,
};
use openphone_device::{DeviceEvent, Injection, SimPhone, SimState};
use openphone_jobs::{Scheduler, SchedulerConfig};
use openphone_policy::{
    Autonomy, Caller, Context, ExposureGrants, RuntimeAuthorisation, Transport,
};
use openphone_protocol::endpoint::AttentionRequested;
use openphone_protocol::{ToolRequest, ToolResult, ToolStatus};
use openphone_store::{Store, WatcherRecord};
use openphone_watchers::{Fired, Judge, Watchers, WatchersSetup};
use serde_json::{Value, json};

pub use openphone_test_support::registry;

/// A built-in runtime that only records what it is asked to attend to.
#[derive(Debug, Default)]
pub struct Recorder {
    pub attended: Mutex<Vec<AttentionRequested>>,
}

impl LocalRuntime for Recorder {
    fn attend(&self, requested: AttentionRequested) {
        self.attended.lock().unwrap().push(requested);
    }
    fn cancel(&self, _phone_session_id: &str) -> bool {
        false
    }
    fn configured(&self) -> Result<(), String> {
        Ok(())
    }
}

/// A judge that says yes when the content contains its `yes_word`.
pub struct WordJudge {
    pub yes_word: String,
}

#[async_trait]
impl Judge for WordJudge {
    async fn judge(&self, _condition: &str, content: &str) -> Result<bool, String> {
        Ok(content.contains(&self.yes_word))
    }
}

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub clock: ManualClock,
    pub phone: Arc<SimPhone>,
    pub bridge: Arc<ToolBridge>,
    /// The store the daemon would hand the watchers (their tables, read by the tests).
    pub store: Arc<Store>,
    pub scheduler: Scheduler,
    pub recorder: Arc<Recorder>,
    pub watchers: Arc<Watchers>,
}

pub struct Options {
    pub judge: Option<Arc<dyn Judge>>,
    pub jobs: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            judge: None,
            jobs: true,
        }
    }
}

/// Every runtime the tests use, as a daemon's configuration would have them: `builtin`; Hermes,
/// OpenClaw and `greedy` with every grant; `intruder` without `private_read`; `nosy` with
/// `safe_read` and `dangerous` only. Ceilings `trusted_actions`.
fn runtime_table() -> BTreeMap<String, RuntimeAuthorisation> {
    let mut table = BTreeMap::new();
    table.insert(
        "builtin".to_owned(),
        Caller::builtin("daemon").authorisation(),
    );
    for name in ["hermes", "openclaw", "greedy"] {
        table.insert(
            name.to_owned(),
            runtime(name, ExposureGrants::ALL).authorisation(),
        );
    }
    table.insert(
        "intruder".to_owned(),
        runtime("intruder", INTRUDER_GRANTS).authorisation(),
    );
    table.insert(
        "nosy".to_owned(),
        runtime("nosy", NOSY_GRANTS).authorisation(),
    );
    table
}

/// A runtime that may change things but not read private data.
pub const INTRUDER_GRANTS: ExposureGrants = ExposureGrants {
    safe_read: true,
    private_read: false,
    dangerous: true,
};
/// The same (`nosy` is the name the grant tests use).
pub const NOSY_GRANTS: ExposureGrants = INTRUDER_GRANTS;

fn parts(dir: &Path, phone: &Arc<SimPhone>, clock: &ManualClock, options: Options) -> Parts {
    let store = Arc::new(Store::open(dir).unwrap());
    let events = Arc::new(EventBus::new(registry(), 1024));
    let clock: Arc<dyn Clock> = Arc::new(clock.clone());
    let bridge = Arc::new(ToolBridge::new(
        registry(),
        Arc::clone(&store),
        phone.clone(),
        Arc::clone(&clock),
        Arc::clone(&events),
        BridgeConfig {
            runtimes: Some(runtime_table()),
            ..BridgeConfig::default()
        },
    ));
    let manager = Arc::new(
        RuntimeManager::new(
            Arc::clone(&store),
            events,
            Arc::clone(&clock),
            RuntimesConfig::default(),
        )
        .unwrap(),
    );
    let recorder = Arc::new(Recorder::default());
    manager.set_local(recorder.clone());
    let scheduler = Scheduler::new(
        Arc::clone(&store),
        clock,
        SchedulerConfig::with_random_owner(),
        openphone_watchers::runners(Arc::clone(&bridge), registry()),
    );
    let watchers = openphone_watchers::install(WatchersSetup {
        bridge: Arc::clone(&bridge),
        store: Arc::clone(&store),
        manager,
        registry: registry(),
        scheduler: options.jobs.then(|| scheduler.clone()),
        judge: options.judge,
    });
    Parts {
        bridge,
        store,
        scheduler,
        recorder,
        watchers,
    }
}

/// What [`parts`] builds, as the daemon builds it.
struct Parts {
    bridge: Arc<ToolBridge>,
    store: Arc<Store>,
    scheduler: Scheduler,
    recorder: Arc<Recorder>,
    watchers: Arc<Watchers>,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::with(Options::default())
    }

    pub fn with(options: Options) -> Harness {
        Harness::on_state(SimState::default_scenario().unwrap(), options)
    }

    pub fn on_state(state: SimState, options: Options) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(state.clock.start_ms);
        let phone = Arc::new(SimPhone::new(state, Arc::new(clock.clone())).unwrap());
        let Parts {
            bridge,
            store,
            scheduler,
            recorder,
            watchers,
        } = parts(dir.path(), &phone, &clock, options);
        Harness {
            dir,
            clock,
            phone,
            bridge,
            store,
            scheduler,
            recorder,
            watchers,
        }
    }

    /// The same data directory and phone after a restart: every part made anew.
    pub fn restart(self) -> Harness {
        let Harness {
            dir,
            clock,
            phone,
            bridge,
            store,
            scheduler,
            recorder: _,
            watchers,
        } = self;
        drop((watchers, scheduler, bridge, store));
        let Parts {
            bridge,
            store,
            scheduler,
            recorder,
            watchers,
        } = parts(dir.path(), &phone, &clock, Options::default());
        Harness {
            dir,
            clock,
            phone,
            bridge,
            store,
            scheduler,
            recorder,
            watchers,
        }
    }

    /// Changes `runtime`'s grants in the bridge's configuration (as a restart with a new
    /// configuration would).
    pub fn set_grants(&self, runtime: &str, grants: ExposureGrants) {
        let mut config = self.bridge.config();
        let table = config.runtimes.get_or_insert_with(BTreeMap::new);
        let mut auth = table.get(runtime).copied().unwrap();
        auth.grants = grants;
        table.insert(runtime.to_owned(), auth);
        self.bridge.set_config(config);
    }

    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// `watchers.create` through the bridge, as a runtime the user trusts with actions.
    pub async fn create(&self, params: Value) -> ToolResult {
        self.call_as(&hermes(), "openphone.watchers.create", params)
            .await
    }

    /// `tool` with `params` through the bridge as `caller` (interactive, `trusted_actions`, so
    /// a state change the caller may make runs without a confirmation).
    pub async fn call_as(&self, caller: &Caller, tool: &str, params: Value) -> ToolResult {
        let mut params = params;
        params
            .as_object_mut()
            .unwrap()
            .entry("reason")
            .or_insert(json!("the user asked"));
        self.bridge
            .invoke(
                caller,
                ToolRequest {
                    request_id: format!("call-{}", uuid()),
                    runtime: Some(caller.runtime.clone()),
                    tool: tool.into(),
                    params,
                    autonomy: Some("trusted_actions".into()),
                    ..ToolRequest::default()
                },
                Context::Interactive,
            )
            .await
    }

    /// Creates a watcher as `caller` that must be accepted; returns it.
    pub async fn watcher_as(&self, caller: &Caller, params: Value) -> WatcherRecord {
        let result = self
            .call_as(caller, "openphone.watchers.create", params)
            .await;
        assert_eq!(result.status, ToolStatus::Ok, "{result:?}");
        serde_json::from_value(result.result["watcher"].clone()).unwrap()
    }

    /// Creates a watcher that must be accepted; returns it.
    pub async fn watcher(&self, params: Value) -> WatcherRecord {
        let result = self.create(params).await;
        assert_eq!(result.status, ToolStatus::Ok, "{result:?}");
        serde_json::from_value(result.result["watcher"].clone()).unwrap()
    }

    /// Creates "Answer?", a message watcher that tells only if no reply from Bob came by its
    /// deadline, ten minutes from now; returns it and the deadline.
    pub async fn bob_no_reply_watcher(&self) -> (WatcherRecord, i64) {
        let deadline = self.now() + 600_000;
        let watcher = self
            .watcher(
                json!({"title": "Answer?", "source": "message", "address": BOB,
                        "notify_on": "no_reply", "deadline_at": deadline}),
            )
            .await;
        (watcher, deadline)
    }

    /// Injects into the phone and hands every event it raised to the engine.
    pub async fn inject(&self, injection: Injection) -> Vec<Fired> {
        let events = self.phone.inject_all(&injection).unwrap();
        self.feed(&events).await
    }

    pub async fn feed(&self, events: &[DeviceEvent]) -> Vec<Fired> {
        let mut fired = Vec::new();
        for event in events {
            fired.extend(self.watchers.handle_event(event).await);
        }
        fired
    }

    pub fn watcher_now(&self, id: i64) -> WatcherRecord {
        self.store.get_watcher(id).unwrap().unwrap()
    }
}

/// A remote runtime with `grants` and the ceiling `trusted_actions`.
pub fn runtime(name: &str, grants: ExposureGrants) -> Caller {
    let mut caller = Caller::remote(name, Transport::Websocket, &format!("{name}-token"));
    caller.grants = grants;
    caller.max_autonomy = Autonomy::TrustedActions;
    caller
}

/// A runtime the user trusts with everything (what [`Harness::create`] creates as).
pub fn hermes() -> Caller {
    runtime("hermes", ExposureGrants::ALL)
}

/// The operator (the user's own credential).
pub fn operator() -> Caller {
    Caller::operator("operator", Transport::Websocket, "operator-token")
}

fn uuid() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

pub fn message(address: &str, text: &str) -> Injection {
    Injection::Message {
        address: address.into(),
        text: text.into(),
    }
}

/// Bob's number in the demo scenario.
pub const BOB: &str = "+49 170 555 0101";
