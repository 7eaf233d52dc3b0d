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

use rmcp::model::{CallToolResult, Implementation, ProtocolVersion, RequestId, RequestMetaObject};
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

/// A direct call's successful read, handed from the call's task to the path that writes the
/// answer: the phone's JSON text (the answer's `structuredContent`, never built as a tree),
/// its summary (the text block) and what the answer's `_meta` says. The call answers with a
/// placeholder ([`StructuredText::placeholder`]) and puts this here; the direct path writes
/// the answer's bytes from it ([`TextAnswer::write`]) — the bytes serde would write of the
/// whole answer, without building it (issue 34).
pub(crate) struct TextAnswer {
    /// The phone's JSON text of the result (a compact object).
    pub(crate) text: Arc<str>,
    /// The text block: the result's summary.
    pub(crate) summary: String,
    pub(crate) request_id: String,
    pub(crate) audit_id: String,
    pub(crate) replayed: bool,
}

impl TextAnswer {
    /// The JSON-RPC answer with id `id` carrying this result, as serde writes
    /// `ServerJsonRpcMessage::response` of the result the tree path shapes
    /// (`result::shape_owned`) with this text as its `structuredContent`: in the 2026-07-28
    /// era (`modern`) with `resultType`, which the handshake era strips. The `_meta` members
    /// are in serde_json's `Map` order (sorted keys). The tests below hold it to serde's bytes.
    pub(crate) fn write(&self, id: &RequestId, modern: bool) -> serde_json::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(
            200 + self.text.len()
                + self.summary.len()
                + self.request_id.len()
                + self.audit_id.len(),
        );
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        serde_json::to_writer(&mut out, id)?;
        out.extend_from_slice(br#","result":{"#);
        if modern {
            out.extend_from_slice(br#""resultType":"complete","#);
        }
        out.extend_from_slice(br#""content":[{"type":"text","text":"#);
        serde_json::to_writer(&mut out, &self.summary)?;
        out.extend_from_slice(br#"}],"structuredContent":"#);
        out.extend_from_slice(self.text.as_bytes());
        out.extend_from_slice(br#","isError":false,"_meta":{""#);
        out.extend_from_slice(crate::result::META_TOOL_RESULT.as_bytes());
        out.extend_from_slice(br#"":{"audit_id":"#);
        serde_json::to_writer(&mut out, &self.audit_id)?;
        if self.replayed {
            out.extend_from_slice(br#","replayed":true"#);
        }
        out.extend_from_slice(br#","request_id":"#);
        serde_json::to_writer(&mut out, &self.request_id)?;
        out.extend_from_slice(br#","status":"ok"}}}}"#);
        Ok(out)
    }
}

/// Where a direct call leaves its [`TextAnswer`]; `Site::structured_text`.
#[derive(Clone, Default)]
pub(crate) struct StructuredText(Arc<OnceLock<TextAnswer>>);

impl StructuredText {
    /// Keeps `answer`; false (and nothing kept) when an answer was kept already.
    pub(crate) fn put(&self, answer: TextAnswer) -> bool {
        self.0.set(answer).is_ok()
    }

    /// The answer kept, if any.
    pub(crate) fn get(&self) -> Option<&TextAnswer> {
        self.0.get()
    }

    /// What a call answers when it kept a [`TextAnswer`]: a result no shaping makes (every
    /// shaped result has a text block and `_meta`), so the writer can tell it from any other
    /// answer the call may have given instead ([`StructuredText::is_placeholder`]).
    pub(crate) fn placeholder() -> CallToolResult {
        CallToolResult::success(Vec::new())
    }

    /// Whether `result` is [`StructuredText::placeholder`].
    pub(crate) fn is_placeholder(result: &CallToolResult) -> bool {
        result.content.is_empty() && result.structured_content.is_none() && result.meta.is_none()
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
    use serde_json::{Map, Value, json};

    use super::{StructuredText, TextAnswer};
    use crate::result::shape_owned;

    fn written(result: rmcp::model::CallToolResult, modern: bool, id: &RequestId) -> Vec<u8> {
        let mut result = ServerResult::CallToolResult(result);
        if modern {
            result.fill_missing_cache_hints();
        } else {
            result.strip_result_type_for_legacy_peer();
        }
        serde_json::to_vec(&ServerJsonRpcMessage::response(result, id.clone())).unwrap()
    }

    fn answer_of(result: &ToolResult, text: &ObjectText) -> TextAnswer {
        TextAnswer {
            text: text.text().into(),
            summary: crate::text_summary::summary_of_text(text.text(), result.replayed)
                .expect("a compact object"),
            request_id: result.request_id.clone(),
            audit_id: result.audit_id.clone(),
            replayed: result.replayed,
        }
    }

    /// The answer written from a read's text is, byte for byte, the answer serde writes of the
    /// tree the rmcp path shapes: both eras, both kinds of id, replayed or not, small results
    /// and large ones, strings that need escaping (also in the ids), and strings holding what
    /// looks like JSON.
    #[test]
    fn a_result_left_as_text_answers_byte_for_byte_as_its_tree_would() {
        let results = [
            json!({"battery": 81, "charging": false, "model": "sim"}),
            json!({"note": "\"structuredContent\":null", "nested": {"structuredContent": null}}),
            json!({"text": "quote \" backslash \\ and é, a tab\t and \u{1}"}),
            json!({}),
            // Longer than a summary shows whole: the summary lists its members.
            json!({"long": "x".repeat(700), "list": [1, 2.5, -3], "object": {"a": {"b": 1}}}),
        ];
        let ids = [
            RequestId::Number(3),
            RequestId::Number(-9_007_199_254_740_991),
            RequestId::String("a \"quoted\" id / é".into()),
        ];
        for object in results {
            let Value::Object(map) = object else {
                unreachable!()
            };
            let text = ObjectText::write(&map).unwrap();
            for (request_id, audit_id, replayed) in [
                ("req-1", "runtime:rt:req-1", false),
                ("req \"2\"", "audit\\2", true),
            ] {
                let mut tree = ToolResult::ok("rt", request_id, map.clone());
                tree.audit_id = audit_id.to_owned();
                tree.replayed = replayed;
                let answer = answer_of(&tree, &text);
                for id in &ids {
                    for modern in [false, true] {
                        let expected = written(shape_owned(tree.clone(), None), modern, id);
                        let ours = answer.write(id, modern).unwrap();
                        assert_eq!(
                            String::from_utf8(ours).unwrap(),
                            String::from_utf8(expected).unwrap(),
                            "{map:?}, id {id:?}, modern {modern}, replayed {replayed}"
                        );
                    }
                }
            }
        }
    }

    /// The placeholder is told apart from every answer a shaping makes; a call keeps one
    /// answer.
    #[test]
    fn the_placeholder_is_no_shaped_answer_and_a_call_keeps_one_answer() {
        assert!(StructuredText::is_placeholder(
            &StructuredText::placeholder()
        ));
        let mut map = Map::new();
        map.insert("a".into(), json!(1));
        let shaped = [
            shape_owned(ToolResult::ok("rt", "r", map.clone()), None),
            shape_owned(ToolResult::ok("rt", "r", Map::new()), None),
            shape_owned(
                ToolResult::failure(
                    "rt",
                    "r",
                    openphone_protocol::ErrorCode::ToolError,
                    "failed",
                ),
                None,
            ),
        ];
        for result in &shaped {
            assert!(!StructuredText::is_placeholder(result), "{result:?}");
        }
        let slot = StructuredText::default();
        let text = ObjectText::write(&map).unwrap();
        let ok = ToolResult::ok("rt", "r", map.clone());
        assert!(slot.put(answer_of(&ok, &text)));
        assert!(!slot.put(answer_of(&ok, &text)), "one answer per call");
        assert_eq!(slot.get().map(|a| &*a.text), Some("{\"a\":1}"));
    }
}
