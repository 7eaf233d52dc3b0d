//! The outbox of deferred outcomes: forward-only moves, each won by one mover.

use openphone_store::{NewDeferredOutcome, OutcomeState, StoreError};
use serde_json::json;

use super::support::{T0, open, temp};

/// A deferred outcome of request `id` (the PostgreSQL fleet tests use it too).
pub(crate) fn row(id: &str) -> NewDeferredOutcome {
    NewDeferredOutcome {
        runtime: "openclaw".into(),
        request_id: id.into(),
        command: "openphone.clipboard.set".into(),
        params_digest: "{\"text\":\"x\"}".into(),
        session_key: Some("agent:main:main".into()),
        receipt: json!({"status": "pending_confirmation", "requestId": id}),
        first_result: json!({"status": "needs_confirmation"}),
    }
}

#[test]
fn a_deferred_outcome_moves_forward_once_and_is_listed_oldest_first() {
    let dir = temp();
    let store = open(&dir);
    store.insert_deferred_outcome(&row("c-2"), T0 + 5).unwrap();
    store.insert_deferred_outcome(&row("c-1"), T0).unwrap();
    let again = store.insert_deferred_outcome(&row("c-1"), T0).unwrap_err();
    assert!(matches!(again, StoreError::Invalid { .. }), "{again}");

    let waiting = store
        .list_deferred_outcomes("openclaw", &[OutcomeState::Waiting])
        .unwrap();
    let ids: Vec<_> = waiting
        .iter()
        .map(|r| r.request.request_id.as_str())
        .collect();
    assert_eq!(ids, ["c-1", "c-2"]);

    assert!(
        store
            .deferred_outcome_known("c-1", &json!({"status": "done"}), T0 + 10)
            .unwrap()
    );
    assert!(
        !store
            .deferred_outcome_known("c-1", &json!({"status": "other"}), T0 + 11)
            .unwrap()
    );
    let claim = |store: &openphone_store::Store| {
        store
            .move_deferred_outcome(
                "c-1",
                OutcomeState::Ready,
                OutcomeState::Posting,
                "",
                T0 + 12,
            )
            .unwrap()
    };
    assert!(claim(&store), "the first poster claims it");
    assert!(!claim(&store), "a second poster does not");
    assert!(
        store
            .move_deferred_outcome(
                "c-1",
                OutcomeState::Posting,
                OutcomeState::Posted,
                "",
                T0 + 13
            )
            .unwrap()
    );
    let back = store
        .move_deferred_outcome(
            "c-1",
            OutcomeState::Posted,
            OutcomeState::Ready,
            "",
            T0 + 14,
        )
        .unwrap_err();
    assert!(
        back.to_string()
            .contains("cannot move from posted to ready"),
        "{back}"
    );

    let done = store.get_deferred_outcome("c-1").unwrap().unwrap();
    assert_eq!(done.state, OutcomeState::Posted);
    assert_eq!(done.outcome, Some(json!({"status": "done"})));
    assert_eq!(store.get_deferred_outcome("nope").unwrap(), None);
    assert!(
        store
            .list_deferred_outcomes("hermes", &[])
            .unwrap()
            .is_empty()
    );
}
