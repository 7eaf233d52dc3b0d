//! JSON-RPC 2.0 framing: responses, errors with a catalogue code in `error.data.code`.

use serde_json::{Map, Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const APPLICATION_ERROR: i64 = -32000;

/// A JSON-RPC error: numeric code, message, and the stable string code (plus extra data).
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data_code: String,
    pub extra: Map<String, Value>,
}

impl RpcError {
    pub fn new(code: i64, data_code: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data_code: data_code.to_owned(),
            extra: Map::new(),
        }
    }

    pub fn parse(message: impl Into<String>) -> Self {
        Self::new(PARSE_ERROR, "parse_error", message)
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, "invalid_request", message)
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            METHOD_NOT_FOUND,
            "method_not_found",
            format!("no method {method:?} on this endpoint"),
        )
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, "invalid_params", message)
    }

    /// An application error with a catalogue code.
    pub fn app(data_code: &str, message: impl Into<String>) -> Self {
        Self::new(APPLICATION_ERROR, data_code, message)
    }

    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_owned(), value);
        self
    }

    pub fn to_json(&self, id: &Value) -> Value {
        let mut data = self.extra.clone();
        data.insert("code".into(), Value::String(self.data_code.clone()));
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": self.code, "message": self.message, "data": data},
        })
    }
}

pub fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A parsed request frame.
#[derive(Debug, Clone)]
pub struct Request {
    pub id: Value,
    pub method: String,
    pub params: Value,
}

/// Parses one text frame. On failure returns the error and the id to answer with.
pub fn parse_request(text: &str) -> Result<Request, (Value, RpcError)> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| (Value::Null, RpcError::parse(format!("not JSON: {e}"))))?;
    let Value::Object(mut obj) = value else {
        return Err((
            Value::Null,
            RpcError::invalid_request(
                "a request must be a JSON object (batches are not supported)",
            ),
        ));
    };
    let id = obj.remove("id").unwrap_or(Value::Null);
    let id_ok = match &id {
        Value::String(_) => true,
        Value::Number(n) => n.is_i64() || n.is_u64(),
        Value::Null | Value::Bool(_) | Value::Array(_) | Value::Object(_) => false,
    };
    if !id_ok {
        return Err((
            Value::Null,
            RpcError::invalid_request("`id` must be a string or an integer"),
        ));
    }
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((id, RpcError::invalid_request("`jsonrpc` must be \"2.0\"")));
    }
    let Some(method) = obj.get("method").and_then(Value::as_str).map(str::to_owned) else {
        return Err((id, RpcError::invalid_request("`method` must be a string")));
    };
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(p @ Value::Object(_)) => p,
        Some(_) => {
            return Err((id, RpcError::invalid_params("`params` must be an object")));
        }
    };
    Ok(Request { id, method, params })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn parses_and_refuses() {
        let r = parse_request(r#"{"jsonrpc":"2.0","id":1,"method":"x"}"#).unwrap();
        assert_eq!((r.id, r.method.as_str()), (json!(1), "x"));
        assert_eq!(parse_request("{").unwrap_err().1.code, PARSE_ERROR);
        assert_eq!(parse_request("[1]").unwrap_err().1.code, INVALID_REQUEST);
        let (id, e) = parse_request(r#"{"jsonrpc":"1.0","id":"a","method":"x"}"#).unwrap_err();
        assert_eq!((id, e.code), (json!("a"), INVALID_REQUEST));
        let (_, e) =
            parse_request(r#"{"jsonrpc":"2.0","id":2,"method":"x","params":[1]}"#).unwrap_err();
        assert_eq!(e.code, INVALID_PARAMS);
        let e = RpcError::app("forbidden", "no").to_json(&json!(3));
        assert_eq!(e["error"]["data"]["code"], "forbidden");
    }
}
