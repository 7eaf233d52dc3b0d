//! The connections of one daemon: one writer thread owning one `postgres::Client`, and N reader
//! threads owning one each. Work reaches them as boxed jobs over channels; callers wait on a std
//! channel ([`Pool::write`], [`Pool::read`]) or a tokio oneshot (the `_async` forms).
//!
//! Writes run one at a time on the writer, each in its own SERIALIZABLE transaction. When the
//! server aborts one with 40001 (serialization failure) or 40P01 (deadlock) it is rolled back and
//! run again, up to [`MAX_ATTEMPTS`] times, then answered [`StoreError::Conflict`]. When the
//! connection is lost before COMMIT was sent, nothing was stored (the server rolls back an open
//! transaction of a lost session), so the writer reconnects and runs the job again. When it is
//! lost DURING the COMMIT, the outcome is unknown: the job is not run again (that could store
//! it twice) and its caller gets [`StoreError::Commit`] saying so. A job that panics is rolled
//! back and answered with `Commit`; its connection is dropped and the thread carries on.
//!
//! The writer's session also holds this daemon's host lock (see `host.rs`): a reconnect takes it
//! again before running anything, and refuses to write when another daemon took the host id
//! meanwhile.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use openphone_clock::Stopwatch;
use openphone_store::{Result, StoreError};
use postgres::{Client, IsolationLevel, NoTls, Transaction};
use tokio::sync::oneshot;

use crate::config::{PgConfig, Resolved};
use crate::error::{self, LastError, PgContext, backend, describe};
use crate::host;
use crate::tls::RustlsConnector;

/// Runs of one write before a run of serialization failures is answered `Conflict`.
pub(crate) const MAX_ATTEMPTS: u32 = 10;
/// Reconnects (with backoff 50 ms doubling to 1 s) before a write is answered "not written".
const MAX_RECONNECTS: u32 = 8;

/// Opens connections configured for this daemon: TLS as resolved, the session settings
/// (`lock_timeout`, `statement_timeout`, `search_path`) applied on every one.
#[derive(Debug)]
pub(crate) struct Connector {
    resolved: Resolved,
    session_sql: String,
    host_id: String,
}

impl Connector {
    pub(crate) fn new(resolved: Resolved, config: &PgConfig) -> Self {
        let mut session_sql = format!(
            "SET lock_timeout = '{}ms'; SET statement_timeout = '{}ms';",
            config.lock_timeout.as_millis(),
            config.statement_timeout.as_millis()
        );
        if let Some(schema) = &config.schema {
            // Checked by `check_schema`: lower-case letters, digits and `_` only.
            session_sql.push_str(&format!(" SET search_path TO \"{schema}\";"));
        }
        Self {
            resolved,
            session_sql,
            host_id: config.host_id.clone(),
        }
    }

    /// `user@host:port/dbname`, for messages.
    pub(crate) fn target(&self) -> &str {
        &self.resolved.target
    }

    pub(crate) fn host_id(&self) -> &str {
        &self.host_id
    }

    /// A new connection with the session settings applied.
    pub(crate) fn connect(&self) -> Result<Client> {
        let connected = match &self.resolved.tls {
            Some(config) => self
                .resolved
                .pg
                .connect(RustlsConnector::new(Arc::clone(config))),
            None => self.resolved.pg.connect(NoTls),
        };
        let mut client = connected.map_err(|e| {
            error::note(&e);
            backend(
                "connect",
                &self.resolved.target,
                format!("cannot connect to PostgreSQL: {}", describe(&e)),
            )
        })?;
        client
            .batch_execute(&self.session_sql)
            .ctx("connect.session", &self.resolved.target)?;
        Ok(client)
    }
}

type WriteJob = Box<dyn FnOnce(&mut WriterConn) + Send>;
type ReadJob = Box<dyn FnOnce(&mut ReaderConn) + Send>;

/// Where a job's answer goes.
enum Reply<T> {
    Sync(mpsc::SyncSender<Result<T>>),
    Async(oneshot::Sender<Result<T>>),
}

impl<T> Reply<T> {
    fn send(self, value: Result<T>) {
        // A caller that stopped waiting (dropped its future) no longer wants the answer.
        match self {
            Reply::Sync(tx) => drop(tx.send(value)),
            Reply::Async(tx) => drop(tx.send(value)),
        }
    }
}

/// The writer and reader threads of one store.
#[derive(Debug)]
pub(crate) struct Pool {
    writer: Option<mpsc::Sender<WriteJob>>,
    readers: Option<mpsc::Sender<ReadJob>>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    /// Starts the threads over connections already open (`writer` holds the host lock).
    pub(crate) fn start(
        connector: Arc<Connector>,
        writer: Client,
        readers: Vec<Client>,
    ) -> Result<Pool> {
        let mut threads = Vec::with_capacity(readers.len() + 1);
        let (write_tx, write_rx) = mpsc::channel::<WriteJob>();
        let mut conn = WriterConn {
            client: Some(writer),
            connector: Arc::clone(&connector),
        };
        threads.push(spawn("openphone-pg-writer", &connector, move || {
            while let Ok(job) = write_rx.recv() {
                job(&mut conn);
            }
            conn.close();
        })?);
        let (read_tx, read_rx) = mpsc::channel::<ReadJob>();
        let read_rx = Arc::new(Mutex::new(read_rx));
        for (n, client) in readers.into_iter().enumerate() {
            let rx = Arc::clone(&read_rx);
            let mut conn = ReaderConn {
                client: Some(client),
                connector: Arc::clone(&connector),
                idle: Some(Stopwatch::start()),
            };
            threads.push(spawn(
                &format!("openphone-pg-reader-{n}"),
                &connector,
                move || {
                    loop {
                        let job = {
                            let guard = match rx.lock() {
                                Ok(guard) => guard,
                                Err(poisoned) => poisoned.into_inner(),
                            };
                            guard.recv()
                        };
                        match job {
                            Ok(job) => job(&mut conn),
                            Err(mpsc::RecvError) => break,
                        }
                    }
                },
            )?);
        }
        Ok(Pool {
            writer: Some(write_tx),
            readers: Some(read_tx),
            threads,
        })
    }

    pub(crate) fn write<T, F>(&self, op: &'static str, id: &str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut Transaction<'_>) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit_write(op, id, f, Reply::Sync(tx))?;
        rx.recv().unwrap_or_else(|_| Err(abandoned(op, id)))
    }

    pub(crate) async fn write_async<T, F>(&self, op: &'static str, id: &str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut Transaction<'_>) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.submit_write(op, id, f, Reply::Async(tx))?;
        rx.await.unwrap_or_else(|_| Err(abandoned(op, id)))
    }

    pub(crate) fn read<T, F>(&self, op: &'static str, id: &str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Client) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit_read(op, id, f, Reply::Sync(tx))?;
        rx.recv().unwrap_or_else(|_| Err(read_abandoned(op, id)))
    }

    pub(crate) async fn read_async<T, F>(&self, op: &'static str, id: &str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Client) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.submit_read(op, id, f, Reply::Async(tx))?;
        rx.await.unwrap_or_else(|_| Err(read_abandoned(op, id)))
    }

    fn submit_write<T, F>(&self, op: &'static str, id: &str, f: F, reply: Reply<T>) -> Result<()>
    where
        T: Send + 'static,
        F: Fn(&mut Transaction<'_>) -> Result<T> + Send + 'static,
    {
        let owned_id = id.to_owned();
        let job: WriteJob = Box::new(move |conn: &mut WriterConn| {
            reply.send(run_write(conn, op, &owned_id, &f));
        });
        let sender = self.writer.as_ref().ok_or_else(|| abandoned(op, id))?;
        sender.send(job).map_err(|_| abandoned(op, id))
    }

    fn submit_read<T, F>(&self, op: &'static str, id: &str, f: F, reply: Reply<T>) -> Result<()>
    where
        T: Send + 'static,
        F: FnOnce(&mut Client) -> Result<T> + Send + 'static,
    {
        let owned_id = id.to_owned();
        let job: ReadJob = Box::new(move |conn: &mut ReaderConn| {
            reply.send(run_read(conn, op, &owned_id, f));
        });
        let sender = self
            .readers
            .as_ref()
            .ok_or_else(|| read_abandoned(op, id))?;
        sender.send(job).map_err(|_| read_abandoned(op, id))
    }
}

impl Drop for Pool {
    /// Closes the queues (queued jobs still run), then waits for the threads: the writer releases
    /// the host lock and closes its session before it ends.
    fn drop(&mut self) {
        self.writer.take();
        self.readers.take();
        for thread in self.threads.drain(..) {
            // A thread that panicked outside a job has nothing left to clean up.
            drop(thread.join());
        }
    }
}

fn spawn(
    name: &str,
    connector: &Connector,
    body: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(body)
        .map_err(|e| {
            backend(
                "open",
                connector.host_id(),
                format!("cannot start thread {name}: {e}"),
            )
        })
}

fn abandoned(op: &'static str, id: &str) -> StoreError {
    StoreError::Commit {
        op,
        id: id.to_owned(),
        detail: "the store's writer has stopped (the store is closing)".into(),
    }
}

fn read_abandoned(op: &'static str, id: &str) -> StoreError {
    backend(
        op,
        id,
        "the store's readers have stopped (the store is closing)".into(),
    )
}

/// A random pause before running a conflicted write again, up to 1, 2, 4 … 32 ms: two daemons
/// that conflicted do not start again in lockstep.
fn conflict_backoff(conflicts: u32) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let ceiling_us = 1000u64 << conflicts.saturating_sub(1).min(5);
    // A fresh RandomState is randomly keyed: a random number without a dependency.
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    Duration::from_micros(random % ceiling_us)
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// The writer thread's connection, made again after it is lost.
struct WriterConn {
    client: Option<Client>,
    connector: Arc<Connector>,
}

impl WriterConn {
    /// The connection, opened (and the host lock taken) when there is none or it closed.
    fn client(&mut self) -> Result<&mut Client> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
        }
        if self.client.is_none() {
            let mut client = self.connector.connect()?;
            host::relock(&mut client, self.connector.host_id())?;
            self.client = Some(client);
        }
        match self.client.as_mut() {
            Some(client) => Ok(client),
            None => Err(backend(
                "connect",
                self.connector.target(),
                "no connection".into(),
            )),
        }
    }

    fn discard(&mut self) {
        self.client = None;
    }

    /// Releases the host lock and ends the session, so a daemon started right after this one
    /// (same host id) does not find it still held.
    fn close(&mut self) {
        if let Some(mut client) = self.client.take() {
            // Best effort: a lost session releases its locks anyway.
            drop(client.batch_execute("SELECT pg_advisory_unlock_all()"));
            drop(client.close());
        }
    }
}

/// A reader thread's connection, made again after it is lost.
struct ReaderConn {
    client: Option<Client>,
    connector: Arc<Connector>,
    /// Since the last read ended: a connection idle longer than [`IDLE_CHECK`] is checked
    /// (one round trip) before use, so a read after a server restart gets a fresh connection
    /// instead of failing (a read is `FnOnce`: it cannot be run again).
    idle: Option<Stopwatch>,
}

/// How long a reader connection may sit idle before it is checked before use.
const IDLE_CHECK: Duration = Duration::from_millis(250);

enum Attempt<T> {
    Done(T),
    /// Not stored (rolled back or never begun); the thread-local note says whether to retry.
    Failed(StoreError),
    /// The connection was lost during COMMIT.
    Unknown(String),
    Panicked(String),
}

fn run_write<T>(
    conn: &mut WriterConn,
    op: &'static str,
    id: &str,
    f: &dyn Fn(&mut Transaction<'_>) -> Result<T>,
) -> Result<T> {
    let mut conflicts = 0u32;
    let mut reconnects = 0u32;
    loop {
        error::clear_last();
        let outcome = match conn.client() {
            Ok(client) => attempt(client, op, id, f),
            Err(e) => Attempt::Failed(e),
        };
        match outcome {
            Attempt::Done(value) => return Ok(value),
            Attempt::Unknown(detail) => {
                conn.discard();
                return Err(StoreError::Commit {
                    op,
                    id: id.to_owned(),
                    detail: format!(
                        "outcome unknown: the connection to PostgreSQL was lost during COMMIT \
                         ({detail}); the write may or may not be stored, read it back before \
                         trying again"
                    ),
                });
            }
            Attempt::Panicked(message) => {
                conn.discard();
                return Err(StoreError::Commit {
                    op,
                    id: id.to_owned(),
                    detail: format!("the write panicked and was rolled back: {message}"),
                });
            }
            Attempt::Failed(e) => {
                let lost = conn.client.as_ref().is_none_or(Client::is_closed);
                match error::last() {
                    LastError::Connection => {}
                    LastError::Serialization if !lost => {
                        conflicts += 1;
                        if conflicts >= MAX_ATTEMPTS {
                            return Err(StoreError::Conflict {
                                table: op,
                                id: id.to_owned(),
                                detail: format!(
                                    "{MAX_ATTEMPTS} serialization failures in a row with other \
                                     writers of the shared store"
                                ),
                            });
                        }
                        std::thread::sleep(conflict_backoff(conflicts));
                        continue;
                    }
                    LastError::Serialization | LastError::None if lost => {}
                    LastError::Serialization | LastError::None => return Err(e),
                }
                // The connection is gone and nothing was committed: reconnect and run it again.
                conn.discard();
                reconnects += 1;
                if reconnects > MAX_RECONNECTS {
                    return Err(StoreError::Commit {
                        op,
                        id: id.to_owned(),
                        detail: format!(
                            "the connection to PostgreSQL is lost and {MAX_RECONNECTS} reconnects \
                             failed; nothing was stored. Last error: {e}"
                        ),
                    });
                }
                let backoff = 50u64 << (reconnects - 1).min(4);
                std::thread::sleep(Duration::from_millis(backoff.min(1000)));
            }
        }
    }
}

fn attempt<T>(
    client: &mut Client,
    op: &'static str,
    id: &str,
    f: &dyn Fn(&mut Transaction<'_>) -> Result<T>,
) -> Attempt<T> {
    let begun = client
        .build_transaction()
        .isolation_level(IsolationLevel::Serializable)
        .start()
        .ctx(op, id);
    let mut tx = match begun {
        Ok(tx) => tx,
        Err(e) => return Attempt::Failed(e),
    };
    match catch_unwind(AssertUnwindSafe(|| f(&mut tx))) {
        Err(panic) => {
            // Dropping the transaction rolls it back.
            drop(tx);
            Attempt::Panicked(panic_text(&*panic))
        }
        Ok(Err(e)) => {
            // Rolled back by the server when the session is lost; best effort otherwise.
            drop(tx.rollback());
            Attempt::Failed(e)
        }
        Ok(Ok(value)) => match tx.commit() {
            Ok(()) => Attempt::Done(value),
            Err(e) => match error::classify(&e) {
                LastError::Connection => Attempt::Unknown(describe(&e)),
                LastError::Serialization | LastError::None => {
                    Attempt::Failed(error::from_pg(op, id, &e))
                }
            },
        },
    }
}

fn run_read<T>(
    conn: &mut ReaderConn,
    op: &'static str,
    id: &str,
    f: impl FnOnce(&mut Client) -> Result<T>,
) -> Result<T> {
    if conn.client.as_ref().is_some_and(Client::is_closed) {
        conn.client = None;
    }
    if conn
        .idle
        .take()
        .is_some_and(|idle| idle.elapsed() >= IDLE_CHECK)
        && let Some(client) = conn.client.as_mut()
        && client.is_valid(Duration::from_secs(5)).is_err()
    {
        conn.client = None;
    }
    if conn.client.is_none() {
        conn.client = Some(conn.connector.connect()?);
    }
    let result = read_on(conn, op, id, f);
    conn.idle = Some(Stopwatch::start());
    result
}

fn read_on<T>(
    conn: &mut ReaderConn,
    op: &'static str,
    id: &str,
    f: impl FnOnce(&mut Client) -> Result<T>,
) -> Result<T> {
    let Some(client) = conn.client.as_mut() else {
        return Err(backend(op, id, "no connection".into()));
    };
    error::clear_last();
    match catch_unwind(AssertUnwindSafe(|| f(client))) {
        Ok(result) => {
            if result.is_err() && (error::last() == LastError::Connection || client.is_closed()) {
                // The next read gets a fresh connection.
                conn.client = None;
            }
            result
        }
        Err(panic) => {
            conn.client = None;
            Err(backend(
                op,
                id,
                format!("the read panicked: {}", panic_text(&*panic)),
            ))
        }
    }
}
