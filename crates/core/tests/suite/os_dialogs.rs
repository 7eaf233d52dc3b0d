//! OS-level confirmations through the bridge (issue 30): a system dialog the phone puts up after
//! an action is the user's to answer — `needs_confirmation` / `framework_confirmation_required`
//! with a confirmation naming the dialog, never answered by `trusted_actions`, a standing
//! approval, a session grant or a confirming host — nor by the approval of the request that
//! raised it: the user approved the request, not the dialog's content (review finding 4).

use std::sync::Arc;

use openphone_clock::ManualClock;
use openphone_core::{BridgeError, ConfirmDecision, ConfirmingHost, DeviceGrants};
use openphone_device::{SimPhone, SimState};
use openphone_protocol::{ErrorCode, ToolRequest, ToolResult, ToolStatus};
use openphone_store::{ConfirmationFilter, NewStandingApproval};
use serde_json::{Value, json};

use super::support::*;

const LENS: &str = "com.example.lens";

/// The demo phone plus Lens, which asks `permissions` on its first open.
fn harness(permissions: &[&str]) -> Harness {
    harness_labelled("Lens", permissions)
}

/// [`harness`] with Lens under another label.
fn harness_labelled(label: &str, permissions: &[&str]) -> Harness {
    let mut doc: Value =
        serde_json::from_str(openphone_device::sim::DEFAULT_SCENARIO).expect("demo scenario");
    doc["apps"]
        .as_array_mut()
        .expect("apps")
        .push(json!({ "package": LENS, "label": label }));
    let asks: Vec<Value> = permissions
        .iter()
        .map(|p| json!({ "package": LENS, "permission": p }))
        .collect();
    doc["system_dialogs"] = json!({ "permissions": asks });
    let state = SimState::from_json(&doc.to_string()).expect("valid scenario");
    let clock = ManualClock::new(state.clock.start_ms);
    let phone = Arc::new(SimPhone::new(state, Arc::new(clock.clone())).expect("phone"));
    let dir = tempfile::tempdir().expect("tempdir");
    let bridge = bridge_on(dir.path(), &phone, &clock);
    Harness {
        dir,
        clock,
        phone,
        bridge,
    }
}

fn open_lens(id: &str) -> ToolRequest {
    request(
        id,
        "openphone.app.open",
        json!({ "package_or_label": LENS, "reason": "take a photo" }),
    )
}

fn trusted(req: ToolRequest) -> ToolRequest {
    with(req, |r| r.autonomy = Some("trusted_actions".into()))
}

fn permission(h: &Harness, name: &str) -> String {
    let state = h.phone.snapshot();
    let decl = state
        .system_dialogs
        .permissions
        .iter()
        .find(|d| d.permission == name)
        .expect("declared");
    serde_json::to_value(decl.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn summary_of(h: &Harness, id: &str) -> String {
    h.bridge
        .store()
        .get_confirmation(id)
        .unwrap()
        .expect("stored")
        .summary
}

/// The `os_dialog` notes of the audit records of request `request_id` of `runtime`.
fn dialog_audit(h: &Harness, runtime: &str, request_id: &str) -> Vec<Value> {
    h.bridge
        .store()
        .find_audit(&openphone_protocol::audit_id(runtime, request_id))
        .unwrap()
        .into_iter()
        .filter_map(|r| {
            r.entry
                .policy_proof
                .and_then(|p| p.get("os_dialog").cloned())
        })
        .collect()
}

async fn approve(h: &Harness, id: &str, decision: ConfirmDecision) -> ToolResult {
    h.bridge.resolve(&operator(), id, decision).await.unwrap()
}

#[tokio::test]
async fn trusted_actions_surfaces_a_permission_prompt_and_approval_answers_it_once() {
    let h = harness(&["camera"]);
    let caller = trusted_hermes();
    let asked = h.call(&caller, trusted(open_lens("p1"))).await;
    assert_eq!(asked.status, ToolStatus::NeedsConfirmation, "{asked:?}");
    assert_eq!(code(&asked), Some("framework_confirmation_required"));
    let id = confirmation_id(&asked);
    assert_eq!(
        summary_of(&h, &id),
        "Android asks: Allow Lens to take pictures and record video? (approving presses \"Allow\")"
    );
    assert_eq!(
        asked.pending_confirmation().map(|p| p.confirmation_id),
        Some(id.clone()),
        "the answer is a pending confirmation like any other"
    );
    // The app opened (trusted_actions let it run); the prompt stays on the phone, unanswered.
    let dialog = h.phone.pending_dialog().expect("the prompt is on screen");
    assert_eq!(dialog.package, "com.android.permissioncontroller");
    assert_eq!(permission(&h, "camera"), "ask");
    // A keyed retry replays the same pending answer: nothing runs again.
    let retried = h.call(&caller, trusted(open_lens("p1"))).await;
    assert_eq!(confirmation_id(&retried), id);
    let opens = |h: &Harness| {
        h.phone
            .action_log()
            .iter()
            .filter(|r| r.tool == "openphone.app.open")
            .count()
    };
    assert_eq!(opens(&h), 1);

    let done = approve(&h, &id, ConfirmDecision::Approve).await;
    assert_eq!(done.status, ToolStatus::Ok, "{done:?}");
    assert_eq!(done.result["os_dialog"]["answer"], "accepted");
    assert_eq!(done.result["os_dialog"]["answered_by"], "user");
    assert_eq!(done.result["result"]["opened"], true, "{done:?}");
    assert_eq!(permission(&h, "camera"), "granted");
    assert_eq!(h.phone.pending_dialog(), None);
    assert_eq!(
        opens(&h),
        1,
        "approval answered the dialog, it did not reopen the app"
    );
    // Audit: asked, then accepted by the user, named by the dialog's id.
    let notes = dialog_audit(&h, "hermes", "p1");
    let answers: Vec<&str> = notes.iter().filter_map(|n| n["answer"].as_str()).collect();
    assert_eq!(answers, ["asked", "accepted"], "{notes:?}");
    assert!(notes.iter().all(|n| n["dialog_id"] == dialog.dialog_id));
    assert!(h.bridge.store().verify_audit().unwrap().is_intact());
}

#[tokio::test]
async fn denying_the_dialog_dismisses_it_and_leaves_the_permission_denied() {
    let h = harness(&["camera"]);
    let asked = h.call(&trusted_hermes(), trusted(open_lens("d1"))).await;
    let id = confirmation_id(&asked);
    let denied = approve(&h, &id, ConfirmDecision::Deny).await;
    assert_eq!(denied.status, ToolStatus::Denied);
    assert_eq!(code(&denied), Some("user_denied_confirmation"));
    let details = denied.error.and_then(|e| e.details).expect("details");
    assert_eq!(details["os_dialog"]["answer"], "dismissed");
    assert_eq!(permission(&h, "camera"), "denied");
    assert_eq!(h.phone.pending_dialog(), None);
    let answers: Vec<String> = dialog_audit(&h, "hermes", "d1")
        .iter()
        .filter_map(|n| n["answer"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(answers, ["asked", "dismissed"]);
}

#[tokio::test]
async fn a_standing_approval_runs_the_action_but_never_answers_the_dialog() {
    let h = harness(&["camera"]);
    h.bridge
        .store()
        .create_approval(
            &NewStandingApproval {
                runtime: "hermes".into(),
                tool: "openphone.app.open".into(),
                constraints: json!({}),
                ..NewStandingApproval::default()
            },
            h.now(),
        )
        .unwrap();
    // ask_before_action, but the user's rule allows opening apps: it runs, the prompt surfaces.
    let asked = h.call(&hermes(), open_lens("s1")).await;
    assert_eq!(code(&asked), Some("framework_confirmation_required"));
    assert!(h.phone.pending_dialog().is_some());
}

#[tokio::test]
async fn accept_for_session_answers_the_dialog_once_and_makes_no_grant() {
    let h = harness(&["camera"]);
    h.bridge
        .store()
        .create_session(
            &openphone_store::NewPhoneSession {
                phone_session_id: "ps-d".into(),
                runtime_kind: "hermes".into(),
                runtime_session_id: String::new(),
                attention_id: "attn-d".into(),
                source: "chat".into(),
                autonomy: openphone_store::Autonomy::TrustedActions,
                summary: "s".into(),
            },
            h.now(),
        )
        .unwrap();
    let req = with(trusted(open_lens("g1")), |r| {
        r.phone_session_id = Some("ps-d".into())
    });
    let asked = h.call(&trusted_hermes(), req).await;
    let id = confirmation_id(&asked);
    let done = approve(&h, &id, ConfirmDecision::AcceptForSession).await;
    assert_eq!(done.status, ToolStatus::Ok);
    assert!(
        h.bridge
            .store()
            .list_approvals(Some("hermes"))
            .unwrap()
            .is_empty(),
        "an OS dialog is answered once, never by a grant"
    );
}

#[tokio::test]
async fn a_confirming_host_cannot_answer_an_os_dialog() {
    let h = harness(&["camera"]);
    let asked = h.call(&trusted_hermes(), trusted(open_lens("h1"))).await;
    let id = confirmation_id(&asked);
    let host = ConfirmingHost::new("hermes", "mcp_elicitation");
    let refused = h
        .bridge
        .resolve_as_host(
            &host,
            &id,
            ConfirmDecision::Approve,
            ErrorCode::UserDeniedConfirmation,
        )
        .await;
    assert!(
        matches!(refused, Err(BridgeError::RiskFloor(_))),
        "{refused:?}"
    );
    assert_eq!(permission(&h, "camera"), "ask");
    let pending = h
        .bridge
        .store()
        .list_confirmations(&ConfirmationFilter::default())
        .unwrap();
    assert_eq!(pending.len(), 1);
}

/// Review finding 4: approving a request made the bridge press the dialog it raised ("Allow",
/// "Pay") without the user seeing it. The dialog opens its own confirmation instead.
#[tokio::test]
async fn approving_a_request_never_presses_the_dialog_it_raised() {
    let h = harness(&["camera"]);
    let asked = h.call(&hermes(), open_lens("a1")).await;
    assert_eq!(code(&asked), Some("mutating_tool_requires_confirmation"));
    let first = confirmation_id(&asked);
    let answer = approve(&h, &first, ConfirmDecision::Approve).await;
    assert_eq!(answer.status, ToolStatus::NeedsConfirmation, "{answer:?}");
    assert_eq!(code(&answer), Some("framework_confirmation_required"));
    let dialog = confirmation_id(&answer);
    assert_ne!(dialog, first, "a confirmation of its own");
    assert_eq!(
        summary_of(&h, &dialog),
        "Android asks: Allow Lens to take pictures and record video? (approving presses \"Allow\")"
    );
    // Nothing pressed: the prompt is still up, the permission not granted.
    assert!(h.phone.pending_dialog().is_some());
    assert_ne!(permission(&h, "camera"), "granted");
    let done = approve(&h, &dialog, ConfirmDecision::Approve).await;
    assert_eq!(done.status, ToolStatus::Ok, "{done:?}");
    assert_eq!(done.result["os_dialog"]["answered_by"], "user");
    assert_eq!(permission(&h, "camera"), "granted");
    assert_eq!(h.phone.pending_dialog(), None);
}

#[tokio::test]
async fn every_dialog_after_an_approved_request_is_asked() {
    let h = harness(&["camera", "location"]);
    let asked = h.call(&hermes(), open_lens("a2")).await;
    let camera = approve(&h, &confirmation_id(&asked), ConfirmDecision::Approve).await;
    assert_eq!(code(&camera), Some("framework_confirmation_required"));
    let second = approve(&h, &confirmation_id(&camera), ConfirmDecision::Approve).await;
    // Camera was the user's first question; location is the next.
    assert_eq!(permission(&h, "camera"), "granted");
    assert_eq!(
        code(&second),
        Some("framework_confirmation_required"),
        "{second:?}"
    );
    let next = confirmation_id(&second);
    assert_eq!(
        summary_of(&h, &next),
        "Android asks: Allow Lens to access this device's location? (approving presses \"Allow\")"
    );
    let done = approve(&h, &next, ConfirmDecision::Approve).await;
    assert_eq!(done.status, ToolStatus::Ok);
    assert_eq!(permission(&h, "location"), "granted");
}

#[tokio::test]
async fn the_share_chooser_of_an_approved_share_is_asked_before_it_is_pressed() {
    let h = harness(&[]);
    let asked = h
        .call(
            &hermes(),
            request(
                "sh1",
                "openphone.share.text",
                json!({ "text": "see you at 8", "reason": "share the plan" }),
            ),
        )
        .await;
    let chooser = approve(&h, &confirmation_id(&asked), ConfirmDecision::Approve).await;
    assert_eq!(code(&chooser), Some("framework_confirmation_required"));
    assert!(
        h.phone
            .snapshot()
            .shares
            .last()
            .and_then(|s| s.target.clone())
            .is_none()
    );
    let done = approve(&h, &confirmation_id(&chooser), ConfirmDecision::Approve).await;
    assert_eq!(done.status, ToolStatus::Ok, "{done:?}");
    assert_eq!(done.result["os_dialog"]["kind"], "chooser");
    let state = h.phone.snapshot();
    assert_eq!(
        state
            .shares
            .last()
            .and_then(|s| s.target.clone())
            .as_deref(),
        Some("messages")
    );
}

/// Review finding 12: a runtime withdrawing a dialog's confirmation pressed "Don't allow" and
/// audited it as the user's answer. Only the user's denial presses the negative button.
#[tokio::test]
async fn withdrawing_a_dialogs_confirmation_pressed_dont_allow_as_the_user() {
    let h = harness(&["camera"]);
    let caller = trusted_hermes();
    let asked = h.call(&caller, trusted(open_lens("w1"))).await;
    let id = confirmation_id(&asked);
    let withdrawn = h.bridge.withdraw(&caller, &id).await.unwrap();
    assert_eq!(code(&withdrawn), Some("cancelled"), "{withdrawn:?}");
    let details = withdrawn.error.and_then(|e| e.details).expect("details");
    assert_eq!(details["os_dialog"]["answer"], "left_on_screen");
    assert_ne!(details["os_dialog"]["answered_by"], "user");
    assert!(h.phone.pending_dialog().is_some(), "left on the screen");
    assert_ne!(permission(&h, "camera"), "denied");
    let answers: Vec<(String, String)> = dialog_audit(&h, "hermes", "w1")
        .iter()
        .filter_map(|n| {
            Some((
                n["answer"].as_str()?.to_owned(),
                n["answered_by"].as_str()?.to_owned(),
            ))
        })
        .collect();
    assert_eq!(answers.last().map(|a| a.0.as_str()), Some("left_on_screen"));
    assert!(
        answers.last().is_some_and(|a| a.1.contains("withdrawn")),
        "{answers:?}"
    );
}

#[tokio::test]
async fn a_dialog_that_changed_on_the_phone_is_not_answered() {
    let h = harness(&["camera"]);
    let asked = h.call(&trusted_hermes(), trusted(open_lens("c1"))).await;
    let id = confirmation_id(&asked);
    // The user answers the prompt on the phone itself (Back) before approving here.
    h.phone
        .execute_sync(
            "openphone.input.press_key",
            &json!({ "key": "back", "reason": "dismiss" }),
        )
        .expect("back");
    let late = approve(&h, &id, ConfirmDecision::Approve).await;
    assert_eq!(
        code(&late),
        Some("framework_confirmation_failed"),
        "{late:?}"
    );
    assert_eq!(
        permission(&h, "camera"),
        "denied",
        "nothing was pressed after Back"
    );
}

#[tokio::test]
async fn an_apps_label_cannot_disguise_the_question() {
    // A label with a right-to-left override would read backwards in the prompt the user sees.
    let h = harness_labelled("Lens\u{202E}yap", &["camera"]);
    let asked = h.call(&trusted_hermes(), trusted(open_lens("b1"))).await;
    let summary = summary_of(&h, &confirmation_id(&asked));
    assert!(summary.contains("\\u{202E}"), "{summary}");
    assert!(!summary.contains('\u{202E}'), "{summary}");
}

/// Review finding 11: approving a confirmation did not re-check the runtime's phone grant, so
/// an old pending confirmation still ran on a phone since removed from its `[[runtimes]]
/// devices` — the request itself and a dialog's press alike.
#[tokio::test]
async fn approval_ran_on_a_phone_the_runtime_no_longer_has() {
    let h = harness(&["camera"]);
    // The request's own confirmation.
    let asked = h.call(&hermes(), open_lens("g1")).await;
    // A dialog's confirmation.
    let lens = h.call(&trusted_hermes(), trusted(open_lens("g3"))).await;
    assert_eq!(code(&lens), Some("framework_confirmation_required"));
    let after_dialog = h.actions();
    let mut grants = DeviceGrants::all();
    grants.limit("hermes", vec!["another-phone".to_owned()]);
    h.bridge.set_device_grants(grants);
    let refused = approve(&h, &confirmation_id(&asked), ConfirmDecision::Approve).await;
    assert_eq!(code(&refused), Some("tool_not_granted"), "{refused:?}");
    let refused = approve(&h, &confirmation_id(&lens), ConfirmDecision::Approve).await;
    assert_eq!(code(&refused), Some("tool_not_granted"), "{refused:?}");
    assert_eq!(h.actions(), after_dialog, "nothing ran on the phone");
    assert!(h.phone.pending_dialog().is_some(), "not pressed");
    assert_ne!(permission(&h, "camera"), "granted");
}

/// Review finding 20: a dialog's confirmation identity must carry the `@device` suffix the
/// request's own identity has with several phones, so the same request on two phones asks
/// about two dialogs, each pressed on its own phone.
#[tokio::test]
async fn a_dialogs_confirmation_identity_names_its_phone() {
    let lens_on = |clock: &ManualClock| {
        let mut doc: Value =
            serde_json::from_str(openphone_device::sim::DEFAULT_SCENARIO).expect("demo scenario");
        doc["apps"]
            .as_array_mut()
            .expect("apps")
            .push(json!({ "package": LENS, "label": "Lens" }));
        doc["system_dialogs"] =
            json!({ "permissions": [{ "package": LENS, "permission": "camera" }] });
        let state = SimState::from_json(&doc.to_string()).expect("valid scenario");
        Arc::new(SimPhone::new(state, Arc::new(clock.clone())).expect("phone"))
    };
    let start = SimState::from_json(openphone_device::sim::DEFAULT_SCENARIO)
        .expect("demo")
        .clock
        .start_ms;
    let clock = ManualClock::new(start);
    let (a, b) = (lens_on(&clock), lens_on(&clock));
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(openphone_store::Store::open(dir.path()).unwrap());
    let devices = openphone_core::Devices::new(vec![
        (
            "a".to_owned(),
            a.clone() as Arc<dyn openphone_device::PhoneDevice>,
        ),
        (
            "b".to_owned(),
            b.clone() as Arc<dyn openphone_device::PhoneDevice>,
        ),
    ])
    .unwrap();
    let bridge = openphone_core::ToolBridge::with_devices(
        registry(),
        store,
        devices,
        Arc::new(clock.clone()),
        Arc::new(openphone_core::EventBus::new(registry(), 64)),
        openphone_core::BridgeConfig::default(),
    );
    let caller = trusted_hermes();
    let mut ids = Vec::new();
    for phone in ["a", "b"] {
        let asked = bridge
            .invoke_on(
                &caller,
                trusted(open_lens("k1")),
                openphone_policy::Context::Interactive,
                Some(phone.to_owned()),
            )
            .await;
        assert_eq!(
            code(&asked),
            Some("framework_confirmation_required"),
            "{asked:?}"
        );
        let id = confirmation_id(&asked);
        let record = bridge
            .store()
            .get_confirmation(&id)
            .unwrap()
            .expect("stored");
        assert!(
            record
                .identity
                .idempotency_key
                .contains(&format!("@{phone}#dlg-")),
            "{:?}",
            record.identity
        );
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1], "two phones, two dialogs");
    let done = bridge
        .resolve(&operator(), &ids[1], ConfirmDecision::Approve)
        .await
        .unwrap();
    assert_eq!(done.status, ToolStatus::Ok, "{done:?}");
    assert!(a.pending_dialog().is_some(), "phone a's dialog untouched");
    assert_eq!(b.pending_dialog(), None);
}
