//! The `screen.get` and `device.status` caches (issue 34): an answer served from a cache
//! equals the answer a phone with no cache builds from the same state at the same time,
//! whatever happened before — taps, keys, swipes, typing, a call whose timer runs, the clock
//! moving by a millisecond, a second, a minute or an hour, an event ending.
//!
//! A property over seeded random walks: every `screen.get` and `device.status` on the
//! long-lived phone (whose caches are warm) is compared with the same call on a new phone made
//! from its snapshot (whose caches are empty), and with its answer as text
//! (`PhoneDevice::execute_for_text`, what the endpoint's `tools.invoke` asks for).

use std::sync::Arc;

use openphone_clock::{Clock, ManualClock};
use openphone_device::{DeviceAnswer, DeviceError, SimPhone};
use serde_json::{Map, Value, json};

use super::support::{exec, exec_for_text, phone, run};

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

/// Any combination of the `screen.get` params its answer (and its cache) depends on: each
/// of activity and tree absent, true or false; the form absent, full or compact; now and then
/// a screenshot.
fn screen_args(rng: &mut Rng) -> Value {
    let mut args = Map::new();
    for key in ["include_activity", "include_ui_tree"] {
        match rng.below(3) {
            0 => {}
            n => {
                args.insert(key.into(), json!(n == 1));
            }
        }
    }
    match rng.below(3) {
        0 => {}
        n => {
            args.insert("format".into(), json!(["full", "compact"][n - 1]));
        }
    }
    if rng.below(6) == 0 {
        args.insert("include_screenshot".into(), json!(true));
    }
    Value::Object(args)
}

/// Whether `device.status` with `args` is the plain one (the one that is cached).
fn plain_status(args: &Value) -> bool {
    args.get("query").is_none() && args.get("number").is_none()
}

/// A call through `execute_for_text`, with its answer as a value (a text parsed back) and its
/// text when it was answered as text.
fn via_text(
    phone: &SimPhone,
    tool: &str,
    params: Value,
) -> Result<(Value, Option<String>), DeviceError> {
    exec_for_text(phone, tool, params).map(|answer| match answer {
        DeviceAnswer::Value(value) => (value, None),
        DeviceAnswer::Text(text) => (
            serde_json::from_str(text.text()).expect("the text is JSON"),
            Some(text.text().to_owned()),
        ),
    })
}

/// `tool` with `args` through `execute` and through `execute_for_text` at the same time, in
/// either order (`text_first`: the text path fills the cache): the two answers, equal, the
/// text exactly serde_json's text of the answer; a cached read is answered as text.
fn both_ways(phone: &SimPhone, tool: &str, args: &Value, text_first: bool, why: &str) -> Value {
    let (value, (parsed, text)) = if text_first {
        let text = via_text(phone, tool, args.clone()).expect("read");
        (run(phone, tool, args.clone()), text)
    } else {
        let value = run(phone, tool, args.clone());
        (value, via_text(phone, tool, args.clone()).expect("read"))
    };
    assert_eq!(parsed, value, "{why}: {tool} {args}");
    let cached = tool == "openphone.screen.get" || plain_status(args);
    assert_eq!(
        text.is_some(),
        cached,
        "{why}: {tool} {args} answered as text"
    );
    if let Some(text) = text {
        assert_eq!(
            text,
            serde_json::to_string(&value).expect("writes"),
            "{why}"
        );
    }
    value
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

/// How a walk runs a command: through `execute`, or through `execute_for_text`.
type Runner = fn(&SimPhone, &str, Value) -> Result<Value, DeviceError>;

fn by_value(phone: &SimPhone, tool: &str, params: Value) -> Result<Value, DeviceError> {
    exec(phone, tool, params)
}

fn by_text(phone: &SimPhone, tool: &str, params: Value) -> Result<Value, DeviceError> {
    via_text(phone, tool, params).map(|(value, _)| value)
}

/// One step of the walk: something that changes the phone or moves its clock.
fn step(phone: &SimPhone, clock: &ManualClock, rng: &mut Rng) {
    walk_step(phone, clock, rng, by_value);
}

/// [`step`], running the commands with `exec`.
fn walk_step(phone: &SimPhone, clock: &ManualClock, rng: &mut Rng, exec: Runner) {
    match rng.below(9) {
        0 => {
            let screen = exec(phone, "openphone.screen.get", json!({})).expect("screen.get");
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
                let why = format!("seed {seed}");
                let args = screen_args(&mut rng);
                let text_first = rng.below(2) == 0;
                let cached = both_ways(&phone, "openphone.screen.get", &args, text_first, &why);
                let fresh_phone =
                    SimPhone::new(phone.snapshot(), Arc::new(clock.clone())).expect("snapshot");
                let fresh = run(&fresh_phone, "openphone.screen.get", args.clone());
                assert_eq!(cached, fresh, "seed {seed}, params {args}");
                let args = status_args(&mut rng);
                let text_first = rng.below(2) == 0;
                let tool = "openphone.device.status";
                let cached = both_ways(&phone, tool, &args, text_first, &why);
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

#[test]
fn a_cached_screen_as_text_carries_the_time_of_its_own_call() {
    let (phone, clock) = phone();
    for (tool, args) in [
        ("openphone.screen.get", json!({})),
        ("openphone.device.status", json!({})),
    ] {
        for _ in 0..3 {
            let (answer, text) = via_text(&phone, tool, args.clone()).expect("read");
            assert!(text.is_some(), "{tool} answered as text");
            let time = match tool {
                "openphone.screen.get" => answer["captured_at"].as_i64(),
                _ => answer["device"]["time"].as_i64(),
            };
            assert_eq!(time, Some(clock.now_ms()), "{tool}");
            clock.advance(1);
        }
    }
}

/// A walk whose every command (reads and changes) goes through `execute_for_text` leaves the
/// phone exactly as the same walk through `execute` does: the same answers and errors, the
/// same state, the same action log (a read adds nothing to it either way).
#[test]
fn the_text_path_leaves_the_same_trace_in_the_phone_as_execute() {
    for seed in 0..12u64 {
        let walks: Vec<_> = [by_value as Runner, by_text]
            .into_iter()
            .map(|exec| {
                let (phone, clock) = phone();
                let mut rng = Rng(seed);
                let mut answers = Vec::new();
                for i in 0..30 {
                    walk_step(&phone, &clock, &mut rng, exec);
                    let args = screen_args(&mut rng);
                    answers.push(exec(&phone, "openphone.screen.get", args).map_err(|e| e.code()));
                    let args = status_args(&mut rng);
                    let status = exec(&phone, "openphone.device.status", args);
                    answers.push(status.map_err(|e| e.code()));
                    let wrong = json!({ "number": "not a number" });
                    let refused = exec(&phone, "openphone.device.status", wrong);
                    answers.push(refused.map_err(|e| e.code()));
                    if i % 10 == 9 {
                        phone.set_online(false);
                        let offline = exec(&phone, "openphone.screen.get", json!({}));
                        answers.push(offline.map_err(|e| e.code()));
                        phone.set_online(true);
                    }
                }
                (answers, phone.snapshot(), phone.action_log())
            })
            .collect();
        let [(answers, state, log), (text_answers, text_state, text_log)] = &walks[..] else {
            unreachable!("two walks");
        };
        assert_eq!(text_answers, answers, "seed {seed}");
        assert!(answers.iter().any(Result::is_err), "the walk met errors");
        assert_eq!(text_state, state, "seed {seed}");
        assert_eq!(text_log, log, "seed {seed}");
        assert!(!log.is_empty(), "the walk changed the phone");
    }
}
