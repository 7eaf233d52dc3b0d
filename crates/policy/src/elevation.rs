//! Elevated mode (layer 2 of OpenClaw's stack in seed 002 §2, here part of layer 4): a
//! user-granted, time-limited raise of one runtime's autonomy ceiling.
//!
//! The configured `max_autonomy` is the ceiling a runtime always has; an [`Elevation`] the user
//! granted (`openphone elevate <runtime> --to trusted_actions --for 10m`) lifts it to `to`
//! until `expires_at_ms` — never lower than the configuration, and only while it lasts (the
//! policy compares it with `now_ms` itself, so an expired grant never counts, whatever the
//! daemon's sweep has done yet). The no-escalation rule still holds inside the window: a
//! request or a session in a stricter mode stays in it. The risk floor (layer 5) and
//! background parking (layer 6) are separate layers, so an elevation never lowers them. Which
//! levels the user may grant is the daemon's check (the configuration's cap), not the policy's.

use serde::{Deserialize, Serialize};

use crate::autonomy::Autonomy;

/// One runtime's elevation as the policy reads it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Elevation {
    /// The grant's id (named in the layer-4 verdict, so the audit shows which grant a call
    /// ran under).
    pub grant_id: String,
    /// The ceiling while the grant lasts.
    pub to: Autonomy,
    /// The grant ends when `now_ms >= expires_at_ms`.
    pub expires_at_ms: u64,
}

impl Elevation {
    /// Whether the grant still holds at `now_ms`.
    pub fn active(&self, now_ms: u64) -> bool {
        now_ms < self.expires_at_ms
    }

    /// The ceiling of a runtime configured with `configured` at `now_ms`: the looser of the
    /// two while the grant holds, the configured one otherwise.
    pub fn ceiling(elevation: Option<&Elevation>, configured: Autonomy, now_ms: u64) -> Autonomy {
        match elevation {
            Some(e) if e.active(now_ms) && e.to.strictness() < configured.strictness() => e.to,
            Some(_) | None => configured,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_elevation_lifts_the_ceiling_only_while_it_lasts_and_never_lowers_it() {
        let e = Elevation {
            grant_id: "elev-1".into(),
            to: Autonomy::TrustedActions,
            expires_at_ms: 100,
        };
        let ask = Autonomy::AskBeforeAction;
        assert_eq!(
            Elevation::ceiling(Some(&e), ask, 99),
            Autonomy::TrustedActions
        );
        assert_eq!(Elevation::ceiling(Some(&e), ask, 100), ask);
        assert_eq!(Elevation::ceiling(None, ask, 0), ask);
        let lower = Elevation {
            to: Autonomy::ObserveOnly,
            ..e
        };
        assert_eq!(Elevation::ceiling(Some(&lower), ask, 0), ask);
    }
}
