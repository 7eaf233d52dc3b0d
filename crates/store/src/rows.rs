//! Reading query results: the one loop every table's `query` uses.

use rusqlite::{Connection, Row};

use crate::error::{Result, SqlContext};

/// Runs `sql` with `args` and maps every row with `from_row`; SQLite errors carry `op`.
pub(crate) fn collect<T>(
    conn: &Connection,
    op: &'static str,
    sql: &str,
    args: impl rusqlite::Params,
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
