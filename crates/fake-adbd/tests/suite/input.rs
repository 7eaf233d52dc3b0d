//! `input text|swipe|keyevent` and the ADB Keyboard's Unicode broadcast.

use base64::Engine as _;

use super::support::Device;

/// Opens a compose screen with its body field focused.
fn compose(device: &Device) {
    device.shell("am start -a android.intent.action.SENDTO -d sms:+15550100");
    let body = device.find("compose_body").expect("the compose field");
    assert_eq!(body.attr("focused"), "true");
}

fn body_text(device: &Device) -> String {
    device
        .find("compose_body")
        .expect("the compose field")
        .attr("text")
        .to_owned()
}

#[test]
fn input_text_decodes_percent_s_and_shell_quoting() {
    let device = Device::start(&[]);
    compose(&device);
    assert_eq!(device.shell("input text 'it'\\''s%sfine;'"), "");
    assert_eq!(body_text(&device), "it's fine;");
    assert_eq!(
        device.logged().last().map(String::as_str),
        Some("input text 'it'\\''s%sfine;'")
    );
}

#[test]
fn unicode_text_goes_through_the_adb_keyboard_broadcast() {
    let device = Device::start(&[]);
    assert!(
        device
            .shell("ime list -s")
            .lines()
            .any(|l| l == "com.android.adbkeyboard/.AdbIME")
    );
    compose(&device);
    let b64 = base64::engine::general_purpose::STANDARD.encode("Grüße 🙂 ok");
    let out = device.shell(&format!("am broadcast -a ADB_INPUT_B64 --es msg {b64}"));
    assert_eq!(
        out,
        "Broadcasting: Intent { act=ADB_INPUT_B64 flg=0x400000 (has extras) }\nBroadcast completed: result=0\n"
    );
    assert_eq!(body_text(&device), "Grüße 🙂 ok");
}

#[test]
fn without_the_adb_keyboard_the_broadcast_reaches_nobody() {
    let device = Device::start(&["--no-adbkeyboard"]);
    assert_eq!(
        device.shell("ime list -s"),
        "com.android.inputmethod.latin/.LatinIME\n"
    );
    compose(&device);
    let b64 = base64::engine::general_purpose::STANDARD.encode("é");
    let out = device.shell(&format!("am broadcast -a ADB_INPUT_B64 --es msg {b64}"));
    assert!(out.ends_with("Broadcast completed: result=0\n"), "{out}");
    assert_eq!(body_text(&device), "");
    // And `input text` cannot type it either (Android's key map has no key for it).
    let out = device.shell("input text é");
    assert!(
        out.contains("Exception occurred while executing 'text'"),
        "{out}"
    );
    assert_eq!(body_text(&device), "");
}

#[test]
fn a_swipe_that_stays_put_is_a_long_press_and_one_that_moves_scrolls() {
    let device = Device::start(&[]);
    let (x, y) = device
        .find("app_icon_com.android.messaging")
        .expect("icon")
        .center();
    device.shell(&format!("input swipe {x} {y} {x} {y} 800"));
    assert!(device.find("menu_open").is_some(), "no long-press menu");
    device.shell("input keyevent KEYCODE_BACK");
    assert!(
        device.find("menu_open").is_none(),
        "back did not close the menu"
    );
    // A downward swipe from the status bar opens the shade.
    device.shell("input swipe 540 20 540 1400 300");
    assert!(device.find("notification_shade").is_some(), "no shade");
    assert_eq!(device.logged().len(), 3, "{:?}", device.logged());
}

#[test]
fn keyevents_move_between_apps_and_unknown_keys_say_so() {
    let device = Device::start(&[]);
    device.shell("monkey -p com.android.settings -c android.intent.category.LAUNCHER 1");
    assert_eq!(device.foreground(), "com.android.settings");
    assert_eq!(device.shell("input keyevent KEYCODE_HOME"), "");
    assert_eq!(device.foreground(), "com.android.launcher");
    assert_eq!(device.shell("input keyevent 187"), "");
    assert!(device.find("recents_list").is_some() || device.foreground() == "com.android.systemui");
    let out = device.shell("input keyevent KEYCODE_VOLUME_UP");
    assert!(out.contains("no key KEYCODE_VOLUME_UP"), "{out}");
    let out = device.shell("input tap one two");
    assert!(
        out.starts_with("Error: Invalid arguments for command: tap"),
        "{out}"
    );
}
