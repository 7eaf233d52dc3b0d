//! The explanation of decisions made by the real policy stack, checked field by field.

use super::*;
use crate::decision::decide;
use crate::input::{
    Caller, Context, ExposureGrants, StandingApproval, ToolPolicy, ToolSelector, Transport,
};
use openphone_protocol::{Command, ErrorCode, Registry};
use serde_json::json;

fn command(name: &str) -> &'static Command {
    Registry::embedded().unwrap().resolve(name).unwrap()
}

/// One request: everything a decision needs, with defaults a test changes.
struct Case {
    command: &'static Command,
    caller: Caller,
    request: Option<&'static str>,
    session: Option<Autonomy>,
    phone_session: Option<&'static str>,
    policy: ToolPolicy,
    supported: bool,
    context: Context,
    rules: Vec<StandingApproval>,
}

impl Case {
    fn new(tool: &str) -> Case {
        let mut caller = Caller::remote("hermes", Transport::Websocket, "token:hermes");
        caller.grants = ExposureGrants::ALL;
        Case {
            command: command(tool),
            caller,
            request: None,
            session: None,
            phone_session: None,
            policy: ToolPolicy::default(),
            supported: true,
            context: Context::Interactive,
            rules: Vec::new(),
        }
    }

    fn explain(&self) -> Explanation {
        let params = json!({});
        let input = PolicyInput {
            command: self.command,
            caller: &self.caller,
            request_autonomy: self.request,
            session_autonomy: self.session,
            tool_policy: &self.policy,
            platform_supported: self.supported,
            context: &self.context,
            standing_approvals: &self.rules,
            phone_session_id: self.phone_session,
            params: &params,
            now_ms: 1_000,
            elevation: None,
        };
        explain(&input, &decide(&input))
    }
}

fn kinds(e: &Explanation) -> Vec<PolicyChangeKind> {
    e.changes.iter().map(|c| c.kind).collect()
}

#[test]
fn a_read_is_allowed_with_seven_layers_and_nothing_to_change() {
    let e = Case::new("openphone.screen.get").explain();
    assert_eq!(e.decision, PolicyOutcome::Allow);
    assert_eq!(e.tool, "openphone.screen.get");
    assert_eq!(e.runtime, "hermes");
    assert_eq!(
        e.layers.iter().map(|l| l.layer).collect::<Vec<_>>(),
        PolicyLayer::ALL
    );
    assert!(e.changes.is_empty());
    assert_eq!(e.source.kind, "policy");
    assert_eq!(e.source.fields["layer"], "autonomy");
}

#[test]
fn l1_ungranted_names_the_exposure_class_and_the_setting() {
    let mut case = Case::new("openphone.ui.tap");
    case.caller.grants = ExposureGrants::REMOTE_DEFAULT;
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Deny);
    assert_eq!(e.layers[0].code, Some(ErrorCode::ToolNotGranted));
    assert_eq!(kinds(&e), [PolicyChangeKind::GrantExposure]);
    let c = &e.changes[0];
    assert_eq!(c.layer, PolicyLayer::RuntimeAuthorisation);
    assert_eq!(c.setting.as_deref(), Some("runtimes.hermes.grants"));
    assert_eq!(
        c.value.as_deref(),
        Some(case.command.default_exposure.as_str())
    );
}

#[test]
fn l1_disabled_and_mcp_only_flags() {
    let mut case = Case::new("openphone.ui.tap");
    case.caller.enabled = false;
    let e = case.explain();
    assert_eq!(kinds(&e), [PolicyChangeKind::EnableRuntime]);
    assert_eq!(
        e.changes[0].setting.as_deref(),
        Some("runtimes.hermes.enabled")
    );

    // `mcp: false` (messages.send) over MCP
    let mut case = Case::new("openphone.messages.send");
    case.caller.transport = Transport::Mcp;
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Deny);
    assert_eq!(kinds(&e), [PolicyChangeKind::Unsupported]);
    assert!(e.changes[0].description.contains("MCP"));

    // `remote_runtime: false` (none ships; the flag on a copy)
    let mut local = command("openphone.ui.tap").clone();
    local.remote_runtime = false;
    let mut case = Case::new("openphone.ui.tap");
    case.command = Box::leak(Box::new(local));
    let e = case.explain();
    assert_eq!(kinds(&e), [PolicyChangeKind::Unsupported]);
    assert!(e.changes[0].description.contains("builtin"));
    case.caller = Caller::builtin("daemon");
    assert_eq!(case.explain().decision, PolicyOutcome::Confirm);
}

#[test]
fn l2_names_the_deny_entry_and_its_scope() {
    let mut case = Case::new("openphone.ui.tap");
    case.policy.runtimes.insert(
        "hermes".to_owned(),
        crate::input::ToolList {
            deny: vec![ToolSelector::parse("group:ui").unwrap()],
            ..Default::default()
        },
    );
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Deny);
    assert_eq!(kinds(&e), [PolicyChangeKind::ToolPolicy]);
    let c = &e.changes[0];
    assert_eq!(
        c.setting.as_deref(),
        Some("tool_policy.runtimes.hermes.deny")
    );
    assert_eq!(c.value.as_deref(), Some("group:ui"));
    assert!(c.description.contains("group:ui"), "{}", c.description);
}

#[test]
fn l2_names_the_allow_list_or_profile_that_left_it_out() {
    let mut case = Case::new("openphone.ui.tap");
    case.policy.global.allow = Some(vec![ToolSelector::parse("group:screen").unwrap()]);
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Deny);
    let c = &e.changes[0];
    assert_eq!(c.kind, PolicyChangeKind::ToolPolicy);
    assert_eq!(c.setting.as_deref(), Some("tool_policy.global.allow"));
    assert_eq!(c.value.as_deref(), Some("openphone.ui.tap"));

    // `read` keeps only the reads: a tap is left out, and the profile is named
    case.policy.global.allow = None;
    case.policy.global.profile = Some("read".to_owned());
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Deny);
    let c = &e.changes[0];
    assert_eq!(c.setting.as_deref(), Some("tool_policy.global.profile"));
    assert_eq!(c.value.as_deref(), Some("read"));
    assert!(c.description.contains("leaves"), "{}", c.description);

    case.policy.global.profile = Some("no_such_profile".to_owned());
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Deny);
    assert!(e.changes[0].description.contains("does not exist"));
}

#[test]
fn l3_unsupported_has_nothing_to_change() {
    let mut case = Case::new("openphone.ui.tap");
    case.supported = false;
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Deny);
    assert_eq!(kinds(&e), [PolicyChangeKind::Unsupported]);
    assert_eq!(e.changes[0].layer, PolicyLayer::PlatformSupport);
    assert_eq!(e.changes[0].setting, None);
    assert_eq!(e.changes[0].command, None);
}

#[test]
fn l4_observe_only_names_each_source() {
    let mut case = Case::new("openphone.ui.tap");
    case.caller.max_autonomy = Autonomy::ObserveOnly;
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Deny);
    assert_eq!(e.effective_autonomy, Autonomy::ObserveOnly);
    assert_eq!(kinds(&e), [PolicyChangeKind::Autonomy]);
    assert_eq!(
        e.changes[0].setting.as_deref(),
        Some("runtimes.hermes.max_autonomy")
    );

    let mut case = Case::new("openphone.ui.tap");
    case.request = Some("read_only");
    case.session = Some(Autonomy::ObserveOnly);
    case.phone_session = Some("phone-sess-1");
    let e = case.explain();
    assert_eq!(e.changes.len(), 2, "{e:?}");
    assert!(e.changes.iter().all(|c| c.setting.is_none()));
    assert!(e.changes[1].description.contains("phone-sess-1"));
}

#[test]
fn l4_confirm_suggests_trusted_actions_or_the_ceiling_then_a_standing_approval() {
    let mut case = Case::new("openphone.ui.tap");
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Confirm);
    assert!(!e.one_shot);
    assert_eq!(
        kinds(&e),
        [
            PolicyChangeKind::Autonomy,
            PolicyChangeKind::StandingApproval
        ]
    );
    assert_eq!(
        e.changes[0].setting.as_deref(),
        Some("runtimes.hermes.max_autonomy")
    );
    assert_eq!(
        e.changes[1].command.as_deref(),
        Some("openphone approvals grant --runtime hermes --tool openphone.ui.tap")
    );

    case.caller.max_autonomy = Autonomy::TrustedActions;
    case.phone_session = Some("phone-sess-9");
    let e = case.explain();
    assert_eq!(e.changes[0].setting, None);
    assert_eq!(e.changes[0].value.as_deref(), Some("trusted_actions"));
    // the session grant an approval can give, as a description only
    assert_eq!(e.changes.len(), 3);
    assert!(e.changes[2].description.contains("--for-session"));
    assert!(e.changes[2].description.contains("phone-sess-9"));
    assert_eq!(e.changes[2].command, None);
}

#[test]
fn l5_risk_floor_is_one_shot_and_nothing_lowers_it() {
    let mut case = Case::new("openphone.messages.send");
    case.caller.max_autonomy = Autonomy::TrustedActions;
    case.request = Some("trusted_actions");
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Confirm);
    assert!(e.one_shot);
    assert_eq!(kinds(&e), [PolicyChangeKind::RiskFloor]);
    assert_eq!(e.changes[0].layer, PolicyLayer::RiskFloor);
    // under ask_before_action too: no autonomy or standing-approval advice
    let e = Case::new("openphone.messages.send").explain();
    assert_eq!(kinds(&e), [PolicyChangeKind::RiskFloor]);
}

#[test]
fn l6_background_parks_and_names_the_review_and_a_background_rule() {
    let mut case = Case::new("openphone.ui.tap");
    case.context = Context::job(3);
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Park);
    assert_eq!(
        kinds(&e),
        [
            PolicyChangeKind::Background,
            PolicyChangeKind::StandingApproval
        ]
    );
    assert!(
        e.changes[1]
            .command
            .as_deref()
            .is_some_and(|c| c.ends_with("--background"))
    );
}

#[test]
fn l7_a_standing_approval_allows_and_is_the_source() {
    let mut case = Case::new("openphone.ui.tap");
    case.rules.push(StandingApproval {
        id: "sa-1".to_owned(),
        runtime: "hermes".to_owned(),
        tool: ToolSelector::parse("openphone.ui.tap").unwrap(),
        constraints: Default::default(),
        expires_at_ms: None,
        background: false,
        enabled: true,
        session: None,
    });
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Allow);
    assert_eq!(e.source.kind, "standing_approval");
    assert_eq!(e.source.fields["rule_id"], "sa-1");
    assert!(e.changes.is_empty());
}

#[test]
fn the_operator_has_no_ceiling_to_raise() {
    let mut case = Case::new("openphone.ui.tap");
    case.caller = Caller::operator("operator", Transport::Websocket, "op");
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Confirm);
    assert_eq!(e.changes[0].kind, PolicyChangeKind::Autonomy);
    assert_eq!(e.changes[0].setting, None);
    case.request = Some("observe_only");
    let e = case.explain();
    assert_eq!(e.decision, PolicyOutcome::Deny);
    assert_eq!(e.changes.len(), 1);
    assert_eq!(e.changes[0].value.as_deref(), Some("ask_before_action"));
}

#[test]
fn the_wire_form_is_snake_case() {
    let e = Case::new("openphone.ui.tap").explain();
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(v["decision"], "confirm");
    assert_eq!(v["effective_autonomy"], "ask_before_action");
    assert_eq!(v["source"], json!({"kind": "policy", "layer": "autonomy"}));
    assert_eq!(v["layers"][3]["verdict"], "confirm");
    assert!(v["layers"][3].get("code").is_none());
    assert_eq!(v["changes"][1]["kind"], "standing_approval");
}
