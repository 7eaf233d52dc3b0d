//! The three canonical autonomy modes and their lenient normalisation
//! (`runtime-protocol.md` §9). How a request's mode combines with its session's and its
//! runtime's ceiling is policy (`openphone_policy::effective_autonomy`), not wire.

crate::wire_enum!(
    /// How much a runtime may do without asking. Only canonical values are ever emitted or
    /// stored; legacy synonyms are normalised by [`Autonomy::normalize`] first.
    Autonomy {
        /// Reads run; every mutating command is denied.
        ObserveOnly = "observe_only",
        /// Reads run; every mutating command asks (the default).
        AskBeforeAction = "ask_before_action",
        /// Reads and low/medium-risk mutating commands run; the risk floor still asks.
        TrustedActions = "trusted_actions",
    }
);

impl Autonomy {
    /// The mode used when nothing else decides (no request value, no phone session).
    pub const DEFAULT: Autonomy = Autonomy::AskBeforeAction;

    /// Lenient normalisation of an incoming value (trimmed, lower-cased):
    ///
    /// | input | result |
    /// |---|---|
    /// | empty or only whitespace | `None` — inherit |
    /// | `observe_only`, `read_only`, `dry_run` | `ObserveOnly` |
    /// | `ask_before_action` | `AskBeforeAction` |
    /// | `trusted_actions`, `yolo` | `TrustedActions` |
    /// | anything else | `AskBeforeAction` (fail safe) |
    pub fn normalize(raw: &str) -> Option<Autonomy> {
        let value = raw.trim().to_lowercase();
        match value.as_str() {
            "" => None,
            "observe_only" | "read_only" | "dry_run" => Some(Autonomy::ObserveOnly),
            "ask_before_action" => Some(Autonomy::AskBeforeAction),
            "trusted_actions" | "yolo" => Some(Autonomy::TrustedActions),
            _ => Some(Autonomy::AskBeforeAction),
        }
    }

    /// Strict parse of a canonical value only (for stored records and configuration); the
    /// same as [`Autonomy::parse`].
    pub fn parse_canonical(raw: &str) -> Option<Autonomy> {
        Autonomy::parse(raw)
    }

    /// Strictness rank: higher is stricter (`observe_only` > `ask_before_action` >
    /// `trusted_actions`).
    pub fn strictness(self) -> u8 {
        match self {
            Autonomy::ObserveOnly => 2,
            Autonomy::AskBeforeAction => 1,
            Autonomy::TrustedActions => 0,
        }
    }

    /// The stricter of two modes.
    pub fn stricter(self, other: Autonomy) -> Autonomy {
        if other.strictness() > self.strictness() {
            other
        } else {
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_strings_are_the_canonical_names() {
        let names: Vec<&str> = Autonomy::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(
            names,
            ["observe_only", "ask_before_action", "trusted_actions"]
        );
        for a in Autonomy::ALL {
            assert_eq!(Autonomy::parse_canonical(a.as_str()), Some(a));
            let back: Autonomy = serde_json::from_str(&format!("\"{a}\"")).unwrap();
            assert_eq!(back, a);
        }
        assert!(serde_json::from_str::<Autonomy>("\"yolo\"").is_err());
    }
}
