//! End to end: the backend, the real adb server and client, the fake device.

use std::time::Duration;

use openphone_adb::{AdbConfig, AdbPhone, list_devices};
use openphone_device::{DeviceError, PhoneDevice};
use openphone_fake_adbd::Options;
use serde_json::{Value, json};

use super::support::{Rig, free_port};

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["element_id"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screen_get_shows_the_devices_elements() {
    let rig = Rig::default().await;
    let screen = rig.call("openphone.screen.get", json!({})).await.unwrap();
    let sim = rig
        .fake
        .as_ref()
        .unwrap()
        .sim()
        .execute_sync("openphone.screen.get", &json!({}))
        .unwrap();
    let ours = ids(&screen["interactive_elements"]);
    assert!(!ours.is_empty());
    assert_eq!(ours, ids(&sim["interactive_elements"]));
    assert_eq!(screen["package"], sim["package"]);
    assert_eq!(screen["visible_text"], sim["visible_text"]);
    // The profile is known once the phone answered.
    assert_eq!(rig.phone.profile().platform, "android");
    assert!(rig.phone.profile().screen_width > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tap_lands_exactly_once_in_the_devices_log() {
    let rig = Rig::default().await;
    let screen = rig.call("openphone.screen.get", json!({})).await.unwrap();
    let first = &screen["interactive_elements"][0];
    let id = first["element_id"].as_str().unwrap();
    let (x, y) = (
        first["center"]["x"].as_i64().unwrap(),
        first["center"]["y"].as_i64().unwrap(),
    );
    let tapped = rig
        .call("openphone.ui.tap_element", json!({ "element_id": id }))
        .await
        .unwrap();
    assert_eq!(tapped["action"], "tap");
    assert_eq!(tapped["element"]["element_id"], id);
    let taps: Vec<String> = rig
        .log()
        .into_iter()
        .filter(|l| l.starts_with("input tap"))
        .collect();
    assert_eq!(taps, [format!("input tap {x} {y}")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_element_that_changed_since_the_screen_was_read_is_refused_and_nothing_is_tapped() {
    let rig = Rig::default().await;
    rig.call("openphone.screen.get", json!({})).await.unwrap();
    // The screen changes under the caller (the user opened another app).
    rig.call(
        "openphone.app.open",
        json!({ "package_or_label": "com.android.settings" }),
    )
    .await
    .unwrap();
    let before = rig.log().len();
    let screen = rig
        .fake
        .as_ref()
        .unwrap()
        .sim()
        .execute_sync("openphone.screen.get", &json!({}))
        .unwrap();
    let now_id = screen["interactive_elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["element_id"].as_str())
        .find(|id| !id.starts_with("nav_") && !id.starts_with("status"))
        .unwrap()
        .to_owned();
    let err = rig
        .call("openphone.ui.tap_element", json!({ "element_id": now_id }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "stale_element", "{err}");
    assert!(err.to_string().contains("read the screen again"), "{err}");
    assert_eq!(rig.log().len(), before, "nothing was tapped");
    let err = rig
        .call(
            "openphone.ui.tap_element",
            json!({ "element_id": "no_such_element" }),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "element_not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unplugged_phone_names_the_fix_and_works_again_when_it_is_back() {
    let mut rig = Rig::default().await;
    rig.call("openphone.screen.get", json!({})).await.unwrap();
    rig.unplug();
    let err = rig
        .call("openphone.screen.get", json!({}))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            DeviceError::DeviceNotFound { .. } | DeviceError::Offline { .. }
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("plug the phone in") || message.contains("reconnect"),
        "{message}"
    );
    rig.replug().await;
    let screen = rig.call("openphone.screen.get", json!({})).await.unwrap();
    assert!(!ids(&screen["interactive_elements"]).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthorized_phone_asks_for_the_rsa_prompt() {
    let rig = Rig::start(Options {
        unauthorized: true,
        ..Options::default()
    })
    .await;
    let err = rig
        .call("openphone.screen.get", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "device_unauthorized", "{err}");
    assert!(err.to_string().contains("USB debugging prompt"), "{err}");
    let devices = list_devices(&rig.config()).await.unwrap();
    let me = devices
        .iter()
        .find(|d| d.serial == rig.addr.to_string())
        .unwrap();
    assert_eq!(me.state, "unauthorized");
    assert!(!me.is_ready());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_never_answers_is_a_device_timeout() {
    let rig = Rig::start(Options {
        hang_on: Some("dumpsys battery".into()),
        ..Options::default()
    })
    .await;
    let mut config = rig.config();
    config.timeout = Duration::from_secs(2);
    let phone = AdbPhone::open(config);
    let err = super::support::call(&phone, "openphone.device.status", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "device_timeout", "{err}");
    assert!(err.to_string().contains("dumpsys battery"), "{err}");
    // The phone still answers what does not hang.
    super::support::call(&phone, "openphone.screen.get", json!({}))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_adb_server_and_no_adb_binary_is_adb_server_unavailable() {
    let config = AdbConfig {
        serial: Some("127.0.0.1:1".into()),
        adb_path: Some("/nonexistent/adb".into()),
        server_port: Some(free_port()),
        timeout: Duration::from_secs(5),
    };
    let err = AdbPhone::connect(config.clone()).await.unwrap_err();
    assert_eq!(err.code(), "adb_server_unavailable", "{err}");
    assert!(err.to_string().contains("adb start-server"), "{err}");
    assert_eq!(
        list_devices(&config).await.unwrap_err().code(),
        "adb_server_unavailable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_serial_is_device_not_found() {
    let rig = Rig::default().await;
    // Start the rig's server, then ask for a USB serial nobody attached.
    rig.call("openphone.screen.get", json!({})).await.unwrap();
    let phone = AdbPhone::open(rig.config().with_serial("R58M000NOPE"));
    let err = super::support::call(&phone, "openphone.screen.get", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "device_not_found", "{err}");
    assert!(err.to_string().contains("R58M000NOPE"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_os_dialog_is_reported_never_tapped_and_answered_only_on_the_users_word() {
    let rig = Rig::default().await;
    let err = rig
        .call("openphone.share.text", json!({ "text": "hello" }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "framework_confirmation_required", "{err}");
    let dialog = openphone_device::PendingDialog::from_error(&err).unwrap();
    let taps_before = rig
        .log()
        .iter()
        .filter(|l| l.starts_with("input tap"))
        .count();
    assert_eq!(taps_before, 0, "the backend tapped nothing on its own");
    // A stale id presses nothing.
    let gone = rig
        .phone
        .resolve_dialog("dlg-000000000000000000000000", false)
        .await
        .unwrap_err();
    assert_eq!(gone.code(), "invalid_input", "{gone}");
    let answered = rig
        .phone
        .resolve_dialog(&dialog.dialog_id, false)
        .await
        .unwrap();
    assert_eq!(answered["accepted"], false);
    let screen = rig.call("openphone.screen.get", json!({})).await.unwrap();
    assert_ne!(screen["package"], dialog.package, "the dialog is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_screenshot_comes_binary_safe_over_exec() {
    let rig = Rig::default().await;
    let screen = rig
        .call(
            "openphone.screen.get",
            json!({ "include_screenshot": true }),
        )
        .await
        .unwrap();
    let shot = &screen["screenshot"];
    assert_eq!(shot["mime_type"], "image/png");
    assert!(shot["width"].as_u64().unwrap() > 0);
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data_base64"].as_str().unwrap())
        .unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert_eq!(png.len() as u64, shot["byte_length"].as_u64().unwrap());
}

fn decode_png(b64: &Value) -> (u32, u32, Vec<u8>) {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.as_str().unwrap())
        .unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_screenshot_is_downscaled_like_the_simulators_and_its_scale_maps_back() {
    let rig = Rig::default().await;
    let screen = rig
        .call(
            "openphone.screen.get",
            json!({ "include_screenshot": true }),
        )
        .await
        .unwrap();
    let shot = &screen["screenshot"];
    // screencap gave the physical screen (wm size); the image is its third, longest side 800.
    assert_eq!(shot["screen_width"], screen["width"]);
    assert_eq!(shot["screen_height"], screen["height"]);
    let (w, h, ours) = decode_png(&shot["data_base64"]);
    assert_eq!(
        (u64::from(w), u64::from(h)),
        (
            shot["width"].as_u64().unwrap(),
            shot["height"].as_u64().unwrap()
        )
    );
    assert_eq!(w.max(h), 800);
    assert!(screen["width"].as_u64().unwrap() > u64::from(w));
    // The simulator behind the fake device reports the same size and scale, and (the fake
    // scaled its image up by whole pixels) the same pixels.
    let sim = rig
        .fake
        .as_ref()
        .unwrap()
        .sim()
        .execute_sync(
            "openphone.screen.get",
            &json!({ "include_screenshot": true }),
        )
        .unwrap();
    let sim_shot = &sim["screenshot"];
    assert_eq!(shot["scale"], sim_shot["scale"]);
    assert_eq!(
        (shot["width"].clone(), shot["height"].clone()),
        (sim_shot["width"].clone(), sim_shot["height"].clone())
    );
    let (_, _, theirs) = decode_png(&sim_shot["data_base64"]);
    assert!(
        ours == theirs,
        "the downscaled screencap differs from the simulator's screenshot"
    );
    // A point on the image maps back to the screen: an element's centre, scaled to the image
    // and back by the reported scale, lands inside the element's bounds.
    let scale = shot["scale"].as_f64().unwrap();
    assert!((scale - 1.0 / 3.0).abs() < 1e-9, "{scale}");
    let e = &screen["interactive_elements"][0];
    let (cx, cy) = (
        e["center"]["x"].as_f64().unwrap(),
        e["center"]["y"].as_f64().unwrap(),
    );
    let (ix, iy) = ((cx * scale).floor(), (cy * scale).floor());
    assert!(ix < f64::from(w) && iy < f64::from(h));
    let (bx, by) = (ix / scale, iy / scale);
    let b = &e["bounds"];
    assert!(
        (b["left"].as_f64().unwrap()..=b["right"].as_f64().unwrap()).contains(&bx)
            && (b["top"].as_f64().unwrap()..=b["bottom"].as_f64().unwrap()).contains(&by),
        "image point ({ix}, {iy}) maps back to ({bx}, {by}), outside {b}"
    );
}
