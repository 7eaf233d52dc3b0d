//! The `requestState` seal of the 2026-07-28 confirmation round (`mcp.md` §7.4): what a
//! sealed state refers to, and the HMAC that keeps a client from forging or altering it.

use serde::{Deserialize, Serialize};

/// What a sealed `requestState` refers to: a confirmation record, never the action itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct SealedConfirmation {
    /// The confirmation the host is asked to decide.
    pub(crate) confirmation_id: String,
    /// The canonical command name of the call that created it.
    pub(crate) tool: String,
    /// The digest of that call's arguments.
    pub(crate) args_digest: String,
    /// The runtime that made the call.
    pub(crate) principal: String,
    /// When the state stops being accepted (the confirmation's expiry, bridge clock).
    pub(crate) expires_at_ms: i64,
}

/// Seals and opens `requestState` values (HMAC, rmcp's `RequestStateCodec`).
pub struct StateSeal(rmcp::model::RequestStateCodec);

impl std::fmt::Debug for StateSeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateSeal(<key>)")
    }
}

impl StateSeal {
    /// A seal keyed by `key` (at least 32 bytes).
    pub fn new(key: &[u8]) -> Result<StateSeal, String> {
        rmcp::model::RequestStateCodec::try_new(key.to_vec())
            .map(StateSeal)
            .map_err(|e| e.to_string())
    }

    /// The sealed form of `value`; `None` if it cannot be encoded.
    pub(crate) fn seal(&self, value: &SealedConfirmation) -> Option<String> {
        self.0.seal_json(value).ok()
    }

    /// The value inside `sealed`; `None` if it was not sealed under this key or was altered.
    pub(crate) fn open(&self, sealed: &str) -> Option<SealedConfirmation> {
        self.0.open_json(sealed).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SealedConfirmation {
        SealedConfirmation {
            confirmation_id: "c1".to_owned(),
            tool: "openphone.ui.tap".to_owned(),
            args_digest: "d".to_owned(),
            principal: "mcp".to_owned(),
            expires_at_ms: 42,
        }
    }

    #[test]
    fn a_sealed_state_opens_under_its_key_only() {
        let seal = StateSeal::new(&[7; 32]).unwrap();
        let other = StateSeal::new(&[8; 32]).unwrap();
        let sealed = seal.seal(&sample()).unwrap();
        assert_eq!(seal.open(&sealed), Some(sample()));
        assert_eq!(other.open(&sealed), None);
        assert_eq!(seal.open(&format!("{sealed}x")), None);
    }

    #[test]
    fn a_short_key_is_refused() {
        assert!(StateSeal::new(&[1; 8]).is_err());
    }
}
