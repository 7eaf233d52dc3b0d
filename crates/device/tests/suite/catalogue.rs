//! The manifest decides which commands are the device's: every device-owned command is
//! supported and has a success case and a bad-input case here; every runtime-owned command
//! is refused as unsupported. The table fails when a device command has no case.

use openphone_device::{PhoneDevice, SimPhone};
use openphone_protocol::Executor;
use serde_json::{Value, json};

use super::support::{demo_time, exec, exec_raw, phone, registry, run};

/// One command's cases. `setup` runs before the success case only; the bad case runs on a
/// fresh phone and must fail with `code`.
struct Case {
    tool: &'static str,
    setup: Vec<(&'static str, Value)>,
    ok: Value,
    bad: Value,
    code: &'static str,
}

fn case(tool: &'static str, ok: Value, bad: Value, code: &'static str) -> Case {
    Case {
        tool,
        setup: Vec::new(),
        ok,
        bad,
        code,
    }
}

fn open_thread_and_focus() -> Vec<(&'static str, Value)> {
    vec![
        (
            "openphone.app.open",
            json!({ "package_or_label": "Messages" }),
        ),
        (
            "openphone.ui.tap_element",
            json!({ "element_id": "thread_200" }),
        ),
        (
            "openphone.ui.tap_element",
            json!({ "element_id": "message_input" }),
        ),
    ]
}

fn cases() -> Vec<Case> {
    let day = demo_time(0, 0, 0);
    vec![
        case(
            "openphone.device.status",
            json!({ "query": "Alice" }),
            json!({ "number": "call me maybe" }),
            "invalid_input",
        ),
        case(
            "openphone.apps.search",
            json!({ "query": "mess" }),
            json!({ "limit": 0 }),
            "invalid_input",
        ),
        case(
            "openphone.screen.get",
            json!({ "include_screenshot": true }),
            json!({ "include_screenshot": "yes" }),
            "invalid_input",
        ),
        case(
            "openphone.screen.understand_local",
            json!({ "max_visible_text": 5 }),
            json!({ "max_visible_text": -1 }),
            "invalid_input",
        ),
        case(
            "openphone.notifications.list",
            json!({ "limit": 3 }),
            json!({ "limit": -5 }),
            "invalid_input",
        ),
        case(
            "openphone.notifications.search",
            json!({ "query": "Alice" }),
            json!({ "query": "   " }),
            "invalid_input",
        ),
        case(
            "openphone.notifications.open",
            json!({ "notification_key": "msg-alice-204" }),
            json!({}),
            "invalid_input",
        ),
        case(
            "openphone.contacts.search",
            json!({ "query": "Martin", "include_details": true }),
            json!({ "limit": 0 }),
            "invalid_input",
        ),
        case(
            "openphone.calendar.search",
            json!({ "start_at": day, "end_at": day + 86_400_000 }),
            json!({ "start_at": day + 86_400_000, "end_at": day }),
            "invalid_input",
        ),
        case(
            "openphone.calendar.add",
            json!({ "title": "Call the plumber", "start_at": demo_time(0, 17, 0) }),
            json!({ "title": "Backwards", "start_at": demo_time(0, 17, 0), "end_at": demo_time(0, 16, 0) }),
            "invalid_input",
        ),
        case(
            "openphone.calendar.update",
            json!({ "event_id": 101, "location": "Room 5.1" }),
            json!({ "event_id": 999_999, "title": "x" }),
            "not_found",
        ),
        case(
            "openphone.calendar.delete",
            json!({ "event_id": 105 }),
            json!({ "event_id": 999_999 }),
            "not_found",
        ),
        case(
            "openphone.messages.search",
            json!({ "query": "dinner" }),
            json!({ "thread_id": 999_999 }),
            "not_found",
        ),
        case(
            "openphone.messages.draft",
            json!({ "contact_query": "Bob", "body": "Running 10 min late" }),
            json!({ "contact_query": "Martin", "body": "hi" }),
            "ambiguous_match",
        ),
        case(
            "openphone.messages.send",
            json!({ "to": "+49 170 555 0101", "body": "See you at 19:30" }),
            json!({ "to": "Zed Nobody", "body": "hi" }),
            "not_found",
        ),
        case(
            "openphone.calls.search",
            json!({ "type": "missed" }),
            json!({ "type": "sideways" }),
            "invalid_input",
        ),
        case(
            "openphone.calls.place",
            json!({ "contact_query": "Dad" }),
            json!({}),
            "invalid_input",
        ),
        case(
            "openphone.app.open",
            json!({ "package_or_label": "Calendar" }),
            json!({ "package_or_label": "Snapchat" }),
            "app_not_found",
        ),
        case(
            "openphone.url.open",
            json!({ "url": "https://news.example.com/" }),
            json!({ "url": "javascript:alert(1)" }),
            "invalid_input",
        ),
        case(
            "openphone.ui.tap",
            json!({ "x": 540, "y": 2330 }),
            json!({ "x": 5000, "y": 10 }),
            "invalid_input",
        ),
        case(
            "openphone.ui.tap_element",
            json!({ "element_id": "app_icon_com.android.messaging" }),
            json!({ "element_id": "no_such_element" }),
            "element_not_found",
        ),
        case(
            "openphone.ui.long_press",
            json!({ "x": 540, "y": 1200, "duration_ms": 800 }),
            json!({ "x": 10, "y": -1 }),
            "invalid_input",
        ),
        case(
            "openphone.ui.long_press_element",
            json!({ "element_id": "app_icon_com.android.messaging" }),
            json!({ "element_id": "ghost" }),
            "element_not_found",
        ),
        case(
            "openphone.ui.swipe",
            json!({ "start_x": 540, "start_y": 1800, "end_x": 540, "end_y": 600 }),
            json!({ "start_x": 540, "start_y": 1800, "end_x": 540, "end_y": 99_999 }),
            "invalid_input",
        ),
        Case {
            tool: "openphone.ui.type_text",
            setup: open_thread_and_focus(),
            ok: json!({ "text": "hi" }),
            bad: json!({ "text": "hello" }),
            code: "no_focused_field",
        },
        case(
            "openphone.input.press_key",
            json!({ "key": "home" }),
            json!({ "key": "volume_up" }),
            "invalid_input",
        ),
        case(
            "openphone.clipboard.set",
            json!({ "text": "hello" }),
            json!({}),
            "invalid_input",
        ),
        Case {
            tool: "openphone.clipboard.paste",
            setup: {
                let mut steps = vec![("openphone.clipboard.set", json!({ "text": "Room 4.2" }))];
                steps.extend(open_thread_and_focus());
                steps
            },
            ok: json!({}),
            bad: json!({}),
            code: "no_focused_field",
        },
        case(
            "openphone.share.text",
            json!({ "text": "Look at this" }),
            json!({ "text": "  " }),
            "invalid_input",
        ),
    ]
}

#[test]
fn every_device_command_has_a_success_and_a_bad_input_case() {
    let cases = cases();
    let device_commands: Vec<_> = registry()
        .commands()
        .filter(|c| c.executor == Executor::Device)
        .collect();
    assert!(!device_commands.is_empty());
    for command in &device_commands {
        assert!(
            cases.iter().any(|c| c.tool == command.name),
            "device command {} has no test case in the catalogue table",
            command.name
        );
    }
    for case in &cases {
        let command = registry()
            .resolve(case.tool)
            .unwrap_or_else(|| panic!("{} is not in the manifest", case.tool));
        assert_eq!(
            command.executor,
            Executor::Device,
            "{} is not device-owned",
            case.tool
        );

        let (ok_phone, _clock) = phone();
        for (tool, params) in &case.setup {
            run(&ok_phone, tool, params.clone());
        }
        // `share.text` succeeds by putting up Android's chooser: an OS dialog the command
        // reports (`framework_confirmation_required`) with its effect kept.
        let result = match exec(&ok_phone, case.tool, case.ok.clone()) {
            Ok(result) => result,
            Err(e) if e.code() == "framework_confirmation_required" => e.details(),
            Err(e) => panic!("{}: {e}", case.tool),
        };
        assert!(
            result.is_object(),
            "{}: result must be an object",
            case.tool
        );
        let logged = ok_phone.action_log().iter().any(|r| r.tool == case.tool);
        assert_eq!(
            logged, command.mutating,
            "{}: action log vs manifest `mutating`",
            case.tool
        );

        let (bad_phone, _clock) = phone();
        let before = bad_phone.snapshot();
        // Bad params are sent without schema validation: some are ill-typed on purpose.
        let err = exec_raw(&bad_phone, case.tool, case.bad.clone()).expect_err(case.tool);
        assert_eq!(err.code(), case.code, "{}: {err}", case.tool);
        assert_eq!(err.details()["code"], case.code);
        assert_eq!(
            bad_phone.snapshot(),
            before,
            "{}: a failed command must not change the state",
            case.tool
        );
    }
}

#[test]
fn supports_exactly_the_device_commands_and_refuses_runtime_ones() {
    let (phone, _clock) = phone();
    let profile = phone.profile();
    assert_eq!(profile.platform, "simulated");
    for command in registry().commands() {
        match command.executor {
            Executor::Device => {
                assert!(
                    phone.supports(&command.name),
                    "{} should be supported",
                    command.name
                );
                assert!(profile.supported_tools.contains(&command.name));
                assert_eq!(
                    SimPhone::is_mutating(&command.name),
                    Some(command.mutating),
                    "{}",
                    command.name
                );
            }
            Executor::Runtime => {
                assert!(
                    !phone.supports(&command.name),
                    "{} is runtime-owned",
                    command.name
                );
                let err = exec(&phone, &command.name, required_stub(&command.input_schema))
                    .expect_err(&command.name);
                assert_eq!(err.code(), "unsupported_tool");
            }
        }
    }
    assert_eq!(
        profile.supported_tools.len(),
        registry()
            .commands()
            .filter(|c| c.executor == Executor::Device)
            .count()
    );
    // Aliases and model-tool names are the bridge's business: the device takes canonical names.
    assert!(!phone.supports("sms.send"));
    assert!(!phone.supports("tap"));
}

/// Minimal params satisfying a schema's required fields.
fn required_stub(schema: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for name in schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let value = match schema["properties"][name]["type"].as_str() {
            Some("integer") | Some("number") => json!(1),
            Some("boolean") => json!(true),
            Some("object") => json!({}),
            Some("array") => json!([]),
            _ => json!("x"),
        };
        out.insert(name.to_string(), value);
    }
    Value::Object(out)
}

#[test]
fn unknown_tool_is_unsupported_not_downgraded() {
    let (phone, _clock) = phone();
    let err = exec_raw(&phone, "openphone.ui.fly", json!({})).unwrap_err();
    assert_eq!(err.code(), "unsupported_tool");
    assert_eq!(err.details()["tool"], "openphone.ui.fly");
    assert!(phone.action_log().is_empty());
}
