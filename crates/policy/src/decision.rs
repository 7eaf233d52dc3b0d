//! Running the stack, merging the verdicts, and the digests stored with a decision.

use openphone_protocol::digest::sha256_hex;
use openphone_protocol::{Command, ErrorCode, params_hash_hex};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::autonomy::Autonomy;
use crate::input::{BackgroundRun, Caller, Context, PolicyInput, ToolList, ToolPolicy};
use crate::verdict::{DecisionSource, Layer, PolicyDetail, Verdict, VerdictKind};

/// Version of the inputs-digest preimage layout; bump when the object below changes.
pub const INPUTS_DIGEST_VERSION: u32 = 2;

/// What the bridge must do with the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Requirement {
    /// Execute.
    Allow,
    /// Ask the user first. `one_shot`: the risk floor — the answer covers this one request and
    /// no session grant or standing approval satisfies it. `park_for_review`: background
    /// context — answer `background.confirmation_required` and let the job or goal layer own the
    /// request, instead of creating an interactive confirmation.
    Confirm {
        one_shot: bool,
        park_for_review: bool,
        reason: String,
    },
    /// Refuse at once with status `denied`.
    Deny {
        code: ErrorCode,
        policy_detail: PolicyDetail,
        reason: String,
    },
}

impl Requirement {
    /// The tool-result error code this requirement answers with, if it does not execute:
    /// the denial code, `background.confirmation_required` for a park, or
    /// `mutating_tool_requires_confirmation`.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Requirement::Allow => None,
            Requirement::Confirm {
                park_for_review: true,
                ..
            } => Some(ErrorCode::BackgroundConfirmationRequired),
            Requirement::Confirm {
                park_for_review: false,
                ..
            } => Some(ErrorCode::MutatingToolRequiresConfirmation),
            Requirement::Deny { code, .. } => Some(*code),
        }
    }

    /// Whether the request is refused.
    pub fn is_deny(&self) -> bool {
        match self {
            Requirement::Deny { .. } => true,
            Requirement::Allow | Requirement::Confirm { .. } => false,
        }
    }
}

/// The outcome of the stack, with its proof.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub requirement: Requirement,
    /// The effective autonomy the decision used (canonical).
    pub effective_autonomy: Autonomy,
    /// Every layer's verdict, in layer order (always seven entries).
    pub proof: Vec<Verdict>,
    /// Who decided: the deciding layer, or the standing approval that lowered a Confirm.
    pub source: DecisionSource,
}

impl Decision {
    /// SHA-256 hex of the canonical JSON of the proof.
    pub fn proof_digest(&self) -> String {
        proof_digest(&self.proof)
    }

    /// The verdict of one layer.
    pub fn verdict(&self, layer: Layer) -> Option<&Verdict> {
        self.proof.iter().find(|v| v.layer == layer)
    }
}

/// SHA-256 hex of the canonical JSON of a proof.
pub fn proof_digest(proof: &[Verdict]) -> String {
    digest_value(
        &serde_json::to_value(proof).unwrap_or_else(|e| json!({ "unserializable": e.to_string() })),
    )
}

/// Whether a tool list shows `command` to `caller`: layers 1 (runtime authorisation, transport)
/// and 2 (tool policy) do not deny it. Autonomy and the risk floor do not hide a tool; they
/// decide at call time, so the list stays the same for the same authorisation.
pub fn visible(command: &Command, caller: &Caller, tool_policy: &ToolPolicy) -> bool {
    let input = PolicyInput {
        command,
        caller,
        request_autonomy: None,
        session_autonomy: None,
        tool_policy,
        platform_supported: true,
        context: &Context::Interactive,
        standing_approvals: &[],
        phone_session_id: None,
        params: &Value::Null,
        now_ms: 0,
        elevation: None,
    };
    [Layer::RuntimeAuthorisation, Layer::ToolPolicy]
        .into_iter()
        .all(|layer| layer.check(&input).kind != VerdictKind::Deny)
}

/// Runs all seven layers, keeps every verdict as the proof, and merges them.
pub fn decide(input: &PolicyInput<'_>) -> Decision {
    let proof: Vec<Verdict> = Layer::ALL.iter().map(|layer| layer.check(input)).collect();
    let (requirement, source) = merge(&proof);
    Decision {
        requirement,
        effective_autonomy: input.effective_autonomy(),
        proof,
        source,
    }
}

/// The one merge rule: Deny > Park > Confirm > Allow over every verdict (the reported denial
/// is the first denying layer in layer order); then a standing approval named by layer 7 lowers
/// a Confirm or Park to Allow unless the risk floor (layer 5) asked for a one-shot confirmation.
pub fn merge(proof: &[Verdict]) -> (Requirement, DecisionSource) {
    let strongest = proof
        .iter()
        .map(|v| v.kind)
        .max_by_key(|k| k.strictness())
        .unwrap_or(VerdictKind::Allow);
    let first = |kind: VerdictKind| proof.iter().find(|v| v.kind == kind);
    match strongest {
        VerdictKind::Deny => match first(VerdictKind::Deny) {
            Some(Verdict {
                layer,
                reason,
                code: Some(code),
                policy_detail: Some(detail),
                ..
            }) => (
                Requirement::Deny {
                    code: *code,
                    policy_detail: *detail,
                    reason: reason.to_string(),
                },
                DecisionSource::Policy { layer: *layer },
            ),
            // A Deny verdict is only built with a code and a detail; if one ever lacked them,
            // still deny rather than fall through.
            Some(v) => (
                Requirement::Deny {
                    code: ErrorCode::ToolNotGranted,
                    policy_detail: PolicyDetail::RuntimeRegistryDeny,
                    reason: v.reason.to_string(),
                },
                DecisionSource::Policy { layer: v.layer },
            ),
            None => inconsistent_proof_deny(),
        },
        VerdictKind::Park | VerdictKind::Confirm => {
            let one_shot = proof
                .iter()
                .any(|v| v.layer == Layer::RiskFloor && v.kind == VerdictKind::Confirm);
            let park_for_review = strongest == VerdictKind::Park;
            let rule = proof.iter().find_map(|v| match (&v.layer, &v.source) {
                (
                    Layer::StandingApprovals,
                    source @ (DecisionSource::StandingApproval { .. }
                    | DecisionSource::SessionGrant { .. }
                    | DecisionSource::BackgroundReview { .. }),
                ) => Some(source.clone()),
                _ => None,
            });
            match rule {
                // A review is the one-shot confirmation of exactly this request.
                Some(source @ DecisionSource::BackgroundReview { .. }) => {
                    (Requirement::Allow, source)
                }
                Some(source) if !one_shot => (Requirement::Allow, source),
                Some(_) | None => {
                    let asking: Vec<&Verdict> = proof
                        .iter()
                        .filter(|v| matches!(v.kind, VerdictKind::Confirm | VerdictKind::Park))
                        .collect();
                    let reason = asking
                        .iter()
                        .map(|v| &*v.reason)
                        .collect::<Vec<_>>()
                        .join("; ");
                    let layer = asking
                        .iter()
                        .find(|v| v.kind == strongest)
                        .map_or(Layer::Autonomy, |v| v.layer);
                    (
                        Requirement::Confirm {
                            one_shot,
                            park_for_review,
                            reason,
                        },
                        DecisionSource::Policy { layer },
                    )
                }
            }
        }
        VerdictKind::Allow => (
            Requirement::Allow,
            DecisionSource::Policy {
                layer: Layer::Autonomy,
            },
        ),
    }
}

/// The decision of a request the user approved on its background review (`agent-jobs.md`
/// §9.7): a Confirm or Park is satisfied for this one request — the layer-7 verdict records the
/// review (`{"kind":"background_review","confirmation_id":…}`) as its source and the verdicts
/// are merged again. A Deny stays a Deny, and an Allow is left as it was (nothing to satisfy).
pub fn satisfied_by_review(decision: Decision, confirmation_id: &str) -> Decision {
    if !matches!(decision.requirement, Requirement::Confirm { .. }) {
        return decision;
    }
    let mut proof = decision.proof;
    let review = Verdict {
        layer: Layer::StandingApprovals,
        kind: VerdictKind::Allow,
        reason: format!(
            "the user approved this exact request on background review `{confirmation_id}`"
        )
        .into(),
        code: None,
        policy_detail: None,
        source: DecisionSource::BackgroundReview {
            confirmation_id: confirmation_id.to_owned(),
        },
    };
    match proof
        .iter_mut()
        .find(|v| v.layer == Layer::StandingApprovals)
    {
        Some(slot) => *slot = review,
        None => proof.push(review),
    }
    let (requirement, source) = merge(&proof);
    Decision {
        requirement,
        effective_autonomy: decision.effective_autonomy,
        proof,
        source,
    }
}

/// Fail-closed fallback for the impossible case "strongest is Deny but no Deny is found".
fn inconsistent_proof_deny() -> (Requirement, DecisionSource) {
    (
        Requirement::Deny {
            code: ErrorCode::ToolNotGranted,
            policy_detail: PolicyDetail::RuntimeRegistryDeny,
            reason: "inconsistent proof".to_owned(),
        },
        DecisionSource::Policy {
            layer: Layer::RuntimeAuthorisation,
        },
    )
}

/// SHA-256 hex of the canonical JSON describing the decision's inputs. Params enter only as
/// their `params_hash`; numbers are written as strings so the canonical form never fails.
pub fn inputs_digest(input: &PolicyInput<'_>) -> String {
    digest_value(&inputs_object(input))
}

/// The object [`inputs_digest`] hashes (exposed so the audit can show it).
pub fn inputs_object(input: &PolicyInput<'_>) -> Value {
    let cmd = input.command;
    let caller = input.caller;
    let params_hash = match params_hash_hex(input.params) {
        Ok(hash) => hash,
        Err(_) => format!("unhashable:{}", sha256_hex(&input.params.to_string())),
    };
    let context = match input.context {
        Context::Interactive => json!({ "kind": "interactive" }),
        Context::Background {
            run:
                BackgroundRun::Job {
                    job_id,
                    on_behalf_of,
                },
        } => match on_behalf_of {
            None => json!({ "kind": "background", "job_id": job_id.to_string() }),
            Some(runtime) => json!({
                "kind": "background",
                "job_id": job_id.to_string(),
                "on_behalf_of": runtime,
            }),
        },
        Context::Background {
            run: BackgroundRun::Goal { goal_id },
        } => json!({ "kind": "background", "goal_id": goal_id }),
        Context::Background {
            run: BackgroundRun::Watcher { watcher_id },
        } => json!({ "kind": "background", "watcher_id": watcher_id.to_string() }),
    };
    let mut rule_ids: Vec<&str> = input
        .standing_approvals
        .iter()
        .filter(|r| r.runtime == caller.runtime)
        .map(|r| r.id.as_str())
        .collect();
    rule_ids.sort_unstable();
    let mut object = json!({
        "v": INPUTS_DIGEST_VERSION.to_string(),
        "tool": cmd.name,
        "command": {
            "category": cmd.category,
            "risk": cmd.risk.as_str(),
            "confirmation": cmd.confirmation.as_str(),
            "exposure": cmd.default_exposure.as_str(),
            "executor": cmd.executor.as_str(),
            "mutating": cmd.mutating,
            "mcp": cmd.mcp,
            "remote_runtime": cmd.remote_runtime,
        },
        "caller": {
            "runtime": caller.runtime,
            "transport": caller.transport.as_str(),
            "principal": caller.principal,
            "role": caller.role.as_str(),
            "enabled": caller.enabled,
            "grants": caller.grants.names(),
            "max_autonomy": caller.max_autonomy.as_str(),
        },
        "autonomy": {
            "request": input.request_autonomy.and_then(Autonomy::normalize).map(Autonomy::as_str),
            "session": input.session_autonomy.map(Autonomy::as_str),
            "effective": input.effective_autonomy().as_str(),
        },

        "tool_policy": {
            "global": list_json(Some(&input.tool_policy.global)),
            "runtime": list_json(input.tool_policy.for_runtime(&caller.runtime)),
        },
        "platform_supported": input.platform_supported,
        "context": context,
        "standing_approval_ids": rule_ids,
        "phone_session_id": input.phone_session_id,
        "params_hash": params_hash,
        "now_ms": input.now_ms.to_string(),
    });
    // Present only with an elevation, so the preimage of every other input is unchanged (no
    // version bump).
    if let (Some(e), Some(map)) = (input.elevation, object.as_object_mut()) {
        map.insert(
            "elevation".to_owned(),
            json!({
                "grant_id": e.grant_id,
                "to": e.to.as_str(),
                "expires_at_ms": e.expires_at_ms.to_string(),
            }),
        );
    }
    object
}

fn list_json(list: Option<&ToolList>) -> Value {
    match list {
        None => Value::Null,
        Some(l) => json!({
            "profile": l.profile,
            "allow": l.allow.as_ref().map(|a| a.iter().map(ToString::to_string).collect::<Vec<_>>()),
            "deny": l.deny.iter().map(ToString::to_string).collect::<Vec<_>>(),
        }),
    }
}

fn digest_value(value: &Value) -> String {
    match openphone_protocol::canonical_sha256_hex(value) {
        Ok(hex) => hex,
        Err(e) => sha256_hex(&format!("non-canonical:{e}:{value}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proof(kinds: [VerdictKind; 7]) -> Vec<Verdict> {
        Layer::ALL
            .iter()
            .zip(kinds)
            .map(|(layer, kind)| match kind {
                VerdictKind::Deny => Verdict::deny(
                    *layer,
                    ErrorCode::ToolNotGranted,
                    PolicyDetail::ToolPolicyDeny,
                    format!("deny {}", layer.as_str()),
                ),
                VerdictKind::Allow => Verdict::allow(*layer, "ok"),
                VerdictKind::Confirm => Verdict::confirm(*layer, "ask"),
                VerdictKind::Park => Verdict::park(*layer, "park"),
            })
            .collect()
    }

    use VerdictKind::{Allow as A, Confirm as C, Deny as D, Park as P};

    #[test]
    fn all_allow_is_allow() {
        let (r, s) = merge(&proof([A; 7]));
        assert_eq!(r, Requirement::Allow);
        assert_eq!(
            s,
            DecisionSource::Policy {
                layer: Layer::Autonomy
            }
        );
    }

    #[test]
    fn first_deny_in_layer_order_is_reported() {
        let (r, s) = merge(&proof([A, D, D, C, C, P, A]));
        assert_eq!(
            r,
            Requirement::Deny {
                code: ErrorCode::ToolNotGranted,
                policy_detail: PolicyDetail::ToolPolicyDeny,
                reason: "deny tool_policy".to_owned(),
            }
        );
        assert_eq!(
            s,
            DecisionSource::Policy {
                layer: Layer::ToolPolicy
            }
        );
    }

    #[test]
    fn park_beats_confirm_and_one_shot_comes_from_the_risk_floor() {
        let (r, s) = merge(&proof([A, A, A, C, C, P, A]));
        assert_eq!(
            r,
            Requirement::Confirm {
                one_shot: true,
                park_for_review: true,
                reason: "ask; ask; park".to_owned(),
            }
        );
        assert_eq!(
            s,
            DecisionSource::Policy {
                layer: Layer::BackgroundContext
            }
        );
        let (r, _) = merge(&proof([A, A, A, C, A, A, A]));
        assert_eq!(
            r,
            Requirement::Confirm {
                one_shot: false,
                park_for_review: false,
                reason: "ask".to_owned(),
            }
        );
    }

    #[test]
    fn a_named_rule_lowers_confirm_and_park_but_not_one_shot_or_deny() {
        let with_rule = |kinds| {
            let mut p = proof(kinds);
            p[6].source = DecisionSource::StandingApproval {
                rule_id: "sa".to_owned(),
            };
            merge(&p)
        };
        let lowered = (
            Requirement::Allow,
            DecisionSource::StandingApproval {
                rule_id: "sa".to_owned(),
            },
        );
        assert_eq!(with_rule([A, A, A, C, A, A, A]), lowered);
        assert_eq!(with_rule([A, A, A, C, A, P, A]), lowered);
        assert!(matches!(
            with_rule([A, A, A, A, C, A, A]).0,
            Requirement::Confirm { one_shot: true, .. }
        ));
        assert!(with_rule([A, A, A, D, A, A, A]).0.is_deny());
    }

    #[test]
    fn a_background_review_satisfies_park_and_one_shot_but_never_deny() {
        let decided = |kinds| {
            let proof = proof(kinds);
            let (requirement, source) = merge(&proof);
            Decision {
                requirement,
                effective_autonomy: Autonomy::AskBeforeAction,
                proof,
                source,
            }
        };
        let review = DecisionSource::BackgroundReview {
            confirmation_id: "job-confirm-1".to_owned(),
        };
        let parked = satisfied_by_review(decided([A, A, A, C, C, P, A]), "job-confirm-1");
        assert_eq!(parked.requirement, Requirement::Allow);
        assert_eq!(parked.source, review);
        assert_eq!(parked.proof[6].source, review);
        assert_eq!(parked.proof[5].kind, VerdictKind::Park);
        assert_eq!(
            serde_json::to_value(&parked.proof[6].source).unwrap(),
            json!({"kind": "background_review", "confirmation_id": "job-confirm-1"})
        );
        // Merging the stored proof again gives the same answer.
        assert_eq!(merge(&parked.proof), (Requirement::Allow, review));
        let denied = satisfied_by_review(decided([A, D, A, C, C, P, A]), "job-confirm-1");
        assert!(denied.requirement.is_deny());
        let allowed = decided([A; 7]);
        assert_eq!(
            satisfied_by_review(allowed.clone(), "job-confirm-1"),
            allowed
        );
    }
}
