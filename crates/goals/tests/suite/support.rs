//! Shared helpers: a real store in a temporary directory, the simulated phone on a manual
//! clock, the real tool bridge over both, and a goal engine on top.

use std::sync::Arc;

use openphone_clock::ManualClock;
use openphone_core::{BridgeConfig, ConfirmDecision, EventBus, Operator, ToolBridge};
use openphone_device::SimPhone;
use openphone_goals::{Backends, GoalEngine, GoalSpec, Owner};
use openphone_policy::{Caller, Transport};
use openphone_store::Store;
use serde_json::{Value, json};
use tempfile::TempDir;

pub const MIN: i64 = 60_000;
/// The demo scenario's Dentist event.
pub const DENTIST: i64 = 103;
pub const DENTIST_START: i64 = 1_773_324_000_000;
pub const DAY: i64 = 86_400_000;

pub use openphone_test_support::registry;

pub struct Harness {
    pub dir: TempDir,
    pub store: Arc<Store>,
    pub phone: Arc<SimPhone>,
    pub clock: ManualClock,
    pub bridge: Arc<ToolBridge>,
    pub engine: GoalEngine,
}

impl Harness {
    /// The dentist goal created and ticked once.
    pub async fn ticked_dentist(&self) -> openphone_goals::Goal {
        use openphone_clock::Clock as _;
        let goal = self
            .engine
            .create(&dentist_spec(self.clock.now_ms()), Harness::owner())
            .unwrap();
        self.engine.tick(&goal.id).await.unwrap();
        goal
    }

    pub fn new() -> Harness {
        Harness::with_config(BridgeConfig::default())
    }

    /// A harness whose bridge applies `config` (a tool policy, say).
    pub fn with_config(config: BridgeConfig) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let (phone, clock) = SimPhone::demo().unwrap();
        let phone = Arc::new(phone);
        let store = Arc::new(Store::open(dir.path().join("data")).unwrap());
        let (bridge, engine) = Self::engine_on(&dir, &store, &phone, &clock, config);
        Harness {
            dir,
            store,
            phone,
            clock,
            bridge,
            engine,
        }
    }

    fn engine_on(
        dir: &TempDir,
        store: &Arc<Store>,
        phone: &Arc<SimPhone>,
        clock: &ManualClock,
        config: BridgeConfig,
    ) -> (Arc<ToolBridge>, GoalEngine) {
        let bridge = Arc::new(ToolBridge::new(
            registry(),
            Arc::clone(store),
            phone.clone(),
            Arc::new(clock.clone()),
            Arc::new(EventBus::new(registry(), 256)),
            config,
        ));
        let engine = GoalEngine::new(
            Arc::clone(store),
            Arc::clone(&bridge),
            Backends::default(),
            Some(dir.path().join("data").join("artifacts")),
        );
        (bridge, engine)
    }

    /// A new bridge and engine over the same store and phone: what a restarted daemon has.
    pub fn restart(&mut self) {
        let config = BridgeConfig::default();
        let (bridge, engine) =
            Self::engine_on(&self.dir, &self.store, &self.phone, &self.clock, config);
        self.bridge = bridge;
        self.engine = engine;
    }

    pub fn owner() -> Owner {
        Owner {
            surface: "test".to_owned(),
            phone_session: None,
            runtime: None,
        }
    }

    pub async fn approve(&self, confirmation_id: &str) {
        let operator =
            Operator::from_caller(&Caller::operator("cli", Transport::Cli, "tester")).unwrap();
        self.bridge
            .resolve(&operator, confirmation_id, ConfirmDecision::Approve)
            .await
            .unwrap();
    }

    pub async fn decline(&self, confirmation_id: &str) {
        let operator =
            Operator::from_caller(&Caller::operator("cli", Transport::Cli, "tester")).unwrap();
        self.bridge
            .resolve(&operator, confirmation_id, ConfirmDecision::Deny)
            .await
            .unwrap();
    }

    /// How many state-changing commands the phone ran (its action log).
    pub fn phone_actions(&self) -> Vec<String> {
        self.phone
            .action_log()
            .iter()
            .map(|a| format!("{a:?}"))
            .collect()
    }
}

/// "By 18:00 move my dentist appointment to Friday and tell Alice", with a scripted plan.
pub fn dentist_spec(now: i64) -> GoalSpec {
    let friday = DENTIST_START + DAY;
    serde_json::from_value(dentist_json(now, friday)).unwrap()
}

pub fn dentist_json(now: i64, friday: i64) -> Value {
    json!({
        "objective": "by 18:00 move my dentist appointment to Friday and tell Alice",
        "deadline_at": now + 6 * 60 * MIN,
        // Telling Alice is a message: a high-risk command.
        "risk_level": "high",
        "delivery": "telegram",
        "success_criteria": [
            {"id": "moved", "description": "the dentist is on Friday",
             "check": {"kind": "tool_predicate", "command": "openphone.calendar.search",
                       "params": {"query": "Dentist"},
                       "predicate": {"pointer": "/events/0/start_at", "op": "equals", "value": friday}}},
            {"id": "all_done", "description": "every step done", "check": {"kind": "all_actions_done"}}
        ],
        "plan": [
            {"id": "find", "title": "Find the dentist appointment", "kind": "tool",
             "command": "openphone.calendar.search", "params": {"query": "Dentist"},
             "estimate_ms": 60000},
            {"id": "move", "title": "Move the dentist appointment to Friday", "kind": "tool",
             "command": "openphone.calendar.update",
             "params": {"event_id": DENTIST, "start_at": friday, "duration_minutes": 45},
             "depends_on": ["find"],
             "expect": {"command": "openphone.calendar.search", "params": {"query": "Dentist"},
                        "predicate": {"pointer": "/events/0/start_at", "op": "equals", "value": friday}},
             "estimate_ms": 120000},
            {"id": "tell", "title": "Tell Alice about Friday", "kind": "tool",
             "command": "openphone.messages.send",
             "params": {"to": "+49 151 2345 6789", "body": "My dentist appointment moved to Friday."},
             "depends_on": ["move"], "estimate_ms": 60000}
        ]
    })
}
