//! [`AuditStore`] on PostgreSQL: the hash-chained audit log of a fleet (issue 35).
//!
//! # One chain per daemon
//!
//! Every daemon appends to a chain of its own, named by its `host_id`: records are keyed
//! `(chain, seq)`, each chain has a head row (`audit_heads`) that its appends lock
//! `FOR UPDATE`, and only the daemon owning the chain appends to it (the host lock of
//! `PgStore::open` makes sure of that), so appends never contend across hosts. Each append
//! also writes the chain's head into `audit_anchors` (the latest per chain, in the same
//! transaction): a rewrite of a chain that re-hashes its records and moves its head but leaves
//! the anchor alone fails verification.
//!
//! A record's hash is SQLite's form 2 byte for byte (`audit_storage` of `openphone-store`):
//! `sha256_hex(prev_hash + "\n" + seq + "\n" + sha256_hex(canonical_json(body)))`, the body
//! being the record without `policy_proof`, plus `policy_proof_sha256`. So a record exported
//! from either store verifies the same way. The record is stored as one row holding its JSON
//! text; `prev_hash` is not stored (it is the hash of the chain's previous row).
//!
//! # What each method means in a fleet
//!
//! - [`AuditStore::append_audit`] (and its async forms) and [`AuditStore::audit_head`] act
//!   on this daemon's chain; so does [`append_in`], the append other domains make inside
//!   their own transactions.
//! - [`AuditStore::export_audit`] pages through this daemon's chain (the trait's signature
//!   names no chain). The fleet's export: [`PgStore::export_audit_chain`] (one host),
//!   [`PgStore::export_audit_fleet`] (every chain, page by page), [`PgStore::audit_chains`]
//!   (the chains, their heads and anchors); records come paired with their chain
//!   (`AuditRecord` has no chain field) and name their phone (`device_id`).
//! - [`AuditStore::find_audit`] searches every chain (a review or a confirmation may be
//!   settled by any daemon): each chain's records in chain order, the chains merged by
//!   `at_ms`.
//! - [`AuditStore::verify_audit`] walks EVERY chain in one snapshot and checks each chain's
//!   head and stored anchor. `checked` counts the records of all chains; the first broken
//!   chain (by name) gives `first_broken`, `last_seq` and `last_hash`; when all are intact,
//!   `last_seq`/`last_hash` are this daemon's chain's (what `audit_head` printed). A stored
//!   anchor that does not hold is reported as a `HeadMismatch` at the anchored seq. The
//!   wire's `BrokenRecord` has no chain field: [`PgStore::verify_audit_chains`] answers one
//!   report per chain, naming it (what `audit verify` prints on PostgreSQL).
//! - [`AuditStore::verify_audit_anchored`] checks the given anchors (taken with
//!   `audit_head`, so of this daemon's chain) against this daemon's chain, beside the
//!   fleet-wide report.
//! - The relaxed async append is the durable one: PostgreSQL offers no "committed, not yet
//!   flushed" point to return at.

use std::sync::Arc;

use openphone_store::*;

use crate::PgStore;

mod append;
mod read;
#[cfg(test)]
mod tests;
mod verify;

pub use read::AuditChain;
pub use verify::ChainVerify;

/// Appends `entry` to the audit chain `chain` (this daemon's `host_id`) inside `tx`, and
/// anchors the new head: what every domain that audits in its own transaction calls (the
/// executing record of a direct execution, a resolved confirmation, a watcher's firing).
#[allow(dead_code)] // Called by the domains that audit inside their own writes.
pub(crate) fn append_in(
    tx: &mut postgres::Transaction<'_>,
    chain: &str,
    entry: &AuditEntry,
) -> Result<AuditRecord> {
    let prepared = append::prepare(entry)?;
    append::append_prepared(tx, chain, &prepared)
}

impl PgStore {
    /// Appends `entry` to this daemon's chain in a write of its own.
    async fn append_own_async(&self, entry: &AuditEntry) -> Result<AuditRecord> {
        let prepared = Arc::new(append::prepare(entry)?);
        let chain = self.host_id().to_owned();
        let id = prepared.entry.audit_id.clone();
        self.write_async("audit.append", &id, move |tx| {
            append::append_prepared(tx, &chain, &prepared)
        })
        .await
    }

    /// Every chain of the fleet's audit (one per daemon that has audited), by name, with its
    /// head and its latest anchor.
    pub fn audit_chains(&self) -> Result<Vec<AuditChain>> {
        self.read("audit.chains", "", read::chains)
    }

    /// Up to `limit` records of `chain` with `seq > after_seq`, in order, each with its chain
    /// (`audit export --host`; every chain of [`PgStore::audit_chains`] for the whole fleet).
    pub fn export_audit_chain(
        &self,
        chain: &str,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<(String, AuditRecord)>> {
        let owned = chain.to_owned();
        self.read("audit.export", chain, move |conn| {
            read::export(conn, &owned, after_seq, limit)
        })
    }

    /// Up to `limit` records of every chain after the record `after` (`(chain, seq)` of the
    /// last record of the previous page; `None`: from the start), in (chain, seq) order, each
    /// with its chain: `audit export` of the whole fleet. Records name their phone
    /// (`device_id`), for an export of one phone.
    pub fn export_audit_fleet(
        &self,
        after: Option<(&str, i64)>,
        limit: usize,
    ) -> Result<Vec<(String, AuditRecord)>> {
        let after = after.map(|(chain, seq)| (chain.to_owned(), seq));
        self.read("audit.export", "", move |conn| {
            read::export_fleet(conn, after.as_ref().map(|(c, s)| (c.as_str(), *s)), limit)
        })
    }

    /// Every chain walked in one snapshot, by name: its records, its head and its stored
    /// anchor. A chain is intact when [`ChainVerify::is_intact`]; its `Display` names the
    /// chain and what is wrong with it.
    pub fn verify_audit_chains(&self) -> Result<Vec<ChainVerify>> {
        self.read("audit.verify", "", verify::verify_all)
    }
}

impl AuditStore for PgStore {
    fn append_audit(&self, entry: &AuditEntry) -> Result<AuditRecord> {
        let prepared = Arc::new(append::prepare(entry)?);
        let chain = self.host_id().to_owned();
        let id = prepared.entry.audit_id.clone();
        self.write("audit.append", &id, move |tx| {
            append::append_prepared(tx, &chain, &prepared)
        })
    }

    fn append_audit_async<'a>(&'a self, entry: AuditEntry) -> BoxFuture<'a, Result<AuditRecord>> {
        Box::pin(async move { self.append_own_async(&entry).await })
    }

    fn append_audit_relaxed_async<'a>(
        &'a self,
        entry: AuditEntry,
    ) -> BoxFuture<'a, Result<AuditRecord>> {
        Box::pin(async move { self.append_own_async(&entry).await })
    }

    fn export_audit(&self, after_seq: i64, limit: usize) -> Result<Vec<AuditRecord>> {
        let page = self.export_audit_chain(self.host_id(), after_seq, limit)?;
        Ok(page.into_iter().map(|(_, record)| record).collect())
    }

    fn find_audit(&self, audit_id: &str) -> Result<Vec<AuditRecord>> {
        let owned = audit_id.to_owned();
        self.read("audit.find", audit_id, move |conn| read::find(conn, &owned))
    }

    fn verify_audit(&self) -> Result<VerifyReport> {
        let chains = self.verify_audit_chains()?;
        Ok(verify::combined(&chains, self.host_id()))
    }

    fn audit_head(&self) -> Result<AuditAnchor> {
        let chain = self.host_id().to_owned();
        self.read("audit.head", self.host_id(), move |conn| {
            read::head(conn, &chain)
        })
    }

    fn verify_audit_anchored(&self, anchors: &[AuditAnchor]) -> Result<AnchoredReport> {
        let chain = self.host_id().to_owned();
        let anchors = anchors.to_vec();
        self.read("audit.verify", self.host_id(), move |conn| {
            let chains = verify::verify_all(conn)?;
            let combined = verify::combined(&chains, &chain);
            let own = chains
                .iter()
                .find(|c| c.chain == chain)
                .map(|c| c.report.clone())
                .unwrap_or_else(|| VerifyReport {
                    checked: 0,
                    last_seq: 0,
                    last_hash: GENESIS_HASH.to_owned(),
                    first_broken: None,
                });
            let mut checks = Vec::with_capacity(anchors.len());
            for anchor in &anchors {
                let found = if anchor.seq > 0 && anchor.seq <= own.last_seq {
                    read::hash_at(conn, &chain, anchor.seq)?
                } else {
                    None
                };
                checks.push(verify::check_anchor(&own, anchor, found));
            }
            Ok(AnchoredReport {
                chain: combined,
                anchors: checks,
            })
        })
    }
}
