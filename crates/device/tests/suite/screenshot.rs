//! Screenshots are real PNGs rendered from the UI tree.

use base64::Engine as _;
use serde_json::{Value, json};

use super::support::{phone, run, tap};

fn decode(shot: &Value) -> (Vec<u8>, png::OutputInfo) {
    assert_eq!(shot["mime_type"], "image/png");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(shot["data_base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(shot["byte_length"], bytes.len());
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes.clone()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    (buf[..info.buffer_size()].to_vec(), info)
}

#[test]
fn screenshot_is_a_small_png_of_the_screen() {
    let (phone, _clock) = phone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Messages" }),
    );
    tap(&phone, "thread_200");
    let shot = run(
        &phone,
        "openphone.screen.get",
        json!({ "include_screenshot": true }),
    )["screenshot"]
        .clone();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(shot["data_base64"].as_str().unwrap())
        .unwrap();
    assert!(bytes.len() < 1_000_000, "{} bytes", bytes.len());
    assert!(
        bytes.len() < 200_000,
        "well under 1 MB: {} bytes",
        bytes.len()
    );
    let (pixels, info) = decode(&shot);
    assert_eq!((info.width, info.height), (360, 800));
    assert_eq!(
        (shot["width"].as_u64(), shot["height"].as_u64()),
        (Some(360), Some(800))
    );
    assert_eq!(info.color_type, png::ColorType::Rgb);
    // Not blank: many distinct colours, and the status bar is dark.
    let distinct: std::collections::HashSet<&[u8]> = pixels.chunks(3).collect();
    assert!(distinct.len() >= 5, "{} colours", distinct.len());
    assert_eq!(&pixels[0..3], &[32, 33, 36]);
}

#[test]
fn screenshots_follow_the_screen_and_the_theme() {
    let (phone, _clock) = phone();
    let home = run(
        &phone,
        "openphone.screen.get",
        json!({ "include_screenshot": true }),
    )["screenshot"]["data_base64"]
        .clone();
    run(
        &phone,
        "openphone.app.open",
        json!({ "package_or_label": "Settings" }),
    );
    let light = run(
        &phone,
        "openphone.screen.get",
        json!({ "include_screenshot": true }),
    )["screenshot"]["data_base64"]
        .clone();
    assert_ne!(home, light);
    tap(&phone, "setting_dark_theme");
    let dark = run(
        &phone,
        "openphone.screen.get",
        json!({ "include_screenshot": true }),
    )["screenshot"]
        .clone();
    let (pixels, _) = decode(&dark);
    // The app background (below the app bar) is dark.
    let at = |x: usize, y: usize| &pixels[(y * 360 + x) * 3..(y * 360 + x) * 3 + 3];
    assert_eq!(at(5, 700), &[18, 18, 18]);
}
