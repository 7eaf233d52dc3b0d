//! The goal tables (`goals`, `goal_transitions`, `goal_reports`): every write a compare-and-set
//! on the goal's version, transitions and reports numbered per goal and written with the document
//! or not at all, the document's text kept as written, listing order, report delivery states.

use openphone_store::{
    GoalText, NewGoalReport, NewGoalTransition, ReportDelivery, StoreError, StoredGoal,
};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{T0, open, temp};

fn goal(id: &str, state: &str, updated_at_ms: i64) -> StoredGoal {
    StoredGoal {
        goal_id: id.to_owned(),
        state: state.to_owned(),
        version: 0,
        deadline_at_ms: Some(T0 + 86_400_000),
        created_at_ms: T0,
        updated_at_ms,
        goal: json!({"id": id, "plan": {"nodes": [1, 2, 3]}}),
        host: None,
    }
}

fn transition(action: &str, at_ms: i64) -> NewGoalTransition {
    NewGoalTransition {
        action_id: action.to_owned(),
        from_state: "READY".to_owned(),
        to_state: "RUNNING".to_owned(),
        source: "policy".to_owned(),
        reason: format!("{action} allowed"),
        at_ms,
    }
}

fn report(n: i64, delivery: ReportDelivery, created_at_ms: i64) -> NewGoalReport {
    NewGoalReport {
        channel: "telegram".to_owned(),
        report: json!({"n": n}),
        delivery,
        created_at_ms,
    }
}

fn actions(store: &openphone_store::Store, id: &str) -> Vec<(i64, String)> {
    store
        .goal_transitions(id)
        .unwrap()
        .into_iter()
        .map(|t| (t.seq, t.transition.action_id))
        .collect()
}

#[test]
fn a_write_from_a_stale_version_is_a_conflict_and_writes_nothing() {
    let dir = temp();
    let store = open(&dir);
    let mut first = goal("goal_A", "active", T0);
    first.version = 7; // ignored: a new goal is version 1
    let created = store
        .create_goal(&first, vec![transition("plan", T0)], vec![])
        .unwrap();
    assert_eq!(created.version, 1);
    let again = store.create_goal(
        &goal("goal_A", "draft", T0 + 1),
        vec![transition("dup", T0 + 1)],
        vec![report(0, ReportDelivery::Pending, T0 + 1)],
    );
    assert!(
        matches!(again, Err(StoreError::AlreadyExists { table: "goals", .. })),
        "{again:?}"
    );
    let mut next = created.clone();
    next.state = "blocked".to_owned();
    next.updated_at_ms = T0 + 10;
    let written = store
        .update_goal(
            &next,
            vec![transition("a", T0 + 10)],
            vec![report(1, ReportDelivery::Pending, T0 + 10)],
        )
        .unwrap();
    assert_eq!(written.version, 2);
    assert_eq!(store.goal_version("goal_A").unwrap(), Some(2));

    // A writer that computed its document from version 1 loses, and nothing of it is kept.
    let mut stale = created;
    stale.state = "done".to_owned();
    stale.updated_at_ms = T0 + 20;
    let err = store
        .update_goal(
            &stale,
            vec![transition("b", T0 + 20)],
            vec![report(2, ReportDelivery::Pending, T0 + 20)],
        )
        .unwrap_err();
    match &err {
        StoreError::Conflict { table, id, detail } => {
            assert_eq!((*table, id.as_str()), ("goals", "goal_A"));
            assert!(
                detail.contains("version 1") && detail.contains("version is 2"),
                "{detail}"
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let stored = store.get_goal("goal_A").unwrap().unwrap();
    assert_eq!(
        (stored.state.as_str(), stored.version, stored.updated_at_ms),
        ("blocked", 2, T0 + 10)
    );
    assert_eq!(
        actions(&store, "goal_A"),
        vec![(1, "plan".to_owned()), (2, "a".to_owned())],
        "neither the duplicate creation's nor the losing write's transition was appended"
    );
    let reports = store.goal_reports("goal_A").unwrap();
    assert_eq!(
        reports.iter().map(|r| r.report.clone()).collect::<Vec<_>>(),
        vec![json!({"n": 1})]
    );

    // The winner's version goes on.
    let mut third = written;
    third.state = "done".to_owned();
    assert_eq!(
        store.update_goal(&third, vec![], vec![]).unwrap().version,
        3
    );

    let mut missing = goal("goal_missing", "active", T0);
    missing.version = 1;
    let err = store.update_goal(&missing, vec![], vec![]).unwrap_err();
    assert!(
        matches!(&err, StoreError::NotFound { table: "goals", id } if id == "goal_missing"),
        "{err:?}"
    );
    assert_eq!(store.goal_version("goal_missing").unwrap(), None);
    assert!(store.get_goal("goal_missing").unwrap().is_none());
    assert!(store.goal_transitions("goal_missing").unwrap().is_empty());
}

#[test]
fn the_document_text_is_kept_as_written_and_must_be_an_object() {
    let dir = temp();
    let store = open(&dir);
    let created = store
        .create_goal(&goal("goal_T", "active", T0), vec![], vec![])
        .unwrap();
    let text = store.get_goal_text("goal_T").unwrap().unwrap();
    assert_eq!(text.version, 1);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text.goal_json).unwrap(),
        created.goal
    );

    // Text with its own key order and spacing comes back byte for byte.
    let doc = r#"{"z": 1, "a": {"nested": [true, null]}, "id": "goal_T"}"#;
    let next = GoalText {
        state: "blocked".to_owned(),
        updated_at_ms: T0 + 5,
        deadline_at_ms: None,
        goal_json: doc.to_owned(),
        ..text.clone()
    };
    let version = store
        .update_goal_text(next.clone(), vec![transition("t", T0 + 5)], vec![])
        .unwrap();
    assert_eq!(version, 2);
    let read = store.get_goal_text("goal_T").unwrap().unwrap();
    assert_eq!(
        read,
        GoalText {
            version: 2,
            ..next.clone()
        }
    );
    let parsed = store.get_goal("goal_T").unwrap().unwrap();
    assert_eq!(parsed.goal["a"]["nested"], json!([true, null]));
    assert_eq!(parsed.deadline_at_ms, None);

    // Text from the old version conflicts; text that is no object is refused before writing.
    assert!(matches!(
        store.update_goal_text(next.clone(), vec![], vec![]),
        Err(StoreError::Conflict { .. })
    ));
    for bad in ["[1, 2]", "\"text\"", "", "42"] {
        let err = store
            .update_goal_text(
                GoalText {
                    version: 2,
                    goal_json: bad.to_owned(),
                    ..next.clone()
                },
                vec![],
                vec![],
            )
            .unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{bad}: {err:?}");
    }
    let mut not_object = goal("goal_list", "active", T0);
    not_object.goal = json!(["a", "list"]);
    assert!(matches!(
        store.create_goal(&not_object, vec![], vec![]),
        Err(StoreError::Corrupt { .. })
    ));
    assert!(store.get_goal("goal_list").unwrap().is_none());
    let mut stored = store.get_goal("goal_T").unwrap().unwrap();
    stored.goal = json!(null);
    assert!(matches!(
        store.update_goal(&stored, vec![], vec![]),
        Err(StoreError::Corrupt { .. })
    ));
    assert_eq!(store.goal_version("goal_T").unwrap(), Some(2));
    assert_eq!(
        store.get_goal_text("goal_T").unwrap().unwrap().goal_json,
        doc
    );
}

#[test]
fn transitions_and_reports_are_numbered_per_goal_in_write_order() {
    let dir = temp();
    let store = open(&dir);
    let a = store
        .create_goal(
            &goal("goal_A", "active", T0),
            vec![transition("a1", T0), transition("a2", T0)],
            vec![report(1, ReportDelivery::Pending, T0)],
        )
        .unwrap();
    let b = store
        .create_goal(
            &goal("goal_B", "active", T0),
            vec![transition("b1", T0)],
            vec![],
        )
        .unwrap();
    store
        .update_goal(
            &a,
            vec![transition("a3", T0 + 1)],
            vec![
                report(2, ReportDelivery::Suppressed, T0 + 1),
                report(3, ReportDelivery::Pending, T0 + 1),
            ],
        )
        .unwrap();
    store
        .update_goal(
            &b,
            vec![transition("b2", T0 + 2), transition("b3", T0 + 2)],
            vec![report(1, ReportDelivery::Pending, T0 + 2)],
        )
        .unwrap();
    assert_eq!(
        actions(&store, "goal_A"),
        vec![
            (1, "a1".to_owned()),
            (2, "a2".to_owned()),
            (3, "a3".to_owned())
        ]
    );
    assert_eq!(
        actions(&store, "goal_B"),
        vec![
            (1, "b1".to_owned()),
            (2, "b2".to_owned()),
            (3, "b3".to_owned())
        ]
    );
    let log = store.goal_transitions("goal_A").unwrap();
    assert_eq!(log[2].goal_id, "goal_A");
    assert_eq!(log[2].transition, transition("a3", T0 + 1));
    let reports = store.goal_reports("goal_A").unwrap();
    assert_eq!(
        reports
            .iter()
            .map(|r| (r.seq, r.report["n"].as_i64().unwrap(), r.delivery))
            .collect::<Vec<_>>(),
        vec![
            (1, 1, ReportDelivery::Pending),
            (2, 2, ReportDelivery::Suppressed),
            (3, 3, ReportDelivery::Pending)
        ]
    );
    assert_eq!(
        (
            reports[0].channel.as_str(),
            reports[0].attempts,
            reports[0].last_error.as_str(),
            reports[0].created_at_ms
        ),
        ("telegram", 0, "", T0)
    );
    let b_reports = store.goal_reports("goal_B").unwrap();
    assert_eq!(
        b_reports
            .iter()
            .map(|r| (r.goal_id.as_str(), r.seq))
            .collect::<Vec<_>>(),
        vec![("goal_B", 1)]
    );

    // A reopened store has them all, and numbering goes on from the last.
    drop(store);
    let store = open(&dir);
    let a = store.get_goal("goal_A").unwrap().unwrap();
    assert_eq!(a.version, 2);
    store
        .update_goal(&a, vec![transition("a4", T0 + 3)], vec![])
        .unwrap();
    assert_eq!(
        actions(&store, "goal_A").last().unwrap(),
        &(4, "a4".to_owned())
    );
}

#[test]
fn goals_list_newest_first_by_state_within_a_limit() {
    let dir = temp();
    let store = open(&dir);
    for (id, state, updated) in [
        ("goal_C", "active", T0 + 30),
        ("goal_A", "blocked", T0 + 10),
        ("goal_B", "active", T0 + 30),
        ("goal_D", "done", T0 + 40),
        ("goal_E", "active", T0 + 20),
    ] {
        store
            .create_goal(&goal(id, state, updated), vec![], vec![])
            .unwrap();
    }
    let ids = |states: &[&str], limit: Option<usize>| -> Vec<String> {
        store
            .list_goals(states, limit)
            .unwrap()
            .into_iter()
            .map(|g| g.goal_id)
            .collect()
    };
    // Most recently updated first; equal times by id.
    assert_eq!(
        ids(&[], None),
        ["goal_D", "goal_B", "goal_C", "goal_E", "goal_A"]
    );
    assert_eq!(ids(&["active"], None), ["goal_B", "goal_C", "goal_E"]);
    assert_eq!(ids(&["active", "blocked"], Some(2)), ["goal_B", "goal_C"]);
    assert_eq!(ids(&["done", "blocked"], None), ["goal_D", "goal_A"]);
    assert!(ids(&["cancelled"], None).is_empty());
    assert!(ids(&[], Some(0)).is_empty());

    // An update moves a goal to the front.
    let mut a = store.get_goal("goal_A").unwrap().unwrap();
    a.state = "active".to_owned();
    a.updated_at_ms = T0 + 50;
    store.update_goal(&a, vec![], vec![]).unwrap();
    assert_eq!(ids(&["active"], Some(3)), ["goal_A", "goal_B", "goal_C"]);
    let listed = store.list_goals(&["active"], Some(1)).unwrap();
    assert_eq!(listed[0], store.get_goal("goal_A").unwrap().unwrap());
    assert_eq!(listed[0].version, 2);
}

#[test]
fn report_delivery_states_are_kept_per_report_and_pending_ones_come_oldest_first() {
    let dir = temp();
    let store = open(&dir);
    let b = store
        .create_goal(
            &goal("goal_B", "active", T0),
            vec![],
            vec![
                report(1, ReportDelivery::Pending, T0 + 5),
                report(2, ReportDelivery::Suppressed, T0 + 1),
            ],
        )
        .unwrap();
    store
        .create_goal(
            &goal("goal_A", "active", T0),
            vec![],
            vec![report(1, ReportDelivery::Pending, T0 + 5)],
        )
        .unwrap();
    store
        .update_goal(&b, vec![], vec![report(3, ReportDelivery::Pending, T0 + 2)])
        .unwrap();
    let pending = |limit: usize| -> Vec<(String, i64)> {
        store
            .pending_goal_reports(limit)
            .unwrap()
            .into_iter()
            .map(|r| (r.goal_id, r.seq))
            .collect()
    };
    // Oldest first; equal times by goal, then number; a suppressed report is never pending.
    assert_eq!(
        pending(10),
        [
            ("goal_B".to_owned(), 3),
            ("goal_A".to_owned(), 1),
            ("goal_B".to_owned(), 1)
        ]
    );
    assert_eq!(pending(1), [("goal_B".to_owned(), 3)]);

    // A failed try keeps the report (and its error); a retry that succeeds counts as a try.
    store
        .set_goal_report_delivery("goal_B", 3, ReportDelivery::Failed, "HTTP 502")
        .unwrap();
    store
        .set_goal_report_delivery("goal_A", 1, ReportDelivery::Sent, "")
        .unwrap();
    assert_eq!(pending(10), [("goal_B".to_owned(), 1)]);
    store
        .set_goal_report_delivery("goal_B", 3, ReportDelivery::Pending, "retrying")
        .unwrap();
    assert_eq!(
        pending(10),
        [("goal_B".to_owned(), 3), ("goal_B".to_owned(), 1)]
    );
    store
        .set_goal_report_delivery("goal_B", 3, ReportDelivery::Sent, "")
        .unwrap();
    let reports = store.goal_reports("goal_B").unwrap();
    assert_eq!(
        reports
            .iter()
            .map(|r| (r.seq, r.delivery, r.attempts, r.last_error.as_str()))
            .collect::<Vec<_>>(),
        vec![
            (1, ReportDelivery::Pending, 0, ""),
            (2, ReportDelivery::Suppressed, 0, ""),
            (3, ReportDelivery::Sent, 3, "")
        ]
    );
    assert_eq!(reports[2].report, json!({"n": 3}));
    assert_eq!(
        store.goal_reports("goal_A").unwrap()[0].delivery,
        ReportDelivery::Sent
    );
    for (id, seq) in [("goal_B", 9), ("goal_missing", 1), ("goal_A", 0)] {
        let err = store
            .set_goal_report_delivery(id, seq, ReportDelivery::Sent, "")
            .unwrap_err();
        assert!(
            matches!(&err, StoreError::NotFound { table: "goal_reports", id: name } if *name == format!("{id}#{seq}")),
            "{err:?}"
        );
    }
    // Delivery never touches the goal itself.
    assert_eq!(store.goal_version("goal_B").unwrap(), Some(2));
}
