//! Transaction-scoped advisory locks that put writers of one thing (one identity's pending
//! confirmation, one session's transcript) in line, so that their check-then-insert runs at
//! READ COMMITTED instead of SERIALIZABLE.
//!
//! SERIALIZABLE made such writers from two daemons abort each other, and each abort is a retry:
//! under a loaded machine one writer could lose ten times in a row and be answered `Conflict`
//! (seen in CI: the 100-identity confirmation race, the two-host transcript append). With the
//! lock taken first, the statements after it each see what the lock's previous holder
//! committed (READ COMMITTED takes a fresh snapshot per statement), so the check is exact and
//! nobody retries.

use openphone_store::Result;
use postgres::Transaction;

use crate::PgContext;

/// Switches `tx` to READ COMMITTED (it must not have run a statement yet) and takes the advisory
/// lock of (`scope`, `parts`) in this schema until the transaction ends. Distinct keys may share
/// a lock (64-bit hash): that only puts two unrelated writers in line.
pub(crate) fn lock_in_line(
    tx: &mut Transaction<'_>,
    op: &'static str,
    id: &str,
    scope: &str,
    parts: &[&str],
) -> Result<()> {
    crate::confirmations::read_committed(tx, op)?;
    let key = parts.join("\u{1f}");
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(\
         'openphone:' || $1::TEXT || ':' || current_schema() || ':' || $2::TEXT, 0))",
        &[&scope, &key],
    )
    .ctx(op, id)?;
    Ok(())
}
