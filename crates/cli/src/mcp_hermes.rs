//! `openphone mcp config hermes|hermes-http`: the `mcp_servers:` entry of Hermes Agent's
//! `config.yaml` (docs/hermes.md).
//!
//! Hermes starts a stdio server with a stripped environment (only `PATH`, `HOME`, `XDG_*` and
//! a few more survive, plus the entry's own `env:`), so everything `openphone mcp serve` needs
//! is in the entry: the binary's absolute path, `--data-dir` with an absolute path, and the
//! runtime token in `env: OPENPHONE_MCP_TOKEN`. The entry never has `--autostart`: a daemon
//! Hermes started would listen on the default address, perhaps beside another one; start the
//! daemon yourself. The HTTP entry uses the address the running daemon wrote in
//! `endpoint.json` (never a guessed default port).

use std::path::Path;

use serde_json::Value;

/// A YAML scalar: a JSON string is a valid YAML double-quoted scalar.
fn quoted(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// The stdio entry: `openphone mcp serve --data-dir DIR` with the token in `env:`.
/// `mcp_url` (the running daemon's, if any) is named in a comment for the HTTP alternative.
pub fn stdio_entry(exe: &str, data_dir: &Path, token: &str, mcp_url: Option<&str>) -> String {
    let dir = data_dir.display().to_string();
    let mut out = String::from(
        "# OpenPhone for Hermes Agent: merge into $HERMES_HOME/config.yaml (default ~/.hermes).\n\
         # Hermes clears the environment of stdio servers: the token is in `env:` below.\n\
         # Start the daemon yourself first (`openphone serve`); this entry does not start one.\n",
    );
    if let Some(url) = mcp_url {
        out.push_str(&format!(
            "# The same daemon over HTTP: `openphone mcp config hermes-http` ({url}).\n"
        ));
    }
    out.push_str(&format!(
        "mcp_servers:\n  openphone:\n    command: {}\n    args: [\"mcp\", \"serve\", \"--data-dir\", {}]\n    env:\n      OPENPHONE_MCP_TOKEN: {}\n    timeout: 300\n",
        quoted(exe),
        quoted(&dir),
        quoted(token),
    ));
    out
}

/// The Streamable HTTP entry: the running daemon's `/mcp` address and the bearer token.
pub fn http_entry(mcp_url: &str, token: &str) -> String {
    format!(
        "# OpenPhone for Hermes Agent over Streamable HTTP: merge into $HERMES_HOME/config.yaml.\n\
         # The address is the running daemon's; it changes if the daemon's `--listen` does.\n\
         mcp_servers:\n  openphone:\n    url: {}\n    headers:\n      Authorization: {}\n    timeout: 300\n",
        quoted(mcp_url),
        quoted(&format!("Bearer {token}")),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn the_stdio_entry_carries_the_token_in_env_and_never_autostarts() {
        let text = stdio_entry(
            "/opt/op bin/openphone",
            Path::new("/data/op \"x\""),
            "tok-123",
            Some("http://127.0.0.1:4242/mcp"),
        );
        assert!(text.contains("OPENPHONE_MCP_TOKEN: \"tok-123\""), "{text}");
        assert!(
            text.contains("command: \"/opt/op bin/openphone\""),
            "{text}"
        );
        assert!(
            text.contains("\"--data-dir\", \"/data/op \\\"x\\\"\"]"),
            "{text}"
        );
        assert!(!text.contains("--autostart"), "{text}");
        assert!(text.contains("4242"), "{text}");
    }

    #[test]
    fn the_http_entry_names_the_daemons_address_and_bearer() {
        let text = http_entry("http://127.0.0.1:4242/mcp", "tok-123");
        assert!(
            text.contains("url: \"http://127.0.0.1:4242/mcp\""),
            "{text}"
        );
        assert!(text.contains("Authorization: \"Bearer tok-123\""), "{text}");
    }
}
