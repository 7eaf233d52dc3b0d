//! Anchors: the audit chain's head, written down outside the database.
//!
//! The chain detects edits made without re-hashing, but someone who can write the database
//! offline can delete a record and re-hash every record after it: the rewritten chain verifies.
//! An **anchor** — `<seq>:<hash>`, the head printed by `openphone audit head` at some time and
//! kept elsewhere — defeats that. [`Store::verify_audit_anchored`](crate::AuditStore::verify_audit_anchored) walks the chain as
//! [`Store::verify_audit`](crate::AuditStore::verify_audit) does, then checks that the record `seq` still has exactly that
//! hash. Because each hash covers the previous one, an intact chain whose record `seq` carries
//! the anchored hash still holds the very records `1..=seq` it held when the anchor was taken;
//! a rewrite at or before `seq` changes that hash (or removes the record).

use std::fmt;
use std::str::FromStr;

use rusqlite::OptionalExtension;
use serde::{Deserialize, Serialize};

use crate::SqliteStore;
use crate::audit::{GENESIS_HASH, VerifyReport, hash_at};
use crate::error::{Result, SqlContext, StoreError};
use crate::rows::Cached;
use crate::wire::is_hex64;

/// One point of the chain: the record `seq` had hash `hash`. Written `<seq>:<hash>`; seq 0
/// with the genesis hash is the empty log.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AuditAnchor {
    pub seq: i64,
    /// 64 lowercase hex digits.
    pub hash: String,
}

impl AuditAnchor {
    /// Parses `<seq>:<hash>` (surrounding whitespace ignored, hex case-insensitive).
    pub fn parse(raw: &str) -> Result<AuditAnchor> {
        let invalid = |detail: String| StoreError::Invalid {
            what: "audit anchor",
            detail,
        };
        let raw = raw.trim();
        let Some((seq, hash)) = raw.split_once(':') else {
            return Err(invalid(format!(
                "{raw:?} is not <seq>:<hash> (as printed by `openphone audit head`)"
            )));
        };
        let seq = seq
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|s| *s >= 0)
            .ok_or_else(|| invalid(format!("seq {seq:?} is not a number ≥ 0")))?;
        let hash = hash.trim().to_ascii_lowercase();
        if !is_hex64(&hash) {
            return Err(invalid(format!("hash {hash:?} is not 64 hex digits")));
        }
        Ok(AuditAnchor { seq, hash })
    }
}

impl fmt::Display for AuditAnchor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash)
    }
}

impl FromStr for AuditAnchor {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<AuditAnchor> {
        AuditAnchor::parse(s)
    }
}

/// What the log says about one anchor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AnchorOutcome {
    /// The log still holds exactly the records `1..=seq` it held when the anchor was taken.
    Holds,
    /// The record `seq` now has another hash: the log was rewritten at or before `seq`.
    Differs { found: String },
    /// The log ends at `last_seq`, before the anchor: records were removed.
    Missing { last_seq: i64 },
    /// The chain is broken at `broken_seq` (≤ the anchor's seq), so the prefix cannot be
    /// proved.
    Unverifiable { broken_seq: i64 },
}

/// One anchor and what the log says about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnchorCheck {
    /// `<seq>:<hash>`.
    pub anchor: String,
    pub seq: i64,
    #[serde(flatten)]
    pub outcome: AnchorOutcome,
}

impl AnchorCheck {
    /// Whether the log still contains the anchored prefix.
    pub fn holds(&self) -> bool {
        match self.outcome {
            AnchorOutcome::Holds => true,
            AnchorOutcome::Differs { .. }
            | AnchorOutcome::Missing { .. }
            | AnchorOutcome::Unverifiable { .. } => false,
        }
    }
}

impl fmt::Display for AnchorCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seq = self.seq;
        match &self.outcome {
            AnchorOutcome::Holds => write!(
                f,
                "anchor {} holds: the log still contains records 1..={seq} unchanged",
                self.anchor
            ),
            AnchorOutcome::Differs { found } => write!(
                f,
                "anchor {} FAILS at seq {seq}: the record there now has hash {found}; the log \
                 was rewritten at or before seq {seq}",
                self.anchor
            ),
            AnchorOutcome::Missing { last_seq } => write!(
                f,
                "anchor {} FAILS at seq {seq}: the log ends at seq {last_seq}; records were \
                 removed",
                self.anchor
            ),
            AnchorOutcome::Unverifiable { broken_seq } => write!(
                f,
                "anchor {} FAILS at seq {seq}: the chain is broken at seq {broken_seq}, so the \
                 prefix cannot be proved",
                self.anchor
            ),
        }
    }
}

/// A chain walk plus the anchors checked against it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnchoredReport {
    pub chain: VerifyReport,
    /// One per anchor, in the order given.
    pub anchors: Vec<AnchorCheck>,
}

impl AnchoredReport {
    /// True when the chain is intact and every anchor holds.
    pub fn is_intact(&self) -> bool {
        self.chain.is_intact() && self.anchors.iter().all(AnchorCheck::holds)
    }
}

impl SqliteStore {
    /// The chain's head as an anchor: the newest record's seq and hash (`0:<genesis>` for an
    /// empty log). This is what a user or a cron job writes down elsewhere.
    pub fn audit_head(&self) -> Result<AuditAnchor> {
        let conn = self.conn();
        let head = conn
            .row_cached("SELECT seq, hash FROM audit_head WHERE id = 1", [], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
            })
            .optional()
            .ctx("audit.head", "")?;
        let (seq, hash) = head.unwrap_or((0, GENESIS_HASH.to_owned()));
        Ok(AuditAnchor { seq, hash })
    }

    /// Walks the chain ([`Store::verify_audit`](crate::AuditStore::verify_audit)) and checks each anchor against it: the
    /// record `seq` must lie in the verified part of the chain and carry the anchored hash.
    pub fn verify_audit_anchored(&self, anchors: &[AuditAnchor]) -> Result<AnchoredReport> {
        let chain = self.verify_audit()?;
        let mut checks = Vec::with_capacity(anchors.len());
        for anchor in anchors {
            let outcome = self.anchor_outcome(&chain, anchor)?;
            checks.push(AnchorCheck {
                anchor: anchor.to_string(),
                seq: anchor.seq,
                outcome,
            });
        }
        Ok(AnchoredReport {
            chain,
            anchors: checks,
        })
    }

    fn anchor_outcome(&self, chain: &VerifyReport, anchor: &AuditAnchor) -> Result<AnchorOutcome> {
        // `last_seq` is the last record whose link verified, intact chain or not.
        if anchor.seq > chain.last_seq {
            return Ok(match &chain.first_broken {
                Some(broken) => AnchorOutcome::Unverifiable {
                    broken_seq: broken.seq,
                },
                None => AnchorOutcome::Missing {
                    last_seq: chain.last_seq,
                },
            });
        }
        let found = if anchor.seq == 0 {
            Some(GENESIS_HASH.to_owned())
        } else {
            hash_at(&self.conn(), anchor.seq)?
        };
        Ok(match found {
            Some(found) if found == anchor.hash => AnchorOutcome::Holds,
            Some(found) => AnchorOutcome::Differs { found },
            None => AnchorOutcome::Missing {
                last_seq: chain.last_seq,
            },
        })
    }
}
