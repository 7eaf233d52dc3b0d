//! Reading the screen: `wm size`, `uiautomator dump /dev/tty`, `screencap -p`, and a tap.

use serde_json::json;

use super::support::Device;
use super::xml;

const TAIL: &str = "UI hierchary dumped to: /dev/tty\n";

fn dump(device: &Device) -> Vec<xml::XmlNode> {
    let out = device.shell("uiautomator dump /dev/tty");
    let xml = out
        .strip_suffix(TAIL)
        .unwrap_or_else(|| panic!("no uiautomator tail line: {out:.200}"));
    xml::parse(xml).unwrap_or_else(|e| panic!("the XML does not parse: {e}\n{xml:.400}"))
}

#[test]
fn wm_size_is_the_simulated_screen() {
    let device = Device::start(&[]);
    let (sim, _clock) = openphone_device::SimPhone::demo().expect("the demo phone");
    let screen = sim
        .execute_sync("openphone.screen.get", &json!({"include_ui_tree": false}))
        .expect("screen.get");
    assert_eq!(
        device.shell("wm size"),
        format!("Physical size: {}x{}\n", screen["width"], screen["height"])
    );
}

#[test]
fn uiautomator_dump_parses_and_carries_the_simulators_elements() {
    let device = Device::start(&[]);
    let nodes = dump(&device);
    let root = &nodes[0];
    assert_eq!(root.depth, 0);
    assert_eq!(root.attr("bounds"), "[0,0][1080,2400]");
    let ids: Vec<&str> = nodes.iter().map(|n| n.attr("resource-id")).collect();
    assert!(
        ids.contains(&"com.android.launcher:id/status_bar"),
        "{ids:?}"
    );
    let messages = nodes
        .iter()
        .find(|n| n.attr("text") == "Messages" && n.attr("clickable") == "true")
        .unwrap_or_else(|| panic!("no Messages icon on the home screen: {ids:?}"));
    assert_eq!(messages.attr("package"), "com.android.launcher");
    for key in [
        "index",
        "class",
        "content-desc",
        "checkable",
        "checked",
        "enabled",
        "focusable",
        "focused",
        "scrollable",
        "long-clickable",
        "password",
        "selected",
    ] {
        assert!(
            messages.attrs.contains_key(key),
            "{key} missing: {messages:?}"
        );
    }
}

#[test]
fn a_tap_is_logged_exactly_once_and_changes_the_screen() {
    let device = Device::start(&[]);
    let nodes = dump(&device);
    let icon = nodes
        .iter()
        .find(|n| n.attr("text") == "Messages" && n.attr("clickable") == "true")
        .expect("the Messages icon");
    let (l, t, r, b) = bounds(icon.attr("bounds"));
    let tap = format!("input tap {} {}", (l + r) / 2, (t + b) / 2);
    assert_eq!(device.shell(&tap), "");
    assert_eq!(device.logged(), [tap]);
    let after = dump(&device);
    assert!(
        after
            .iter()
            .all(|n| n.attr("package") == "com.android.messaging"),
        "the tap did not open Messages: {:?}",
        after.first()
    );
}

fn bounds(text: &str) -> (i64, i64, i64, i64) {
    let nums: Vec<i64> = text
        .split(|c: char| !c.is_ascii_digit() && c != '-')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("a number"))
        .collect();
    assert_eq!(nums.len(), 4, "{text}");
    (nums[0], nums[1], nums[2], nums[3])
}

#[test]
fn screencap_returns_the_simulators_png() {
    let device = Device::start(&[]);
    let png = device.exec_out("screencap -p");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "not a PNG: {:?}",
        &png[..png.len().min(16)]
    );
    assert!(png.len() > 1000, "{} bytes", png.len());
    assert!(device.logged().is_empty(), "a screenshot is a read");
}
