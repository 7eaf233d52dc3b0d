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
//! copied. A checkpoint that cannot complete — under a steady load the writer appends while it
//! copies, or a reader holds an old snapshot — leaves the log growing; the writer then
//! checkpoints inline as before at [`INLINE_CHECKPOINT_AT`] pages, so the log stays bounded.
//!
//! Nothing about durability changes: a checkpoint only copies committed, already-synced (or
//! syncer-bound) frames, with its own fsyncs, and SQLite never restarts the log over frames
//! a checkpoint has not synced into the database.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags};

/// Log pages at which a commit wakes the checkpointer (SQLite's default auto-checkpoint).
pub(crate) const CHECKPOINT_AT: i32 = 1_000;
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
            // at the backstop still bounds it.
            if conn
                .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                .is_ok()
            {
                counters.background.fetch_add(1, Ordering::Relaxed);
            }
        }
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
        let waited = openphone_clock::Stopwatch::start();
        while store.writer_stats().background_checkpoints == 0 {
            assert!(
                waited.elapsed() < std::time::Duration::from_secs(30),
                "no background checkpoint: {:?}",
                store.writer_stats()
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(store.writer_stats().inline_checkpoints, 0);
        // Everything was copied back: the next transaction writes the log from its start.
        store
            .write("test.small", "", |conn| {
                conn.execute("DELETE FROM store_meta WHERE key = 'test.fill'", [])
                    .ctx("test.small", "")
            })
            .unwrap();
        let side = Connection::open(dir.path().join(crate::DB_FILE)).unwrap();
        let (_busy, log, _copied): (i64, i64, i64) = side
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .unwrap();
        assert!(
            (0..i64::from(CHECKPOINT_AT)).contains(&log),
            "the log was not restarted: {log} frames"
        );
    }
}
