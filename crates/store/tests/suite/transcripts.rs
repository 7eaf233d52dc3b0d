//! Session transcripts: numbered per session, durable, refused for unknown sessions and bad
//! roles, gone with their session.

use openphone_store::{Autonomy, MIN_SESSIONS_RETAINED, NewPhoneSession, Store, StoreError};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{T0, open, temp};

fn session(store: &Store, id: &str, at: i64) {
    store
        .create_session(
            &NewPhoneSession {
                phone_session_id: id.into(),
                runtime_kind: "builtin".into(),
                runtime_session_id: id.into(),
                attention_id: format!("attn-{id}"),
                source: "chat".into(),
                autonomy: Autonomy::AskBeforeAction,
                summary: "hi".into(),
            },
            at,
        )
        .unwrap();
}

#[test]
fn entries_are_numbered_per_session_and_survive_a_reopen() {
    let dir = temp();
    {
        let store = open(&dir);
        session(&store, "a", T0);
        session(&store, "b", T0);
        let first = store
            .append_transcript("a", "user", &json!({"content": "hello"}), T0 + 10)
            .unwrap();
        assert_eq!(
            (
                first.phone_session_id.as_str(),
                first.seq,
                first.role.as_str()
            ),
            ("a", 1, "user")
        );
        assert_eq!(first.body, json!({"content": "hello"}));
        store
            .append_transcript("b", "user", &json!({"content": "other"}), T0 + 11)
            .unwrap();
        let second = store
            .append_transcript("a", "assistant", &json!({"content": "hi"}), T0 + 12)
            .unwrap();
        assert_eq!(second.seq, 2);
    }
    let store = open(&dir);
    let a = store.transcript("a").unwrap();
    assert_eq!(
        a.iter()
            .map(|e| (e.seq, e.role.as_str(), e.created_at_ms))
            .collect::<Vec<_>>(),
        [(1, "user", T0 + 10), (2, "assistant", T0 + 12)]
    );
    assert_eq!(a[1].body, json!({"content": "hi"}));
    assert_eq!(store.transcript("b").unwrap().len(), 1);
    assert!(store.transcript("nobody").unwrap().is_empty());
    let third = store
        .append_transcript("a", "tool", &json!({"ok": true}), T0 + 13)
        .unwrap();
    assert_eq!(third.seq, 3);
}

#[tokio::test]
async fn unknown_sessions_and_bad_roles_are_refused() {
    let dir = temp();
    let store = open(&dir);
    let err = store
        .append_transcript_async("ghost", "user", &json!({}), T0)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NotFound {
                table: "phone_sessions",
                ..
            }
        ),
        "{err}"
    );
    session(&store, "s", T0);
    for role in ["", "User", "tool call", &"x".repeat(33)] {
        let err = store
            .append_transcript("s", role, &json!({}), T0)
            .unwrap_err();
        assert!(matches!(err, StoreError::Invalid { .. }), "{role:?}: {err}");
    }
    assert!(store.transcript("s").unwrap().is_empty());
    let entry = store
        .append_transcript_async("s", "tool_2", &json!({"ok": true}), T0 + 2)
        .await
        .unwrap();
    assert_eq!(entry.seq, 1);
    assert_eq!(store.transcript("s").unwrap(), vec![entry]);
}

#[test]
fn pruning_a_session_drops_its_transcript() {
    let dir = temp();
    let store = open(&dir);
    for i in 0..=MIN_SESSIONS_RETAINED {
        session(&store, &format!("s{i:04}"), T0 + i64::try_from(i).unwrap());
    }
    store
        .append_transcript("s0000", "user", &json!({}), T0)
        .unwrap();
    store
        .append_transcript("s0001", "user", &json!({}), T0)
        .unwrap();
    assert_eq!(store.prune_sessions(0).unwrap(), 1);
    assert!(store.get_session("s0000").unwrap().is_none());
    assert!(store.transcript("s0000").unwrap().is_empty());
    assert_eq!(store.transcript("s0001").unwrap().len(), 1);
    // A session created again under the pruned id starts its transcript afresh.
    session(&store, "s0000", T0 + 1_000);
    let entry = store
        .append_transcript("s0000", "user", &json!({}), T0 + 1_001)
        .unwrap();
    assert_eq!(entry.seq, 1);
}
