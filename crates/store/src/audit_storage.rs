//! How audit records are stored since schema 6: one compact row per record, the repeated part
//! of a record interned as a *shape*, each distinct policy proof stored once.
//!
//! # Why
//!
//! Until schema 5 every record was one `audit_log` row holding every field as text: the whole
//! policy proof (seven verdicts with their reasons, ~1.3 KB of JSON), five 64-hex-digit
//! digests and strings that are the same for every call of a runtime. A keyless read cost
//! ~2 KB of database. The logical record has not changed (the wire types
//! [`AuditEntry`] / [`AuditRecord`] are untouched, and every reader gets back exactly the
//! record that was written); only its storage has.
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
//! where `seq` is written in decimal and `body` is the record as [`AuditEntry`] serialises it
//! (every field, `null`s included) without `policy_proof`, plus the member
//! `"policy_proof_sha256"`: the lowercase hex of `SHA-256(canonical_json(policy_proof))`, or
//! `null` without a proof. The proof is bound by its digest, so the append never
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

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use openphone_protocol::digest::sha256_hex;
use openphone_protocol::{Risk, ToolStatus};
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, ErrorCode, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::audit::{AuditConfirmation, AuditEntry, AuditKind, AuditRecord, Caller, PolicyDecision};
use crate::error::{Result, SqlContext, StoreError};
use crate::wire::Autonomy;

/// The domain prefix of a shape's content id.
const SHAPE_DOMAIN: &str = "openphone.audit.shape\n";

/// The columns of `audit_records`, in the order [`Interned::decode`] reads them.
pub(crate) const RECORD_COLUMNS: &str = "seq, shape, at_ms, request_id, phone_session_id, \
    idempotency_key, audit_id, confirmation_id, duration_ms, params_hash, result_digest, proof, \
    proof_digest, hash";

/// How many checked proofs the process keeps (a daemon sees a handful: one per distinct
/// combination of caller, tool class and configuration).
const PROOF_CACHE_CAP: usize = 256;

/// How `audit_id` is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum AuditIdForm {
    /// `runtime:<runtime>:<request_id>`; the column is NULL.
    Derived,
    /// Anything else; the column holds it.
    Stored,
}

/// How `idempotency_key` is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum KeyForm {
    /// No key; the column is NULL.
    Absent,
    /// The key is the request id; the column is NULL.
    RequestId,
    /// The column holds the key.
    Stored,
}

/// The text form of a digest stored as 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum DigestForm {
    /// `sha256:<64 hex>`.
    Prefixed,
    /// `<64 hex>`.
    Bare,
}

/// How `proof_digest` is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ProofDigestForm {
    /// No proof digest; the column is NULL.
    Absent,
    /// The digest of the interned proof (`proof`); the column is NULL.
    Proof,
    /// The column holds it (it is not the digest of the record's proof).
    Stored,
}

/// The repeated part of a record, interned in `audit_shapes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Shape {
    kind: AuditKind,
    runtime: String,
    caller: Caller,
    runtime_session_id: Option<String>,
    tool: Option<String>,
    risk: Option<Risk>,
    mutating: Option<bool>,
    autonomy: Option<Autonomy>,
    decision: Option<PolicyDecision>,
    confirmation: Option<AuditConfirmation>,
    status: Option<ToolStatus>,
    error_code: Option<String>,
    audit_id: AuditIdForm,
    idempotency_key: KeyForm,
    params_hash: DigestForm,
    result_digest: DigestForm,
    proof_digest: ProofDigestForm,
    proof_digest_text: DigestForm,
}

/// The content id of a shape's text.
fn shape_id(text: &str) -> i64 {
    let hex = sha256_hex(&format!("{SHAPE_DOMAIN}{text}"));
    let mut id = [0u8; 8];
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = hex_byte(&hex.as_bytes()[2 * i..2 * i + 2]).unwrap_or(0);
    }
    i64::from_be_bytes(id)
}

// ---------------------------------------------------------------------------------------
// Encodings

const HEX: &[u8; 16] = b"0123456789abcdef";

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

fn hex_byte(pair: &[u8]) -> Option<u8> {
    match pair {
        [hi, lo] => Some(hex_digit(*hi)? << 4 | hex_digit(*lo)?),
        _ => None,
    }
}

/// Lowercase hex of `bytes`.
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    out
}

/// The 32 bytes of 64 lowercase hex digits.
pub(crate) fn hex32(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in text.as_bytes().chunks_exact(2).enumerate() {
        out[i] = hex_byte(pair)?;
    }
    Some(out)
}

/// A digest text as its bytes and its form (`None` when it is not a digest).
fn split_digest(text: &str) -> Option<([u8; 32], DigestForm)> {
    match text.strip_prefix("sha256:") {
        Some(hex) => hex32(hex).map(|d| (d, DigestForm::Prefixed)),
        None => hex32(text).map(|d| (d, DigestForm::Bare)),
    }
}

fn join_digest(bytes: &[u8], form: DigestForm) -> String {
    match form {
        DigestForm::Prefixed => format!("sha256:{}", to_hex(bytes)),
        DigestForm::Bare => to_hex(bytes),
    }
}

/// The 16 bytes of a canonical (lowercase, hyphenated) UUID.
fn uuid_bytes(text: &str) -> Option<[u8; 16]> {
    let raw = text.as_bytes();
    if raw.len() != 36 || [8, 13, 18, 23].iter().any(|&i| raw[i] != b'-') {
        return None;
    }
    let mut digits = raw.iter().copied().filter(|&c| c != b'-');
    let mut out = [0u8; 16];
    for byte in &mut out {
        let hi = hex_digit(digits.next()?)?;
        let lo = hex_digit(digits.next()?)?;
        *byte = hi << 4 | lo;
    }
    Some(out)
}

fn uuid_text(bytes: &[u8]) -> String {
    let hex = to_hex(bytes);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// An id column: a canonical UUID as 16 bytes, anything else as text.
fn encode_id(text: &str) -> SqlValue {
    match uuid_bytes(text) {
        Some(bytes) => SqlValue::Blob(bytes.to_vec()),
        None => SqlValue::Text(text.to_owned()),
    }
}

fn decode_id(value: ValueRef<'_>, name: &str) -> std::result::Result<String, String> {
    match value {
        ValueRef::Blob(bytes) if bytes.len() == 16 => Ok(uuid_text(bytes)),
        ValueRef::Text(bytes) => {
            let text = std::str::from_utf8(bytes).map_err(|e| format!("{name}: {e}"))?;
            if uuid_bytes(text).is_some() {
                return Err(format!("{name}: a UUID stored as text (not canonical)"));
            }
            Ok(text.to_owned())
        }
        other => Err(format!("{name}: unexpected {:?} value", other.data_type())),
    }
}

// ---------------------------------------------------------------------------------------
// Proofs

/// A proof whose digest was checked, shared by every store of the process.
struct CheckedProof {
    value: Value,
    text: Arc<str>,
}

static PROOFS: LazyLock<Mutex<HashMap<[u8; 32], Arc<CheckedProof>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// A record's proof, ready to store: its content digest, the text stored, the value read back.
struct Proof {
    digest: [u8; 32],
    text: Arc<str>,
    value: Value,
}

/// What the writer needs of a proof: its key and the text to intern.
struct StoredProof {
    digest: [u8; 32],
    text: Arc<str>,
}

/// The digest of a proof's canonical JSON.
fn proof_digest(value: &Value) -> std::result::Result<[u8; 32], String> {
    let hex = openphone_protocol::canonical_sha256_hex(value).map_err(|e| e.to_string())?;
    hex32(&hex).ok_or_else(|| "sha256_hex is not 64 hex digits".to_owned())
}

/// Interns `proof` given the digest the caller claims for it: a cached proof with that
/// digest that is equal by value is taken as is; otherwise the proof is normalised through
/// its stored text (so what is hashed now is what is read back) and its digest computed.
fn checked_proof(proof: Value, claimed: Option<[u8; 32]>) -> Result<Proof> {
    let cache = || PROOFS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(claimed) = claimed
        && let Some(hit) = cache().get(&claimed).cloned()
        && hit.value == proof
    {
        return Ok(Proof {
            digest: claimed,
            text: Arc::clone(&hit.text),
            value: proof,
        });
    }
    let invalid = |detail: String| StoreError::Invalid {
        what: "audit policy_proof",
        detail,
    };
    let text: Arc<str> = proof.to_string().into();
    let value: Value = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    let digest = proof_digest(&value).map_err(invalid)?;
    if claimed == Some(digest) {
        let mut cache = cache();
        if cache.len() >= PROOF_CACHE_CAP {
            cache.clear();
        }
        cache.insert(
            digest,
            Arc::new(CheckedProof {
                value: value.clone(),
                text: Arc::clone(&text),
            }),
        );
    }
    Ok(Proof {
        digest,
        text,
        value,
    })
}

// ---------------------------------------------------------------------------------------
// The hashed form

/// `sha256_hex(canonical_json(body))`, the body being the record without `policy_proof`,
/// with `policy_proof_sha256`. `entry.policy_proof` is left as it was.
fn body_digest(entry: &mut AuditEntry, proof: Option<&[u8; 32]>) -> Result<String> {
    let id = entry.audit_id.clone();
    let held = entry.policy_proof.take();
    let value = serde_json::to_value(&*entry);
    entry.policy_proof = held;
    let mut value = value.map_err(|e| StoreError::corrupt("audit.hash", &id, e))?;
    let Value::Object(map) = &mut value else {
        return Err(StoreError::corrupt(
            "audit.hash",
            &id,
            "a record does not serialise to an object",
        ));
    };
    map.remove("policy_proof");
    map.insert(
        "policy_proof_sha256".to_owned(),
        proof.map_or(Value::Null, |d| Value::String(to_hex(d))),
    );
    openphone_protocol::canonical_sha256_hex(&value)
        .map_err(|e| StoreError::corrupt("audit.hash", &id, e))
}

/// The form-2 chain hash.
pub(crate) fn chain_hash(prev_hash: &str, seq: i64, body_digest: &str) -> String {
    sha256_hex(&format!("{prev_hash}\n{seq}\n{body_digest}"))
}

// ---------------------------------------------------------------------------------------
// Append

/// A record made ready for the writer: everything but its place in the chain is computed
/// (encodings, shape, proof digest, body digest), so the writer's work is small.
pub(crate) struct PreparedAudit {
    /// The record as it will read back (its proof normalised).
    entry: AuditEntry,
    shape_id: i64,
    shape_text: String,
    /// The interned proof and the `proof_digest` column.
    proof: Option<(StoredProof, Option<[u8; 32]>)>,
    request_id: SqlValue,
    phone_session_id: Option<SqlValue>,
    idempotency_key: Option<String>,
    audit_id: Option<String>,
    params_hash: Option<[u8; 32]>,
    result_digest: Option<[u8; 32]>,
    /// The `proof_digest` column (NULL when absent or the proof's own digest).
    proof_digest: Option<[u8; 32]>,
    body_digest: String,
}

impl PreparedAudit {
    /// The record's `audit_id` (for error contexts).
    pub(crate) fn audit_id(&self) -> &str {
        &self.entry.audit_id
    }
}

fn digest_field(
    what: &'static str,
    value: Option<&str>,
    default: DigestForm,
) -> Result<(Option<[u8; 32]>, DigestForm)> {
    match value {
        None => Ok((None, default)),
        Some(text) => split_digest(text)
            .map(|(d, form)| (Some(d), form))
            .ok_or_else(|| StoreError::Invalid {
                what,
                detail: "must be a digest (sha256:<64 hex> or 64 hex), never a raw value"
                    .to_owned(),
            }),
    }
}

/// Prepares `entry` for [`append_prepared`]. Checks it (digest fields must be digests, the
/// audit id must not be empty) and does the expensive part of an append off the writer.
pub(crate) fn prepare(mut entry: AuditEntry) -> Result<PreparedAudit> {
    if entry.audit_id.is_empty() {
        return Err(StoreError::Invalid {
            what: "audit_id",
            detail: "empty".to_owned(),
        });
    }
    let (params_hash, params_form) = digest_field(
        "audit params_hash",
        entry.params_hash.as_deref(),
        DigestForm::Prefixed,
    )?;
    let (result_digest, result_form) = digest_field(
        "audit result_digest",
        entry.result_digest.as_deref(),
        DigestForm::Prefixed,
    )?;
    let (claimed, claimed_form) = digest_field(
        "audit proof_digest",
        entry.proof_digest.as_deref(),
        DigestForm::Bare,
    )?;
    let proof = entry
        .policy_proof
        .take()
        .map(|p| checked_proof(p, claimed))
        .transpose()?;
    let proof_key = proof.as_ref().map(|p| p.digest);
    let (proof_digest_form, proof_digest) = match (claimed, proof_key) {
        (None, _) => (ProofDigestForm::Absent, None),
        (Some(c), Some(k)) if c == k => (ProofDigestForm::Proof, None),
        (Some(c), _) => (ProofDigestForm::Stored, Some(c)),
    };
    let derived_id = openphone_protocol::audit_id(&entry.runtime, &entry.request_id);
    let (audit_id_form, audit_id) = if entry.audit_id == derived_id {
        (AuditIdForm::Derived, None)
    } else {
        (AuditIdForm::Stored, Some(entry.audit_id.clone()))
    };
    let (key_form, idempotency_key) = match &entry.idempotency_key {
        None => (KeyForm::Absent, None),
        Some(key) if *key == entry.request_id => (KeyForm::RequestId, None),
        Some(key) => (KeyForm::Stored, Some(key.clone())),
    };
    let shape = Shape {
        kind: entry.kind,
        runtime: entry.runtime.clone(),
        caller: entry.caller.clone(),
        runtime_session_id: entry.runtime_session_id.clone(),
        tool: entry.tool.clone(),
        risk: entry.risk,
        mutating: entry.mutating,
        autonomy: entry.autonomy,
        decision: entry.decision,
        confirmation: entry.confirmation,
        status: entry.status,
        error_code: entry.error_code.clone(),
        audit_id: audit_id_form,
        idempotency_key: key_form,
        params_hash: params_form,
        result_digest: result_form,
        proof_digest: proof_digest_form,
        proof_digest_text: claimed_form,
    };
    let shape_text = serde_json::to_string(&shape)
        .map_err(|e| StoreError::corrupt("audit.append", &entry.audit_id, e))?;
    let body_digest = body_digest(&mut entry, proof_key.as_ref())?;
    // The proof value goes back into the record; the writer needs only its key and text.
    let proof = proof.map(|p| {
        entry.policy_proof = Some(p.value);
        (
            StoredProof {
                digest: p.digest,
                text: p.text,
            },
            proof_digest,
        )
    });
    Ok(PreparedAudit {
        shape_id: shape_id(&shape_text),
        shape_text,
        request_id: encode_id(&entry.request_id),
        phone_session_id: entry.phone_session_id.as_deref().map(encode_id),
        idempotency_key,
        audit_id,
        params_hash,
        result_digest,
        proof_digest,
        proof,
        body_digest,
        entry,
    })
}

fn is_foreign_key_failure(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.code == ErrorCode::ConstraintViolation
            && f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY)
}

fn insert_row(
    conn: &Connection,
    seq: i64,
    p: &PreparedAudit,
    hash: &[u8; 32],
) -> rusqlite::Result<()> {
    let e = &p.entry;
    let mut stmt = conn.prepare_cached(&format!(
        "INSERT INTO audit_records ({RECORD_COLUMNS}) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
    ))?;
    stmt.execute(params![
        seq,
        p.shape_id,
        e.at_ms,
        p.request_id,
        p.phone_session_id,
        p.idempotency_key,
        p.audit_id,
        e.confirmation_id,
        e.duration_ms,
        p.params_hash.as_ref().map(|d| &d[..]),
        p.result_digest.as_ref().map(|d| &d[..]),
        p.proof.as_ref().map(|(proof, _)| &proof.digest[..]),
        p.proof_digest.as_ref().map(|d| &d[..]),
        &hash[..],
    ])?;
    Ok(())
}

/// Writes the shape and the proof of `p` unless they are there.
fn intern(conn: &Connection, p: &PreparedAudit) -> Result<()> {
    const OP: &str = "audit.intern";
    let id = p.audit_id();
    conn.prepare_cached(
        "INSERT INTO audit_shapes (id, shape) VALUES (?1, ?2) ON CONFLICT (id) DO NOTHING",
    )
    .and_then(|mut s| s.execute(params![p.shape_id, p.shape_text]))
    .ctx(OP, id)?;
    let stored: String = conn
        .query_row(
            "SELECT shape FROM audit_shapes WHERE id = ?1",
            [p.shape_id],
            |row| row.get(0),
        )
        .ctx(OP, id)?;
    if stored != p.shape_text {
        return Err(StoreError::corrupt(
            OP,
            id,
            format!("shape id {} already names another shape", p.shape_id),
        ));
    }
    if let Some((proof, _)) = &p.proof {
        conn.prepare_cached(
            "INSERT INTO audit_proofs (digest, proof) VALUES (?1, ?2) ON CONFLICT (digest) DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![&proof.digest[..], &*proof.text]))
        .ctx(OP, id)?;
    }
    Ok(())
}

/// The text of the stored shape with this id, if any.
fn stored_shape(conn: &Connection, id: i64) -> Result<Option<String>> {
    conn.prepare_cached("SELECT shape FROM audit_shapes WHERE id = ?1")
        .and_then(|mut s| s.query_row([id], |row| row.get(0)).optional())
        .ctx("audit.append", "shape")
}

/// The chain's head: the last seq and its hash (`None` for an empty log).
pub(crate) fn head(conn: &Connection) -> Result<Option<(i64, String)>> {
    conn.prepare_cached("SELECT seq, hash FROM audit_head WHERE id = 1")
        .and_then(|mut s| {
            s.query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .ctx("audit.head", "")
}

/// Appends a prepared record to the chain inside the caller's transaction: reads the head,
/// inserts the row (interning its shape and proof when the database lacks them) and moves the
/// head.
pub(crate) fn append_prepared(conn: &Connection, p: PreparedAudit) -> Result<AuditRecord> {
    const OP: &str = "audit.append";
    let (last_seq, prev_hash) = head(conn)?.unwrap_or((0, crate::audit::GENESIS_HASH.to_owned()));
    let seq = last_seq + 1;
    let hash = chain_hash(&prev_hash, seq, &p.body_digest);
    let hash_bytes = hex32(&hash)
        .ok_or_else(|| StoreError::corrupt(OP, p.audit_id(), "hash is not 64 hex digits"))?;
    // The shape id is a 64-bit prefix of a digest of free text (a runtime session id, a tool
    // name a client chose): a colliding shape could be found by search. So the stored shape
    // must be this record's, byte for byte, before a row points at it (found in review: a
    // colliding record read back as another one and broke verification for good).
    match stored_shape(conn, p.shape_id)? {
        Some(text) if text != p.shape_text => {
            return Err(StoreError::Invalid {
                what: "audit record",
                detail: format!(
                    "its shape collides with a different stored shape (id {}); refused",
                    p.shape_id
                ),
            });
        }
        Some(_) => {}
        None => intern(conn, &p)?,
    }
    match insert_row(conn, seq, &p, &hash_bytes) {
        Ok(()) => {}
        Err(e) if is_foreign_key_failure(&e) => {
            intern(conn, &p)?;
            insert_row(conn, seq, &p, &hash_bytes).ctx(OP, p.audit_id())?;
        }
        Err(e) => return Err(e).ctx(OP, p.audit_id()),
    }
    conn.prepare_cached(
        "INSERT INTO audit_head (id, seq, hash) VALUES (1, ?1, ?2) \
         ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
    )
    .and_then(|mut s| s.execute(params![seq, hash]))
    .ctx(OP, p.audit_id())?;
    Ok(AuditRecord {
        seq,
        entry: p.entry,
        prev_hash,
        hash,
    })
}

// ---------------------------------------------------------------------------------------
// Read

/// A compact row as read: its seq and hash, and the record it decodes to (or why not).
pub(crate) struct CompactRow {
    pub seq: i64,
    /// Lowercase hex (empty when the column is not 32 bytes; `decoded` says why).
    pub hash: String,
    pub decoded: std::result::Result<Decoded, String>,
}

/// A decoded compact row.
pub(crate) struct Decoded {
    pub entry: AuditEntry,
    /// The `proof` column: the interned proof's digest, bound by the hash.
    proof_key: Option<[u8; 32]>,
}

impl Decoded {
    /// The form-2 hash of this record at `seq` after `prev_hash`.
    pub(crate) fn hash_after(&mut self, prev_hash: &str, seq: i64) -> Result<String> {
        let body = body_digest(&mut self.entry, self.proof_key.as_ref())?;
        Ok(chain_hash(prev_hash, seq, &body))
    }
}

/// Decodes compact rows, loading each shape and proof once (and checking it against its id).
pub(crate) struct Interned<'c> {
    conn: &'c Connection,
    shapes: HashMap<i64, std::result::Result<Arc<Shape>, String>>,
    proofs: HashMap<[u8; 32], std::result::Result<Arc<Value>, String>>,
}

fn digest_col(
    row: &Row<'_>,
    idx: usize,
    name: &str,
) -> std::result::Result<Option<[u8; 32]>, String> {
    match row.get_ref(idx).map_err(|e| format!("{name}: {e}"))? {
        ValueRef::Null => Ok(None),
        ValueRef::Blob(b) => <[u8; 32]>::try_from(b)
            .map(Some)
            .map_err(|_| format!("{name}: {} bytes, not 32", b.len())),
        other => Err(format!("{name}: unexpected {:?} value", other.data_type())),
    }
}

fn text_col(row: &Row<'_>, idx: usize, name: &str) -> std::result::Result<Option<String>, String> {
    row.get::<_, Option<String>>(idx)
        .map_err(|e| format!("{name}: {e}"))
}

fn int_col(row: &Row<'_>, idx: usize, name: &str) -> std::result::Result<Option<i64>, String> {
    row.get::<_, Option<i64>>(idx)
        .map_err(|e| format!("{name}: {e}"))
}

/// A column that must be NULL under its form.
fn must_be_null<T>(value: Option<T>, name: &str) -> std::result::Result<(), String> {
    match value {
        None => Ok(()),
        Some(_) => Err(format!(
            "{name}: a value where the shape says none is stored"
        )),
    }
}

fn required<T>(value: Option<T>, name: &str) -> std::result::Result<T, String> {
    value.ok_or_else(|| format!("{name}: missing, but the shape says it is stored"))
}

impl<'c> Interned<'c> {
    pub(crate) fn new(conn: &'c Connection) -> Interned<'c> {
        Interned {
            conn,
            shapes: HashMap::new(),
            proofs: HashMap::new(),
        }
    }

    fn shape(&mut self, id: i64) -> Result<std::result::Result<Arc<Shape>, String>> {
        if let Some(found) = self.shapes.get(&id) {
            return Ok(found.clone());
        }
        let text: Option<String> = self
            .conn
            .prepare_cached("SELECT shape FROM audit_shapes WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |row| row.get(0)).optional())
            .ctx("audit.read_shape", &id.to_string())?;
        let loaded = match text {
            None => Err(format!("interned shape {id} is missing")),
            Some(text) if shape_id(&text) != id => Err(format!(
                "interned shape {id} does not match its content (edited)"
            )),
            Some(text) => serde_json::from_str::<Shape>(&text)
                .map(Arc::new)
                .map_err(|e| format!("interned shape {id}: {e}")),
        };
        self.shapes.insert(id, loaded.clone());
        Ok(loaded)
    }

    fn proof(&mut self, key: [u8; 32]) -> Result<std::result::Result<Arc<Value>, String>> {
        if let Some(found) = self.proofs.get(&key) {
            return Ok(found.clone());
        }
        let hex = to_hex(&key);
        let text: Option<String> = self
            .conn
            .prepare_cached("SELECT proof FROM audit_proofs WHERE digest = ?1")
            .and_then(|mut s| s.query_row([&key[..]], |row| row.get(0)).optional())
            .ctx("audit.read_proof", &hex)?;
        let loaded = match text {
            None => Err(format!("interned policy proof {hex} is missing")),
            Some(text) => match serde_json::from_str::<Value>(&text) {
                Err(e) => Err(format!("interned policy proof {hex}: {e}")),
                Ok(value) => match proof_digest(&value) {
                    Ok(d) if d == key => Ok(Arc::new(value)),
                    Ok(_) => Err(format!(
                        "interned policy proof {hex} does not match its digest (edited)"
                    )),
                    Err(e) => Err(format!("interned policy proof {hex}: {e}")),
                },
            },
        };
        self.proofs.insert(key, loaded.clone());
        Ok(loaded)
    }

    /// Reads one row of `SELECT {RECORD_COLUMNS} FROM audit_records`. `Err` only when the
    /// database cannot be read; a row that does not decode has `decoded: Err`.
    pub(crate) fn decode(&mut self, row: &Row<'_>) -> Result<CompactRow> {
        let seq: i64 = row.get(0).ctx("audit.read", "seq")?;
        let hash = match digest_col(row, 13, "hash") {
            Ok(Some(h)) => Ok(to_hex(&h)),
            Ok(None) => Err("hash: missing".to_owned()),
            Err(e) => Err(e),
        };
        Ok(match hash {
            Err(e) => CompactRow {
                seq,
                hash: String::new(),
                decoded: Err(e),
            },
            Ok(hash) => CompactRow {
                seq,
                hash,
                decoded: self.decode_entry(row)?,
            },
        })
    }

    fn decode_entry(&mut self, row: &Row<'_>) -> Result<std::result::Result<Decoded, String>> {
        let shape_id = match int_col(row, 1, "shape") {
            Ok(Some(id)) => id,
            Ok(None) => return Ok(Err("shape: missing".to_owned())),
            Err(e) => return Ok(Err(e)),
        };
        let shape = match self.shape(shape_id)? {
            Ok(shape) => shape,
            Err(e) => return Ok(Err(e)),
        };
        let proof_key = match digest_col(row, 11, "proof") {
            Ok(key) => key,
            Err(e) => return Ok(Err(e)),
        };
        let proof = match proof_key {
            None => None,
            Some(key) => match self.proof(key)? {
                Ok(value) => Some(value),
                Err(e) => return Ok(Err(e)),
            },
        };
        Ok(assemble(row, &shape, proof_key, proof.as_deref()))
    }
}

/// Puts a row, its shape and its proof back together into the record.
fn assemble(
    row: &Row<'_>,
    shape: &Shape,
    proof_key: Option<[u8; 32]>,
    proof: Option<&Value>,
) -> std::result::Result<Decoded, String> {
    let at_ms = required(int_col(row, 2, "at_ms")?, "at_ms")?;
    let request_id = decode_id(
        row.get_ref(3).map_err(|e| format!("request_id: {e}"))?,
        "request_id",
    )?;
    let phone_session_id = match row
        .get_ref(4)
        .map_err(|e| format!("phone_session_id: {e}"))?
    {
        ValueRef::Null => None,
        value => Some(decode_id(value, "phone_session_id")?),
    };
    let key_col = text_col(row, 5, "idempotency_key")?;
    let idempotency_key = match shape.idempotency_key {
        KeyForm::Absent => must_be_null(key_col, "idempotency_key").map(|()| None)?,
        KeyForm::RequestId => {
            must_be_null(key_col, "idempotency_key")?;
            Some(request_id.clone())
        }
        KeyForm::Stored => Some(required(key_col, "idempotency_key")?),
    };
    let id_col = text_col(row, 6, "audit_id")?;
    let audit_id = match shape.audit_id {
        AuditIdForm::Derived => {
            must_be_null(id_col, "audit_id")?;
            openphone_protocol::audit_id(&shape.runtime, &request_id)
        }
        AuditIdForm::Stored => required(id_col, "audit_id")?,
    };
    let confirmation_id = text_col(row, 7, "confirmation_id")?;
    let duration_ms = int_col(row, 8, "duration_ms")?;
    let params_hash =
        digest_col(row, 9, "params_hash")?.map(|d| join_digest(&d, shape.params_hash));
    let result_digest =
        digest_col(row, 10, "result_digest")?.map(|d| join_digest(&d, shape.result_digest));
    let digest_col_value = digest_col(row, 12, "proof_digest")?;
    let proof_digest = match shape.proof_digest {
        ProofDigestForm::Absent => must_be_null(digest_col_value, "proof_digest").map(|()| None)?,
        ProofDigestForm::Proof => {
            must_be_null(digest_col_value, "proof_digest")?;
            let key = required(proof_key, "proof")?;
            Some(join_digest(&key, shape.proof_digest_text))
        }
        ProofDigestForm::Stored => Some(join_digest(
            &required(digest_col_value, "proof_digest")?,
            shape.proof_digest_text,
        )),
    };
    Ok(Decoded {
        entry: AuditEntry {
            audit_id,
            kind: shape.kind,
            at_ms,
            runtime: shape.runtime.clone(),
            caller: shape.caller.clone(),
            phone_session_id,
            runtime_session_id: shape.runtime_session_id.clone(),
            request_id,
            idempotency_key,
            tool: shape.tool.clone(),
            risk: shape.risk,
            mutating: shape.mutating,
            autonomy: shape.autonomy,
            decision: shape.decision,
            proof_digest,
            policy_proof: proof.cloned(),
            confirmation_id,
            confirmation: shape.confirmation,
            status: shape.status,
            error_code: shape.error_code.clone(),
            duration_ms,
            params_hash,
            result_digest,
        },
        proof_key,
    })
}

/// The id-column values that a record with `request_id` would be stored under (a
/// [`find`](crate::Store::find_audit) by derived audit id looks these up).
pub(crate) fn request_id_value(request_id: &str) -> SqlValue {
    encode_id(request_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_round_trip_and_only_canonical_ones_are_packed() {
        let id = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let SqlValue::Blob(bytes) = encode_id(id) else {
            panic!("a canonical UUID is packed");
        };
        assert_eq!(uuid_text(&bytes), id);
        for text in [
            "0F8FAD5B-D9CB-469F-A165-70867728950E",
            "0f8fad5bd9cb469fa16570867728950e",
            "req-1",
            "",
            "0f8fad5b-d9cb-469f-a165-70867728950e ",
        ] {
            assert_eq!(encode_id(text), SqlValue::Text(text.to_owned()), "{text:?}");
        }
    }

    #[test]
    fn digests_keep_their_text_form() {
        let hex = "ab".repeat(32);
        for text in [hex.clone(), format!("sha256:{hex}")] {
            let (bytes, form) = split_digest(&text).unwrap();
            assert_eq!(join_digest(&bytes, form), text);
        }
        assert!(split_digest(&"AB".repeat(32)).is_none());
        assert!(split_digest("sha256:xyz").is_none());
    }

    fn migrated() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        crate::migrations::migrate(&mut conn, crate::SCHEMA_VERSION).unwrap();
        conn
    }

    fn read_entry(i: i64) -> AuditEntry {
        let proof = serde_json::json!([{"layer": "autonomy", "kind": "allow", "i": i % 2}]);
        AuditEntry {
            audit_id: format!("runtime:r:req-{i}"),
            runtime: "r".to_owned(),
            request_id: format!("req-{i}"),
            proof_digest: Some(to_hex(&proof_digest(&proof).unwrap())),
            policy_proof: Some(proof),
            status: Some(ToolStatus::Ok),
            ..AuditEntry::default()
        }
    }

    fn all(conn: &Connection) -> Vec<AuditEntry> {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {RECORD_COLUMNS} FROM audit_records ORDER BY seq"
            ))
            .unwrap();
        let mut rows = stmt.query([]).unwrap();
        let mut interned = Interned::new(conn);
        let mut out = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            out.push(interned.decode(row).unwrap().decoded.unwrap().entry);
        }
        out
    }

    /// A write that interned a shape and a proof and was then rolled back (its savepoint, or
    /// the batch's whole transaction) leaves nothing behind that the next append could take
    /// for granted: it interns them again.
    #[test]
    fn an_append_after_a_rolled_back_one_interns_again() {
        let conn = migrated();
        for undo in ["ROLLBACK TO job; RELEASE job", "ROLLBACK"] {
            conn.execute_batch(if undo == "ROLLBACK" {
                "BEGIN"
            } else {
                "SAVEPOINT job"
            })
            .unwrap();
            append_prepared(&conn, prepare(read_entry(1)).unwrap()).unwrap();
            conn.execute_batch(undo).unwrap();
            let count: i64 = conn
                .query_row("SELECT COUNT(*) FROM audit_shapes", [], |r| r.get(0))
                .unwrap();
            assert_eq!(count, 0, "{undo}");
        }
        for i in 1..=4 {
            append_prepared(&conn, prepare(read_entry(i)).unwrap()).unwrap();
        }
        assert_eq!(all(&conn), (1..=4).map(read_entry).collect::<Vec<_>>());
        let (shapes, proofs): (i64, i64) = conn
            .query_row(
                "SELECT (SELECT COUNT(*) FROM audit_shapes), (SELECT COUNT(*) FROM audit_proofs)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((shapes, proofs), (1, 2));
    }

    #[test]
    fn a_shape_id_is_a_function_of_its_text() {
        let a = prepare(read_entry(1)).unwrap();
        let b = prepare(read_entry(3)).unwrap();
        assert_eq!((a.shape_id, &a.shape_text), (b.shape_id, &b.shape_text));
        assert_eq!(a.shape_id, shape_id(&a.shape_text));
        let mut other = read_entry(1);
        other.status = Some(ToolStatus::Error);
        assert_ne!(prepare(other).unwrap().shape_id, a.shape_id);
    }
}
