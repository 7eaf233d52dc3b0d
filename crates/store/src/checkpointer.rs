//! Checkpoints off the writer's path.
//!
//! SQLite copies the write-ahead log back into the database file (a checkpoint) once the log
//! holds 1,000 pages, by default inside the `COMMIT` that crossed the mark: on the writer
//! thread, with two fsyncs (the log's, then the database file's after ~1,000 page writes).
//! Every write queued behind that commit waited for it: under a mutation load the checkpoint
//! was a tenth of the writer's CPU, and under a private-read load its fsync was the slowest
//! commit of the run (issue 34).
//!
//! Here the writer's connection reports each commit's log size (its WAL hook, which replaces
//! SQLite's automatic checkpoint), and at [`CHECKPOINT_AT`] pages (then once per
//! [`CHECKPOINT_AT`] more, [`Mark`]) it wakes this thread, which runs a `PASSIVE` checkpoint on
//! a connection of its own: SQLite's locks let it copy what is committed while the writer goes
//! on appending, and the writer restarts the log at its next transaction once everything was
//! copied.
//!
//! Under a steady load that never happens by itself: the writer commits while the thread
//! copies, so a pass ends with the frames of those commits still to copy, and the next pass
//! too. The log then grew to the backstop (64 MiB) and was rewritten in place from there, each
//! of its pages once a second or so — and on this project's virtual machine touching a page
//! left alone that long can cost tens of microseconds (the host's doing: the guest sees no
//! page fault), paid inside every commit's `pwrite`s (docs/benchmarks.md, "Thirteenth
//! round"). So a pass that leaves such a tail, once the log holds [`TAIL_AT`] pages, asks the
//! writer for it ([`Checkpointer::take_tail`]): between two batches, with its answers sent,
//! the writer copies the few pages the pass left (the pages a commit touches are mostly the
//! same few) with its own `PASSIVE` checkpoint, and its next transaction starts the log over. The log starts over
//! near [`TAIL_AT`] pages (16 MiB), each page rewritten about every quarter of a second under
//! load. The writer's copy stalls the writes queued behind it — two fsyncs and the copied
//! pages, 0.4–1.2 ms measured on this project's machine — so it is not made at every pass:
//! made every [`CHECKPOINT_AT`] pages, about one call in a hundred waited for one, which set
//! the WebSocket p99 (2.1–2.8 ms against 1.6–2.1 without; every [`TAIL_AT`] pages, 1.9–2.4,
//! with the throughput kept). A checkpoint that still cannot complete — a reader holds an old
//! snapshot — leaves the log growing; the writer then checkpoints inline at
//! [`INLINE_CHECKPOINT_AT`] pages, so the log stays bounded.
//!
//! Nothing about durability changes: a checkpoint only copies committed, already-synced (or
//! syncer-bound) frames, with its own fsyncs, and SQLite never restarts the log over frames
//! a checkpoint has not synced into the database.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags};

/// Log pages at which a commit wakes the checkpointer (SQLite's default auto-checkpoint).
pub(crate) const CHECKPOINT_AT: i32 = 1_000;
/// Log pages from which a pass that could not copy everything asks the writer for the rest
/// (four marks: 16 MiB of 4 KiB pages).
pub(crate) const TAIL_AT: i64 = 4 * CHECKPOINT_AT as i64;
/// Log pages at which the writer checkpoints inline after all (64 MiB of 4 KiB pages).
pub(crate) const INLINE_CHECKPOINT_AT: i32 = 16_000;

/// What a commit that left `pages` pages in the log asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterCommit {
    Nothing,
    /// Wake the checkpointer.
    Wake,
    /// Checkpoint now, on the writer's connection.
    Inline,
}

/// When the next commit wakes the checkpointer: at [`CHECKPOINT_AT`] pages, then every
/// [`CHECKPOINT_AT`] pages more until the log starts over. Under a steady load the log
/// restarts only when a checkpoint finished before the next commit; waking the thread on
/// every commit past the mark meanwhile made hundreds of checkpoints (and twice as many
/// fsyncs) a second, each copying a few pages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    next: i32,
    last: i32,
}

impl Default for Mark {
    fn default() -> Self {
        Mark {
            next: CHECKPOINT_AT,
            last: 0,
        }
    }
}

impl Mark {
    pub(crate) fn after_commit(&mut self, pages: i32) -> AfterCommit {
        if pages < self.last {
            // The log started over.
            self.next = CHECKPOINT_AT;
        }
        self.last = pages;
        if pages >= INLINE_CHECKPOINT_AT {
            self.next = CHECKPOINT_AT;
            AfterCommit::Inline
        } else if pages >= self.next {
            self.next = pages.saturating_add(CHECKPOINT_AT);
            AfterCommit::Wake
        } else {
            AfterCommit::Nothing
        }
    }
}

/// Checkpoints made, by where they ran.
#[derive(Debug, Default)]
pub(crate) struct CheckpointCounters {
    pub(crate) background: AtomicU64,
    pub(crate) inline: AtomicU64,
    pub(crate) tail: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    wanted: bool,
    stop: bool,
}

/// The checkpointer thread's mailbox.
#[derive(Debug, Default)]
pub(crate) struct Checkpointer {
    state: Mutex<State>,
    wake: Condvar,
    /// A pass ended, maybe with frames committed during it left to copy: the writer's to copy.
    tail: AtomicBool,
}

impl Checkpointer {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks for a checkpoint (several asks before it runs make one).
    fn want(&self) {
        let mut state = self.state();
        if !state.wanted {
            state.wanted = true;
            self.wake.notify_one();
        }
    }

    /// Stops the thread once its current checkpoint (if any) is done.
    pub(crate) fn stop(&self) {
        self.state().stop = true;
        self.wake.notify_one();
    }

    fn serve(&self, conn: &Connection, counters: &CheckpointCounters) {
        loop {
            {
                let mut state = self.state();
                while !state.wanted && !state.stop {
                    state = self
                        .wake
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if state.stop {
                    return;
                }
                state.wanted = false;
            }
            // A busy checkpoint (another one running) or an I/O error leaves the log as it
            // is: the next commit past the mark asks again, and the writer's own checkpoint
            // at the backstop still bounds it. A pass reports the log as it found it, so it
            // cannot tell whether the writer committed more meanwhile (under load it always
            // did): one over a log of [`TAIL_AT`] pages or more asks the writer to copy the
            // rest, which costs little when nothing is left.
            if let Ok(log_is_long) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                Ok(row.get::<_, i64>(0)? == 0 && row.get::<_, i64>(1)? >= TAIL_AT)
            }) {
                counters.background.fetch_add(1, Ordering::Relaxed);
                if log_is_long {
                    self.tail.store(true, Ordering::Release);
                }
            }
        }
    }

    /// Whether a pass ended since the last call, maybe leaving frames committed during it
    /// (the writer then copies them: [`checkpoint_tail`]).
    pub(crate) fn take_tail(&self) -> bool {
        self.tail.load(Ordering::Acquire) && self.tail.swap(false, Ordering::AcqRel)
    }
}

/// The writer copies the frames the checkpointer's last pass left, between two batches and on
/// its own connection (outside any transaction), so that its next transaction starts the log
/// over. A failure leaves the log as it is (the next pass asks again; the backstop still bounds
/// the log): it is no write's failure.
pub(crate) fn checkpoint_tail(conn: &Connection, counters: &CheckpointCounters) {
    if !conn.is_autocommit() {
        return;
    }
    // Another checkpoint running (the thread's next pass) is reported in the first column,
    // not as an error: that one copies the tail instead, and asks again when done.
    let busy = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        row.get::<_, i64>(0)
    });
    if busy == Ok(0) {
        counters.tail.fetch_add(1, Ordering::Relaxed);
    }
}

/// Starts the checkpointer on its own connection to `db` and hands the writer's connection
/// the WAL hook that wakes it. `Err`: nothing was started (the store does not open).
pub(crate) fn start(
    db: &Path,
    writer: &mut Connection,
    counters: &Arc<CheckpointCounters>,
) -> std::io::Result<(Arc<Checkpointer>, JoinHandle<()>)> {
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(std::io::Error::other)?;
    // A checkpoint syncs the log before copying it and the database after: never skipped.
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(std::io::Error::other)?;
    let checkpointer = Arc::new(Checkpointer::default());
    let (serving, counting) = (Arc::clone(&checkpointer), Arc::clone(counters));
    let thread = std::thread::Builder::new()
        .name("op-store-ckpt".into())
        .spawn(move || serving.serve(&conn, &counting))?;
    let (waking, counting) = (Arc::clone(&checkpointer), Arc::clone(counters));
    let mut mark = Mark::default();
    let hooked = writer.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages| {
        match mark.after_commit(pages) {
            AfterCommit::Nothing => {}
            AfterCommit::Wake => waking.want(),
            AfterCommit::Inline => {
                // What SQLite's own hook does. Its failure is not the commit's: the hook
                // never reports an error, which would make the committed batch look failed.
                if wal
                    .checkpoint_v2(rusqlite::wal::CheckpointMode::PASSIVE)
                    .is_ok()
                {
                    counting.inline.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(())
    }));
    if let Err(e) = hooked {
        checkpointer.stop();
        let _ = thread.join();
        return Err(std::io::Error::other(e));
    }
    Ok((checkpointer, thread))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `key` = `value` into `store_meta`: one write of the group commit.
    fn put(store: &crate::SqliteStore, key: String, value: String) {
        use crate::error::SqlContext;
        store
            .write("test.put", "", move |conn| {
                conn.execute(
                    "INSERT INTO store_meta (key, value) VALUES (?1, ?2)",
                    [&key, &value],
                )
                .ctx("test.put", "")
            })
            .unwrap();
    }

    /// Waits (up to 30 s) until the checkpointer thread made a pass.
    fn wait_for_a_pass(store: &crate::SqliteStore) {
        let waited = openphone_clock::Stopwatch::start();
        while store.writer_stats().background_checkpoints == 0 {
            assert!(
                waited.elapsed() < std::time::Duration::from_secs(30),
                "no background checkpoint: {:?}",
                store.writer_stats()
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The log's size in frames: the most it held, as SQLite reuses the file from its start.
    fn log_frames(dir: &Path) -> u64 {
        let wal = dir.join(format!("{}-wal", crate::DB_FILE));
        std::fs::metadata(&wal).unwrap().len() / (4096 + 24)
    }

    #[test]
    fn a_commit_wakes_the_checkpointer_once_per_mark_and_checkpoints_itself_at_the_backstop() {
        let mut mark = Mark::default();
        assert_eq!(mark.after_commit(0), AfterCommit::Nothing);
        assert_eq!(mark.after_commit(CHECKPOINT_AT - 1), AfterCommit::Nothing);
        assert_eq!(mark.after_commit(CHECKPOINT_AT), AfterCommit::Wake);
        // Not again until the log grew by another mark's worth.
        assert_eq!(mark.after_commit(CHECKPOINT_AT + 10), AfterCommit::Nothing);
        assert_eq!(
            mark.after_commit(2 * CHECKPOINT_AT - 1),
            AfterCommit::Nothing
        );
        assert_eq!(mark.after_commit(2 * CHECKPOINT_AT + 5), AfterCommit::Wake);
        // The log started over: the first mark again.
        assert_eq!(mark.after_commit(3), AfterCommit::Nothing);
        assert_eq!(mark.after_commit(CHECKPOINT_AT), AfterCommit::Wake);
        // Past the backstop: inline, and every commit there until the log starts over.
        assert_eq!(mark.after_commit(INLINE_CHECKPOINT_AT), AfterCommit::Inline);
        assert_eq!(mark.after_commit(i32::MAX), AfterCommit::Inline);
        assert_eq!(mark.after_commit(2), AfterCommit::Nothing);
        assert_eq!(mark.after_commit(CHECKPOINT_AT + 1), AfterCommit::Wake);
    }

    /// The bug: under a steady stream of commits a pass of the checkpointer's never caught up
    /// with the writer, so the log never started over and grew to the backstop (64 MiB), its
    /// pages rewritten about once a second — slow to touch again on this project's virtual
    /// machine. The writer now copies what a pass over a long log left, and the log starts
    /// over near [`TAIL_AT`] pages.
    #[test]
    fn the_log_starts_over_under_a_steady_stream_of_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::SqliteStore::open(dir.path()).unwrap();
        let value = "v".repeat(3000);
        // Each write adds a row of its own page or so: ten marks' worth of log, written by
        // four callers at once so that commits follow each other without a pause.
        let writes_each = (10 * CHECKPOINT_AT / 4) as usize;
        std::thread::scope(|scope| {
            for caller in 0..4 {
                let (store, value) = (&store, &value);
                scope.spawn(move || {
                    for n in 0..writes_each {
                        put(store, format!("test.steady.{caller}.{n}"), value.clone());
                    }
                });
            }
        });
        let stats = store.writer_stats();
        let frames = log_frames(dir.path());
        assert!(
            frames <= TAIL_AT as u64 + 2 * CHECKPOINT_AT as u64,
            "the log grew to {frames} frames, two marks past the tail's: {stats:?}"
        );
        assert!(stats.tail_checkpoints >= 1, "{stats:?}");
        assert_eq!(stats.inline_checkpoints, 0, "{stats:?}");
    }

    /// The bug: the writer copied what every pass left, once per mark (1,000 pages), and each
    /// copy stalled the writes queued behind it for 0.4–1.2 ms (two fsyncs and the pages), so
    /// about one call in a hundred waited for one: the WebSocket p99 rose past 2 ms. A pass
    /// over a log shorter than [`TAIL_AT`] pages now leaves its tail to the next pass.
    #[test]
    fn the_writer_leaves_the_tail_of_a_short_log_to_the_checkpointer() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::SqliteStore::open(dir.path()).unwrap();
        let value = "v".repeat(3000);
        // One write at a time, each a commit of ~3.4 frames (the row's new page, its parent,
        // the database's header page...): 800 writes cross the mark and stay below the tail's.
        for n in 0..800 {
            put(&store, format!("test.short.{n}"), value.clone());
        }
        wait_for_a_pass(&store);
        // A batch after the pass: where the writer would copy a tail it was asked for.
        put(&store, "test.short.after".to_owned(), value);
        let stats = store.writer_stats();
        let frames = log_frames(dir.path());
        assert!(
            frames < TAIL_AT as u64,
            "the test meant a log under the tail's mark: {frames} frames"
        );
        assert_eq!(stats.tail_checkpoints, 0, "{stats:?}");
        assert_eq!(stats.inline_checkpoints, 0, "{stats:?}");
    }

    /// A commit of ~1,300 pages crosses the mark: the thread checkpoints it, the writer does
    /// not, and the next commit starts the log over.
    #[test]
    fn a_log_past_the_mark_is_checkpointed_by_the_thread_and_then_restarts() {
        use crate::error::SqlContext;
        let dir = tempfile::tempdir().unwrap();
        let store = crate::SqliteStore::open(dir.path()).unwrap();
        let fill = "x".repeat(5 * 1024 * 1024);
        store
            .write("test.fill", "", move |conn| {
                conn.execute(
                    "INSERT INTO store_meta (key, value) VALUES ('test.fill', ?1)",
                    [&fill],
                )
                .ctx("test.fill", "")
            })
            .unwrap();
        wait_for_a_pass(&store);
        assert_eq!(store.writer_stats().inline_checkpoints, 0);
        // Everything was copied back: the next transaction writes the log from its start.
        store
            .write("test.small", "", |conn| {
                conn.execute("DELETE FROM store_meta WHERE key = 'test.fill'", [])
                    .ctx("test.small", "")
            })
            .unwrap();
        let side = Connection::open(dir.path().join(crate::DB_FILE)).unwrap();
        // A checkpoint that meets another one running (the thread's, or the writer's own)
        // says busy and reports no log (-1): ask again.
        let waited = openphone_clock::Stopwatch::start();
        let log = loop {
            let (busy, log): (i64, i64) = side
                .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .unwrap();
            if busy == 0 {
                break log;
            }
            assert!(
                waited.elapsed() < std::time::Duration::from_secs(30),
                "the side checkpoint stayed busy"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert!(
            (0..i64::from(CHECKPOINT_AT)).contains(&log),
            "the log was not restarted: {log} frames"
        );
    }
}
