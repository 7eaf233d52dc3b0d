//! Memory on PostgreSQL: one memory for the whole fleet, and the index entry the store writes
//! (its own words, not a text-search configuration's; see `crates/store-pg/src/memory.rs`).

use std::sync::Arc;

use openphone_store::{MemoryStore, NewMemory};
use openphone_store_pg::{PgStore, testing};
use pretty_assertions::assert_eq;

use super::support::T0;

fn mem(text: &str) -> NewMemory {
    NewMemory {
        text: text.to_owned(),
        kind: "fact".to_owned(),
        subject: "user".to_owned(),
        confidence: None,
    }
}

#[test]
fn daemons_share_one_memory_and_ids_never_collide() {
    let Some(url) = testing::test_url() else {
        return;
    };
    let (config, _schema) = testing::fresh_schema(&url);
    let mut a = config.clone();
    a.host_id = "host-a".to_owned();
    let mut b = config;
    b.host_id = "host-b".to_owned();
    let host_a = Arc::new(PgStore::open(&a).unwrap());
    let host_b = Arc::new(PgStore::open(&b).unwrap());

    // Both save at once: every id is distinct, and each daemon finds all of them.
    let savers: Vec<_> = [Arc::clone(&host_a), Arc::clone(&host_b)]
        .into_iter()
        .enumerate()
        .map(|(n, store)| {
            std::thread::spawn(move || {
                (0..20)
                    .map(|i| {
                        store
                            .save_memory(&mem(&format!("note {n}-{i} about tea")), T0 + i)
                            .unwrap()
                            .memory_id
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut ids: Vec<i64> = savers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 40);
    for store in [&host_a, &host_b] {
        assert_eq!(store.search_memory(Some("tea"), 100).unwrap().len(), 40);
    }

    // One daemon forgets what the other saved: gone for both, deleted once.
    let lisbon = host_a.save_memory(&mem("Lives in Lisbon"), T0).unwrap();
    assert_eq!(
        host_b.search_memory(Some("lisbon"), 10).unwrap()[0].memory,
        lisbon
    );
    assert!(host_b.delete_memory(lisbon.memory_id).unwrap());
    assert!(!host_a.delete_memory(lisbon.memory_id).unwrap());
    assert!(host_a.search_memory(Some("lisbon"), 10).unwrap().is_empty());
    assert_eq!(host_a.get_memory(lisbon.memory_id).unwrap(), None);
}

#[test]
fn the_index_holds_the_stores_own_words_not_the_parsers() {
    let Some(url) = testing::test_url() else {
        return;
    };
    let (config, _schema) = testing::fresh_schema(&url);
    let store = PgStore::open(&config).unwrap();
    let saved = store
        .save_memory(&mem("E-mail ana@example.org: Tea, TEA and 3.5 cups"), T0)
        .unwrap();
    let mut client = testing::connect(&config).unwrap();
    let row = client
        .query_one(
            "SELECT search::text FROM memories WHERE memory_id = $1",
            &[&saved.memory_id],
        )
        .unwrap();
    let vector: String = row.get(0);
    // Every run of letters and digits, lower-cased, positions running on through the kind and
    // the subject; neither stemmed ('cups') nor kept whole as the server's parser would
    // ('e-mail', 'ana@example.org', '3.5').
    assert_eq!(
        vector,
        "'3':9 '5':10 'ana':3 'and':8 'cups':11 'e':1 'example':4 'fact':12 'mail':2 'org':5 \
         'tea':6,7 'user':13"
    );
    // The search answers the same words.
    for q in ["MAIL", "example", "3", "cups"] {
        let hits = store.search_memory(Some(q), 10).unwrap();
        assert_eq!(hits.len(), 1, "{q}");
    }
    assert!(store.search_memory(Some("cup"), 10).unwrap().is_empty());
}

/// A small deterministic generator (no dependency): the same corpus every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from(self.0 >> 33).unwrap() % below
    }
}

#[test]
fn the_same_memories_rank_and_score_as_on_sqlite() {
    let Some(url) = testing::test_url() else {
        return;
    };
    const VOCABULARY: [&str; 24] = [
        "tea",
        "coffee",
        "Lisbon",
        "Porto",
        "dog",
        "cat",
        "morning",
        "evening",
        "green",
        "black",
        "meeting",
        "Monday",
        "Friday",
        "phone",
        "call",
        "mother",
        "sister",
        "doctor",
        "3",
        "42",
        "Москва",
        "чай",
        "e-mail",
        "a@b.org",
    ];
    let (config, _schema) = testing::fresh_schema(&url);
    let pg = PgStore::open(&config).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = openphone_store::Store::open(dir.path().join("data")).unwrap();
    let mut rng = Lcg(35);
    for i in 0..150 {
        let text: Vec<&str> = (0..1 + rng.next(25))
            .map(|_| VOCABULARY[rng.next(VOCABULARY.len())])
            .collect();
        let new = NewMemory {
            text: text.join(" "),
            kind: ["fact", "preference"][rng.next(2)].to_owned(),
            subject: "user".to_owned(),
            confidence: None,
        };
        let (a, b) = (
            pg.save_memory(&new, T0 + i).unwrap(),
            sqlite.save_memory(&new, T0 + i).unwrap(),
        );
        assert_eq!(a, b);
    }
    for _ in 0..100 {
        let query: Vec<&str> = (0..1 + rng.next(4))
            .map(|_| VOCABULARY[rng.next(VOCABULARY.len())])
            .collect();
        let query = query.join(" ");
        let (on_pg, on_sqlite) = (
            pg.search_memory(Some(&query), 200).unwrap(),
            sqlite.search_memory(Some(&query), 200).unwrap(),
        );
        assert_eq!(on_pg.len(), on_sqlite.len(), "{query}");
        // BM25 with FTS5's operations in FTS5's order: the same scores, to the last bit.
        let scores = |hits: &[openphone_store::MemoryHit]| {
            hits.iter().map(|h| h.score.to_bits()).collect::<Vec<_>>()
        };
        assert_eq!(scores(&on_pg), scores(&on_sqlite), "{query}");
        // The same order, ties (equal scores) to the newest on both.
        let ids = |hits: &[openphone_store::MemoryHit]| {
            hits.iter().map(|h| h.memory.memory_id).collect::<Vec<_>>()
        };
        assert_eq!(ids(&on_pg), ids(&on_sqlite), "{query}");
    }
}
