//! A key given twice in a request frame is refused, never read as "the last one wins"
//! (issue 11; `runtime-protocol.md` §17): inside `params` as `invalid_params`, elsewhere as
//! `invalid_request`, the message naming the key, answered with the frame's id when the id
//! itself is not what repeats.

use openphone_protocol::endpoint::*;
use pretty_assertions::assert_eq;

fn refused(frame: &str) -> (Option<RequestId>, &'static str, String) {
    let rejected = parse_request(frame).unwrap_err();
    (
        rejected.id,
        rejected.error.data.code.as_str(),
        rejected.error.message,
    )
}

#[test]
fn a_key_twice_anywhere_in_a_frame_is_refused_naming_the_key() {
    let cases = [
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"tools.invoke","params":{"x":1,"x":2}}"#,
            Some(RequestId::from(7u64)),
            "invalid_params",
            r#"`params` holds the key "x" more than once; duplicate keys are refused"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":"a","method":"tools.invoke","params":{"tool":"t","params":{"to":"+1","body":"hi","to":"+2"}}}"#,
            Some(RequestId::from("a")),
            "invalid_params",
            r#"`params` holds the key "to" more than once; duplicate keys are refused"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#,
            None,
            "invalid_request",
            r#"the request holds the member "id" more than once; duplicate keys are refused"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"x","method":"y"}"#,
            Some(RequestId::from(3u64)),
            "invalid_request",
            r#"the request holds the member "method" more than once; duplicate keys are refused"#,
        ),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"x","extra":{"k":[{"a":1,"a":1}]}}"#,
            Some(RequestId::from(4u64)),
            "invalid_request",
            r#"the member "extra" holds the key "a" more than once; duplicate keys are refused"#,
        ),
    ];
    for (frame, id, code, message) in cases {
        assert_eq!(refused(frame), (id, code, message.to_owned()), "{frame}");
    }
}

#[test]
fn frames_without_a_repeated_key_read_as_before() {
    let r = parse_request(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"x":1,"y":{"x":2}}}"#,
    )
    .unwrap();
    assert_eq!(r.params["y"]["x"], 2);
    // Not JSON, and not an object, keep their answers.
    assert_eq!(refused("{").1, "parse_error");
    assert_eq!(refused("[1]").1, "invalid_request");
    assert_eq!(refused(r#"[{"a":1,"a":2}]"#).1, "invalid_request");
    // JSON first: a repeated key before a syntax error is still a `parse_error`.
    assert_eq!(refused(r#"{"a":1,"a":2,"#).1, "parse_error");
}
