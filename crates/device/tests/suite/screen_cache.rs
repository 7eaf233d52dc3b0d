//! The `screen.get` and `device.status` caches (issue 34): an answer served from a cache
//! equals the answer a phone with no cache builds from the same state at the same time,
//! whatever happened before — taps, keys, swipes, typing, a call whose timer runs, the clock
//! moving by a millisecond, a second, a minute or an hour, an event ending.
//!
//! A property over seeded random walks: every `screen.get` and `device.status` on the
//! long-lived phone (whose caches are warm) is compared with the same call on a new phone made
//! from its snapshot (whose caches are empty).

use std::sync::Arc;

use openphone_clock::ManualClock;
use openphone_device::SimPhone;
use serde_json::{Value, json};

use super::support::{exec, phone, run};

/// SplitMix64: seedable choices for the walk.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One of the param combinations `screen.get` answers differently for.
fn screen_args(rng: &mut Rng) -> Value {
    match rng.below(5) {
        0 => json!({}),
        1 => json!({ "include_ui_tree": false }),
        2 => json!({ "include_activity": false }),
        3 => json!({ "format": "compact" }),
        _ => json!({ "include_screenshot": true }),
    }
}

/// `device.status` params: plain ones (cached) and a query (always built fresh).
fn status_args(rng: &mut Rng) -> Value {
    match rng.below(4) {
        0 => json!({}),
        1 => json!({ "limit": 3 }),
        2 => json!({ "reason": "polling" }),
        _ => json!({ "query": "Dad" }),
    }
}

/// One step of the walk: something that changes the phone or moves its clock.
fn step(phone: &SimPhone, clock: &ManualClock, rng: &mut Rng) {
    match rng.below(9) {
        0 => {
            let screen = run(phone, "openphone.screen.get", json!({}));
            let ids: Vec<String> = screen["interactive_elements"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|e| e["element_id"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            if !ids.is_empty() {
                let id = &ids[rng.below(ids.len())];
                // A tap may raise a dialog or be refused: both are outcomes of the walk.
                let _ = exec(
                    phone,
                    "openphone.ui.tap_element",
                    json!({ "element_id": id }),
                );
            }
        }
        1 => {
            let key = ["back", "home", "recents", "enter"][rng.below(4)];
            let _ = exec(phone, "openphone.input.press_key", json!({ "key": key }));
        }
        2 => {
            let app = ["Messages", "Calendar", "Phone", "Settings", "Clock"][rng.below(5)];
            let _ = exec(
                phone,
                "openphone.app.open",
                json!({ "package_or_label": app }),
            );
        }
        3 => {
            let _ = exec(
                phone,
                "openphone.ui.swipe",
                json!({ "start_x": 540, "start_y": 1900, "end_x": 540, "end_y": 500 }),
            );
        }
        4 => {
            let _ = exec(phone, "openphone.ui.type_text", json!({ "text": "hi" }));
        }
        5 => {
            let _ = exec(
                phone,
                "openphone.calls.place",
                json!({ "contact_query": "Dad" }),
            );
        }
        6 => {
            let _ = exec(
                phone,
                "openphone.clipboard.set",
                json!({ "text": format!("clip {}", rng.next()) }),
            );
        }
        _ => {
            let ms = [1, 137, 400, 999, 1_000, 4_321, 59_000, 3_600_000][rng.below(8)];
            clock.advance(ms);
        }
    }
}

#[test]
fn cached_screen_get_and_device_status_equal_a_fresh_build_after_any_walk() {
    let mut compared = 0;
    for seed in 0..48u64 {
        let (phone, clock) = phone();
        let mut rng = Rng(seed);
        for _ in 0..40 {
            step(&phone, &clock, &mut rng);
            // Twice: the second is a hit (same generation, same bucket) unless the clock moved.
            for _ in 0..2 {
                let args = screen_args(&mut rng);
                let cached = run(&phone, "openphone.screen.get", args.clone());
                let fresh_phone =
                    SimPhone::new(phone.snapshot(), Arc::new(clock.clone())).expect("snapshot");
                let fresh = run(&fresh_phone, "openphone.screen.get", args.clone());
                assert_eq!(cached, fresh, "seed {seed}, params {args}");
                let args = status_args(&mut rng);
                let cached = run(&phone, "openphone.device.status", args.clone());
                let fresh = run(&fresh_phone, "openphone.device.status", args.clone());
                assert_eq!(cached, fresh, "seed {seed}, device.status {args}");
                compared += 1;
                if rng.below(2) == 0 {
                    clock.advance(rng.below(700) as i64);
                }
            }
        }
    }
    assert!(compared > 3_000);
}

#[test]
fn a_cached_screen_carries_the_time_of_its_own_call() {
    let (phone, clock) = phone();
    let first = run(&phone, "openphone.screen.get", json!({}));
    clock.advance(1);
    let second = run(&phone, "openphone.screen.get", json!({}));
    assert_eq!(
        second["captured_at"].as_i64(),
        first["captured_at"].as_i64().map(|t| t + 1)
    );
}

#[test]
fn a_change_is_seen_by_the_next_screen_get() {
    let (phone, _clock) = phone();
    let before = run(&phone, "openphone.screen.get", json!({}));
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Settings" }),
    );
    let after = run(&phone, "openphone.screen.get", json!({}));
    assert_ne!(before["package"], after["package"]);
}

#[test]
fn a_cached_device_status_carries_the_time_of_its_own_call() {
    let (phone, clock) = phone();
    let first = run(&phone, "openphone.device.status", json!({}));
    clock.advance(1);
    let second = run(&phone, "openphone.device.status", json!({}));
    assert_eq!(
        second["device"]["time"].as_i64(),
        first["device"]["time"].as_i64().map(|t| t + 1)
    );
}

/// The next event changes at an event's end, which need not fall on a second: a status
/// cached a millisecond before it must not be served a millisecond after, in the same second.
#[test]
fn device_status_moves_to_the_next_event_at_the_millisecond_one_ends() {
    let (phone, clock) = phone();
    use openphone_clock::Clock;
    let now = clock.now_ms();
    // Started a day ago (so it is the next event while it lasts), ends 500 ms into a second.
    let end = (now / 1000 + 2) * 1000 + 500;
    let added = run(
        &phone,
        "openphone.calendar.add",
        json!({ "title": "Mid-second end", "start_at": now - 86_400_000, "end_at": end }),
    );
    let mut seen = Vec::new();
    for at in [end - 1, end] {
        clock.set(at);
        let cached = run(&phone, "openphone.device.status", json!({}));
        let fresh_phone =
            SimPhone::new(phone.snapshot(), Arc::new(clock.clone())).expect("snapshot");
        let fresh = run(&fresh_phone, "openphone.device.status", json!({}));
        assert_eq!(cached, fresh, "at {at}");
        seen.push(cached["next_event"]["event_id"].clone());
    }
    assert_eq!(seen[0], added["event"]["event_id"], "{added}");
    assert_ne!(seen[1], seen[0], "the event that ended is no longer next");
}
