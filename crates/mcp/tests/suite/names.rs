use std::collections::HashSet;

use openphone_mcp::{ToolTable, derived_title, is_portable_tool_name, tool_name};
use pretty_assertions::assert_eq;

use super::registry;

#[test]
fn the_underscore_rule_matches_the_spec_examples() {
    assert_eq!(tool_name("openphone.ui.tap"), "openphone_ui_tap");
    assert_eq!(
        tool_name("openphone.ui.tap_element"),
        "openphone_ui_tap_element"
    );
    assert_eq!(
        tool_name("openphone.screen.understand_local"),
        "openphone_screen_understand_local"
    );
}

#[test]
fn every_exposed_name_round_trips_through_the_table() {
    let table = ToolTable::new(registry()).unwrap();
    let mut seen = HashSet::new();
    for cmd in registry().commands().filter(|c| c.mcp) {
        let exposed = table.tool_name(&cmd.name).unwrap();
        assert_eq!(exposed, tool_name(&cmd.name));
        assert!(is_portable_tool_name(exposed), "{exposed}");
        assert_eq!(
            table.canonical_from_tool_name(exposed),
            Some(cmd.name.as_str())
        );
        assert_eq!(table.resolve_call(exposed).unwrap().name, cmd.name);
        assert!(seen.insert(exposed.to_owned()), "{exposed} derived twice");
        // no exposed name is another command's name, alias or model-tool name
        if let Some(other) = registry().resolve(exposed) {
            assert_eq!(other.name, cmd.name);
        }
    }
    assert_eq!(seen.len(), 40);
}

#[test]
fn names_with_underscores_map_back_to_their_own_command() {
    let table = ToolTable::new(registry()).unwrap();
    assert_eq!(
        table.canonical_from_tool_name("openphone_ui_tap_element"),
        Some("openphone.ui.tap_element")
    );
    assert_eq!(
        table.canonical_from_tool_name("openphone_screen_understand_local"),
        Some("openphone.screen.understand_local")
    );
    assert_eq!(
        table.canonical_from_tool_name("openphone_ui_long_press_element"),
        Some("openphone.ui.long_press_element")
    );
    // the table, not string replacement, decides: dotted and unknown names are not exposed names
    assert_eq!(table.canonical_from_tool_name("openphone.ui.tap"), None);
    assert_eq!(
        table.canonical_from_tool_name("openphone_ui_tap_elements"),
        None
    );
    // mcp: false commands have no exposed name
    assert_eq!(
        table.canonical_from_tool_name("openphone_messages_send"),
        None
    );
    assert_eq!(table.tool_name("openphone.messages.send"), None);
}

#[test]
fn portable_name_pattern() {
    assert!(is_portable_tool_name("a"));
    assert!(is_portable_tool_name("openphone_ui-tap_2"));
    assert!(is_portable_tool_name(&"x".repeat(64)));
    for bad in ["", "openphone.ui.tap", "ui tap", "täp", &"x".repeat(65)] {
        assert!(!is_portable_tool_name(bad), "{bad:?}");
    }
}

#[test]
fn titles_are_derived_with_acronyms() {
    assert_eq!(derived_title("openphone.ui.tap_element"), "UI Tap Element");
    assert_eq!(derived_title("openphone.url.open"), "URL Open");
    assert_eq!(
        derived_title("openphone.screen.understand_local"),
        "Screen Understand Local"
    );
    assert_eq!(
        derived_title("openphone.input.press_key"),
        "Input Press Key"
    );
    assert_eq!(derived_title("x-y.z"), "X Y Z");
}
