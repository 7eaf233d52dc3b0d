//! Turning what the server sends (stream chunks, or one JSON body) into a [`Completion`] and
//! the [`StreamEvent`]s reported on the way.
//!
//! Both paths share one [`Accumulator`]: a JSON answer's `message` has the same shape as a
//! stream chunk's `delta`, so it is applied as a single delta (its tool calls numbered by
//! position). Every odd shape found in the wild is handled on purpose:
//!
//! - an `error` object (in a body or as a stream event) becomes [`ModelError::Provider`];
//! - a body without `choices`, or with an empty list, is a [`ModelError::BadResponse`];
//! - the legacy `function_call` becomes one more tool call;
//! - `arguments` sent as a JSON object instead of a string is kept as its JSON text;
//! - `content` sent as an array of text parts is joined;
//! - a `refusal` is reported as the answer's text;
//! - a tool call without an id gets `call_<index>`; one without a name is refused;
//! - tool-call deltas without an `index` are matched by id, or continue the last call.

use serde::Deserialize;
use serde_json::Value;

use crate::error::{ModelError, excerpt};
use crate::types::{Completion, StreamEvent, ToolCall, Usage, arguments_text};

/// The most tool calls accepted in one answer.
pub(crate) const MAX_TOOL_CALLS: usize = 128;

/// What to do after one stream event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Keep reading.
    Continue,
    /// `[DONE]` arrived: the answer is complete.
    Done,
}

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    message: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
    #[serde(default)]
    function_call: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Debug)]
struct PartialCall {
    /// The index reported to the caller (the server's, unless it collided or was missing).
    index: usize,
    id: String,
    name: String,
    arguments: String,
}

/// The answer assembled so far.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    content: String,
    calls: Vec<PartialCall>,
    legacy_call: Option<usize>,
    /// The server's index of each call → its position in `calls` (the latest call wins).
    by_wire: Vec<(usize, usize)>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    done: bool,
    events_seen: usize,
}

impl Accumulator {
    /// An empty answer.
    pub(crate) fn new() -> Accumulator {
        Accumulator::default()
    }

    /// Whether `[DONE]` arrived.
    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// Whether a choice has reported why it finished.
    pub(crate) fn has_finish_reason(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Applies the data of one stream event.
    pub(crate) fn on_stream_event(
        &mut self,
        data: &str,
        secret: Option<&str>,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<Step, ModelError> {
        if self.done {
            return Ok(Step::Done);
        }
        let trimmed = data.trim();
        if trimmed == "[DONE]" {
            self.done = true;
            return Ok(Step::Done);
        }
        if trimmed.is_empty() {
            return Ok(Step::Continue);
        }
        self.events_seen += 1;
        let value: Value = serde_json::from_str(trimmed).map_err(|e| {
            ModelError::bad_response(format!(
                "stream event {} is not JSON ({e}): {}",
                self.events_seen,
                excerpt(trimmed, secret)
            ))
        })?;
        check_error_object(&value, secret)?;
        let chunk: Chunk = serde_json::from_value(value).map_err(|e| {
            ModelError::bad_response(format!(
                "stream event {} has an unexpected shape: {}",
                self.events_seen,
                excerpt(&e.to_string(), secret)
            ))
        })?;
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta.or(choice.message) {
                self.apply(delta, false, secret, on_event)?;
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
        Ok(Step::Continue)
    }

    /// Applies a whole (non-streamed) JSON answer.
    pub(crate) fn on_json_body(
        &mut self,
        body: &str,
        secret: Option<&str>,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<(), ModelError> {
        let value: Value = serde_json::from_str(body).map_err(|e| {
            ModelError::bad_response(format!(
                "the response body is not JSON ({e}): {}",
                excerpt(body, secret)
            ))
        })?;
        if !value.is_object() {
            return Err(ModelError::bad_response(format!(
                "the response body is not a JSON object: {}",
                excerpt(body, secret)
            )));
        }
        check_error_object(&value, secret)?;
        match value.get("choices") {
            None | Some(Value::Null) => {
                return Err(ModelError::bad_response(format!(
                    "the response has no \"choices\": {}",
                    excerpt(body, secret)
                )));
            }
            Some(Value::Array(choices)) if choices.is_empty() => {
                return Err(ModelError::bad_response(
                    "the response has an empty \"choices\" list",
                ));
            }
            Some(_) => {}
        }
        let chunk: Chunk = serde_json::from_value(value).map_err(|e| {
            ModelError::bad_response(format!(
                "the response has an unexpected shape: {}",
                excerpt(&e.to_string(), secret)
            ))
        })?;
        self.usage = chunk.usage;
        let choices = chunk.choices.unwrap_or_default();
        let choice = choices
            .into_iter()
            .min_by_key(|choice| choice.index.unwrap_or(0))
            .ok_or_else(|| ModelError::bad_response("the response has no choice"))?;
        let message = choice.message.or(choice.delta).ok_or_else(|| {
            ModelError::bad_response("the response's first choice has no \"message\"")
        })?;
        self.apply(message, true, secret, on_event)?;
        self.finish_reason = choice.finish_reason;
        self.done = true;
        Ok(())
    }

    fn apply(
        &mut self,
        delta: Delta,
        whole_message: bool,
        secret: Option<&str>,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<(), ModelError> {
        let mut text = match delta.content {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text,
            Some(Value::Array(parts)) => join_text_parts(&parts, secret)?,
            Some(other) => {
                return Err(ModelError::bad_response(format!(
                    "\"content\" is neither text nor a list of parts: {}",
                    excerpt(&other.to_string(), secret)
                )));
            }
        };
        if let Some(refusal) = delta.refusal {
            text.push_str(&refusal);
        }
        if !text.is_empty() {
            self.content.push_str(&text);
            on_event(StreamEvent::TextDelta(text));
        }
        for (position, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
            // A whole message lists its calls without indexes: number them by position.
            let index = if whole_message {
                Some(position)
            } else {
                call.index
            };
            let (name, arguments) = match call.function {
                Some(function) => (function.name, function.arguments),
                None => (None, None),
            };
            let slot = self.slot(index, call.id.as_deref())?;
            self.extend(slot, call.id, name, arguments, on_event);
        }
        if let Some(function) = delta.function_call {
            let slot = match self.legacy_call {
                Some(slot) => slot,
                None => {
                    let slot = self.new_slot(self.next_index())?;
                    self.legacy_call = Some(slot);
                    slot
                }
            };
            self.extend(slot, None, function.name, function.arguments, on_event);
        }
        Ok(())
    }

    fn next_index(&self) -> usize {
        self.calls
            .iter()
            .map(|call| call.index.saturating_add(1))
            .max()
            .unwrap_or(0)
    }

    fn new_slot(&mut self, index: usize) -> Result<usize, ModelError> {
        if self.calls.len() >= MAX_TOOL_CALLS {
            return Err(ModelError::bad_response(format!(
                "the answer has more than {MAX_TOOL_CALLS} tool calls"
            )));
        }
        self.calls.push(PartialCall {
            index,
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
        });
        Ok(self.calls.len() - 1)
    }

    /// Finds (or opens) the call a delta belongs to.
    fn slot(&mut self, index: Option<usize>, id: Option<&str>) -> Result<usize, ModelError> {
        let id = id.filter(|id| !id.is_empty());
        let Some(wire) = index else {
            // No index: match by id, else continue the last call (or open the first).
            if let Some(id) = id {
                if let Some(slot) = self.calls.iter().position(|call| call.id == id) {
                    return Ok(slot);
                }
                return match self.calls.last() {
                    Some(last) if last.id.is_empty() => Ok(self.calls.len() - 1),
                    _ => self.new_slot(self.next_index()),
                };
            }
            return match self.calls.len() {
                0 => self.new_slot(0),
                len => Ok(len - 1),
            };
        };
        if let Some(&(_, slot)) = self.by_wire.iter().find(|(known, _)| *known == wire) {
            let current = &self.calls[slot].id;
            match id {
                // The same index with another id: a new call from a server that numbers
                // every call the same. It gets the next free index.
                Some(id) if !current.is_empty() && current != id => {}
                _ => return Ok(slot),
            }
        }
        let reported = if self.calls.iter().any(|call| call.index == wire) {
            self.next_index()
        } else {
            wire
        };
        let slot = self.new_slot(reported)?;
        match self.by_wire.iter_mut().find(|(known, _)| *known == wire) {
            Some(entry) => entry.1 = slot,
            None => self.by_wire.push((wire, slot)),
        }
        Ok(slot)
    }

    fn extend(
        &mut self,
        slot: usize,
        id: Option<String>,
        name: Option<String>,
        arguments: Option<Value>,
        on_event: &mut (dyn FnMut(StreamEvent) + Send),
    ) {
        let call = &mut self.calls[slot];
        let id = id.filter(|id| !id.is_empty());
        if let Some(id) = &id
            && call.id.is_empty()
        {
            call.id.clone_from(id);
        }
        let name = name.filter(|name| !name.is_empty());
        if let Some(name) = &name {
            // Servers send the name once; one that repeats it whole is not doubled.
            if call.name.is_empty() {
                call.name.clone_from(name);
            } else if call.name != *name {
                call.name.push_str(name);
            }
        }
        let arguments_delta = arguments.map(arguments_text).unwrap_or_default();
        call.arguments.push_str(&arguments_delta);
        on_event(StreamEvent::ToolCallDelta {
            index: call.index,
            id,
            name,
            arguments_delta,
        });
    }

    /// The assembled answer (`attempts` left at 0 for the caller to fill).
    pub(crate) fn finish(self) -> Result<Completion, ModelError> {
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for call in self.calls {
            if call.name.is_empty() {
                return Err(ModelError::bad_response(format!(
                    "tool call {} has no function name",
                    call.index
                )));
            }
            tool_calls.push(ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{}", call.index)
                } else {
                    call.id
                },
                name: call.name,
                arguments: call.arguments,
            });
        }
        Ok(Completion {
            content: self.content,
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
            attempts: 0,
        })
    }
}

fn join_text_parts(parts: &[Value], secret: Option<&str>) -> Result<String, ModelError> {
    let mut text = String::new();
    for part in parts {
        match part.get("text") {
            Some(Value::String(piece)) => text.push_str(piece),
            _ if part.get("type").and_then(Value::as_str) == Some("text") => {
                return Err(ModelError::bad_response(format!(
                    "a text part has no text: {}",
                    excerpt(&part.to_string(), secret)
                )));
            }
            // Other part types (a provider's own annotations) carry no answer text.
            _ => {}
        }
    }
    Ok(text)
}

/// Fails with [`ModelError::Provider`] when `value` carries a non-null `error`.
pub(crate) fn check_error_object(value: &Value, secret: Option<&str>) -> Result<(), ModelError> {
    match value.get("error") {
        None | Some(Value::Null) => Ok(()),
        Some(error) => Err(ModelError::Provider {
            message: describe_error_object(error, secret),
        }),
    }
}

/// A one-line description of a provider's `error` value: its message, then its type and code.
pub(crate) fn describe_error_object(error: &Value, secret: Option<&str>) -> String {
    let text = match error {
        Value::String(message) => message.clone(),
        Value::Object(fields) => {
            let message = fields
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("(no message)");
            let mut extra = Vec::new();
            for key in ["type", "code"] {
                match fields.get(key) {
                    Some(Value::String(value)) => extra.push(format!("{key} {value}")),
                    Some(Value::Number(value)) => extra.push(format!("{key} {value}")),
                    _ => {}
                }
            }
            if extra.is_empty() {
                message.to_owned()
            } else {
                format!("{message} ({})", extra.join(", "))
            }
        }
        other => other.to_string(),
    };
    excerpt(&text, secret)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn run_stream(events: &[&str]) -> (Result<Completion, ModelError>, Vec<StreamEvent>) {
        let mut seen = Vec::new();
        let mut acc = Accumulator::new();
        let mut record = |event: StreamEvent| seen.push(event);
        for data in events {
            if let Err(error) = acc.on_stream_event(data, Some("sk-x"), &mut record) {
                return (Err(error), seen);
            }
        }
        (acc.finish(), seen)
    }

    #[test]
    fn accumulates_text_and_several_tool_calls() {
        let (completion, events) = run_stream(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"tap","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"type_text","arguments":"{\"te"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"xt\":\"a\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#,
            "[DONE]",
        ]);
        let completion = completion.unwrap();
        assert_eq!(completion.content, "Hello");
        assert_eq!(
            completion.tool_calls,
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "tap".into(),
                    arguments: "{\"x\":1}".into()
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "type_text".into(),
                    arguments: "{\"text\":\"a\"}".into()
                },
            ]
        );
        assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(completion.usage.map(|u| u.total_tokens), Some(7));
        assert_eq!(events[0], StreamEvent::TextDelta("Hel".into()));
        assert_eq!(
            events[2],
            StreamEvent::ToolCallDelta {
                index: 0,
                id: Some("call_a".into()),
                name: Some("tap".into()),
                arguments_delta: String::new()
            }
        );
    }

    #[test]
    fn error_events_and_garbage_are_reported() {
        let (result, _) =
            run_stream(&[r#"{"error":{"message":"overloaded","type":"server_error"}}"#]);
        let error = result.unwrap_err();
        assert_eq!(error.reason(), "model_provider_error");
        assert_eq!(
            error.to_string(),
            "model_provider_error: overloaded (type server_error)"
        );
        let (result, _) = run_stream(&["{not json"]);
        assert_eq!(result.unwrap_err().reason(), "model_bad_response");
        let (result, _) = run_stream(&[r#"{"choices":[{"delta":{"content":5}}]}"#]);
        assert_eq!(result.unwrap_err().reason(), "model_bad_response");
        let (result, _) = run_stream(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
        ]);
        assert!(result.unwrap_err().to_string().contains("no function name"));
    }

    #[test]
    fn odd_stream_shapes_are_handled() {
        // No indexes, ids, a name repeated, a legacy function_call, a refusal.
        let (completion, _) = run_stream(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":{"k":1}}}]}}]}"#,
            r#"{"choices":[{"delta":{"function_call":{"name":"legacy","arguments":"{}"}}}]}"#,
            r#"{"choices":[{"delta":{"refusal":"no"}}]}"#,
            r#"{"choices":[{"index":1,"delta":{"content":"ignored second choice"}}]}"#,
        ]);
        let completion = completion.unwrap();
        let calls: Vec<(&str, &str, &str)> = completion
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("a", "f", "{}"),
                ("b", "g", "{\"k\":1}"),
                ("call_2", "legacy", "{}")
            ]
        );
        assert_eq!(completion.content, "no");
        assert_eq!(completion.finish_reason, None);
    }

    #[test]
    fn servers_that_number_every_call_zero_still_give_separate_calls() {
        let (completion, _) = run_stream(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{}"}}]}}]}"#,
        ]);
        let names: Vec<String> = completion
            .unwrap()
            .tool_calls
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, vec!["f", "g"]);
    }

    /// A whole stream body as a server sends it: text, two tool calls, usage, `[DONE]`.
    const STREAM_BODY: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hé\"}}]}\r\n\r\n",
        ": keep-alive\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"llo → ✓\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"tap\",\"arguments\":\"{\\\"x\\\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"type\",\"arguments\":\"{\\\"t\\\":\\\"ü\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":5,\"total_tokens\":14}}\n\n",
        "data: [DONE]\n\n",
    );

    /// Feeds the body in the given pieces through the event parser and the accumulator.
    fn assemble(pieces: &[&[u8]]) -> (Completion, Vec<StreamEvent>) {
        let mut parser = crate::sse::SseParser::new();
        let mut answer = Accumulator::new();
        let mut seen = Vec::new();
        let mut data = Vec::new();
        let mut record = |event: StreamEvent| seen.push(event);
        for piece in pieces {
            parser.feed(piece, &mut data).unwrap();
            for event in data.drain(..) {
                answer.on_stream_event(&event, None, &mut record).unwrap();
            }
        }
        parser.finish(&mut data).unwrap();
        for event in data.drain(..) {
            answer.on_stream_event(&event, None, &mut record).unwrap();
        }
        assert!(answer.is_done());
        (answer.finish().unwrap(), seen)
    }

    /// The text deltas joined and the calls' pieces reassembled: what a caller rebuilds.
    fn summary(events: &[StreamEvent]) -> (String, Vec<(usize, String)>) {
        let mut text = String::new();
        let mut calls: Vec<(usize, String)> = Vec::new();
        for event in events {
            match event {
                StreamEvent::TextDelta(piece) => text.push_str(piece),
                StreamEvent::ToolCallDelta {
                    index,
                    arguments_delta,
                    ..
                } => match calls.iter_mut().find(|(known, _)| known == index) {
                    Some((_, arguments)) => arguments.push_str(arguments_delta),
                    None => calls.push((*index, arguments_delta.clone())),
                },
                StreamEvent::Retrying { .. } => {}
            }
        }
        (text, calls)
    }

    #[test]
    fn a_stream_split_at_every_byte_boundary_assembles_the_same() {
        let bytes = STREAM_BODY.as_bytes();
        let (whole, whole_events) = assemble(&[bytes]);
        assert_eq!(whole.content, "Héllo → ✓");
        assert_eq!(whole.tool_calls[0].arguments, "{\"x\":1}");
        assert_eq!(whole.tool_calls[1].arguments, "{\"t\":\"ü\"}");
        assert_eq!(whole.usage.map(|u| u.total_tokens), Some(14));
        for cut in 0..=bytes.len() {
            let (split, events) = assemble(&[&bytes[..cut], &bytes[cut..]]);
            assert_eq!(split, whole, "cut at {cut}");
            assert_eq!(summary(&events), summary(&whole_events), "cut at {cut}");
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(assemble(&singles).0, whole);
    }

    proptest::proptest! {
        #[test]
        fn a_stream_split_anywhere_assembles_the_same(
            cuts in proptest::collection::vec(0usize..4096, 0..24),
        ) {
            let bytes = STREAM_BODY.as_bytes();
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut pieces = Vec::new();
            let mut start = 0;
            for point in points {
                pieces.push(&bytes[start..point]);
                start = point;
            }
            pieces.push(&bytes[start..]);
            let (whole, whole_events) = assemble(&[bytes]);
            let (split, events) = assemble(&pieces);
            proptest::prop_assert_eq!(split, whole);
            proptest::prop_assert_eq!(summary(&events), summary(&whole_events));
        }
    }

    fn run_json(body: &str) -> (Result<Completion, ModelError>, Vec<StreamEvent>) {
        let mut seen = Vec::new();
        let mut acc = Accumulator::new();
        let result = acc
            .on_json_body(body, Some("sk-x"), &mut |event| seen.push(event))
            .and_then(|()| acc.finish());
        (result, seen)
    }

    #[test]
    fn json_answers_in_every_shape() {
        let (completion, events) = run_json(
            r#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,
               "tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},
                             {"type":"function","function":{"name":"g","arguments":{"b":2}}}]},
               "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}"#,
        );
        let completion = completion.unwrap();
        assert_eq!(completion.content, "");
        assert_eq!(completion.tool_calls[0].id, "c1");
        assert_eq!(completion.tool_calls[1].id, "call_1");
        assert_eq!(completion.tool_calls[1].arguments, "{\"b\":2}");
        assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(events.len(), 2);

        let (completion, _) = run_json(
            r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],
               "function_call":{"name":"old","arguments":"{}"}},"finish_reason":"function_call"}]}"#,
        );
        let completion = completion.unwrap();
        assert_eq!(completion.content, "ab");
        assert_eq!(completion.tool_calls[0].name, "old");

        for (body, reason, needle) in [
            (
                r#"{"error":{"message":"bad key sk-x","code":"invalid_api_key"}}"#,
                "model_provider_error",
                "invalid_api_key",
            ),
            (r#"{"error":"plain"}"#, "model_provider_error", "plain"),
            (
                r#"{"object":"chat.completion"}"#,
                "model_bad_response",
                "no \"choices\"",
            ),
            (r#"{"choices":[]}"#, "model_bad_response", "empty"),
            (
                r#"{"choices":[{"index":0}]}"#,
                "model_bad_response",
                "no \"message\"",
            ),
            (
                r#"{"choices":"x"}"#,
                "model_bad_response",
                "unexpected shape",
            ),
            ("[1,2]", "model_bad_response", "not a JSON object"),
            ("<html>oops</html>", "model_bad_response", "not JSON"),
        ] {
            let error = run_json(body).0.unwrap_err();
            assert_eq!(error.reason(), reason, "{body}");
            let text = error.to_string();
            assert!(text.contains(needle), "{text}");
            assert!(!text.contains("sk-x"), "{text}");
        }
    }
}
