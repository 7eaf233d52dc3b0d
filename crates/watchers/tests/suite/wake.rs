//! The `[wake]` sender allowlists at the watchers engine: a message or a notification from a
//! sender off the list fires no watcher and leaves a `wake.dropped` audit record; one on the
//! list fires as before; a reply that only ends a `no_reply` watcher is not refused.

use openphone_core::WakeConfig;
use openphone_device::Injection;
use openphone_store::WatcherState;
use serde_json::{Value, json};

use super::support::{BOB, Harness, message, operator};

fn dropped(h: &Harness) -> Vec<Value> {
    h.store
        .export_audit(0, 1000)
        .unwrap()
        .into_iter()
        .filter(|r| r.entry.tool.as_deref() == Some("wake.dropped"))
        .map(|r| r.entry.policy_proof.unwrap_or(Value::Null))
        .collect()
}

#[tokio::test]
async fn a_sender_off_the_allowlist_fires_nothing_and_the_drop_is_audited() {
    let h = Harness::new();
    h.bridge.set_wake_config(WakeConfig {
        contacts: Some(vec!["Alice Martin".into()]),
        apps: Some(vec!["Calendar".into()]),
    });
    let bob = h
        .watcher_as(
            &operator(),
            json!({"title": "Bob", "source": "message", "address": "Bob Nguyen"}),
        )
        .await;
    let any_app = h
        .watcher_as(
            &operator(),
            json!({"title": "Anything", "source": "notification", "match_any": true, "recurring": true}),
        )
        .await;
    assert!(h.inject(message(BOB, "running late")).await.is_empty());
    // The message, and the Messages app's notification of it (not on the apps list either).
    let drops = dropped(&h);
    assert_eq!(drops.len(), 2, "{drops:?}");
    assert_eq!(drops[1]["list"], "apps");
    assert_eq!(drops[1]["sender"]["app"], "Messages");
    assert_eq!(drops[0]["source"], "message");
    assert_eq!(drops[0]["list"], "contacts");
    assert_eq!(drops[0]["watcher_ids"], json!([bob.watcher_id]));
    assert!(!drops[0].to_string().contains("running late"));
    assert_eq!(h.watcher_now(bob.watcher_id).state, WatcherState::Active);

    // An app off the list: dropped, named by its package; one on the list fires.
    let parcel = Injection::Notification {
        app: "Parcel Tracker".into(),
        title: "Sale".into(),
        text: "50% off".into(),
    };
    assert!(h.inject(parcel).await.is_empty());
    let drops = dropped(&h);
    assert_eq!(drops.len(), 3);
    assert_eq!(drops[2]["list"], "apps");
    assert_eq!(drops[2]["sender"]["app"], "Parcel Tracker");
    let calendar = Injection::Notification {
        app: "Calendar".into(),
        title: "Dentist".into(),
        text: "in 1 h".into(),
    };
    let fired = h.inject(calendar).await;
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].watcher_id, any_app.watcher_id);
}

#[tokio::test]
async fn an_allowlisted_sender_wakes_and_no_list_admits_everyone() {
    let h = Harness::new();
    let bob = h
        .watcher_as(
            &operator(),
            json!({"title": "Bob", "source": "message", "address": "Bob Nguyen", "recurring": true}),
        )
        .await;
    // No [wake] table: today's behaviour.
    assert_eq!(h.inject(message(BOB, "one")).await.len(), 1);
    h.bridge.set_wake_config(WakeConfig {
        contacts: Some(vec![BOB.into()]),
        apps: None,
    });
    let fired = h.inject(message(BOB, "two")).await;
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].watcher_id, bob.watcher_id);
    assert!(dropped(&h).is_empty());
}

#[tokio::test]
async fn a_reply_that_ends_a_no_reply_watcher_is_not_refused() {
    let h = Harness::new();
    h.bridge.set_wake_config(WakeConfig {
        contacts: Some(vec![]),
        apps: None,
    });
    let (w, _) = h.bob_no_reply_watcher().await;
    assert!(h.inject(message(BOB, "here I am")).await.is_empty());
    let after = h.watcher_now(w.watcher_id);
    assert_eq!(after.state, WatcherState::Stopped);
    assert_eq!(after.end_reason.as_deref(), Some("reply_received"));
    assert!(dropped(&h).is_empty());
}
