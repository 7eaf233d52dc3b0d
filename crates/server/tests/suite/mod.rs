mod attention;
mod endpoint;
mod mcp_http;
mod mcp_replayed;
mod regression;
mod support;
