//! Durable watchers.

use openphone_store::{
    AuditEntry, AuditKind, FireOutcome, FiringIds, JobQuota, JobType, NewAgentJob, NewFiring,
    NewWatcher, RecordedFiring, StoreError, WatcherRecord, WatcherSelector, WatcherState,
};
use pretty_assertions::assert_eq;
use serde_json::{Map, json};

use super::support::{T0, open, temp};

fn watcher(params: serde_json::Value) -> NewWatcher {
    NewWatcher {
        runtime: "openclaw".to_owned(),
        params,
    }
}

#[test]
fn create_derives_fields_and_survives_restart() {
    let dir = temp();
    let store = open(&dir);
    let w = store
        .create_watcher(
            &watcher(
                json!({"source": "message", "address": "+351900000000", "title": "Reply from Ana",
                            "reason": "user asked", "_runtime": "openclaw", "notify_on": "reply"}),
            ),
            T0,
        )
        .unwrap();
    assert_eq!(
        w,
        WatcherRecord {
            watcher_id: w.watcher_id,
            runtime: "openclaw".to_owned(),
            title: "Reply from Ana".to_owned(),
            source: "message".to_owned(),
            params: json!({"source": "message", "address": "+351900000000", "title": "Reply from Ana", "notify_on": "reply"}),
            state: WatcherState::Active,
            created_at_ms: T0,
            stopped_at_ms: None,
            fire_count: 0,
            last_fired_at_ms: None,
            cursor: json!({}),
            end_reason: None,
        }
    );
    let legacy = store
        .create_watcher(
            &watcher(json!({"type": "web_change", "url": "https://example.org"})),
            T0 + 1,
        )
        .unwrap();
    assert_eq!(
        (legacy.source.as_str(), legacy.title.as_str()),
        ("web", "https://example.org")
    );
    let bare = store.create_watcher(&watcher(json!({})), T0 + 2).unwrap();
    assert_eq!(
        (bare.source.as_str(), bare.title.as_str()),
        ("unknown", "unknown watcher")
    );
    assert!(matches!(
        store.create_watcher(&watcher(json!([1])), T0).unwrap_err(),
        StoreError::Invalid { .. }
    ));

    drop(store);
    let store = open(&dir);
    assert_eq!(store.get_watcher(w.watcher_id).unwrap(), Some(w));
}

#[test]
fn list_and_stop_by_id_query_and_all() {
    let dir = temp();
    let store = open(&dir);
    let a = store
        .create_watcher(
            &watcher(json!({"source": "message", "title": "Reply from Ana"})),
            T0,
        )
        .unwrap();
    let b = store
        .create_watcher(
            &watcher(
                json!({"source": "web", "title": "Price drop", "url": "https://shop.example"}),
            ),
            T0,
        )
        .unwrap();
    let c = store
        .create_watcher(
            &watcher(json!({"source": "call", "title": "Call from the bank"})),
            T0,
        )
        .unwrap();
    let ids = |v: Vec<WatcherRecord>| v.into_iter().map(|w| w.watcher_id).collect::<Vec<_>>();

    assert_eq!(
        ids(store.list_watchers(None, None).unwrap()),
        [c.watcher_id, b.watcher_id, a.watcher_id]
    );
    assert_eq!(
        ids(store.list_watchers(Some("SHOP"), None).unwrap()),
        [b.watcher_id]
    );
    assert_eq!(
        ids(store.list_watchers(Some("call"), None).unwrap()),
        [c.watcher_id]
    );
    assert_eq!(
        ids(store.list_watchers(None, Some(1)).unwrap()),
        [c.watcher_id]
    );

    let stopped = store
        .stop_watchers(&WatcherSelector::Id(a.watcher_id), T0 + 5)
        .unwrap();
    assert_eq!(stopped.len(), 1);
    assert_eq!(
        (stopped[0].state, stopped[0].stopped_at_ms),
        (WatcherState::Stopped, Some(T0 + 5))
    );
    // Stopping again finds nothing; stopped ones are not listed as active.
    assert!(
        store
            .stop_watchers(&WatcherSelector::Id(a.watcher_id), T0 + 6)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        ids(store.list_watchers(None, None).unwrap()),
        [c.watcher_id, b.watcher_id]
    );
    assert_eq!(
        store.get_watcher(a.watcher_id).unwrap().unwrap().state,
        WatcherState::Stopped
    );

    assert_eq!(
        ids(store
            .stop_watchers(&WatcherSelector::Query("price".to_owned()), T0 + 7)
            .unwrap()),
        [b.watcher_id]
    );
    assert!(matches!(
        store
            .stop_watchers(&WatcherSelector::Query(" ".to_owned()), T0)
            .unwrap_err(),
        StoreError::Invalid { .. }
    ));
    store
        .create_watcher(
            &watcher(json!({"source": "time", "title": "Stand up"})),
            T0 + 8,
        )
        .unwrap();
    assert_eq!(
        store
            .stop_watchers(&WatcherSelector::All, T0 + 9)
            .unwrap()
            .len(),
        2
    );
    assert!(store.list_watchers(None, None).unwrap().is_empty());

    drop(store);
    let store = open(&dir);
    assert!(store.list_watchers(None, None).unwrap().is_empty());
    assert_eq!(
        store.get_watcher(c.watcher_id).unwrap().unwrap().state,
        WatcherState::Stopped
    );
}

fn new_firing(watcher_id: i64, key: &str, at: i64, end: bool) -> NewFiring {
    NewFiring {
        watcher_id,
        dedupe_key: key.to_owned(),
        fired_at_ms: at,
        trigger: "event".to_owned(),
        event: json!({"kind": "message_received", "text": "hi"}),
        reaction: "attention".to_owned(),
        end,
        cursor: Some(json!({"seen": key})),
        job: None,
    }
}

/// The audit record of a firing (the PostgreSQL fleet tests use it too).
pub(crate) fn audit_of(ids: &FiringIds) -> AuditEntry {
    AuditEntry {
        audit_id: format!("watcher:{}:{}", ids.watcher_id, ids.firing),
        kind: AuditKind::BackgroundEvent,
        at_ms: T0,
        runtime: "builtin".to_owned(),
        request_id: format!("watcher-{}-{}", ids.watcher_id, ids.firing),
        tool: Some("watcher.fired".to_owned()),
        policy_proof: Some(json!({"watcher_id": ids.watcher_id, "job_id": ids.job_id})),
        ..AuditEntry::default()
    }
}

#[test]
fn a_firing_is_recorded_once_with_its_audit_record_and_ends_a_one_shot_watcher() {
    let dir = temp();
    let store = open(&dir);
    let w = store
        .create_watcher(&watcher(json!({"source": "message", "title": "Ana"})), T0)
        .unwrap();
    let FireOutcome::Fired(recorded) = store
        .fire_watcher(new_firing(w.watcher_id, "msg:1", T0 + 10, true), audit_of)
        .unwrap()
    else {
        panic!("not fired");
    };
    let RecordedFiring {
        firing,
        watcher: after,
        job,
        audit,
    } = *recorded;
    assert_eq!(
        (firing.firing, firing.reaction_state.as_str()),
        (1, "pending")
    );
    assert_eq!(job, None);
    assert_eq!(audit.entry.tool.as_deref(), Some("watcher.fired"));
    assert_eq!(audit.entry.kind, AuditKind::BackgroundEvent);
    assert_eq!(after.state, WatcherState::Stopped);
    assert_eq!(after.end_reason.as_deref(), Some("fired"));
    assert_eq!(
        (after.fire_count, after.last_fired_at_ms),
        (1, Some(T0 + 10))
    );
    assert_eq!(after.cursor, json!({"seen": "msg:1"}));
    // Ended: a second trigger finds it inactive, and nothing more is written.
    assert_eq!(
        store
            .fire_watcher(new_firing(w.watcher_id, "msg:2", T0 + 20, true), audit_of)
            .unwrap(),
        FireOutcome::NotActive
    );
    assert_eq!(store.watcher_firings(w.watcher_id).unwrap().len(), 1);
    assert_eq!(
        store
            .find_audit(&format!("watcher:{}:1", w.watcher_id))
            .unwrap()
            .len(),
        1
    );
    assert!(store.verify_audit().unwrap().is_intact());

    // The reaction that had not run is found after a restart, settled once.
    drop(store);
    let store = open(&dir);
    let pending = store.pending_watcher_reactions().unwrap();
    assert_eq!(pending, vec![firing.clone()]);
    assert!(
        store
            .finish_watcher_reaction(w.watcher_id, 1, false, "phone-sess-9")
            .unwrap()
    );
    assert!(
        !store
            .finish_watcher_reaction(w.watcher_id, 1, true, "again")
            .unwrap()
    );
    assert!(store.pending_watcher_reactions().unwrap().is_empty());
    let settled = &store.watcher_firings(w.watcher_id).unwrap()[0];
    assert_eq!(
        (
            settled.reaction_state.as_str(),
            settled.reaction_note.as_str()
        ),
        ("done", "phone-sess-9")
    );
}

#[test]
fn a_recurring_watcher_fires_per_trigger_and_never_twice_for_one() {
    let dir = temp();
    let store = open(&dir);
    let w = store
        .create_watcher(
            &watcher(json!({"source": "message", "title": "any sms"})),
            T0,
        )
        .unwrap();
    for (i, key) in ["m:1", "m:2"].iter().enumerate() {
        assert!(matches!(
            store
                .fire_watcher(
                    new_firing(w.watcher_id, key, T0 + i as i64, false),
                    audit_of
                )
                .unwrap(),
            FireOutcome::Fired(_)
        ));
    }
    assert_eq!(
        store
            .fire_watcher(new_firing(w.watcher_id, "m:1", T0 + 5, false), audit_of)
            .unwrap(),
        FireOutcome::Duplicate
    );
    let after = store.get_watcher(w.watcher_id).unwrap().unwrap();
    assert_eq!((after.state, after.fire_count), (WatcherState::Active, 2));
    // A stopped watcher never fires.
    store
        .stop_watchers(&WatcherSelector::Id(w.watcher_id), T0 + 6)
        .unwrap();
    assert_eq!(
        store
            .fire_watcher(new_firing(w.watcher_id, "m:3", T0 + 7, false), audit_of)
            .unwrap(),
        FireOutcome::NotActive
    );
    assert_eq!(
        store
            .get_watcher(w.watcher_id)
            .unwrap()
            .unwrap()
            .end_reason
            .as_deref(),
        Some("stopped")
    );
}

#[test]
fn a_firing_creates_its_job_in_the_same_transaction() {
    let dir = temp();
    let store = open(&dir);
    let w = store
        .create_watcher(&watcher(json!({"source": "call", "title": "bank"})), T0)
        .unwrap();
    let new_job = |title: String| NewAgentJob {
        job_type: JobType::AgentTurn,
        title,
        prompt: "Look into it".to_owned(),
        payload_json: Map::new(),
        schedule_json: Map::new(),
        session_target: "isolated".to_owned(),
        delivery_json: json!({"mode": "notification"}).as_object().unwrap().clone(),
        next_run_at: T0 + 15_000,
        created_by: "operator".to_owned(),
    };
    let job = new_job(format!("Watcher {}: bank", w.watcher_id));
    let mut new = new_firing(w.watcher_id, "call:1", T0, true);
    new.job = Some((job, JobQuota::for_max(1000)));
    new.reaction = "agent_job".to_owned();
    let FireOutcome::Fired(recorded) = store.fire_watcher(new, audit_of).unwrap() else {
        panic!("not fired");
    };
    let RecordedFiring {
        firing, job, audit, ..
    } = *recorded;
    let job = job.unwrap();
    assert_eq!(firing.job_id, Some(job.job.id));
    assert_eq!(firing.reaction_state, "done");
    assert_eq!(audit.entry.policy_proof.unwrap()["job_id"], job.job.id);
    assert_eq!(
        store.get_job(job.job.id).unwrap().unwrap().job.title,
        job.job.title
    );

    // A job the store cannot take (the limit reached by live jobs) leaves no firing either.
    let w2 = store
        .create_watcher(&watcher(json!({"source": "call", "title": "bank 2"})), T0)
        .unwrap();
    let mut full = new_firing(w2.watcher_id, "call:1", T0, true);
    full.job = Some((new_job("over the limit".to_owned()), JobQuota::for_max(1)));
    assert!(store.fire_watcher(full, audit_of).is_err());
    assert!(store.watcher_firings(w2.watcher_id).unwrap().is_empty());
    assert_eq!(
        store
            .get_watcher(w2.watcher_id)
            .unwrap()
            .unwrap()
            .fire_count,
        0
    );
}

#[test]
fn cursor_and_end_without_a_firing() {
    let dir = temp();
    let store = open(&dir);
    let w = store
        .create_watcher(&watcher(json!({"source": "web", "title": "page"})), T0)
        .unwrap();
    assert!(
        store
            .set_watcher_cursor(w.watcher_id, &json!({"hash": "abc"}))
            .unwrap()
    );
    assert_eq!(
        store.get_watcher(w.watcher_id).unwrap().unwrap().cursor,
        json!({"hash": "abc"})
    );
    let ended = store
        .end_watcher(w.watcher_id, "deadline_passed", T0 + 9)
        .unwrap()
        .unwrap();
    assert_eq!(
        (ended.state, ended.end_reason.as_deref(), ended.fire_count),
        (WatcherState::Stopped, Some("deadline_passed"), 0)
    );
    assert_eq!(
        store.end_watcher(w.watcher_id, "again", T0 + 10).unwrap(),
        None
    );
    assert!(!store.set_watcher_cursor(w.watcher_id, &json!({})).unwrap());
}
