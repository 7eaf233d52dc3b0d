//! Phone sessions.

use openphone_store::{
    Autonomy, NewPhoneSession, PhoneSession, SessionFilter, SessionStatus, Store, StoreError,
};
use pretty_assertions::assert_eq;

use super::support::{T0, open, temp};

fn new_session(id: &str, runtime: &str) -> NewPhoneSession {
    NewPhoneSession {
        phone_session_id: id.to_owned(),
        runtime_kind: runtime.to_owned(),
        runtime_session_id: String::new(),
        attention_id: format!("attn-{id}"),
        source: "chat".to_owned(),
        autonomy: Autonomy::AskBeforeAction,
        summary: "open the weather".to_owned(),
    }
}

#[test]
fn create_get_update_and_reopen() {
    let dir = temp();
    let store = open(&dir);
    let created = store
        .create_session(&new_session("phone-sess-1", "openclaw"), T0)
        .unwrap();
    assert_eq!(
        created,
        PhoneSession {
            phone_session_id: "phone-sess-1".to_owned(),
            created_at_ms: T0,
            updated_at_ms: T0,
            runtime_kind: "openclaw".to_owned(),
            runtime_session_id: String::new(),
            attention_id: "attn-phone-sess-1".to_owned(),
            source: "chat".to_owned(),
            autonomy: Autonomy::AskBeforeAction,
            summary: "open the weather".to_owned(),
            status: SessionStatus::Created,
            audit_log_id: "phone-session:phone-sess-1".to_owned(),
            failure_reason: None,
            device_id: None,
        }
    );
    let dup = store
        .create_session(&new_session("phone-sess-1", "openclaw"), T0)
        .unwrap_err();
    assert!(matches!(
        dup,
        StoreError::AlreadyExists {
            table: "phone_sessions",
            ..
        }
    ));

    let s = store
        .set_session_runtime_session_id("phone-sess-1", "openphone:dev:phone-sess-1", T0 + 1)
        .unwrap();
    assert_eq!(s.runtime_session_id, "openphone:dev:phone-sess-1");
    let s = store
        .update_session_status(
            "phone-sess-1",
            SessionStatus::WaitingForRuntime,
            None,
            T0 + 2,
        )
        .unwrap();
    assert_eq!(
        (s.status, s.updated_at_ms),
        (SessionStatus::WaitingForRuntime, T0 + 2)
    );
    let s = store
        .update_session_status(
            "phone-sess-1",
            SessionStatus::Failed,
            Some("runtime disconnected"),
            T0 + 3,
        )
        .unwrap();
    assert_eq!(s.failure_reason.as_deref(), Some("runtime disconnected"));

    let missing = store
        .update_session_status("nope", SessionStatus::Running, None, T0)
        .unwrap_err();
    assert!(matches!(
        missing,
        StoreError::NotFound {
            table: "phone_sessions",
            ..
        }
    ));
    assert!(
        store
            .set_session_runtime_session_id("nope", "x", T0)
            .is_err()
    );
    assert_eq!(store.get_session("nope").unwrap(), None);

    drop(store);
    let store = open(&dir);
    assert_eq!(store.get_session("phone-sess-1").unwrap(), Some(s));
}

#[test]
fn list_filters_newest_first() {
    let dir = temp();
    let store = open(&dir);
    for i in 0..6 {
        let runtime = if i % 2 == 0 { "openclaw" } else { "builtin" };
        store
            .create_session(&new_session(&format!("phone-sess-{i}"), runtime), T0 + i)
            .unwrap();
    }
    store
        .update_session_status("phone-sess-4", SessionStatus::Running, None, T0 + 10)
        .unwrap();
    let ids = |v: Vec<PhoneSession>| {
        v.into_iter()
            .map(|s| s.phone_session_id)
            .collect::<Vec<_>>()
    };

    assert_eq!(
        ids(store.list_sessions(&SessionFilter::default()).unwrap()),
        [
            "phone-sess-5",
            "phone-sess-4",
            "phone-sess-3",
            "phone-sess-2",
            "phone-sess-1",
            "phone-sess-0"
        ]
    );
    let filter = SessionFilter {
        runtime: Some("openclaw".to_owned()),
        ..Default::default()
    };
    assert_eq!(
        ids(store.list_sessions(&filter).unwrap()),
        ["phone-sess-4", "phone-sess-2", "phone-sess-0"]
    );
    let filter = SessionFilter {
        status: Some(SessionStatus::Running),
        ..Default::default()
    };
    assert_eq!(ids(store.list_sessions(&filter).unwrap()), ["phone-sess-4"]);
    let filter = SessionFilter {
        limit: Some(2),
        ..Default::default()
    };
    assert_eq!(
        ids(store.list_sessions(&filter).unwrap()),
        ["phone-sess-5", "phone-sess-4"]
    );
}

#[test]
fn disconnect_fails_only_active_sessions_of_that_runtime() {
    let dir = temp();
    let store = open(&dir);
    store
        .create_session(&new_session("a", "openclaw"), T0)
        .unwrap();
    store
        .create_session(&new_session("b", "openclaw"), T0 + 1)
        .unwrap();
    store
        .create_session(&new_session("c", "builtin"), T0 + 2)
        .unwrap();
    store
        .update_session_status("b", SessionStatus::Completed, None, T0 + 3)
        .unwrap();
    let failed = store
        .fail_active_sessions("openclaw", "runtime openclaw disconnected", T0 + 4)
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].phone_session_id, "a");
    assert_eq!(failed[0].status, SessionStatus::Failed);
    assert_eq!(
        store.get_session("b").unwrap().unwrap().status,
        SessionStatus::Completed
    );
    assert_eq!(
        store.get_session("c").unwrap().unwrap().status,
        SessionStatus::Created
    );
    assert!(SessionStatus::Running.is_active() && !SessionStatus::Failed.is_active());
}

#[test]
fn prune_keeps_at_least_the_200_most_recent() {
    let dir = temp();
    let store: Store = open(&dir);
    for i in 0..230 {
        store
            .create_session(&new_session(&format!("s-{i:03}"), "builtin"), T0 + i)
            .unwrap();
    }
    // Asking for fewer than 200 still keeps 200.
    assert_eq!(store.prune_sessions(10).unwrap(), 30);
    let all = store.list_sessions(&SessionFilter::default()).unwrap();
    assert_eq!(all.len(), 200);
    assert_eq!(all.last().unwrap().phone_session_id, "s-030");
    assert!(store.get_session("s-029").unwrap().is_none());
    assert_eq!(store.prune_sessions(200).unwrap(), 0);
}

/// Review of issue 15: status writes were read-then-write, so a message or a resume racing a
/// cancel moved a failed session back to running. The guarded writes decide in one statement.
#[test]
fn guarded_status_writes_never_bring_a_failed_session_back() {
    let dir = temp();
    let store = open(&dir);
    store
        .create_session(&new_session("s1", "hermes"), T0)
        .unwrap();
    store
        .update_session_status("s1", SessionStatus::Failed, Some("cancelled"), T0 + 1)
        .unwrap();
    assert_eq!(
        store
            .update_active_session_status("s1", SessionStatus::Running, None, T0 + 2)
            .unwrap(),
        None
    );
    assert_eq!(store.reopen_session("s1", T0 + 3).unwrap(), None);
    let s = store.get_session("s1").unwrap().unwrap();
    assert_eq!(s.status, SessionStatus::Failed);
    assert_eq!(s.failure_reason.as_deref(), Some("cancelled"));

    // A completed session is re-opened by a follow-up, but not by a late message.
    store
        .create_session(&new_session("s2", "hermes"), T0)
        .unwrap();
    store
        .update_session_status("s2", SessionStatus::Completed, None, T0 + 1)
        .unwrap();
    assert_eq!(
        store
            .update_active_session_status("s2", SessionStatus::Running, None, T0 + 2)
            .unwrap(),
        None
    );
    let reopened = store.reopen_session("s2", T0 + 3).unwrap().unwrap();
    assert_eq!(reopened.status, SessionStatus::Running);
    assert!(matches!(
        store.update_active_session_status("nope", SessionStatus::Running, None, T0),
        Err(StoreError::NotFound { .. })
    ));
}
