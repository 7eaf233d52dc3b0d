//! A bridge on a temporary data directory with the simulated phone and a manual clock.

use std::path::Path;
use std::sync::Arc;

use openphone_clock::{Clock, ManualClock};
use openphone_core::{BridgeConfig, EventBus, Operator, ToolBridge};
use openphone_device::SimPhone;
use openphone_policy::{Autonomy, Caller, Context, ExposureGrants, Transport};
use openphone_protocol::{ToolRequest, ToolResult};
use openphone_store::Store;
use serde_json::{Value, json};

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub clock: ManualClock,
    pub phone: Arc<SimPhone>,
    pub bridge: ToolBridge,
}

pub use openphone_test_support::registry;

impl Harness {
    pub fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let (phone, clock) = SimPhone::demo().unwrap();
        let phone = Arc::new(phone);
        let bridge = bridge_on(dir.path(), &phone, &clock);
        Harness {
            dir,
            clock,
            phone,
            bridge,
        }
    }

    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    pub async fn call(&self, caller: &Caller, req: ToolRequest) -> ToolResult {
        self.bridge.invoke(caller, req, Context::Interactive).await
    }

    pub fn actions(&self) -> usize {
        self.phone.action_log().len()
    }
}

pub fn bridge_on(dir: &Path, phone: &Arc<SimPhone>, clock: &ManualClock) -> ToolBridge {
    let store = Arc::new(Store::open(dir).unwrap());
    let events = Arc::new(EventBus::new(registry(), 256));
    ToolBridge::new(
        registry(),
        store,
        phone.clone(),
        Arc::new(clock.clone()),
        events,
        BridgeConfig::default(),
    )
}

/// A remote runtime granted every exposure class, ceiling `ask_before_action`.
pub fn hermes() -> Caller {
    let mut c = Caller::remote("hermes", Transport::Websocket, "hermes-token");
    c.grants = ExposureGrants::ALL;
    c
}

/// The same runtime with its ceiling raised to `trusted_actions` by the user.
pub fn trusted_hermes() -> Caller {
    let mut c = hermes();
    c.max_autonomy = Autonomy::TrustedActions;
    c
}

/// Longer than the bridge's retry window (5 minutes, `bridge/retry.rs`): an identical call
/// without a key made after this much time is a new action again.
pub const RETRY_WINDOW_PASSED_MS: i64 = 5 * 60 * 1000 + 1;

pub fn operator() -> Operator {
    Operator::from_caller(&Caller::operator("cli", Transport::Cli, "user")).unwrap()
}

pub fn request(id: &str, tool: &str, params: Value) -> ToolRequest {
    ToolRequest {
        request_id: id.to_owned(),
        tool: tool.to_owned(),
        params,
        ..ToolRequest::default()
    }
}

pub fn with(mut req: ToolRequest, f: impl FnOnce(&mut ToolRequest)) -> ToolRequest {
    f(&mut req);
    req
}

/// A request to open the Notes app: medium risk, `ask_before_action`.
pub fn open_notes(id: &str) -> ToolRequest {
    request(
        id,
        "openphone.app.open",
        json!({"package_or_label": "Notes", "reason": "take a note"}),
    )
}

pub fn code(result: &ToolResult) -> Option<&str> {
    result.error.as_ref().map(|e| e.code.as_str())
}

pub fn confirmation_id(result: &ToolResult) -> String {
    result.result["confirmation_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Minimal valid params for a command, from its own input schema.
pub fn minimal_params(tool: &str) -> Value {
    let cmd = registry().resolve(tool).unwrap();
    let mut params = serde_json::Map::new();
    for name in cmd.required_inputs() {
        let ty = cmd.input_schema["properties"][name]["type"]
            .as_str()
            .unwrap_or("string");
        let v = match ty {
            "integer" => json!(1),
            "number" => json!(10),
            "boolean" => json!(true),
            "object" => json!({}),
            "array" => json!([]),
            _ => json!("test"),
        };
        params.insert(name.to_owned(), v);
    }
    params.insert("reason".into(), json!("testing"));
    Value::Object(params)
}
