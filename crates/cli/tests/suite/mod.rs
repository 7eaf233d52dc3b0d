mod audit;
mod daemon;
mod mcp_clients;
mod protocol;
mod support;
