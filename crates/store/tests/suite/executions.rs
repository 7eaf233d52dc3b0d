//! Direct executions in flight: the executing record written with the attempt's audit record,
//! ended with the final result and the outcome's audit record, and found again after a
//! reopen (issue 11, item 1).

use openphone_protocol::ToolStatus;
use openphone_store::{AuditEntry, Caller, Execution, IdentityKey, StoreError};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{T0, identity, open, temp};

/// The audit record of the attempt of `request_id` (the PostgreSQL fleet tests use it too).
pub(crate) fn attempt(request_id: &str) -> AuditEntry {
    AuditEntry {
        audit_id: format!("runtime:openclaw:{request_id}"),
        at_ms: T0,
        runtime: "openclaw".to_owned(),
        caller: Caller {
            runtime: "openclaw".to_owned(),
            transport: "ws".to_owned(),
            principal: "device-1".to_owned(),
        },
        request_id: request_id.to_owned(),
        tool: Some("openphone.memory.save".to_owned()),
        mutating: Some(true),
        ..AuditEntry::default()
    }
}

fn execution(identity: &IdentityKey, request_id: &str) -> Execution {
    Execution {
        identity: identity.clone(),
        request_id: request_id.to_owned(),
        attempt: attempt(request_id),
        started_at_ms: T0,
    }
}

#[test]
fn an_execution_is_begun_with_its_attempt_audited_and_finished_with_its_result() {
    let dir = temp();
    let store = open(&dir);
    let key = identity("openphone.memory.save", "p1", "k1");
    let begun = store.begin_execution(&execution(&key, "r1")).unwrap();
    assert_eq!(begun.entry, attempt("r1"));
    assert_eq!(
        store.find_execution(&key).unwrap(),
        Some(execution(&key, "r1"))
    );
    assert_eq!(store.list_executions().unwrap().len(), 1);

    let outcome = AuditEntry {
        status: Some(ToolStatus::Ok),
        ..attempt("r1")
    };
    let result = json!({"status": "ok", "request_id": "r1"});
    let stored = store
        .finish_execution(&key, "r1", &result, &outcome, T0 + 5)
        .unwrap();
    assert_eq!(stored.result, result);
    assert_eq!(store.find_execution(&key).unwrap(), None);
    assert_eq!(store.find_final(&key).unwrap().unwrap().result, result);
    let trail = store.find_audit("runtime:openclaw:r1").unwrap();
    let statuses: Vec<_> = trail.iter().map(|r| r.entry.status).collect();
    assert_eq!(statuses, [None, Some(ToolStatus::Ok)]);
    assert!(store.verify_audit().unwrap().is_intact());
}

#[test]
fn a_second_execution_of_one_identity_is_refused() {
    let dir = temp();
    let store = open(&dir);
    let key = identity("openphone.memory.save", "p1", "k1");
    store.begin_execution(&execution(&key, "r1")).unwrap();
    // In flight: a second begin (a retry) is refused, and nothing more is audited.
    let err = store.begin_execution(&execution(&key, "r2")).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::AlreadyExists {
                table: "executions",
                ..
            }
        ),
        "{err:?}"
    );
    store
        .finish_execution(&key, "r1", &json!({"status": "ok"}), &attempt("r1"), T0)
        .unwrap();
    // Finished: its final result refuses a new execution as well.
    let err = store.begin_execution(&execution(&key, "r3")).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::AlreadyExists {
                table: "final_results",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(store.find_audit("runtime:openclaw:r2").unwrap().len(), 0);
    assert_eq!(store.find_audit("runtime:openclaw:r3").unwrap().len(), 0);
}

#[test]
fn an_execution_without_an_outcome_is_found_after_a_reopen() {
    let dir = temp();
    let key = identity("openphone.memory.save", "p1", "k1");
    {
        let store = open(&dir);
        store.begin_execution(&execution(&key, "r1")).unwrap();
    }
    let store = open(&dir);
    assert_eq!(store.list_executions().unwrap(), [execution(&key, "r1")]);
    // The attempt was audited before the process went away.
    assert_eq!(store.find_audit("runtime:openclaw:r1").unwrap().len(), 1);
}
