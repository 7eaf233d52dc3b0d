//! JSON-RPC framing: requests are checked as the daemon checks them, answers and events have
//! today's shapes, and a client reads every frame the daemon sends.

use openphone_protocol::endpoint::*;
use openphone_protocol::{ErrorCode, ToolResult, VersionAdvertisement};
use pretty_assertions::assert_eq;
use serde_json::{Map, json};

#[test]
fn requests_are_checked_in_the_daemons_order_with_its_messages() {
    let r = parse_request(r#"{"jsonrpc":"2.0","id":1,"method":"x"}"#).unwrap();
    assert_eq!(
        (r.id, r.method.as_str(), r.params),
        (RequestId::Integer(1), "x", Map::new())
    );
    let r = parse_request(r#"{"jsonrpc":"2.0","id":"a","method":"x","params":null}"#).unwrap();
    assert_eq!(r.id, RequestId::from("a"));
    let big = parse_request(r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"x"}"#).unwrap();
    assert_eq!(
        serde_json::to_string(&big.id).unwrap(),
        "18446744073709551615"
    );

    let cases = [
        ("{", None, PARSE_ERROR, "parse_error", None),
        (
            "[1]",
            None,
            INVALID_REQUEST,
            "invalid_request",
            Some("a request must be a JSON object (batches are not supported)"),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"x"}"#,
            None,
            INVALID_REQUEST,
            "invalid_request",
            Some("`id` must be a string or an integer"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            None,
            INVALID_REQUEST,
            "invalid_request",
            Some("`id` must be a string or an integer"),
        ),
        (
            r#"{"jsonrpc":"1.0","id":"a","method":"x"}"#,
            Some(RequestId::from("a")),
            INVALID_REQUEST,
            "invalid_request",
            Some("`jsonrpc` must be \"2.0\""),
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":3}"#,
            Some(RequestId::from(2u64)),
            INVALID_REQUEST,
            "invalid_request",
            Some("`method` must be a string"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"x","params":[1]}"#,
            Some(RequestId::from(2u64)),
            INVALID_PARAMS,
            "invalid_params",
            Some("`params` must be an object"),
        ),
    ];
    for (frame, id, rpc, code, message) in cases {
        let rejected = parse_request(frame).unwrap_err();
        assert_eq!(rejected.id, id, "{frame}");
        assert_eq!(rejected.error.code, rpc, "{frame}");
        assert_eq!(rejected.error.data.code.as_str(), code, "{frame}");
        if let Some(message) = message {
            assert_eq!(rejected.error.message, message, "{frame}");
        }
    }
    let not_json = parse_request("{").unwrap_err();
    assert!(not_json.error.message.starts_with("not JSON: "));
    assert_eq!(
        serde_json::to_value(not_json.into_response()).unwrap()["id"],
        json!(null)
    );
}

#[test]
fn error_frames_have_the_daemons_shape() {
    let e = ErrorObject::new(ErrorCode::RateLimited, "too many requests; slow down")
        .with_retry_after_ms(50)
        .into_response(Some(RequestId::from(7u64)));
    assert_eq!(
        serde_json::to_value(&e).unwrap(),
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32000,
            "message": "too many requests; slow down",
            "data": {"code": "rate_limited", "retry_after_ms": 50}}})
    );
    let e = ErrorObject::new(ErrorCode::UnsupportedVersion, "no common protocol version")
        .with_runtime_protocol(VersionAdvertisement::current())
        .into_response(Some(RequestId::from("h")));
    assert_eq!(
        serde_json::to_value(&e).unwrap()["error"]["data"],
        json!({"code": "unsupported_version", "runtime_protocol":
            {"name": "openphone-runtime-protocol", "min_version": 1, "max_version": 1}})
    );
    let e = ErrorObject::method_not_found("tools.lst");
    assert_eq!(e.message, "no method \"tools.lst\" on this endpoint");
    assert_eq!(
        (e.code, e.data.code),
        (METHOD_NOT_FOUND, EndpointErrorCode::MethodNotFound)
    );
    let e = ErrorObject::new(ErrorCode::EventUnsupported, "x");
    assert_eq!(e.code, INVALID_PARAMS);
    let e = ErrorObject::new(EndpointErrorCode::Forbidden, "no");
    assert_eq!(e.to_string(), "forbidden: no");
    assert_eq!(e.code, APPLICATION_ERROR);
}

#[test]
fn typed_requests_and_params() {
    let request = Request::new::<ToolsInvoke>(
        3u64,
        ToolsInvokeParams {
            request_id: "req-42".into(),
            tool: "openphone.ui.tap".into(),
            ..ToolsInvokeParams::default()
        },
    );
    let frame = serde_json::to_string(&request).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&frame).unwrap(),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools.invoke",
               "params": {"request_id": "req-42", "tool": "openphone.ui.tap"}})
    );
    let raw = parse_request(&frame).unwrap();
    assert_eq!(raw.method_name(), Some(MethodName::ToolsInvoke));
    assert_eq!(raw.params_as::<ToolsInvoke>().unwrap(), request.params);
    let bad = parse_request(
        r#"{"jsonrpc":"2.0","id":1,"method":"sessions.get","params":{"phone_session":"p"}}"#,
    )
    .unwrap();
    let e = bad.params_as::<SessionsGet>().unwrap_err();
    assert_eq!(e.data.code.as_str(), "invalid_params");
    assert!(
        e.message
            .starts_with("sessions.get: unknown field `phone_session`"),
        "{e}"
    );
}

#[test]
fn a_client_reads_every_kind_of_frame() {
    let ok = ServerMessage::parse(
        r#"{"jsonrpc":"2.0","id":2,"result":{"subscribed":["runtime.tool.result"]}}"#,
    )
    .unwrap();
    let ServerMessage::Response(response) = ok else {
        panic!("{ok:?}");
    };
    assert_eq!(response.id, RequestId::from(2u64));
    let result = response.result_as::<EventsSubscribe>().unwrap();
    assert_eq!(result.subscribed, ["runtime.tool.result"]);
    assert!(response.result_as::<ToolsList>().is_err());

    let err = ServerMessage::parse(
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"not JSON","data":{"code":"parse_error"}}}"#,
    )
    .unwrap();
    let ServerMessage::Error(err) = err else {
        panic!("{err:?}");
    };
    assert_eq!(err.id, None);
    assert_eq!(err.error.data.code, EndpointErrorCode::ParseError);

    let event = EventNotification::new(
        Event::ToolResult(ToolResult::ok("hermes", "r", Map::new())),
        3,
    );
    let text = serde_json::to_string(&event).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).unwrap(),
        json!({"jsonrpc": "2.0", "method": "event", "params": {"event": "runtime.tool.result",
            "payload": {"request_id": "r", "status": "ok", "requires_confirmation": false,
                        "result": {}, "audit_id": "runtime:hermes:r"}, "seq": 3}})
    );
    assert_eq!(
        ServerMessage::parse(&text).unwrap(),
        ServerMessage::Event(Box::new(event))
    );

    // A frame claiming to be an error but malformed is reported as such.
    let e =
        ServerMessage::parse(r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000}}"#).unwrap_err();
    assert!(e.to_string().contains("message"), "{e}");
    assert!(
        ServerMessage::parse(r#"{"jsonrpc":"2.0","method":"event","params":{"event":"runtime.made.up","payload":{},"seq":1}}"#)
            .is_err()
    );
    assert!(ServerMessage::parse(r#"{"jsonrpc":"1.0","id":1,"result":{}}"#).is_err());
}
