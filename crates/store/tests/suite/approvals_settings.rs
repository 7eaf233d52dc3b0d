//! Standing approvals and runtime settings.

use openphone_store::{NewStandingApproval, Setting, StandingApproval, StoreError};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{T0, open, temp};

fn rule(runtime: &str, tool: &str, expires: Option<i64>) -> NewStandingApproval {
    NewStandingApproval {
        runtime: runtime.to_owned(),
        tool: tool.to_owned(),
        constraints: json!({"url": {"prefix": "https://example.org/"}}),
        expires_at_ms: expires,
        background: false,
        ..NewStandingApproval::default()
    }
}

#[test]
fn standing_approvals_crud_and_active_lookup() {
    let dir = temp();
    let store = open(&dir);
    let a = store
        .create_approval(&rule("openclaw", "openphone.url.open", None), T0)
        .unwrap();
    assert_eq!(
        a,
        StandingApproval {
            approval_id: a.approval_id,
            runtime: "openclaw".to_owned(),
            tool: "openphone.url.open".to_owned(),
            constraints: json!({"url": {"prefix": "https://example.org/"}}),
            expires_at_ms: None,
            background: false,
            enabled: true,
            created_at_ms: T0,
            updated_at_ms: T0,
            phone_session_id: None,
            confirmation_id: None,
            created_by: None,
            note: None,
            revoked_at_ms: None,
            revoked_by: None,
        }
    );
    let b = store
        .create_approval(&rule("openclaw", "openphone.url.open", Some(T0 + 100)), T0)
        .unwrap();
    let c = store
        .create_approval(
            &NewStandingApproval {
                background: true,
                ..rule("hermes", "openphone.url.open", None)
            },
            T0,
        )
        .unwrap();
    assert!(c.background);

    let ids = |v: Vec<StandingApproval>| v.into_iter().map(|a| a.approval_id).collect::<Vec<_>>();
    assert_eq!(
        ids(store
            .active_approvals("openclaw", "openphone.url.open", T0 + 50)
            .unwrap()),
        [a.approval_id, b.approval_id]
    );
    assert_eq!(
        ids(store
            .active_approvals("openclaw", "openphone.url.open", T0 + 100)
            .unwrap()),
        [a.approval_id]
    );
    assert!(b.is_active(T0 + 99) && !b.is_active(T0 + 100));
    assert_eq!(
        ids(store.list_approvals(None).unwrap()),
        [a.approval_id, b.approval_id, c.approval_id]
    );
    assert_eq!(
        ids(store.list_approvals(Some("hermes")).unwrap()),
        [c.approval_id]
    );

    let disabled = store
        .set_approval_enabled(a.approval_id, false, T0 + 1)
        .unwrap();
    assert!(!disabled.enabled && disabled.updated_at_ms == T0 + 1);
    assert!(
        store
            .active_approvals("openclaw", "openphone.url.open", T0 + 50)
            .unwrap()
            .iter()
            .all(|r| r.approval_id != a.approval_id)
    );
    assert!(matches!(
        store.set_approval_enabled(999, true, T0).unwrap_err(),
        StoreError::NotFound { .. }
    ));

    drop(store);
    let store = open(&dir);
    assert_eq!(store.get_approval(a.approval_id).unwrap(), Some(disabled));
    assert!(store.delete_approval(b.approval_id).unwrap());
    assert!(!store.delete_approval(b.approval_id).unwrap());
    assert_eq!(store.get_approval(b.approval_id).unwrap(), None);
}

#[test]
fn settings_set_get_list_delete_and_reopen() {
    let dir = temp();
    let store = open(&dir);
    assert_eq!(
        store.get_setting("runtime.openclaw.max_autonomy").unwrap(),
        None
    );
    store
        .set_setting(
            "runtime.openclaw.max_autonomy",
            &json!("trusted_actions"),
            T0,
        )
        .unwrap();
    store
        .set_setting("routing.chat", &json!({"runtime": "builtin"}), T0)
        .unwrap();
    store
        .set_setting("routing.chat", &json!({"runtime": "openclaw"}), T0 + 1)
        .unwrap();
    drop(store);
    let store = open(&dir);
    assert_eq!(
        store.get_setting("routing.chat").unwrap(),
        Some(json!({"runtime": "openclaw"}))
    );
    assert_eq!(
        store.list_settings().unwrap(),
        vec![
            Setting {
                key: "routing.chat".to_owned(),
                value: json!({"runtime": "openclaw"}),
                updated_at_ms: T0 + 1
            },
            Setting {
                key: "runtime.openclaw.max_autonomy".to_owned(),
                value: json!("trusted_actions"),
                updated_at_ms: T0
            },
        ]
    );
    assert!(store.delete_setting("routing.chat").unwrap());
    assert!(!store.delete_setting("routing.chat").unwrap());
    assert_eq!(store.list_settings().unwrap().len(), 1);
}

#[test]
fn revoking_keeps_the_row_disabled_with_who_and_when_and_is_idempotent() {
    let dir = temp();
    let store = open(&dir);
    let grant = store
        .create_approval(
            &NewStandingApproval {
                phone_session_id: Some("phone-session-1".to_owned()),
                confirmation_id: Some("runtime-confirm-1".to_owned()),
                created_by: Some("cli:operator".to_owned()),
                ..rule("hermes", "openphone.ui.tap", None)
            },
            T0,
        )
        .unwrap();
    assert!(grant.is_session_grant());
    assert_eq!(grant.phone_session_id.as_deref(), Some("phone-session-1"));
    let generation = store.approvals_generation();
    let revoked = store
        .revoke_approval(grant.approval_id, "cli:operator", T0 + 5)
        .unwrap();
    assert!(!revoked.enabled && !revoked.is_active(T0 + 6));
    assert_eq!(revoked.revoked_at_ms, Some(T0 + 5));
    assert_eq!(revoked.revoked_by.as_deref(), Some("cli:operator"));
    assert_ne!(store.approvals_generation(), generation);
    assert!(
        store
            .active_approvals("hermes", "openphone.ui.tap", T0 + 6)
            .unwrap()
            .is_empty()
    );
    // A second revoke keeps the first one's record.
    let again = store
        .revoke_approval(grant.approval_id, "ws:someone", T0 + 9)
        .unwrap();
    assert_eq!(again.revoked_at_ms, Some(T0 + 5));
    assert_eq!(again.revoked_by.as_deref(), Some("cli:operator"));
    assert!(matches!(
        store.revoke_approval(999_999, "cli:operator", T0),
        Err(StoreError::NotFound { .. })
    ));
}
