//! Calendar tasks driven purely through commands, asserting the end state: adding events
//! through the app and by command, editing and deleting them, and the limits on times.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{demo_time, element, phone, run, screen, shows, tap, type_text};

#[test]
fn add_an_event_through_the_calendar_ui() {
    let (phone, _clock) = phone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "calendar" }),
    );
    let agenda = screen(&phone);
    assert_eq!(agenda["screen"], "agenda");
    assert!(shows(&agenda, "Thu 12 Mar 2026"));
    assert!(shows(&agenda, "Design review"));
    // Tomorrow, via the next-day button.
    tap(&phone, "next_day");
    assert!(shows(&screen(&phone), "Flight to Lisbon TP 579"));
    tap(&phone, "new_event");
    let form = screen(&phone);
    assert_eq!(form["screen"], "event_form");
    assert_eq!(form["focused_element"], "event_title");
    assert_eq!(element(&form, "event_date").unwrap()["text"], "2026-03-13");
    assert_eq!(element(&form, "save_event").unwrap()["enabled"], false);

    type_text(&phone, "Coffee with Hannah ☕");
    // Replace the pre-filled times: long press → Clear, then type.
    run(
        &phone,
        "openphone.ui.long_press_element",
        json!({ "element_id": "event_start" }),
    );
    tap(&phone, "menu_clear");
    type_text(&phone, "16:30");
    run(
        &phone,
        "openphone.ui.long_press_element",
        json!({ "element_id": "event_end" }),
    );
    tap(&phone, "menu_clear");
    type_text(&phone, "17:15");
    tap(&phone, "event_location");
    type_text(&phone, "Café Lisboa");
    tap(&phone, "save_event");

    let back_on_agenda = screen(&phone);
    assert_eq!(back_on_agenda["screen"], "agenda");
    assert!(shows(&back_on_agenda, "Fri 13 Mar 2026"));
    assert!(shows(&back_on_agenda, "Coffee with Hannah ☕"));
    let found = run(
        &phone,
        "openphone.calendar.search",
        json!({ "query": "coffee" }),
    );
    assert_eq!(found["count"], 1);
    let event = &found["events"][0];
    assert_eq!(event["start_at"], demo_time(1, 16, 30));
    assert_eq!(event["end_at"], demo_time(1, 17, 15));
    assert_eq!(event["location"], "Café Lisboa");
    assert_eq!(event["local_start"], "2026-03-13 16:30");
}

#[test]
fn the_event_form_reports_bad_times_on_screen() {
    let (phone, _clock) = phone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Calendar" }),
    );
    tap(&phone, "new_event");
    type_text(&phone, "Broken");
    run(
        &phone,
        "openphone.ui.long_press_element",
        json!({ "element_id": "event_start" }),
    );
    tap(&phone, "menu_clear");
    type_text(&phone, "25:99");
    let before = phone.snapshot().events.len();
    tap(&phone, "save_event");
    let form = screen(&phone);
    assert_eq!(form["screen"], "event_form", "the form stays open");
    assert!(shows(&form, "Enter the start time as HH:MM"));
    assert_eq!(phone.snapshot().events.len(), before);
}

#[test]
fn add_an_event_with_the_command_and_see_it_in_the_app() {
    let (phone, _clock) = phone();
    let added = run(
        &phone,
        "openphone.calendar.add",
        json!({ "title": "Pick up parcel", "start_at": demo_time(0, 17, 0), "duration_minutes": 20, "location": "Post office", "calendar_id": 1 }),
    );
    assert_eq!(added["created"], true);
    let id = added["event"]["event_id"].as_i64().unwrap();
    assert_eq!(added["event"]["end_at"], demo_time(0, 17, 20));
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Calendar" }),
    );
    let agenda = screen(&phone);
    let row = format!("event_{id}");
    assert!(element(&agenda, &row).is_some());
    assert!(shows(&agenda, "17:00 - 17:20 · Post office"));

    // Update moves it and keeps its length; delete removes it from the agenda.
    let updated = run(
        &phone,
        "openphone.calendar.update",
        json!({ "event_id": id, "start_at": demo_time(0, 18, 0) }),
    );
    assert_eq!(updated["event"]["end_at"], demo_time(0, 18, 20));
    assert_eq!(updated["changed"], json!(["start_at"]));
    assert!(shows(&screen(&phone), "18:00 - 18:20 · Post office"));
    run(
        &phone,
        "openphone.calendar.delete",
        json!({ "event_id": id }),
    );
    assert!(element(&screen(&phone), &row).is_none());
    let err = super::support::fail(
        &phone,
        "openphone.calendar.delete",
        json!({ "event_id": id }),
    );
    assert_eq!(err.code(), "not_found");
}

#[test]
fn all_day_events_cover_whole_local_days() {
    let (phone, _clock) = phone();
    let added = run(
        &phone,
        "openphone.calendar.add",
        json!({ "title": "Conference", "start_at": demo_time(3, 14, 0), "all_day": true }),
    );
    assert_eq!(added["event"]["start_at"], demo_time(3, 0, 0));
    assert_eq!(added["event"]["end_at"], demo_time(4, 0, 0));
    let day = run(
        &phone,
        "openphone.calendar.search",
        json!({ "start_at": demo_time(3, 0, 0), "end_at": demo_time(4, 0, 0) }),
    );
    assert_eq!(day["events"][0]["title"], "Conference");
}

#[test]
fn edit_and_delete_an_event_in_the_calendar_app() {
    let (phone, _clock) = phone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Calendar" }),
    );
    tap(&phone, "event_102");
    let detail = screen(&phone);
    assert_eq!(detail["title"], "Lunch with Carla");
    assert!(shows(&detail, "Thu 12 Mar 2026 · 12:30 - 13:30"));
    tap(&phone, "edit_event");
    let form = screen(&phone);
    assert_eq!(element(&form, "event_start").unwrap()["text"], "12:30");
    run(
        &phone,
        "openphone.ui.long_press_element",
        json!({ "element_id": "event_end" }),
    );
    tap(&phone, "menu_clear");
    type_text(&phone, "14:00");
    tap(&phone, "save_event");
    let updated = screen(&phone);
    assert_eq!(
        updated["screen"], "event_detail",
        "saving an edit returns to the details"
    );
    assert!(shows(&updated, "Thu 12 Mar 2026 · 12:30 - 14:00"));
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "back" }),
    );
    assert!(shows(&screen(&phone), "12:30 - 14:00 · Trattoria Roma"));
    let event = phone
        .snapshot()
        .events
        .into_iter()
        .find(|e| e.id == 102)
        .unwrap();
    assert_eq!(event.end_ms, demo_time(0, 14, 0));

    tap(&phone, "event_103");
    tap(&phone, "delete_event");
    let agenda = screen(&phone);
    assert_eq!(agenda["screen"], "agenda");
    assert!(!shows(&agenda, "Dentist"));
    assert!(phone.snapshot().events.iter().all(|e| e.id != 103));
}

#[test]
fn times_beyond_year_9999_are_rejected() {
    let (phone, _clock) = phone();
    let err = super::support::fail(
        &phone,
        "openphone.calendar.add",
        json!({ "title": "Far", "start_at": 9_000_000_000_000_000i64 }),
    );
    assert_eq!(err.details()["field"], "start_at");
    let err = super::support::fail(&phone, "openphone.calls.search", json!({ "since": -1 }));
    assert_eq!(err.details()["field"], "since");
}
