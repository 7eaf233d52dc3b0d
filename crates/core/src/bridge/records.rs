//! What the front ends (server methods, MCP, OpenClaw, the dashboard) may read or record
//! through core instead of holding the store: each method returns protocol or store record
//! types and keeps the store handle inside core.

#[allow(unused_imports)]
use super::ToolBridge;
