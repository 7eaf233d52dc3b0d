//! Durable watchers.

use openphone_store::{NewWatcher, StoreError, WatcherRecord, WatcherSelector, WatcherState};
use pretty_assertions::assert_eq;
use serde_json::json;

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
