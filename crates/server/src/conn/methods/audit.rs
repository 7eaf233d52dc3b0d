//! `audit.query` (operator): the audit log, a page at a time.

use openphone_protocol::endpoint::{AuditQueryParams, AuditQueryResult, ErrorObject};

use crate::conn::{Conn, internal};

/// `audit.query {after?, limit?}`: the records after sequence number `after` (default 0), at
/// most `limit` (default 100, 1 to 1000), and the `next_after` to page on with.
pub(super) fn query(conn: &Conn, p: AuditQueryParams) -> Result<AuditQueryResult, ErrorObject> {
    let records = conn
        .state
        .bridge
        .audit_page(p.after.unwrap_or(0), p.limit.unwrap_or(100).clamp(1, 1000))
        .map_err(internal)?;
    let next_after = records.last().map(|r| r.seq);
    Ok(AuditQueryResult {
        records,
        next_after,
    })
}
