//! The no-escalation rule for autonomy modes (`runtime-protocol.md` §9). The modes themselves
//! and their lenient normalisation are wire values, defined once in `openphone_protocol` and
//! re-exported here.

pub use openphone_protocol::Autonomy;

/// The effective autonomy of one tool request (`runtime-protocol.md` §9).
///
/// - `request` is the raw value the request carried (normalised here; `None` or empty means
///   "inherit").
/// - `session` is the phone session's autonomy, when a phone session is known.
/// - `caller_ceiling` is the runtime's configured `max_autonomy` (`ask_before_action` unless
///   the user raised it).
/// - `is_operator`: the operator credential (the user's own CLI or dashboard) has no ceiling.
///
/// For a runtime the result is the strictest of the three — `min(request, session,
/// ceiling)`, where a missing request or session does not count and neither means
/// `ask_before_action`:
///
/// - a request can only make things stricter than its session;
/// - a session can only make things stricter than the runtime's ceiling: a session the user
///   opened in `trusted_actions` for a runtime whose ceiling is `observe_only` (or the default
///   `ask_before_action`) runs in the ceiling's mode (issue 11, item 4);
/// - neither request nor session: `ask_before_action`, capped by the ceiling.
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
    let chosen = match (requested, session) {
        (Some(r), Some(s)) => r.stricter(s),
        (Some(r), None) => r,
        (None, Some(s)) => s,
        (None, None) => Autonomy::DEFAULT,
    };
    chosen.stricter(caller_ceiling)
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
