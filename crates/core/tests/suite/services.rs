//! Runtime-owned commands served by the daemon: memory (SQLite FTS5) and watchers.

use openphone_core::ConfirmDecision;
use openphone_protocol::ToolStatus;
use serde_json::json;

use super::support::*;

async fn approved(
    h: &Harness,
    id: &str,
    tool: &str,
    params: serde_json::Value,
) -> openphone_protocol::ToolResult {
    let parked = h.call(&hermes(), request(id, tool, params)).await;
    assert_eq!(
        parked.status,
        ToolStatus::NeedsConfirmation,
        "{tool} is mutating"
    );
    h.bridge
        .resolve(
            &operator(),
            &confirmation_id(&parked),
            ConfirmDecision::Approve,
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn memory_saved_after_approval_is_found_by_search() {
    let h = Harness::new();
    let saved = approved(
        &h,
        "m1",
        "openphone.memory.save",
        json!({"text": "Alice prefers tea over coffee", "type": "preference", "subject": "Alice", "reason": "remember"}),
    )
    .await;
    assert_eq!(saved.status, ToolStatus::Ok, "{:?}", saved.error);
    let found = h
        .call(
            &hermes(),
            request(
                "m2",
                "openphone.memory.search",
                json!({"query": "tea", "reason": "recall"}),
            ),
        )
        .await;
    assert_eq!(found.status, ToolStatus::Ok);
    assert_eq!(found.result["count"], 1);
    assert_eq!(
        found.result["memories"][0]["text"],
        "Alice prefers tea over coffee"
    );
    let none = h
        .call(
            &hermes(),
            request(
                "m3",
                "openphone.memory.search",
                json!({"query": "whisky", "reason": "recall"}),
            ),
        )
        .await;
    assert_eq!(none.result["count"], 0);
    let bad = approved(
        &h,
        "m4",
        "openphone.memory.save",
        json!({"text": "x", "type": "gossip", "reason": "r"}),
    )
    .await;
    // A runtime-owned command's semantically wrong params are invalid_params, naming the field.
    assert_eq!(code(&bad), Some("invalid_params"));
    assert_eq!(bad.error.unwrap().details.unwrap()["field"], "type");
}

#[tokio::test]
async fn watchers_are_created_listed_and_stopped_durably() {
    let h = Harness::new();
    let created = approved(
        &h,
        "w1",
        "openphone.watchers.create",
        json!({"title": "Tell me when Bob replies", "source": "message", "address": "+15550002", "reason": "watch"}),
    )
    .await;
    assert_eq!(created.status, ToolStatus::Ok, "{:?}", created.error);
    let id = created.result["watcher"]["watcher_id"].as_i64().unwrap();
    let listed = h
        .call(
            &hermes(),
            request("w2", "openphone.watchers.list", json!({"reason": "see"})),
        )
        .await;
    assert_eq!(listed.result["count"], 1);
    let stopped = approved(
        &h,
        "w3",
        "openphone.watchers.stop",
        json!({"watcher_id": id, "reason": "done"}),
    )
    .await;
    assert_eq!(stopped.result["stopped"], 1);
    let listed = h
        .call(
            &hermes(),
            request("w4", "openphone.watchers.list", json!({"reason": "see"})),
        )
        .await;
    assert_eq!(listed.result["count"], 0);
}
