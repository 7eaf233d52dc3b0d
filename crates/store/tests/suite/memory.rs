//! Memory with full-text search (FTS5 on SQLite, `tsvector` on PostgreSQL).

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
fn full_text_search_is_available() {
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

#[test]
fn words_are_letters_and_digits_in_any_script() {
    let dir = temp();
    let store = open(&dir);
    let email = store
        .save_memory(
            &mem("Send invoices by e-mail to ana@example.org", "fact"),
            T0,
        )
        .unwrap();
    let version = store
        .save_memory(&mem("Runs Android 14.2 on the work phone", "fact"), T0 + 1)
        .unwrap();
    let moscow = store
        .save_memory(&mem("Живёт в Москве", "fact"), T0 + 2)
        .unwrap();
    let sao_paulo = store
        .save_memory(&mem("Mora em São Paulo", "fact"), T0 + 3)
        .unwrap();
    let kanji = store
        .save_memory(&mem("好きな飲み物 緑茶", "preference"), T0 + 4)
        .unwrap();
    let ids = |q: &str| {
        store
            .search_memory(Some(q), 10)
            .unwrap()
            .iter()
            .map(|h| h.memory.memory_id)
            .collect::<Vec<_>>()
    };
    // Addresses, hyphenated words and version numbers are split into their words.
    for q in ["example", "ANA", "mail", "org"] {
        assert_eq!(ids(q), [email.memory_id], "{q}");
    }
    assert_eq!(ids("14"), [version.memory_id]);
    assert_eq!(ids("2"), [version.memory_id]);
    // Case is folded in every script; accents are kept.
    assert_eq!(ids("москве"), [moscow.memory_id]);
    assert_eq!(ids("SÃO"), [sao_paulo.memory_id]);
    assert_eq!(ids("緑茶"), [kanji.memory_id]);
    assert!(ids("緑").is_empty(), "a word is a whole run of letters");
}

#[test]
fn a_memory_matching_more_of_the_words_ranks_first() {
    let dir = temp();
    let store = open(&dir);
    let both = store
        .save_memory(&mem("Green coffee beans from the market", "fact"), T0)
        .unwrap();
    let coffee = store
        .save_memory(&mem("Coffee with milk after lunch", "preference"), T0 + 1)
        .unwrap();
    let green = store
        .save_memory(&mem("Green tea before bed", "preference"), T0 + 2)
        .unwrap();
    let hits = store.search_memory(Some("green coffee"), 10).unwrap();
    assert_eq!(hits.len(), 3);
    assert_eq!(hits[0].memory.memory_id, both.memory_id);
    assert!(hits[0].score > hits[1].score, "{hits:?}");
    // The other two match one word each, as often: ties go to the newest.
    assert_eq!(
        hits[1..]
            .iter()
            .map(|h| h.memory.memory_id)
            .collect::<Vec<_>>(),
        [green.memory_id, coffee.memory_id]
    );
    assert!(store.search_memory(Some("green"), 0).unwrap().is_empty());
}

#[test]
fn search_text_is_never_query_syntax() {
    let dir = temp();
    let store = open(&dir);
    let tea = store
        .save_memory(&mem("Prefers tea", "preference"), T0)
        .unwrap();
    let lisbon = store
        .save_memory(&mem("Lives in Lisbon", "fact"), T0 + 1)
        .unwrap();
    store
        .save_memory(&mem("Has a dog", "fact"), T0 + 2)
        .unwrap();
    // FTS5's and PostgreSQL's query operators, quotes and escapes: only their words count.
    for q in [
        "tea:* & !lisbon <-> (zebra|'x')",
        "^tea NEAR(lisbon zebra, 2) text:tea \\lisbon",
        "\"tea\" + -lisbon OR/AND NOT zebra*",
        "'tea'' lisbon\\'",
    ] {
        let mut ids: Vec<i64> = store
            .search_memory(Some(q), 10)
            .unwrap()
            .iter()
            .map(|h| h.memory.memory_id)
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, [tea.memory_id, lisbon.memory_id], "{q}");
    }
}

#[test]
fn ranking_is_bm25_rare_words_and_short_memories_first() {
    let dir = temp();
    let store = open(&dir);
    let ids = |q: &str| {
        store
            .search_memory(Some(q), 10)
            .unwrap()
            .iter()
            .map(|h| h.memory.memory_id)
            .collect::<Vec<_>>()
    };
    // A rare word counts for more than a common one, whatever the age.
    let lisbon = store
        .save_memory(&mem("Lives in Lisbon", "fact"), T0)
        .unwrap();
    let teas: Vec<i64> = (1..=3)
        .map(|i| {
            store
                .save_memory(&mem(&format!("Tea number {i}"), "fact"), T0 + i)
                .unwrap()
                .memory_id
        })
        .collect();
    assert_eq!(ids("tea lisbon")[0], lisbon.memory_id);
    // The same word once: the shorter memory ranks first, also when it is older.
    let short = store
        .save_memory(&mem("Allergic to peanuts", "fact"), T0 + 10)
        .unwrap();
    let long = store
        .save_memory(
            &mem(
                "Said at dinner last week with friends that peanuts in any sauce are a problem",
                "fact",
            ),
            T0 + 11,
        )
        .unwrap();
    assert_eq!(ids("peanuts"), [short.memory_id, long.memory_id]);
    // Scores are BM25's (SQLite's bm25(), negated: k1 = 1.2, b = 0.75, words counted over
    // text, type and subject), the same figures on every backend. Here 6 memories of 42 words
    // (7 on average), "peanuts" in 2: idf = ln(4.5 / 2.5); the short one has 5 words, the long
    // one 17.
    let hits = store.search_memory(Some("peanuts"), 10).unwrap();
    let rounded: Vec<f64> = hits.iter().map(|h| (h.score * 1e6).round() / 1e6).collect();
    assert_eq!(rounded, [0.665582, 0.37098]);
    assert_eq!(teas.len(), 3);
}
