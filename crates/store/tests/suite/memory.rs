//! Memory with FTS5.

use openphone_store::{MemoryRecord, NewMemory, StoreError};
use pretty_assertions::assert_eq;

use super::support::{T0, open, temp};

fn mem(text: &str, kind: &str) -> NewMemory {
    NewMemory {
        text: text.to_owned(),
        kind: kind.to_owned(),
        subject: "user".to_owned(),
        confidence: Some(0.9),
    }
}

#[test]
fn fts5_is_available_in_the_bundled_build() {
    let dir = temp();
    assert!(open(&dir).fts5_available().unwrap());
}

#[test]
fn save_search_rank_and_list_recent() {
    let dir = temp();
    let store = open(&dir);
    let a = store
        .save_memory(
            &mem(
                "The user prefers tea over coffee in the morning",
                "preference",
            ),
            T0,
        )
        .unwrap();
    assert_eq!(
        a,
        MemoryRecord {
            memory_id: a.memory_id,
            text: "The user prefers tea over coffee in the morning".to_owned(),
            kind: "preference".to_owned(),
            subject: "user".to_owned(),
            confidence: Some(0.9),
            created_at_ms: T0,
        }
    );
    let b = store
        .save_memory(
            &mem("Tea, tea and more tea: green tea only", "preference"),
            T0 + 1,
        )
        .unwrap();
    let c = store
        .save_memory(&mem("Lives in Lisbon", "fact"), T0 + 2)
        .unwrap();

    let hits = store.search_memory(Some("tea"), 10).unwrap();
    assert_eq!(
        hits.iter().map(|h| h.memory.memory_id).collect::<Vec<_>>(),
        [b.memory_id, a.memory_id]
    );
    assert!(hits[0].score >= hits[1].score && hits[0].score > 0.0);
    // Words are OR-ed; punctuation and FTS syntax are harmless: operators are plain words
    // here ("and" matches the second memory).
    let hits = store
        .search_memory(Some("lisbon OR \"coffee\" AND (NEAR"), 10)
        .unwrap();
    assert_eq!(hits.len(), 3);
    let hits = store
        .search_memory(Some("lisbon \"coffee\" (NEAR*"), 10)
        .unwrap();
    assert_eq!(hits.len(), 2);
    // Matches the type and subject columns too.
    assert_eq!(
        store.search_memory(Some("fact"), 10).unwrap()[0]
            .memory
            .memory_id,
        c.memory_id
    );
    assert_eq!(store.search_memory(Some("tea"), 1).unwrap().len(), 1);
    assert!(store.search_memory(Some("zebra"), 10).unwrap().is_empty());
    // No query → most recent first.
    for q in [None, Some(""), Some("  ?! ")] {
        let recent = store.search_memory(q, 2).unwrap();
        assert_eq!(
            recent
                .iter()
                .map(|h| h.memory.memory_id)
                .collect::<Vec<_>>(),
            [c.memory_id, b.memory_id]
        );
    }
    // Serialised with the tool's field name.
    assert_eq!(serde_json::to_value(&a).unwrap()["type"], "preference");

    // Deletion keeps the index in step; restart keeps both.
    assert!(store.delete_memory(b.memory_id).unwrap());
    assert!(!store.delete_memory(b.memory_id).unwrap());
    drop(store);
    let store = open(&dir);
    let hits = store.search_memory(Some("tea"), 10).unwrap();
    assert_eq!(
        hits.iter().map(|h| h.memory.memory_id).collect::<Vec<_>>(),
        [a.memory_id]
    );
    assert_eq!(store.get_memory(c.memory_id).unwrap(), Some(c));
    assert!(matches!(
        store.save_memory(&mem("   ", "fact"), T0).unwrap_err(),
        StoreError::Invalid { .. }
    ));
}
