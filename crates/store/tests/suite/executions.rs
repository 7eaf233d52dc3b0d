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

/// An attempt with a policy proof, as the bridge makes one.
fn proven_execution(identity: &IdentityKey, request_id: &str) -> Execution {
    let mut attempt = attempt(request_id);
    attempt.policy_proof = Some(json!([
        {"layer": "autonomy", "kind": "allow", "reason": "trusted_actions"},
        {"layer": "risk_floor", "kind": "allow", "reason": "below the floor", "weight": 0.25},
    ]));
    Execution {
        identity: identity.clone(),
        request_id: request_id.to_owned(),
        attempt,
        started_at_ms: T0,
    }
}

/// One proven execution begun in a fresh store in `dir` (closed again).
pub(crate) fn begun_proven(dir: &tempfile::TempDir) -> (IdentityKey, Execution) {
    let key = identity("openphone.memory.save", "p1", "k1");
    let execution = proven_execution(&key, "r1");
    open(dir).begin_execution(&execution).unwrap();
    (key, execution)
}

#[test]
fn an_execution_with_a_policy_proof_reads_back_whole_and_its_outcome_carries_it() {
    let dir = temp();
    let (key, execution) = begun_proven(&dir);
    // Found and listed after a reopen (what start-up settles) with its proof.
    let store = open(&dir);
    assert_eq!(store.find_execution(&key).unwrap(), Some(execution.clone()));
    assert_eq!(
        store.list_executions().unwrap(),
        std::slice::from_ref(&execution)
    );
    let found = store.find_execution(&key).unwrap().unwrap();
    let outcome = AuditEntry {
        status: Some(ToolStatus::Ok),
        ..found.attempt
    };
    store
        .finish_execution(&key, "r1", &json!({"status": "ok"}), &outcome, T0 + 5)
        .unwrap();
    let trail = store.find_audit("runtime:openclaw:r1").unwrap();
    assert_eq!(trail.len(), 2);
    assert_eq!(trail[0].entry.policy_proof, execution.attempt.policy_proof);
    assert_eq!(trail[1].entry.policy_proof, execution.attempt.policy_proof);
    assert!(store.verify_audit().unwrap().is_intact());
}
