//! What makes watchers fire: messages, calls, notifications, deadlines, time, pages, screens.

use openphone_core::events::Event as BusEvent;
use openphone_device::sim::WebPage;
use openphone_device::{Injection, SimState};
use openphone_protocol::endpoint::AuditKind;
use openphone_store::WatcherState;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::support::{BOB, Harness, Options, WordJudge, message, operator, registry};

fn fired_events(rx: &mut tokio::sync::broadcast::Receiver<BusEvent>) -> Vec<Value> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if e.name == "watcher.fired" {
            out.push(e.payload);
        }
    }
    out
}

#[tokio::test]
async fn a_message_text_contains_watcher_fires_once() {
    let h = Harness::new();
    let mut bus = h.bridge.events().subscribe();
    // The user's own watcher: its attention request goes to the runtime routed for the
    // `watcher` surface (a runtime's goes to that runtime: `authority.rs`).
    let w = h
        .watcher_as(
            &operator(),
            json!({"title": "Bob is late", "source": "message", "address": "Bob Nguyen",
                        "evaluator": "text_contains", "query": "LATE"}),
        )
        .await;
    assert_eq!(w.source, "message");

    // Someone else, and Bob without the word: nothing.
    assert!(
        h.inject(message("+49 30 999 888", "running late"))
            .await
            .is_empty()
    );
    assert!(h.inject(message(BOB, "on my way")).await.is_empty());

    let fired = h.inject(message(BOB, "Running late, sorry")).await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(
        (fired[0].trigger.as_str(), fired[0].reaction.as_str()),
        ("event", "attention")
    );
    assert!(fired[0].ended);
    let after = h.watcher_now(w.watcher_id);
    assert_eq!((after.state, after.fire_count), (WatcherState::Stopped, 1));
    assert_eq!(after.end_reason.as_deref(), Some("fired"));

    // Once: a second matching message does nothing.
    assert!(h.inject(message(BOB, "still late")).await.is_empty());
    assert_eq!(h.store.watcher_firings(w.watcher_id).unwrap().len(), 1);

    // watcher.fired, the audit record (ids and digests, never the text), the attention
    // request with the event as untrusted data.
    let events = fired_events(&mut bus);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["watcher_id"], w.watcher_id);
    assert_eq!(events[0]["reaction"], "attention");
    let records = h
        .store
        .find_audit(&format!("watcher:{}:1", w.watcher_id))
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].entry.kind, AuditKind::BackgroundEvent);
    assert_eq!(records[0].entry.tool.as_deref(), Some("watcher.fired"));
    let proof = records[0].entry.policy_proof.clone().unwrap();
    assert_eq!(proof["event_digest"], events[0]["event_digest"]);
    assert!(
        !serde_json::to_string(&records[0])
            .unwrap()
            .contains("Running late")
    );
    let attended = h.recorder.attended.lock().unwrap().clone();
    assert_eq!(attended.len(), 1);
    assert_eq!(attended[0].source.as_str(), "watcher");
    let context = serde_json::to_value(&attended[0].context).unwrap();
    assert_eq!(context["trust"], "untrusted_data");
    assert!(context.to_string().contains("Running late, sorry"));
    let firing = &h.store.watcher_firings(w.watcher_id).unwrap()[0];
    assert_eq!(firing.reaction_state, "done");
    assert_eq!(firing.reaction_note, attended[0].phone_session_id);
}

#[tokio::test]
async fn a_recurring_watcher_fires_each_time() {
    let h = Harness::new();
    let w = h
        .watcher(
            json!({"title": "Every SMS", "source": "message", "match_any": true,
                        "recurring": true}),
        )
        .await;
    for text in ["one", "two", "three"] {
        h.clock.advance(1_000);
        assert_eq!(
            h.inject(message("+49 30 111 222", text)).await.len(),
            1,
            "{text}"
        );
    }
    let after = h.watcher_now(w.watcher_id);
    assert_eq!((after.state, after.fire_count), (WatcherState::Active, 3));
    // The Messages app's notification for each message is not a message: still three.
    assert_eq!(h.store.watcher_firings(w.watcher_id).unwrap().len(), 3);
}

#[tokio::test]
async fn no_reply_fires_at_the_deadline_only_when_no_reply_came() {
    let h = Harness::new();
    let deadline = h.now() + 3_600_000;
    let silent = h
        .watcher(
            json!({"title": "Did Bob answer?", "type": "message_reply", "address": BOB,
                        "notify_on": "no_reply", "deadline_at": deadline}),
        )
        .await;
    assert_eq!(silent.source, "message", "the legacy type is mapped");
    let answered = h
        .watcher(json!({"title": "Did Alice answer?", "source": "message",
                        "address": "Alice Martin", "notify_on": "no_reply",
                        "deadline_at": deadline}))
        .await;

    assert!(h.watchers.tick(deadline - 1).await.is_empty());
    // Alice replies in time: her watcher is satisfied, silently.
    assert!(
        h.inject(message("Alice Martin", "yes, see you"))
            .await
            .is_empty()
    );
    let alice = h.watcher_now(answered.watcher_id);
    assert_eq!(alice.end_reason.as_deref(), Some("reply_received"));

    h.clock.set(deadline);
    let fired = h.watchers.tick(deadline).await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(fired[0].watcher_id, silent.watcher_id);
    assert_eq!(fired[0].trigger, "deadline");
    let firing = &h.store.watcher_firings(silent.watcher_id).unwrap()[0];
    assert_eq!(firing.event["kind"], "deadline_passed");
    assert_eq!(firing.event["address"], BOB);
    // Never again.
    assert!(h.watchers.tick(deadline + 60_000).await.is_empty());
    assert_eq!(
        h.store.watcher_firings(answered.watcher_id).unwrap().len(),
        0
    );
}

#[tokio::test]
async fn a_reply_watcher_with_a_deadline_ends_quietly_when_it_passes() {
    let h = Harness::new();
    let deadline = h.now() + 60_000;
    let w = h
        .watcher(
            json!({"title": "Reply by noon", "source": "message", "address": BOB,
                        "deadline_at": deadline}),
        )
        .await;
    assert!(h.watchers.tick(deadline).await.is_empty());
    assert_eq!(
        h.watcher_now(w.watcher_id).end_reason.as_deref(),
        Some("deadline_passed")
    );
    h.clock.set(deadline + 1);
    assert!(h.inject(message(BOB, "too late now")).await.is_empty());
}

#[tokio::test]
async fn call_and_notification_watchers_fire_on_their_events() {
    let h = Harness::new();
    let call = h
        .watcher(json!({"title": "Bank calls", "source": "call", "number": "030 1234567"}))
        .await;
    let any_call = h
        .watcher(
            json!({"title": "Anyone rings", "source": "call", "match_any": true,
                        "direction": "incoming", "recurring": true}),
        )
        .await;
    let note = h
        .watcher(json!({"title": "Parcel", "source": "notification", "query": "delivered"}))
        .await;
    let fired = h
        .inject(Injection::Call {
            number: "+49 30 1234567".into(),
            outcome: None,
        })
        .await;
    let ids: Vec<i64> = fired.iter().map(|f| f.watcher_id).collect();
    assert_eq!(ids, vec![call.watcher_id, any_call.watcher_id]);
    // A missed call's own notification does not mention a delivery.
    assert_eq!(h.watcher_now(note.watcher_id).fire_count, 0);
    let fired = h
        .inject(Injection::Notification {
            app: "Calendar".into(),
            title: "Parcel delivered".into(),
            text: "at the door".into(),
        })
        .await;
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].watcher_id, note.watcher_id);
}

#[tokio::test]
async fn the_runtimes_own_notifications_do_not_fire_notification_watchers() {
    let h = Harness::new();
    let w = h
        .watcher(
            json!({"title": "Everything", "source": "notification", "match_any": true,
                        "recurring": true}),
        )
        .await;
    let mut rx = h.bridge.device_events().unwrap();
    h.bridge
        .post_notification(&openphone_device::SystemNotification {
            key: "job-1-result".into(),
            title: "Job done".into(),
            body: "All good".into(),
            actions: vec![],
        })
        .await
        .unwrap();
    let event = rx.try_recv().unwrap();
    assert!(h.feed(&[event]).await.is_empty());
    assert_eq!(h.watcher_now(w.watcher_id).fire_count, 0);
}

#[tokio::test]
async fn a_time_watcher_fires_when_due_and_a_recurring_one_moves_on() {
    let h = Harness::new();
    let t0 = h.now();
    let once = h
        .watcher(json!({"title": "Stand up", "source": "time", "next_run_at": t0 + 60_000}))
        .await;
    let daily = h
        .watcher(json!({"title": "Every 10 min", "source": "time",
                        "schedule": {"next_run_at": t0 + 60_000, "interval_ms": 600_000}}))
        .await;
    assert!(h.watchers.tick(t0 + 59_999).await.is_empty());
    // Late by 25 minutes: one firing each, the recurring one's next time after now.
    let late = t0 + 60_000 + 1_500_000;
    let fired = h.watchers.tick(late).await;
    assert_eq!(fired.len(), 2);
    assert_eq!(h.watcher_now(once.watcher_id).state, WatcherState::Stopped);
    let next = h.watcher_now(daily.watcher_id).cursor["next_at"]
        .as_i64()
        .unwrap();
    assert_eq!(next, t0 + 60_000 + 3 * 600_000);
    assert!(h.watchers.tick(late).await.is_empty());
    assert_eq!(h.watchers.tick(next).await.len(), 1);
}

fn shop(state: &mut SimState, price: &str) {
    state.web_pages.push(WebPage {
        url: "https://shop.example/item".into(),
        title: "Item".into(),
        paragraphs: vec![format!("Price: {price}")],
        links: vec![],
    });
}

#[tokio::test]
async fn a_web_hash_change_watcher_fires_after_the_page_changes() {
    let mut state = SimState::default_scenario().unwrap();
    shop(&mut state, "90 EUR");
    let h = Harness::on_state(state, Options::default());
    let t0 = h.now();
    let w = h
        .watcher(json!({"title": "Price page", "type": "web_change",
                        "url": "https://shop.example/item", "interval_ms": 60_000}))
        .await;
    // The first read is the baseline; an unchanged page does not fire; a read is not due
    // before its interval.
    assert!(h.watchers.tick(t0).await.is_empty());
    assert!(h.watcher_now(w.watcher_id).cursor["hash"].is_string());
    assert!(h.watchers.tick(t0 + 60_000).await.is_empty());
    h.phone
        .put_web_page(WebPage {
            url: "https://shop.example/item".into(),
            title: "Item".into(),
            paragraphs: vec!["Price: 75 EUR".into()],
            links: vec![],
        })
        .unwrap();
    assert!(h.watchers.tick(t0 + 60_001).await.is_empty(), "not due yet");
    let fired = h.watchers.tick(t0 + 120_000).await;
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].trigger, "poll");
    let firing = &h.store.watcher_firings(w.watcher_id).unwrap()[0];
    assert_eq!(firing.event["url"], "https://shop.example/item");
    assert_eq!(firing.event["text"], "Price: 75 EUR");
}

#[tokio::test]
async fn a_screen_text_watcher_reads_the_screen_through_the_bridge() {
    let h = Harness::new();
    let t0 = h.now();
    let w = h
        .watcher(json!({"title": "Shopping list shown", "source": "screen", "query": "groceries"}))
        .await;
    assert!(
        h.watchers.tick(t0).await.is_empty(),
        "the home screen does not say it"
    );
    let open = registry().resolve("openphone.app.open").unwrap();
    openphone_device::PhoneDevice::execute(
        h.phone.as_ref(),
        openphone_device::DeviceCall {
            command: open,
            params: &json!({"package_or_label": "Notes", "reason": "test"}),
            origin: &openphone_device::CallOrigin {
                runtime: "test".to_owned(),
                request_id: "open-notes".to_owned(),
                phone_session_id: None,
            },
        },
    )
    .await
    .unwrap();
    let check = h.watcher_now(w.watcher_id).cursor["next_check_at"]
        .as_i64()
        .unwrap();
    let fired = h.watchers.tick(check).await;
    assert_eq!(fired.len(), 1, "the screen now shows it");
    // The read went through the bridge as the built-in runtime, audited.
    let reads = h
        .store
        .export_audit(0, 1000)
        .unwrap()
        .into_iter()
        .filter(|r| r.entry.tool.as_deref() == Some("openphone.screen.get"))
        .count();
    assert_eq!(reads, 2);
}

#[tokio::test]
async fn semantic_match_fires_when_the_judge_says_so() {
    let h = Harness::with(Options {
        judge: Some(std::sync::Arc::new(WordJudge {
            yes_word: "urgent".into(),
        })),
        jobs: true,
    });
    let w = h
        .watcher(
            json!({"title": "Urgent SMS", "source": "message", "match_any": true,
                        "evaluator": "semantic_match", "query": "the sender needs help now"}),
        )
        .await;
    assert!(
        h.inject(message("+49 30 111 222", "hello there"))
            .await
            .is_empty()
    );
    assert_eq!(
        h.inject(message("+49 30 111 222", "urgent: call me"))
            .await
            .len(),
        1
    );
    assert_eq!(h.watcher_now(w.watcher_id).fire_count, 1);
}
