//! A read for a caller that reads the answer as JSON text (`Answer::Text`, the endpoint's
//! `tools.invoke`): the simulated phone answers a cached read with the text it kept, and the
//! bridge passes it on text only. The answer, its audit digest and its event are those of the
//! same read for a caller of objects.

use openphone_core::Invocation;
use openphone_protocol::ToolResult;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::*;

async fn screen_get(h: &Harness, id: &str, text: bool) -> ToolResult {
    let req = request(id, "openphone.screen.get", json!({"reason": "look"}));
    let invocation = Invocation::runtime(&hermes(), req);
    let invocation = if text {
        invocation.answered_as_text()
    } else {
        invocation
    };
    h.bridge.call(invocation).await
}

/// The parsed wire form of `r`, without the members that name its request.
fn wire_without_ids(r: &ToolResult) -> Value {
    let mut wire: Value = serde_json::from_str(&r.to_json_text().unwrap()).unwrap();
    let map = wire.as_object_mut().unwrap();
    for key in ["request_id", "audit_id", "openphone_task_id"] {
        assert!(map.remove(key).is_some(), "{key}");
    }
    wire
}

#[tokio::test]
async fn a_cached_read_for_a_caller_of_text_is_the_same_answer_text_only() {
    let h = Harness::new();
    let object = screen_get(&h, "o1", false).await;
    let miss = screen_get(&h, "t1", true).await;
    let hit = screen_get(&h, "t2", true).await;
    assert!(hit.is_text_only(), "the kept answer came back as text");
    assert!(hit.result.is_empty());
    assert!(!object.is_text_only() && !object.result.is_empty());
    for r in [&miss, &hit] {
        assert_eq!(wire_without_ids(r), wire_without_ids(&object));
        let mut built = r.clone();
        built.materialize().unwrap();
        assert_eq!(built.result, object.result);
    }
    // The audit digests the same result for all three (the clock stands still).
    let records = h.bridge.store().export_audit(0, 100).unwrap();
    let digests: Vec<Option<String>> = records
        .iter()
        .map(|r| r.entry.result_digest.clone())
        .collect();
    assert_eq!(digests.len(), 3);
    assert!(digests[0].is_some());
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");
}

#[tokio::test]
async fn a_text_only_result_reaches_event_subscribers_as_its_object() {
    let h = Harness::new();
    screen_get(&h, "warm", true).await;
    let mut rx = h.bridge.events().subscribe();
    let hit = screen_get(&h, "t3", true).await;
    assert!(hit.is_text_only());
    let event = std::iter::from_fn(|| rx.try_recv().ok())
        .find(|e| e.name == "runtime.tool.result")
        .expect("a runtime.tool.result event");
    let mut built = hit.clone();
    built.materialize().unwrap();
    assert!(!built.result.is_empty());
    assert_eq!(
        event.payload["result"],
        Value::Object(built.result.clone()),
        "{}",
        event.payload
    );
}
