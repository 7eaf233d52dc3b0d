//! OS dialogs of the simulator (a permission prompt from `--scenario`), rendered as Android
//! renders them: the active window alone, in the permission controller's package.

use serde_json::{Value, json};

use super::support::Device;

const LENS: &str = "com.example.lens";

/// The demo scenario plus Lens, which asks for the camera when it first comes up.
fn scenario(dir: &std::path::Path) -> std::path::PathBuf {
    let mut doc: Value =
        serde_json::from_str(openphone_device::sim::DEFAULT_SCENARIO).expect("demo scenario");
    doc["apps"].as_array_mut().expect("apps").push(json!({
        "package": LENS, "label": "Lens",
        "screens": [{ "id": "main", "title": "Lens", "elements": [
            { "id": "shutter", "kind": "button", "text": "Shutter" }
        ]}]
    }));
    doc["system_dialogs"] = json!({ "permissions": [{ "package": LENS, "permission": "camera" }] });
    let path = dir.join("scenario.json");
    std::fs::write(&path, doc.to_string()).expect("write the scenario");
    path
}

#[test]
fn a_permission_prompt_is_dumped_as_the_permission_controllers_window() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = scenario(dir.path());
    let device = Device::start(&["--scenario", path.to_str().expect("utf-8 path")]);
    assert!(
        device
            .shell("pm list packages -3")
            .contains("package:com.example.lens\n")
    );
    let out = device.shell("monkey -p com.example.lens -c android.intent.category.LAUNCHER 1");
    assert!(out.contains("Events injected: 1"), "{out}");
    let nodes = device.dump();
    assert!(
        nodes
            .iter()
            .all(|n| n.attr("package") == "com.android.permissioncontroller"),
        "{:?}",
        nodes.iter().map(|n| n.attr("package")).collect::<Vec<_>>()
    );
    let allow = nodes
        .iter()
        .find(|n| {
            n.attr("resource-id")
                == "com.android.permissioncontroller:id/permission_allow_foreground_only_button"
        })
        .expect("the allow button");
    assert_eq!(allow.attr("clickable"), "true");
    assert!(
        nodes
            .iter()
            .any(|n| n.attr("text").starts_with("Allow Lens to take pictures")),
        "no prompt text"
    );
    // A finger on "While using the app" answers it, as on a real phone.
    let (x, y) = allow.center();
    assert_eq!(device.shell(&format!("input tap {x} {y}")), "");
    assert_eq!(device.foreground(), LENS);
    assert!(device.find("shutter").is_some(), "the app is not showing");
}
