use openphone_openclaw::invoke::{Answer, hold_for};
use openphone_openclaw::stream::{Mapped, key_matches, map_chat, message_text};
use serde_json::json;
use std::time::Duration;

#[test]
fn canonical_keys_match_the_key_we_sent() {
    assert!(key_matches("agent:main:openphone-x", "openphone-x"));
    assert!(key_matches("openphone-x", "openphone-x"));
    assert!(key_matches("agent:main:main", "agent:main:main"));
    assert!(!key_matches("agent:main:openphone-xy", "openphone-x"));
    assert!(!key_matches("agent:main:other:openphone-x", "openphone-x"));
}

#[test]
fn chat_states_map_to_delta_final_and_error() {
    let delta = json!({"state": "delta", "deltaText": " reply", "message": {"content": [{"type": "text", "text": "Mock reply"}]}});
    assert_eq!(map_chat(&delta), Some(Mapped::Delta(" reply".into())));
    let replace = json!({"state": "delta", "replace": true, "deltaText": "x", "message": {"content": [{"type": "text", "text": "Full"}]}});
    assert_eq!(map_chat(&replace), Some(Mapped::Delta("Full".into())));
    let fin = json!({"state": "final", "message": {"content": [{"type": "text", "text": "Mock "}, {"type": "text", "text": "reply #1"}]}});
    assert_eq!(map_chat(&fin), Some(Mapped::Final("Mock reply #1".into())));
    let err = json!({"state": "error", "errorMessage": "no provider"});
    assert_eq!(map_chat(&err), Some(Mapped::Error("no provider".into())));
    assert_eq!(map_chat(&json!({"state": "status"})), None);
    assert_eq!(message_text(None), "");
}

#[test]
fn the_hold_leaves_a_margin_before_the_gateway_deadline() {
    assert_eq!(
        hold_for(Some(29_980), 600_000),
        Duration::from_millis(28_480)
    );
    assert_eq!(
        hold_for(Some(100_000), 600_000),
        Duration::from_millis(95_000)
    );
    assert_eq!(hold_for(None, 600_000), Duration::from_millis(28_500));
    assert_eq!(hold_for(Some(0), 600_000), Duration::from_millis(600_000));
    assert_eq!(hold_for(Some(1_000), 600_000), Duration::ZERO);
}

#[test]
fn results_go_out_as_payload_json_and_errors_without_payload() {
    let ok = Answer::Ok(json!({"a": 1})).result_params("i", "n");
    assert_eq!(
        ok,
        json!({"id": "i", "nodeId": "n", "ok": true, "payloadJSON": "{\"a\":1}"})
    );
    let err = Answer::Err {
        code: "USER_DENIED".into(),
        message: "no".into(),
    }
    .result_params("i", "n");
    assert_eq!(
        err,
        json!({"id": "i", "nodeId": "n", "ok": false, "error": {"code": "USER_DENIED", "message": "no"}})
    );
}
