//! JSON-RPC 2.0 framing of the endpoint: one message per WebSocket text frame.
//!
//! - A request is `{"jsonrpc":"2.0","id":<string|integer>,"method":…,"params":{…}}`
//!   ([`Request`]); `params` must be an object (absent or `null` means `{}`); batches are not
//!   supported, and no object may hold a key twice. [`parse_request`] checks a frame exactly
//!   as the daemon does.
//! - A success is `{"jsonrpc":"2.0","id":…,"result":…}` ([`Response`]); a failure is
//!   `{"jsonrpc":"2.0","id":…|null,"error":{"code":<int>,"message":…,"data":{"code":…}}}`
//!   ([`ErrorResponse`], [`ErrorObject`]), with the stable string code in `error.data.code`.
//! - A notification is `{"jsonrpc":"2.0","method":"event","params":{"event":…,"payload":…,
//!   "seq":<n>}}` ([`EventNotification`]); `seq` counts the notifications of one connection
//!   from 1.
//!
//! A client reads any frame from the daemon as a [`ServerMessage`].

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::error::EndpointErrorCode;
use super::events::Event;
use super::{Method, MethodName};
use crate::canonical::{CanonicalError, StrictValue, classify, duplicate_key_error};
use crate::version::VersionAdvertisement;

pub use super::error::{
    APPLICATION_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
};

/// Declares a unit type that stands for one fixed string on the wire.
macro_rules! fixed_string {
    ($(#[$doc:meta])* $name:ident = $wire:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub struct $name;

        impl $name {
            /// The wire string.
            pub const WIRE: &'static str = $wire;
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($wire)
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                crate::string_enum([$wire])
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                if text == $wire {
                    Ok($name)
                } else {
                    Err(de::Error::custom(format!(
                        "expected {:?}, found {text:?}",
                        $wire
                    )))
                }
            }
        }
    };
}

fixed_string!(
    /// The `"jsonrpc": "2.0"` member of every frame.
    JsonRpcVersion = "2.0"
);

fixed_string!(
    /// The `"method": "event"` member of an event notification.
    EventMethodName = "event"
);

/// A request id: a string or an integer (any JSON integer from `-2^63` to `2^64 - 1`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestId {
    /// A string id.
    String(String),
    /// An integer id.
    Integer(i128),
}

impl RequestId {
    /// The id of a JSON value, if it is a string or an integer.
    pub fn from_value(value: &Value) -> Option<RequestId> {
        match value {
            Value::String(s) => Some(RequestId::String(s.clone())),
            Value::Number(n) => n
                .as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from))
                .map(RequestId::Integer),
            Value::Null | Value::Bool(_) | Value::Array(_) | Value::Object(_) => None,
        }
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::String(s) => write!(f, "{s:?}"),
            RequestId::Integer(n) => write!(f, "{n}"),
        }
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        RequestId::String(s.to_owned())
    }
}

impl From<String> for RequestId {
    fn from(s: String) -> Self {
        RequestId::String(s)
    }
}

macro_rules! integer_ids {
    ($($t:ty),*) => {
        $(impl From<$t> for RequestId {
            fn from(n: $t) -> Self {
                RequestId::Integer(i128::from(n))
            }
        })*
    };
}
integer_ids!(i32, i64, u32, u64);

impl schemars::JsonSchema for RequestId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("RequestId")
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": ["string", "integer"] })
    }
}

impl Serialize for RequestId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RequestId::String(text) => s.serialize_str(text),
            RequestId::Integer(n) => {
                if let Ok(small) = i64::try_from(*n) {
                    s.serialize_i64(small)
                } else if let Ok(big) = u64::try_from(*n) {
                    s.serialize_u64(big)
                } else {
                    Err(serde::ser::Error::custom(format!(
                        "request id {n} is outside the JSON integer range"
                    )))
                }
            }
        }
    }
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct IdVisitor;

        impl Visitor<'_> for IdVisitor {
            type Value = RequestId;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an integer")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<RequestId, E> {
                Ok(RequestId::String(v.to_owned()))
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<RequestId, E> {
                Ok(RequestId::String(v))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RequestId, E> {
                Ok(RequestId::Integer(i128::from(v)))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RequestId, E> {
                Ok(RequestId::Integer(i128::from(v)))
            }
        }

        d.deserialize_any(IdVisitor)
    }
}

/// A request frame. `P` is the params type: a method's [`Method::Params`], or the raw object
/// ([`Map`], the default) before dispatch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Request<P = Map<String, Value>> {
    pub jsonrpc: JsonRpcVersion,
    pub id: RequestId,
    pub method: String,
    pub params: P,
}

impl<P> Request<P> {
    /// A request for method `M`.
    pub fn new<M: Method<Params = P>>(id: impl Into<RequestId>, params: P) -> Self {
        Request {
            jsonrpc: JsonRpcVersion,
            id: id.into(),
            method: M::NAME.to_owned(),
            params,
        }
    }
}

impl Request {
    /// The method, if the endpoint has it.
    pub fn method_name(&self) -> Option<MethodName> {
        MethodName::parse(&self.method)
    }

    /// The params as method `M`'s params type; on failure the `invalid_params` error the
    /// daemon answers with (`"<method>: <serde error>"`).
    pub fn params_as<M: Method>(&self) -> Result<M::Params, ErrorObject> {
        serde_json::from_value(Value::Object(self.params.clone()))
            .map_err(|e| ErrorObject::invalid_params(format!("{}: {e}", M::NAME)))
    }
}

/// A success frame. `R` is the result type: a method's [`Method::Result`], or the raw value
/// (the default) before the caller knows which method it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Response<R = Value> {
    pub jsonrpc: JsonRpcVersion,
    pub id: RequestId,
    pub result: R,
}

impl<R> Response<R> {
    /// A success answering `id`.
    pub fn new(id: RequestId, result: R) -> Self {
        Response {
            jsonrpc: JsonRpcVersion,
            id,
            result,
        }
    }
}

impl Response {
    /// The result as method `M`'s result type.
    pub fn result_as<M: Method>(&self) -> Result<M::Result, serde_json::Error> {
        M::Result::deserialize(&self.result)
    }
}

/// `error.data`: the stable string code, plus the extra members some errors carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorData {
    pub code: EndpointErrorCode,
    /// With `rate_limited`: when to try again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// With `unsupported_version`: the daemon's supported range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_protocol: Option<Box<VersionAdvertisement>>,
}

/// The `error` member of a failure frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorObject {
    /// The JSON-RPC code ([`PARSE_ERROR`], …, [`APPLICATION_ERROR`]).
    pub code: i64,
    pub message: String,
    pub data: ErrorData,
}

impl ErrorObject {
    /// An error with `code`, and the JSON-RPC code the endpoint gives it
    /// ([`EndpointErrorCode::rpc_code`]).
    pub fn new(code: impl Into<EndpointErrorCode>, message: impl Into<String>) -> Self {
        let code = code.into();
        ErrorObject {
            code: code.rpc_code(),
            message: message.into(),
            data: ErrorData {
                code,
                retry_after_ms: None,
                runtime_protocol: None,
            },
        }
    }

    /// `parse_error`: the frame is not JSON.
    pub fn parse_error(message: impl Into<String>) -> Self {
        ErrorObject::new(EndpointErrorCode::ParseError, message)
    }

    /// `invalid_request`: not a request object, or not allowed now.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        ErrorObject::new(EndpointErrorCode::InvalidRequest, message)
    }

    /// `method_not_found`, naming the method.
    pub fn method_not_found(method: &str) -> Self {
        ErrorObject::new(
            EndpointErrorCode::MethodNotFound,
            format!("no method {method:?} on this endpoint"),
        )
    }

    /// `invalid_params`: params of the wrong shape.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        ErrorObject::new(crate::ErrorCode::InvalidParams, message)
    }

    /// Adds `data.retry_after_ms`.
    pub fn with_retry_after_ms(mut self, ms: u64) -> Self {
        self.data.retry_after_ms = Some(ms);
        self
    }

    /// Adds `data.runtime_protocol`.
    pub fn with_runtime_protocol(mut self, advertisement: VersionAdvertisement) -> Self {
        self.data.runtime_protocol = Some(Box::new(advertisement));
        self
    }

    /// The failure frame answering `id` (`None`: the request's id is unknown, sent as `null`).
    pub fn into_response(self, id: Option<RequestId>) -> ErrorResponse {
        ErrorResponse {
            jsonrpc: JsonRpcVersion,
            id,
            error: self,
        }
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.data.code, self.message)
    }
}

impl std::error::Error for ErrorObject {}

/// A failure frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ErrorResponse {
    pub jsonrpc: JsonRpcVersion,
    /// The request's id; `null` when the frame could not be read far enough to know it.
    pub id: Option<RequestId>,
    pub error: ErrorObject,
}

/// `params` of an event notification: the event (its name and payload) and its sequence
/// number on the connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EventParams {
    #[serde(flatten)]
    pub event: Event,
    pub seq: u64,
}

/// An event notification pushed by the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EventNotification {
    pub jsonrpc: JsonRpcVersion,
    pub method: EventMethodName,
    pub params: EventParams,
}

impl EventNotification {
    /// The notification carrying `event` as the connection's `seq`-th.
    pub fn new(event: Event, seq: u64) -> Self {
        EventNotification {
            jsonrpc: JsonRpcVersion,
            method: EventMethodName,
            params: EventParams { event, seq },
        }
    }
}

/// Any frame the daemon sends: a success, a failure or an event notification (boxed: the
/// largest payloads are events).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ServerMessage {
    Response(Response),
    Error(ErrorResponse),
    Event(Box<EventNotification>),
}

impl ServerMessage {
    /// Reads one text frame.
    pub fn parse(text: &str) -> Result<ServerMessage, serde_json::Error> {
        serde_json::from_str(text)
    }
}

impl<'de> Deserialize<'de> for ServerMessage {
    /// Chooses the variant by its members (`method` → event, `error` → failure, else
    /// success), so a malformed frame is reported against the shape it claims to have.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        let frame = value
            .as_object()
            .ok_or_else(|| de::Error::custom("a frame must be a JSON object"))?;
        let message = if frame.contains_key("method") {
            from_frame(value).map(|event| ServerMessage::Event(Box::new(event)))
        } else if frame.contains_key("error") {
            from_frame(value).map(ServerMessage::Error)
        } else {
            from_frame(value).map(ServerMessage::Response)
        };
        message.map_err(de::Error::custom)
    }
}

fn from_frame<T: DeserializeOwned>(value: Value) -> Result<T, serde_json::Error> {
    serde_json::from_value(value)
}

/// A request frame the daemon refuses before dispatch: the error and the id to answer with.
#[derive(Debug, Clone, PartialEq)]
pub struct RejectedRequest {
    /// `None` when the frame has no usable id (answered with `"id": null`).
    pub id: Option<RequestId>,
    pub error: ErrorObject,
}

impl RejectedRequest {
    /// The failure frame to send.
    pub fn into_response(self) -> ErrorResponse {
        self.error.into_response(self.id)
    }
}

/// Checks one text frame as the daemon does, in this order: JSON (`parse_error`), no key twice
/// in any object (`invalid_params` when the repeated key is inside `params`, else
/// `invalid_request`; the message names the key — `runtime-protocol.md` §17 refuses
/// duplicate keys, and "last one wins" would let two readers of one frame see different
/// requests), an object (`invalid_request`), a string or integer `id` (`invalid_request`),
/// `"jsonrpc": "2.0"`, a string `method` (both `invalid_request`, answered with the id), and
/// `params` an object (`invalid_params`; absent or `null` becomes `{}`). Other members are
/// ignored.
pub fn parse_request(text: &str) -> Result<Request, RejectedRequest> {
    // One strict pass; the member whose value was being read when it failed says where a
    // repeated key sits.
    let member = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let strict = FrameSeed { member: &member }
        .deserialize(&mut de)
        .and_then(|frame| de.end().map(|()| frame));
    match strict {
        Ok(frame) => check_frame(frame),
        Err(e) => match classify(&e) {
            CanonicalError::DuplicateKey { key } => {
                Err(duplicate_key(text, &key, member.into_inner().as_deref()))
            }
            // Not JSON, or not an object: refused as before, with the same messages.
            _ => lenient(text),
        },
    }
}

/// The frame as plain JSON (a repeated key would have been refused already): used only to
/// word the refusal of a frame the strict pass refused.
fn lenient(text: &str) -> Result<Request, RejectedRequest> {
    let value: Value = serde_json::from_str(text).map_err(|e| RejectedRequest {
        id: None,
        error: ErrorObject::parse_error(format!("not JSON: {e}")),
    })?;
    let Value::Object(frame) = value else {
        return Err(RejectedRequest {
            id: None,
            error: ErrorObject::invalid_request(
                "a request must be a JSON object (batches are not supported)",
            ),
        });
    };
    check_frame(frame)
}

/// The refusal of a frame that holds `key` twice in one object, inside the top-level member
/// `member` (`None`: the frame's own members). Answered with the frame's id unless the id
/// itself is the repeated member.
fn duplicate_key(text: &str, key: &str, member: Option<&str>) -> RejectedRequest {
    // The strict pass stops at the repeated key: text that is not JSON further on is a
    // `parse_error` first.
    let frame = match serde_json::from_str::<Value>(text) {
        Ok(frame) => frame,
        Err(e) => {
            return RejectedRequest {
                id: None,
                error: ErrorObject::parse_error(format!("not JSON: {e}")),
            };
        }
    };
    let id = if member.is_none() && key == "id" {
        None
    } else {
        frame.get("id").and_then(RequestId::from_value)
    };
    let error = match member {
        Some("params") => ErrorObject::invalid_params(format!(
            "`params` holds the key {key:?} more than once; duplicate keys are refused"
        )),
        Some(member) => ErrorObject::invalid_request(format!(
            "the member {member:?} holds the key {key:?} more than once; duplicate keys are \
             refused"
        )),
        None => ErrorObject::invalid_request(format!(
            "the request holds the member {key:?} more than once; duplicate keys are refused"
        )),
    };
    RejectedRequest { id, error }
}

/// Reads a frame's top-level object, each member's value strictly ([`StrictValue`]: no key
/// twice in any object), remembering in `member` which member was being read.
struct FrameSeed<'a> {
    member: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for FrameSeed<'_> {
    type Value = Map<String, Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FrameSeed<'_> {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC request object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut frame = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if frame.contains_key(&key) {
                return Err(duplicate_key_error(&key));
            }
            *self.member.borrow_mut() = Some(key.clone());
            let value = map.next_value_seed(StrictValue)?;
            *self.member.borrow_mut() = None;
            frame.insert(key, value);
        }
        Ok(frame)
    }
}

/// The checks after the frame is known to be an object: `id`, `jsonrpc`, `method`, `params`.
fn check_frame(mut frame: Map<String, Value>) -> Result<Request, RejectedRequest> {
    let refuse = |id: Option<RequestId>, error: ErrorObject| RejectedRequest { id, error };
    let id = frame
        .remove("id")
        .as_ref()
        .and_then(RequestId::from_value)
        .ok_or_else(|| {
            refuse(
                None,
                ErrorObject::invalid_request("`id` must be a string or an integer"),
            )
        })?;
    if frame.get("jsonrpc").and_then(Value::as_str) != Some(JsonRpcVersion::WIRE) {
        return Err(refuse(
            Some(id),
            ErrorObject::invalid_request("`jsonrpc` must be \"2.0\""),
        ));
    }
    let Some(method) = frame
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return Err(refuse(
            Some(id),
            ErrorObject::invalid_request("`method` must be a string"),
        ));
    };
    let params = match frame.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => {
            return Err(refuse(
                Some(id),
                ErrorObject::invalid_params("`params` must be an object"),
            ));
        }
    };
    Ok(Request {
        jsonrpc: JsonRpcVersion,
        id,
        method,
        params,
    })
}
