//! `--durable-log FILE` / `--durable-sqlite FILE`: the durability floors. With it, the `ws` and `mcp` servers answer a
//! tool call only once a record of it is on the disk: the record (the answer's bytes, a line)
//! goes to one writer thread, which appends every record queued meanwhile with one `write(2)`,
//! fsyncs the file once for all of them (group commit) and only then releases their answers.
//!
//! With `--pipelined` the writer thread only writes: it hands each written batch's waiters to
//! a second thread, which fsyncs once for every batch written before it began and then
//! releases them, while the writer goes on writing the next batches — the fsync off the
//! writer's path, answers still after their record's fsync.
//!
//! The file is written ahead of time (16 MiB of zeros, fsynced) and the records overwrite it
//! from the start, wrapping around at its end: an append that grows a file makes every fsync
//! also commit the file system's journal (the file's size changed), which SQLite's write-ahead
//! log avoids the same way (it is rewritten in place after each checkpoint, not grown). So the
//! fsync here is the data's flush and nothing more.
//!
//! With `--durable-sqlite FILE` the record is a row instead: FILE is a SQLite database in WAL
//! mode with `synchronous = FULL` (as the daemon's store), one table `records(id INTEGER
//! PRIMARY KEY, body BLOB)`, and the writer thread inserts every queued record in one
//! `BEGIN IMMEDIATE … COMMIT` (the commit fsyncs the WAL). No savepoints, no indexes, no hash
//! chain: the least a server whose store is SQLite can do per durable answer.
//!
//! A raw log is the least any server can do to keep the daemon's promise for a private read ("its
//! audit record committed and fsynced before the answer", docs/security.md) — no SQLite, no
//! hash chain, no policy — with the daemon's shape of hand-offs (an async task, one writer
//! thread, back). What a durable path reaches on this machine is bounded by what this reaches.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, PoisonError, mpsc};

use tokio::sync::oneshot;

/// Most records appended with one fsync (the daemon's writer takes up to 512 jobs a batch).
const MAX_BATCH: usize = 512;

/// The file's size, written once before the first record, which the records overwrite in a
/// ring.
const SIZE: u64 = 16 * 1024 * 1024;

/// A record waiting for the disk, and who waits for it.
type Pending = (Vec<u8>, oneshot::Sender<Result<(), String>>);

/// Where the records go.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    /// A pre-written file, one write and one fsync per batch.
    File,
    /// The same, the fsync on a second thread.
    FilePipelined,
    /// A SQLite database, one transaction per batch.
    Sqlite,
}

/// `--durable-log FILE [--pipelined]` or `--durable-sqlite FILE`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spec {
    pub(crate) path: PathBuf,
    pub(crate) kind: Kind,
    /// `--work-us`: CPU time (µs) spent per call before its record is queued; 0 for none.
    pub(crate) work_us: u32,
}

/// The handle of the writer thread: [`Log::append`] resolves once the record is fsynced.
pub(crate) struct Log {
    queue: mpsc::Sender<Pending>,
    /// Done on the caller's task before each record is queued (`--work-us`).
    work: crate::work::Work,
}

impl Log {
    /// Opens the log `spec` names and starts its writer thread.
    pub(crate) fn start(spec: &Spec) -> Result<Log, String> {
        let mut log = match spec.kind {
            Kind::File => Log::open(&spec.path, false, SIZE),
            Kind::FilePipelined => Log::open(&spec.path, true, SIZE),
            Kind::Sqlite => Log::open_sqlite(&spec.path),
        }?;
        log.work = crate::work::Work::calibrated(spec.work_us);
        if spec.work_us > 0 {
            eprintln!(
                "work per call: {} µs ({} iterations, calibrated)",
                spec.work_us, log.work.iterations
            );
        }
        Ok(log)
    }

    /// Creates (or replaces) the SQLite database `path` and starts the writer thread on it.
    fn open_sqlite(path: &Path) -> Result<Log, String> {
        let cannot = |e: rusqlite::Error| {
            format!("cannot open the durable database {}: {e}", path.display())
        };
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        let conn = rusqlite::Connection::open(path).map_err(cannot)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(cannot)?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(cannot)?;
        conn.execute_batch("CREATE TABLE records (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
            .map_err(cannot)?;
        let (queue, records) = mpsc::channel::<Pending>();
        std::thread::Builder::new()
            .name("null-durable-db".into())
            .spawn(move || serve_sqlite(&conn, &records))
            .map_err(|e| format!("cannot start the durable database's thread: {e}"))?;
        Ok(Log {
            queue,
            work: crate::work::Work::default(),
        })
    }

    /// Creates (or truncates) `path`, writes `size` bytes of zeros into it, fsyncs it and
    /// starts the writer thread on it (and, `pipelined`, the syncer thread).
    fn open(path: &Path, pipelined: bool, size: u64) -> Result<Log, String> {
        let cannot =
            |e: std::io::Error| format!("cannot open the durable log {}: {e}", path.display());
        let mut file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)
            .map_err(cannot)?;
        let zeros = vec![0_u8; 1024 * 1024];
        let mut left = size;
        while left > 0 {
            let n = left.min(zeros.len() as u64);
            file.write_all(&zeros[..n as usize]).map_err(cannot)?;
            left -= n;
        }
        file.sync_all().map_err(cannot)?;
        let (queue, records) = mpsc::channel::<Pending>();
        let syncer = if pipelined {
            let syncer = Arc::new(Syncer::default());
            let file = file.try_clone().map_err(cannot)?;
            let serving = Arc::clone(&syncer);
            std::thread::Builder::new()
                .name("null-durable-sync".into())
                .spawn(move || serving.serve(&file))
                .map_err(|e| format!("cannot start the durable log's syncer: {e}"))?;
            Some(syncer)
        } else {
            None
        };
        std::thread::Builder::new()
            .name("null-durable-log".into())
            .spawn(move || serve(file, size, &records, syncer.as_deref()))
            .map_err(|e| format!("cannot start the durable log's thread: {e}"))?;
        Ok(Log {
            queue,
            work: crate::work::Work::default(),
        })
    }

    /// Appends `record` (and a newline) and returns once it is fsynced.
    pub(crate) async fn append(&self, record: &[u8]) -> Result<(), String> {
        self.work.spend();
        let (done, wait) = oneshot::channel();
        let mut line = Vec::with_capacity(record.len() + 1);
        line.extend_from_slice(record);
        line.push(b'\n');
        self.queue
            .send((line, done))
            .map_err(|_| "the durable log's thread stopped".to_owned())?;
        wait.await
            .map_err(|_| "the durable log's thread stopped".to_owned())?
    }
}

/// The SQLite writer thread: takes the first record and every one queued behind it, inserts
/// them in one transaction, commits (the WAL's fsync), then answers each.
fn serve_sqlite(conn: &rusqlite::Connection, records: &mpsc::Receiver<Pending>) {
    let mut batch: Vec<Pending> = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = records.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match records.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let outcome = insert_all(conn, &batch)
            .map_err(|e| format!("the durable database could not be written: {e}"));
        if outcome.is_err() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        for (_, done) in batch.drain(..) {
            let _ = done.send(outcome.clone());
        }
    }
}

/// One transaction inserting every record of `batch`.
fn insert_all(conn: &rusqlite::Connection, batch: &[Pending]) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    {
        let mut insert = conn.prepare_cached("INSERT INTO records (body) VALUES (?1)")?;
        for (record, _) in batch {
            insert.execute([record.as_slice()])?;
        }
    }
    conn.execute_batch("COMMIT")
}

/// Who waits for an fsync.
type Waiter = oneshot::Sender<Result<(), String>>;

/// The syncer of the pipelined log: the waiters of the batches written since its last fsync
/// began, whether an fsync is under way, and whether the writer has stopped.
#[derive(Default)]
struct Syncer {
    state: Mutex<SyncState>,
    wake: Condvar,
}

#[derive(Default)]
struct SyncState {
    handed: Vec<Waiter>,
    syncing: bool,
    closed: bool,
}

impl Syncer {
    fn state(&self) -> std::sync::MutexGuard<'_, SyncState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A batch was written: its waiters wait for the next fsync that begins after now.
    fn hand(&self, waiters: &mut Vec<Waiter>) {
        self.state().handed.append(waiters);
        self.wake.notify_all();
    }

    /// Waits until every batch handed over is fsynced: before the writer wraps around to the
    /// start of the file, so that it never overwrites a record whose fsync is still to come.
    fn wait_synced(&self) {
        let mut state = self.state();
        while !state.handed.is_empty() || state.syncing {
            state = self
                .wake
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The writer stopped: the syncer fsyncs what is left and ends.
    fn close(&self) {
        self.state().closed = true;
        self.wake.notify_all();
    }

    /// Until closed: takes every waiter handed so far, fsyncs, releases them.
    fn serve(&self, file: &File) {
        loop {
            let waiters = {
                let mut state = self.state();
                while state.handed.is_empty() && !state.closed {
                    state = self
                        .wake
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if state.handed.is_empty() {
                    return;
                }
                state.syncing = true;
                std::mem::take(&mut state.handed)
            };
            let outcome = file
                .sync_data()
                .map_err(|e| format!("the durable log could not be fsynced: {e}"));
            for done in waiters {
                let _ = done.send(outcome.clone());
            }
            self.state().syncing = false;
            self.wake.notify_all();
        }
    }
}

/// The writer thread: takes the first record and every one queued behind it, appends them
/// with one write, then fsyncs and answers each — or, pipelined, hands them to the syncer.
/// The records overwrite the file's `size` bytes from the start, wrapping around.
fn serve(mut file: File, size: u64, records: &mpsc::Receiver<Pending>, syncer: Option<&Syncer>) {
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut at = 0_u64;
    let mut waiting = Vec::with_capacity(MAX_BATCH);
    while let Ok((record, done)) = records.recv() {
        buf.clear();
        buf.extend_from_slice(&record);
        waiting.push(done);
        while waiting.len() < MAX_BATCH {
            match records.try_recv() {
                Ok((record, done)) => {
                    buf.extend_from_slice(&record);
                    waiting.push(done);
                }
                Err(_) => break,
            }
        }
        // Back to the start when the batch would run past the end (a batch larger than the
        // file grows it: the fsync then commits the new size too).
        if at + buf.len() as u64 > size {
            at = 0;
            if let Some(syncer) = syncer {
                syncer.wait_synced();
            }
        }
        let written = file
            .seek(SeekFrom::Start(at))
            .and_then(|_| file.write_all(&buf));
        at += buf.len() as u64;
        if let (Ok(()), Some(syncer)) = (&written, syncer) {
            syncer.hand(&mut waiting);
            continue;
        }
        let outcome = written
            .and_then(|()| file.sync_data())
            .map_err(|e| format!("the durable log could not be written: {e}"));
        for done in waiting.drain(..) {
            let _ = done.send(outcome.clone());
        }
    }
    if let Some(syncer) = syncer {
        syncer.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_answered_record_is_in_the_file_in_full() {
        for pipelined in [false, true] {
            every_record_in_full(pipelined).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_ring_wraps_to_its_start_and_keeps_its_size() {
        for pipelined in [false, true] {
            let dir = std::env::temp_dir().join(format!(
                "null-durable-ring-{}-{pipelined}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("log");
            let log = Log::open(&path, pipelined, 64).unwrap();
            // 22 bytes each with the newline: two fit in 64 bytes, the third starts again at 0.
            for i in 1..=3 {
                log.append(format!("record {i} padded to 25").as_bytes())
                    .await
                    .unwrap();
            }
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(bytes.len(), 64, "the file keeps its size");
            assert!(
                bytes.starts_with(b"record 3 padded to 25\nrecord 2"),
                "{bytes:?}"
            );
            // The writer stops when the log is dropped; the syncer with it.
            drop(log);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_answered_record_is_a_row_of_the_database() {
        let dir = std::env::temp_dir().join(format!("null-durable-db-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("records.db");
        let spec = Spec {
            path: path.clone(),
            kind: Kind::Sqlite,
            work_us: 3,
        };
        let log = Arc::new(Log::start(&spec).unwrap());
        let mut tasks = Vec::new();
        for i in 0..64 {
            let log = Arc::clone(&log);
            tasks.push(tokio::spawn(async move {
                log.append(format!("record {i}").as_bytes()).await
            }));
        }
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        // A second connection sees every answered record, committed.
        let conn = rusqlite::Connection::open(&path).unwrap();
        let mut rows: Vec<String> = conn
            .prepare("SELECT body FROM records")
            .unwrap()
            .query_map([], |r| r.get::<_, Vec<u8>>(0))
            .unwrap()
            .map(|b| String::from_utf8(b.unwrap()).unwrap())
            .collect();
        rows.sort_unstable();
        let mut want: Vec<String> = (0..64).map(|i| format!("record {i}\n")).collect();
        want.sort_unstable();
        assert_eq!(rows, want);
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        drop(conn);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    async fn every_record_in_full(pipelined: bool) {
        let dir =
            std::env::temp_dir().join(format!("null-durable-{}-{pipelined}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        let log = std::sync::Arc::new(Log::open(&path, pipelined, SIZE).unwrap());
        let mut tasks = Vec::new();
        for i in 0..64 {
            let log = std::sync::Arc::clone(&log);
            tasks.push(tokio::spawn(async move {
                log.append(format!("record {i}").as_bytes()).await
            }));
        }
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<&str> = text.trim_end_matches('\0').lines().collect();
        lines.sort_unstable();
        let mut want: Vec<String> = (0..64).map(|i| format!("record {i}")).collect();
        want.sort_unstable();
        assert_eq!(lines, want);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_log_that_cannot_be_created_is_a_clear_error() {
        let err = Log::open(Path::new("/nonexistent-dir/for/sure/log"), false, SIZE)
            .err()
            .unwrap();
        assert!(err.contains("cannot open the durable log"), "{err}");
    }
}
