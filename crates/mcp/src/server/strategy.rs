//! How a call that needs a confirmation waits for it: a pure choice from what the client
//! negotiated and what the user configured, so every branch is a table row in the tests.
//!
//! The user's trust comes first: only a confirming host (`trust_client_confirmation`) may
//! decide, and never at the risk floor (`confirmation: always`). Then the protocol era picks the
//! host's way of asking — `input_required` with a sealed `requestState` in the 2026-07-28 era,
//! `elicitation/create` mid-call in the handshake era — provided the client takes form-mode
//! elicitations. Everything else waits locally for an operator, offering a URL-mode elicitation
//! to the approval page when a handshake-era client takes URL mode and the daemon has one.

/// The protocol era a request belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// Revisions before 2026-07-28: an `initialize` handshake, server-to-client requests
    /// mid-call.
    Handshake,
    /// 2026-07-28 and later: every request stands alone; a call asks for input by returning
    /// `input_required`.
    Stateless,
}

/// The elicitation modes the client declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ElicitationModes {
    /// Form mode (also assumed when the client declared elicitation without naming a mode).
    pub(crate) form: bool,
    /// URL mode.
    pub(crate) url: bool,
}

/// Everything the choice depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StrategyInputs {
    /// The era of the request.
    pub(crate) era: Era,
    /// What the client can be asked.
    pub(crate) elicitation: ElicitationModes,
    /// The runtime is a confirming host (`trust_client_confirmation`).
    pub(crate) confirming_host: bool,
    /// The command's confirmation is `always`: only an operator may decide.
    pub(crate) risk_floor: bool,
    /// The daemon has a `requestState` key.
    pub(crate) can_seal: bool,
    /// The daemon serves an approval page.
    pub(crate) approval_page: bool,
}

/// How the call waits for the confirmation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// Wait inline for an operator (phone, CLI, dashboard), with progress; `approval_url`
    /// also offers the approval page through a URL-mode elicitation.
    Local {
        /// Offer the approval page.
        approval_url: bool,
    },
    /// Ask the confirming host through `elicitation/create` while an operator may still
    /// decide; the first decision wins.
    ElicitForm,
    /// Answer `input_required` with a sealed `requestState`; the host calls again with the
    /// user's answer.
    InputRequired,
}

/// The strategy for `inputs`.
pub(crate) fn choose(inputs: &StrategyInputs) -> Strategy {
    let host_may_decide = inputs.confirming_host && !inputs.risk_floor;
    match inputs.era {
        Era::Stateless => {
            if host_may_decide && inputs.elicitation.form && inputs.can_seal {
                Strategy::InputRequired
            } else {
                // URL-mode elicitation is a mid-call request: none in this era.
                Strategy::Local {
                    approval_url: false,
                }
            }
        }
        Era::Handshake => {
            if host_may_decide && inputs.elicitation.form {
                Strategy::ElicitForm
            } else {
                Strategy::Local {
                    approval_url: inputs.approval_page && inputs.elicitation.url,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: ElicitationModes = ElicitationModes {
        form: true,
        url: true,
    };
    const FORM: ElicitationModes = ElicitationModes {
        form: true,
        url: false,
    };
    const URL: ElicitationModes = ElicitationModes {
        form: false,
        url: true,
    };
    const NONE: ElicitationModes = ElicitationModes {
        form: false,
        url: false,
    };

    /// A trusted host, below the floor, with everything the daemon can offer.
    fn trusted(era: Era, elicitation: ElicitationModes) -> StrategyInputs {
        StrategyInputs {
            era,
            elicitation,
            confirming_host: true,
            risk_floor: false,
            can_seal: true,
            approval_page: true,
        }
    }

    const LOCAL: Strategy = Strategy::Local {
        approval_url: false,
    };
    const LOCAL_WITH_URL: Strategy = Strategy::Local { approval_url: true };

    #[test]
    fn a_trusted_modern_host_with_form_mode_gets_input_required() {
        assert_eq!(
            choose(&trusted(Era::Stateless, FORM)),
            Strategy::InputRequired
        );
        assert_eq!(
            choose(&trusted(Era::Stateless, BOTH)),
            Strategy::InputRequired
        );
    }

    #[test]
    fn a_modern_host_without_a_seal_or_form_mode_waits_locally_without_a_url() {
        let no_seal = StrategyInputs {
            can_seal: false,
            ..trusted(Era::Stateless, FORM)
        };
        assert_eq!(choose(&no_seal), LOCAL);
        assert_eq!(choose(&trusted(Era::Stateless, URL)), LOCAL);
        assert_eq!(choose(&trusted(Era::Stateless, NONE)), LOCAL);
    }

    #[test]
    fn a_trusted_handshake_host_with_form_mode_is_asked_mid_call() {
        assert_eq!(choose(&trusted(Era::Handshake, FORM)), Strategy::ElicitForm);
        assert_eq!(choose(&trusted(Era::Handshake, BOTH)), Strategy::ElicitForm);
        // The seal plays no part in the handshake era.
        let no_seal = StrategyInputs {
            can_seal: false,
            ..trusted(Era::Handshake, FORM)
        };
        assert_eq!(choose(&no_seal), Strategy::ElicitForm);
    }

    #[test]
    fn a_handshake_host_with_url_mode_only_is_offered_the_approval_page() {
        assert_eq!(choose(&trusted(Era::Handshake, URL)), LOCAL_WITH_URL);
        let no_page = StrategyInputs {
            approval_page: false,
            ..trusted(Era::Handshake, URL)
        };
        assert_eq!(choose(&no_page), LOCAL);
        assert_eq!(choose(&trusted(Era::Handshake, NONE)), LOCAL);
    }

    #[test]
    fn the_risk_floor_is_never_the_hosts_to_decide() {
        for era in [Era::Handshake, Era::Stateless] {
            for modes in [BOTH, FORM, URL, NONE] {
                let floor = StrategyInputs {
                    risk_floor: true,
                    ..trusted(era, modes)
                };
                let strategy = choose(&floor);
                assert!(
                    matches!(strategy, Strategy::Local { .. }),
                    "{era:?} {modes:?}: {strategy:?}"
                );
            }
        }
    }

    #[test]
    fn an_untrusted_host_always_waits_locally() {
        for (era, modes, expected) in [
            (Era::Handshake, BOTH, LOCAL_WITH_URL),
            (Era::Handshake, FORM, LOCAL),
            (Era::Handshake, URL, LOCAL_WITH_URL),
            (Era::Handshake, NONE, LOCAL),
            (Era::Stateless, BOTH, LOCAL),
            (Era::Stateless, FORM, LOCAL),
            (Era::Stateless, URL, LOCAL),
            (Era::Stateless, NONE, LOCAL),
        ] {
            let untrusted = StrategyInputs {
                confirming_host: false,
                ..trusted(era, modes)
            };
            assert_eq!(choose(&untrusted), expected, "{era:?} {modes:?}");
        }
    }

    #[test]
    fn the_approval_page_is_offered_at_the_risk_floor_too() {
        let floor = StrategyInputs {
            risk_floor: true,
            ..trusted(Era::Handshake, BOTH)
        };
        assert_eq!(choose(&floor), LOCAL_WITH_URL);
    }
}
