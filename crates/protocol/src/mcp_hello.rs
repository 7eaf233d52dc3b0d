//! The `mcp.sock` hello (`docs/mcp.md`): the one line a client says before the stream becomes
//! newline-delimited MCP, and the daemon's one-line answer. The daemon writes the answer and
//! `openphone mcp serve` reads it with these types. The fields are in key order, so a record
//! serialises to the bytes of the JSON object it stands for.
//!
//! - hello: `{"openphone_mcp_hello": {"token": "<runtime token>"}}`;
//! - answer: `{"openphone_mcp_hello": "ok", "runtime": "<id>"}` or
//!   `{"message": "…", "openphone_mcp_hello": "refused"}`.

use serde::{Deserialize, Serialize};

/// The key of the hello line and of its answer.
pub const MCP_HELLO_KEY: &str = "openphone_mcp_hello";

/// The client's hello line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpHello {
    /// What the client presents.
    #[serde(rename = "openphone_mcp_hello")]
    pub hello: McpHelloToken,
}

/// The credential of a hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpHelloToken {
    /// The runtime's MCP token.
    pub token: String,
}

impl McpHello {
    /// The hello presenting `token`.
    pub fn new(token: impl Into<String>) -> McpHello {
        McpHello {
            hello: McpHelloToken {
                token: token.into(),
            },
        }
    }
}

/// The daemon's verdict on a hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpHelloAnswer {
    /// The token names a runtime: MCP follows.
    Ok,
    /// No runtime token: the daemon closes the connection.
    Refused,
}

/// The daemon's answer line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpHelloReply {
    /// Why the hello was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The verdict.
    #[serde(rename = "openphone_mcp_hello")]
    pub answer: McpHelloAnswer,
    /// The runtime the token names, when accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
}

impl McpHelloReply {
    /// Accepted as `runtime`.
    pub fn ok(runtime: impl Into<String>) -> McpHelloReply {
        McpHelloReply {
            message: None,
            answer: McpHelloAnswer::Ok,
            runtime: Some(runtime.into()),
        }
    }

    /// Refused, saying why.
    pub fn refused(message: impl Into<String>) -> McpHelloReply {
        McpHelloReply {
            message: Some(message.into()),
            answer: McpHelloAnswer::Refused,
            runtime: None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::{McpHello, McpHelloReply};
    use serde_json::json;

    /// Each record serialises to exactly the bytes of the `json!` object it replaced.
    #[test]
    fn the_lines_are_the_json_objects() {
        let hello = serde_json::to_string(&McpHello::new("t")).unwrap();
        assert_eq!(
            hello,
            json!({"openphone_mcp_hello": {"token": "t"}}).to_string()
        );
        let ok = serde_json::to_string(&McpHelloReply::ok("r")).unwrap();
        assert_eq!(
            ok,
            json!({"openphone_mcp_hello": "ok", "runtime": "r"}).to_string()
        );
        let refused = serde_json::to_string(&McpHelloReply::refused("no")).unwrap();
        assert_eq!(
            refused,
            json!({"openphone_mcp_hello": "refused", "message": "no"}).to_string()
        );
        let back: McpHelloReply = serde_json::from_str(&refused).unwrap();
        assert_eq!(back, McpHelloReply::refused("no"));
    }
}
