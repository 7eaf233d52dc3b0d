use openphone_openclaw::surface::{REQUEST_STATUS_TOOL, valid_tool_name};
use openphone_openclaw::{CommandSurface, OPENCLAW, REQUEST_STATUS};
use openphone_policy::{Caller, ExposureGrants, ToolPolicy, Transport};
use openphone_protocol::Registry;

fn caller(grants: ExposureGrants) -> Caller {
    let mut c = Caller::remote(OPENCLAW, Transport::Openclaw, "gw");
    c.grants = grants;
    c
}

#[test]
fn the_surface_is_the_granted_manifest_commands_plus_the_status_command() {
    let registry = Registry::embedded().unwrap();
    let safe = CommandSurface::new(
        registry,
        &caller(ExposureGrants::REMOTE_DEFAULT),
        &ToolPolicy::default(),
        |_| true,
    );
    let all = CommandSurface::new(
        registry,
        &caller(ExposureGrants::ALL),
        &ToolPolicy::default(),
        |_| true,
    );
    assert!(safe.get("openphone.messages.send").is_none());
    let send = all.get("openphone.messages.send").unwrap();
    assert_eq!(send.name, "phone_messages_send");
    let manifest = registry.resolve("openphone.messages.send").unwrap();
    assert_eq!(send.parameters, manifest.input_schema);
    assert_eq!(send.description, manifest.description);
    assert!(all.get(REQUEST_STATUS).is_some());
    assert!(safe.get(REQUEST_STATUS).is_some());
    let commands = all.commands();
    let mut sorted = commands.clone();
    sorted.sort();
    assert_eq!(commands, sorted);
    assert!(all.tools().iter().all(|t| valid_tool_name(&t.name)));
    let params = all.plugin_tools_params();
    let tools = params["tools"].as_array().unwrap();
    assert_eq!(tools.len(), all.tools().len());
    assert!(tools.iter().all(|t| t["pluginId"] == "openphone"));
    assert!(tools.iter().any(|t| t["name"] == REQUEST_STATUS_TOOL));
    assert!(all.allow_command().contains("\"openphone.messages.send\""));
    // Only what the device can run is declared.
    let narrowed = CommandSurface::new(
        registry,
        &caller(ExposureGrants::ALL),
        &ToolPolicy::default(),
        |c| c.name != "openphone.messages.send",
    );
    assert!(narrowed.get("openphone.messages.send").is_none());
}

#[test]
fn tool_names_follow_the_gateway_pattern() {
    assert!(valid_tool_name("phone_messages_send"));
    assert!(!valid_tool_name("1phone"));
    assert!(!valid_tool_name("phone.send"));
    assert!(!valid_tool_name(&"a".repeat(65)));
}
