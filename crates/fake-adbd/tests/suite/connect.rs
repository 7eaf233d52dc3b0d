//! The handshake: `adb connect`, `adb devices -l`, `--unauthorized`, unknown commands.

use super::support::Device;

#[test]
fn adb_connect_lists_the_fake_as_a_device_with_its_banner() {
    let device = Device::start(&[]);
    let listed = device.adb(&["devices", "-l"]).text();
    let line = listed
        .lines()
        .find(|l| l.starts_with(&device.serial))
        .unwrap_or_else(|| panic!("not listed: {listed}"));
    assert!(line.contains(" device "), "{line}");
    assert!(line.contains("product:openphone_fake"), "{line}");
    assert!(line.contains("model:OpenPhone_Fake"), "{line}");
    assert!(line.contains("device:fake"), "{line}");
}

#[test]
fn getprop_answers_android_property_lines() {
    let device = Device::start(&["--sdk", "30"]);
    let props = device.shell("getprop");
    assert!(
        props.contains("[ro.product.model]: [OpenPhone Fake]\n"),
        "{props}"
    );
    assert!(props.contains("[ro.build.version.sdk]: [30]\n"), "{props}");
    assert!(
        props.contains("[ro.build.version.release]: [11]\n"),
        "{props}"
    );
    assert_eq!(
        device.shell("getprop ro.product.manufacturer"),
        "OpenPhone\n"
    );
}

#[test]
fn an_unknown_command_answers_like_androids_shell() {
    let device = Device::start(&[]);
    assert_eq!(
        device.shell("frobnicate --now"),
        "/system/bin/sh: frobnicate: inaccessible or not found\n"
    );
    assert!(device.logged().is_empty(), "reads are never logged");
}

#[test]
fn an_unauthorized_device_is_listed_unauthorized_and_refuses_a_shell() {
    let device = Device::spawn(&["--unauthorized"]);
    device.connect();
    assert_eq!(device.state().as_deref(), Some("unauthorized"));
    let shell = device.adb(&["-s", &device.serial, "shell", "getprop"]);
    assert!(!shell.ok, "a shell on an unauthorized device: {shell:?}");
    assert!(shell.stderr.contains("unauthorized"), "{}", shell.stderr);
}

#[test]
fn a_command_under_hang_on_never_answers_while_others_do() {
    let device = Device::start(&["--hang-on", "input swipe"]);
    let mut hung = device.spawn_adb(&["-s", &device.serial, "shell", "input swipe 1 2 3 4"]);
    // Received (so logged) …
    device.wait_logged(1);
    assert_eq!(device.logged(), ["input swipe 1 2 3 4"]);
    // … never answered, while another command on the same device answers.
    assert_eq!(device.shell("getprop ro.product.model"), "OpenPhone Fake\n");
    assert!(
        hung.try_wait().expect("wait").is_none(),
        "the hung command finished"
    );
    let _ = hung.kill();
    let _ = hung.wait();
}

#[test]
fn shell_operators_are_refused_with_a_clear_message() {
    let device = Device::start(&[]);
    let out = device.shell("input tap 1 2; reboot");
    assert!(out.contains("`;` is not supported"), "{out}");
    assert!(device.logged().is_empty(), "{:?}", device.logged());
}

#[test]
fn an_unplugged_device_goes_offline_and_comes_back_on_reconnect() {
    let mut device = Device::start(&[]);
    device.unplug();
    let shell = device.adb(&["-s", &device.serial, "shell", "getprop ro.product.model"]);
    assert!(!shell.ok, "a shell on an unplugged device: {shell:?}");
    assert!(
        shell.stderr.contains("offline") || shell.stderr.contains("not found"),
        "{}",
        shell.stderr
    );
    device.plug_back(&[]);
    // adb retries a dropped TCP device on its own after a while; `disconnect` + `connect`
    // (what a backend does to recover at once) brings it back now.
    device.adb(&["disconnect", &device.serial]);
    device.connect();
    assert_eq!(device.state().as_deref(), Some("device"));
    assert_eq!(device.shell("getprop ro.product.model"), "OpenPhone Fake\n");
}
