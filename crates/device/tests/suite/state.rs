//! Snapshots, restore, the action log, transactions, offline mode and concurrency.

use std::sync::Arc;

use openphone_clock::ManualClock;
use openphone_device::{PhoneDevice, SimPhone, SimState};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::support::{exec_raw, fail, phone, run, screen, tap, type_text};

#[test]
fn a_snapshot_restores_the_same_phone() {
    let (phone, clock) = phone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Messages" }),
    );
    tap(&phone, "thread_210");
    tap(&phone, "message_input");
    type_text(&phone, "half-typed ✍️");
    run(&phone, "openphone.clipboard.set", json!({ "text": "kept" }));
    let snapshot = phone.snapshot();

    // Through JSON, as a daemon would persist it.
    let json = snapshot.to_json();
    let restored_state = SimState::from_json(&json).unwrap();
    assert_eq!(restored_state, snapshot);
    let restored = SimPhone::from_state(
        restored_state,
        Arc::new(ManualClock::new(openphone_clock::Clock::now_ms(&clock))),
    )
    .unwrap();
    assert_eq!(screen(&restored), screen(&phone));
    assert_eq!(restored.action_log(), phone.action_log());
    // New ids never collide with restored ones.
    let sent = run(
        &restored,
        "openphone.messages.send",
        json!({ "to": "+49 170 555 0101", "body": "x" }),
    );
    let id = sent["message"]["message_id"].as_i64().unwrap();
    let all_ids: Vec<i64> = restored
        .snapshot()
        .threads
        .iter()
        .flat_map(|t| t.messages.iter().map(|m| m.id))
        .collect();
    assert_eq!(all_ids.iter().filter(|m| **m == id).count(), 1);
}

#[test]
fn the_action_log_records_mutating_commands_only() {
    let (phone, clock) = phone();
    run(&phone, "openphone.notifications.list", json!({}));
    clock.advance(1_000);
    let start_at = super::support::demo_time(0, 18, 0);
    run(
        &phone,
        "openphone.calendar.add",
        json!({ "title": "Gym", "start_at": start_at }),
    );
    let _ = exec_raw(
        &phone,
        "openphone.calendar.add",
        json!({ "title": "Gym", "start_at": 1, "end_at": 1, "_runtime": "builtin" }),
    );
    let log = phone.action_log();
    assert_eq!(log.len(), 1, "reads and failures are not logged");
    assert_eq!(log[0].seq, 1);
    assert_eq!(log[0].tool, "openphone.calendar.add");
    assert!(log[0].summary.contains("\"Gym\""));
    assert_eq!(log[0].at_ms, openphone_clock::Clock::now_ms(&clock));
    assert_eq!(log[0].params["title"], "Gym");

    // Reserved `_` keys are not part of the record.
    run(&phone, "openphone.clipboard.set", json!({ "text": "t" }));
    let _ = exec_raw(
        &phone,
        "openphone.clipboard.set",
        json!({ "text": "u", "_runtime": "builtin" }),
    );
    let last = phone.action_log().pop().unwrap();
    assert!(last.params.get("_runtime").is_none());
    assert_eq!(last.seq, 3);
}

#[test]
fn a_failed_command_changes_nothing() {
    let (phone, _clock) = phone();
    let before = phone.snapshot();
    let err = fail(
        &phone,
        "openphone.calendar.update",
        json!({ "event_id": 101, "title": "New title", "end_at": 5 }),
    );
    assert_eq!(err.code(), "invalid_input");
    assert_eq!(phone.snapshot(), before);
    let err = fail(
        &phone,
        "openphone.calendar.update",
        json!({ "event_id": 101 }),
    );
    assert_eq!(err.details()["field"], "event_id");
}

#[test]
fn an_offline_phone_says_so() {
    let (phone, _clock) = phone();
    phone.set_online(false);
    let err = fail(&phone, "openphone.screen.get", json!({}));
    assert_eq!(err.code(), "device_offline");
    phone.set_online(true);
    run(&phone, "openphone.screen.get", json!({}));
}

#[test]
fn concurrent_commands_are_serialised() {
    let (phone, _clock) = phone();
    let phone: Arc<dyn PhoneDevice> = Arc::new(phone);
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let phone = Arc::clone(&phone);
            std::thread::spawn(move || {
                for j in 0..10 {
                    let body = format!("msg {i}-{j}");
                    super::support::run(
                        phone.as_ref(),
                        "openphone.messages.send",
                        json!({ "to": "+49 171 111 2233", "body": body }),
                    );
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let found = run(
        phone.as_ref(),
        "openphone.messages.search",
        json!({ "thread_id": 220, "limit": 100 }),
    );
    assert_eq!(found["total"], 41);
}

#[test]
fn shifting_a_scenario_to_today_keeps_times_of_day() {
    let mut state = SimState::default_scenario().unwrap();
    let start = state.clock.start_ms;
    let first = state.events[0].start_ms;
    state.shift_to_day_of(start + 10 * 86_400_000 + 3_600_000);
    assert_eq!(state.clock.start_ms, start + 10 * 86_400_000);
    assert_eq!(state.events[0].start_ms, first + 10 * 86_400_000);
}

#[test]
fn the_default_phone_follows_its_clock_to_today() {
    let start = SimState::default_scenario().unwrap().clock.start_ms;
    let later = start + 30 * 86_400_000 + 2 * 3_600_000;
    let clock = Arc::new(ManualClock::new(later));
    let phone = SimPhone::with_default_scenario(clock).unwrap();
    let today = run(
        &phone,
        "openphone.calendar.search",
        json!({ "start_at": start + 30 * 86_400_000 - 9 * 3_600_000, "end_at": start + 30 * 86_400_000 + 15 * 3_600_000 }),
    );
    assert!(
        today["count"].as_u64().unwrap() >= 4,
        "the demo day moved to the clock's day: {today}"
    );
}
