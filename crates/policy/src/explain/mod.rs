//! "Why was this denied?": a [`Decision`] turned into an [`Explanation`] — the decision and
//! its source, every layer's verdict in layer order, and what the user could change to get a
//! different outcome.
//!
//! Pure, like the rest of the crate: the explanation is a function of the same
//! [`PolicyInput`] the decision was made from and of the decision itself. The reasons are the
//! verdicts' own; the changes are data (kind, layer, the configuration setting and value they
//! concern, the exact command when there is one) with a description for a person.
//!
//! Which changes are listed follows the merge rule, so each one can actually change the
//! outcome:
//!
//! - **deny**: one or more changes for every denying layer (all of them must be lifted);
//! - **confirm / park**: the autonomy change (L4) only when nothing else asks — not under the
//!   risk floor, not in a background run; the risk floor (L5) says that nothing lowers it; a
//!   park (L6) names the review; below the floor a standing approval (L7) with its exact
//!   command, and, in a phone session, the session grant an approval can give;
//! - **allow**: nothing.

use openphone_protocol::endpoint::{
    ExplainSource, Explanation, LayerExplanation, PolicyChange, PolicyChangeKind, PolicyLayer,
    PolicyOutcome,
};
use serde_json::{Map, Value};

use crate::autonomy::Autonomy;
use crate::decision::{Decision, Requirement};
use crate::input::PolicyInput;
use crate::verdict::{DecisionSource, Layer, VerdictKind};
use deny::denial_changes;

mod deny;
#[cfg(test)]
mod tests;

/// Explains `decision`, which was made from `input`.
pub fn explain(input: &PolicyInput<'_>, decision: &Decision) -> Explanation {
    let (outcome, one_shot) = match &decision.requirement {
        Requirement::Allow => (PolicyOutcome::Allow, false),
        Requirement::Confirm {
            one_shot,
            park_for_review: true,
            ..
        } => (PolicyOutcome::Park, *one_shot),
        Requirement::Confirm {
            one_shot,
            park_for_review: false,
            ..
        } => (PolicyOutcome::Confirm, *one_shot),
        Requirement::Deny { .. } => (PolicyOutcome::Deny, false),
    };
    let layers = decision
        .proof
        .iter()
        .map(|v| LayerExplanation {
            layer: wire_layer(v.layer),
            verdict: wire_outcome(v.kind),
            reason: v.reason.to_string(),
            code: v.code,
        })
        .collect();
    Explanation {
        tool: input.command.name.clone(),
        runtime: input.caller.runtime.clone(),
        effective_autonomy: decision.effective_autonomy,
        decision: outcome,
        one_shot,
        source: source(&decision.source),
        layers,
        changes: changes(input, decision),
    }
}

/// The wire form of a layer.
pub fn wire_layer(layer: Layer) -> PolicyLayer {
    match layer {
        Layer::RuntimeAuthorisation => PolicyLayer::RuntimeAuthorisation,
        Layer::ToolPolicy => PolicyLayer::ToolPolicy,
        Layer::PlatformSupport => PolicyLayer::PlatformSupport,
        Layer::Autonomy => PolicyLayer::Autonomy,
        Layer::RiskFloor => PolicyLayer::RiskFloor,
        Layer::BackgroundContext => PolicyLayer::BackgroundContext,
        Layer::StandingApprovals => PolicyLayer::StandingApprovals,
    }
}

/// The wire form of a verdict kind.
pub fn wire_outcome(kind: VerdictKind) -> PolicyOutcome {
    match kind {
        VerdictKind::Allow => PolicyOutcome::Allow,
        VerdictKind::Confirm => PolicyOutcome::Confirm,
        VerdictKind::Park => PolicyOutcome::Park,
        VerdictKind::Deny => PolicyOutcome::Deny,
    }
}

/// The decision source exactly as it serialises (so a new kind passes through unchanged).
fn source(source: &DecisionSource) -> ExplainSource {
    let mut fields = match serde_json::to_value(source) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let kind = match fields.remove("kind") {
        Some(Value::String(kind)) => kind,
        _ => source.as_str().to_owned(),
    };
    ExplainSource { kind, fields }
}

fn change(kind: PolicyChangeKind, layer: Layer, description: String) -> PolicyChange {
    PolicyChange {
        kind,
        layer: wire_layer(layer),
        description,
        setting: None,
        value: None,
        command: None,
    }
}

fn with_setting(mut c: PolicyChange, setting: String, value: impl Into<String>) -> PolicyChange {
    c.setting = Some(setting);
    c.value = Some(value.into());
    c
}

fn changes(input: &PolicyInput<'_>, decision: &Decision) -> Vec<PolicyChange> {
    let objecting = |kinds: &[VerdictKind]| {
        decision
            .proof
            .iter()
            .filter(|v| kinds.contains(&v.kind))
            .map(|v| v.layer)
            .collect::<Vec<_>>()
    };
    match &decision.requirement {
        Requirement::Allow => Vec::new(),
        Requirement::Deny { .. } => objecting(&[VerdictKind::Deny])
            .into_iter()
            .flat_map(|layer| denial_changes(input, layer))
            .collect(),
        Requirement::Confirm {
            one_shot,
            park_for_review,
            ..
        } => {
            let mut out = Vec::new();
            for layer in objecting(&[VerdictKind::Confirm, VerdictKind::Park]) {
                match layer {
                    // Trusting the runtime more helps only when nothing else asks.
                    Layer::Autonomy if !*one_shot && !*park_for_review => {
                        out.push(autonomy_confirm_change(input));
                    }
                    Layer::RiskFloor => out.push(risk_floor_change(input)),
                    Layer::BackgroundContext => out.push(change(
                        PolicyChangeKind::Background,
                        layer,
                        format!(
                            "inside a background run `{}` is parked for your review; it runs \
                             once you approve the review",
                            input.command.name
                        ),
                    )),
                    // These layers never ask: L1–L3 allow or deny, and L7 only lowers a
                    // confirmation (its change is listed below).
                    Layer::Autonomy
                    | Layer::RuntimeAuthorisation
                    | Layer::ToolPolicy
                    | Layer::PlatformSupport
                    | Layer::StandingApprovals => {}
                }
            }
            if !*one_shot {
                out.extend(standing_approval_changes(input, *park_for_review));
            }
            out
        }
    }
}

/// L4 confirm (nothing else asking): `trusted_actions` when the runtime's ceiling allows it,
/// else the ceiling first.
fn autonomy_confirm_change(input: &PolicyInput<'_>) -> PolicyChange {
    let layer = Layer::Autonomy;
    let caller = input.caller;
    let trusted = Autonomy::TrustedActions.as_str();
    if caller.is_operator() || caller.max_autonomy == Autonomy::TrustedActions {
        let mut c = change(
            PolicyChangeKind::Autonomy,
            layer,
            format!(
                "send the request with autonomy `{trusted}` (or make it in a phone session \
                 opened in `{trusted}`) to run it without asking"
            ),
        );
        c.value = Some(trusted.to_owned());
        c
    } else {
        let runtime = caller.runtime.as_str();
        with_setting(
            change(
                PolicyChangeKind::Autonomy,
                layer,
                format!(
                    "runtime `{runtime}` may not go beyond `{}`: raise its `max_autonomy` to \
                     `{trusted}` in the config (read at the next start), then use `{trusted}` \
                     for the request or its phone session",
                    caller.max_autonomy
                ),
            ),
            format!("runtimes.{runtime}.max_autonomy"),
            trusted,
        )
    }
}

fn risk_floor_change(input: &PolicyInput<'_>) -> PolicyChange {
    change(
        PolicyChangeKind::RiskFloor,
        Layer::RiskFloor,
        format!(
            "`{}` (risk {}) is on the risk floor: it asks every time, one request at a time, in \
             every autonomy mode; nothing lowers it — no setting, standing approval or session \
             grant",
            input.command.name, input.command.risk
        ),
    )
}

/// L7, below the risk floor: a standing approval (for a background run, one marked for
/// background work), and in an interactive phone session the session grant an approval can
/// give.
fn standing_approval_changes(input: &PolicyInput<'_>, park: bool) -> Vec<PolicyChange> {
    let layer = Layer::StandingApprovals;
    let (tool, runtime) = (input.command.name.as_str(), input.caller.runtime.as_str());
    let mut out = Vec::new();
    let mut grant = format!("openphone approvals grant --runtime {runtime} --tool {tool}");
    let description = if park {
        grant.push_str(" --background");
        format!(
            "a standing approval marked for background work lets `{runtime}` run `{tool}` in \
             background runs without a review"
        )
    } else {
        format!("a standing approval lets `{runtime}` run `{tool}` without asking")
    };
    let mut c = change(PolicyChangeKind::StandingApproval, layer, description);
    c.value = Some(tool.to_owned());
    c.command = Some(grant);
    out.push(c);
    if let (false, Some(session)) = (park, input.phone_session_id) {
        out.push(change(
            PolicyChangeKind::StandingApproval,
            layer,
            format!(
                "approve its confirmation with `openphone confirmations approve \
                 <confirmation_id> --for-session`: later `{tool}` requests of `{runtime}` (on the \
                 same target, when the request names one) then run without asking for the rest \
                 of phone session {session}"
            ),
        ));
    }
    out
}
