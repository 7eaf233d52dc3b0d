use openphone_mcp::{SUPPORTED_PROTOCOL_VERSIONS, ToolTable, server_config, server_info};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::registry;

#[test]
fn server_identity_is_openphone_with_the_project_version() {
    let info = serde_json::to_value(server_info()).unwrap();
    assert_eq!(
        info,
        json!({
            "name": "openphone",
            "title": "OpenPhone runtime",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Tools of the user's phone, under the phone's own policy, confirmations and audit."
        })
    );
}

#[test]
fn handshake_result_carries_tools_only_and_the_runtime_protocol_advertisement() {
    let table = ToolTable::new(registry()).unwrap();
    let config = serde_json::to_value(server_config(&table)).unwrap();
    assert_eq!(
        config["capabilities"],
        json!({"tools": {"listChanged": true}})
    );
    assert_eq!(config["serverInfo"]["name"], json!("openphone"));
    assert_eq!(config["protocolVersion"], json!("2025-11-25"));
    assert_eq!(
        config["_meta"],
        json!({"dev.openphone/runtimeProtocol": {
            "name": "openphone-runtime-protocol", "min_version": 1, "max_version": 1
        }})
    );
    let instructions = config["instructions"].as_str().unwrap();
    assert!(instructions.contains("`reason`"));
    assert!(instructions.contains("confirmation"));
}

#[test]
fn exactly_three_revisions_are_advertised() {
    let versions: Vec<String> = SUPPORTED_PROTOCOL_VERSIONS
        .iter()
        .map(|v| v.as_str().to_owned())
        .collect();
    assert_eq!(versions, ["2025-06-18", "2025-11-25", "2026-07-28"]);
}

#[test]
fn a_generic_client_name_is_replaced_by_the_tokens_runtime() {
    use openphone_mcp::client_name;
    for generic in [
        None,
        Some(""),
        Some("  "),
        Some("mcp"),
        Some("MCP"),
        Some("rmcp"),
    ] {
        assert_eq!(client_name("hermes", generic), "hermes", "{generic:?}");
    }
    assert_eq!(
        client_name("hermes", Some("Claude Desktop")),
        "Claude Desktop"
    );
    assert_eq!(client_name("mcp", Some("Cursor\n")), "Cursor");
    assert_eq!(client_name("hermes", Some(&"y".repeat(100))).len(), 64);
}
