//! Reading the screen: `wm size`, `uiautomator dump /dev/tty`, `screencap -p`, and a tap.

use serde_json::json;

use super::support::Device;

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
    let nodes = device.dump();
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
    assert_eq!(
        messages.attr("resource-id"),
        "com.android.launcher:id/app_icon_com.android.messaging"
    );
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
    assert!(device.logged().is_empty(), "a dump is a read");
}

#[test]
fn a_tap_is_logged_exactly_once_and_opens_the_app() {
    let device = Device::start(&[]);
    let icon = device
        .find("app_icon_com.android.messaging")
        .expect("the Messages icon");
    let (x, y) = icon.center();
    let tap = format!("input tap {x} {y}");
    assert_eq!(device.shell(&tap), "");
    assert_eq!(device.logged(), [tap]);
    let after = device.dump();
    assert!(
        after
            .iter()
            .all(|n| n.attr("package") == "com.android.messaging"),
        "the tap did not open Messages: {:?}",
        after.first()
    );
}

#[test]
fn screencap_returns_the_simulators_png_at_the_screens_size() {
    let device = Device::start(&[]);
    let png = device.exec_out("screencap -p");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "not a PNG: {:?}",
        &png[..png.len().min(16)]
    );
    assert!(png.len() > 1000, "{} bytes", png.len());
    // The IHDR chunk: the physical screen's size, as `wm size` reports it.
    let be = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
    assert_eq!((be(16), be(20)), (1080, 2400));
    assert_eq!(device.shell("wm size"), "Physical size: 1080x2400\n");
    assert!(device.logged().is_empty(), "a screenshot is a read");
}

#[test]
fn screencap_over_the_shell_stream_gives_the_same_bytes_as_exec() {
    // The v1 shell has no pty here, so nothing rewrites the PNG's bytes.
    let device = Device::start(&[]);
    let exec = device.exec_out("screencap -p");
    let shell = device.adb(&["-s", &device.serial, "shell", "screencap -p"]);
    assert!(shell.ok, "{shell:?}");
    assert_eq!(shell.stdout.len(), exec.len());
    assert_eq!(shell.stdout, exec);
}

#[test]
fn uiautomator_dump_to_a_file_is_read_back_with_cat() {
    let device = Device::start(&[]);
    assert_eq!(
        device.shell("uiautomator dump"),
        "UI hierchary dumped to: /sdcard/window_dump.xml\n"
    );
    let xml = device.shell("cat /sdcard/window_dump.xml");
    let nodes = super::xml::parse(&xml).unwrap_or_else(|e| panic!("{e}: {xml:.200}"));
    assert!(nodes.iter().any(|n| n.attr("text") == "Messages"));
    assert_eq!(
        device.shell("cat /sdcard/other.xml"),
        "cat: /sdcard/other.xml: No such file or directory\n"
    );
    device.shell("rm /sdcard/window_dump.xml");
    assert!(
        device
            .shell("cat /sdcard/window_dump.xml")
            .starts_with("cat: ")
    );
}
