//! Ids and digests: `goal_<ulid>` ids made from the injected clock and a random part, and the
//! SHA-256 digests evidence and attempts keep.

use serde_json::Value;

/// Crockford's base32 alphabet (ULID).
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// A ULID (26 characters: 48 bits of time, 80 random bits) for `now_ms`.
pub fn ulid(now_ms: i64) -> String {
    let time = u128::try_from(now_ms.max(0)).unwrap_or(0) & ((1u128 << 48) - 1);
    let random = uuid::Uuid::new_v4().as_u128() & ((1u128 << 80) - 1);
    let mut value = (time << 80) | random;
    let mut out = [0u8; 26];
    for slot in out.iter_mut().rev() {
        *slot = ALPHABET[(value & 31) as usize];
        value >>= 5;
    }
    out.iter().map(|b| char::from(*b)).collect()
}

/// A new goal id.
pub fn goal_id(now_ms: i64) -> String {
    format!("goal_{}", ulid(now_ms))
}

/// The idempotency key of attempt `n` of `action` (§8): `goal_<id>:<action>:<n>` — the goal
/// id already starts with `goal_`.
pub fn attempt_key(goal_id: &str, action_id: &str, n: u32) -> String {
    format!("{goal_id}:{action_id}:{n}")
}

/// SHA-256 hex of a value's canonical JSON (of its plain text when it has no canonical form).
pub fn digest(value: &Value) -> String {
    openphone_protocol::digest::canonical_sha256_hex(value)
        .unwrap_or_else(|_| openphone_protocol::digest::sha256_hex(&value.to_string()))
}

/// SHA-256 hex of a text.
pub fn digest_text(text: &str) -> String {
    openphone_protocol::digest::sha256_hex(text)
}
