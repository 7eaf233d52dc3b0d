//! What a `tools/call` reads of the request it answers: its id, its `_meta`, its cancellation
//! token, the client's declared identity and — when rmcp carries the request — the peer that
//! progress notifications and elicitations go to.
//!
//! Two paths build a [`Site`]: rmcp's handler, from its request context, and the direct path
//! (`crate::direct`), which answers a plain `tools/call` without rmcp's service machinery. A
//! direct call has no peer, and needs none: it carries no progress token (such a call goes to
//! rmcp), and nobody can be asked mid-call — a 2026-07-28 confirming host is asked through
//! `input_required`, and a handshake-era session is taken only if its client declared no
//! elicitation.

use std::sync::{Arc, OnceLock};

use rmcp::model::{Implementation, ProtocolVersion, RequestId, RequestMetaObject};
use rmcp::service::{ElicitationMode, Peer, RequestContext, RoleServer};
use tokio_util::sync::CancellationToken;

use super::strategy::{ElicitationModes, Era};

/// The request a call answers.
pub(crate) struct Site {
    /// The JSON-RPC id.
    pub(crate) id: RequestId,
    /// The request's `_meta` (rmcp moves it out of the params; the direct path does too).
    pub(crate) meta: RequestMetaObject,
    /// Cancelled by an explicit cancel, a closed connection or the daemon's shutdown.
    pub(crate) ct: CancellationToken,
    /// The peer of an rmcp connection or session; `None` on the direct path.
    pub(crate) peer: Option<Peer<RoleServer>>,
    /// The client's declared identity (`clientInfo`), read once.
    pub(crate) client: Option<Implementation>,
    /// On the direct path, where a successful read's `structuredContent` is left as the JSON
    /// text the phone answered with ([`StructuredText`]); `None` under rmcp, whose answer
    /// carries it as a tree.
    pub(crate) structured_text: Option<StructuredText>,
}

/// The text of a direct call's `structuredContent`, handed from the call's task to the path
/// that writes the answer. The call shapes its answer with `structuredContent: null` and puts
/// the text here; the answer's bytes get the text in that place (`crate::direct`), so a read's
/// result is never built as a tree, written and dropped only to reach the same bytes (issue
/// 34).
#[derive(Clone, Default)]
pub(crate) struct StructuredText(Arc<OnceLock<Arc<str>>>);

impl StructuredText {
    /// Keeps `text`; false (and nothing kept) when a text was kept already.
    pub(crate) fn put(&self, text: Arc<str>) -> bool {
        self.0.set(text).is_ok()
    }

    /// The text kept, if any.
    pub(crate) fn get(&self) -> Option<&Arc<str>> {
        self.0.get()
    }

    /// `body`, an answer written with `structuredContent: null`, with `text` in place of that
    /// `null`: the first `"structuredContent":null` in it, which is the result's own — every
    /// string in `body` is escaped (a `"` inside one is written `\"`), and what comes before
    /// the member are the envelope's `jsonrpc` and `id` and the result's `content` blocks.
    /// An answer without that `null` did not take the text (its result is a tree, or it is an
    /// error) and is left as it is: the `null` and the text are made together
    /// ([`Call::shape_text`](super::tool_call)), so no answer can lose its data here.
    pub(crate) fn fill(body: Vec<u8>, text: &str) -> Vec<u8> {
        const HOLE: &[u8] = b"\"structuredContent\":null";
        // memchr's substring search: comparing every window byte by byte took ~650 more
        // instructions per answer (callgrind, issue 34).
        let Some(at) = memchr::memmem::find(&body, HOLE) else {
            return body;
        };
        let value = at + HOLE.len() - b"null".len();
        let mut out = Vec::with_capacity(body.len() + text.len());
        out.extend_from_slice(&body[..value]);
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(&body[at + HOLE.len()..]);
        out
    }
}

impl Site {
    /// The site of a request rmcp hands the handler.
    pub(crate) fn of_context(context: RequestContext<RoleServer>) -> Site {
        // Read before the context is taken apart: in the handshake era it is the session's
        // `initialize`; in the 2026-07-28 era only the request's `_meta` speaks for the client
        // (rmcp would fall back to a stand-in of its own, `rmcp`, for a request without
        // `clientInfo`; the direct path reads `_meta` alone, and the two must count a client's
        // calls under one key: `slots.rs`).
        let client = match era_of(&context.meta) {
            Era::Stateless => context.meta.client_info(),
            Era::Handshake => context.client_info(),
        };
        Site {
            id: context.id,
            meta: context.meta,
            ct: context.ct,
            peer: Some(context.peer),
            client,
            structured_text: None,
        }
    }

    /// The protocol era: 2026-07-28 and later carry their version in `_meta`.
    pub(crate) fn era(&self) -> Era {
        era_of(&self.meta)
    }

    /// The elicitation modes a handshake-era client declared in its `initialize`; none without
    /// a peer.
    pub(crate) fn session_elicitation(&self) -> ElicitationModes {
        let Some(peer) = &self.peer else {
            return ElicitationModes::default();
        };
        let modes = peer.supported_elicitation_modes();
        ElicitationModes {
            form: modes.contains(&ElicitationMode::Form),
            url: modes.contains(&ElicitationMode::Url),
        }
    }

    /// Whether the answer can no longer reach the client. rmcp's peer knows; on the direct
    /// path the token fires when the HTTP request is dropped (or the daemon stops, which the
    /// caller checks first).
    pub(crate) fn transport_closed(&self) -> bool {
        match &self.peer {
            Some(peer) => peer.is_transport_closed(),
            None => self.ct.is_cancelled(),
        }
    }
}

/// The protocol era of a request with `meta`.
pub(crate) fn era_of(meta: &RequestMetaObject) -> Era {
    let modern = meta
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    if modern {
        Era::Stateless
    } else {
        Era::Handshake
    }
}

#[cfg(test)]
mod tests {
    use openphone_protocol::{ObjectText, ToolResult};
    use rmcp::model::{RequestId, ServerJsonRpcMessage, ServerResult};
    use serde_json::{Value, json};

    use super::StructuredText;
    use crate::result::{shape_owned, success_for_text};

    fn written(result: rmcp::model::CallToolResult, modern: bool) -> Vec<u8> {
        let mut result = ServerResult::CallToolResult(result);
        if modern {
            result.fill_missing_cache_hints();
        } else {
            result.strip_result_type_for_legacy_peer();
        }
        serde_json::to_vec(&ServerJsonRpcMessage::response(
            result,
            RequestId::Number(3),
        ))
        .unwrap()
    }

    /// The answer a read's text is written into is the answer its tree would have been, in
    /// both eras, small or large, also when the result's own strings hold the placeholder's
    /// bytes.
    #[test]
    fn a_result_left_as_text_answers_as_its_tree_would() {
        let results = [
            json!({"battery": 81, "charging": false, "model": "sim"}),
            json!({"note": "\"structuredContent\":null", "nested": {"structuredContent": null}}),
            json!({"text": "quote \" backslash \\ and é"}),
            // Longer than a summary shows whole: the summary lists its members.
            json!({"long": "x".repeat(700), "list": [1, 2], "object": {"a": {"b": 1}}}),
        ];
        for object in results {
            let Value::Object(map) = object else {
                unreachable!()
            };
            let text = ObjectText::write(&map).unwrap();
            let only = ToolResult::ok_text("rt", "req-1", text.clone());
            let tree = ToolResult::ok("rt", "req-1", map.clone());
            for modern in [false, true] {
                let shaped = success_for_text(&only, text.text()).expect("a small result");
                let filled = StructuredText::fill(written(shaped, modern), text.text());
                let expected = written(shape_owned(tree.clone(), None), modern);
                let filled: Value = serde_json::from_slice(&filled).unwrap();
                let expected: Value = serde_json::from_slice(&expected).unwrap();
                assert_eq!(filled, expected, "{map:?}, modern {modern}");
            }
        }
    }

    /// An answer that did not take the text (an error, a result written as a tree) is left as
    /// it is; a call keeps one text.
    #[test]
    fn an_answer_without_the_placeholder_is_left_as_it_is() {
        let error = br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"x"}}"#.to_vec();
        assert_eq!(StructuredText::fill(error.clone(), "{}"), error);
        let tree =
            br#"{"jsonrpc":"2.0","id":3,"result":{"structuredContent":{"a":null}}}"#.to_vec();
        assert_eq!(StructuredText::fill(tree.clone(), "{}"), tree);
        let slot = StructuredText::default();
        assert!(slot.put("{\"a\":1}".into()));
        assert!(!slot.put("{\"b\":2}".into()), "one text per call");
        assert_eq!(slot.get().map(|t| &**t), Some("{\"a\":1}"));
    }
}
