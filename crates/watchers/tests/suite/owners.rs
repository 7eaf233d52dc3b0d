//! Every watcher has an owner, the runtime that created it (issue 28, item 4): a runtime
//! sees, stops and counts against its quota only its own watchers; the operator sees and stops
//! all; another runtime's watcher id answers as an unknown one.

use openphone_core::services::MAX_ACTIVE_WATCHERS_PER_RUNTIME;
use openphone_policy::ExposureGrants;
use openphone_protocol::{ToolResult, ToolStatus};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{BOB, Harness, INTRUDER_GRANTS, hermes, operator, runtime};

fn ids(result: &ToolResult) -> Vec<i64> {
    result.result["watchers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["watcher_id"].as_i64().unwrap())
        .collect()
}

fn device_error(result: &ToolResult) -> String {
    let error = result.error.as_ref().expect("an error");
    let details = error.details.as_ref().expect("error details");
    details["device_error"].as_str().unwrap().to_owned()
}

/// Hermes' watcher carries a stored tool call (who to text, and what).
fn secret_watcher() -> Value {
    json!({"title": "Auto reply", "source": "message", "address": BOB,
           "delivery": {"tool": "messages_send",
                        "arguments": {"to": "+49 170 555 0101", "body": "PIN is 4821"}}})
}

#[tokio::test]
async fn a_runtime_cannot_list_another_runtimes_watcher() {
    let h = Harness::new();
    let theirs = h.watcher_as(&hermes(), secret_watcher()).await;
    let other = runtime("openclaw", ExposureGrants::ALL);
    let mine = h
        .watcher_as(
            &other,
            json!({"title": "calls", "source": "call", "match_any": true}),
        )
        .await;

    // The other runtime lists only its own watcher; Hermes' arguments never reach it.
    let listed = h
        .call_as(&other, "openphone.watchers.list", json!({}))
        .await;
    assert_eq!(listed.status, ToolStatus::Ok, "{listed:?}");
    assert_eq!(ids(&listed), [mine.watcher_id]);
    assert_eq!(listed.result["watchers"][0]["runtime"], "openclaw");
    assert!(
        !Value::Object(listed.result.clone())
            .to_string()
            .contains("PIN is 4821")
    );
    // Not by query either.
    let queried = h
        .call_as(
            &other,
            "openphone.watchers.list",
            json!({"query": "Auto reply"}),
        )
        .await;
    assert_eq!(queried.result["count"], 0);

    // Hermes sees its own, shown with its creator.
    let own = h
        .call_as(&hermes(), "openphone.watchers.list", json!({}))
        .await;
    assert_eq!(ids(&own), [theirs.watcher_id]);
    assert_eq!(own.result["watchers"][0]["runtime"], "hermes");

    // The operator sees both, each with its creator.
    let all = h
        .call_as(&operator(), "openphone.watchers.list", json!({}))
        .await;
    assert_eq!(ids(&all), [mine.watcher_id, theirs.watcher_id]);
    assert_eq!(all.result["watchers"][1]["runtime"], "hermes");

    // Stopping Hermes' watcher by id answers exactly as an id that does not exist.
    let foreign = h
        .call_as(
            &other,
            "openphone.watchers.stop",
            json!({"watcher_id": theirs.watcher_id}),
        )
        .await;
    let unknown = h
        .call_as(
            &other,
            "openphone.watchers.stop",
            json!({"watcher_id": 999_999}),
        )
        .await;
    assert_eq!(foreign.status, ToolStatus::Error, "{foreign:?}");
    assert_eq!(device_error(&foreign), "watcher_not_found");
    assert_eq!(device_error(&unknown), "watcher_not_found");
    assert_eq!(
        foreign
            .error
            .as_ref()
            .unwrap()
            .message
            .replace(&theirs.watcher_id.to_string(), "N"),
        unknown
            .error
            .as_ref()
            .unwrap()
            .message
            .replace("999999", "N")
    );
    assert_eq!(h.watcher_now(theirs.watcher_id).end_reason, None);
}

#[tokio::test]
async fn a_runtime_without_private_read_cannot_stop_every_watcher() {
    let h = Harness::new();
    let users = h
        .watcher_as(
            &operator(),
            json!({"title": "dentist", "source": "message", "match_any": true}),
        )
        .await;
    let hermes_own = h.watcher_as(&hermes(), secret_watcher()).await;
    // A runtime that may change things (`dangerous`) but not read private data.
    let intruder = runtime("intruder", INTRUDER_GRANTS);
    let its_own = h
        .watcher_as(
            &intruder,
            json!({"title": "at noon", "source": "time", "next_run_at": h.now() + 3_600_000}),
        )
        .await;

    let stopped = h
        .call_as(&intruder, "openphone.watchers.stop", json!({"all": true}))
        .await;
    assert_eq!(stopped.status, ToolStatus::Ok, "{stopped:?}");
    assert_eq!(stopped.result["stopped"], 1);
    assert_eq!(ids(&stopped), [its_own.watcher_id]);
    // `scope: all` and a query that would match the others stop nothing of theirs either.
    for params in [json!({"scope": "all"}), json!({"query": "e"})] {
        let again = h
            .call_as(&intruder, "openphone.watchers.stop", params)
            .await;
        assert_eq!(again.result["stopped"], 0, "{again:?}");
    }
    assert_eq!(h.watcher_now(users.watcher_id).end_reason, None);
    assert_eq!(h.watcher_now(hermes_own.watcher_id).end_reason, None);
    assert_eq!(
        h.watcher_now(its_own.watcher_id).end_reason.as_deref(),
        Some("stopped")
    );

    // The operator's `all` stops every watcher.
    let everything = h
        .call_as(&operator(), "openphone.watchers.stop", json!({"all": true}))
        .await;
    assert_eq!(everything.result["stopped"], 2);
}

#[tokio::test]
async fn a_runtime_cannot_fill_the_users_watcher_quota() {
    let h = Harness::new();
    let greedy = runtime("greedy", ExposureGrants::ALL);
    let next_run_at = h.now() + 3_600_000;
    let mut first = None;
    for n in 0..MAX_ACTIVE_WATCHERS_PER_RUNTIME {
        let w = h
            .watcher_as(
                &greedy,
                json!({"title": format!("tick {n}"), "source": "time", "next_run_at": next_run_at}),
            )
            .await;
        first.get_or_insert(w.watcher_id);
    }
    let refused = h
        .call_as(
            &greedy,
            "openphone.watchers.create",
            json!({"title": "one more", "source": "time", "next_run_at": next_run_at}),
        )
        .await;
    assert_eq!(refused.status, ToolStatus::Error, "{refused:?}");
    assert_eq!(device_error(&refused), "watcher_limit_reached");
    assert!(
        refused.error.as_ref().unwrap().message.contains("greedy"),
        "{refused:?}"
    );
    // The user, and any other runtime, still have their own room.
    h.watcher_as(
        &operator(),
        json!({"title": "mine", "source": "time", "next_run_at": next_run_at}),
    )
    .await;
    h.watcher_as(
        &hermes(),
        json!({"title": "hermes'", "source": "time", "next_run_at": next_run_at}),
    )
    .await;
    // A stopped watcher gives its place back.
    let stopped = h
        .call_as(
            &greedy,
            "openphone.watchers.stop",
            json!({"watcher_id": first.unwrap()}),
        )
        .await;
    assert_eq!(stopped.result["stopped"], 1);
    h.watcher_as(
        &greedy,
        json!({"title": "again", "source": "time", "next_run_at": next_run_at}),
    )
    .await;
}
