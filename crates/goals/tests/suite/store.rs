//! The goal tables: compare-and-set on `version`, transitions and reports written with the
//! document, report delivery state.

use openphone_store::{NewGoalReport, NewGoalTransition, ReportDelivery, StoreError, StoredGoal};
use serde_json::json;

use super::support::Harness;

fn row(id: &str) -> StoredGoal {
    StoredGoal {
        goal_id: id.to_owned(),
        state: "active".to_owned(),
        version: 0,
        deadline_at_ms: Some(5_000),
        created_at_ms: 1_000,
        updated_at_ms: 1_000,
        goal: json!({"id": id}),
        host: None,
    }
}

fn transition(action: &str) -> NewGoalTransition {
    NewGoalTransition {
        action_id: action.to_owned(),
        from_state: "READY".to_owned(),
        to_state: "RUNNING".to_owned(),
        source: "policy".to_owned(),
        reason: "allowed".to_owned(),
        at_ms: 2_000,
    }
}

#[test]
fn a_stale_version_is_a_conflict_and_writes_nothing() {
    let h = Harness::new();
    let created = h.store.create_goal(&row("goal_A"), vec![], vec![]).unwrap();
    assert_eq!(created.version, 1);
    assert!(matches!(
        h.store.create_goal(&row("goal_A"), vec![], vec![]),
        Err(StoreError::AlreadyExists { .. })
    ));
    let mut next = created.clone();
    next.state = "blocked".to_owned();
    let written = h
        .store
        .update_goal(&next, vec![transition("a")], vec![])
        .unwrap();
    assert_eq!(written.version, 2);
    // A writer that read version 1 loses.
    let mut stale = created;
    stale.state = "done".to_owned();
    let err = h
        .store
        .update_goal(&stale, vec![transition("b")], vec![])
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    let stored = h.store.get_goal("goal_A").unwrap().unwrap();
    assert_eq!((stored.state.as_str(), stored.version), ("blocked", 2));
    let log = h.store.goal_transitions("goal_A").unwrap();
    assert_eq!(
        log.len(),
        1,
        "the losing write's transition was not appended"
    );
    assert_eq!((log[0].seq, log[0].transition.action_id.as_str()), (1, "a"));
    let mut missing = row("goal_missing");
    missing.version = 1;
    assert!(matches!(
        h.store.update_goal(&missing, vec![], vec![]),
        Err(StoreError::NotFound { .. })
    ));
}

#[test]
fn reports_keep_their_own_delivery_state() {
    let h = Harness::new();
    let created = h.store.create_goal(&row("goal_R"), vec![], vec![]).unwrap();
    let report = |n: i64| NewGoalReport {
        channel: "telegram".to_owned(),
        report: json!({"n": n}),
        delivery: ReportDelivery::Pending,
        created_at_ms: n,
    };
    h.store
        .update_goal(&created, vec![], vec![report(1), report(2)])
        .unwrap();
    assert_eq!(h.store.pending_goal_reports(10).unwrap().len(), 2);
    h.store
        .set_goal_report_delivery("goal_R", 1, ReportDelivery::Failed, "HTTP 502")
        .unwrap();
    h.store
        .set_goal_report_delivery("goal_R", 2, ReportDelivery::Sent, "")
        .unwrap();
    let reports = h.store.goal_reports("goal_R").unwrap();
    assert_eq!(reports[0].delivery, ReportDelivery::Failed);
    assert_eq!(
        (reports[0].attempts, reports[0].last_error.as_str()),
        (1, "HTTP 502")
    );
    assert_eq!(reports[1].delivery, ReportDelivery::Sent);
    assert!(h.store.pending_goal_reports(10).unwrap().is_empty());
    assert!(matches!(
        h.store
            .set_goal_report_delivery("goal_R", 9, ReportDelivery::Sent, ""),
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(h.store.list_goals(&["active"], None).unwrap().len(), 1);
    assert!(h.store.list_goals(&["done"], None).unwrap().is_empty());
}
