//! `screen.get` with `format: "compact"`: the interactive elements of the full form, each
//! with its id, role, text and bounds, and nothing else (issue 30, "built for models").

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::support::{phone, run, screen, tap};

fn compact(phone: &dyn openphone_device::PhoneDevice) -> Value {
    run(
        phone,
        "openphone.screen.get",
        json!({ "format": "compact" }),
    )
}

/// The compact form against the full form of the same screen.
fn check(full: &Value, compact: &Value, screen_name: &str) {
    assert_eq!(compact["format"], "compact");
    assert_eq!(compact["package"], full["package"], "{screen_name}");
    assert_eq!(compact["size"], json!([full["width"], full["height"]]));
    let elements = compact["elements"].as_array().unwrap();
    let interactive = full["interactive_elements"].as_array().unwrap();
    let ids = |list: &[Value], key: &str| -> Vec<String> {
        list.iter()
            .map(|e| e[key].as_str().unwrap().to_owned())
            .collect()
    };
    // Exactly the interactive elements, in the same order.
    assert_eq!(
        ids(elements, "id"),
        ids(interactive, "element_id"),
        "{screen_name}"
    );
    for (c, f) in elements.iter().zip(interactive) {
        let b = &f["bounds"];
        assert_eq!(
            c["bounds"],
            json!([b["left"], b["top"], b["right"], b["bottom"]]),
            "{screen_name}: {c}"
        );
        let role = c["role"].as_str().unwrap();
        assert!(
            ["button", "field", "switch", "checkbox", "list", "item"].contains(&role),
            "{screen_name}: {c}"
        );
        // Nothing but the compact keys.
        for key in c.as_object().unwrap().keys() {
            assert!(
                ["id", "role", "text", "hint", "bounds", "state"].contains(&key.as_str()),
                "{screen_name}: {key} in {c}"
            );
        }
        // A tappable element says what it is: its own text or its row's texts.
        if f["clickable"] == true && f["editable"] == false {
            let label = f["label"].as_str().unwrap_or("");
            if !label.is_empty() {
                assert_eq!(c["text"], label, "{screen_name}: {c} vs {f}");
            }
        }
    }
    // The other text is text of the screen, none of it an element's.
    let visible: BTreeSet<&str> = full["visible_text"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for t in compact["other_text"].as_array().into_iter().flatten() {
        assert!(visible.contains(t.as_str().unwrap()), "{screen_name}: {t}");
    }
    // Far smaller than the full form.
    let (c, f) = (compact.to_string().len(), full.to_string().len());
    assert!(c * 3 < f, "{screen_name}: compact {c} bytes, full {f}");
}

#[test]
fn the_compact_screen_is_the_interactive_elements_of_the_full_one() {
    let (phone, _clock) = phone();
    check(&screen(&phone), &compact(&phone), "home");
    for app in ["Messages", "Contacts", "Calendar", "Settings", "Notes"] {
        run(
            &phone,
            "openphone.app.open",
            json!({ "package_or_label": app }),
        );
        check(&screen(&phone), &compact(&phone), app);
    }
    // A conversation: the rows read as their texts, the focused field keeps its hint.
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Messages" }),
    );
    let full = screen(&phone);
    let thread = full["interactive_elements"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| {
            e["element_id"]
                .as_str()
                .filter(|id| id.starts_with("thread_"))
        })
        .unwrap()
        .to_owned();
    tap(&phone, &thread);
    tap(&phone, "message_input");
    let full = screen(&phone);
    let c = compact(&phone);
    check(&full, &c, "thread");
    assert_eq!(c["focused"], "message_input");
    let input = c["elements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == "message_input")
        .unwrap();
    assert_eq!(input["role"], "field");
    assert!(
        input["state"]
            .as_array()
            .unwrap()
            .contains(&json!("focused"))
    );
}

#[test]
fn a_screenshot_stays_with_the_compact_form_and_a_bad_format_is_refused() {
    let (phone, _clock) = phone();
    let c = run(
        &phone,
        "openphone.screen.get",
        json!({ "format": "compact", "include_screenshot": true }),
    );
    assert!(
        c["screenshot"].is_object() || c["screenshot"].is_string(),
        "{c}"
    );
    assert!(c.get("ui_tree").is_none());
    let err = super::support::exec_raw(&phone, "openphone.screen.get", json!({ "format": "tiny" }))
        .unwrap_err();
    assert_eq!(err.code(), "invalid_input");
}
