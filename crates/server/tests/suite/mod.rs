mod attention;
mod endpoint;
mod front_door;
mod mcp_http;
mod mcp_replayed;
mod one_write;
mod regression;
mod support;
