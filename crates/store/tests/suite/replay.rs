//! Final results for replay, the request-id index, retention.

use openphone_store::{FinalResult, IdentityKey, RequestCheck, Retention, Scope, StoreError};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{T0, digest, identity, open, temp};

#[test]
fn identity_key_normalises_scope_and_key() {
    let k = IdentityKey::new(
        "openclaw",
        "  ",
        "openphone.url.open",
        digest("p"),
        "",
        "req-7",
    );
    assert_eq!(k.runtime_session_id, "global");
    assert_eq!(k.idempotency_key, "req-7");
    assert_eq!(k.scope(), Scope::new("openclaw", ""));
    assert_eq!(k.scope().key(), "openclaw:global");
    let k = IdentityKey::new("openclaw", "s1", "t", digest("p"), "key-1", "req-7");
    assert_eq!(
        (k.runtime_session_id.as_str(), k.idempotency_key.as_str()),
        ("s1", "key-1")
    );
}

#[test]
fn record_and_find_final_first_wins_and_survives_restart() {
    let dir = temp();
    let store = open(&dir);
    let key = identity("openphone.url.open", "{\"url\":\"a\"}", "key-1");
    assert_eq!(store.find_final(&key).unwrap(), None);
    let first = store
        .record_final(&key, "req-1", &json!({"status": "ok"}), T0)
        .unwrap();
    assert_eq!(
        first,
        FinalResult {
            identity: key.clone(),
            request_id: "req-1".to_owned(),
            result: json!({"status": "ok"}),
            recorded_at_ms: T0
        }
    );
    // A second record under the same key does not overwrite.
    let again = store
        .record_final(&key, "req-2", &json!({"status": "error"}), T0 + 5)
        .unwrap();
    assert_eq!(again, first);

    // Every other part of the key misses.
    let mut other = key.clone();
    other.params_digest = digest("other");
    assert_eq!(store.find_final(&other).unwrap(), None);
    let mut other = key.clone();
    other.tool = "openphone.calls.place".to_owned();
    assert_eq!(store.find_final(&other).unwrap(), None);
    let mut other = key.clone();
    other.runtime_session_id = "global".to_owned();
    assert_eq!(store.find_final(&other).unwrap(), None);
    let mut other = key.clone();
    other.runtime = "hermes".to_owned();
    assert_eq!(store.find_final(&other).unwrap(), None);
    let mut other = key.clone();
    other.idempotency_key = "key-2".to_owned();
    assert_eq!(store.find_final(&other).unwrap(), None);

    drop(store);
    let store = open(&dir);
    assert_eq!(store.find_final(&key).unwrap(), Some(first));
}

#[test]
fn bad_digest_is_rejected() {
    let dir = temp();
    let store = open(&dir);
    let mut key = identity("t", "p", "k");
    key.params_digest = "sha256:abc".to_owned();
    let err = store.record_final(&key, "r", &json!({}), T0).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Invalid {
                what: "params_digest",
                ..
            }
        ),
        "{err:?}"
    );
    let err = store
        .remember_request(&Scope::new("r", ""), "req", "t", "ABC", T0)
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid { .. }));
}

#[test]
fn request_index_detects_conflicts_per_scope() {
    let dir = temp();
    let store = open(&dir);
    let scope = Scope::new("openclaw", "sess-1");
    let d1 = digest("p1");
    assert_eq!(
        store
            .remember_request(&scope, "req-1", "openphone.url.open", &d1, T0)
            .unwrap(),
        RequestCheck::New
    );
    let entry = store.find_request(&scope, "req-1").unwrap().unwrap();
    assert_eq!(
        (
            entry.tool.as_str(),
            entry.params_digest.as_str(),
            entry.recorded_at_ms
        ),
        ("openphone.url.open", d1.as_str(), T0)
    );
    assert_eq!(
        store
            .remember_request(&scope, "req-1", "openphone.url.open", &d1, T0 + 1)
            .unwrap(),
        RequestCheck::Repeat(entry.clone())
    );
    assert_eq!(
        store
            .remember_request(&scope, "req-1", "openphone.url.open", &digest("p2"), T0 + 2)
            .unwrap(),
        RequestCheck::Conflict(entry.clone())
    );
    assert_eq!(
        store
            .remember_request(&scope, "req-1", "openphone.calls.place", &d1, T0 + 3)
            .unwrap(),
        RequestCheck::Conflict(entry.clone())
    );
    // The entry is untouched; another scope is independent.
    assert_eq!(
        store.find_request(&scope, "req-1").unwrap(),
        Some(entry.clone())
    );
    let other = Scope::new("openclaw", "");
    assert_eq!(
        store
            .remember_request(&other, "req-1", "openphone.calls.place", &d1, T0)
            .unwrap(),
        RequestCheck::New
    );
    assert_eq!(store.find_request(&scope, "nope").unwrap(), None);

    drop(store);
    let store = open(&dir);
    assert_eq!(store.find_request(&scope, "req-1").unwrap(), Some(entry));
}

#[test]
fn retention_keeps_24_hours_and_128_most_recent() {
    let dir = temp();
    let store = open(&dir);
    let day = 24 * 60 * 60 * 1000;
    let scope = Scope::new("openclaw", "");
    // 150 old entries (two days old) and 10 fresh ones.
    for i in 0..150i64 {
        let key = identity("t", &format!("old-{i}"), &format!("k-{i}"));
        store
            .record_final(&key, &format!("r-{i}"), &json!({"i": i}), T0 + i)
            .unwrap();
        store
            .remember_request(&scope, &format!("r-{i}"), "t", &key.params_digest, T0 + i)
            .unwrap();
    }
    let now = T0 + 2 * day;
    for i in 0..10i64 {
        let key = identity("t", &format!("new-{i}"), &format!("n-{i}"));
        store
            .record_final(&key, &format!("n-{i}"), &json!({}), now - 1000 + i)
            .unwrap();
    }
    assert_eq!(store.count_final_results().unwrap(), 160);
    // A weaker policy is raised to the minimum.
    let report = store
        .prune_replay(
            now,
            Retention {
                max_age_ms: 0,
                max_bytes: u64::MAX,
                keep_at_least: 0,
            },
        )
        .unwrap();
    // 128 most recent kept: 10 fresh + 118 newest old ones.
    assert_eq!(report.final_results, 32);
    assert_eq!(report.request_ids, 22);
    assert_eq!(store.count_final_results().unwrap(), 128);
    // A pruned result answers through its tombstone: never run again.
    let pruned = store
        .find_final(&identity("t", "old-31", "k-31"))
        .unwrap()
        .unwrap();
    assert_eq!(pruned.result["error"]["code"], "execution_result_unknown");
    assert!(
        store
            .find_final(&identity("t", "old-32", "k-32"))
            .unwrap()
            .is_some()
    );

    // Nothing younger than 24 h is pruned, even beyond 128 entries.
    let report = store.prune_replay(T0 + 200, Retention::default()).unwrap();
    assert_eq!(report.final_results, 0);
    assert_eq!(
        Retention::default(),
        Retention {
            max_age_ms: 7 * day,
            max_bytes: 64 * 1024 * 1024,
            keep_at_least: 128
        }
    );
}
