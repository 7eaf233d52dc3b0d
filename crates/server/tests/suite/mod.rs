mod attention;
mod endpoint;
mod mcp_http;
mod support;
