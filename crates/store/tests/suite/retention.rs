//! Retention of stored results: by age (default 7 days) and by size (default 64 MiB), within
//! the §10.3 floor (24 h, 128 most recent); a pruned result leaves a tombstone that answers a
//! retry instead of letting it run again; the audit log is never touched.

use openphone_store::{AuditEntry, Caller, Execution, IdentityKey, Retention, Store, StoreError};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{T0, identity, open, temp};

const DAY: i64 = 24 * 60 * 60 * 1000;

/// A stored result of exactly `bytes` bytes of JSON.
pub fn result_of(bytes: usize, status: &str) -> Value {
    let shell = json!({"status": status, "request_id": "r", "pad": ""}).to_string();
    json!({"status": status, "request_id": "r", "pad": "x".repeat(bytes - shell.len())})
}

pub fn key(i: usize) -> IdentityKey {
    identity(
        "openphone.clipboard.set",
        &format!("p-{i}"),
        &format!("k-{i}"),
    )
}

fn record(store: &Store, i: usize, bytes: usize, at_ms: i64) {
    let result = result_of(bytes, "ok");
    assert_eq!(result.to_string().len(), bytes);
    store
        .record_final(&key(i), &format!("r-{i}"), &result, at_ms)
        .unwrap();
}

/// The audit record of the `i`-th safe read.
fn read_record(i: i64) -> AuditEntry {
    AuditEntry {
        audit_id: format!("runtime:hermes:read-{i}"),
        at_ms: T0 + i,
        runtime: "hermes".to_owned(),
        caller: Caller {
            runtime: "hermes".to_owned(),
            transport: "websocket".to_owned(),
            principal: "token:hermes".to_owned(),
        },
        request_id: format!("read-{i}"),
        tool: Some("openphone.device.status".to_owned()),
        mutating: Some(false),
        ..AuditEntry::default()
    }
}

fn policy(max_bytes: u64) -> Retention {
    Retention {
        max_bytes,
        ..Retention::default()
    }
}

#[test]
fn the_oldest_results_beyond_the_byte_budget_are_pruned() {
    let dir = temp();
    let store = open(&dir);
    let now = T0 + 3 * DAY;
    // 400 results of 4000 bytes, two days old (within the age limit), oldest first.
    for i in 0..400 {
        record(&store, i, 4000, T0 + DAY + i64::try_from(i).unwrap());
    }
    let report = store.prune_replay(now, policy(1_000_000)).unwrap();
    // The newest 250 fit in 1 000 000 bytes.
    assert_eq!((report.final_results, report.result_bytes), (150, 600_000));
    assert_eq!(store.count_final_results().unwrap(), 250);
    assert_eq!(
        store.find_final(&key(150)).unwrap().unwrap().result["status"],
        "ok"
    );
    let gone = store.find_final(&key(149)).unwrap().unwrap();
    assert_eq!(gone.result["status"], "error");
    // Pruning again under the same policy finds nothing more to do.
    assert_eq!(
        store
            .prune_replay(now, policy(1_000_000))
            .unwrap()
            .final_results,
        0
    );
}

#[test]
fn the_floor_keeps_the_last_day_and_the_128_most_recent_over_any_budget() {
    let dir = temp();
    let store = open(&dir);
    // 200 old results and 10 fresh ones, all far over a 1-byte budget.
    for i in 0..200 {
        record(&store, i, 1000, T0 + i64::try_from(i).unwrap());
    }
    let now = T0 + 2 * DAY;
    for i in 200..210 {
        record(&store, i, 100_000, now - 1000);
    }
    let report = store
        .prune_replay(
            now,
            Retention {
                max_age_ms: 0,
                max_bytes: 1,
                keep_at_least: 0,
            },
        )
        .unwrap();
    // The 128 most recent are the 10 fresh ones and the 118 newest old ones.
    assert_eq!(report.final_results, 82);
    assert_eq!(store.count_final_results().unwrap(), 128);
    // Within a day nothing is pruned, however large.
    let dir = temp();
    let store = open(&dir);
    for i in 0..300 {
        record(&store, i, 10_000, T0);
    }
    let report = store.prune_replay(T0 + DAY - 1, policy(1)).unwrap();
    assert_eq!(report.final_results, 0);
}

#[test]
fn results_older_than_the_age_limit_are_pruned_with_their_request_ids() {
    let dir = temp();
    let store = open(&dir);
    let scope = openphone_store::Scope::new("openclaw", "sess-1");
    for i in 0..300 {
        let at = if i < 150 { T0 } else { T0 + 2 * DAY };
        record(&store, i, 100, at);
        store
            .remember_request(&scope, &format!("r-{i}"), "t", &key(i).params_digest, at)
            .unwrap();
    }
    let now = T0 + 8 * DAY;
    let report = store.prune_replay(now, Retention::default()).unwrap();
    assert_eq!((report.final_results, report.request_ids), (150, 150));
    assert!(store.find_request(&scope, "r-149").unwrap().is_none());
    assert!(store.find_request(&scope, "r-150").unwrap().is_some());
    assert_eq!(store.count_final_results().unwrap(), 150);
}

#[test]
fn a_pruned_result_answers_a_retry_and_blocks_a_second_run() {
    let dir = temp();
    let store = open(&dir);
    for i in 0..200 {
        let result = if i == 0 {
            json!({"status": "error", "request_id": "r-0", "error": {"code": "tool_error",
                   "message": "failed"}})
        } else {
            result_of(200, "ok")
        };
        store
            .record_final(&key(i), &format!("r-{i}"), &result, T0)
            .unwrap();
    }
    store
        .prune_replay(T0 + 30 * DAY, Retention::default())
        .unwrap();
    let answer = store.find_final(&key(0)).unwrap().unwrap();
    assert_eq!(answer.request_id, "r-0");
    assert_eq!(answer.recorded_at_ms, T0);
    let result = &answer.result;
    assert_eq!(result["status"], "error");
    assert_eq!(result["error"]["code"], "execution_result_unknown");
    assert_eq!(result["audit_id"], "runtime:openclaw:r-0");
    let details = &result["error"]["details"];
    assert_eq!(details["result_discarded"], true);
    assert_eq!(details["original_status"], "error");
    assert_eq!(details["original_error_code"], "tool_error");
    assert_eq!(details["recorded_at_ms"], T0);
    let message = result["error"]["message"].as_str().unwrap();
    assert!(message.contains("not run again"), "{message}");
    assert!(message.contains("status error, tool_error"), "{message}");
    // It is a valid tool result the bridge can replay.
    let parsed: openphone_protocol::ToolResult = serde_json::from_value(result.clone()).unwrap();
    assert!(parsed.check().is_ok());
    // An identity that never had a result has no tombstone.
    assert!(store.find_final(&key(999)).unwrap().is_none());

    // A direct execution cannot begin under the tombstoned identity.
    let attempt = AuditEntry {
        audit_id: "runtime:openclaw:r-again".to_owned(),
        runtime: "openclaw".to_owned(),
        caller: Caller::default(),
        request_id: "r-again".to_owned(),
        ..AuditEntry::default()
    };
    let err = store
        .begin_execution(&Execution {
            identity: key(0),
            request_id: "r-again".to_owned(),
            attempt,
            started_at_ms: T0 + 30 * DAY,
        })
        .unwrap_err();
    assert!(matches!(err, StoreError::AlreadyExists { .. }), "{err}");

    // A result recorded again under the identity takes precedence over the tombstone.
    let fresh = json!({"status": "ok", "request_id": "r-new"});
    store
        .record_final(&key(0), "r-new", &fresh, T0 + 31 * DAY)
        .unwrap();
    assert_eq!(store.find_final(&key(0)).unwrap().unwrap().result, fresh);
}

#[test]
fn pruning_never_touches_the_audit_log() {
    let dir = temp();
    let store = open(&dir);
    for i in 0..300 {
        store.append_audit(&read_record(i)).unwrap();
        record(&store, usize::try_from(i).unwrap(), 500, T0);
    }
    let head = store.audit_head().unwrap();
    let before = store.export_audit(0, 1000).unwrap();
    let report = store.prune_replay(T0 + 10 * DAY, policy(1)).unwrap();
    assert_eq!(report.final_results, 300 - 128);
    let report = store
        .verify_audit_anchored(std::slice::from_ref(&head))
        .unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(store.audit_head().unwrap(), head);
    assert_eq!(store.export_audit(0, 1000).unwrap(), before);
}
