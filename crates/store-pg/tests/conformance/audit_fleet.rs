//! The audit of a fleet (issue 35): one hash chain per daemon on one PostgreSQL schema, each
//! chain's head anchored at every append; `verify_audit` checks every chain and its anchor.

use std::thread;

use openphone_store::{AnchorOutcome, AuditEntry, AuditProblem, AuditRecord, AuditStore};
use openphone_store_pg::testing::{self, SchemaGuard};
use openphone_store_pg::{PgConfig, PgStore};
use pretty_assertions::assert_eq;

use super::audit::{documented_hash, entry};

const PER_HOST: i64 = 40;

/// Two daemons, `host-a` and `host-b`, on one schema. Fields drop in order: the stores before
/// their schema.
struct Fleet {
    a: PgStore,
    b: PgStore,
    config: PgConfig,
    _guard: SchemaGuard,
}

fn fleet() -> Fleet {
    let url = std::env::var(testing::TEST_URL_VAR).expect("OPENPHONE_TEST_PG_URL");
    let (config, guard) = testing::fresh_schema(&url);
    let open = |host: &str| {
        let mut c = config.clone();
        c.host_id = host.to_owned();
        c.label = host.to_owned();
        c.data_dir = config.data_dir.join(host);
        PgStore::open(&c).unwrap()
    };
    Fleet {
        a: open("host-a"),
        b: open("host-b"),
        config,
        _guard: guard,
    }
}

/// Host `host`'s `i`th record: ids unique across the fleet.
fn host_entry(host: &str, i: i64) -> AuditEntry {
    let mut e = entry(i);
    e.request_id = format!("{host}-req-{i}");
    e.audit_id = format!("runtime:openclaw:{host}-req-{i}");
    e.device_id = Some(format!("{host}-phone"));
    e
}

/// Both daemons append `PER_HOST` records at once, from threads.
fn filled() -> Fleet {
    let fleet = fleet();
    thread::scope(|s| {
        for (host, store) in [("host-a", &fleet.a), ("host-b", &fleet.b)] {
            s.spawn(move || {
                for i in 1..=PER_HOST {
                    store.append_audit(&host_entry(host, i)).unwrap();
                }
            });
        }
    });
    fleet
}

#[test]
fn two_daemons_appending_at_once_build_two_chains_that_verify_and_match_their_anchors() {
    let fleet = filled();
    let chains = fleet.a.audit_chains().unwrap();
    assert_eq!(
        chains.iter().map(|c| c.chain.as_str()).collect::<Vec<_>>(),
        ["host-a", "host-b"]
    );
    for chain in &chains {
        assert_eq!(chain.head.seq, PER_HOST);
        assert_eq!(chain.anchor.as_ref(), Some(&chain.head), "{chain:?}");
        assert!(chain.anchored_at_ms.is_some());
    }
    assert_eq!(fleet.a.audit_head().unwrap(), chains[0].head);
    assert_eq!(fleet.b.audit_head().unwrap(), chains[1].head);

    // Every chain verifies, each with its own records only.
    for report in fleet.b.verify_audit_chains().unwrap() {
        assert!(report.is_intact(), "{report}");
        assert_eq!(report.report.checked, PER_HOST as u64);
        assert!(report.to_string().contains("intact"), "{report}");
    }
    let combined = fleet.a.verify_audit().unwrap();
    assert!(combined.is_intact(), "{combined:?}");
    assert_eq!(combined.checked, 2 * PER_HOST as u64);
    assert_eq!(
        (combined.last_seq, combined.last_hash.as_str()),
        (PER_HOST, chains[0].head.hash.as_str()),
        "intact: this daemon's chain"
    );

    // Each daemon's export is its own chain, hashed as SQLite's form 2.
    for (host, store) in [("host-a", &fleet.a), ("host-b", &fleet.b)] {
        let records = store.export_audit(0, 1000).unwrap();
        assert_eq!(records.len(), PER_HOST as usize);
        for (i, record) in (1..).zip(&records) {
            assert_eq!(record.seq, i);
            assert_eq!(record.entry, host_entry(host, i));
            assert_eq!(record.hash, documented_hash(record));
        }
        let pairs = fleet.a.export_audit_chain(host, 10, 5).unwrap();
        assert_eq!(
            pairs
                .iter()
                .map(|(c, r)| (c.as_str(), r.seq))
                .collect::<Vec<_>>(),
            (11..=15).map(|s| (host, s)).collect::<Vec<_>>()
        );
        assert_eq!(pairs[0].1, records[10]);
    }
    assert!(
        fleet
            .a
            .export_audit_chain("host-c", 0, 10)
            .unwrap()
            .is_empty()
    );

    // The fleet's whole log, page by page, in (chain, seq) order.
    let mut all: Vec<(String, AuditRecord)> = Vec::new();
    loop {
        let after = all.last().map(|(c, r)| (c.as_str(), r.seq));
        let page = fleet.b.export_audit_fleet(after, 7).unwrap();
        if page.is_empty() {
            break;
        }
        all.extend(page);
    }
    assert_eq!(all.len(), 2 * PER_HOST as usize);
    for (i, (chain, record)) in all.iter().enumerate() {
        let (host, seq) = if i < PER_HOST as usize {
            ("host-a", i as i64 + 1)
        } else {
            ("host-b", i as i64 + 1 - PER_HOST)
        };
        assert_eq!((chain.as_str(), record.seq), (host, seq));
        assert_eq!(
            record.entry.device_id.as_deref(),
            Some(&*format!("{host}-phone"))
        );
        assert_eq!(record.hash, documented_hash(record));
    }

    // find searches every chain: B's record found from A.
    let found = fleet.a.find_audit("runtime:openclaw:host-b-req-7").unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].entry, host_entry("host-b", 7));
}

#[test]
fn deleting_a_record_of_chain_b_is_found_by_verify_naming_chain_b() {
    let fleet = filled();
    testing::admin_sql(
        &fleet.config,
        "DELETE FROM audit_records WHERE chain = 'host-b' AND seq = 3",
    )
    .unwrap();
    let combined = fleet.a.verify_audit().unwrap();
    let broken = combined.first_broken.as_ref().unwrap();
    assert_eq!(
        (broken.seq, &broken.problem),
        (4, &AuditProblem::SeqGap { expected: 3 })
    );
    let chains = fleet.a.verify_audit_chains().unwrap();
    assert!(chains[0].is_intact(), "{}", chains[0]);
    assert_eq!(chains[1].chain, "host-b");
    assert!(!chains[1].is_intact());
    let text = chains[1].to_string();
    assert!(
        text.starts_with("chain host-b: broken at record seq 4"),
        "{text}"
    );
    // Appending goes on in both chains; the damage stays reported.
    fleet.a.append_audit(&host_entry("host-a", 99)).unwrap();
    fleet.b.append_audit(&host_entry("host-b", 99)).unwrap();
    assert!(!fleet.b.verify_audit().unwrap().is_intact());
}

/// Re-hashes `records` (consecutive, of `chain`) after an edit, writes them and the head back,
/// leaving the anchors alone: what someone with write access who knows the hashing does.
fn rewrite_tail(config: &PgConfig, chain: &str, mut records: Vec<AuditRecord>) -> AuditRecord {
    let mut client = testing::connect(config).unwrap();
    let mut prev = records[0].prev_hash.clone();
    for record in &mut records {
        record.prev_hash = prev;
        record.hash = documented_hash(record);
        prev = record.hash.clone();
        client
            .execute(
                "UPDATE audit_records SET entry = $3, hash = $4 WHERE chain = $1 AND seq = $2",
                &[
                    &chain,
                    &record.seq,
                    &serde_json::to_string(&record.entry).unwrap(),
                    &record.hash,
                ],
            )
            .unwrap();
    }
    let last = records.pop().unwrap();
    client
        .execute(
            "UPDATE audit_heads SET seq = $2, hash = $3 WHERE chain = $1",
            &[&chain, &last.seq, &last.hash],
        )
        .unwrap();
    last
}

#[test]
fn rewriting_chain_a_tail_and_its_head_is_caught_by_the_anchor() {
    let fleet = filled();
    let anchored = fleet.a.audit_chains().unwrap()[0].anchor.clone().unwrap();
    let mut tail = fleet.a.export_audit(PER_HOST - 5, 100).unwrap();
    tail[0].entry.at_ms += 1;
    let forged = rewrite_tail(&fleet.config, "host-a", tail);
    assert_eq!(forged.seq, anchored.seq);

    let chains = fleet.b.verify_audit_chains().unwrap();
    let a = &chains[0];
    assert!(a.report.is_intact(), "the records and the head agree: {a}");
    assert_eq!(
        a.anchor.as_ref().unwrap().outcome,
        AnchorOutcome::Differs {
            found: forged.hash.clone()
        }
    );
    assert!(!a.is_intact());
    assert!(a.to_string().starts_with("chain host-a: anchor"), "{a}");
    assert!(chains[1].is_intact(), "{}", chains[1]);

    let combined = fleet.b.verify_audit().unwrap();
    let broken = combined.first_broken.unwrap();
    assert_eq!(broken.seq, PER_HOST);
    assert!(
        matches!(&broken.problem, AuditProblem::HeadMismatch { head_hash, last_hash, .. }
            if *head_hash == anchored.hash && *last_hash == forged.hash),
        "{broken:?}"
    );
}

/// Found by `benches/audit.rs`: once `audit_heads` was analyzed (a few rows), the planner read
/// it with a sequential scan, whose serializable predicate lock covers the whole table, so two
/// daemons each moving its own head aborted each other until the writer gave up ("10
/// serialization failures in a row").
#[test]
fn regression_two_daemons_appending_to_analyzed_tables_do_not_abort_each_other() {
    let fleet = filled();
    testing::admin_sql(&fleet.config, "ANALYZE audit_heads; ANALYZE audit_anchors").unwrap();
    thread::scope(|s| {
        for (host, store) in [("host-a", &fleet.a), ("host-b", &fleet.b)] {
            s.spawn(move || {
                for i in PER_HOST + 1..=PER_HOST + 150 {
                    store.append_audit(&host_entry(host, i)).unwrap();
                }
            });
        }
    });
    for chain in fleet.a.verify_audit_chains().unwrap() {
        assert!(chain.is_intact(), "{chain}");
        assert_eq!(chain.report.last_seq, PER_HOST + 150);
    }
}

/// A confirmation asked on one host and resolved on another leaves records with one audit id
/// in two chains: `find_audit` answers both, oldest first, whichever daemon asks.
#[test]
fn find_answers_one_audit_id_from_every_chain_oldest_first() {
    let fleet = fleet();
    let mut asked = host_entry("host-a", 1);
    asked.audit_id = "runtime:openclaw:shared".to_owned();
    asked.at_ms = 1_000;
    let mut resolved = asked.clone();
    resolved.at_ms = 2_000;
    let mut later = asked.clone();
    later.at_ms = 3_000;
    // Chain B's record is appended first but is the middle one in time.
    fleet.b.append_audit(&resolved).unwrap();
    fleet.a.append_audit(&asked).unwrap();
    fleet.a.append_audit(&host_entry("host-a", 2)).unwrap();
    fleet.a.append_audit(&later).unwrap();
    for store in [&fleet.a, &fleet.b] {
        let found = store.find_audit("runtime:openclaw:shared").unwrap();
        assert_eq!(
            found
                .iter()
                .map(|r| (r.entry.at_ms, r.seq))
                .collect::<Vec<_>>(),
            [(1_000, 1), (2_000, 1), (3_000, 3)]
        );
        // prev_hash is the previous record's of its own chain.
        assert_eq!(
            found[2].prev_hash,
            fleet.a.export_audit(1, 1).unwrap()[0].hash
        );
        assert_eq!(found[1].hash, documented_hash(&found[1]));
    }
}

/// `verify` walks the records in pages of 2000 (each statement short): chains longer than a
/// page, and a page boundary falling inside a chain, verify as one walk; a break past the first
/// page is still found.
#[test]
fn a_walk_across_many_pages_verifies_and_finds_a_break_past_the_first() {
    let fleet = fleet();
    fleet.b.append_audit(&host_entry("host-b", 1)).unwrap();
    // Host A's chain written directly, hashed as the store hashes (faster than appending).
    let mut client = testing::connect(&fleet.config).unwrap();
    let mut tx = client.transaction().unwrap();
    let mut prev = openphone_store::GENESIS_HASH.to_owned();
    let n = 4500;
    for seq in 1..=n {
        let mut record = AuditRecord {
            seq,
            entry: host_entry("host-a", seq),
            prev_hash: prev.clone(),
            hash: String::new(),
        };
        record.hash = documented_hash(&record);
        tx.execute(
            "INSERT INTO audit_records (chain, seq, audit_id, at_ms, entry, hash) \
             VALUES ('host-a', $1, $2, $3, $4, $5)",
            &[
                &seq,
                &record.entry.audit_id,
                &record.entry.at_ms,
                &serde_json::to_string(&record.entry).unwrap(),
                &record.hash,
            ],
        )
        .unwrap();
        prev = record.hash;
    }
    for table in ["audit_heads", "audit_anchors"] {
        let extra = if table == "audit_anchors" {
            ", anchored_at_ms"
        } else {
            ""
        };
        let value = if table == "audit_anchors" { ", 0" } else { "" };
        tx.execute(
            &format!(
                "INSERT INTO {table} (chain, seq, hash{extra}) VALUES ('host-a', $1, $2{value})"
            ),
            &[&n, &prev],
        )
        .unwrap();
    }
    tx.commit().unwrap();

    let chains = fleet.b.verify_audit_chains().unwrap();
    assert!(chains.iter().all(|c| c.is_intact()), "{chains:?}");
    assert_eq!(chains[0].report.checked, n as u64);
    assert_eq!(chains[1].report.checked, 1);
    // Host A continues its chain where the direct writes left it.
    let next = fleet.a.append_audit(&host_entry("host-a", n + 1)).unwrap();
    assert_eq!((next.seq, next.prev_hash.as_str()), (n + 1, prev.as_str()));

    client
        .execute(
            "UPDATE audit_records SET entry = jsonb_set(entry::jsonb, '{duration_ms}', '7')::text \
             WHERE chain = 'host-a' AND seq = 4321",
            &[],
        )
        .unwrap();
    let combined = fleet.b.verify_audit().unwrap();
    let broken = combined.first_broken.unwrap();
    assert_eq!(broken.seq, 4321);
    assert!(
        matches!(broken.problem, AuditProblem::HashMismatch { .. }),
        "{broken:?}"
    );
    assert_eq!(combined.checked, 4321 + 1);
}
