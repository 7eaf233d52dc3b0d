//! Driver errors as [`StoreError`]s, and what the writer needs to know about the last one.
//!
//! Every `postgres::Error` becomes [`StoreError::Backend`] through [`PgContext::ctx`], which
//! names the operation and the record and renders the server's words (SQLSTATE, message,
//! detail, hint). The conversion also notes, per thread, whether the error was a serialization
//! failure or a lost connection: the writer thread reads that note after a failed transaction to
//! decide whether running it again is safe (see `pool.rs`), because by then the domain code has
//! turned the driver error into a `StoreError` that no longer carries the SQLSTATE.

use std::cell::Cell;
use std::error::Error as _;

use openphone_store::{Result, StoreError};
use postgres::error::SqlState;

/// A driver error as a store error (the contract's `StoreError::Backend`).
pub(crate) fn backend(op: &'static str, id: &str, detail: String) -> StoreError {
    StoreError::Backend {
        op,
        id: id.to_owned(),
        detail,
    }
}

/// `postgres::Error` -> [`StoreError::Backend`], naming the operation and the record.
pub(crate) trait PgContext<T> {
    fn ctx(self, op: &'static str, id: &str) -> Result<T>;
}

impl<T> PgContext<T> for std::result::Result<T, postgres::Error> {
    fn ctx(self, op: &'static str, id: &str) -> Result<T> {
        self.map_err(|e| from_pg(op, id, &e))
    }
}

/// One driver error as [`StoreError::Backend`], noted for the writer's retry decision.
pub(crate) fn from_pg(op: &'static str, id: &str, e: &postgres::Error) -> StoreError {
    note(e);
    backend(op, id, describe(e))
}

/// What the last driver error converted on this thread was, as far as retrying goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum LastError {
    /// No driver error since [`clear_last`] (or one that retrying would not cure).
    #[default]
    None,
    /// 40001 serialization_failure or 40P01 deadlock_detected: the transaction was rolled
    /// back by the server and may be run again.
    Serialization,
    /// The connection is gone (closed, an I/O error, the server shutting down).
    Connection,
}

thread_local! {
    static LAST: Cell<LastError> = const { Cell::new(LastError::None) };
}

pub(crate) fn clear_last() {
    LAST.with(|l| l.set(LastError::None));
}

pub(crate) fn last() -> LastError {
    LAST.with(Cell::get)
}

pub(crate) fn note(e: &postgres::Error) {
    let kind = classify(e);
    if kind != LastError::None {
        LAST.with(|l| l.set(kind));
    }
}

/// Whether `e` is a serialization failure, a lost connection, or neither.
pub(crate) fn classify(e: &postgres::Error) -> LastError {
    if let Some(code) = e.code() {
        if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED
        {
            return LastError::Serialization;
        }
        // Class 57P: admin_shutdown, crash_shutdown, cannot_connect_now (a restarting server).
        if code.code().starts_with("57P") {
            return LastError::Connection;
        }
        // Class 08: connection exceptions.
        if code.code().starts_with("08") {
            return LastError::Connection;
        }
        return LastError::None;
    }
    if e.is_closed() || e.source().is_some_and(|s| s.is::<std::io::Error>()) {
        return LastError::Connection;
    }
    LastError::None
}

/// The driver error in words: the server's SQLSTATE, message, detail and hint when it is a
/// database error, else the error and its causes. Never holds a password: the driver's
/// messages do not echo it and the connection string we hand it carries none.
pub(crate) fn describe(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut out = format!(
            "{} {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
        if let Some(detail) = db.detail() {
            out.push_str(": ");
            out.push_str(detail);
        }
        if let Some(hint) = db.hint() {
            out.push_str("; hint: ");
            out.push_str(hint);
        }
        return out;
    }
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// `SQLSTATE` of a driver error, for domain code that maps e.g. 23505 unique_violation to
/// [`StoreError::AlreadyExists`] as the SQLite store does.
pub fn is_unique_violation(e: &postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}
