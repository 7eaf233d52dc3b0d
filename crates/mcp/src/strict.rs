//! Duplicate keys in `tools/call` (`runtime-protocol.md` §17: params holding a key twice are
//! refused, never read as "the last one wins").
//!
//! rmcp parses each message into `serde_json` maps, where a repeated key silently replaces the
//! earlier one, and hands the handler only the parsed result. So the check runs on the raw
//! text, where the transports still have it — each line of a stream connection ([`pump`],
//! between the socket and rmcp's reader) and each HTTP request body (`transport.rs`) — with the
//! protocol crate's strict parser. A `tools/call` holding a key twice anywhere (its arguments,
//! its `_meta`) is passed on flagged: the `_meta` member [`META_DUPLICATE_KEY`] names the key,
//! and the handler answers the call with the tool result `invalid_params` naming it, without invoking
//! anything. The flag is the daemon's own: one a client sends itself is removed first. Other
//! methods are passed on untouched (rmcp reads them as before).

use openphone_protocol::{CanonicalError, parse_json_strict};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// `_meta` key the transports set on a `tools/call` whose text holds a key twice; its value is
/// that key. Reserved for the daemon: a client's own is removed.
pub const META_DUPLICATE_KEY: &str = "dev.openphone/duplicateKey";

/// The longest line a stream connection may send (as rmcp's own reader allows); a longer one
/// ends the connection.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

const BOM: &str = "\u{feff}";

/// The message to pass on instead of `text`, when it differs: a `tools/call` holding a key twice
/// gets the flag, a `tools/call` carrying a flag of its own loses it. `None`: pass `text` on.
pub(crate) fn flagged(text: &str) -> Option<String> {
    let text = text.strip_prefix(BOM).unwrap_or(text);
    let (mut message, duplicate) = match parse_json_strict(text) {
        Ok(message) => (message, None),
        Err(CanonicalError::DuplicateKey { key }) => {
            (serde_json::from_str::<Value>(text).ok()?, Some(key))
        }
        // Not JSON: rmcp answers it as it always has.
        Err(_) => return None,
    };
    if message.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let params = message.get_mut("params")?.as_object_mut()?;
    match duplicate {
        Some(key) => {
            let meta = params
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if !meta.is_object() {
                *meta = Value::Object(Map::new());
            }
            if let Value::Object(meta) = meta {
                meta.insert(META_DUPLICATE_KEY.to_owned(), Value::String(key));
            }
        }
        None => {
            let meta = params.get_mut("_meta")?.as_object_mut()?;
            meta.remove(META_DUPLICATE_KEY)?;
        }
    }
    serde_json::to_string(&message).ok()
}

/// Copies newline-delimited messages from `from` to `to`, each through [`flagged`], until `from`
/// ends, `to` is closed, or a line exceeds [`MAX_LINE_BYTES`].
pub(crate) async fn pump<R, W>(from: R, mut to: W)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = u64::try_from(MAX_LINE_BYTES).unwrap_or(u64::MAX) + 1;
        let read = (&mut reader).take(limit).read_until(b'\n', &mut line).await;
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e, "mcp stream read failed");
                break;
            }
        }
        if line.len() > MAX_LINE_BYTES {
            tracing::warn!(
                limit = MAX_LINE_BYTES,
                "mcp stream line too long; closing the connection"
            );
            break;
        }
        let replaced = std::str::from_utf8(&line)
            .ok()
            .and_then(|text| flagged(text.trim_end_matches(['\n', '\r'])));
        let written = match replaced {
            Some(mut text) => {
                text.push('\n');
                to.write_all(text.as_bytes()).await
            }
            None => to.write_all(&line).await,
        };
        if written.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tools_call_with_a_key_twice_is_flagged_and_other_messages_pass() {
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"x":1,"x":2}}}"#;
        let out: Value = serde_json::from_str(&flagged(call).unwrap()).unwrap();
        assert_eq!(out["params"]["_meta"][META_DUPLICATE_KEY], json!("x"));
        assert_eq!(
            flagged(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"x":1}}}"#
            ),
            None
        );
        assert_eq!(
            flagged(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"a":1,"a":2}}"#),
            None
        );
        assert_eq!(flagged("not json"), None);
        // A client cannot set the flag itself (nor make a call look refused by someone else).
        let forged = json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"t","_meta":{META_DUPLICATE_KEY:"y","k":1}}});
        let out: Value = serde_json::from_str(&flagged(&forged.to_string()).unwrap()).unwrap();
        assert_eq!(out["params"]["_meta"], json!({"k": 1}));
    }
}
