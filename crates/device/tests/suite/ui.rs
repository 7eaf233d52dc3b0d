//! The screen model: gestures, keys, focus, menus, overlays and their errors.

use openphone_device::PhoneDevice;
use serde_json::json;

use super::support::{
    element, element_labelled, exec, fail, phone, run, screen, shows, tap, type_text,
};

#[test]
fn swipes_scroll_lists_and_page_calendar_days() {
    let (phone, _clock) = phone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Contacts" }),
    );
    let top = screen(&phone);
    assert!(
        element(&top, "contact_2").is_some(),
        "Alex Martin is at the top"
    );
    assert!(
        element(&top, "contact_22").is_none(),
        "Yuki Tanaka is below the fold"
    );
    let list = element(&top, "contact_list").unwrap();
    assert_eq!(list["scrollable"], true);

    let swiped = run(
        &phone,
        "openphone.ui.swipe",
        json!({ "start_x": 540, "start_y": 1900, "end_x": 540, "end_y": 500 }),
    );
    assert!(
        swiped["effect"]
            .as_str()
            .unwrap()
            .starts_with("scrolled contact_list")
    );
    run(
        &phone,
        "openphone.ui.swipe",
        json!({ "start_x": 540, "start_y": 1900, "end_x": 540, "end_y": 500 }),
    );
    let scrolled = screen(&phone);
    assert!(
        element(&scrolled, "contact_22").is_some(),
        "the end of the list is visible"
    );
    assert!(
        element(&scrolled, "contact_2").is_none(),
        "the top scrolled away"
    );
    // Scrolling past the end is clamped.
    let again = run(
        &phone,
        "openphone.ui.swipe",
        json!({ "start_x": 540, "start_y": 1900, "end_x": 540, "end_y": 300 }),
    );
    assert_eq!(again["effect"], "already at the end of the list");
    for _ in 0..2 {
        run(
            &phone,
            "openphone.ui.swipe",
            json!({ "start_x": 540, "start_y": 400, "end_x": 540, "end_y": 2000 }),
        );
    }
    assert!(element(&screen(&phone), "contact_2").is_some());

    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Calendar" }),
    );
    run(
        &phone,
        "openphone.ui.swipe",
        json!({ "start_x": 900, "start_y": 1200, "end_x": 100, "end_y": 1200 }),
    );
    assert!(shows(&screen(&phone), "Fri 13 Mar 2026"));
    run(
        &phone,
        "openphone.ui.swipe",
        json!({ "start_x": 100, "start_y": 1200, "end_x": 900, "end_y": 1200 }),
    );
    assert!(shows(&screen(&phone), "Thu 12 Mar 2026"));
}

#[test]
fn out_of_range_coordinates_name_the_field() {
    let (phone, _clock) = phone();
    for (tool, params, field) in [
        ("openphone.ui.tap", json!({ "x": 1080, "y": 10 }), "x"),
        ("openphone.ui.tap", json!({ "x": 10, "y": 2400 }), "y"),
        ("openphone.ui.tap", json!({ "x": -0.5, "y": 10 }), "x"),
        (
            "openphone.ui.long_press",
            json!({ "x": 10, "y": 10, "duration_ms": 0 }),
            "duration_ms",
        ),
        (
            "openphone.ui.swipe",
            json!({ "start_x": 10, "start_y": 10, "end_x": 2000, "end_y": 10 }),
            "end_x",
        ),
        (
            "openphone.ui.swipe",
            json!({ "start_x": 10, "start_y": -3, "end_x": 20, "end_y": 10 }),
            "start_y",
        ),
    ] {
        let err = fail(&phone, tool, params);
        assert_eq!(err.code(), "invalid_input");
        assert_eq!(err.details()["field"], field, "{tool}");
    }
}

#[test]
fn long_press_opens_menus() {
    let (phone, _clock) = phone();
    // On the home screen: an app's menu.
    run(
        &phone,
        "openphone.ui.long_press_element",
        json!({ "element_id": "app_icon_com.android.camera" }),
    );
    let menu = screen(&phone);
    assert!(element(&menu, "menu_app_info").is_some());
    assert!(
        element(&menu, "app_icon_com.android.camera").is_none(),
        "the home screen is covered"
    );
    tap(&phone, "menu_app_info");
    let info = screen(&phone);
    assert_eq!(info["package"], "com.android.settings");
    assert!(shows(&info, "com.android.camera"));

    // In a conversation: copy a message.
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Messages" }),
    );
    tap(&phone, "thread_240");
    run(
        &phone,
        "openphone.ui.long_press_element",
        json!({ "element_id": "message_241" }),
    );
    tap(&phone, "menu_copy");
    assert_eq!(
        phone.snapshot().clipboard.as_deref(),
        Some("MyBank: your verification code is 482913. Never share it.")
    );

    // A short press is a tap, not a long press.
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "back" }),
    );
    let short = run(
        &phone,
        "openphone.ui.long_press_element",
        json!({ "element_id": "thread_230", "duration_ms": 100 }),
    );
    assert_eq!(short["action"], "tap");
    assert_eq!(screen(&phone)["title"], "Carla Rossi");

    // Deleting a conversation from its menu; tapping outside a menu dismisses it.
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "back" }),
    );
    run(
        &phone,
        "openphone.ui.long_press_element",
        json!({ "element_id": "thread_240" }),
    );
    tap(&phone, "menu_scrim");
    assert!(element(&screen(&phone), "menu_delete").is_none());
    run(
        &phone,
        "openphone.ui.long_press_element",
        json!({ "element_id": "thread_240" }),
    );
    tap(&phone, "menu_delete");
    assert!(phone.snapshot().threads.iter().all(|t| t.id != 240));
    assert!(element(&screen(&phone), "thread_240").is_none());
}

#[test]
fn keys_back_home_recents_enter() {
    let (phone, _clock) = phone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Settings" }),
    );
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Notes" }),
    );
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "recents" }),
    );
    let recents = screen(&phone);
    assert_eq!(recents["screen"], "recents");
    let order: Vec<_> = recents["interactive_elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            e["element_id"]
                .as_str()
                .filter(|id| id.starts_with("recent_"))
        })
        .map(str::to_string)
        .collect();
    assert_eq!(
        order,
        ["recent_com.android.notes", "recent_com.android.settings"]
    );
    tap(&phone, "recent_com.android.settings");
    assert_eq!(screen(&phone)["title"], "Settings");

    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "HOME" }),
    );
    assert_eq!(screen(&phone)["screen"], "home");
    let nothing = run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "back" }),
    );
    assert_eq!(nothing["effect"], "already on the home screen");

    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "recents" }),
    );
    tap(&phone, "clear_all");
    assert!(phone.snapshot().nav.tasks.is_empty());

    // Enter in a multi-line field is a new line; the note is saved on back.
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Notes" }),
    );
    tap(&phone, "new_note");
    type_text(&phone, "Call the bank");
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "enter" }),
    );
    type_text(&phone, "Ask about the card");
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "back" }),
    );
    assert!(
        phone
            .snapshot()
            .notes
            .iter()
            .any(|n| n.body == "Call the bank\nAsk about the card")
    );
    assert!(shows(&screen(&phone), "Call the bank Ask about the card"));
}

#[test]
fn focus_and_typing_rules() {
    let (phone, _clock) = phone();
    assert_eq!(
        fail(&phone, "openphone.ui.type_text", json!({ "text": "x" })).code(),
        "no_focused_field"
    );
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Phone" }),
    );
    tap(&phone, "open_keypad");
    assert_eq!(
        element(&screen(&phone), "dial_call").unwrap()["enabled"],
        false
    );
    let err = fail(
        &phone,
        "openphone.ui.tap_element",
        json!({ "element_id": "dial_call" }),
    );
    assert_eq!(err.code(), "element_disabled");
    assert_eq!(err.details()["element_id"], "dial_call");
    for key in ["key_0", "key_3", "key_0", "key_1", "key_2"] {
        tap(&phone, key);
    }
    tap(&phone, "dial_delete");
    let keypad = screen(&phone);
    assert_eq!(element(&keypad, "dial_number").unwrap()["text"], "0301");
    // Typing needs focus on the field; text is appended.
    tap(&phone, "dial_number");
    type_text(&phone, "234567");
    assert_eq!(
        element(&screen(&phone), "dial_number").unwrap()["text"],
        "0301234567"
    );
    let err = fail(&phone, "openphone.ui.type_text", json!({ "text": "" }));
    assert_eq!(err.details()["field"], "text");
    // A newline in a single-line field presses its action key: here, Call.
    type_text(&phone, "8\n");
    assert_eq!(screen(&phone)["screen"], "in_call");
    let state = phone.snapshot();
    assert_eq!(
        state
            .calls
            .iter()
            .find(|c| Some(c.id) == state.active_call)
            .unwrap()
            .number,
        "03012345678"
    );
}

#[test]
fn settings_toggles_change_the_state_and_the_status_bar() {
    let (phone, _clock) = phone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Settings" }),
    );
    let settings = screen(&phone);
    assert_eq!(element(&settings, "setting_wifi").unwrap()["checked"], true);
    assert!(shows(&settings, "Wi-Fi BT"));
    tap(&phone, "setting_airplane_mode");
    let after = screen(&phone);
    assert_eq!(
        element(&after, "setting_airplane_mode").unwrap()["checked"],
        true
    );
    assert_eq!(element(&after, "setting_wifi").unwrap()["checked"], false);
    let state = phone.snapshot();
    assert!(state.settings.airplane_mode && !state.settings.wifi && !state.settings.bluetooth);
    assert!(shows(&after, "Airplane"));
    tap(&phone, "settings_about");
    assert!(shows(&screen(&phone), "Android 15 (simulated)"));
}

#[test]
fn stale_element_ids_are_not_found() {
    let (phone, _clock) = phone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Messages" }),
    );
    tap(&phone, "thread_200");
    let err = fail(
        &phone,
        "openphone.ui.tap_element",
        json!({ "element_id": "thread_210" }),
    );
    assert_eq!(err.code(), "element_not_found");
    assert_eq!(err.details()["element_id"], "thread_210");
}

#[test]
fn understand_local_summarises_with_caps() {
    let (phone, _clock) = phone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Messages" }),
    );
    tap(&phone, "thread_200");
    let full = run(&phone, "openphone.screen.understand_local", json!({}));
    let summary = full["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("Messages — Alice Martin (thread)"),
        "{summary}"
    );
    assert!(summary.contains("Disabled: send"));
    let capped = run(
        &phone,
        "openphone.screen.understand_local",
        json!({ "max_visible_text": 2, "max_interactive_elements": 1000, "timeout_ms": 999_999 }),
    );
    assert_eq!(capped["visible_text"].as_array().unwrap().len(), 2);
    assert_eq!(capped["truncated"]["visible_text"], true);
    assert_eq!(capped["limits"]["max_interactive_elements"], 100);
    assert_eq!(capped["limits"]["timeout_ms"], 5000);
    let input = capped["interactive_elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["element_id"] == "message_input")
        .unwrap()
        .clone();
    assert_eq!(input["role"], "text_field");
}

#[test]
fn screen_get_honours_its_flags() {
    let (phone, _clock) = phone();
    let bare = run(
        &phone,
        "openphone.screen.get",
        json!({ "include_activity": false, "include_ui_tree": false }),
    );
    assert!(bare.get("activity").is_none());
    assert!(bare.get("ui_tree").is_none());
    assert!(bare.get("screenshot").is_none());
    let full = screen(&phone);
    assert_eq!(full["activity"], "com.android.launcher/.Launcher");
    assert_eq!(full["ui_tree"]["element_id"], "root");
    let ids = tree_ids(&full["ui_tree"]);
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(
        ids.len(),
        unique.len(),
        "element ids are unique on a screen"
    );
    assert!(element_labelled(&full, "Calendar").is_some());
    assert_eq!(
        phone.profile().screen_width,
        full["width"].as_u64().unwrap() as u32
    );
}

fn tree_ids(node: &serde_json::Value) -> Vec<String> {
    let mut out = vec![node["element_id"].as_str().unwrap().to_string()];
    for child in node["children"].as_array().into_iter().flatten() {
        out.extend(tree_ids(child));
    }
    out
}

#[test]
fn element_ids_are_unique_on_every_screen() {
    let (phone, _clock) = phone();
    let steps: Vec<(&str, serde_json::Value)> = vec![
        ("openphone.input.press_key", json!({ "key": "home" })),
        (
            "openphone.ui.long_press_element",
            json!({ "element_id": "app_icon_com.android.notes" }),
        ),
        (
            "openphone.app.open",
            json!({ "package_or_label": "Messages" }),
        ),
        (
            "openphone.ui.tap_element",
            json!({ "element_id": "thread_200" }),
        ),
        (
            "openphone.messages.draft",
            json!({ "to": "Ali", "body": "x" }),
        ),
        (
            "openphone.ui.tap_element",
            json!({ "element_id": "compose_to" }),
        ),
        ("openphone.app.open", json!({ "package_or_label": "Phone" })),
        (
            "openphone.ui.tap_element",
            json!({ "element_id": "open_keypad" }),
        ),
        (
            "openphone.app.open",
            json!({ "package_or_label": "Contacts" }),
        ),
        (
            "openphone.ui.tap_element",
            json!({ "element_id": "contact_3" }),
        ),
        (
            "openphone.app.open",
            json!({ "package_or_label": "Calendar" }),
        ),
        (
            "openphone.ui.tap_element",
            json!({ "element_id": "new_event" }),
        ),
        (
            "openphone.url.open",
            json!({ "url": "https://news.example.com/" }),
        ),
        (
            "openphone.app.open",
            json!({ "package_or_label": "Settings" }),
        ),
        ("openphone.app.open", json!({ "package_or_label": "Clock" })),
        ("openphone.app.open", json!({ "package_or_label": "Notes" })),
        (
            "openphone.app.open",
            json!({ "package_or_label": "Camera" }),
        ),
        (
            "openphone.ui.tap_element",
            json!({ "element_id": "shutter" }),
        ),
        (
            "openphone.app.open",
            json!({ "package_or_label": "Parcel Tracker" }),
        ),
        (
            "openphone.ui.tap_element",
            json!({ "element_id": "shipment_1" }),
        ),
        ("openphone.share.text", json!({ "text": "hello" })),
        ("openphone.input.press_key", json!({ "key": "back" })),
        ("openphone.input.press_key", json!({ "key": "recents" })),
    ];
    let mut screens = std::collections::HashSet::new();
    for (tool, params) in steps {
        // `share.text` puts up Android's chooser, an OS dialog the command reports.
        if let Err(e) = exec(&phone, tool, params.clone())
            && e.code() != "framework_confirmation_required"
        {
            panic!("{tool} {params} failed: {e}");
        }
        let shown = screen(&phone);
        screens.insert(shown["screen"].as_str().unwrap().to_string());
        let ids = tree_ids(&shown["ui_tree"]);
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(
            ids.len(),
            unique.len(),
            "duplicate ids on {}: {ids:?}",
            shown["screen"]
        );
    }
    assert!(screens.len() >= 15, "{screens:?}");
}
