//! Reading query results: the one loop every table's `query` uses, and the statement cache.
//!
//! Every statement a tool call runs goes through the connection's prepared-statement cache
//! ([`Connection::prepare_cached`]): `Connection::execute` and `Connection::query_row` parse
//! and plan their SQL anew on every call, which cost a tenth of the store's CPU per call
//! (issue 34). [`Cached`] gives the same two calls over the cache.

use rusqlite::{Connection, Params, Row};

use crate::error::{Result, SqlContext};

/// Runs `sql` with `args` and maps every row with `from_row`; SQLite errors carry `op`.
pub(crate) fn collect<T>(
    conn: &Connection,
    op: &'static str,
    sql: &str,
    args: impl Params,
    from_row: impl Fn(&Row<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql).ctx(op, "")?;
    let mut rows = stmt.query(args).ctx(op, "")?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().ctx(op, "")? {
        out.push(from_row(row)?);
    }
    Ok(out)
}

/// The first row of `sql` mapped with `from_row` (the rest are not read); SQLite errors carry
/// `op`.
pub(crate) fn first<T>(
    conn: &Connection,
    op: &'static str,
    sql: &str,
    args: impl Params,
    from_row: impl FnOnce(&Row<'_>) -> Result<T>,
) -> Result<Option<T>> {
    let mut stmt = conn.prepare_cached(sql).ctx(op, "")?;
    let mut rows = stmt.query(args).ctx(op, "")?;
    match rows.next().ctx(op, "")? {
        Some(row) => from_row(row).map(Some),
        None => Ok(None),
    }
}

/// `execute` and `query_row` through the connection's statement cache. Only for SQL drawn
/// from a fixed set of texts (a text made from a value would fill the cache).
pub(crate) trait Cached {
    /// [`Connection::execute`] with a cached statement.
    fn exec_cached<P: Params>(&self, sql: &str, args: P) -> rusqlite::Result<usize>;
    /// [`Connection::query_row`] with a cached statement.
    fn row_cached<T, P: Params, F: FnOnce(&Row<'_>) -> rusqlite::Result<T>>(
        &self,
        sql: &str,
        args: P,
        f: F,
    ) -> rusqlite::Result<T>;
}

impl Cached for Connection {
    fn exec_cached<P: Params>(&self, sql: &str, args: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(args)
    }

    fn row_cached<T, P: Params, F: FnOnce(&Row<'_>) -> rusqlite::Result<T>>(
        &self,
        sql: &str,
        args: P,
        f: F,
    ) -> rusqlite::Result<T> {
        self.prepare_cached(sql)?.query_row(args, f)
    }
}
