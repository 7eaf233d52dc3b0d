//! The body digest of an audit record (form 2 of the chain, both stores):
//! `sha256_hex(canonical_json(body))`, the body being the record as [`AuditEntry`] serialises
//! it, without `policy_proof`, with `policy_proof_sha256` (the proof's digest, or `null`).
//!
//! Written straight from the fields into the buffered SHA-256, members in canonical order
//! (the order is spelled out below, checked against serde's keys and against the
//! `serde_json::Value` path by the tests), instead of building a `Value` tree of the record,
//! editing it and writing that: the tree cost more than anything else in an append.

use std::fmt::Write;

use super::AuditEntry;
use crate::canonical::{CanonicalError, format_js_number, write_string};
use crate::digest::Hashing;
use crate::limits::MAX_SAFE_INTEGER;

impl AuditEntry {
    /// `sha256_hex(canonical_json(body))`: the body is this record as it serialises, without
    /// `policy_proof`, plus `policy_proof_sha256` (the hex SHA-256 of the proof's canonical
    /// JSON, or `None` for `null`). Byte for byte the digest of that JSON value, computed
    /// without building it.
    ///
    /// Fails only where canonical JSON would (it cannot for these fields: every number is an
    /// integer).
    pub fn body_digest(&self, policy_proof_sha256: Option<&str>) -> Result<String, CanonicalError> {
        let mut hashing = Hashing::new();
        self.write_body(policy_proof_sha256, &mut hashing)?;
        Ok(hashing.hex())
    }

    /// Writes the body's canonical JSON into `out`. The members are in code-point order of
    /// their keys; a key added to [`AuditEntry`] must be added here in its place (the tests
    /// fail until it is).
    pub(crate) fn write_body(
        &self,
        policy_proof_sha256: Option<&str>,
        out: &mut impl Write,
    ) -> Result<(), CanonicalError> {
        let mut b = Body { out, first: true };
        b.int("at_ms", self.at_ms)?;
        b.str("audit_id", &self.audit_id);
        b.opt_str("autonomy", self.autonomy.map(|a| a.as_str()));
        b.key("caller");
        let c = &self.caller;
        let _ = b.out.write_str("{\"principal\":");
        write_string(&c.principal, b.out);
        let _ = b.out.write_str(",\"runtime\":");
        write_string(&c.runtime, b.out);
        let _ = b.out.write_str(",\"transport\":");
        write_string(&c.transport, b.out);
        let _ = b.out.write_char('}');
        b.opt_str("confirmation", self.confirmation.map(|c| c.as_str()));
        b.opt_str("confirmation_id", self.confirmation_id.as_deref());
        b.opt_str("decision", self.decision.map(|d| d.as_str()));
        // `skip_serializing_if = "Option::is_none"`: absent, not null.
        if let Some(device_id) = &self.device_id {
            b.str("device_id", device_id);
        }
        b.opt_int("duration_ms", self.duration_ms)?;
        b.opt_str("error_code", self.error_code.as_deref());
        b.opt_str("idempotency_key", self.idempotency_key.as_deref());
        b.str("kind", self.kind.as_str());
        b.key("mutating");
        let _ = b.out.write_str(match self.mutating {
            None => "null",
            Some(true) => "true",
            Some(false) => "false",
        });
        b.opt_str("params_hash", self.params_hash.as_deref());
        b.opt_str("phone_session_id", self.phone_session_id.as_deref());
        b.opt_str("policy_proof_sha256", policy_proof_sha256);
        b.opt_str("proof_digest", self.proof_digest.as_deref());
        b.str("request_id", &self.request_id);
        b.opt_str("result_digest", self.result_digest.as_deref());
        b.opt_str("risk", self.risk.map(|r| r.as_str()));
        b.str("runtime", &self.runtime);
        b.opt_str("runtime_session_id", self.runtime_session_id.as_deref());
        b.opt_str("status", self.status.map(|s| s.as_str()));
        b.opt_str("tool", self.tool.as_deref());
        let _ = b.out.write_char('}');
        Ok(())
    }
}

/// The members of one canonical object, written in the order they are given (the caller's
/// order must be the keys' code-point order). Keys are plain ASCII names: written as they are.
struct Body<'w, W: Write> {
    out: &'w mut W,
    first: bool,
}

impl<W: Write> Body<'_, W> {
    fn key(&mut self, name: &str) {
        let _ = self.out.write_str(if self.first { "{\"" } else { ",\"" });
        self.first = false;
        let _ = self.out.write_str(name);
        let _ = self.out.write_str("\":");
    }

    fn str(&mut self, name: &str, value: &str) {
        self.key(name);
        write_string(value, self.out);
    }

    fn opt_str(&mut self, name: &str, value: Option<&str>) {
        match value {
            Some(value) => self.str(name, value),
            None => {
                self.key(name);
                let _ = self.out.write_str("null");
            }
        }
    }

    fn int(&mut self, name: &'static str, value: i64) -> Result<(), CanonicalError> {
        self.key(name);
        write_int(name, value, self.out)
    }

    fn opt_int(&mut self, name: &'static str, value: Option<i64>) -> Result<(), CanonicalError> {
        match value {
            Some(value) => self.int(name, value),
            None => {
                self.key(name);
                let _ = self.out.write_str("null");
                Ok(())
            }
        }
    }
}

/// An integer as canonical JSON writes a JSON number: itself within ±(2^53 − 1), beyond that
/// the double it denotes, as JavaScript writes it.
fn write_int(name: &str, value: i64, out: &mut impl Write) -> Result<(), CanonicalError> {
    if value.unsigned_abs() <= MAX_SAFE_INTEGER as u64 {
        let _ = write!(out, "{value}");
        return Ok(());
    }
    // JSON numbers beyond 2^53 are doubles.
    let text = format_js_number(value as f64).ok_or_else(|| CanonicalError::NonFinite {
        path: format!("$.{name}"),
    })?;
    let _ = out.write_str(&text);
    Ok(())
}

#[cfg(test)]
mod tests;
