//! Group commit: one writer thread owns the write connection.
//!
//! Every write of the store is a job: a closure over the connection, sent to the writer
//! thread. The writer takes the first job that arrives and every other job already queued
//! behind it (at most [`MAX_BATCH`]), opens one `IMMEDIATE` transaction, runs each job inside
//! its own savepoint (a job that fails rolls back only its own changes), and commits the batch
//! with one `COMMIT` — in WAL mode with `synchronous = FULL`, one fsync of the WAL for all of
//! them. Only then is each job's outcome handed to its caller: nothing is answered before its
//! records are durable, and when the commit fails every job of the batch gets the error.
//!
//! While a batch commits (the fsync is the slow part), new jobs queue; the next batch takes
//! them all. So under load the fsync is shared by every call that arrived meanwhile, and with
//! a single caller the latency is one transaction, as before. Jobs run in the order they
//! arrived, one at a time, on one connection: the audit chain (which reads its head inside the
//! job) stays strictly ordered.
//!
//! **Two promises.** A durable job (every write but one) is answered after the `COMMIT` that
//! fsynced it. A *relaxed* job ([`Writer::run_async_relaxed`]: the audit record of an executed
//! safe read) is answered once its batch is committed into the write-ahead log (written with
//! `write(2)`, so a crash of the process loses nothing), and made durable against power loss
//! right after by the syncer thread, which fsyncs the WAL file off the writer's path (or by the
//! next durable batch, whose fsync covers every frame before it). A batch with no durable job
//! commits with `synchronous = NORMAL` (no fsync in the commit); a batch with one commits with
//! `FULL`, as every batch did before. The WAL is append-only between checkpoints and a
//! checkpoint syncs it first, so a relaxed record lost to a power cut can only be a suffix of
//! the log, never a hole in the chain.
//!
//! A caller waits synchronously ([`Writer::run`]) or asynchronously ([`Writer::run_async`]);
//! an async caller that gives up (its future dropped) does not cancel the job. A job that
//! panics rolls back its savepoint; its caller gets [`StoreError::Commit`]. Dropping the
//! writer closes the queue; the thread finishes what was queued, closes the connection (which
//! checkpoints the WAL) and is joined, so the directory lock outlives the connection.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use openphone_clock::Stopwatch;
use rusqlite::Connection;

use crate::checkpointer::{CheckpointCounters, Checkpointer};
use crate::error::{Result, StoreError};

/// Most jobs committed in one transaction.
pub(crate) const MAX_BATCH: usize = 512;

/// What a job left behind once it ran: whether its savepoint is kept, and how to hand its
/// outcome over once the batch's commit is known (`None`: committed).
struct Ran {
    keep: bool,
    deliver: Deliver,
}

/// Hands a job's outcome to its caller, given the batch's commit failure (if any).
type Deliver = Box<dyn FnOnce(Option<&str>) + Send>;

/// A job's work: given the connection it runs and keeps or drops its changes; given `None`
/// (the batch could not start) it does not run and only prepares its failure.
type Work = Box<dyn FnOnce(Option<&Connection>) -> Ran + Send>;

/// A job: its work, and whether its caller waits for the fsync (see the module's two
/// promises).
struct Job {
    work: Work,
    durable: bool,
}

/// Where a job's outcome goes.
enum Reply<T> {
    Sync(mpsc::SyncSender<Result<T>>),
    Async(tokio::sync::oneshot::Sender<Result<T>>),
}

impl<T> Reply<T> {
    fn send(self, outcome: Result<T>) {
        // A caller that stopped waiting is not an error: the job ran (or failed) anyway.
        match self {
            Reply::Sync(tx) => {
                let _ = tx.send(outcome);
            }
            Reply::Async(tx) => {
                let _ = tx.send(outcome);
            }
        }
    }
}

/// How much the writer has grouped so far (diagnostics and benchmarks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct WriterStats {
    /// Transactions committed (one fsync each, but for those of relaxed writes only).
    pub batches: u64,
    /// Of them, those committed without an fsync (relaxed writes only; the syncer thread
    /// fsynced the WAL after them).
    pub relaxed_batches: u64,
    /// WAL fsyncs made by the syncer thread.
    pub background_syncs: u64,
    /// Of the syncer's fsyncs, those that failed (each retried).
    pub failed_syncs: u64,
    /// Writes committed in them (failed writes are not counted).
    pub writes: u64,
    /// The most writes one transaction carried.
    pub largest_batch: u64,
    /// Checkpoints the checkpointer thread made (`checkpointer.rs`).
    pub background_checkpoints: u64,
    /// Checkpoints the writer made itself, the log past the checkpointer's backstop.
    pub inline_checkpoints: u64,
    /// Checkpoints the writer made between two batches to copy what a pass of the
    /// checkpointer's left, so that the log starts over (`checkpointer.rs`).
    pub tail_checkpoints: u64,
}

#[derive(Debug, Default)]
struct Counters {
    batches: AtomicU64,
    relaxed_batches: AtomicU64,
    background_syncs: AtomicU64,
    failed_syncs: AtomicU64,
    writes: AtomicU64,
    largest_batch: AtomicU64,
}

/// The writer thread and the queue in front of it.
#[derive(Debug)]
pub(crate) struct Writer {
    queue: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    syncer: Option<(Arc<Syncer>, JoinHandle<()>)>,
    checkpointer: Option<(Arc<Checkpointer>, JoinHandle<()>)>,
    counters: Arc<Counters>,
    checkpoints: Arc<CheckpointCounters>,
}

/// The least time between two of the syncer's fsyncs. A safe read's record reaches the disk
/// at most this much later than it otherwise would (docs/security.md, "What is durable when");
/// under load an fsync then covers every relaxed batch of this time, not one or two: the
/// fsync's CPU (the syscall, the virtual disk's doorbell, the file system's journal) was the
/// syncer's 13 % of the daemon's CPU under a `screen.get` load (issue 34).
pub(crate) const SYNC_SPACING: Duration = Duration::from_millis(2);

/// How long the syncer still waits, `since` its last fsync began, before the next one.
fn spacing_left(since: Duration) -> Option<Duration> {
    SYNC_SPACING.checked_sub(since).filter(|d| !d.is_zero())
}

/// What the syncer thread waits on: whether the WAL holds frames committed without an fsync,
/// and whether the writer is stopping.
#[derive(Debug, Default)]
struct SyncState {
    dirty: bool,
    stop: bool,
}

/// The syncer: fsyncs the WAL after relaxed batches, off the writer's path. Several relaxed
/// batches committed during one fsync share the next one.
#[derive(Debug)]
struct Syncer {
    wal: PathBuf,
    state: Mutex<SyncState>,
    wake: Condvar,
}

impl Syncer {
    fn state(&self) -> std::sync::MutexGuard<'_, SyncState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A relaxed batch was committed: its frames need an fsync.
    fn mark_dirty(&self) {
        self.state().dirty = true;
        self.wake.notify_one();
    }

    /// Until stopped: waits for dirty frames, then fsyncs the WAL file (a sync of any
    /// descriptor of a file flushes all of its written data). Fsyncs are at least
    /// [`SYNC_SPACING`] apart, so that under load one covers the relaxed batches of that
    /// time instead of each batch making one; a stop syncs at once.
    fn serve(&self, counters: &Counters) {
        let mut last_sync: Option<Stopwatch> = None;
        loop {
            {
                let mut state = self.state();
                while !state.dirty && !state.stop {
                    state = self
                        .wake
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if !state.dirty {
                    return;
                }
                if let Some(wait) = last_sync.as_ref().and_then(|s| spacing_left(s.elapsed())) {
                    state = self
                        .wake
                        .wait_timeout_while(state, wait, |s| !s.stop)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                state.dirty = false;
            }
            last_sync = Some(Stopwatch::start());
            // No WAL file: the connection closed and checkpointed it (with its own syncs).
            if let Ok(file) = std::fs::File::open(&self.wal) {
                match file.sync_data() {
                    Ok(()) => {
                        counters.background_syncs.fetch_add(1, Ordering::Relaxed);
                    }
                    // Tried again shortly (and any durable commit meanwhile fsyncs the WAL).
                    Err(_) => {
                        counters.failed_syncs.fetch_add(1, Ordering::Relaxed);
                        self.state().dirty = true;
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                }
            }
        }
    }

    fn stop(&self) {
        self.state().stop = true;
        self.wake.notify_one();
    }
}

impl Writer {
    /// Starts the writer thread on `conn` (migrated and configured). When a thread cannot be
    /// started, those already started are stopped again (dropping the half-built writer).
    pub(crate) fn start(mut conn: Connection) -> std::io::Result<Writer> {
        // Room for every statement the writes use, prepared once.
        conn.set_prepared_statement_cache_capacity(64);
        let mut writer = Writer {
            queue: None,
            thread: None,
            syncer: None,
            checkpointer: None,
            counters: Arc::new(Counters::default()),
            checkpoints: Arc::new(CheckpointCounters::default()),
        };
        // An in-memory database has no log: nothing to checkpoint, nor to sync (its relaxed
        // writes are durable writes).
        if let Some(db) = conn.path().filter(|p| !p.is_empty()).map(PathBuf::from) {
            writer.checkpointer = Some(crate::checkpointer::start(
                &db,
                &mut conn,
                &writer.checkpoints,
            )?);
            let syncer = Arc::new(Syncer {
                wal: PathBuf::from(format!("{}-wal", db.display())),
                state: Mutex::new(SyncState::default()),
                wake: Condvar::new(),
            });
            let (serving, counting) = (Arc::clone(&syncer), Arc::clone(&writer.counters));
            let thread = std::thread::Builder::new()
                .name("op-store-syncer".into())
                .spawn(move || serving.serve(&counting))?;
            writer.syncer = Some((syncer, thread));
        }
        let (queue, jobs) = mpsc::channel::<Job>();
        let counting = Arc::clone(&writer.counters);
        let syncing = writer.syncer.as_ref().map(|(s, _)| Arc::clone(s));
        let tails = writer
            .checkpointer
            .as_ref()
            .map(|(c, _)| (Arc::clone(c), Arc::clone(&writer.checkpoints)));
        let thread = std::thread::Builder::new()
            .name("op-store-writer".into())
            .spawn(move || {
                let tails = tails.as_ref().map(|(c, n)| (&**c, &**n));
                serve(conn, &jobs, &counting, syncing.as_deref(), tails);
            })?;
        writer.queue = Some(queue);
        writer.thread = Some(thread);
        Ok(writer)
    }

    /// What has been committed so far.
    pub(crate) fn stats(&self) -> WriterStats {
        WriterStats {
            batches: self.counters.batches.load(Ordering::Relaxed),
            relaxed_batches: self.counters.relaxed_batches.load(Ordering::Relaxed),
            background_syncs: self.counters.background_syncs.load(Ordering::Relaxed),
            failed_syncs: self.counters.failed_syncs.load(Ordering::Relaxed),
            writes: self.counters.writes.load(Ordering::Relaxed),
            largest_batch: self.counters.largest_batch.load(Ordering::Relaxed),
            background_checkpoints: self.checkpoints.background.load(Ordering::Relaxed),
            inline_checkpoints: self.checkpoints.inline.load(Ordering::Relaxed),
            tail_checkpoints: self.checkpoints.tail.load(Ordering::Relaxed),
        }
    }

    /// Queues `f` without waiting for it (test hooks).
    pub(crate) fn enqueue(
        &self,
        op: &'static str,
        f: impl FnOnce(&Connection) -> Result<()> + Send + 'static,
    ) -> Result<()> {
        let (tx, _rx) = mpsc::sync_channel(1);
        self.submit(op, "", f, Reply::Sync(tx), true)
    }

    /// Runs `f` in the next batch and waits (blocking the thread) until that batch committed.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        op: &'static str,
        id: &str,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(op, id, f, Reply::Sync(tx), true)?;
        rx.recv().unwrap_or_else(|_| Err(lost(op, id)))
    }

    /// Runs `f` in the next batch; the future resolves once that batch committed.
    pub(crate) async fn run_async<T: Send + 'static>(
        &self,
        op: &'static str,
        id: &str,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(op, id, f, Reply::Async(tx), true)?;
        rx.await.unwrap_or_else(|_| Err(lost(op, id)))
    }

    /// [`Writer::run_async`] with the relaxed promise: resolves once the batch is committed
    /// into the WAL (a process crash keeps it), before the fsync that the syncer thread (or
    /// the next durable batch) makes right after. Only for records whose loss to a power cut
    /// the caller accepts: the audit records of safe reads.
    pub(crate) async fn run_async_relaxed<T: Send + 'static>(
        &self,
        op: &'static str,
        id: &str,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(op, id, f, Reply::Async(tx), false)?;
        rx.await.unwrap_or_else(|_| Err(lost(op, id)))
    }

    fn submit<T: Send + 'static>(
        &self,
        op: &'static str,
        id: &str,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
        reply: Reply<T>,
        durable: bool,
    ) -> Result<()> {
        let owned_id = id.to_owned();
        let work: Work = Box::new(move |conn: Option<&Connection>| {
            let outcome = conn.map(f);
            let keep = matches!(outcome, Some(Ok(_)));
            Ran {
                keep,
                deliver: Box::new(move |commit_failure: Option<&str>| {
                    let outcome = match (outcome, commit_failure) {
                        (Some(Err(e)), None) => Err(e),
                        (Some(Ok(v)), None) => Ok(v),
                        (_, failure) => Err(StoreError::Commit {
                            op,
                            id: owned_id,
                            detail: failure.unwrap_or("the write did not run").to_owned(),
                        }),
                    };
                    reply.send(outcome);
                }),
            }
        });
        let queue = self.queue.as_ref().ok_or_else(|| stopped(op, id))?;
        queue
            .send(Job { work, durable })
            .map_err(|_| stopped(op, id))
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // The checkpointer first: it finishes the checkpoint it is making, if any, and closes
        // its connection before the writer closes its own.
        if let Some((checkpointer, thread)) = self.checkpointer.take() {
            checkpointer.stop();
            let _ = thread.join();
        }
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // The connection is closed (its WAL checkpointed and synced): the syncer may stop.
        if let Some((syncer, thread)) = self.syncer.take() {
            syncer.stop();
            let _ = thread.join();
        }
    }
}

fn lost(op: &'static str, id: &str) -> StoreError {
    StoreError::Commit {
        op,
        id: id.to_owned(),
        detail: "the write was abandoned by the store's writer (it panicked or stopped)".into(),
    }
}

fn stopped(op: &'static str, id: &str) -> StoreError {
    StoreError::Commit {
        op,
        id: id.to_owned(),
        detail: "the store's writer has stopped".into(),
    }
}

/// The writer thread: batches until the queue closes.
fn serve(
    conn: Connection,
    jobs: &mpsc::Receiver<Job>,
    counters: &Counters,
    syncer: Option<&Syncer>,
    tails: Option<(&Checkpointer, &CheckpointCounters)>,
) {
    // The connection starts with `synchronous = FULL` (open.rs).
    let mut full = true;
    let mut ctl = Control::new(&conn);
    while let Ok(first) = jobs.recv() {
        let mut batch = Vec::with_capacity(16);
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        // Relaxed batches only where a syncer will fsync after them.
        let durable = syncer.is_none() || batch.iter().any(|job| job.durable);
        if durable != full {
            let mode = if durable { "FULL" } else { "NORMAL" };
            match conn.pragma_update(None, "synchronous", mode) {
                Ok(()) => full = durable,
                // Still NORMAL: a durable job must not be answered without its fsync.
                Err(e) if durable => {
                    let detail = format!("could not set synchronous = FULL: {e}");
                    for job in batch {
                        fail_unrun(job, &detail);
                    }
                    continue;
                }
                // Still FULL: the relaxed jobs get more than they asked for.
                Err(_) => {}
            }
        }
        let relaxed = !full;
        commit_batch(&mut ctl, batch, counters);
        if relaxed && let Some(syncer) = syncer {
            counters.relaxed_batches.fetch_add(1, Ordering::Relaxed);
            syncer.mark_dirty();
        }
        // The batch's answers are out: the jobs queued meanwhile wait for the copy of what the
        // checkpointer's pass over a long log left (a few pages and two fsyncs), once per
        // `TAIL_AT` pages of log.
        if let Some((checkpointer, counting)) = tails
            && checkpointer.take_tail()
        {
            crate::checkpointer::checkpoint_tail(&conn, counting);
        }
    }
    // The queue is closed: closing the connection checkpoints the WAL (its statements go
    // first).
    drop(ctl);
    drop(conn);
}

/// Runs one batch in one transaction and hands every outcome over once its fate is known
/// (after counting it, so a caller that has its outcome sees the counts include it). A job's
/// own failure is handed over after the commit too: it may have depended on what earlier jobs
/// of the batch wrote, which the commit may yet lose.
///
/// SQLite may roll a whole transaction back by itself (a full disk, an I/O error, no memory)
/// inside one job's statement; the writer checks after every job that its transaction is
/// still open, and when it is not, fails every job of it and begins again for the rest. A
/// savepoint that cannot be undone fails the whole batch.
fn commit_batch(ctl: &mut Control<'_>, batch: Vec<Job>, counters: &Counters) {
    let mut jobs = batch.into_iter();
    while jobs.len() > 0 {
        run_transaction(ctl, &mut jobs, counters);
    }
}

/// One transaction over the jobs `jobs` still holds (all of them, unless SQLite ends the
/// transaction early: then the rest are left for the next one).
fn run_transaction(ctl: &mut Control<'_>, jobs: &mut std::vec::IntoIter<Job>, counters: &Counters) {
    let conn = ctl.conn;
    if !conn.is_autocommit() {
        // A transaction left open by an earlier failure: it is not ours to keep.
        let _ = ctl.step(Ctl::Rollback);
    }
    if let Err(e) = ctl.step(Ctl::Begin) {
        let detail = format!("could not begin a transaction: {e}");
        for job in jobs.by_ref() {
            fail_unrun(job, &detail);
        }
        return;
    }
    let mut kept: Vec<Deliver> = Vec::new();
    let mut failed: Vec<Deliver> = Vec::new();
    while let Some(job) = jobs.next() {
        if let Err(e) = ctl.step(Ctl::Savepoint) {
            fail_unrun(job, &format!("could not open a savepoint: {e}"));
            continue;
        }
        let mut undone = true;
        match catch_unwind(AssertUnwindSafe(|| (job.work)(Some(conn)))) {
            Ok(Ran {
                keep: true,
                deliver,
            }) => match ctl.step(Ctl::Release) {
                Ok(()) => kept.push(deliver),
                Err(_) => {
                    undone = undo_savepoint(ctl);
                    failed.push(deliver);
                }
            },
            Ok(Ran {
                keep: false,
                deliver,
            }) => {
                undone = undo_savepoint(ctl);
                failed.push(deliver);
            }
            // The job's reply was dropped while unwinding: its caller sees a lost write.
            Err(_panic) => undone = undo_savepoint(ctl),
        }
        if conn.is_autocommit() || !undone {
            // SQLite ended the transaction under us, or a failed job's changes cannot be
            // taken back: nothing of this transaction may be kept.
            let _ = ctl.step(Ctl::Rollback);
            let detail = if undone {
                "the database rolled the transaction back (see the daemon's log)"
            } else {
                "a failed write's changes could not be undone; the transaction was rolled back"
            };
            for deliver in kept.into_iter().chain(failed) {
                deliver(Some(detail));
            }
            if !undone {
                for job in jobs.by_ref() {
                    fail_unrun(job, detail);
                }
            }
            return;
        }
    }
    match ctl.step(Ctl::Commit) {
        Ok(()) => {
            let committed = u64::try_from(kept.len()).unwrap_or(u64::MAX);
            if committed > 0 {
                counters.batches.fetch_add(1, Ordering::Relaxed);
                counters.writes.fetch_add(committed, Ordering::Relaxed);
                counters
                    .largest_batch
                    .fetch_max(committed, Ordering::Relaxed);
            }
            for deliver in kept.into_iter().chain(failed) {
                deliver(None);
            }
        }
        Err(e) => {
            let _ = ctl.step(Ctl::Rollback);
            let detail = format!("could not commit: {e}");
            for deliver in kept.into_iter().chain(failed) {
                deliver(Some(&detail));
            }
        }
    }
}

/// Rolls back to and releases the current savepoint; false when that failed (the job's
/// changes may still be in the transaction).
fn undo_savepoint(ctl: &mut Control<'_>) -> bool {
    ctl.step(Ctl::RollbackTo)
        .and_then(|()| ctl.step(Ctl::Release))
        .is_ok()
}

/// The transaction-control statements the writer runs around every batch and job.
#[derive(Clone, Copy)]
enum Ctl {
    Begin,
    Savepoint,
    Release,
    RollbackTo,
    Rollback,
    Commit,
}

impl Ctl {
    fn sql(self) -> &'static str {
        match self {
            Ctl::Begin => "BEGIN IMMEDIATE",
            Ctl::Savepoint => "SAVEPOINT job",
            Ctl::Release => "RELEASE job",
            Ctl::RollbackTo => "ROLLBACK TO job",
            Ctl::Rollback => "ROLLBACK",
            Ctl::Commit => "COMMIT",
        }
    }
}

/// The writer's transaction-control statements, each prepared on its first use and kept for
/// the connection's life. They run several times per batch: parsing them each time showed in
/// profiles, and even the statement cache's lookup copies the statement's text into a new key
/// every time (rusqlite), ~4 allocations a call (issue 34).
struct Control<'c> {
    conn: &'c Connection,
    prepared: [Option<rusqlite::Statement<'c>>; 6],
}

impl<'c> Control<'c> {
    fn new(conn: &'c Connection) -> Control<'c> {
        Control {
            conn,
            prepared: Default::default(),
        }
    }

    /// Runs `which` (prepared now if it was not yet; a failure to prepare is its failure).
    fn step(&mut self, which: Ctl) -> rusqlite::Result<()> {
        let slot = &mut self.prepared[which as usize];
        let statement = match slot {
            Some(statement) => statement,
            None => slot.insert(self.conn.prepare(which.sql())?),
        };
        statement.execute([]).map(|_| ())
    }
}

/// Hands `job` a failure without running it.
fn fail_unrun(job: Job, detail: &str) {
    let Ran { deliver, .. } = (job.work)(None);
    deliver(Some(detail));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_syncer_waits_out_the_spacing_and_no_longer() {
        assert_eq!(spacing_left(Duration::ZERO), Some(SYNC_SPACING));
        assert_eq!(
            spacing_left(SYNC_SPACING / 4),
            Some(SYNC_SPACING - SYNC_SPACING / 4)
        );
        assert_eq!(spacing_left(SYNC_SPACING), None);
        assert_eq!(spacing_left(SYNC_SPACING * 3), None);
    }
}
