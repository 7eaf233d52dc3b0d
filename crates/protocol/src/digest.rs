//! Digests over canonical JSON.
//!
//! Two families that must never be mixed:
//!
//! - [`params_hash`] — `"sha256:" + hex(SHA-256(canonical_json(params)))`, used by the tool
//!   bridge in confirmation identity keys and audit records (`runtime-protocol.md` §17);
//!   [`params_hash_hex`] is the same without the prefix (the identity key's `params_digest`).
//! - [`params_digest`] / [`binding_digest`] — the background-review digests of
//!   `agent-jobs.md` §9.11, which cover the model-tool name too and carry no prefix.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical::{
    CanonicalError, canonical_json, check_params, write_canonical, write_canonical_object,
};

/// Lowercase hex SHA-256 of a string's UTF-8 bytes.
pub fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(64);
    for byte in digest.iter() {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A SHA-256 that canonical JSON is written into directly (no intermediate text). The writer
/// hands over pieces of a byte or a few (`,`, `:`, quotes, short keys): they gather in a small
/// buffer and reach the hash in blocks, not one `update` call each.
pub(crate) struct Hashing {
    sha: Sha256,
    buf: [u8; HASH_BUF],
    len: usize,
}

/// Bytes gathered before they are hashed (a multiple of SHA-256's 64-byte block).
const HASH_BUF: usize = 512;

impl std::fmt::Write for Hashing {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let bytes = s.as_bytes();
        if self.len + bytes.len() <= HASH_BUF {
            self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
        } else {
            self.sha.update(&self.buf[..self.len]);
            self.len = 0;
            if bytes.len() < HASH_BUF {
                self.buf[..bytes.len()].copy_from_slice(bytes);
                self.len = bytes.len();
            } else {
                self.sha.update(bytes);
            }
        }
        Ok(())
    }
}

impl Hashing {
    pub(crate) fn new() -> Hashing {
        Hashing {
            sha: Sha256::new(),
            buf: [0; HASH_BUF],
            len: 0,
        }
    }

    pub(crate) fn hex(mut self) -> String {
        self.sha.update(&self.buf[..self.len]);
        let digest = self.sha.finalize();
        let mut out = String::with_capacity(64);
        for byte in digest.iter() {
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
        out
    }
}

/// Lowercase hex SHA-256 of the canonical JSON of `value`: `sha256_hex(canonical_json(value))`,
/// computed as the text is written.
pub fn canonical_sha256_hex(value: &Value) -> Result<String, CanonicalError> {
    let mut hashing = Hashing::new();
    write_canonical(value, &mut hashing)?;
    Ok(hashing.hex())
}

/// `sha256:<hex>` of the canonical JSON of tool-request params. The params must pass
/// [`check_params`] (an object, bounded depth, safe integers).
pub fn params_hash(params: &Value) -> Result<String, CanonicalError> {
    Ok(format!("sha256:{}", params_hash_hex(params)?))
}

/// The 64 hex characters of [`params_hash`] (the confirmation identity key's `params_digest`).
pub fn params_hash_hex(params: &Value) -> Result<String, CanonicalError> {
    check_params(params)?;
    canonical_sha256_hex(params)
}

/// `sha256:<hex>` of the canonical JSON of any JSON value (the CLI's `protocol hash`).
pub fn value_hash(value: &Value) -> Result<String, CanonicalError> {
    Ok(format!("sha256:{}", canonical_sha256_hex(value)?))
}

/// [`value_hash`] of `Value::Object(map)`, without building that value (a tool result's
/// digest for the audit).
pub fn object_hash(map: &serde_json::Map<String, Value>) -> Result<String, CanonicalError> {
    let mut hashing = Hashing::new();
    write_canonical_object(map, &mut hashing)?;
    Ok(format!("sha256:{}", hashing.hex()))
}

/// Background-review `params_digest`: `hex(SHA-256(trim(tool + "\n" + canonical_json(params))))`
/// where `tool` is the model-tool name (e.g. `calendar_delete_event`).
pub fn params_digest(tool: &str, params: &Value) -> Result<String, CanonicalError> {
    check_params(params)?;
    let preimage = format!("{tool}\n{}", canonical_json(params)?);
    Ok(sha256_hex(trim_control(&preimage)))
}

/// The fields bound by a background confirmation's `binding_digest`.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    pub job_id: u64,
    pub runtime: &'a str,
    pub phone_session_id: &'a str,
    /// Model-tool name.
    pub tool: &'a str,
    /// The record's `params_digest` (64 hex characters).
    pub params_digest: &'a str,
    pub idempotency_key: &'a str,
    pub expires_at: u64,
}

/// Background-review `binding_digest`: the seven fields joined by `"\n"`, trimmed, hashed.
pub fn binding_digest(b: &Binding<'_>) -> String {
    let preimage = format!(
        "{}\n{}\n{}\n{}\n{}\n{}\n{}",
        b.job_id,
        b.runtime,
        b.phone_session_id,
        b.tool,
        b.params_digest,
        b.idempotency_key,
        b.expires_at
    );
    sha256_hex(trim_control(&preimage))
}

/// Removes leading and trailing code points ≤ U+0020 (the `trim` of `agent-jobs.md` §9.11).
fn trim_control(s: &str) -> &str {
    s.trim_matches(|c: char| u32::from(c) <= 0x20)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_buffered_hash_equals_the_hash_of_the_whole_text() {
        // Pieces small and large, across the buffer's edge, as the canonical writer makes them.
        let long = "x".repeat(3 * HASH_BUF + 7);
        let value = json!({
            "a": long, "b": [1, 2, {"c": "é😀\n"}], "d": "y".repeat(HASH_BUF - 3),
            "e": "z".repeat(HASH_BUF), "f": null
        });
        let text = canonical_json(&value).unwrap();
        assert_eq!(canonical_sha256_hex(&value).unwrap(), sha256_hex(&text));
        for n in [
            0,
            1,
            63,
            64,
            65,
            HASH_BUF - 1,
            HASH_BUF,
            HASH_BUF + 1,
            2 * HASH_BUF,
        ] {
            let v = json!({"k": "q".repeat(n)});
            assert_eq!(
                canonical_sha256_hex(&v).unwrap(),
                sha256_hex(&canonical_json(&v).unwrap()),
                "{n}"
            );
        }
    }

    #[test]
    fn trim_removes_only_low_code_points() {
        assert_eq!(trim_control("\u{1}\n x \u{20}"), "x");
        assert_eq!(trim_control("\u{a0}x"), "\u{a0}x");
    }

    #[test]
    fn params_digest_differs_from_params_hash() {
        let p = json!({"event_id": 7, "reason": "r"});
        let hash = params_hash_hex(&p).unwrap();
        let digest = params_digest("calendar_delete_event", &p).unwrap();
        assert_ne!(hash, digest);
        assert_eq!(
            digest,
            sha256_hex("calendar_delete_event\n{\"event_id\":7,\"reason\":\"r\"}")
        );
    }

    #[test]
    fn binding_digest_joins_fields_in_order() {
        let b = Binding {
            job_id: 12,
            runtime: "builtin",
            phone_session_id: "background-job:12",
            tool: "calendar_delete_event",
            params_digest: "ab",
            idempotency_key: "k",
            expires_at: 1000,
        };
        assert_eq!(
            binding_digest(&b),
            sha256_hex("12\nbuiltin\nbackground-job:12\ncalendar_delete_event\nab\nk\n1000")
        );
    }
}
