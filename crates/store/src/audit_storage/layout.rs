//! The layout of a compact audit record: the *shape* (the part of a record that repeats from
//! call to call, with the forms that say how the row's own columns decode), its content id,
//! and the columns of `audit_records`.

use openphone_protocol::digest::sha256_hex;
use openphone_protocol::{Risk, ToolStatus};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use super::encoding::{DigestForm, hex_byte};
use crate::audit::{AuditConfirmation, AuditKind, Caller, PolicyDecision};
use crate::wire::Autonomy;

/// The domain prefix of a shape's content id.
const SHAPE_DOMAIN: &str = "openphone.audit.shape\n";

/// The columns of `audit_records`, as a macro so statements are `concat!`ed, not formatted.
macro_rules! record_columns {
    () => {
        "seq, shape, at_ms, request_id, phone_session_id, idempotency_key, audit_id, \
         confirmation_id, duration_ms, params_hash, result_digest, proof, proof_digest, hash"
    };
}

/// The columns of `audit_records`, in the order
/// [`Interned::decode`](super::read::Interned::decode) reads them.
pub(crate) const RECORD_COLUMNS: &str = record_columns!();

/// Inserts one row of `audit_records` (`?1`..`?14`, in [`RECORD_COLUMNS`] order).
pub(crate) const INSERT_RECORD_SQL: &str = concat!(
    "INSERT INTO audit_records (",
    record_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
);

/// How `audit_id` is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum AuditIdForm {
    /// `runtime:<runtime>:<request_id>`; the column is NULL.
    Derived,
    /// Anything else; the column holds it.
    Stored,
}

/// How `idempotency_key` is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum KeyForm {
    /// No key; the column is NULL.
    Absent,
    /// The key is the request id; the column is NULL.
    RequestId,
    /// The column holds the key.
    Stored,
}

/// How `proof_digest` is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ProofDigestForm {
    /// No proof digest; the column is NULL.
    Absent,
    /// The digest of the interned proof (`proof`); the column is NULL.
    Proof,
    /// The column holds it (it is not the digest of the record's proof).
    Stored,
}

/// The repeated part of a record, interned in `audit_shapes`. Its text fields borrow from
/// the record being appended (nothing copied to serialise it) and own what a read decoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Shape<'a> {
    pub(super) kind: AuditKind,
    pub(super) runtime: Cow<'a, str>,
    pub(super) caller: Cow<'a, Caller>,
    pub(super) runtime_session_id: Option<Cow<'a, str>>,
    pub(super) tool: Option<Cow<'a, str>>,
    pub(super) risk: Option<Risk>,
    pub(super) mutating: Option<bool>,
    pub(super) autonomy: Option<Autonomy>,
    pub(super) decision: Option<PolicyDecision>,
    pub(super) confirmation: Option<AuditConfirmation>,
    pub(super) status: Option<ToolStatus>,
    pub(super) error_code: Option<Cow<'a, str>>,
    pub(super) audit_id: AuditIdForm,
    pub(super) idempotency_key: KeyForm,
    pub(super) params_hash: DigestForm,
    pub(super) result_digest: DigestForm,
    pub(super) proof_digest: ProofDigestForm,
    pub(super) proof_digest_text: DigestForm,
    /// The phone of the record (absent: none named, and the shape's text is what it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) device_id: Option<Cow<'a, str>>,
}

/// How many shape ids the process remembers (a daemon writes a handful of distinct shapes:
/// one per combination of caller, session, tool and outcome in use).
const SHAPE_ID_CACHE_CAP: usize = 256;

/// Shape text → its id: the digest of a shape is computed once, not for every record that
/// has it (a pure function of the text, so valid for any database).
static SHAPE_IDS: LazyLock<Mutex<HashMap<String, i64>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The content id of a shape's text.
pub(super) fn shape_id(text: &str) -> i64 {
    let cache = || SHAPE_IDS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(id) = cache().get(text) {
        return *id;
    }
    let id = digest_shape_id(text);
    let mut cache = cache();
    if cache.len() >= SHAPE_ID_CACHE_CAP {
        cache.clear();
    }
    cache.insert(text.to_owned(), id);
    id
}

/// [`shape_id`] computed: the first 8 bytes of the digest of the domain and the text.
pub(super) fn digest_shape_id(text: &str) -> i64 {
    let hex = sha256_hex(&format!("{SHAPE_DOMAIN}{text}"));
    let mut id = [0u8; 8];
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = hex_byte(&hex.as_bytes()[2 * i..2 * i + 2]).unwrap_or(0);
    }
    i64::from_be_bytes(id)
}
