//! Apps and intents: `monkey`, `pm list packages`, `am start` (VIEW, SENDTO, CALL, SEND).

use super::support::Device;

#[test]
fn monkey_launches_an_installed_app_and_aborts_on_an_unknown_one() {
    let device = Device::start(&[]);
    let out = device.shell("monkey -p com.android.calendar -c android.intent.category.LAUNCHER 1");
    assert!(out.contains("Events injected: 1\n"), "{out}");
    assert_eq!(device.foreground(), "com.android.calendar");
    let out = device.shell("monkey -p com.example.nothing -c android.intent.category.LAUNCHER 1");
    assert!(
        out.ends_with("** No activities found to run, monkey aborted.\n"),
        "{out}"
    );
    assert_eq!(device.foreground(), "com.android.calendar");
    assert_eq!(device.logged().len(), 2);
}

#[test]
fn pm_lists_packages_and_dash_3_only_user_apps() {
    let device = Device::start(&[]);
    let all = device.shell("pm list packages");
    for package in ["com.android.messaging", "com.android.settings", "android"] {
        assert!(
            all.contains(&format!("package:{package}\n")),
            "{package}: {all}"
        );
    }
    let user = device.shell("pm list packages -3");
    assert!(!user.contains("package:com.android.messaging\n"), "{user}");
    assert!(user.contains("package:com.android.adbkeyboard\n"), "{user}");
    assert!(user.lines().all(|l| l.starts_with("package:")), "{user}");
}

#[test]
fn am_start_view_opens_the_browser_and_an_unhandled_scheme_is_unresolved() {
    let device = Device::start(&[]);
    let out = device.shell("am start -a android.intent.action.VIEW -d https://example.com/a");
    assert_eq!(
        out,
        "Starting: Intent { act=android.intent.action.VIEW dat=https://example.com/a }\n"
    );
    assert_eq!(device.foreground(), "com.android.browser");
    let out = device.shell("am start -a android.intent.action.VIEW -d mailto:a@b.c");
    assert!(
        out.starts_with("Error: Activity not started, unable to resolve Intent { act=android.intent.action.VIEW dat=mailto:a@b.c"),
        "{out}"
    );
}

#[test]
fn am_start_sendto_prefills_the_message_and_call_dials() {
    let device = Device::start(&[]);
    let out = device.shell(
        "am start -a android.intent.action.SENDTO -d sms:+15550100 --es sms_body 'see you at 5'",
    );
    assert!(
        out.starts_with("Starting: Intent { act=android.intent.action.SENDTO"),
        "{out}"
    );
    let body = device.find("compose_body").expect("compose field");
    assert_eq!(body.attr("text"), "see you at 5");
    let out = device.shell("am start -a android.intent.action.CALL -d tel:+15550100");
    assert!(
        out.starts_with("Starting: Intent { act=android.intent.action.CALL dat=tel:+15550100"),
        "{out}"
    );
    assert_eq!(device.foreground(), "com.android.dialer");
}

#[test]
fn am_start_send_opens_the_share_chooser_as_the_android_package() {
    let device = Device::start(&[]);
    let out = device.shell(
        "am start -a android.intent.action.SEND -t text/plain --es android.intent.extra.TEXT 'look at this'",
    );
    assert!(
        out.starts_with(
            "Starting: Intent { act=android.intent.action.SEND typ=text/plain (has extras) }"
        ),
        "{out}"
    );
    let nodes = device.dump();
    assert!(
        nodes.iter().all(|n| n.attr("package") == "android"),
        "{:?}",
        nodes.first()
    );
    assert!(
        nodes.iter().any(|n| n.attr("text") == "look at this"),
        "the chooser does not show the text"
    );
}

#[test]
fn the_discovery_commands_mobile_mcp_sends_are_answered() {
    // mobile-mcp lists apps, sizes the screen and counts displays with these.
    let device = Device::start(&[]);
    let activities = device.shell(
        "cmd package query-activities -a android.intent.action.MAIN -c android.intent.category.LAUNCHER",
    );
    let packages: Vec<&str> = activities
        .lines()
        .filter_map(|l| l.trim().strip_prefix("packageName="))
        .collect();
    assert!(packages.contains(&"com.android.messaging"), "{activities}");
    assert!(
        !packages.contains(&"com.android.adbkeyboard"),
        "an IME has no launcher activity"
    );
    assert!(
        activities.contains("      name=com.android.settings.Settings\n"),
        "{activities}"
    );
    assert_eq!(device.shell("wm density"), "Physical density: 420\n");
    assert!(
        device
            .shell("pm list features")
            .contains("feature:android.hardware.touchscreen\n")
    );
    let displays = device.shell("dumpsys SurfaceFlinger --display-id");
    assert_eq!(
        displays
            .lines()
            .filter(|l| l.starts_with("Display "))
            .count(),
        1
    );
    let ps = device.shell("ps -e");
    assert!(
        ps.lines()
            .any(|l| l.starts_with('u') && l.ends_with(" com.android.launcher")),
        "{ps}"
    );
    assert_eq!(device.shell("getprop ro.boot.qemu.avd_name"), "\n");
}
