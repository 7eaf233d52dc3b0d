//! `openphone audit verify | export` on a data directory the core wrote.

use std::sync::Arc;

use openphone_core::{BridgeConfig, EventBus, ToolBridge};
use openphone_device::SimPhone;
use openphone_policy::{Caller, Context, Transport};
use openphone_protocol::{Registry, ToolRequest};
use openphone_store::Store;
use serde_json::{Value, json};

use super::support::run;

/// Writes `n` audited requests into a fresh data directory.
async fn data_dir_with_audit(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::embedded().unwrap();
    let (phone, clock) = SimPhone::demo().unwrap();
    let bridge = ToolBridge::new(
        registry,
        Arc::new(Store::open(dir.path()).unwrap()),
        Arc::new(phone),
        Arc::new(clock),
        Arc::new(EventBus::new(registry, 16)),
        BridgeConfig::default(),
    );
    let caller = Caller::remote("hermes", Transport::Websocket, "t");
    for i in 0..n {
        let req = ToolRequest {
            request_id: format!("r{i}"),
            tool: "openphone.screen.get".into(),
            params: json!({"reason": "look"}),
            ..ToolRequest::default()
        };
        bridge.invoke(&caller, req, Context::Interactive).await;
    }
    dir
}

#[tokio::test]
async fn verify_passes_then_names_the_tampered_record() {
    let dir = data_dir_with_audit(5).await;
    let path = dir.path().to_str().unwrap();
    let (code, out, err) = run(&["audit", "verify", "--data-dir", path], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("audit chain intact: 5 records"), "{out}");

    let conn = rusqlite::Connection::open(dir.path().join("openphone.db")).unwrap();
    conn.execute(
        "UPDATE audit_log SET status = 'ok', request_id = 'forged' WHERE seq = 4",
        [],
    )
    .unwrap();
    let (code, out, _) = run(&["audit", "verify", "--data-dir", path, "--json"], "");
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["intact"], false);
    assert_eq!(v["first_broken"]["seq"], 4);
}

#[tokio::test]
async fn export_streams_one_json_record_per_line() {
    let dir = data_dir_with_audit(3).await;
    let path = dir.path().to_str().unwrap();
    let (code, out, err) = run(
        &["audit", "export", "--format", "jsonl", "--data-dir", path],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["seq"], 1);
    assert_eq!(lines[2]["audit_id"], "runtime:hermes:r2");
    assert_eq!(lines[1]["prev_hash"], lines[0]["hash"]);
    let (_, out, _) = run(&["audit", "export", "--after", "2", "--data-dir", path], "");
    assert_eq!(out.lines().count(), 1);
}

#[test]
fn a_missing_data_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let (code, _, err) = run(
        &["audit", "verify", "--data-dir", missing.to_str().unwrap()],
        "",
    );
    assert_eq!(code, 2);
    assert!(err.contains("cannot open the audit log in"), "{err}");
}
