//! Parity: the same scenario — a list of manifest calls — against the simulated phone directly
//! and against the ADB backend → the real adb server and client → the fake device (whose phone
//! is the same simulator, from the same scenario). Results are compared normalised (element
//! ids, texts, packages, effects; never timestamps). Everything the simulator passes, the ADB
//! backend passes or answers `unsupported_on_device`. The parity table is printed
//! (`cargo test -p openphone-adb --test all parity -- --nocapture`).

use std::sync::Arc;

use openphone_clock::SystemClock;
use openphone_device::{DeviceError, PhoneDevice, SimPhone};
use serde_json::{Value, json};

use super::support::{Rig, call};

/// One step: a manifest call, and the params (a function of what the simulator showed so far,
/// so ids come from the phone, not from this file).
struct Step {
    tool: &'static str,
    params: fn(&Seen) -> Value,
}

/// What earlier steps showed on the simulator (ids to use next).
#[derive(Default)]
struct Seen {
    first_row: Option<String>,
    input: Option<String>,
    event_id: Option<i64>,
    contact: Option<String>,
    notification: Option<String>,
}

fn steps() -> Vec<Step> {
    let none = |_: &Seen| json!({});
    vec![
        Step {
            tool: "openphone.screen.get",
            params: none,
        },
        Step {
            tool: "openphone.screen.understand_local",
            params: none,
        },
        Step {
            tool: "openphone.device.status",
            params: none,
        },
        Step {
            tool: "openphone.apps.search",
            params: |_| json!({ "query": "android" }),
        },
        Step {
            tool: "openphone.contacts.search",
            params: none,
        },
        Step {
            tool: "openphone.contacts.search",
            params: |s| json!({ "query": s.contact.clone().unwrap_or_default(), "include_details": true }),
        },
        Step {
            tool: "openphone.calendar.search",
            params: none,
        },
        Step {
            tool: "openphone.calendar.add",
            params: |_| json!({ "title": "Parity check", "location": "Room 1, floor 2", "start_at": 1_900_000_000_000_i64, "duration_minutes": 30 }),
        },
        Step {
            tool: "openphone.calendar.update",
            params: |s| json!({ "event_id": s.event_id, "title": "Parity check (moved)" }),
        },
        Step {
            tool: "openphone.calendar.delete",
            params: |s| json!({ "event_id": s.event_id }),
        },
        Step {
            tool: "openphone.notifications.list",
            params: none,
        },
        Step {
            tool: "openphone.notifications.search",
            params: |s| json!({ "query": s.notification.clone().unwrap_or_default() }),
        },
        Step {
            tool: "openphone.messages.search",
            params: none,
        },
        Step {
            tool: "openphone.calls.search",
            params: none,
        },
        Step {
            tool: "openphone.app.open",
            params: |_| json!({ "package_or_label": "com.android.messaging" }),
        },
        Step {
            tool: "openphone.screen.get",
            params: none,
        },
        Step {
            tool: "openphone.ui.tap_element",
            params: |s| json!({ "element_id": s.first_row.clone().unwrap_or_default() }),
        },
        Step {
            tool: "openphone.screen.get",
            params: none,
        },
        Step {
            tool: "openphone.ui.tap_element",
            params: |s| json!({ "element_id": s.input.clone().unwrap_or_default() }),
        },
        Step {
            tool: "openphone.ui.type_text",
            params: |_| json!({ "text": "Hello there, it's me" }),
        },
        Step {
            tool: "openphone.ui.type_text",
            params: |_| json!({ "text": " Grüße 👋" }),
        },
        Step {
            tool: "openphone.clipboard.set",
            params: |_| json!({ "text": "copied" }),
        },
        Step {
            tool: "openphone.clipboard.paste",
            params: none,
        },
        Step {
            tool: "openphone.input.press_key",
            params: |_| json!({ "key": "back" }),
        },
        Step {
            tool: "openphone.input.press_key",
            params: |_| json!({ "key": "home" }),
        },
        Step {
            tool: "openphone.screen.get",
            params: none,
        },
        Step {
            tool: "openphone.ui.tap",
            params: |_| json!({ "x": 540, "y": 1200 }),
        },
        Step {
            tool: "openphone.input.press_key",
            params: |_| json!({ "key": "home" }),
        },
        Step {
            tool: "openphone.ui.swipe",
            params: |_| json!({ "start_x": 540, "start_y": 1600, "end_x": 540, "end_y": 800 }),
        },
        Step {
            tool: "openphone.ui.long_press",
            params: |_| json!({ "x": 540, "y": 1200, "duration_ms": 800 }),
        },
        Step {
            tool: "openphone.input.press_key",
            params: |_| json!({ "key": "home" }),
        },
        Step {
            tool: "openphone.url.open",
            params: |_| json!({ "url": "https://example.com/" }),
        },
        Step {
            tool: "openphone.input.press_key",
            params: |_| json!({ "key": "home" }),
        },
        Step {
            tool: "openphone.messages.draft",
            params: |_| json!({ "to": "+1 555 0199", "body": "Draft from the parity suite" }),
        },
        Step {
            tool: "openphone.messages.send",
            params: |_| json!({ "to": "+1 555 0199", "body": "hi" }),
        },
        Step {
            tool: "openphone.input.press_key",
            params: |_| json!({ "key": "home" }),
        },
        Step {
            tool: "openphone.calls.place",
            params: |_| json!({ "number": "+1 555 0199" }),
        },
        Step {
            tool: "openphone.input.press_key",
            params: |_| json!({ "key": "home" }),
        },
        Step {
            tool: "openphone.notifications.open",
            params: |s| json!({ "query": s.notification.clone().unwrap_or_default() }),
        },
        Step {
            tool: "openphone.input.press_key",
            params: |_| json!({ "key": "home" }),
        },
        Step {
            tool: "openphone.app.open",
            params: |_| json!({ "package_or_label": "com.android.messaging" }),
        },
        Step {
            tool: "openphone.screen.get",
            params: none,
        },
        Step {
            tool: "openphone.ui.long_press_element",
            params: |s| json!({ "element_id": s.first_row.clone().unwrap_or_default(), "duration_ms": 800 }),
        },
        Step {
            tool: "openphone.screen.get",
            params: none,
        },
        Step {
            tool: "openphone.input.press_key",
            params: |_| json!({ "key": "back" }),
        },
        Step {
            tool: "openphone.input.press_key",
            params: |_| json!({ "key": "home" }),
        },
        Step {
            tool: "openphone.share.text",
            params: |_| json!({ "text": "shared from the parity suite" }),
        },
    ]
}

fn strs(v: &Value, key: &str) -> Vec<Value> {
    v.as_array()
        .map(|a| a.iter().map(|e| e[key].clone()).collect())
        .unwrap_or_default()
}

/// The comparable part of a result.
fn normalise(tool: &str, r: &Value) -> Value {
    let screen_pkg = r["screen"]["package"].clone();
    match tool {
        "openphone.screen.get" => {
            // uiautomator has no hint attribute: an empty field's hint is not text on screen.
            let hints = strs(&r["interactive_elements"], "hint");
            let text: Vec<&Value> = r["visible_text"]
                .as_array()
                .map(|a| a.iter().filter(|t| !hints.contains(t)).collect())
                .unwrap_or_default();
            json!({
                "package": r["package"],
                "elements": strs(&r["interactive_elements"], "element_id"),
                "text": text,
                "focused": r["focused_element"],
            })
        }
        "openphone.screen.understand_local" => {
            json!(strs(&r["interactive_elements"], "element_id"))
        }
        "openphone.device.status" => json!({ "battery": r["device"]["battery_percent"] }),
        "openphone.apps.search" => {
            let mut p = strs(&r["apps"], "package");
            p.sort_by_key(|v| v.to_string());
            json!(p)
        }
        "openphone.contacts.search" => {
            // Android's phone rows carry no `starred`: the simulator lists starred contacts
            // first, the backend by name; the set is what must agree.
            let mut list: Vec<Value> = r["contacts"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|c| json!({ "name": c["name"], "phones": strs(&c["phones"], "number") }))
                        .collect()
                })
                .unwrap_or_default();
            list.sort_by_key(|c| c["name"].to_string());
            json!(list)
        }
        "openphone.calendar.search" => json!(r["events"].as_array().map(|a| {
            a.iter()
                .map(|e| json!([e["title"], e["start_at"], e["end_at"], e["location"]]))
                .collect::<Vec<_>>()
        })),
        "openphone.calendar.add" | "openphone.calendar.update" => {
            let e = &r["event"];
            json!([e["title"], e["start_at"], e["end_at"], e["location"]])
        }
        "openphone.calendar.delete" => json!([r["deleted"], r["title"]]),
        "openphone.notifications.list" | "openphone.notifications.search" => {
            json!(r["notifications"].as_array().map(|a| {
                a.iter()
                    .map(|n| json!([n["package"], n["title"], n["text"]]))
                    .collect::<Vec<_>>()
            }))
        }
        "openphone.messages.search" => json!(strs(&r["messages"], "body")),
        "openphone.calls.search" => json!(strs(&r["calls"], "number")),
        "openphone.app.open" => json!([r["package"], screen_pkg]),
        "openphone.ui.type_text" => json!([r["element"]["element_id"], r["value"]]),
        // Where it pasted; what it pasted follows clipboard.set, which Android refuses.
        "openphone.clipboard.paste" => json!([r["element"]["element_id"], screen_pkg]),
        "openphone.ui.tap_element"
        | "openphone.ui.tap"
        | "openphone.ui.long_press"
        | "openphone.ui.long_press_element" => {
            json!([r["action"], r["element"]["element_id"], screen_pkg])
        }
        "openphone.messages.draft" => json!([r["draft"]["to"], r["draft"]["body"], screen_pkg]),
        "openphone.calls.place" => json!([r["number"], screen_pkg]),
        _ => json!([screen_pkg]),
    }
}

/// What the simulator showed that later steps use.
fn remember(seen: &mut Seen, tool: &str, r: &Value) {
    match tool {
        "openphone.screen.get" => {
            let elements = r["interactive_elements"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let editable = elements.iter().find(|e| e["editable"] == true);
            if let Some(e) = editable {
                seen.input = e["element_id"].as_str().map(str::to_owned);
            }
            if r["package"] == "com.android.messaging" && seen.first_row.is_none() {
                seen.first_row = elements
                    .iter()
                    .filter_map(|e| e["element_id"].as_str())
                    .find(|id| id.starts_with("thread_"))
                    .map(str::to_owned);
            }
        }
        "openphone.contacts.search" if seen.contact.is_none() => {
            seen.contact = r["contacts"][0]["name"].as_str().map(str::to_owned);
        }
        "openphone.calendar.add" => seen.event_id = r["event"]["event_id"].as_i64(),
        "openphone.notifications.list" => {
            seen.notification = r["notifications"][0]["title"].as_str().map(str::to_owned);
        }
        _ => {}
    }
}

#[derive(Debug)]
enum Verdict {
    Pass,
    Unsupported(String),
    Fail(String),
}

fn judge(
    tool: &str,
    sim: &Result<Value, DeviceError>,
    adb: &Result<Value, DeviceError>,
) -> Verdict {
    match (sim, adb) {
        (_, Err(DeviceError::UnsupportedOnDevice { reason, .. })) => {
            Verdict::Unsupported(reason.clone())
        }
        // A real phone also lists its framework packages (`android`, `com.android.shell`, …),
        // which the simulator does not model: every app the simulator lists must be there.
        (Ok(s), Ok(a)) if tool == "openphone.apps.search" => {
            let (s, a) = (normalise(tool, s), normalise(tool, a));
            let listed = a.as_array().cloned().unwrap_or_default();
            let missing: Vec<&Value> = s
                .as_array()
                .map(|l| l.iter().filter(|p| !listed.contains(p)).collect())
                .unwrap_or_default();
            if missing.is_empty() {
                Verdict::Pass
            } else {
                Verdict::Fail(format!("adb does not list {missing:?}"))
            }
        }
        (Ok(s), Ok(a)) => {
            let (s, a) = (normalise(tool, s), normalise(tool, a));
            if s == a {
                Verdict::Pass
            } else {
                Verdict::Fail(format!("sim {s} ≠ adb {a}"))
            }
        }
        // The same OS dialog: the same kind, package and question, word for word (the user
        // is asked what the phone shows, whichever backend drew it).
        (
            Err(DeviceError::FrameworkConfirmationRequired {
                kind: sk,
                package: sp,
                summary: ss,
            }),
            Err(DeviceError::FrameworkConfirmationRequired {
                kind: ak,
                package: ap,
                summary: asked,
            }),
        ) => {
            if (sk, sp, ss) == (ak, ap, asked) {
                Verdict::Pass
            } else {
                Verdict::Fail(format!(
                    "sim asks {sk}/{sp} {ss:?} ≠ adb asks {ak}/{ap} {asked:?}"
                ))
            }
        }
        (Err(s), Err(a)) if s.code() == a.code() => Verdict::Pass,
        (Err(s), Err(a)) => Verdict::Fail(format!("sim {} ≠ adb {}: {a}", s.code(), a.code())),
        (Err(s), Ok(_)) => Verdict::Fail(format!("sim refused ({}: {s}), adb did it", s.code())),
        (Ok(_), Err(a)) => Verdict::Fail(format!("adb {}: {a}", a.code())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adb_backend_passes_what_the_simulator_passes_or_says_unsupported() {
    let sim = SimPhone::with_default_scenario(Arc::new(SystemClock)).unwrap();
    let rig = Rig::default().await;
    let mut seen = Seen::default();
    let mut table = Vec::new();
    for step in steps() {
        let params = (step.params)(&seen);
        let on_sim = call(&sim as &dyn PhoneDevice, step.tool, params.clone()).await;
        let on_adb = rig.call(step.tool, params).await;
        if let Ok(r) = &on_sim {
            remember(&mut seen, step.tool, r);
        }
        table.push((step.tool, judge(step.tool, &on_sim, &on_adb)));
    }
    println!("\n| command | adb vs simulator |\n|---|---|");
    for (tool, verdict) in &table {
        let cell = match verdict {
            Verdict::Pass => "pass".to_owned(),
            Verdict::Unsupported(reason) => format!("unsupported ({reason})"),
            Verdict::Fail(why) => format!("FAIL: {why}"),
        };
        println!("| {tool} | {cell} |");
    }
    let failed: Vec<_> = table
        .iter()
        .filter(|(_, v)| matches!(v, Verdict::Fail(_)))
        .collect();
    assert!(failed.is_empty(), "parity failures: {failed:#?}");
    // The commands Android forbids the shell are the ones the phone's tool list leaves out.
    let profile = rig.phone.profile();
    assert!(
        !profile
            .supported_tools
            .iter()
            .any(|t| t == "openphone.messages.send")
    );
    assert!(
        !profile
            .supported_tools
            .iter()
            .any(|t| t == "openphone.clipboard.set")
    );
    assert!(
        profile
            .supported_tools
            .iter()
            .any(|t| t == "openphone.ui.tap_element")
    );
}
