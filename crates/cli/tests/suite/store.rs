//! `openphone store stats` on a data directory the core wrote, next to a live writer; and
//! retention seen through the bridge: a keyed retry of a mutation whose stored result was
//! pruned is answered, never run again.

use std::sync::Arc;

use openphone_core::{BridgeConfig, EventBus, ToolBridge};
use openphone_device::SimPhone;
use openphone_policy::{Caller, Context, Transport};
use openphone_protocol::{Registry, ToolRequest, ToolStatus};
use openphone_store::{Retention, Store};
use serde_json::{Value, json};

use super::support::run;

/// A bridge over a store in `dir`, and that store (the test reads it directly).
fn bridge(dir: &std::path::Path) -> (ToolBridge, Arc<Store>) {
    let registry = Registry::embedded().unwrap();
    let (phone, clock) = SimPhone::demo().unwrap();
    let store = Arc::new(Store::open(dir).unwrap());
    let bridge = ToolBridge::new(
        registry,
        Arc::clone(&store),
        Arc::new(phone),
        Arc::new(clock),
        Arc::new(EventBus::new(registry, 16)),
        BridgeConfig::default(),
    );
    (bridge, store)
}

fn request(id: &str, tool: &str, params: Value) -> ToolRequest {
    ToolRequest {
        request_id: id.to_owned(),
        tool: tool.to_owned(),
        params,
        ..ToolRequest::default()
    }
}

#[tokio::test]
async fn stats_report_tables_and_bytes_per_record_next_to_a_live_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    // The bridge keeps its store open (and the directory locked), as a daemon would.
    let (bridge, _store) = bridge(dir.path());
    let caller = Caller::remote("hermes", Transport::Websocket, "t");
    let reads = |n: usize| {
        let bridge = &bridge;
        let caller = &caller;
        async move {
            for i in 0..n {
                let read = request(
                    &uuid::Uuid::new_v4().to_string(),
                    "openphone.screen.get",
                    json!({"reason": format!("look {i}"), "include_screenshot": false}),
                );
                let result = bridge.invoke(caller, read, Context::Interactive).await;
                assert_eq!(result.status, ToolStatus::Ok, "{result:?}");
            }
        }
    };
    let audit_bytes = || {
        let (code, out, err) = run(&["store", "stats", "--json", "--data-dir", path], "");
        assert_eq!(code, 0, "{err}");
        let stats: Value = serde_json::from_str(&out).unwrap();
        stats["audit"]["bytes"].as_u64().unwrap()
    };
    // What one more keyless read costs, the fixed pages of the tables aside.
    reads(100).await;
    let before = audit_bytes();
    reads(400).await;
    let per_read = (audit_bytes() - before) / 400;
    eprintln!("{per_read} bytes of audit storage per keyless read through the bridge");
    assert!(per_read <= 300, "{per_read} bytes per keyless read");

    let (code, out, err) = run(&["store", "stats", "--json", "--data-dir", path], "");
    assert_eq!(code, 0, "{err}");
    let stats: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stats["audit"]["records"], 500);
    assert_eq!(stats["dbstat"], true);
    assert!(stats["audit"]["bytes_per_record"].as_f64().unwrap() > 0.0);
    let tables = stats["tables"].as_array().unwrap();
    let records = tables
        .iter()
        .find(|t| t["name"] == "audit_records")
        .unwrap();
    assert_eq!(records["rows"], 500);
    assert!(records["index_bytes"].as_u64().unwrap() > 0);
    assert!(stats["wal_file_bytes"].as_u64().unwrap() > 0, "{stats}");

    let (code, out, err) = run(&["store", "stats", "--data-dir", path], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("audit log: 500 records"), "{out}");
    assert!(out.contains("bytes per record"), "{out}");
    assert!(out.contains("stored results: "), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("audit_records "))
        .unwrap();
    assert_eq!(line.split_whitespace().nth(1), Some("500"), "{line}");
    drop(bridge);
}

#[test]
fn stats_without_a_database_is_a_clear_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let (code, out, err) = run(&["store", "stats", "--data-dir", path], "");
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("cannot read the database in"), "{err}");
    assert!(err.contains("not found"), "{err}");
}

#[tokio::test]
async fn a_keyed_retry_after_its_result_was_pruned_is_answered_not_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let (bridge, store) = bridge(dir.path());
    let operator = Caller::operator("cli", Transport::Cli, "test");
    let save = |id: &str, key: &str, text: &str| ToolRequest {
        idempotency_key: Some(key.to_owned()),
        autonomy: Some("trusted_actions".to_owned()),
        ..request(
            id,
            "openphone.memory.save",
            json!({"text": text, "reason": "remember it"}),
        )
    };
    let saved = |text: &str| {
        store
            .search_memory(None, 10_000)
            .unwrap()
            .iter()
            .filter(|m| m.memory.text == text)
            .count()
    };
    // The first request, then enough later ones that it is not among the 128 kept.
    let first = bridge
        .invoke(&operator, save("r-0", "k-0", "first"), Context::Interactive)
        .await;
    assert_eq!(first.status, ToolStatus::Ok, "{first:?}");
    for i in 1..=130 {
        let r = bridge
            .invoke(
                &operator,
                save(&format!("r-{i}"), &format!("k-{i}"), &format!("note {i}")),
                Context::Interactive,
            )
            .await;
        assert_eq!(r.status, ToolStatus::Ok, "{r:?}");
    }
    let later = bridge.now_ms() + 8 * 24 * 60 * 60 * 1000;
    let report = store.prune_replay(later, Retention::default()).unwrap();
    assert_eq!(report.final_results, 3);

    let retry = bridge
        .invoke(
            &operator,
            save("r-0-again", "k-0", "first"),
            Context::Interactive,
        )
        .await;
    assert_eq!(saved("first"), 1, "run exactly once");
    assert!(retry.replayed, "{retry:?}");
    let error = retry.error.as_ref().unwrap();
    assert_eq!(error.code.as_str(), "execution_result_unknown");
    assert_eq!(
        error.details.as_ref().unwrap()["original_status"],
        "ok",
        "{retry:?}"
    );
    assert_eq!(retry.request_id, "r-0-again");
    // A kept result still replays as recorded.
    let kept = bridge
        .invoke(
            &operator,
            save("r-130-again", "k-130", "note 130"),
            Context::Interactive,
        )
        .await;
    assert_eq!((kept.status, kept.replayed), (ToolStatus::Ok, true));
    assert_eq!(saved("note 130"), 1);
    assert!(store.verify_audit().unwrap().is_intact());
}
