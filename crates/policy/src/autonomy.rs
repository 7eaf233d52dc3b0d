//! Autonomy modes, their lenient normalisation and the no-escalation rule
//! (`runtime-protocol.md` §9).

use std::fmt;

use serde::{Deserialize, Serialize};

/// How much a runtime may do without asking. Only canonical values are ever emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Autonomy {
    /// Reads run; every mutating command is denied.
    ObserveOnly,
    /// Reads run; every mutating command asks (the default).
    AskBeforeAction,
    /// Reads and low/medium-risk mutating commands run; the risk floor still asks.
    TrustedActions,
}

impl Autonomy {
    /// Every mode, from the strictest to the most permissive.
    pub const ALL: [Autonomy; 3] = [
        Autonomy::ObserveOnly,
        Autonomy::AskBeforeAction,
        Autonomy::TrustedActions,
    ];

    /// The mode used when nothing else decides (no request value, no phone session).
    pub const DEFAULT: Autonomy = Autonomy::AskBeforeAction;

    /// The canonical wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Autonomy::ObserveOnly => "observe_only",
            Autonomy::AskBeforeAction => "ask_before_action",
            Autonomy::TrustedActions => "trusted_actions",
        }
    }

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

    /// Strict parse of a canonical value only (for stored records).
    pub fn parse_canonical(raw: &str) -> Option<Autonomy> {
        Autonomy::ALL.into_iter().find(|a| a.as_str() == raw)
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

impl fmt::Display for Autonomy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The effective autonomy of one tool request (`runtime-protocol.md` §9).
///
/// - `request` is the raw value the request carried (normalised here; `None` or empty means
///   "inherit").
/// - `session` is the phone session's autonomy, when a phone session is known.
/// - `caller_ceiling` is the runtime's configured `max_autonomy` (`ask_before_action` unless
///   the user raised it).
/// - `is_operator`: the operator credential (the user's own CLI or dashboard) has no ceiling.
///
/// Rules, for a runtime:
///
/// - request and session: the stricter of the two (a request can only make things stricter);
/// - request, no session: the stricter of the request and the ceiling;
/// - no request, session: the session's mode (set by the user through the attention request);
/// - neither: `ask_before_action`, capped by the ceiling (a ceiling of `observe_only` wins).
///
/// For the operator: the request's value when given, else the session's, else
/// `ask_before_action`.
pub fn effective_autonomy(
    request: Option<&str>,
    session: Option<Autonomy>,
    caller_ceiling: Autonomy,
    is_operator: bool,
) -> Autonomy {
    let requested = request.and_then(Autonomy::normalize);
    if is_operator {
        return requested.or(session).unwrap_or(Autonomy::DEFAULT);
    }
    match (requested, session) {
        (Some(r), Some(s)) => r.stricter(s),
        (Some(r), None) => r.stricter(caller_ceiling),
        (None, Some(s)) => s,
        (None, None) => Autonomy::DEFAULT.stricter(caller_ceiling),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_strings_round_trip() {
        for a in Autonomy::ALL {
            assert_eq!(Autonomy::parse_canonical(a.as_str()), Some(a));
            assert_eq!(Autonomy::normalize(a.as_str()), Some(a));
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(json, format!("\"{}\"", a.as_str()));
        }
        assert_eq!(Autonomy::parse_canonical("yolo"), None);
    }

    #[test]
    fn stricter_is_symmetric() {
        for a in Autonomy::ALL {
            for b in Autonomy::ALL {
                assert_eq!(a.stricter(b), b.stricter(a));
                let s = a.stricter(b);
                assert!(s.strictness() >= a.strictness() && s.strictness() >= b.strictness());
            }
        }
    }

    #[test]
    fn whitespace_is_inherit() {
        assert_eq!(Autonomy::normalize("  \t"), None);
        assert_eq!(
            Autonomy::normalize(" YOLO "),
            Some(Autonomy::TrustedActions)
        );
    }
}
