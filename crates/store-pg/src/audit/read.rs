//! Reading the chains: pages of one chain (export), the records of one audit id in every
//! chain (find), the heads and anchors of every chain.

use std::collections::VecDeque;

use openphone_store::{AuditAnchor, AuditEntry, AuditRecord, GENESIS_HASH, Result, StoreError};
use postgres::GenericClient;

use crate::PgContext;

/// One chain of the fleet's audit: its daemon (`chain` = the daemon's `host_id`), its head and
/// the anchor its latest append wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditChain {
    /// The daemon's `host_id`.
    pub chain: String,
    /// The chain's head (`0:<genesis>` when only an anchor row names the chain).
    pub head: AuditAnchor,
    /// The anchor of the chain's latest append, when there is one.
    pub anchor: Option<AuditAnchor>,
    /// When that anchor was written (ms since the epoch).
    pub anchored_at_ms: Option<i64>,
}

/// The hash of the record before `r`'s in its chain (the nearest one), or the genesis hash.
const PREV_HASH: &str = "COALESCE((SELECT p.hash FROM audit_records p \
     WHERE p.chain = r.chain AND p.seq < r.seq ORDER BY p.seq DESC LIMIT 1), $1)";

/// `limit` as SQL's `LIMIT`.
fn sql_limit(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// A stored record's JSON text as the entry written.
pub(crate) fn decode_entry(text: &str) -> std::result::Result<AuditEntry, String> {
    serde_json::from_str(text).map_err(|e| format!("entry: {e}"))
}

fn record(op: &'static str, row: &postgres::Row) -> Result<(String, AuditRecord)> {
    let chain: String = row.get(0);
    let seq: i64 = row.get(1);
    let text: String = row.get(2);
    let entry = decode_entry(&text).map_err(|detail| StoreError::Corrupt {
        op,
        id: format!("{chain}:{seq}"),
        detail,
    })?;
    let record = AuditRecord {
        seq,
        entry,
        hash: row.get(3),
        prev_hash: row.get(4),
    };
    Ok((chain, record))
}

/// Up to `limit` records of `chain` with `seq > after_seq`, in order, `prev_hash` filled in.
pub(crate) fn export(
    conn: &mut impl GenericClient,
    chain: &str,
    after_seq: i64,
    limit: usize,
) -> Result<Vec<(String, AuditRecord)>> {
    const OP: &str = "audit.export";
    let rows = conn
        .query(
            &format!(
                "SELECT r.chain, r.seq, r.entry, r.hash, {PREV_HASH} FROM audit_records r \
                 WHERE r.chain = $2 AND r.seq > $3 ORDER BY r.seq LIMIT $4"
            ),
            &[&GENESIS_HASH, &chain, &after_seq, &sql_limit(limit)],
        )
        .ctx(OP, chain)?;
    rows.iter().map(|row| record(OP, row)).collect()
}

/// Up to `limit` records of every chain after the record `after` (`(chain, seq)`; `None`: from
/// the start), in (chain, seq) order: the fleet's whole log, page by page.
pub(crate) fn export_fleet(
    conn: &mut impl GenericClient,
    after: Option<(&str, i64)>,
    limit: usize,
) -> Result<Vec<(String, AuditRecord)>> {
    const OP: &str = "audit.export";
    let select =
        format!("SELECT r.chain, r.seq, r.entry, r.hash, {PREV_HASH} FROM audit_records r");
    let rows = match after {
        None => conn.query(
            &format!("{select} ORDER BY r.chain, r.seq LIMIT $2"),
            &[&GENESIS_HASH, &sql_limit(limit)],
        ),
        Some((chain, seq)) => conn.query(
            &format!("{select} WHERE (r.chain, r.seq) > ($2, $3) ORDER BY r.chain, r.seq LIMIT $4"),
            &[&GENESIS_HASH, &chain, &seq, &sql_limit(limit)],
        ),
    }
    .ctx(OP, "")?;
    rows.iter().map(|row| record(OP, row)).collect()
}

/// The records carrying `audit_id` in every chain, oldest first: each chain's in chain order,
/// the chains merged by `at_ms` (ties by chain name).
pub(crate) fn find(conn: &mut impl GenericClient, audit_id: &str) -> Result<Vec<AuditRecord>> {
    const OP: &str = "audit.find";
    let rows = conn
        .query(
            &format!(
                "SELECT r.chain, r.seq, r.entry, r.hash, {PREV_HASH} FROM audit_records r \
                 WHERE r.audit_id = $2 ORDER BY r.chain, r.seq"
            ),
            &[&GENESIS_HASH, &audit_id],
        )
        .ctx(OP, audit_id)?;
    let mut chains: Vec<(String, VecDeque<AuditRecord>)> = Vec::new();
    for row in &rows {
        let (chain, record) = record(OP, row)?;
        // The column is an index: the record itself must carry the id.
        if record.entry.audit_id != audit_id {
            continue;
        }
        match chains.last_mut() {
            Some((last, records)) if *last == chain => records.push_back(record),
            _ => chains.push((chain, VecDeque::from([record]))),
        }
    }
    let mut out = Vec::new();
    loop {
        let next = chains
            .iter()
            .enumerate()
            .filter_map(|(i, (_, records))| records.front().map(|r| (r.entry.at_ms, i)))
            .min();
        let Some((_, i)) = next else { break };
        if let Some(record) = chains[i].1.pop_front() {
            out.push(record);
        }
    }
    Ok(out)
}

/// The head of `chain` (`0:<genesis>` for a chain with no record).
pub(crate) fn head(conn: &mut impl GenericClient, chain: &str) -> Result<AuditAnchor> {
    let row = conn
        .query_opt(
            "SELECT seq, hash FROM audit_heads WHERE chain = $1",
            &[&chain],
        )
        .ctx("audit.head", chain)?;
    Ok(match row {
        Some(row) => AuditAnchor {
            seq: row.get(0),
            hash: row.get(1),
        },
        None => AuditAnchor {
            seq: 0,
            hash: GENESIS_HASH.to_owned(),
        },
    })
}

/// The stored hash of record `seq` of `chain`, if there is one.
pub(crate) fn hash_at(
    conn: &mut impl GenericClient,
    chain: &str,
    seq: i64,
) -> Result<Option<String>> {
    let row = conn
        .query_opt(
            "SELECT hash FROM audit_records WHERE chain = $1 AND seq = $2",
            &[&chain, &seq],
        )
        .ctx("audit.anchor", chain)?;
    Ok(row.map(|row| row.get(0)))
}

/// Every chain named by a head or an anchor, by name.
pub(crate) fn chains(conn: &mut impl GenericClient) -> Result<Vec<AuditChain>> {
    let rows = conn
        .query(
            "SELECT chain, h.seq, h.hash, a.seq, a.hash, a.anchored_at_ms \
             FROM audit_heads h FULL JOIN audit_anchors a USING (chain) ORDER BY chain",
            &[],
        )
        .ctx("audit.chains", "")?;
    Ok(rows
        .iter()
        .map(|row| {
            let head = match (
                row.get::<_, Option<i64>>(1),
                row.get::<_, Option<String>>(2),
            ) {
                (Some(seq), Some(hash)) => AuditAnchor { seq, hash },
                _ => AuditAnchor {
                    seq: 0,
                    hash: GENESIS_HASH.to_owned(),
                },
            };
            let anchor = match (
                row.get::<_, Option<i64>>(3),
                row.get::<_, Option<String>>(4),
            ) {
                (Some(seq), Some(hash)) => Some(AuditAnchor { seq, hash }),
                _ => None,
            };
            AuditChain {
                chain: row.get(0),
                head,
                anchor,
                anchored_at_ms: row.get(5),
            }
        })
        .collect())
}
