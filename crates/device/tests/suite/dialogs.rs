//! OS-level dialogs on the simulated phone: a permission prompt on an app's first open, "Open
//! with" for a URL several apps open, the share chooser of `share.text`, a payment sheet behind
//! a declared button. Each is raised as `framework_confirmation_required` with its Android
//! package, stays on screen, is never pressed by a tap of the runtime's, and is answered only
//! through `resolve_dialog_now` (what the bridge calls on the user's answer).

use openphone_clock::ManualClock;
use openphone_device::dialog::{self, PendingDialog};
use openphone_device::{DeviceError, ScenarioError, SimPhone, SimState};
use serde_json::{Value, json};

use super::support::{element, exec, fail, run, screen, shows};

const LENS: &str = "com.example.lens";
const SHOP: &str = "com.example.shop";

/// The demo scenario plus two apps: Lens (asks camera, then location; a "Buy filters" button
/// raising a payment sheet) and Shop (opens shop URLs beside the Browser).
fn scenario() -> Value {
    let mut doc: Value =
        serde_json::from_str(openphone_device::sim::DEFAULT_SCENARIO).expect("demo scenario");
    let apps = doc["apps"].as_array_mut().expect("the demo lists its apps");
    apps.push(json!({
        "package": LENS, "label": "Lens",
        "screens": [{ "id": "main", "title": "Lens", "elements": [
            { "id": "buy", "kind": "button", "text": "Buy filters" },
            { "id": "about", "kind": "button", "text": "About" }
        ]}]
    }));
    apps.push(json!({ "package": SHOP, "label": "Shop" }));
    doc["system_dialogs"] = json!({
        "permissions": [
            { "package": LENS, "permission": "camera" },
            { "package": LENS, "permission": "location" }
        ],
        "url_handlers": [{ "url_prefix": "https://shop.example/", "packages": [SHOP, "com.android.browser"] }],
        "payments": [{ "package": LENS, "element": "buy", "merchant": "Lens Filters Ltd", "amount": "€2.99" }]
    });
    doc
}

fn phone_from(doc: &Value) -> SimPhone {
    let state = SimState::from_json(&doc.to_string()).expect("the scenario is valid");
    let clock = ManualClock::new(state.clock.start_ms);
    SimPhone::new(state, std::sync::Arc::new(clock)).expect("phone")
}

fn dialog_of(error: &DeviceError) -> PendingDialog {
    PendingDialog::from_error(error)
        .unwrap_or_else(|| panic!("expected framework_confirmation_required, got {error}"))
}

fn permission_state(phone: &SimPhone, permission: &str) -> String {
    let state = phone.snapshot();
    let decl = state
        .system_dialogs
        .permissions
        .iter()
        .find(|d| d.permission == permission)
        .expect("declared");
    serde_json::to_value(decl.state)
        .expect("serialises")
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn an_app_that_asks_a_permission_shows_the_prompt_on_its_first_open_and_keeps_it_up() {
    let phone = phone_from(&scenario());
    let error = fail(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": LENS }),
    );
    assert_eq!(error.code(), "framework_confirmation_required");
    let asked = dialog_of(&error);
    assert_eq!(asked.kind, dialog::kind::PERMISSION);
    assert_eq!(asked.package, "com.android.permissioncontroller");
    assert_eq!(
        asked.summary,
        "Allow Lens to take pictures and record video?"
    );
    // The app did open beneath the prompt (the command's effect is kept and logged).
    assert_eq!(phone.snapshot().nav.foreground.as_deref(), Some(LENS));
    let log = phone.action_log();
    let last = log.last().expect("logged");
    assert_eq!(last.tool, "openphone.app.open");
    assert!(
        last.summary.contains("Android asks: Allow Lens"),
        "{}",
        last.summary
    );
    // The screen is the permission controller's, with Android's own button ids.
    let shown = screen(&phone);
    assert_eq!(shown["package"], "com.android.permissioncontroller");
    assert!(element(&shown, "permission_allow_foreground_only_button").is_some());
    assert!(element(&shown, "permission_deny_button").is_some());
    assert!(
        element(&shown, "buy").is_none(),
        "the app beneath cannot be touched"
    );
    assert_eq!(phone.pending_dialog(), Some(asked.clone()));
    // A tap of the runtime's on "While using the app" is not performed: the user is asked.
    let again = fail(
        &phone,
        "openphone.ui.tap_element",
        json!({ "element_id": "permission_allow_foreground_only_button" }),
    );
    assert_eq!(dialog_of(&again), asked);
    assert_eq!(permission_state(&phone, "camera"), "ask");
    // Typing into it is refused; a swipe does nothing; the prompt stays.
    let typed = fail(&phone, "openphone.ui.type_text", json!({ "text": "hi" }));
    assert_eq!(typed.code(), "invalid_input");
    run(
        &phone,
        "openphone.ui.swipe",
        json!({ "start_x": 500, "start_y": 1500, "end_x": 500, "end_y": 500 }),
    );
    assert_eq!(phone.pending_dialog(), Some(asked));
}

#[test]
fn the_users_allow_grants_the_permission_and_hands_back_the_commands_result() {
    let phone = phone_from(&scenario());
    let camera = dialog_of(&fail(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": LENS }),
    ));
    // Allowing the camera raises the app's next prompt (location): the answer is kept.
    let next = phone
        .resolve_dialog_now(&camera.dialog_id, true)
        .expect_err("the app asks its next permission");
    let location = dialog_of(&next);
    assert_eq!(
        location.summary,
        "Allow Lens to access this device's location?"
    );
    assert_eq!(permission_state(&phone, "camera"), "granted");
    let answered = phone
        .resolve_dialog_now(&location.dialog_id, true)
        .expect("answered");
    assert_eq!(answered["accepted"], true);
    assert_eq!(answered["kind"], "permission");
    assert_eq!(answered["asked"], location.summary);
    assert_eq!(answered["result"]["opened"], true, "{answered}");
    assert_eq!(answered["screen"]["package"], LENS);
    assert_eq!(permission_state(&phone, "location"), "granted");
    assert_eq!(phone.pending_dialog(), None);
    let log = phone.action_log();
    assert_eq!(log.last().map(|r| r.tool.as_str()), Some("system.dialog"));
    // Granted permissions are not asked again.
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "home" }),
    );
    let reopened = run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": LENS }),
    );
    assert_eq!(reopened["opened"], true);
}

#[test]
fn deny_and_back_leave_the_permission_denied_and_it_is_not_asked_again() {
    let phone = phone_from(&scenario());
    let camera = dialog_of(&fail(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": LENS }),
    ));
    let next = phone
        .resolve_dialog_now(&camera.dialog_id, false)
        .expect_err("location is asked next");
    assert_eq!(permission_state(&phone, "camera"), "denied");
    assert_eq!(
        dialog_of(&next).summary,
        "Allow Lens to access this device's location?"
    );
    // Back is the negative answer too, and the runtime may give it.
    let back = run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "back" }),
    );
    assert!(
        back["effect"]
            .as_str()
            .unwrap_or_default()
            .contains("denied"),
        "{back}"
    );
    assert_eq!(permission_state(&phone, "location"), "denied");
    assert_eq!(phone.pending_dialog(), None);
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "home" }),
    );
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": LENS }),
    );
    assert_eq!(phone.pending_dialog(), None);
}

#[test]
fn an_answer_for_a_dialog_no_longer_on_screen_presses_nothing() {
    let phone = phone_from(&scenario());
    let camera = dialog_of(&fail(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": LENS }),
    ));
    let stranger = PendingDialog::new(
        "permission",
        "com.android.permissioncontroller",
        "Allow Lens to record audio?",
    );
    let refused = phone
        .resolve_dialog_now(&stranger.dialog_id, true)
        .expect_err("another dialog");
    assert_eq!(refused.code(), "invalid_input");
    assert_eq!(permission_state(&phone, "camera"), "ask");
    assert_eq!(phone.pending_dialog(), Some(camera));
}

#[test]
fn a_url_several_apps_open_asks_open_with_and_a_choice_changes_the_question() {
    let phone = phone_from(&scenario());
    let url = "https://shop.example/lens-cap";
    let asked = dialog_of(&fail(&phone, "openphone.url.open", json!({ "url": url })));
    assert_eq!(asked.kind, dialog::kind::CHOOSER);
    assert_eq!(asked.package, "android");
    assert_eq!(asked.summary, format!("Open {url} with Shop?"));
    let shown = screen(&phone);
    assert_eq!(
        shown["activity"],
        "android/com.android.internal.app.ResolverActivity"
    );
    assert!(
        phone.snapshot().browser.history.iter().all(|u| u != url),
        "not opened yet"
    );
    // The runtime picks the Browser: that selects it and asks again, about the Browser.
    let picked = dialog_of(&fail(
        &phone,
        "openphone.ui.tap_element",
        json!({ "element_id": "resolver_item_1" }),
    ));
    assert_eq!(picked.summary, format!("Open {url} with Browser?"));
    // The user approved the question they were shown first; the dialog says something else now.
    assert!(phone.resolve_dialog_now(&asked.dialog_id, true).is_err());
    let opened = phone
        .resolve_dialog_now(&picked.dialog_id, true)
        .expect("opened");
    assert_eq!(opened["effect"], format!("opened {url} with Browser"));
    assert!(phone.snapshot().browser.history.iter().any(|u| u == url));
    // Other URLs open without asking.
    run(
        &phone,
        "openphone.url.open",
        json!({ "url": "https://example.com/" }),
    );
    assert_eq!(phone.pending_dialog(), None);
}

#[test]
fn share_text_opens_the_system_chooser_and_the_users_answer_shares() {
    let phone = phone_from(&scenario());
    let asked = dialog_of(&fail(
        &phone,
        "openphone.share.text",
        json!({ "text": "Flight TP 579 at 10:05", "chooser_title": "Send itinerary" }),
    ));
    assert_eq!(asked.kind, dialog::kind::CHOOSER);
    assert_eq!(
        asked.summary,
        "Share \"Flight TP 579 at 10:05\" with Messages?"
    );
    let shown = screen(&phone);
    assert_eq!(
        shown["activity"],
        "android/com.android.internal.app.ChooserActivity"
    );
    assert!(shows(&shown, "Send itinerary"));
    // The share is recorded, its target not chosen yet.
    let state = phone.snapshot();
    let share = state.shares.last().expect("recorded");
    assert_eq!(share.target, None);
    let notes = dialog_of(&fail(
        &phone,
        "openphone.ui.tap_element",
        json!({ "element_id": "share_target_notes" }),
    ));
    assert_eq!(
        notes.summary,
        "Share \"Flight TP 579 at 10:05\" with Notes?"
    );
    phone
        .resolve_dialog_now(&notes.dialog_id, true)
        .expect("shared");
    let editor = screen(&phone);
    assert_eq!(editor["screen"], "note_editor");
    assert_eq!(
        element(&editor, "note_body").expect("note body")["text"],
        "Flight TP 579 at 10:05"
    );
    assert_eq!(
        phone
            .snapshot()
            .shares
            .last()
            .and_then(|s| s.target.clone())
            .as_deref(),
        Some("notes")
    );
}

#[test]
fn a_declared_button_raises_a_payment_sheet_that_only_the_user_pays() {
    let mut doc = scenario();
    doc["system_dialogs"]["permissions"] = json!([]);
    let phone = phone_from(&doc);
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": LENS }),
    );
    // A tap elsewhere in the app does what it always does.
    run(
        &phone,
        "openphone.ui.tap_element",
        json!({ "element_id": "about" }),
    );
    let asked = dialog_of(&fail(
        &phone,
        "openphone.ui.tap_element",
        json!({ "element_id": "buy" }),
    ));
    assert_eq!(asked.kind, dialog::kind::PAYMENT);
    assert_eq!(asked.package, "com.google.android.gms");
    assert_eq!(asked.summary, "Pay €2.99 to Lens Filters Ltd?");
    assert_eq!(screen(&phone)["package"], "com.google.android.gms");
    // "Pay" by the runtime is left for the user; "Cancel" is the runtime's to press.
    let pay = fail(
        &phone,
        "openphone.ui.tap_element",
        json!({ "element_id": "pay_button" }),
    );
    assert_eq!(dialog_of(&pay), asked);
    let cancelled = run(
        &phone,
        "openphone.ui.tap_element",
        json!({ "element_id": "cancel_button" }),
    );
    assert_eq!(cancelled["effect"], "cancelled the payment");
    assert!(phone.snapshot().system_dialogs.paid.is_empty());
    // Tapped again, and paid by the user's answer: once.
    let again = dialog_of(&fail(
        &phone,
        "openphone.ui.tap_element",
        json!({ "element_id": "buy" }),
    ));
    let paid = phone
        .resolve_dialog_now(&again.dialog_id, true)
        .expect("paid");
    assert_eq!(paid["effect"], "paid €2.99 to Lens Filters Ltd");
    assert_eq!(phone.snapshot().system_dialogs.paid.len(), 1);
    assert!(
        phone.resolve_dialog_now(&again.dialog_id, true).is_err(),
        "answered once"
    );
    assert_eq!(phone.snapshot().system_dialogs.paid.len(), 1);
}

#[test]
fn a_dialog_on_screen_survives_a_snapshot_and_restore() {
    let phone = phone_from(&scenario());
    let asked = dialog_of(&fail(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": LENS }),
    ));
    let json = serde_json::to_string(&phone.snapshot()).expect("serialises");
    let restored = phone_from(&serde_json::from_str::<Value>(&json).expect("json"));
    assert_eq!(restored.pending_dialog(), Some(asked.clone()));
    restored
        .resolve_dialog_now(&asked.dialog_id, true)
        .expect_err("location next");
}

#[test]
fn dialog_declarations_naming_nothing_are_refused_with_their_path() {
    let invalid = |patch: &dyn Fn(&mut Value)| {
        let mut doc = scenario();
        patch(&mut doc);
        match SimState::from_json(&doc.to_string()) {
            Err(ScenarioError::Invalid { path, .. }) => path,
            other => panic!("expected an invalid scenario, got {other:?}"),
        }
    };
    assert_eq!(
        invalid(&|d| d["system_dialogs"]["url_handlers"][0]["packages"] = json!([SHOP])),
        "system_dialogs.url_handlers[0].packages"
    );
    assert_eq!(
        invalid(&|d| d["system_dialogs"]["permissions"][0]["permission"] = json!("body_sensors")),
        "system_dialogs.permissions[0].message"
    );
    assert_eq!(
        invalid(&|d| d["system_dialogs"]["payments"][0]["package"] = json!("com.example.none")),
        "system_dialogs.payments[0].package"
    );
    // An unknown permission with its wording is fine.
    let mut doc = scenario();
    doc["system_dialogs"]["permissions"][0] = json!({ "package": LENS, "permission": "body_sensors", "message": "access sensor data about your vital signs" });
    let phone = phone_from(&doc);
    let asked = dialog_of(&fail(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": LENS }),
    ));
    assert_eq!(
        asked.summary,
        "Allow Lens to access sensor data about your vital signs?"
    );
    let _ = exec(&phone, "openphone.screen.get", json!({}));
}
