//! The closed set of `error.data.code` values the endpoint answers with.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error_code::ErrorCode;

/// `error.code` of a frame that is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// `error.code` of a frame that is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// `error.code` of an unknown method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// `error.code` of params of the wrong shape (and of unknown event names).
pub const INVALID_PARAMS: i64 = -32602;
/// `error.code` of every application error.
pub const APPLICATION_ERROR: i64 = -32000;

/// An `error.data.code`: one of the endpoint's own codes, or a code of the tool-result
/// catalogue ([`ErrorCode`]) when the failure is one of those (`invalid_params`,
/// `rate_limited`, `unsupported_version`, `pending_confirmation_not_found`, `tool_error`, the
/// attention and session codes, …). Both travel as their plain string; a string in neither set
/// is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EndpointErrorCode {
    /// The frame is not JSON.
    ParseError,
    /// Not a request object, bad `jsonrpc` / `id` / `method`, a binary frame, a second `hello`.
    InvalidRequest,
    /// No such method.
    MethodNotFound,
    /// Another method before `hello` on an authenticated connection.
    HelloRequired,
    /// No token, or an unknown one (the connection is closed).
    Unauthorized,
    /// The caller's role may not do this.
    Forbidden,
    /// No such record visible to the caller.
    NotFound,
    /// A catalogue code.
    Catalogue(ErrorCode),
}

/// A string that is neither an endpoint code nor a catalogue code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown endpoint error code {0:?}")]
pub struct UnknownEndpointErrorCode(pub String);

impl EndpointErrorCode {
    /// The endpoint's own codes (without the catalogue's), in declaration order.
    pub const OWN: [EndpointErrorCode; 7] = [
        EndpointErrorCode::ParseError,
        EndpointErrorCode::InvalidRequest,
        EndpointErrorCode::MethodNotFound,
        EndpointErrorCode::HelloRequired,
        EndpointErrorCode::Unauthorized,
        EndpointErrorCode::Forbidden,
        EndpointErrorCode::NotFound,
    ];

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            EndpointErrorCode::ParseError => "parse_error",
            EndpointErrorCode::InvalidRequest => "invalid_request",
            EndpointErrorCode::MethodNotFound => "method_not_found",
            EndpointErrorCode::HelloRequired => "hello_required",
            EndpointErrorCode::Unauthorized => "unauthorized",
            EndpointErrorCode::Forbidden => "forbidden",
            EndpointErrorCode::NotFound => "not_found",
            EndpointErrorCode::Catalogue(code) => code.as_str(),
        }
    }

    /// The JSON-RPC `error.code` the endpoint answers this code with: `parse_error` -32700,
    /// `invalid_request` -32600, `method_not_found` -32601, `invalid_params` and
    /// `event_unsupported` -32602, every other code -32000 (an application error).
    pub fn rpc_code(self) -> i64 {
        match self {
            EndpointErrorCode::ParseError => PARSE_ERROR,
            EndpointErrorCode::InvalidRequest => INVALID_REQUEST,
            EndpointErrorCode::MethodNotFound => METHOD_NOT_FOUND,
            EndpointErrorCode::Catalogue(
                ErrorCode::InvalidParams | ErrorCode::EventUnsupported,
            ) => INVALID_PARAMS,
            EndpointErrorCode::HelloRequired
            | EndpointErrorCode::Unauthorized
            | EndpointErrorCode::Forbidden
            | EndpointErrorCode::NotFound
            | EndpointErrorCode::Catalogue(_) => APPLICATION_ERROR,
        }
    }

    /// The catalogue code, when it is one.
    pub fn catalogue(self) -> Option<ErrorCode> {
        match self {
            EndpointErrorCode::Catalogue(code) => Some(code),
            EndpointErrorCode::ParseError
            | EndpointErrorCode::InvalidRequest
            | EndpointErrorCode::MethodNotFound
            | EndpointErrorCode::HelloRequired
            | EndpointErrorCode::Unauthorized
            | EndpointErrorCode::Forbidden
            | EndpointErrorCode::NotFound => None,
        }
    }
}

impl From<ErrorCode> for EndpointErrorCode {
    fn from(code: ErrorCode) -> Self {
        EndpointErrorCode::Catalogue(code)
    }
}

impl FromStr for EndpointErrorCode {
    type Err = UnknownEndpointErrorCode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(code) = EndpointErrorCode::OWN.into_iter().find(|c| c.as_str() == s) {
            return Ok(code);
        }
        s.parse::<ErrorCode>()
            .map(EndpointErrorCode::Catalogue)
            .map_err(|_| UnknownEndpointErrorCode(s.to_owned()))
    }
}

impl fmt::Display for EndpointErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl schemars::JsonSchema for EndpointErrorCode {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("EndpointErrorCode")
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::string_enum(
            EndpointErrorCode::OWN
                .iter()
                .map(|c| c.as_str())
                .chain(ErrorCode::ALL.iter().map(|c| c.as_str())),
        )
    }
}

impl Serialize for EndpointErrorCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for EndpointErrorCode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_codes_never_shadow_the_catalogue() {
        for code in EndpointErrorCode::OWN {
            let wire = code.as_str();
            assert!(
                wire.parse::<ErrorCode>().is_err(),
                "{wire} is a catalogue code"
            );
            assert_eq!(code.catalogue(), None);
        }
    }

    #[test]
    fn every_code_round_trips_through_its_string() {
        let catalogue = ErrorCode::ALL.iter().map(|c| EndpointErrorCode::from(*c));
        for code in EndpointErrorCode::OWN.into_iter().chain(catalogue) {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            let back: EndpointErrorCode = serde_json::from_str(&json).unwrap();
            assert_eq!(back, code);
        }
        assert!(serde_json::from_str::<EndpointErrorCode>("\"no_such_code\"").is_err());
    }

    #[test]
    fn rpc_codes_follow_the_endpoint_table() {
        let table = [
            ("parse_error", -32700),
            ("invalid_request", -32600),
            ("method_not_found", -32601),
            ("invalid_params", -32602),
            ("event_unsupported", -32602),
            ("unauthorized", -32000),
            ("hello_required", -32000),
            ("unsupported_version", -32000),
            ("forbidden", -32000),
            ("rate_limited", -32000),
            ("pending_confirmation_not_found", -32000),
            ("not_found", -32000),
            ("tool_error", -32000),
        ];
        for (wire, rpc) in table {
            let code: EndpointErrorCode = wire.parse().unwrap();
            assert_eq!(code.rpc_code(), rpc, "{wire}");
        }
    }
}
