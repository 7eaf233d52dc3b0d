//! The OpenPhone policy stack: the pure decision of whether one tool request may run, must be
//! confirmed (or parked for review), or is denied — with a proof of why.
//!
//! This crate is pure: no I/O, no clock reads (the time is the input `now_ms`), no async, no
//! randomness. The same [`PolicyInput`] always yields the same [`Decision`].
//!
//! # The seven layers
//!
//! Each layer is a pure function of the input returning a typed [`Verdict`]
//! (`Allow | Confirm | Park | Deny`, a reason, and for a denial the error code and the
//! `details.policy` value of `runtime-protocol.md` §8.2). No layer looks at another's verdict.
//!
//! | layer | rule | denial |
//! |---|---|---|
//! | L1 [`Layer::RuntimeAuthorisation`] | caller enabled; `remote_runtime: false` only for `builtin`; `mcp: false` never over MCP; the command's exposure class granted (remote default `safe_read`; `builtin` and the operator all three) | `tool_not_granted` (`runtime_registry_deny`, or `transport_not_allowed` for the two flags) |
//! | L2 [`Layer::ToolPolicy`] | global and per-runtime lists: a [tool profile](mod@profiles) as the base surface, allow entries (names, `group:<category>`, `*`) adding to it — or, without a profile, an allow list restricting to its entries — and deny entries removing; any deny entry wins; each list must admit the command; an unknown profile name denies | `tool_not_granted` (`tool_policy_deny`) |
//! | L3 [`Layer::PlatformSupport`] | a device command needs the backend's support (never replaced by another action); runtime-executor commands are served by the daemon | `tool_not_supported_by_phone_platform` (`platform_unsupported`) |
//! | L4 [`Layer::Autonomy`] | reads Allow; mutating: `observe_only` Deny, `ask_before_action` Confirm, `trusted_actions` Allow | `observe_only_mutation_denied` (`observe_only_blocks_mutation`) |
//! | L5 [`Layer::RiskFloor`] | `confirmation: always` / high risk: Confirm, one-shot, in every mode | — |
//! | L6 [`Layer::BackgroundContext`] | a mutating command inside a job or goal run: Park, whatever the autonomy | — |
//! | L7 [`Layer::StandingApprovals`] | names the first enabled, unexpired user rule matching runtime + tool + param constraints (and `background: true` in a background run); never for the risk floor | — |
//!
//! The effective autonomy ([`effective_autonomy`]) follows §9: lenient normalisation with the
//! legacy synonyms (`read_only`, `dry_run` → `observe_only`; `yolo` → `trusted_actions`;
//! anything unknown → `ask_before_action`), inheritance request → session → `ask_before_action`,
//! and no escalation: for a runtime it is `min(request, session, ceiling)` — a request can only
//! make things stricter than its session, and neither can lift the runtime above its configured
//! ceiling `max_autonomy`; the operator has no ceiling.
//!
//! # The merge rule
//!
//! [`merge`] takes the strictest verdict, Deny > Park > Confirm > Allow. A denial reports the
//! code of the **first denying layer in layer order**, so a command that is both ungranted (L1)
//! and unsupported (L3) is reported as `tool_not_granted`. A Park is a Confirm that nobody can
//! answer now: the [`Requirement::Confirm`] carries `park_for_review: true` and the bridge
//! answers `background.confirmation_required`. `one_shot` is set when the risk floor (L5) asked.
//! Then standing approvals apply: when layer 7 named a rule, a Confirm or Park that is not
//! one-shot becomes Allow, and the decision's [`DecisionSource`] records the rule id. Deny is
//! never lowered. Reads (`confirmation: none`) that pass L1–L3 are Allow in every mode and
//! context.
//!
//! # The proof
//!
//! [`Decision::proof`] keeps all seven verdicts, in layer order, whatever the outcome — so
//! "why did this run without asking me?" always has an answer. [`Decision::proof_digest`]
//! hashes the proof's canonical JSON and [`inputs_digest`] hashes a canonical
//! description of the inputs (command metadata, caller, autonomies, tool-policy lists,
//! platform flag, context, ids of the caller's standing approvals, `now_ms`, and the params only
//! as their `params_hash`), so the audit log can store both without storing raw params. The inputs digest is computed
//! on demand (from the same [`PolicyInput`]), not by every [`decide`]: it canonicalises the
//! params again, and the hot path of every tool call does not need it.
//!
//! # Example
//!
//! ```
//! use openphone_policy::{
//!     Autonomy, Caller, Context, ExposureGrants, PolicyInput, Requirement, ToolPolicy,
//!     Transport, decide,
//! };
//! use openphone_protocol::Registry;
//!
//! let registry = Registry::embedded().map_err(|e| e.to_string())?;
//! let command = registry.resolve("sms.send").ok_or("unknown tool")?;
//! let mut caller = Caller::remote("hermes", Transport::Websocket, "token:hermes");
//! caller.grants = ExposureGrants::ALL;
//! let params = serde_json::json!({"reason": "reply", "to": "+100", "body": "hi"});
//! let decision = decide(&PolicyInput {
//!     command,
//!     caller: &caller,
//!     request_autonomy: Some("yolo"),
//!     session_autonomy: Some(Autonomy::TrustedActions),
//!     tool_policy: &ToolPolicy::default(),
//!     platform_supported: true,
//!     context: &Context::Interactive,
//!     standing_approvals: &[],
//!     phone_session_id: None,
//!     params: &params,
//!     now_ms: 1_700_000_000_000,
//!     elevation: None,
//! });
//! // the risk floor asks even in trusted_actions, one-shot
//! assert!(matches!(
//!     decision.requirement,
//!     Requirement::Confirm { one_shot: true, park_for_review: false, .. }
//! ));
//! assert_eq!(decision.proof.len(), 7);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The ToolBridge calls [`decide`] at step 2 of `runtime-protocol.md` §8.2, and again on the
//! stored request when a confirmation is approved (a Deny then wins; a Confirm counts as
//! satisfied by the approval).

mod autonomy;
mod class;
mod decision;
mod elevation;
mod error;
mod explain;
pub mod grants;
mod input;
pub mod layers;
pub mod profiles;
mod selector;
mod verdict;

pub use autonomy::{Autonomy, effective_autonomy};
pub use decision::{
    Decision, INPUTS_DIGEST_VERSION, Requirement, decide, inputs_digest, inputs_object, merge,
    proof_digest, satisfied_by_review, visible,
};
pub use elevation::Elevation;
pub use error::PolicyError;
pub use explain::{explain, wire_layer, wire_outcome};
pub use grants::{exact_params_constraints, session_grant_constraints, target_params};
pub use input::{
    Admission, BackgroundRun, Caller, Context, ExposureGrants, PolicyInput, Role, RuleMatch,
    RuntimeAuthorisation, StandingApproval, ToolList, ToolPolicy, ToolSelector, Transport,
};
pub use layers::{is_mutating, is_risk_floor};
pub use profiles::{Profile, Profiles, profile, profiles};
pub use verdict::{DecisionSource, Layer, PolicyDetail, Verdict, VerdictKind};
