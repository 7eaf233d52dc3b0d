//! The group-commit writer: concurrent writes share one transaction, a failing write spoils
//! only itself, a dropped waiter does not cancel its write, the chain stays ordered.

use openphone_protocol::endpoint::{AuditCaller, AuditEntry, AuditKind};
use openphone_store::testing::hold_writer;
use openphone_store::{Autonomy, NewPhoneSession, StoreError};

use super::support::{open, temp};

const T0: i64 = 1_760_000_000_000;

fn read_entry(i: usize) -> AuditEntry {
    AuditEntry {
        audit_id: format!("runtime:bench:req-{i}"),
        kind: AuditKind::ToolRequest,
        at_ms: T0,
        runtime: "bench".to_owned(),
        caller: AuditCaller {
            runtime: "bench".to_owned(),
            transport: "ws".to_owned(),
            principal: "token".to_owned(),
        },
        request_id: format!("req-{i}"),
        tool: Some("openphone.device.status".to_owned()),
        ..AuditEntry::default()
    }
}

fn session(id: &str) -> NewPhoneSession {
    NewPhoneSession {
        phone_session_id: id.to_owned(),
        runtime_kind: "bench".to_owned(),
        runtime_session_id: String::new(),
        attention_id: format!("attn-{id}"),
        source: "chat".to_owned(),
        autonomy: Autonomy::AskBeforeAction,
        summary: "status".to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_queued_behind_a_commit_share_the_next_transaction() {
    let dir = temp();
    let store = open(&dir);
    let before = store.writer_stats();
    let hold = hold_writer(&store).unwrap();
    // Every append is queued while the writer is held…
    let appends = (0..50).map(|i| store.append_audit_async(read_entry(i)));
    let all = futures_util::future::join_all(appends);
    let (records, ()) = tokio::join!(all, async move {
        tokio::task::yield_now().await;
        drop(hold);
    });
    // …and all of them commit, in one transaction after the hold's own.
    let seqs: Vec<i64> = records.into_iter().map(|r| r.unwrap().seq).collect();
    assert_eq!(seqs, (1..=50).collect::<Vec<i64>>(), "in arrival order");
    let after = store.writer_stats();
    assert_eq!(after.writes - before.writes, 51, "50 appends and the hold");
    assert_eq!(after.batches - before.batches, 2, "{after:?}");
    assert_eq!(after.largest_batch, 50);
    assert!(store.verify_audit().unwrap().is_intact());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_write_in_a_batch_spoils_only_itself() {
    let dir = temp();
    let store = open(&dir);
    store.create_session(&session("taken"), T0).unwrap();
    let hold = hold_writer(&store).unwrap();
    let store = std::sync::Arc::new(store);
    let (a, dup, b) = {
        let (s1, s2, s3) = (store.clone(), store.clone(), store.clone());
        let a = tokio::spawn(async move { s1.append_audit_async(read_entry(1)).await });
        tokio::task::yield_now().await;
        let dup = tokio::task::spawn_blocking(move || s2.create_session(&session("taken"), T0));
        tokio::task::yield_now().await;
        let b = tokio::spawn(async move { s3.append_audit_async(read_entry(2)).await });
        // Let the three reach the writer's queue (the blocking one runs on its own thread).
        tokio::task::spawn_blocking(|| std::thread::sleep(std::time::Duration::from_millis(50)))
            .await
            .unwrap();
        drop(hold);
        (a.await.unwrap(), dup.await.unwrap(), b.await.unwrap())
    };
    assert!(
        matches!(dup, Err(StoreError::AlreadyExists { .. })),
        "{dup:?}"
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    // Both kept (in whichever order they reached the queue), the failed one left no trace.
    let (first, second) = if a.seq < b.seq { (a, b) } else { (b, a) };
    assert_eq!((first.seq, second.seq), (1, 2));
    assert_eq!(second.prev_hash, first.hash);
    assert!(store.verify_audit().unwrap().is_intact());
    assert_eq!(store.export_audit(0, 10).unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_waiter_gave_up_is_still_committed() {
    let dir = temp();
    let store = open(&dir);
    let hold = hold_writer(&store).unwrap();
    {
        // Polled once (the write is queued), then dropped.
        let mut append = Box::pin(store.append_audit_async(read_entry(7)));
        let waker = futures_util::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(append.as_mut().poll(&mut cx).is_pending());
    }
    drop(hold);
    // A later write commits after it, so once this returns the first one is in.
    let later = store.append_audit(&read_entry(8)).unwrap();
    assert_eq!(later.seq, 2);
    let found = store.find_audit("runtime:bench:req-7").unwrap();
    assert_eq!(found.len(), 1);
}

#[test]
fn writes_from_many_threads_form_one_unbroken_chain() {
    let dir = temp();
    let store = std::sync::Arc::new(open(&dir));
    std::thread::scope(|scope| {
        for t in 0..8 {
            let store = &store;
            scope.spawn(move || {
                for i in 0..25 {
                    store.append_audit(&read_entry(t * 100 + i)).unwrap();
                }
            });
        }
    });
    let report = store.verify_audit().unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.checked, 200);
}

#[test]
fn a_read_only_store_refuses_writes_without_a_writer() {
    let dir = temp();
    drop(open(&dir));
    let reader = openphone_store::Store::open_read_only(dir.path().join("data")).unwrap();
    let err = reader.append_audit(&read_entry(1)).unwrap_err();
    assert!(matches!(err, StoreError::Commit { .. }), "{err:?}");
    assert_eq!(reader.writer_stats().batches, 0);
}

/// Found in review: a shape id is a 64-bit prefix of a digest of text a client partly chooses,
/// so a colliding shape could be searched for; a record whose shape id names a different
/// stored shape used to point at it (reading back as another record, breaking verification
/// for good). Now such a record is refused and nothing is appended.
#[test]
fn a_record_whose_shape_id_names_another_shape_is_refused() {
    let dir = temp();
    let store = open(&dir);
    store.append_audit(&read_entry(1)).unwrap();
    // Stand-in for a colliding shape stored first: same id, other text.
    let raw = rusqlite::Connection::open(store.db_path().unwrap()).unwrap();
    let changed = raw
        .execute(
            "UPDATE audit_shapes SET shape = shape || ' ' WHERE id IN \
             (SELECT shape FROM audit_records WHERE seq = 1)",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    let err = store.append_audit(&read_entry(2)).unwrap_err();
    assert!(err.to_string().contains("collides"), "{err}");
    let rows: i64 = raw
        .query_row("SELECT COUNT(*) FROM audit_records", [], |row| row.get(0))
        .unwrap();
    assert_eq!(rows, 1, "nothing appended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn safe_read_records_commit_before_their_fsync_and_are_synced_right_after() {
    let dir = temp();
    let store = open(&dir);
    let before = store.writer_stats();
    let hold = hold_writer(&store).unwrap();
    // Queued behind a held (durable) write: they form one batch of relaxed writes only…
    let appends = (0..20).map(|i| store.append_audit_relaxed_async(read_entry(i)));
    let all = futures_util::future::join_all(appends);
    let (records, ()) = tokio::join!(all, async move {
        tokio::task::yield_now().await;
        drop(hold);
    });
    let seqs: Vec<i64> = records.into_iter().map(|r| r.unwrap().seq).collect();
    assert_eq!(seqs, (1..=20).collect::<Vec<i64>>(), "in arrival order");
    // …committed without an fsync of its own (the writer counts the batch after it has
    // answered its callers, so the count may trail the answers by a moment)…
    for _ in 0..1000 {
        if store.writer_stats().relaxed_batches > before.relaxed_batches {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let after = store.writer_stats();
    assert_eq!(
        after.relaxed_batches - before.relaxed_batches,
        1,
        "{after:?}"
    );
    // …which the syncer thread makes next.
    for _ in 0..1000 {
        if store.writer_stats().background_syncs > before.background_syncs {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let synced = store.writer_stats();
    assert!(
        synced.background_syncs > before.background_syncs,
        "{synced:?}"
    );
    assert_eq!(synced.failed_syncs, 0, "{synced:?}");
    // A durable write after them is a durable batch again.
    store.append_audit_async(read_entry(20)).await.unwrap();
    assert_eq!(store.writer_stats().relaxed_batches, after.relaxed_batches);
    drop(store);
    let store = open(&dir);
    let report = store.verify_audit().unwrap();
    assert!(report.is_intact(), "{report:?}");
    assert_eq!(report.last_seq, 21);
}
