//! The phone's world: injected messages, calls, notifications and notification actions, the
//! runtime's own notifications, the event stream, the scenario timeline and page reads.

use std::sync::Arc;

use openphone_clock::{Clock, ManualClock};
use openphone_device::{
    DeviceError, DeviceEvent, Injection, OPENPHONE_PACKAGE, PhoneDevice, SimPhone, SimState,
    SystemNotification,
};
use serde_json::{Value, json};
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::TryRecvError;

use super::support::{phone, run, screen};

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(future)
}

fn inject(phone: &SimPhone, injection: Injection) -> Result<DeviceEvent, DeviceError> {
    block_on(phone.inject(&injection))
}

fn drain(rx: &mut Receiver<DeviceEvent>) -> Vec<DeviceEvent> {
    let mut out = Vec::new();
    loop {
        match rx.try_recv() {
            Ok(e) => out.push(e),
            Err(TryRecvError::Empty) => return out,
            Err(e) => panic!("event stream: {e}"),
        }
    }
}

fn message(address: &str, text: &str) -> Injection {
    Injection::Message {
        address: address.into(),
        text: text.into(),
    }
}

fn notifications(phone: &SimPhone) -> Vec<Value> {
    run(phone, "openphone.notifications.list", json!({"limit": 100}))["notifications"]
        .as_array()
        .unwrap()
        .clone()
}

fn review(key: &str) -> SystemNotification {
    SystemNotification {
        key: key.into(),
        title: "Approval needed: messages send".into(),
        body: "Send \"running late\" to Bob?".into(),
        actions: vec![
            ("approve".into(), "Approve".into()),
            ("deny".into(), "Deny".into()),
        ],
    }
}

#[test]
fn a_message_from_a_contact_lands_in_their_thread_with_a_notification() {
    let (phone, clock) = phone();
    let mut rx = phone.subscribe().unwrap();
    let state = phone.snapshot();
    let bob = state
        .contacts
        .iter()
        .find(|c| c.name.starts_with("Bob"))
        .unwrap();
    let number = bob.phones[0].number.clone();
    let thread = state
        .threads
        .iter()
        .find(|t| t.address == number)
        .unwrap()
        .id;
    clock.advance(60_000);

    let event = inject(&phone, message(&number, "Running 10 min late")).unwrap();

    let now = clock.now_ms();
    assert_eq!(
        event,
        DeviceEvent::MessageReceived {
            thread_id: thread,
            address: number.clone(),
            name: Some(bob.name.clone()),
            text: "Running 10 min late".into(),
            at_ms: now,
        }
    );
    let events = drain(&mut rx);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0], event);
    assert!(matches!(
        &events[1],
        DeviceEvent::NotificationPosted { app, package, title, text, .. }
            if app == "Messages" && package == "com.android.messaging"
                && title == &bob.name && text == "Running 10 min late"
    ));
    let found = run(
        &phone,
        "openphone.messages.search",
        json!({"thread_id": thread, "limit": 1}),
    );
    assert_eq!(found["messages"][0]["body"], "Running 10 min late");
    assert_eq!(found["messages"][0]["direction"], "incoming");
    assert_eq!(found["messages"][0]["read"], false);
    let shade = notifications(&phone);
    assert_eq!(shade[0]["title"], bob.name.as_str());
    assert_eq!(shade[0]["read"], false);

    // A second message updates the conversation's notification in place.
    inject(&phone, message(&bob.name, "Now 20")).unwrap();
    let again = notifications(&phone);
    assert_eq!(again.len(), shade.len());
    assert_eq!(again[0]["text"], "Now 20");
}

#[test]
fn a_message_from_a_new_sender_starts_a_thread_and_opening_it_shows_the_text() {
    let (phone, _clock) = phone();
    let before = phone.snapshot().threads.len();
    let DeviceEvent::MessageReceived {
        thread_id, name, ..
    } = inject(&phone, message("+1 555 0100 999", "Your code is 4242")).unwrap()
    else {
        panic!("not a message event");
    };
    assert_eq!(name, None);
    assert_eq!(phone.snapshot().threads.len(), before + 1);
    let opened = run(
        &phone,
        "openphone.notifications.open",
        json!({"notification_key": format!("sms-thread-{thread_id}")}),
    );
    assert_eq!(opened["screen"]["screen"], "thread");
    assert!(super::support::shows(&screen(&phone), "Your code is 4242"));

    // A short-code sender by name.
    let DeviceEvent::MessageReceived { address, .. } =
        inject(&phone, message("PARCELCO", "Out for delivery")).unwrap()
    else {
        panic!("not a message event");
    };
    assert_eq!(address, "PARCELCO");
}

#[test]
fn a_missed_call_is_logged_and_notified_an_answered_one_only_logged() {
    let (phone, _clock) = phone();
    let mut rx = phone.subscribe().unwrap();
    let missed = inject(
        &phone,
        Injection::Call {
            number: "+49 30 1234 5678".into(),
            outcome: None,
        },
    )
    .unwrap();
    assert!(matches!(
        &missed,
        DeviceEvent::CallReceived { outcome, direction, .. }
            if outcome == "missed" && direction == "incoming"
    ));
    let events = drain(&mut rx);
    assert_eq!(events.len(), 2);
    assert!(
        matches!(&events[1], DeviceEvent::NotificationPosted { title, .. } if title == "Missed call")
    );
    let calls = run(
        &phone,
        "openphone.calls.search",
        json!({"type": "missed", "limit": 1}),
    );
    assert_eq!(calls["calls"][0]["number"], "+493012345678");

    inject(
        &phone,
        Injection::Call {
            number: "+49 30 1234 5678".into(),
            outcome: Some("answered".into()),
        },
    )
    .unwrap();
    assert_eq!(
        drain(&mut rx).len(),
        1,
        "an answered call posts no notification"
    );
    let err = inject(
        &phone,
        Injection::Call {
            number: "+49 30 1234 5678".into(),
            outcome: Some("voicemail".into()),
        },
    )
    .unwrap_err();
    assert_eq!(err.code(), "invalid_input");
    assert!(
        drain(&mut rx).is_empty(),
        "a refused injection raises nothing"
    );
}

#[test]
fn an_injected_notification_reaches_the_shade_and_an_unknown_app_is_refused() {
    let (phone, clock) = phone();
    clock.advance(60_000);
    let event = inject(
        &phone,
        Injection::Notification {
            app: "calendar".into(),
            title: "Dentist in 1 hour".into(),
            text: "Bring the insurance card".into(),
        },
    )
    .unwrap();
    let DeviceEvent::NotificationPosted { key, app, .. } = event else {
        panic!("not a notification event");
    };
    assert_eq!(app, "Calendar");
    assert_eq!(notifications(&phone)[0]["notification_key"], key.as_str());
    let before = phone.snapshot();
    let err = inject(
        &phone,
        Injection::Notification {
            app: "NoSuchApp".into(),
            title: "x".into(),
            text: String::new(),
        },
    )
    .unwrap_err();
    assert_eq!(err.code(), "app_not_found");
    assert_eq!(phone.snapshot(), before, "nothing changed");
}

#[test]
fn the_runtimes_own_notification_is_updated_in_place_and_withdrawn() {
    let (phone, clock) = phone();
    clock.advance(60_000);
    let key = block_on(phone.post_notification(&review("job-7-review"))).unwrap();
    assert_eq!(key, "job-7-review");
    let shade = notifications(&phone);
    assert_eq!(shade[0]["app_label"], "OpenPhone");
    assert_eq!(shade[0]["package"], OPENPHONE_PACKAGE);
    assert_eq!(shade[0]["action_labels"], json!(["Approve", "Deny"]));

    let mut updated = review("job-7-review");
    updated.title = "Approved".into();
    updated.actions.clear();
    block_on(phone.post_notification(&updated)).unwrap();
    let shade2 = notifications(&phone);
    assert_eq!(shade2.len(), shade.len(), "updated in place");
    assert_eq!(shade2[0]["title"], "Approved");

    assert!(block_on(phone.withdraw_notification("job-7-review")).unwrap());
    assert!(!block_on(phone.withdraw_notification("job-7-review")).unwrap());
    assert_eq!(notifications(&phone).len(), shade.len() - 1);
    // Another app's notification is not the runtime's to withdraw.
    let other = shade
        .iter()
        .find(|n| n["package"] != OPENPHONE_PACKAGE)
        .unwrap()["notification_key"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!block_on(phone.withdraw_notification(&other)).unwrap());
}

#[test]
fn a_notification_action_is_raised_only_for_an_action_the_notification_has() {
    let (phone, _clock) = phone();
    let mut rx = phone.subscribe().unwrap();
    block_on(phone.post_notification(&review("job-9-review"))).unwrap();
    drain(&mut rx);
    let press = |key: &str, action: &str| {
        inject(
            &phone,
            Injection::NotificationAction {
                key: key.into(),
                action: action.into(),
            },
        )
    };
    assert_eq!(
        press("job-9-review", "launch").unwrap_err().code(),
        "invalid_input"
    );
    assert_eq!(
        press("no-such-key", "approve").unwrap_err().code(),
        "not_found"
    );
    let plain = notifications(&phone)
        .iter()
        .find(|n| n["package"] != OPENPHONE_PACKAGE)
        .unwrap()["notification_key"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        press(&plain, "approve").unwrap_err().code(),
        "invalid_input"
    );
    assert!(drain(&mut rx).is_empty());

    let event = press("job-9-review", "approve").unwrap();
    assert!(matches!(
        &event,
        DeviceEvent::NotificationAction { key, action, .. } if key == "job-9-review" && action == "approve"
    ));
    assert_eq!(drain(&mut rx), vec![event]);
}

fn find_node(tree: &Value, id: &str) -> Option<Value> {
    if tree["element_id"] == id {
        return Some(tree.clone());
    }
    tree["children"]
        .as_array()?
        .iter()
        .find_map(|c| find_node(c, id))
}

/// SECURITY: the buttons of a review notification are shown in the shade, but no tap of an
/// agent presses them: a tap on them, on their element, or on the notification itself raises
/// no `NotificationAction` (only the operator's `inject` does).
#[test]
fn regression_an_agent_tap_cannot_press_a_review_notifications_approve_button() {
    let (phone, _clock) = phone();
    block_on(phone.post_notification(&review("job-3-review"))).unwrap();
    let mut rx = phone.subscribe().unwrap();

    let opened = run(
        &phone,
        "openphone.ui.swipe",
        json!({"start_x": 540, "start_y": 40, "end_x": 540, "end_y": 1400}),
    );
    assert_eq!(opened["effect"], "opened the notification shade");
    let shown = screen(&phone);
    assert_eq!(shown["screen"], "notification_shade");
    let labels = find_node(&shown["ui_tree"], "notification_job_3_review_actions")
        .expect("the action buttons are shown");
    assert_eq!(labels["text"], "Approve   Deny");
    assert_eq!(labels["clickable"], false);
    assert!(
        shown["interactive_elements"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| !e["label"].as_str().unwrap_or_default().contains("Approve")),
        "no interactive element offers Approve"
    );

    let (x, y) = (labels["center"]["x"].clone(), labels["center"]["y"].clone());
    let tapped = run(&phone, "openphone.ui.tap", json!({"x": x, "y": y}));
    assert_eq!(tapped["effect"], "nothing to touch here");
    let tapped = run(
        &phone,
        "openphone.ui.tap_element",
        json!({"element_id": "notification_job_3_review_actions"}),
    );
    assert_eq!(tapped["effect"], "nothing to touch here");
    run(
        &phone,
        "openphone.ui.long_press_element",
        json!({"element_id": "notification_job_3_review_actions"}),
    );
    // Tapping the notification itself opens it: marked read, nothing decided.
    let opened = run(
        &phone,
        "openphone.ui.tap_element",
        json!({"element_id": "notification_job_3_review"}),
    );
    assert!(
        opened["effect"]
            .as_str()
            .unwrap()
            .starts_with("opened notification")
    );
    run(
        &phone,
        "openphone.notifications.open",
        json!({"notification_key": "job-3-review"}),
    );
    assert!(
        !drain(&mut rx)
            .iter()
            .any(|e| matches!(e, DeviceEvent::NotificationAction { .. })),
        "a tap raised a notification action"
    );
    assert!(
        phone
            .snapshot()
            .notifications
            .iter()
            .any(|n| n.key == "job-3-review"),
        "the review is still waiting"
    );
}

#[test]
fn the_shade_closes_with_back_and_an_upward_swipe() {
    let (phone, _clock) = phone();
    let swipe = |sy: i64, ey: i64| {
        run(
            &phone,
            "openphone.ui.swipe",
            json!({"start_x": 540, "start_y": sy, "end_x": 540, "end_y": ey}),
        )
    };
    swipe(30, 1200);
    assert_eq!(screen(&phone)["screen"], "notification_shade");
    assert_eq!(swipe(1500, 300)["effect"], "closed the notification shade");
    assert_eq!(screen(&phone)["screen"], "home");
    swipe(30, 1200);
    run(&phone, "openphone.input.press_key", json!({"key": "back"}));
    assert_eq!(screen(&phone)["screen"], "home");
}

fn timeline_phone(timeline: Value) -> (SimPhone, ManualClock, i64) {
    let mut doc: Value = serde_json::from_str(openphone_device::sim::DEFAULT_SCENARIO).unwrap();
    doc["timeline"] = timeline;
    let state = SimState::from_json(&doc.to_string()).unwrap();
    let start = state.clock.start_ms;
    let clock = ManualClock::new(start);
    let phone = SimPhone::new(state, Arc::new(clock.clone())).unwrap();
    (phone, clock, start)
}

#[test]
fn the_timeline_fires_due_entries_once_in_order() {
    let start = SimState::default_scenario().unwrap().clock.start_ms;
    let (phone, _clock, _) = timeline_phone(json!([
        {"after_ms": 60_000, "inject": {"kind": "message", "address": "+1 555 0100 777", "text": "first by file order"}},
        {"at_ms": start + 30_000, "inject": {"kind": "call", "number": "+1 555 0100 778"}},
        {"after_ms": 60_000, "inject": {"kind": "notification", "app": "Clock", "title": "Timer done"}},
        {"after_ms": 3_600_000, "inject": {"kind": "notification_action", "key": "nope", "action": "x"}},
    ]));
    let mut rx = phone.subscribe().unwrap();
    assert!(phone.fire_due(start + 29_999).is_empty());
    assert_eq!(phone.next_due(), Some(start + 30_000));

    let fired = phone.fire_due(start + 60_000);
    let order: Vec<usize> = fired.iter().map(|f| f.index).collect();
    assert_eq!(order, vec![1, 0, 2], "earliest first, file order on ties");
    assert!(fired.iter().all(|f| f.error.is_none()));
    let kinds: Vec<&str> = drain(&mut rx).iter().map(DeviceEvent::event_name).collect();
    assert_eq!(
        kinds,
        [
            "phone.call.received",
            "phone.notification.posted",
            "phone.message.received",
            "phone.notification.posted",
            "phone.notification.posted",
        ]
    );
    assert!(phone.fire_due(start + 60_000).is_empty(), "never twice");

    // An entry that cannot apply is reported once and not retried.
    let failed = phone.fire_due(start + 3_600_000);
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].error.as_ref().unwrap().code(), "not_found");
    assert!(phone.fire_due(start + 7_200_000).is_empty());
    assert_eq!(phone.next_due(), None);

    // A restored snapshot remembers what fired.
    let restored = SimPhone::from_state(phone.snapshot(), phone.clock()).unwrap();
    assert!(restored.fire_due(start + 7_200_000).is_empty());
}

#[test]
fn the_timeline_driver_fires_as_the_clock_moves() {
    let (phone, clock, start) = timeline_phone(json!([
        {"after_ms": 120_000, "inject": {"kind": "message", "address": "Alice Martin", "text": "Driver test"}},
    ]));
    let phone = Arc::new(phone);
    let mut rx = phone.subscribe().unwrap();
    block_on(async {
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let driver = {
            let phone = Arc::clone(&phone);
            tokio::spawn(async move {
                phone
                    .run_timeline(async {
                        let _ = stop_rx.await;
                    })
                    .await;
            })
        };
        tokio::task::yield_now().await;
        clock.set(start + 120_000);
        let event = tokio::time::timeout(std::time::Duration::from_secs(30), rx.recv())
            .await
            .expect("the driver fired the entry")
            .unwrap();
        assert!(
            matches!(event, DeviceEvent::MessageReceived { ref text, .. } if text == "Driver test")
        );
        let _ = stop_tx.send(());
        driver.await.unwrap();
    });
}

#[test]
fn a_timeline_web_page_changes_what_fetch_page_reads() {
    let (phone, _clock, start) = timeline_phone(json!([
        {"after_ms": 1_000, "web_page": {"url": "https://shop.example/item", "title": "Item", "paragraphs": ["Price: 90 EUR"]}},
    ]));
    let before = block_on(phone.fetch_page("https://shop.example/item")).unwrap();
    assert!(before.text.contains("simulated page"));
    phone.fire_due(start + 1_000);
    let after = block_on(phone.fetch_page("https://shop.example/item/")).unwrap();
    assert_eq!(after.title, "Item");
    assert_eq!(after.text, "Price: 90 EUR");
    let news = block_on(phone.fetch_page("https://news.example.com/")).unwrap();
    assert!(
        news.text.contains("bike lanes")
            && news.text.contains("<https://news.example.com/weather>")
    );
    assert_eq!(
        block_on(phone.fetch_page("ftp://x")).unwrap_err().code(),
        "invalid_input"
    );
}

#[test]
fn bad_timeline_entries_are_refused_with_their_path() {
    for (timeline, path) in [
        (
            json!([{"inject": {"kind": "message", "address": "a", "text": "b"}}]),
            "timeline[0]",
        ),
        (
            json!([{"at_ms": 5, "after_ms": 5, "inject": {"kind": "message", "address": "a", "text": "b"}}]),
            "timeline[0]",
        ),
        (json!([{"after_ms": 5}]), "timeline[0]"),
        (
            json!([{"after_ms": -1, "inject": {"kind": "message", "address": "a", "text": "b"}}]),
            "timeline[0].after_ms",
        ),
        (
            json!([{"after_ms": 1, "inject": {"kind": "call", "number": "1", "outcome": "maybe"}}]),
            "timeline[0].inject.outcome",
        ),
        (
            json!([{"after_ms": 1, "web_page": {"url": "nope", "title": "t"}}]),
            "timeline[0].web_page.url",
        ),
    ] {
        let mut doc: Value = serde_json::from_str(openphone_device::sim::DEFAULT_SCENARIO).unwrap();
        doc["timeline"] = timeline.clone();
        let err = SimState::from_json(&doc.to_string()).unwrap_err();
        assert_eq!(err.path(), Some(path), "{timeline}: {err}");
    }
    let mut doc: Value = serde_json::from_str(openphone_device::sim::DEFAULT_SCENARIO).unwrap();
    doc["timeline"] = json!([{"after_ms": 1, "inject": {"kind": "sms", "address": "a"}}]);
    assert!(
        SimState::from_json(&doc.to_string())
            .unwrap_err()
            .path()
            .unwrap()
            .starts_with("timeline[0]")
    );
}

#[test]
fn an_offline_phone_refuses_injections() {
    let (phone, _clock) = phone();
    phone.set_online(false);
    assert_eq!(
        inject(&phone, message("+1 555 0100 999", "hi"))
            .unwrap_err()
            .code(),
        "device_offline"
    );
}
