mod audit;
mod client;
mod daemon;
mod harness;
mod mcp_clients;
mod mcp_harness;
mod protocol;
mod support;
