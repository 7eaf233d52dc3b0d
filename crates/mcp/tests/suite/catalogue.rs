use std::borrow::Cow;

use openphone_mcp::{
    ALWAYS_SENTENCE, ASK_BEFORE_ACTION_SENTENCE, REASON_SENTENCE, TableProblem, ToolTable,
    catalogue,
};
use openphone_protocol::{Confirmation, Exposure, ManifestSources, Registry, Risk};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::registry;

fn tool_json(name: &str) -> Value {
    let table = ToolTable::new(registry()).unwrap();
    serde_json::to_value(table.tool(name).unwrap()).unwrap()
}

#[test]
fn every_mcp_true_command_is_listed_and_nothing_else() {
    let tools = catalogue(registry()).unwrap();
    let mcp_true = registry().commands().filter(|c| c.mcp).count();
    assert_eq!(
        mcp_true, 40,
        "35 upstream-compatible and the 5 goal commands"
    );
    assert_eq!(tools.len(), mcp_true);
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for hidden in ["openphone_messages_send", "openphone_calls_place"] {
        assert!(!names.contains(&hidden), "{hidden} must never be listed");
    }
    for tool in &tools {
        let command = tool.meta.as_ref().unwrap().0["dev.openphone/command"]
            .as_str()
            .unwrap();
        assert!(registry().resolve(command).unwrap().mcp);
    }
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "listed in exposed-name order");
    assert_eq!(
        catalogue(registry()).unwrap(),
        tools,
        "identical on every build"
    );
}

#[test]
fn read_tool_snapshot() {
    assert_eq!(
        tool_json("openphone_screen_get"),
        json!({
            "name": "openphone_screen_get",
            "title": "Screen Get",
            "description": "Captures what the phone is showing right now. Can also attach a screenshot, name the foreground app and activity, and include the accessibility tree. Observe with this before acting on the UI, and again afterwards to confirm the effect. Give a short `reason`; the user sees it.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "format": {"description": "full (default): every element with all its flags, the visible text and the tree. compact: only the elements you can act on, each with its id, role, text and bounds, plus the other text on screen; far fewer tokens.", "type": "string", "enum": ["full", "compact"]},
                    "include_activity": {"description": "Report which app and activity are in the foreground.", "type": "boolean"},
                    "include_screenshot": {"description": "Attach an image of the screen.", "type": "boolean"},
                    "include_ui_tree": {"description": "Attach the accessibility tree of the visible UI.", "type": "boolean"},
                    "reason": {"description": "Tell the user briefly why you are looking at their screen.", "type": "string"}
                },
                "required": ["reason"]
            },
            "outputSchema": {"type": "object", "additionalProperties": true},
            "annotations": {"title": "Screen Get", "readOnlyHint": true, "openWorldHint": true},
            "_meta": {
                "dev.openphone/command": "openphone.screen.get",
                "dev.openphone/risk": "low",
                "dev.openphone/confirmation": "none",
                "dev.openphone/exposure": "safe_read",
                "dev.openphone/capability": "screen.read.visible"
            }
        })
    );
}

#[test]
fn ask_before_action_tool_snapshot() {
    assert_eq!(
        tool_json("openphone_ui_tap"),
        json!({
            "name": "openphone_ui_tap",
            "title": "UI Tap",
            "description": "Taps the screen at absolute coordinates. When the target has an element id, tap_element is the more reliable choice. Runs after the user confirms on the phone, unless the caller is trusted for routine actions. Give a short `reason`; the user sees it.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "reason": {"description": "Tell the user briefly what this tap is meant to achieve.", "type": "string"},
                    "x": {"description": "Horizontal screen coordinate.", "type": "number"},
                    "y": {"description": "Vertical screen coordinate.", "type": "number"}
                },
                "required": ["x", "y", "reason"]
            },
            "outputSchema": {"type": "object", "additionalProperties": true},
            "annotations": {
                "title": "UI Tap",
                "readOnlyHint": false,
                "destructiveHint": true,
                "idempotentHint": false,
                "openWorldHint": true
            },
            "_meta": {
                "dev.openphone/command": "openphone.ui.tap",
                "dev.openphone/risk": "medium",
                "dev.openphone/confirmation": "ask_before_action",
                "dev.openphone/exposure": "dangerous",
                "dev.openphone/capability": "input.perform"
            }
        })
    );
}

#[test]
fn always_tool_snapshot() {
    assert_eq!(
        tool_json("openphone_share_text"),
        json!({
            "name": "openphone_share_text",
            "title": "Share Text",
            "description": "Hands text to another app through the system share sheet, where the user picks the destination. High risk: the user is always asked to confirm first. Always needs the user's confirmation on the phone. Give a short `reason`; the user sees it.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "chooser_title": {"description": "Heading shown on the share sheet; optional.", "type": "string"},
                    "reason": {"description": "Tell the user briefly why this content is being shared.", "type": "string"},
                    "text": {"description": "The text handed to whichever app the user picks.", "type": "string"}
                },
                "required": ["text", "reason"]
            },
            "outputSchema": {"type": "object", "additionalProperties": true},
            "annotations": {
                "title": "Share Text",
                "readOnlyHint": false,
                "destructiveHint": true,
                "idempotentHint": false,
                "openWorldHint": true
            },
            "_meta": {
                "dev.openphone/command": "openphone.share.text",
                "dev.openphone/risk": "high",
                "dev.openphone/confirmation": "always",
                "dev.openphone/exposure": "dangerous",
                "dev.openphone/capability": "share.content"
            }
        })
    );
}

/// Every command's derived hints as one reviewed snapshot (`mcp.md` §4.4):
/// `name readOnly destructive idempotent openWorld` (`-` = omitted).
#[test]
fn annotation_snapshot_of_every_tool() {
    let hint = |v: Option<bool>| match v {
        Some(true) => "T",
        Some(false) => "F",
        None => "-",
    };
    let lines: Vec<String> = catalogue(registry())
        .unwrap()
        .iter()
        .map(|t| {
            let a = t.annotations.as_ref().unwrap();
            format!(
                "{} {} {} {} {}",
                t.name,
                hint(a.read_only_hint),
                hint(a.destructive_hint),
                hint(a.idempotent_hint),
                hint(a.open_world_hint)
            )
        })
        .collect();
    let expected = "\
openphone_app_open F F F T
openphone_apps_search T - - T
openphone_calendar_add F T F T
openphone_calendar_delete F T F T
openphone_calendar_search T - - T
openphone_calendar_update F T F T
openphone_calls_search T - - T
openphone_clipboard_paste F T F T
openphone_clipboard_set F F F T
openphone_contacts_search T - - T
openphone_device_status T - - F
openphone_goals_create F T F F
openphone_goals_get T - - F
openphone_goals_list T - - F
openphone_goals_plan F T F F
openphone_goals_stop F T F F
openphone_input_press_key F T F T
openphone_jobs_create F T F F
openphone_jobs_list T - - F
openphone_jobs_stop F T F F
openphone_memory_save F T F F
openphone_memory_search T - - F
openphone_messages_draft F T F T
openphone_messages_search T - - T
openphone_notifications_list T - - T
openphone_notifications_open F T F T
openphone_notifications_search T - - T
openphone_screen_get T - - T
openphone_screen_understand_local T - - T
openphone_share_text F T F T
openphone_ui_long_press F T F T
openphone_ui_long_press_element F T F T
openphone_ui_swipe F T F T
openphone_ui_tap F T F T
openphone_ui_tap_element F T F T
openphone_ui_type_text F T F T
openphone_url_open F T F T
openphone_watchers_create F T F F
openphone_watchers_list T - - F
openphone_watchers_stop F T F F";
    assert_eq!(lines.join("\n"), expected);
}

#[test]
fn every_tool_follows_the_derivation_rules() {
    let table = ToolTable::new(registry()).unwrap();
    for cmd in registry().commands().filter(|c| c.mcp) {
        let tool = table.tool(table.tool_name(&cmd.name).unwrap()).unwrap();
        let a = tool.annotations.as_ref().unwrap();
        assert_eq!(a.title, tool.title, "{}", cmd.name);
        let read = matches!(
            cmd.default_exposure,
            Exposure::SafeRead | Exposure::PrivateRead
        );
        assert_eq!(a.read_only_hint, Some(read), "{}", cmd.name);
        if read {
            assert_eq!((a.destructive_hint, a.idempotent_hint), (None, None));
        } else {
            assert_eq!(
                a.destructive_hint,
                Some(cmd.risk != Risk::Low),
                "{}",
                cmd.name
            );
            assert_eq!(a.idempotent_hint, Some(false));
        }
        let own_state = ["memory", "watchers", "background", "device", "runtime"]
            .contains(&cmd.category.as_str());
        assert_eq!(a.open_world_hint, Some(!own_state), "{}", cmd.name);

        let description = tool.description.as_deref().unwrap();
        assert!(description.starts_with(cmd.description.trim()));
        assert!(description.ends_with(REASON_SENTENCE));
        assert_eq!(
            description.contains(ASK_BEFORE_ACTION_SENTENCE),
            cmd.confirmation == Confirmation::AskBeforeAction
        );
        assert_eq!(
            description.contains(ALWAYS_SENTENCE),
            cmd.confirmation == Confirmation::Always
        );
        assert_eq!(
            Value::Object((*tool.input_schema).clone()),
            cmd.input_schema
        );
        assert_eq!(
            Value::Object((**tool.output_schema.as_ref().unwrap()).clone()),
            cmd.output_schema
        );
        assert!(tool.icons.is_none());
        let meta = &tool.meta.as_ref().unwrap().0;
        assert_eq!(meta["dev.openphone/command"], json!(cmd.name));
        assert_eq!(meta["dev.openphone/risk"], json!(cmd.risk.as_str()));
        assert_eq!(
            meta["dev.openphone/confirmation"],
            json!(cmd.confirmation.as_str())
        );
        assert_eq!(
            meta["dev.openphone/exposure"],
            json!(cmd.default_exposure.as_str())
        );
        assert_eq!(meta["dev.openphone/capability"], json!(cmd.capability));
        assert_eq!(meta.len(), 5);
    }
}

#[test]
fn tools_deserialize_back_from_their_wire_form() {
    for tool in catalogue(registry()).unwrap() {
        let wire = serde_json::to_value(&tool).unwrap();
        let back: rmcp::model::Tool = serde_json::from_value(wire).unwrap();
        assert_eq!(back, tool);
    }
}

fn registry_with(edit: impl FnOnce(&mut Value)) -> Registry {
    let mut sources = ManifestSources::embedded();
    let mut commands: Value = serde_json::from_str(&sources.commands).unwrap();
    edit(&mut commands);
    sources.commands = Cow::Owned(commands.to_string());
    Registry::load(&sources).unwrap()
}

fn command_mut<'a>(manifest: &'a mut Value, name: &str) -> &'a mut Value {
    manifest["commands"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["name"] == name)
        .unwrap()
}

#[test]
fn an_exposed_name_that_is_another_commands_alias_fails_the_table() {
    let registry = registry_with(|m| {
        command_mut(m, "openphone.ui.swipe")["aliases"] = json!(["openphone_ui_tap"]);
    });
    let err = ToolTable::new(&registry).unwrap_err();
    assert_eq!(
        err.0,
        vec![TableProblem::Shadows {
            tool: "openphone_ui_tap".into(),
            command: "openphone.ui.tap".into(),
            other: "openphone.ui.swipe".into(),
        }]
    );
    assert!(err.to_string().contains("openphone_ui_tap"));
}

#[test]
fn a_deprecated_command_names_its_replacement() {
    let registry = registry_with(|m| {
        let tap = command_mut(m, "openphone.ui.tap");
        tap["deprecated"] = json!(true);
        tap["superseded_by"] = json!("openphone.ui.tap_element");
    });
    let table = ToolTable::new(&registry).unwrap();
    let tool = table.tool("openphone_ui_tap").unwrap();
    assert!(
        tool.description
            .as_deref()
            .unwrap()
            .ends_with("Deprecated: use openphone_ui_tap_element instead.")
    );
    let meta = &tool.meta.as_ref().unwrap().0;
    assert_eq!(meta["dev.openphone/deprecated"], json!(true));
    assert_eq!(
        meta["dev.openphone/supersededBy"],
        json!("openphone_ui_tap_element")
    );
    assert_eq!(table.len(), 40, "a deprecated command stays listed");
}

#[test]
fn pending_answers_point_at_the_manifest_confirmations_tool_else_the_status_tool() {
    let table = ToolTable::new(registry()).unwrap();
    let expected = match registry().resolve("openphone.confirmations.get") {
        Some(_) => table.tool_name("openphone.confirmations.get"),
        None => Some(openphone_mcp::CONFIRMATION_STATUS_TOOL),
    };
    assert_eq!(table.confirmations_tool(), expected);
}

#[test]
fn the_status_tool_is_listed_in_name_order_and_found_by_both_names() {
    let table = ToolTable::new(registry()).unwrap();
    let listed = openphone_mcp::with_status_tool(table.tools());
    assert_eq!(listed.len(), table.tools().len() + 1);
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    assert!(names.contains(&"openphone_confirmation_status"));
    let tool = table.tool("openphone_confirmation_status").unwrap();
    assert_eq!(
        tool.input_schema["required"],
        serde_json::json!(["confirmation_id"])
    );
    assert_eq!(
        tool.annotations.as_ref().unwrap().read_only_hint,
        Some(true)
    );
    assert!(openphone_mcp::is_confirmation_status(
        "openphone.confirmation_status"
    ));
    assert!(!openphone_mcp::is_confirmation_status(
        "openphone_confirmations_get"
    ));
}
