//! The Chat Completions wire shapes: messages, tools, tool calls, and what a call returns.
//!
//! Every type serialises to exactly the JSON an OpenAI-compatible server expects, so a
//! conversation can also be stored and reloaded as that JSON.

use std::time::Duration;

use base64::Engine as _;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// One message of a conversation, tagged by its `role` on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// Instructions from the system prompt.
    System {
        /// The instructions.
        content: String,
    },
    /// A user turn: text, or text and images.
    User {
        /// What the user said.
        content: Content,
    },
    /// A model turn: text, tool calls, or both. `content` is `null` on the wire when absent.
    Assistant {
        /// The text the model wrote, if any.
        #[serde(default)]
        content: Option<String>,
        /// The tools the model asked to run (omitted when empty).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, answering the call with the same id.
    Tool {
        /// The `id` of the [`ToolCall`] this answers.
        tool_call_id: String,
        /// The result as text (usually JSON).
        content: String,
    },
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Message {
        Message::System {
            content: content.into(),
        }
    }

    /// A plain-text user message.
    pub fn user(content: impl Into<String>) -> Message {
        Message::User {
            content: Content::Text(content.into()),
        }
    }

    /// A user message made of parts (text and images).
    pub fn user_parts(parts: Vec<ContentPart>) -> Message {
        Message::User {
            content: Content::Parts(parts),
        }
    }

    /// A plain-text assistant message.
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::Assistant {
            content: Some(content.into()),
            tool_calls: Vec::new(),
        }
    }

    /// A tool result answering the call `tool_call_id`.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Message {
        Message::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }

    /// Whether this message carries an image part.
    pub fn has_images(&self) -> bool {
        match self {
            Message::User { content } => content.has_images(),
            _ => false,
        }
    }
}

/// The content of a user message: a plain string, or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text (serialised as a JSON string).
    Text(String),
    /// Text and image parts (serialised as an array of typed parts).
    Parts(Vec<ContentPart>),
}

impl Content {
    /// Whether any part is an image.
    pub fn has_images(&self) -> bool {
        match self {
            Content::Text(_) => false,
            Content::Parts(parts) => parts
                .iter()
                .any(|part| matches!(part, ContentPart::ImageUrl { .. })),
        }
    }
}

/// One part of a multi-part user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// `{"type":"text","text":…}`.
    Text {
        /// The text.
        text: String,
    },
    /// `{"type":"image_url","image_url":{"url":…}}`; the URL is usually a `data:` URL.
    ImageUrl {
        /// Where the image is.
        image_url: ImageUrl,
    },
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> ContentPart {
        ContentPart::Text { text: text.into() }
    }

    /// An image part carrying the image inline as a `data:{mime};base64,…` URL.
    pub fn image_data(mime: &str, bytes: &[u8]) -> ContentPart {
        let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
        ContentPart::ImageUrl {
            image_url: ImageUrl {
                url: format!("data:{mime};base64,{encoded}"),
                detail: None,
            },
        }
    }
}

/// The `image_url` object of an image part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageUrl {
    /// The image's URL (`data:` for inline images).
    pub url: String,
    /// The optional detail hint (`low`, `high`, `auto`); omitted when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A tool the model may call, serialised as `{"type":"function","function":{…}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The function name the model calls it by.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON Schema of the arguments object.
    pub parameters: Value,
}

#[derive(Serialize, Deserialize)]
struct FunctionSpecWire<'a> {
    #[serde(borrow)]
    name: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    description: std::borrow::Cow<'a, str>,
    #[serde(default = "empty_object")]
    parameters: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

#[derive(Serialize, Deserialize)]
struct ToolSpecWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    function: FunctionSpecWire<'a>,
}

impl Serialize for ToolSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ToolSpecWire {
            kind: "function".into(),
            function: FunctionSpecWire {
                name: self.name.as_str().into(),
                description: self.description.as_str().into(),
                parameters: self.parameters.clone(),
            },
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ToolSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = ToolSpecWire::deserialize(deserializer)?;
        if wire.kind != "function" {
            return Err(D::Error::custom(format!(
                "unsupported tool type {:?} (only \"function\")",
                wire.kind
            )));
        }
        Ok(ToolSpec {
            name: wire.function.name.into_owned(),
            description: wire.function.description.into_owned(),
            parameters: wire.function.parameters,
        })
    }
}

/// Whether and which tool the model must call: `"auto"`, `"none"`, `"required"`, or
/// `{"type":"function","function":{"name":…}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool call.
    None,
    /// At least one tool call.
    Required,
    /// This one function.
    Function(String),
}

#[derive(Serialize, Deserialize)]
struct NamedFunctionWire {
    name: String,
}

#[derive(Serialize, Deserialize)]
struct NamedToolChoiceWire {
    #[serde(rename = "type")]
    kind: String,
    function: NamedFunctionWire,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ToolChoiceWire {
    Mode(String),
    Named(NamedToolChoiceWire),
}

impl Serialize for ToolChoice {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolChoice::Auto => serializer.serialize_str("auto"),
            ToolChoice::None => serializer.serialize_str("none"),
            ToolChoice::Required => serializer.serialize_str("required"),
            ToolChoice::Function(name) => NamedToolChoiceWire {
                kind: "function".to_owned(),
                function: NamedFunctionWire { name: name.clone() },
            }
            .serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match ToolChoiceWire::deserialize(deserializer)? {
            ToolChoiceWire::Mode(mode) => match mode.as_str() {
                "auto" => Ok(ToolChoice::Auto),
                "none" => Ok(ToolChoice::None),
                "required" => Ok(ToolChoice::Required),
                other => Err(D::Error::custom(format!("unknown tool_choice {other:?}"))),
            },
            ToolChoiceWire::Named(named) if named.kind == "function" => {
                Ok(ToolChoice::Function(named.function.name))
            }
            ToolChoiceWire::Named(named) => Err(D::Error::custom(format!(
                "unsupported tool_choice type {:?}",
                named.kind
            ))),
        }
    }
}

/// A tool call the model made, serialised as
/// `{"id","type":"function","function":{"name","arguments"}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The call's id, echoed by the [`Message::Tool`] that answers it.
    pub id: String,
    /// The function name.
    pub name: String,
    /// The arguments as the raw JSON text the model produced. Not validated here: the caller
    /// parses and checks it against the tool's schema.
    pub arguments: String,
}

#[derive(Serialize, Deserialize)]
struct FunctionCallWire {
    #[serde(default)]
    name: String,
    /// A string on the wire; some servers send an object instead, kept as its JSON text.
    #[serde(default)]
    arguments: Value,
}

#[derive(Serialize, Deserialize)]
struct ToolCallWire {
    #[serde(default)]
    id: String,
    #[serde(rename = "type", default = "function_kind")]
    kind: String,
    function: FunctionCallWire,
}

fn function_kind() -> String {
    "function".to_owned()
}

/// The raw JSON text of a tool call's `arguments`, whichever form the server used.
pub(crate) fn arguments_text(arguments: Value) -> String {
    match arguments {
        Value::String(text) => text,
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ToolCallWire {
            id: self.id.clone(),
            kind: function_kind(),
            function: FunctionCallWire {
                name: self.name.clone(),
                arguments: Value::String(self.arguments.clone()),
            },
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ToolCall {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = ToolCallWire::deserialize(deserializer)?;
        if wire.kind != "function" {
            return Err(D::Error::custom(format!(
                "unsupported tool call type {:?} (only \"function\")",
                wire.kind
            )));
        }
        Ok(ToolCall {
            id: wire.id,
            name: wire.function.name,
            arguments: arguments_text(wire.function.arguments),
        })
    }
}

/// One chat-completion call: the conversation so far and the tools on offer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// The tools the model may call (the `tools` field is omitted when empty).
    pub tools: Vec<ToolSpec>,
    /// The tool choice; only sent when `tools` is not empty.
    pub tool_choice: Option<ToolChoice>,
    /// The answer's token cap; the configuration's `max_tokens` when `None`.
    pub max_tokens: Option<u32>,
}

/// Token counts the provider reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the prompt.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Tokens of the answer.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Their sum, as reported.
    #[serde(default)]
    pub total_tokens: u64,
}

/// The model's whole answer to one call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Completion {
    /// The text (empty when the model only called tools). A refusal is reported here too.
    pub content: String,
    /// The tool calls in the order the model made them.
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped (`stop`, `tool_calls`, `length`, …), if the server said.
    pub finish_reason: Option<String>,
    /// Token counts, if the server reported them.
    pub usage: Option<Usage>,
    /// How many HTTP attempts the call took (1 when the first one succeeded).
    pub attempts: u32,
}

impl Completion {
    /// The assistant message that records this answer in the conversation.
    pub fn to_message(&self) -> Message {
        Message::Assistant {
            content: if self.content.is_empty() {
                None
            } else {
                Some(self.content.clone())
            },
            tool_calls: self.tool_calls.clone(),
        }
    }
}

/// What the client reports while a call is running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// A piece of the answer's text.
    TextDelta(String),
    /// A piece of a tool call. `id` and `name` come once, usually with the first piece;
    /// `arguments_delta` is the next piece of the arguments' JSON text.
    ToolCallDelta {
        /// Which tool call of the turn this piece belongs to, as the server numbered it.
        index: usize,
        /// The call's id, when this piece carries it.
        id: Option<String>,
        /// The function name, when this piece carries it.
        name: Option<String>,
        /// The next piece of the arguments text (may be empty).
        arguments_delta: String,
    },
    /// An attempt failed in a way that is retried; the client now waits `delay`.
    Retrying {
        /// The number of the attempt that follows the wait (2 for the first retry).
        attempt: u32,
        /// How long the client waits first.
        delay: Duration,
        /// The failed attempt's reason code (as [`crate::ModelError::reason`]).
        reason: String,
        /// The failed attempt's one-line message.
        detail: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn messages_match_the_wire_format() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "phone_ui_tap".into(),
            arguments: "{\"x\":1}".into(),
        };
        let messages = vec![
            Message::system("be brief"),
            Message::user("hi"),
            Message::user_parts(vec![
                ContentPart::text("what is this?"),
                ContentPart::image_data("image/png", b"\x89PNG"),
            ]),
            Message::Assistant {
                content: None,
                tool_calls: vec![call],
            },
            Message::assistant("done"),
            Message::tool("call_1", "{\"ok\":true}"),
        ];
        let wire = serde_json::to_value(&messages).unwrap();
        assert_eq!(
            wire,
            json!([
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {"role": "user", "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}
                ]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "phone_ui_tap", "arguments": "{\"x\":1}"}}
                ]},
                {"role": "assistant", "content": "done"},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"ok\":true}"}
            ])
        );
        let back: Vec<Message> = serde_json::from_value(wire).unwrap();
        assert_eq!(back, messages);
    }

    #[test]
    fn tools_and_choices_match_the_wire_format() {
        let spec = ToolSpec {
            name: "get_time".into(),
            description: "the time".into(),
            parameters: json!({"type": "object", "properties": {}}),
        };
        let wire = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            wire,
            json!({"type": "function", "function": {
                "name": "get_time", "description": "the time",
                "parameters": {"type": "object", "properties": {}}}})
        );
        assert_eq!(serde_json::from_value::<ToolSpec>(wire).unwrap(), spec);

        for (choice, expected) in [
            (ToolChoice::Auto, json!("auto")),
            (ToolChoice::None, json!("none")),
            (ToolChoice::Required, json!("required")),
            (
                ToolChoice::Function("get_time".into()),
                json!({"type": "function", "function": {"name": "get_time"}}),
            ),
        ] {
            let wire = serde_json::to_value(&choice).unwrap();
            assert_eq!(wire, expected);
            assert_eq!(serde_json::from_value::<ToolChoice>(wire).unwrap(), choice);
        }
        assert!(serde_json::from_value::<ToolChoice>(json!("sometimes")).is_err());
        assert!(
            serde_json::from_value::<ToolSpec>(
                json!({"type": "retrieval", "function": {"name": "x"}})
            )
            .is_err()
        );
    }

    #[test]
    fn tool_call_arguments_sent_as_an_object_are_kept_as_text() {
        let call: ToolCall = serde_json::from_value(json!({
            "id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}
        }))
        .unwrap();
        assert_eq!(call.arguments, "{\"a\":1}");
    }

    #[test]
    fn a_completion_becomes_the_assistant_message() {
        let completion = Completion {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "a".into(),
                name: "b".into(),
                arguments: "{}".into(),
            }],
            ..Completion::default()
        };
        assert_eq!(
            completion.to_message(),
            Message::Assistant {
                content: None,
                tool_calls: completion.tool_calls.clone()
            }
        );
        assert!(Message::user_parts(vec![ContentPart::image_data("image/png", b"")]).has_images());
        assert!(!Message::user("x").has_images());
    }
}
