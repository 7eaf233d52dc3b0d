//! Shared helpers: a demo phone on a manual clock, and command runners that go through
//! `PhoneDevice::execute` exactly as the tool bridge does.

use openphone_clock::ManualClock;
use openphone_device::{CallOrigin, DeviceAnswer, DeviceCall, DeviceError, PhoneDevice, SimPhone};
use openphone_protocol::Command;
use serde_json::{Value, json};

pub use openphone_test_support::registry;

/// The demo phone and its clock.
pub fn phone() -> (SimPhone, ManualClock) {
    SimPhone::demo().expect("default scenario loads")
}

/// `params` plus a `reason`, as the bridge passes them.
pub fn with_reason(params: Value) -> Value {
    let mut params = params;
    if let Some(map) = params.as_object_mut() {
        map.entry("reason").or_insert(json!("integration test"));
    }
    params
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(future)
}

/// Executes a command through the trait, returning the raw outcome. Params must be valid
/// against the manifest schema (the bridge would reject them otherwise).
pub fn exec(phone: &dyn PhoneDevice, tool: &str, params: Value) -> Result<Value, DeviceError> {
    let (command, params) = checked(tool, params);
    block_on(phone.execute(call(command, &params)))
}

/// [`exec`] through `PhoneDevice::execute_for_text`, as the endpoint's `tools.invoke` does.
pub fn exec_for_text(
    phone: &dyn PhoneDevice,
    tool: &str,
    params: Value,
) -> Result<DeviceAnswer, DeviceError> {
    let (command, params) = checked(tool, params);
    block_on(phone.execute_for_text(call(command, &params)))
}

/// The manifest command `tool` and `params` with a reason, checked against its schema.
fn checked(tool: &str, params: Value) -> (&'static Command, Value) {
    let params = with_reason(params);
    let command = registry()
        .resolve(tool)
        .unwrap_or_else(|| panic!("{tool} is not in the manifest"));
    assert_eq!(command.name, tool, "tests use canonical names");
    if let Err(errors) = registry().validate_params(command, &params) {
        panic!("{tool}: params {params} fail the manifest schema: {errors:?}");
    }
    (command, params)
}

/// The device call the bridge would make for `command`.
fn call<'a>(command: &'a Command, params: &'a Value) -> DeviceCall<'a> {
    static ORIGIN: std::sync::OnceLock<CallOrigin> = std::sync::OnceLock::new();
    DeviceCall {
        command,
        params,
        origin: ORIGIN.get_or_init(|| CallOrigin {
            runtime: "builtin".to_owned(),
            request_id: "test".to_owned(),
            phone_session_id: None,
        }),
    }
}

/// The manifest command named exactly `tool`; for a name the manifest lacks (or an alias), a
/// command of that name the device has never heard of.
fn command_named(tool: &str) -> Command {
    match registry().resolve(tool) {
        Some(command) if command.name == tool => command.clone(),
        _ => {
            let mut stranger = registry()
                .resolve("openphone.screen.get")
                .expect("screen.get is in the manifest")
                .clone();
            stranger.name = tool.to_owned();
            stranger
        }
    }
}

/// Executes a command that must succeed.
pub fn run(phone: &dyn PhoneDevice, tool: &str, params: Value) -> Value {
    match exec(phone, tool, params.clone()) {
        Ok(value) => value,
        Err(err) => panic!("{tool} {params} failed: {err} ({})", err.code()),
    }
}

/// Executes a command that must fail, returning the error.
pub fn fail(phone: &dyn PhoneDevice, tool: &str, params: Value) -> DeviceError {
    match exec(phone, tool, params.clone()) {
        Ok(value) => panic!("{tool} {params} unexpectedly succeeded: {value}"),
        Err(err) => err,
    }
}

/// Executes without schema validation (for deliberately ill-typed params).
pub fn exec_raw(phone: &dyn PhoneDevice, tool: &str, params: Value) -> Result<Value, DeviceError> {
    let command = command_named(tool);
    let params = with_reason(params);
    block_on(phone.execute(call(&command, &params)))
}

/// `screen.get` without screenshot.
pub fn screen(phone: &dyn PhoneDevice) -> Value {
    run(phone, "openphone.screen.get", json!({}))
}

/// The interactive element with this id on the current screen.
pub fn element(screen: &Value, id: &str) -> Option<Value> {
    screen["interactive_elements"]
        .as_array()?
        .iter()
        .find(|e| e["element_id"] == id)
        .cloned()
}

/// The id of the first interactive element whose label contains `text`.
pub fn element_labelled(screen: &Value, text: &str) -> Option<String> {
    screen["interactive_elements"]
        .as_array()?
        .iter()
        .find(|e| e["label"].as_str().is_some_and(|l| l.contains(text)))
        .and_then(|e| e["element_id"].as_str().map(str::to_string))
}

pub fn tap(phone: &dyn PhoneDevice, id: &str) -> Value {
    run(
        phone,
        "openphone.ui.tap_element",
        json!({ "element_id": id }),
    )
}

pub fn type_text(phone: &dyn PhoneDevice, text: &str) -> Value {
    run(phone, "openphone.ui.type_text", json!({ "text": text }))
}

pub fn visible_text(screen: &Value) -> Vec<String> {
    screen["visible_text"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn shows(screen: &Value, text: &str) -> bool {
    visible_text(screen).iter().any(|t| t.contains(text))
}

/// Unix ms of a local time on the demo day (2026-03-12, UTC+1) plus `days`.
pub fn demo_time(days: i64, hour: i64, minute: i64) -> i64 {
    let start = openphone_device::SimState::default_scenario()
        .expect("scenario")
        .clock
        .start_ms;
    // The demo starts at 08:30 local.
    start + days * 86_400_000 + (hour * 60 + minute - (8 * 60 + 30)) * 60_000
}
