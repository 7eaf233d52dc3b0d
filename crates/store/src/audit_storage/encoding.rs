//! The column encodings of a compact audit record, each reversible and unambiguous: a digest
//! as its 32 bytes (its text form kept by the shape), a canonical UUID as 16 bytes, hex.

use rusqlite::types::{Value as SqlValue, ValueRef};
use serde::{Deserialize, Serialize};

/// The text form of a digest stored as 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum DigestForm {
    /// `sha256:<64 hex>`.
    Prefixed,
    /// `<64 hex>`.
    Bare,
}
const HEX: &[u8; 16] = b"0123456789abcdef";

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

pub(super) fn hex_byte(pair: &[u8]) -> Option<u8> {
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
pub(super) fn split_digest(text: &str) -> Option<([u8; 32], DigestForm)> {
    match text.strip_prefix("sha256:") {
        Some(hex) => hex32(hex).map(|d| (d, DigestForm::Prefixed)),
        None => hex32(text).map(|d| (d, DigestForm::Bare)),
    }
}

pub(super) fn join_digest(bytes: &[u8], form: DigestForm) -> String {
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

pub(super) fn uuid_text(bytes: &[u8]) -> String {
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
pub(super) fn encode_id(text: &str) -> SqlValue {
    match uuid_bytes(text) {
        Some(bytes) => SqlValue::Blob(bytes.to_vec()),
        None => SqlValue::Text(text.to_owned()),
    }
}

pub(super) fn decode_id(value: ValueRef<'_>, name: &str) -> std::result::Result<String, String> {
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

/// The id-column values that a record with `request_id` would be stored under (a
/// [`find`](crate::AuditStore::find_audit) by derived audit id looks these up).
pub(crate) fn request_id_value(request_id: &str) -> SqlValue {
    encode_id(request_id)
}
