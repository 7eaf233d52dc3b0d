//! Verifying the fleet's audit: every chain walked in one snapshot (hashes recomputed, seqs
//! contiguous), its head compared with its last record, and its stored anchor checked
//! against the walked chain.

use std::collections::BTreeMap;
use std::fmt;

use openphone_store::{
    AnchorCheck, AnchorOutcome, AuditAnchor, AuditProblem, BrokenRecord, GENESIS_HASH, Result,
    VerifyReport,
};
use postgres::IsolationLevel;
use postgres::types::Type;

use super::append::{body_digest, chain_hash};
use super::read::decode_entry;
use crate::PgContext;

/// A chain's head row: its last seq and hash.
type Head = (i64, String);

/// One chain of the fleet, verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainVerify {
    /// The daemon's `host_id`.
    pub chain: String,
    /// The walk of this chain and its head.
    pub report: VerifyReport,
    /// The chain's stored anchor checked against the walk (`None`: the chain has no anchor
    /// row, which for a chain with records means it was removed).
    pub anchor: Option<AnchorCheck>,
}

impl ChainVerify {
    /// The first thing wrong with the chain: a broken record, else a stored anchor that does
    /// not hold (or is missing), stated as a head mismatch at the anchored seq.
    pub fn first_broken(&self) -> Option<BrokenRecord> {
        if let Some(broken) = &self.report.first_broken {
            return Some(broken.clone());
        }
        let last = |head_seq: i64, head_hash: String| AuditProblem::HeadMismatch {
            head_seq,
            head_hash,
            last_seq: self.report.last_seq,
            last_hash: self.report.last_hash.clone(),
        };
        match &self.anchor {
            None if self.report.last_seq == 0 => None,
            None => Some(BrokenRecord {
                seq: 1,
                audit_id: None,
                problem: last(0, GENESIS_HASH.to_owned()),
            }),
            Some(check) if check.holds() => None,
            Some(check) => {
                let hash = check.anchor.split_once(':').map_or("", |(_, h)| h);
                Some(BrokenRecord {
                    seq: check.seq,
                    audit_id: None,
                    problem: last(check.seq, hash.to_owned()),
                })
            }
        }
    }

    /// The chain verifies and its anchor holds.
    pub fn is_intact(&self) -> bool {
        self.first_broken().is_none()
    }
}

impl fmt::Display for ChainVerify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let chain = &self.chain;
        if let Some(broken) = &self.report.first_broken {
            return write!(f, "chain {chain}: broken at {broken}");
        }
        match &self.anchor {
            Some(check) if !check.holds() => write!(f, "chain {chain}: {check}"),
            None if self.report.last_seq > 0 => write!(
                f,
                "chain {chain}: its anchor is missing ({} records, head {})",
                self.report.checked, self.report.last_hash
            ),
            Some(_) | None => write!(
                f,
                "chain {chain}: intact, {} records, head {}:{}",
                self.report.checked, self.report.last_seq, self.report.last_hash
            ),
        }
    }
}

/// One chain's walk in progress.
struct Walk {
    chain: String,
    checked: u64,
    last_seq: i64,
    last_hash: String,
    broken: Option<BrokenRecord>,
    /// The chain's stored anchor and the hash the walk found at its seq.
    anchor: Option<AuditAnchor>,
    anchor_found: Option<String>,
}

impl Walk {
    fn new(chain: String, anchor: Option<AuditAnchor>) -> Walk {
        Walk {
            chain,
            checked: 0,
            last_seq: 0,
            last_hash: GENESIS_HASH.to_owned(),
            broken: None,
            anchor,
            anchor_found: None,
        }
    }

    /// One record, in seq order; nothing after the first broken one is looked at.
    fn step(&mut self, seq: i64, audit_id: &str, text: &str, hash: String) {
        if self.broken.is_some() {
            return;
        }
        self.checked += 1;
        let (audit_id, problem) = if seq != self.last_seq + 1 {
            (
                None,
                Some(AuditProblem::SeqGap {
                    expected: self.last_seq + 1,
                }),
            )
        } else {
            match decode_entry(text) {
                Err(detail) => (None, Some(AuditProblem::Undecodable { detail })),
                Ok(entry) if entry.audit_id != audit_id => (
                    None,
                    Some(AuditProblem::Undecodable {
                        detail: format!(
                            "audit_id column {audit_id:?} is not the record's {:?}",
                            entry.audit_id
                        ),
                    }),
                ),
                Ok(entry) => match body_digest(&entry) {
                    Err(e) => (
                        None,
                        Some(AuditProblem::Undecodable {
                            detail: e.to_string(),
                        }),
                    ),
                    Ok(body) => {
                        let computed = chain_hash(&self.last_hash, seq, &body);
                        let problem = (computed != hash).then(|| AuditProblem::HashMismatch {
                            stored: hash.clone(),
                            computed,
                        });
                        (Some(entry.audit_id), problem)
                    }
                },
            }
        };
        if let Some(problem) = problem {
            self.broken = Some(BrokenRecord {
                seq,
                audit_id,
                problem,
            });
            return;
        }
        if self.anchor.as_ref().is_some_and(|a| a.seq == seq) {
            self.anchor_found = Some(hash.clone());
        }
        self.last_seq = seq;
        self.last_hash = hash;
    }

    /// The walk, its head compared and its anchor checked.
    fn finish(self, head: Option<Head>) -> ChainVerify {
        let mut broken = self.broken;
        if broken.is_none() {
            let (head_seq, head_hash) = head.unwrap_or((0, GENESIS_HASH.to_owned()));
            if head_seq != self.last_seq || head_hash != self.last_hash {
                broken = Some(BrokenRecord {
                    seq: head_seq.max(self.last_seq + 1),
                    audit_id: None,
                    problem: AuditProblem::HeadMismatch {
                        head_seq,
                        head_hash,
                        last_seq: self.last_seq,
                        last_hash: self.last_hash.clone(),
                    },
                });
            }
        }
        let report = VerifyReport {
            checked: self.checked,
            last_seq: self.last_seq,
            last_hash: self.last_hash,
            first_broken: broken,
        };
        let anchor = self
            .anchor
            .map(|anchor| check_anchor(&report, &anchor, self.anchor_found));
        ChainVerify {
            chain: self.chain,
            report,
            anchor,
        }
    }
}

/// What a walked chain says about `anchor`, given the hash the walk found at its seq (SQLite's
/// anchor rules: the record must lie in the verified part and carry the anchored hash).
pub(crate) fn check_anchor(
    report: &VerifyReport,
    anchor: &AuditAnchor,
    found: Option<String>,
) -> AnchorCheck {
    let outcome = if anchor.seq > report.last_seq {
        match &report.first_broken {
            Some(broken) => AnchorOutcome::Unverifiable {
                broken_seq: broken.seq,
            },
            None => AnchorOutcome::Missing {
                last_seq: report.last_seq,
            },
        }
    } else {
        let found = if anchor.seq == 0 {
            Some(GENESIS_HASH.to_owned())
        } else {
            found
        };
        match found {
            Some(found) if found == anchor.hash => AnchorOutcome::Holds,
            Some(found) => AnchorOutcome::Differs { found },
            None => AnchorOutcome::Missing {
                last_seq: report.last_seq,
            },
        }
    };
    AnchorCheck {
        anchor: anchor.to_string(),
        seq: anchor.seq,
        outcome,
    }
}

/// Walks every chain in one snapshot (REPEATABLE READ, read only: an append committing
/// meanwhile is not half seen), chains by name.
pub(crate) fn verify_all(conn: &mut postgres::Client) -> Result<Vec<ChainVerify>> {
    const OP: &str = "audit.verify";
    let mut tx = conn
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .ctx(OP, "")?;
    let mut heads: BTreeMap<String, Head> = BTreeMap::new();
    for row in tx
        .query("SELECT chain, seq, hash FROM audit_heads", &[])
        .ctx(OP, "")?
    {
        heads.insert(row.get(0), (row.get(1), row.get(2)));
    }
    let mut anchors: BTreeMap<String, AuditAnchor> = BTreeMap::new();
    for row in tx
        .query("SELECT chain, seq, hash FROM audit_anchors", &[])
        .ctx(OP, "")?
    {
        anchors.insert(
            row.get(0),
            AuditAnchor {
                seq: row.get(1),
                hash: row.get(2),
            },
        );
    }
    let mut done: Vec<ChainVerify> = Vec::new();
    let mut walk: Option<Walk> = None;
    // Pages in key order, each statement short (the session's statement_timeout applies to
    // each; a log of millions of records is walked in any time), all in the one snapshot.
    let mut after: Option<(String, i64)> = None;
    loop {
        let rows = match &after {
            None => tx.query_typed(
                "SELECT chain, seq, audit_id, entry, hash FROM audit_records \
                 ORDER BY chain, seq LIMIT 2000",
                &[],
            ),
            Some((chain, seq)) => tx.query_typed(
                "SELECT chain, seq, audit_id, entry, hash FROM audit_records \
                 WHERE (chain, seq) > ($1, $2) ORDER BY chain, seq LIMIT 2000",
                &[(chain, Type::TEXT), (seq, Type::INT8)],
            ),
        }
        .ctx(OP, "")?;
        for row in &rows {
            let chain: &str = row.get(0);
            if walk.as_ref().is_none_or(|w| w.chain != chain) {
                if let Some(w) = walk.take() {
                    let head = heads.remove(&w.chain);
                    done.push(w.finish(head));
                }
                walk = Some(Walk::new(chain.to_owned(), anchors.remove(chain)));
            }
            if let Some(w) = walk.as_mut() {
                w.step(row.get(1), row.get(2), row.get(3), row.get(4));
            }
        }
        match rows.last() {
            Some(last) if rows.len() == 2000 => after = Some((last.get(0), last.get(1))),
            Some(_) | None => break,
        }
    }
    if let Some(w) = walk.take() {
        let head = heads.remove(&w.chain);
        done.push(w.finish(head));
    }
    tx.commit().ctx(OP, "")?;
    // Chains whose every record is gone: named only by a head or an anchor.
    let mut empty: BTreeMap<String, (Option<Head>, Option<AuditAnchor>)> = BTreeMap::new();
    for (chain, head) in heads {
        empty.entry(chain).or_default().0 = Some(head);
    }
    for (chain, anchor) in anchors {
        empty.entry(chain).or_default().1 = Some(anchor);
    }
    for (chain, (head, anchor)) in empty {
        done.push(Walk::new(chain, anchor).finish(head));
    }
    done.sort_by(|a, b| a.chain.cmp(&b.chain));
    Ok(done)
}

/// The fleet's chains as one report (what [`AuditStore::verify_audit`] answers): `checked`
/// counts the records of every chain; the first broken chain (its broken record, or its
/// anchor) gives `first_broken`, `last_seq` and `last_hash`, else `own` chain does.
///
/// [`AuditStore::verify_audit`]: openphone_store::AuditStore::verify_audit
pub(crate) fn combined(chains: &[ChainVerify], own: &str) -> VerifyReport {
    let checked = chains.iter().map(|c| c.report.checked).sum();
    let broken = chains.iter().find_map(|c| c.first_broken().map(|b| (c, b)));
    match broken {
        Some((chain, broken)) => VerifyReport {
            checked,
            last_seq: chain.report.last_seq,
            last_hash: chain.report.last_hash.clone(),
            first_broken: Some(broken),
        },
        None => {
            let mine = chains.iter().find(|c| c.chain == own);
            VerifyReport {
                checked,
                last_seq: mine.map_or(0, |c| c.report.last_seq),
                last_hash: mine
                    .map_or_else(|| GENESIS_HASH.to_owned(), |c| c.report.last_hash.clone()),
                first_broken: None,
            }
        }
    }
}
