//! Creation: every rule checked up front, the field named.

use openphone_protocol::ToolStatus;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{Harness, Options, hermes};

#[tokio::test]
async fn bad_watchers_are_refused_naming_the_field() {
    let h = Harness::new();
    let past = h.now() - 1;
    let soon = h.now() + 60_000;
    for (params, field) in [
        (json!({"title": "t"}), "source"),
        (json!({"title": "t", "source": "radio"}), "source"),
        (json!({"title": "t", "type": "psychic"}), "type"),
        (json!({"title": "t", "source": "message"}), "address"),
        (json!({"title": "t", "source": "call"}), "number"),
        (json!({"title": "t", "source": "notification"}), "query"),
        (json!({"title": "t", "source": "web"}), "url"),
        (
            json!({"title": "t", "source": "web", "url": "ftp://x"}),
            "url",
        ),
        (json!({"title": "t", "source": "time"}), "next_run_at"),
        (
            json!({"title": "t", "source": "message", "match_any": true, "evaluator": "hash_change"}),
            "evaluator",
        ),
        (
            json!({"title": "t", "source": "message", "match_any": true, "evaluator": "text_contains"}),
            "query",
        ),
        (
            json!({"title": "t", "source": "message", "match_any": true, "evaluator": "semantic_match", "query": "q"}),
            "evaluator",
        ),
        (
            json!({"title": "t", "source": "message", "address": "x", "notify_on": "no_reply"}),
            "deadline_at",
        ),
        (
            json!({"title": "t", "source": "message", "address": "x", "notify_on": "no_reply", "deadline_at": past}),
            "deadline_at",
        ),
        (
            json!({"title": "t", "source": "message", "address": "x", "notify_on": "no_call", "deadline_at": soon}),
            "notify_on",
        ),
        (
            json!({"title": "t", "source": "message", "address": "x", "notify_on": "no_reply", "deadline_at": soon, "recurring": true}),
            "recurring",
        ),
        (
            json!({"title": "t", "source": "web", "url": "https://a.example", "interval_ms": 5}),
            "interval_ms",
        ),
        (
            json!({"title": "t", "source": "call", "match_any": true, "direction": "sideways"}),
            "direction",
        ),
        (
            json!({"title": "t", "source": "message", "match_any": true, "delivery": {"tool": "no_such_tool"}}),
            "delivery.tool",
        ),
        (
            json!({"title": "t", "source": "message", "match_any": true, "delivery": {"tool": "messages_send", "arguments": {"body": "hi"}}}),
            "delivery.arguments",
        ),
        (
            json!({"title": "t", "source": "message", "match_any": true, "delivery": {"tool": "messages_send", "arguments": {"to": "{{event.secret}}", "body": "x"}}}),
            "delivery.arguments",
        ),
        (
            json!({"title": "t", "source": "message", "match_any": true, "delivery": {"prompt": "p", "tool": "contacts_search"}}),
            "delivery.prompt",
        ),
        (
            json!({"title": "t", "source": "message", "match_any": true, "delivery": {"mode": "background_job"}}),
            "delivery.prompt",
        ),
        (
            json!({"title": "t", "source": "message", "match_any": true, "delivery": {"mode": "carrier_pigeon"}}),
            "delivery.mode",
        ),
    ] {
        let result = h.create(params.clone()).await;
        assert_eq!(result.status, ToolStatus::Error, "{params} was accepted");
        let details = result.error.as_ref().unwrap().details.clone().unwrap();
        assert_eq!(details["field"], field, "{params}: {:?}", result.error);
    }
    assert!(h.store.list_watchers(None, None).unwrap().is_empty());
}

#[tokio::test]
async fn job_reactions_need_the_scheduler() {
    let h = Harness::with(Options {
        judge: None,
        jobs: false,
    });
    let result = h
        .create(json!({"title": "t", "source": "message", "match_any": true, "prompt": "look"}))
        .await;
    assert_eq!(result.error.unwrap().details.unwrap()["field"], "prompt");
    // Without a reaction it is fine.
    h.watcher(json!({"title": "t", "source": "message", "match_any": true}))
        .await;
}

#[tokio::test]
async fn the_stored_params_are_the_canonical_spec_and_list_and_stop_work() {
    let h = Harness::new();
    let w = h
        .watcher(json!({"title": "Price", "type": "web_change", "url": "https://shop.example/x"}))
        .await;
    assert_eq!(w.params["source"], "web");
    assert_eq!(w.params["evaluator"], "hash_change");
    assert_eq!(w.params["interval_ms"], 300_000);
    assert_eq!(w.params["reaction"], json!({"kind": "attention"}));
    assert!(w.params.get("reason").is_none());
    let result = h
        .create(json!({"title": "Call", "source": "call", "match_any": true}))
        .await;
    assert_eq!(result.status, ToolStatus::Ok);
    // Listed by its creator (another runtime would not see it: `owners.rs`).
    let list = h
        .call_as(
            &hermes(),
            "openphone.watchers.list",
            json!({"reason": "check", "query": "price"}),
        )
        .await;
    assert_eq!(list.result["count"], 1);
    assert_eq!(list.result["watchers"][0]["fire_count"], 0);
}
