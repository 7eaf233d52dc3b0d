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

use std::borrow::Cow;

use openphone_protocol::{CanonicalError, parse_json_strict};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
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
    if unremarkable(text) {
        // No key twice and no flag to remove: what follows would pass `text` on as it is.
        return None;
    }
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

/// Whether `text` is JSON holding no key twice in any object and no key named
/// [`META_DUPLICATE_KEY`] anywhere: the common message, which [`flagged`] passes on as it is.
/// Checked in one pass that builds nothing (the keys of each object are borrowed from `text`
/// unless escaped); anything else — a repeat, the reserved key, text that is not JSON — is
/// `false`, and [`flagged`] looks at it with the strict parser.
fn unremarkable(text: &str) -> bool {
    let mut de = serde_json::Deserializer::from_str(text);
    Walk.deserialize(&mut de).is_ok() && de.end().is_ok()
}

/// Walks one JSON value, failing at a repeated key or at [`META_DUPLICATE_KEY`].
struct Walk;

impl<'de> DeserializeSeed<'de> for Walk {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Walk)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys: Vec<Cow<'de, str>> = Vec::new();
        while let Some(key) = map.next_key_seed(Key)? {
            if key == META_DUPLICATE_KEY {
                return Err(de::Error::custom("the reserved key"));
            }
            keys.push(key);
            map.next_value_seed(Walk)?;
        }
        // Sorted, a repeat is a neighbour: O(n log n) for an object of many keys.
        keys.sort_unstable();
        if keys.windows(2).any(|pair| pair[0] == pair[1]) {
            return Err(de::Error::custom("a key given twice"));
        }
        Ok(())
    }
}

/// An object key, borrowed from the text when it holds no escape.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Cow<'de, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object key")
    }
    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(key))
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(key.to_owned()))
    }
    fn visit_string<E: de::Error>(self, key: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(key))
    }
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

    /// The one-pass check sees what the strict parser sees: a repeat spelled with an escape, a
    /// repeat deep inside, and the reserved key spelled with an escape are all looked at.
    #[test]
    fn the_quick_check_lets_through_only_what_the_strict_parser_would() {
        let escaped_twice = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"ab":1,"a\u0062":2}}}"#;
        let out: Value = serde_json::from_str(&flagged(escaped_twice).unwrap()).unwrap();
        assert_eq!(out["params"]["_meta"][META_DUPLICATE_KEY], json!("ab"));
        let deep = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"l":[{"z":1},{"y":[{"x":1,"w":0,"x":2}]}]}}}"#;
        let out: Value = serde_json::from_str(&flagged(deep).unwrap()).unwrap();
        assert_eq!(out["params"]["_meta"][META_DUPLICATE_KEY], json!("x"));
        let forged = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"dev.openphone\/duplicateKey":"y"}}}"#;
        let out: Value = serde_json::from_str(&flagged(forged).unwrap()).unwrap();
        assert_eq!(out["params"]["_meta"], json!({}));
        for text in [
            r#"{"a":1,"b":{"a":1,"b":[1,{"a":null}]},"c":"\u00e9\n"}"#,
            r#"[{"a":1},{"a":2}]"#,
            r#"{"x":1.5e300,"y":-3,"z":18446744073709551615,"w":true}"#,
        ] {
            assert!(unremarkable(text), "{text}");
            assert!(parse_json_strict(text).is_ok(), "{text}");
        }
        for text in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":{"b":1,"b":1}}"#,
            r#"{"a":1,"\u0061":2}"#,
            r#"{"a":1"#,
            r#"{"a":"\ud800"}"#,
            "not json",
            r#"{"a":1} {"b":2}"#,
        ] {
            assert!(!unremarkable(text), "{text}");
            assert!(parse_json_strict(text).is_err(), "{text}");
        }
    }

    /// An object of many keys is checked in O(n log n): 100,000 keys, the repeat last.
    #[test]
    fn an_object_of_many_keys_is_checked_quickly() {
        let mut text = String::from("{");
        for i in 0..100_000 {
            text.push_str(&format!("\"k{i}\":0,"));
        }
        text.push_str("\"k7\":1}");
        assert!(!unremarkable(&text));
        assert!(unremarkable(&text.replace("\"k7\":1}", "\"k\":1}")));
    }
}
