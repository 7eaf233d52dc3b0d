//! Realistic multi-step tasks driven purely through commands, asserting the end state.

use openphone_device::sim::{Direction, Route};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{
    demo_time, element, element_labelled, fail, phone, run, screen, shows, tap, type_text,
};

#[test]
fn reply_to_alice_with_unicode_text() {
    let (phone, clock) = phone();
    let opened = run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Messages" }),
    );
    assert_eq!(opened["package"], "com.android.messaging");

    let list = screen(&phone);
    assert_eq!(list["screen"], "conversations");
    let row = element_labelled(&list, "Alice Martin").expect("Alice's thread is listed");
    assert!(
        element(&list, &row).unwrap()["label"]
            .as_str()
            .unwrap()
            .contains("2 unread")
    );
    tap(&phone, &row);

    let thread = screen(&phone);
    assert_eq!(thread["title"], "Alice Martin");
    assert_eq!(
        thread["activity"],
        "com.android.messaging/.ui.ConversationActivity"
    );
    assert!(shows(&thread, "Are we still on for the review at 11?"));
    assert_eq!(
        element(&thread, "send").unwrap()["enabled"],
        false,
        "send is disabled while the field is empty"
    );

    tap(&phone, "message_input");
    clock.advance(30_000);
    let typed = type_text(&phone, "On my way — 5 min 🚗");
    assert_eq!(typed["value"], "On my way — 5 min 🚗");
    let ready = screen(&phone);
    assert_eq!(element(&ready, "send").unwrap()["enabled"], true);
    assert_eq!(element(&ready, "message_input").unwrap()["focused"], true);
    tap(&phone, "send");

    let state = phone.snapshot();
    let alice = state.threads.iter().find(|t| t.id == 200).unwrap();
    let last = alice.messages.last().unwrap();
    assert_eq!(last.body, "On my way — 5 min 🚗");
    assert_eq!(last.direction, Direction::Outgoing);
    assert_eq!(last.at_ms, clock_now(&clock));
    assert!(
        alice.messages.iter().all(|m| m.read),
        "opening the thread read it"
    );
    assert!(
        state
            .notifications
            .iter()
            .find(|n| n.key == "msg-alice-204")
            .unwrap()
            .read
    );

    let after = screen(&phone);
    assert!(
        shows(&after, "On my way — 5 min 🚗"),
        "the sent message is on screen"
    );
    assert_eq!(
        element(&after, "message_input").unwrap()["text"],
        "",
        "the field was cleared"
    );
    let found = run(
        &phone,
        "openphone.messages.search",
        json!({ "query": "5 min" }),
    );
    assert_eq!(found["messages"][0]["body"], "On my way — 5 min 🚗");
    assert_eq!(found["messages"][0]["direction"], "outgoing");
    let tools: Vec<_> = phone.action_log().iter().map(|r| r.tool.clone()).collect();
    assert_eq!(
        tools,
        [
            "openphone.app.open",
            "openphone.ui.tap_element",
            "openphone.ui.tap_element",
            "openphone.ui.type_text",
            "openphone.ui.tap_element"
        ]
    );
}

fn clock_now(clock: &openphone_clock::ManualClock) -> i64 {
    use openphone_clock::Clock as _;
    clock.now_ms()
}

#[test]
fn opening_a_notification_lands_on_the_right_screen() {
    let (phone, _clock) = phone();
    let unread_before = run(&phone, "openphone.notifications.list", json!({}))["unread_count"]
        .as_u64()
        .unwrap();

    let opened = run(
        &phone,
        "openphone.notifications.open",
        json!({ "query": "Kreuzberg" }),
    );
    assert_eq!(opened["notification"]["notification_key"], "msg-bob-211");
    assert_eq!(opened["screen"]["screen"], "thread");
    assert_eq!(opened["screen"]["title"], "Bob Nguyen");
    let thread = screen(&phone);
    assert!(shows(
        &thread,
        "Dinner tonight still good? 19:30 in Kreuzberg"
    ));
    // Back goes to the conversation list, as on a phone.
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "back" }),
    );
    assert_eq!(screen(&phone)["screen"], "conversations");

    let missed = run(
        &phone,
        "openphone.notifications.open",
        json!({ "package": "com.android.dialer" }),
    );
    assert_eq!(missed["screen"]["screen"], "call_log");
    assert!(shows(&screen(&phone), "Missed · 07:58"));

    let reminder = run(
        &phone,
        "openphone.notifications.open",
        json!({ "notification_key": "cal-standup" }),
    );
    assert_eq!(reminder["screen"]["screen"], "event_detail");
    assert_eq!(reminder["screen"]["title"], "Team stand-up");

    let parcel = run(
        &phone,
        "openphone.notifications.open",
        json!({ "query": "parcel" }),
    );
    assert_eq!(parcel["screen"]["package"], "com.example.parcels");
    assert_eq!(
        parcel["screen"]["activity"],
        "com.example.parcels/.ShipmentActivity"
    );
    let detail = screen(&phone);
    assert!(shows(
        &detail,
        "Out for delivery — arriving today between 10:00 and 12:00"
    ));
    assert_eq!(element(&detail, "reschedule").unwrap()["enabled"], false);
    let err = super::support::fail(
        &phone,
        "openphone.ui.tap_element",
        json!({ "element_id": "reschedule" }),
    );
    assert_eq!(err.code(), "element_disabled");

    let unread_after = run(&phone, "openphone.notifications.list", json!({}))["unread_count"]
        .as_u64()
        .unwrap();
    assert_eq!(unread_after, unread_before - 4);
    let err = super::support::fail(
        &phone,
        "openphone.notifications.open",
        json!({ "notification_key": "nope" }),
    );
    assert_eq!(err.code(), "not_found");
}

#[test]
fn tap_by_element_id_and_by_coordinates() {
    let (phone, _clock) = phone();
    let home = screen(&phone);
    assert_eq!(home["screen"], "home");
    let icon = element(&home, "app_icon_com.android.contacts").unwrap();
    let (x, y) = (icon["center"]["x"].clone(), icon["center"]["y"].clone());
    let tapped = run(&phone, "openphone.ui.tap", json!({ "x": x, "y": y }));
    assert_eq!(
        tapped["element"]["element_id"],
        "app_icon_com.android.contacts"
    );
    assert_eq!(tapped["screen"]["package"], "com.android.contacts");

    let contacts = screen(&phone);
    let bob = element(&contacts, "contact_3").unwrap();
    // Tapping the name label inside the row hits the row.
    let by_label = run(
        &phone,
        "openphone.ui.tap_element",
        json!({ "element_id": "contact_3_title" }),
    );
    assert_eq!(by_label["element"]["element_id"], "contact_3");
    assert_eq!(by_label["screen"]["title"], "Bob Nguyen");
    assert!(bob["clickable"].as_bool().unwrap());
    let detail = screen(&phone);
    assert!(shows(&detail, "+49 30 555 0199"));
    assert!(shows(&detail, "bob@example.org"));
    // An empty spot does nothing.
    let nothing = run(&phone, "openphone.ui.tap", json!({ "x": 5, "y": 2200 }));
    assert_eq!(nothing["element"], serde_json::Value::Null);
}

#[test]
fn a_draft_is_prepared_but_never_sent() {
    let (phone, _clock) = phone();
    let before = phone.snapshot().threads;
    let draft = run(
        &phone,
        "openphone.messages.draft",
        json!({ "contact_query": "bob nguyen", "body": "Running 10 min late 🙏" }),
    );
    assert_eq!(draft["sent"], false);
    assert_eq!(draft["draft"]["to"], "+49 170 555 0101");
    assert_eq!(draft["screen"]["screen"], "compose");
    assert_eq!(phone.snapshot().threads, before, "drafting sends nothing");
    let compose = screen(&phone);
    assert_eq!(
        element(&compose, "compose_body").unwrap()["text"],
        "Running 10 min late 🙏"
    );
    assert_eq!(compose["focused_element"], "compose_body");
    // The user reviews and sends it.
    tap(&phone, "send");
    let thread = screen(&phone);
    assert_eq!(thread["title"], "Bob Nguyen");
    let bob = phone
        .snapshot()
        .threads
        .into_iter()
        .find(|t| t.id == 210)
        .unwrap();
    assert_eq!(bob.messages.last().unwrap().body, "Running 10 min late 🙏");
}

#[test]
fn compose_a_new_message_by_name_through_the_ui() {
    let (phone, _clock) = phone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "com.android.messaging" }),
    );
    tap(&phone, "start_chat");
    assert_eq!(screen(&phone)["focused_element"], serde_json::Value::Null);
    tap(&phone, "compose_to");
    type_text(&phone, "Hann");
    let suggestions = screen(&phone);
    let suggestion = element_labelled(&suggestions, "Hannah Becker").expect("a suggestion");
    tap(&phone, &suggestion);
    tap(&phone, "compose_body");
    type_text(&phone, "Happy early birthday! 🎂");
    tap(&phone, "send");
    let thread = screen(&phone);
    assert_eq!(thread["screen"], "thread");
    assert_eq!(thread["title"], "Hannah Becker");
    let state = phone.snapshot();
    let t = state
        .threads
        .iter()
        .find(|t| t.address == "+49 152 7777 8888")
        .expect("a new thread");
    assert_eq!(t.messages.len(), 1);
}

#[test]
fn sending_by_command_appends_to_the_thread() {
    let (phone, _clock) = phone();
    let sent = run(
        &phone,
        "openphone.messages.send",
        json!({ "to": "+491705550101", "body": "On my way" }),
    );
    assert_eq!(
        sent["thread_id"], 210,
        "national/international spellings match the thread"
    );
    assert_eq!(sent["contact_name"], "Bob Nguyen");
    let err = super::support::fail(
        &phone,
        "openphone.messages.send",
        json!({ "to": "+49 170 555 0101", "body": "   " }),
    );
    assert_eq!(err.code(), "invalid_input");
    assert_eq!(err.details()["field"], "body");
}

#[test]
fn placing_a_call_shows_the_in_call_screen_and_logs_it() {
    let (phone, clock) = phone();
    let placed = run(
        &phone,
        "openphone.calls.place",
        json!({ "contact_query": "Dad" }),
    );
    assert_eq!(placed["number"], "+49 171 111 2233");
    assert_eq!(placed["screen"]["screen"], "in_call");
    let call_id = placed["call"]["call_id"].as_i64().unwrap();
    clock.advance(65_000);
    let in_call = screen(&phone);
    assert!(shows(&in_call, "01:05"));
    assert!(shows(&in_call, "Dad"));
    tap(&phone, "end_call");
    let state = phone.snapshot();
    let call = state.calls.iter().find(|c| c.id == call_id).unwrap();
    assert_eq!(call.duration_s, 65);
    assert_eq!(state.active_call, None);
    let outgoing = run(
        &phone,
        "openphone.calls.search",
        json!({ "type": "outgoing", "limit": 1 }),
    );
    assert_eq!(outgoing["calls"][0]["call_id"], call_id);
    assert_eq!(outgoing["calls"][0]["contact_name"], "Dad");
    assert_eq!(screen(&phone)["screen"], "call_log");
}

#[test]
fn call_search_filters_by_type_and_time() {
    let (phone, _clock) = phone();
    let missed = run(
        &phone,
        "openphone.calls.search",
        json!({ "type": "missed" }),
    );
    assert_eq!(missed["count"], 1);
    assert_eq!(missed["calls"][0]["contact_name"], "Dad");
    let yesterday = run(
        &phone,
        "openphone.calls.search",
        json!({ "since": demo_time(-1, 0, 0), "until": demo_time(-1, 23, 59) }),
    );
    let ids: Vec<_> = yesterday["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["call_id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [301, 302, 303]);
    let err = super::support::fail(
        &phone,
        "openphone.calls.search",
        json!({ "since": demo_time(0, 0, 0), "until": demo_time(-1, 0, 0) }),
    );
    assert_eq!(err.details()["field"], "until");
}

#[test]
fn urls_open_in_the_browser_and_other_schemes_are_explicit() {
    let (phone, _clock) = phone();
    let opened = run(
        &phone,
        "openphone.url.open",
        json!({ "url": "https://news.example.com/" }),
    );
    assert_eq!(opened["handled_by"], "com.android.browser");
    assert_eq!(opened["title"], "Example News");
    tap(&phone, "link_0");
    let article = screen(&phone);
    assert_eq!(article["title"], "Bike lanes: what changes");
    assert_eq!(
        element(&article, "url_bar").unwrap()["text"],
        "https://news.example.com/bike-lanes"
    );
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "back" }),
    );
    assert_eq!(screen(&phone)["title"], "Example News");
    // Typing into the URL bar and pressing enter navigates.
    tap(&phone, "url_bar");
    type_text(&phone, "flights.example/TP579");
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "enter" }),
    );
    assert_eq!(screen(&phone)["title"], "TP 579 Berlin → Lisbon");
    // Unknown sites show a generic page.
    run(
        &phone,
        "openphone.url.open",
        json!({ "url": "https://unknown.example.org/x" }),
    );
    assert!(shows(
        &screen(&phone),
        "This is a simulated page for https://unknown.example.org/x."
    ));

    let tel = run(
        &phone,
        "openphone.url.open",
        json!({ "url": "tel:+4930123456" }),
    );
    assert_eq!(tel["action"], "dial");
    let keypad = screen(&phone);
    assert_eq!(keypad["screen"], "dialpad");
    assert_eq!(
        element(&keypad, "dial_number").unwrap()["text"],
        "+4930123456"
    );
    assert_eq!(
        phone.snapshot().active_call,
        None,
        "tel: never calls by itself"
    );

    let sms = run(
        &phone,
        "openphone.url.open",
        json!({ "url": "sms:+4915212345?body=Hello%20there" }),
    );
    assert_eq!(sms["body"], "Hello there");
    assert_eq!(screen(&phone)["screen"], "compose");

    for bad in [
        "mailto:someone@example.com",
        "file:///etc/passwd",
        "ftp://example.com",
        "example.com",
        "https://",
    ] {
        let err = super::support::fail(&phone, "openphone.url.open", json!({ "url": bad }));
        assert_eq!(err.code(), "invalid_input", "{bad}");
        assert_eq!(err.details()["field"], "url");
    }
}

#[test]
fn device_status_is_a_context_card_about_a_person() {
    let (phone, _clock) = phone();
    let card = run(
        &phone,
        "openphone.device.status",
        json!({ "query": "Alice" }),
    );
    assert_eq!(card["contacts"][0]["name"], "Alice Martin");
    assert!(card["summary"].as_str().unwrap().contains("Alice Martin"));
    assert_eq!(card["calls"][0]["call_id"], 302);
    assert_eq!(card["messages"][0]["body"], "I booked Room 4.2 🙂");
    let titles: Vec<_> = card["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Team stand-up", "Design review"]);

    let by_number = run(
        &phone,
        "openphone.device.status",
        json!({ "number": "0171 111 2233" }),
    );
    assert_eq!(by_number["contacts"][0]["name"], "Dad");
    assert_eq!(by_number["calls"][0]["type"], "missed");

    let general = run(&phone, "openphone.device.status", json!({}));
    assert_eq!(general["device"]["battery_percent"], 76);
    assert_eq!(general["device"]["missed_calls_today"], 1);
    assert_eq!(general["next_event"]["title"], "Team stand-up");
}

#[test]
fn contacts_search_with_and_without_details() {
    let (phone, _clock) = phone();
    let brief = run(
        &phone,
        "openphone.contacts.search",
        json!({ "query": "martin" }),
    );
    assert_eq!(brief["count"], 2);
    assert!(brief["contacts"][0].get("phones").is_none());
    let detailed = run(
        &phone,
        "openphone.contacts.search",
        json!({ "query": "+49 170 555 0101", "include_details": true }),
    );
    assert_eq!(detailed["contacts"][0]["name"], "Bob Nguyen");
    assert_eq!(detailed["contacts"][0]["phones"][1]["label"], "work");
    let by_org = run(
        &phone,
        "openphone.contacts.search",
        json!({ "query": "Northwind" }),
    );
    assert_eq!(by_org["count"], 3);
}

#[test]
fn notifications_search_and_list() {
    let (phone, _clock) = phone();
    let list = run(
        &phone,
        "openphone.notifications.list",
        json!({ "limit": 2 }),
    );
    assert_eq!(list["count"], 2);
    assert_eq!(list["total"], 6);
    assert_eq!(
        list["notifications"][0]["notification_key"], "cal-standup",
        "newest first"
    );
    let found = run(
        &phone,
        "openphone.notifications.search",
        json!({ "query": "delivery" }),
    );
    assert_eq!(found["notifications"][0]["app_label"], "Parcel Tracker");
}

#[test]
fn sharing_text_records_the_share_and_shows_the_chooser() {
    let (phone, _clock) = phone();
    // The share sheet is Android's chooser, an OS dialog: the command reports it, and only the
    // user's answer (`resolve_dialog_now`, what the bridge calls) picks a target.
    let shared = fail(
        &phone,
        "openphone.share.text",
        json!({ "text": "Flight TP 579 at 10:05", "chooser_title": "Send itinerary" }),
    );
    assert_eq!(shared.code(), "framework_confirmation_required");
    let id = phone.snapshot().shares.last().unwrap().id;
    let sheet = screen(&phone);
    assert_eq!(sheet["screen"], "system_dialog");
    assert!(shows(&sheet, "Send itinerary"));
    let asked = fail(
        &phone,
        "openphone.ui.tap_element",
        json!({ "element_id": "share_target_notes" }),
    );
    let asked = openphone_device::PendingDialog::from_error(&asked).unwrap();
    phone.resolve_dialog_now(&asked.dialog_id, true).unwrap();
    let editor = screen(&phone);
    assert_eq!(editor["screen"], "note_editor");
    assert_eq!(
        element(&editor, "note_body").unwrap()["text"],
        "Flight TP 579 at 10:05"
    );
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "back" }),
    );
    let state = phone.snapshot();
    assert_eq!(
        state
            .shares
            .iter()
            .find(|s| s.id == id)
            .unwrap()
            .target
            .as_deref(),
        Some("notes")
    );
    assert!(
        state
            .notes
            .iter()
            .any(|n| n.body == "Flight TP 579 at 10:05"),
        "leaving the editor saved the note"
    );
}

#[test]
fn clipboard_paste_goes_into_the_focused_field() {
    let (phone, _clock) = phone();
    run(
        &phone,
        "openphone.clipboard.set",
        json!({ "text": "Booking ref QX7Z2K ✈" }),
    );
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Messages" }),
    );
    tap(&phone, "thread_230");
    let err = super::support::fail(&phone, "openphone.clipboard.paste", json!({}));
    assert_eq!(err.code(), "no_focused_field");
    tap(&phone, "message_input");
    type_text(&phone, "Ref: ");
    let pasted = run(&phone, "openphone.clipboard.paste", json!({}));
    assert_eq!(pasted["value"], "Ref: Booking ref QX7Z2K ✈");
    run(&phone, "openphone.clipboard.set", json!({ "text": "" }));
    let err = super::support::fail(&phone, "openphone.clipboard.paste", json!({}));
    assert_eq!(err.code(), "clipboard_empty");
}

#[test]
fn apps_search_and_open_by_label_or_package() {
    let (phone, _clock) = phone();
    let launchable = run(&phone, "openphone.apps.search", json!({}));
    let all = run(
        &phone,
        "openphone.apps.search",
        json!({ "include_system": true }),
    );
    assert_eq!(launchable["count"], 10);
    assert_eq!(all["count"], 12);
    let parcels = run(
        &phone,
        "openphone.apps.search",
        json!({ "query": "parcel" }),
    );
    assert_eq!(parcels["apps"][0]["package"], "com.example.parcels");
    let opened = run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "com.example.parcels" }),
    );
    assert_eq!(opened["screen"]["title"], "My parcels");
    let opened = run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Clock" }),
    );
    assert_eq!(opened["screen"]["screen"], "clock");
    let err = super::support::fail(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Phone Services" }),
    );
    assert_eq!(
        err.code(),
        "invalid_input",
        "non-launchable system apps cannot be opened"
    );
    let err = super::support::fail(&phone, "openphone.app.open", json!({ "label": "  " }));
    assert_eq!(err.details()["field"], "package_or_label");
    let err = super::support::fail(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "o" }),
    );
    assert_eq!(err.code(), "ambiguous_match");
}

#[test]
fn reopening_an_app_resumes_its_task() {
    let (phone, _clock) = phone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Messages" }),
    );
    tap(&phone, "thread_220");
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "home" }),
    );
    assert_eq!(screen(&phone)["screen"], "home");
    let state = phone.snapshot();
    let task = &state.nav.tasks[0];
    assert_eq!(
        task.stack.last().unwrap().route,
        Route::Thread { thread_id: 220 }
    );
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Messages" }),
    );
    assert_eq!(screen(&phone)["title"], "Dad");
}
