//! `device.status` names the foreground exactly as `screen.get` does (it takes a short cut
//! for the home screen instead of building it).

use serde_json::json;

use super::support::*;

fn foreground_matches_the_screen(phone: &openphone_device::SimPhone) {
    let status = run(phone, "openphone.device.status", json!({}));
    let screen = run(phone, "openphone.screen.get", json!({}));
    let fg = &status["device"]["foreground"];
    for key in ["package", "activity", "title"] {
        assert_eq!(fg[key], screen[key], "{key}: {status} vs {screen}");
    }
}

#[test]
fn device_status_names_the_home_screen_as_screen_get_does() {
    let (phone, _clock) = phone();
    foreground_matches_the_screen(&phone);
    assert_eq!(
        run(&phone, "openphone.device.status", json!({}))["device"]["foreground"]["screen"],
        json!("home")
    );
}

#[test]
fn device_status_names_an_open_app_as_screen_get_does() {
    let (phone, _clock) = phone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Messages" }),
    );
    foreground_matches_the_screen(&phone);
    run(
        &phone,
        "openphone.input.press_key",
        json!({ "key": "home" }),
    );
    foreground_matches_the_screen(&phone);
}
