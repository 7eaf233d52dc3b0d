mod attention;
mod endpoint;
mod front_door;
mod mcp_http;
mod mcp_replayed;
mod regression;
mod support;
