//! How audit records are stored since schema 6: one compact row per record, the repeated part
//! of a record interned as a *shape*, each distinct policy proof stored once.
//!
//! # Why
//!
//! Until schema 5 every record was one `audit_log` row holding every field as text: the whole
//! policy proof (seven verdicts with their reasons, ~1.3 KB of JSON), five 64-hex-digit
//! digests and strings that are the same for every call of a runtime. A keyless read cost
//! ~2 KB of database. The logical record has not changed (the wire types
//! [`AuditEntry`](crate::AuditEntry) / [`AuditRecord`](crate::AuditRecord) are untouched, and
//! every reader gets back exactly the record that was written); only its storage has.
//!
//! # Tables
//!
//! - `audit_shapes (id, shape)`: the part of a record that repeats from call to call — kind,
//!   runtime, caller, runtime session, tool, risk, mutating, autonomy, decision, confirmation,
//!   status, error code — plus how the row's own columns decode (the *forms* below), as one
//!   JSON text. The id is **derived from the content**: the first 8 bytes of
//!   `SHA-256("openphone.audit.shape\n" + shape)`, big-endian, as a signed integer. So an id
//!   always means the same shape, whichever database and whichever write produced it.
//! - `audit_proofs (digest, proof)`: each distinct policy proof once, keyed by the 32 bytes of
//!   `SHA-256(canonical_json(proof))` — for a proof made by the policy crate that is exactly
//!   the record's `proof_digest`.
//! - `audit_records`: one row per record: `seq`, `shape`, `at_ms`, `request_id`,
//!   `phone_session_id`, `idempotency_key`, `audit_id`, `confirmation_id`, `duration_ms`,
//!   `params_hash`, `result_digest`, `proof`, `proof_digest`, `hash`. `shape` and `proof`
//!   reference the two tables above (foreign keys).
//!
//! Column encodings, each reversible and unambiguous:
//!
//! - digests (`params_hash`, `result_digest`, `proof_digest`, `proof`, `hash`) are their 32
//!   raw bytes; whether the text had the `sha256:` prefix is a form of the shape;
//! - `request_id` and `phone_session_id` are a 16-byte BLOB when the text is a canonical
//!   (lowercase, hyphenated) UUID, and TEXT otherwise; a TEXT holding a canonical UUID is
//!   refused as a non-canonical encoding;
//! - `audit_id` is NULL when it is `runtime:<runtime>:<request_id>` (form `derived`);
//! - `idempotency_key` is NULL when absent (form `absent`) or equal to the request id (form
//!   `request_id`, what the bridge writes for a request without a key);
//! - `proof_digest` is NULL when absent or when it is the interned proof's digest (form
//!   `proof`, the normal case);
//! - `prev_hash` is not stored: it is the hash of the record before.
//!
//! A row whose columns contradict its shape's forms (a value where the form says NULL, a
//! missing value, a BLOB of the wrong length) does not decode: verification names it.
//!
//! # The hashed form (form 2)
//!
//! ```text
//! hash = sha256_hex(prev_hash + "\n" + seq + "\n" + body_digest)
//! body_digest = sha256_hex(canonical_json(body))
//! ```
//!
//! where `seq` is written in decimal and `body` is the record as
//! [`AuditEntry`](crate::AuditEntry) serialises it (every field, `null`s included) without
//! `policy_proof`, plus the member `"policy_proof_sha256"`: the lowercase hex of
//! `SHA-256(canonical_json(policy_proof))`, or `null` without a proof. The proof is bound by its digest, so the append never
//! canonicalises and hashes a proof it has seen before (the digest the caller passes is
//! checked against a cached copy of the proof by value), and the body digest is computed by
//! the caller's thread before the write is queued: the single writer only reads the head,
//! hashes ~150 bytes, and inserts the row. Records stored before schema 6 stay in
//! `audit_log` unchanged and keep their form-1 hash (`sha256_hex(prev_hash + "\n" +
//! canonical_json(record without hash))`, the proof included), so old records, old heads and
//! old anchors verify as before. The two preimages cannot be confused: after the first
//! newline, form 1 continues with `{`, form 2 with a digit.
//!
//! # What verification covers
//!
//! Every stored byte: the row's columns decode into the record whose hash is recomputed; the
//! shape's text must hash to its id, and the proof's text must hash to its key (checked once
//! per shape and proof per walk), so editing a shape or a proof breaks every record using it —
//! the first of them is named. A deleted or renumbered row breaks the next record's hash (its
//! `prev_hash` is the previous row's hash) or shows as a sequence gap; deleting the newest rows
//! is caught by the head.
//!
//! # Interning and rollbacks
//!
//! The write path keeps no id cache that a rolled-back write could leave stale: the row is
//! inserted first, and only when a foreign key fails (its shape or proof is not in the
//! database yet, or was rolled back with an earlier write) are the shape and proof inserted
//! and the row inserted again. The one in-memory cache is a pure one, the proofs whose digest
//! was checked (digest → proof), valid for any database.
//!
//! # Files
//!
//! - `layout.rs`: the shape (the forms, [`RECORD_COLUMNS`], the shape's content id);
//! - `encoding.rs`: the column encodings (digests as bytes, UUIDs as 16 bytes, hex);
//! - `proofs.rs`: interning a proof, the process-wide cache of checked proofs;
//! - `hash.rs`: the hashed form (form 2);
//! - `append.rs`: preparing a record off the writer and appending it;
//! - `read.rs`: decoding compact rows back into records.

mod append;
mod encoding;
mod hash;
mod layout;
mod proofs;
mod read;
#[cfg(test)]
mod tests;

pub(crate) use append::{PreparedAudit, append_prepared, head, prepare, prepare_proven};
pub(crate) use encoding::{hex32, request_id_value, to_hex};
pub(crate) use layout::RECORD_COLUMNS;
pub use proofs::AuditProof;
pub(crate) use proofs::load_interned;
pub(crate) use read::Interned;
