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
