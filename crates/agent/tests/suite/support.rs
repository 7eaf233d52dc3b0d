//! One in-process daemon core: store, event bus, bridge over the simulated phone, runtime
//! manager with the built-in runtime attached, and a fake model.

use std::sync::Arc;
use std::time::Duration;

use openphone_agent::transcript;
use openphone_agent::{AgentTurnRunner, BuiltinConfig, BuiltinRuntime, BuiltinSetup};
use openphone_clock::{Clock, ManualClock};
use openphone_core::{
    BridgeConfig, ConfirmDecision, EventBus, Operator, RuntimeManager, RuntimesConfig, ToolBridge,
};
use openphone_device::{SimPhone, SimState};
use openphone_fake_model::FakeModel;
use openphone_model::{Message, ModelClient, ModelConfig, RetryPolicy};
use openphone_policy::{Caller, ToolPolicy, Transport};
use openphone_protocol::endpoint::{AttentionAccepted, AttentionRequestParams};
use openphone_store::{
    ConfirmationFilter, ConfirmationState, NewPhoneSession, PhoneSession, SessionStatus, Store,
    TranscriptEntry,
};
use serde_json::{Value, json};
use tokio::sync::broadcast;

pub use openphone_test_support::registry;

/// Limits small enough for tests.
pub fn limits() -> BuiltinConfig {
    BuiltinConfig {
        run_budget_secs: 20,
        request_timeout_secs: 5,
        ..BuiltinConfig::new("http://unused.invalid/v1", "fake-model")
    }
}

/// Fast retries: no jitter, 20 ms apart.
pub fn model(fake: &FakeModel, limits: &BuiltinConfig) -> ModelConfig {
    let mut config = limits.model_config().unwrap();
    config.base_url = fake.url();
    config.retry = RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(50),
        jitter: false,
        max_retry_after: Duration::from_secs(5),
    };
    config
}

/// What every daemon core here stands on: a data directory, the store, the event bus, the
/// simulated phone on a manual clock at its scenario's start, and the bridge over them.
pub struct Core {
    pub dir: tempfile::TempDir,
    pub clock: ManualClock,
    pub phone: Arc<SimPhone>,
    pub store: Arc<Store>,
    pub events: Arc<EventBus>,
    pub bridge: Arc<ToolBridge>,
}

impl Core {
    /// The core over `dir` (a fresh or a kept data directory) and the phone in `state`.
    pub fn open(dir: tempfile::TempDir, state: SimState, bridge: BridgeConfig) -> Core {
        let clock = ManualClock::new(state.clock.start_ms);
        let phone = Arc::new(SimPhone::new(state, Arc::new(clock.clone())).unwrap());
        let store = Arc::new(Store::open(dir.path()).unwrap());
        let events = Arc::new(EventBus::new(registry(), 1024));
        let bridge = Arc::new(ToolBridge::new(
            registry(),
            store.clone(),
            phone.clone(),
            Arc::new(clock.clone()),
            events.clone(),
            bridge,
        ));
        Core {
            dir,
            clock,
            phone,
            store,
            events,
            bridge,
        }
    }

    /// A runtime manager over the store and the bus with `runtimes` configured.
    pub fn manager(&self, runtimes: RuntimesConfig) -> Arc<RuntimeManager> {
        Arc::new(
            RuntimeManager::new(
                self.store.clone(),
                self.events.clone(),
                Arc::new(self.clock.clone()),
                runtimes,
            )
            .unwrap(),
        )
    }

    /// The built-in runtime's setup over the bridge and `manager`: the daemon's `builtin`
    /// authorisation, the default tool policy.
    pub fn builtin_setup(&self, manager: &Arc<RuntimeManager>) -> BuiltinSetup {
        BuiltinSetup {
            bridge: self.bridge.clone(),
            manager: manager.clone(),
            store: self.store.clone(),
            registry: registry(),
            authorisation: Caller::builtin("daemon").authorisation(),
            tool_policy: ToolPolicy::default(),
            config_origin: None,
        }
    }

    /// The `agent_turn` runner of `setup` with `config`, its model client on `fake` and on
    /// the core's clock.
    pub fn agent_turn_runner(
        &self,
        setup: &BuiltinSetup,
        config: &BuiltinConfig,
        fake: &FakeModel,
    ) -> AgentTurnRunner {
        let client =
            ModelClient::with_clock(model(fake, config), Arc::new(self.clock.clone())).unwrap();
        AgentTurnRunner::with_client(setup, config, client)
    }
}

pub struct Agent {
    pub dir: tempfile::TempDir,
    pub phone: Arc<SimPhone>,
    pub bridge: Arc<ToolBridge>,
    pub manager: Arc<RuntimeManager>,
    pub events: Arc<EventBus>,
    pub store: Arc<Store>,
    pub builtin: BuiltinRuntime,
    pub fake: FakeModel,
}

/// The default scenario with one more incoming SMS in a new thread from `address`.
pub fn scenario_with_message(address: &str, body: &str) -> SimState {
    let state = SimState::default_scenario().unwrap();
    let mut value = serde_json::to_value(&state).unwrap();
    let at = value["clock"]["start_ms"].as_i64().unwrap() - 60_000;
    value["threads"].as_array_mut().unwrap().push(serde_json::json!({
        "id": 990, "address": address, "display_name": "Unknown sender",
        "messages": [{"id": 9901, "direction": "incoming", "body": body, "at_ms": at, "read": false}]
    }));
    SimState::from_json(&value.to_string()).unwrap()
}

impl Agent {
    pub async fn start() -> Agent {
        Agent::with(SimState::default_scenario().unwrap(), limits()).await
    }

    pub async fn with(state: SimState, limits: BuiltinConfig) -> Agent {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeModel::start().await;
        Agent::open(dir, state, limits, fake).await
    }

    /// Everything over an existing data directory (a restart keeps the directory).
    pub async fn open(
        dir: tempfile::TempDir,
        state: SimState,
        limits: BuiltinConfig,
        fake: FakeModel,
    ) -> Agent {
        let core = Core::open(dir, state, BridgeConfig::default());
        let manager = core.manager(RuntimesConfig::default());
        let setup = core.builtin_setup(&manager);
        let model = model(&fake, &limits);
        let builtin = BuiltinRuntime::with_model(setup, limits, model).unwrap();
        builtin.recover().await;
        builtin.attach();
        let Core {
            dir,
            phone,
            store,
            events,
            bridge,
            ..
        } = core;
        Agent {
            dir,
            phone,
            bridge,
            manager,
            events,
            store,
            builtin,
            fake,
        }
    }

    /// Drops everything without stopping the runtime (a crash) and gives back the data
    /// directory and the fake.
    pub fn crash(self) -> (tempfile::TempDir, FakeModel) {
        let Agent { dir, fake, .. } = self;
        (dir, fake)
    }

    /// Stops the runtime and gives back the data directory and the fake (a "restart").
    pub async fn stop(self) -> (tempfile::TempDir, FakeModel) {
        self.builtin.shutdown().await;
        let Agent { dir, fake, .. } = self;
        (dir, fake)
    }

    pub fn ask(&self, text: &str) -> AttentionAccepted {
        self.manager
            .request_attention(
                AttentionRequestParams {
                    surface: "chat".into(),
                    text: text.into(),
                    ..AttentionRequestParams::default()
                },
                None,
            )
            .unwrap()
    }

    pub fn ask_in(&self, session: &str, text: &str) -> AttentionAccepted {
        self.manager
            .request_attention(
                AttentionRequestParams {
                    surface: "chat".into(),
                    text: text.into(),
                    session_target: Some(format!("session:{session}")),
                    ..AttentionRequestParams::default()
                },
                None,
            )
            .unwrap()
    }

    pub fn session(&self, id: &str) -> PhoneSession {
        self.store.get_session(id).unwrap().unwrap()
    }

    /// Waits (up to 30 s, polling) until the session satisfies `done`.
    pub async fn until(&self, id: &str, done: impl Fn(&PhoneSession) -> bool) -> PhoneSession {
        for _ in 0..1500 {
            let session = self.session(id);
            if done(&session) {
                return session;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("session {id} never got there: {:?}", self.session(id));
    }

    /// Waits until the session is completed or failed and no run is left.
    pub async fn finished(&self, id: &str) -> PhoneSession {
        self.until(id, |s| !s.status.is_active()).await;
        for _ in 0..1500 {
            if self.builtin.running() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.session(id)
    }

    /// Waits until the session waits for a confirmation; returns the pending one.
    pub async fn pending_confirmation(&self, id: &str) -> String {
        self.until(id, |s| s.status == SessionStatus::WaitingForConfirmation)
            .await;
        let pending = self
            .store
            .list_confirmations(&ConfirmationFilter {
                state: Some(ConfirmationState::Pending),
                runtime: Some("builtin".into()),
                limit: None,
            })
            .unwrap();
        pending
            .iter()
            .find(|c| c.phone_session_id.as_deref() == Some(id))
            .expect("a pending confirmation of the session")
            .confirmation_id
            .clone()
    }

    pub async fn decide(&self, confirmation_id: &str, decision: ConfirmDecision) {
        let operator =
            Operator::from_caller(&Caller::operator("cli", Transport::Cli, "user")).unwrap();
        self.bridge
            .resolve(&operator, confirmation_id, decision)
            .await
            .unwrap();
    }

    pub fn transcript(&self, id: &str) -> Vec<TranscriptEntry> {
        self.builtin.transcript(id).unwrap()
    }

    /// The SMS bodies sent during the test (not the scenario's) to `address` (by digits).
    pub fn sms_to(&self, address_digits: &str) -> Vec<String> {
        let state = serde_json::to_value(self.phone.snapshot()).unwrap();
        let start = state["clock"]["start_ms"].as_i64().unwrap();
        let digits = |s: &str| s.chars().filter(char::is_ascii_digit).collect::<String>();
        state["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| digits(t["address"].as_str().unwrap()) == address_digits)
            .flat_map(|t| t["messages"].as_array().unwrap().clone())
            .filter(|m| m["direction"] == "outgoing" && m["at_ms"].as_i64().unwrap() >= start)
            .map(|m| m["body"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The commands the phone executed (its action log).
    pub fn actions(&self) -> Vec<String> {
        self.phone
            .action_log()
            .into_iter()
            .map(|a| a.tool)
            .collect()
    }
}

/// A chat session `id` of the built-in runtime (summarised as `summary`) with one exchange, as
/// the foreground loop stores it.
pub fn chat_session(
    store: &Store,
    clock: &impl Clock,
    id: &str,
    summary: &str,
    said: &str,
    answered: &str,
) {
    store
        .create_session(
            &NewPhoneSession {
                phone_session_id: id.into(),
                runtime_kind: "builtin".into(),
                runtime_session_id: id.into(),
                attention_id: "attn-1".into(),
                source: "chat".into(),
                autonomy: openphone_store::Autonomy::AskBeforeAction,
                summary: summary.into(),
            },
            clock.now_ms(),
        )
        .unwrap();
    for message in [Message::user(said), Message::assistant(answered)] {
        store
            .append_transcript(
                id,
                transcript::role_of(&message),
                &transcript::body(&message, json!({})),
                clock.now_ms(),
            )
            .unwrap();
    }
}

/// The messages of the `n`th request the fake received (0-based).
pub fn sent_messages(fake: &FakeModel, n: usize) -> Vec<Value> {
    fake.requests()[n]["messages"].as_array().unwrap().clone()
}

/// Events for one session: the `runtime.message.*` payloads in order.
pub async fn messages_of(
    rx: &mut broadcast::Receiver<openphone_core::Event>,
    session: &str,
    until_final: bool,
) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("an event within 30 s")
            .unwrap();
        if !event.name.starts_with("runtime.message.")
            || event.payload["phone_session_id"] != session
        {
            continue;
        }
        let last = event.name == "runtime.message.final";
        out.push((event.name, event.payload));
        if last || !until_final {
            return out;
        }
    }
}
