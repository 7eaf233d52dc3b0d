//! The server's identity, capabilities and instructions (`mcp.md` §2, §2.1).

use openphone_protocol::VersionAdvertisement;
use rmcp::model::{
    Implementation, JsonObject, MetaObject, ProtocolVersion, ServerCapabilities, ServerConfig,
    ToolsCapability,
};
use serde_json::json;

use crate::catalogue::ToolTable;

/// `serverInfo.name`.
pub const SERVER_NAME: &str = "openphone";
/// `serverInfo.title`.
pub const SERVER_TITLE: &str = "OpenPhone runtime";
/// `serverInfo.version`: the project version.
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");
/// `serverInfo.description`.
pub const SERVER_DESCRIPTION: &str =
    "Tools of the user's phone, under the phone's own policy, confirmations and audit.";
/// `_meta` key carrying the runtime-protocol advertisement on handshake and discovery results.
pub const META_RUNTIME_PROTOCOL: &str = "dev.openphone/runtimeProtocol";

/// The advertised MCP revisions, exactly these three (§2).
pub const SUPPORTED_PROTOCOL_VERSIONS: [ProtocolVersion; 3] = [
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// The handshake answer for a client asking for an unknown revision: our newest handshake one.
pub const FALLBACK_HANDSHAKE_VERSION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// Our `Implementation` (rmcp defaults the name to `rmcp`; this sets ours).
pub fn server_info() -> Implementation {
    Implementation::new(SERVER_NAME, SERVER_VERSION)
        .with_title(SERVER_TITLE)
        .with_description(SERVER_DESCRIPTION)
}

/// `{"dev.openphone/runtimeProtocol": {"name", "min_version", "max_version"}}`, the `_meta` of
/// the handshake and `server/discover` results (rmcp's `Implementation` has no member for it).
pub fn runtime_protocol_meta() -> MetaObject {
    let v = VersionAdvertisement::current();
    let mut meta = JsonObject::new();
    meta.insert(
        META_RUNTIME_PROTOCOL.into(),
        json!({"name": v.name, "min_version": v.min_version, "max_version": v.max_version}),
    );
    MetaObject(meta)
}

/// Server capabilities: `tools: {listChanged: true}` and nothing else.
pub fn capabilities() -> ServerCapabilities {
    let mut tools = ToolsCapability::default();
    tools.list_changed = Some(true);
    let mut capabilities = ServerCapabilities::default();
    capabilities.tools = Some(tools);
    capabilities
}

/// The short, model-facing `instructions`; the poll sentence names
/// `openphone_confirmations_get` only when the manifest lists it.
pub fn instructions(table: &ToolTable<'_>) -> String {
    let mut text = String::from(
        "These tools act on the user's phone. Every tool takes a `reason`, which the user sees. \
         Mutating tools may answer that they are waiting for the user's confirmation on the phone; ",
    );
    match table.confirmations_tool() {
        Some(tool) => text.push_str(&format!(
            "then poll {tool} with the confirmation id rather than repeating the call."
        )),
        None => text.push_str(
            "then do not repeat the call without the same `dev.openphone/idempotencyKey` in `_meta`.",
        ),
    }
    text
}

/// What `get_info` returns: capabilities, identity, instructions and the runtime-protocol
/// advertisement in `_meta`; the protocol version is the handshake fallback, which the handler
/// replaces with the negotiated one.
pub fn server_config(table: &ToolTable<'_>) -> ServerConfig {
    let mut config = ServerConfig::new(capabilities())
        .with_server_info(server_info())
        .with_instructions(instructions(table))
        .with_protocol_version(FALLBACK_HANDSHAKE_VERSION);
    config.meta = Some(runtime_protocol_meta());
    config
}
