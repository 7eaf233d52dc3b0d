//! A restart neither loses nor repeats a firing.

use openphone_store::{FireOutcome, NewFiring, WatcherState};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{BOB, Harness, message, operator};

#[tokio::test]
async fn a_restart_does_not_repeat_a_firing() {
    let h = Harness::new();
    let w = h
        .watcher(
            json!({"title": "Every SMS", "source": "message", "match_any": true,
                        "recurring": true}),
        )
        .await;
    let events = h.phone.inject_all(&message(BOB, "once")).unwrap();
    assert_eq!(h.feed(&events).await.len(), 1);
    let h = h.restart();
    // The same event delivered again after the restart (a replayed stream) fires nothing.
    assert!(h.feed(&events).await.is_empty());
    assert_eq!(h.watcher_now(w.watcher_id).fire_count, 1);
    // A time watcher that fired before the stop does not fire again after it.
    let t = h.now() + 1_000;
    let timer = h
        .watcher(json!({"title": "ping", "source": "time", "next_run_at": t}))
        .await;
    assert_eq!(h.watchers.tick(t).await.len(), 1);
    let h = h.restart();
    assert!(h.watchers.tick(t + 5_000).await.is_empty());
    assert_eq!(h.watcher_now(timer.watcher_id).fire_count, 1);
}

#[tokio::test]
async fn a_restart_does_not_lose_a_firing() {
    let h = Harness::new();
    let (silent, deadline) = h.bob_no_reply_watcher().await;
    let bell = h
        .watcher_as(
            &operator(),
            json!({"title": "bell", "source": "message", "match_any": true}),
        )
        .await;
    // A firing recorded just before a crash, whose attention reaction never went out.
    let recorded = h
        .store
        .fire_watcher(
            NewFiring {
                watcher_id: bell.watcher_id,
                dedupe_key: "event:crash".into(),
                fired_at_ms: h.now(),
                trigger: "event".into(),
                event: json!({"kind": "message_received", "text": "before the crash"}),
                reaction: "attention".into(),
                end: true,
                cursor: None,
                job: None,
            },
            |ids| openphone_store::AuditEntry {
                audit_id: format!("watcher:{}:{}", ids.watcher_id, ids.firing),
                tool: Some("watcher.fired".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(matches!(recorded, FireOutcome::Fired(_)));
    let h = h.restart();
    assert_eq!(h.watchers.recover().await, 1);
    let attended = h.recorder.attended.lock().unwrap().clone();
    assert_eq!(attended.len(), 1);
    assert!(
        serde_json::to_string(&attended[0].context)
            .unwrap()
            .contains("before the crash")
    );
    assert!(h.store.pending_watcher_reactions().unwrap().is_empty());
    assert_eq!(h.watchers.recover().await, 0, "delivered once");
    // The deadline set before the restart still fires after it.
    h.clock.set(deadline);
    let fired = h.watchers.tick(deadline).await;
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].watcher_id, silent.watcher_id);
    assert_eq!(
        h.watcher_now(silent.watcher_id).state,
        WatcherState::Stopped
    );
}
