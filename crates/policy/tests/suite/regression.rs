//! Regression tests named after the bugs they pin.

use openphone_policy::Autonomy::{
    AskBeforeAction as Ask, ObserveOnly as Observe, TrustedActions as Trusted,
};

use super::support::*;

/// Issue 11, item 4: an `observe_only` runtime routed into a session the user opened in
/// `trusted_actions` ran `memory.save`; the session lifted it above its ceiling.
#[test]
fn an_observe_only_runtime_in_a_trusted_session_cannot_mutate() {
    for request in [None, Some("trusted_actions"), Some("yolo")] {
        let mut case = Case::new("openphone.memory.save")
            .ceiling(Observe)
            .session(Some(Trusted));
        case.request = request.map(str::to_owned);
        let d = case.decide();
        assert_eq!(d.effective_autonomy, Observe, "request {request:?}");
        assert_eq!(view(&d.requirement), OBSERVE_DENY, "request {request:?}");
    }
    // Reads still run.
    let d = Case::new("openphone.memory.search")
        .ceiling(Observe)
        .session(Some(Trusted))
        .decide();
    assert_eq!(view(&d.requirement), Expect::Allow);
}

/// Issue 11, item 4: the default ceiling (`ask_before_action`) caps a trusted session too, so
/// a runtime runs mutations without asking only when the user raised its ceiling.
#[test]
fn a_trusted_session_runs_at_most_at_the_runtime_ceiling() {
    let capped = Case::new("openphone.ui.tap")
        .ceiling(Ask)
        .session(Some(Trusted))
        .decide();
    assert_eq!(capped.effective_autonomy, Ask);
    assert_eq!(view(&capped.requirement), CONFIRM);
    let raised = Case::new("openphone.ui.tap")
        .ceiling(Trusted)
        .session(Some(Trusted))
        .decide();
    assert_eq!(raised.effective_autonomy, Trusted);
    assert_eq!(view(&raised.requirement), Expect::Allow);
}
