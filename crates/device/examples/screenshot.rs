//! Writes PNG screenshots of a few demo screens: `cargo run -p openphone-device --example
//! screenshot -- OUT_DIR`.

use base64::Engine as _;
use openphone_device::SimPhone;
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    let (phone, _clock) = SimPhone::demo()?;
    let steps: [(&str, &str, serde_json::Value); 4] = [
        (
            "home",
            "openphone.input.press_key",
            json!({ "key": "home" }),
        ),
        (
            "messages",
            "openphone.app.open",
            json!({ "package_or_label": "Messages" }),
        ),
        (
            "thread",
            "openphone.ui.tap_element",
            json!({ "element_id": "thread_200" }),
        ),
        (
            "calendar",
            "openphone.app.open",
            json!({ "package_or_label": "Calendar" }),
        ),
    ];
    for (name, tool, params) in steps {
        phone.execute_sync(tool, &params)?;
        let shot = phone.execute_sync(
            "openphone.screen.get",
            &json!({ "include_screenshot": true }),
        )?;
        let data = shot["screenshot"]["data_base64"]
            .as_str()
            .unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| e.to_string())?;
        let path = format!("{out}/{name}.png");
        std::fs::write(&path, &bytes)?;
        println!("{path}: {} bytes", bytes.len());
    }
    Ok(())
}
