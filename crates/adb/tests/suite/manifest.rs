//! The backend knows exactly the device-owned commands of the manifest.

use openphone_adb::{AdbConfig, AdbPhone, device_commands};
use openphone_device::PhoneDevice;

#[test]
fn the_backend_knows_every_device_owned_command_of_the_manifest() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../runtime/protocol/openphone-commands.json"
    ))
    .unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut device_owned: Vec<String> = manifest["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.get("service").is_none())
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    device_owned.sort_unstable();
    let mut ours = device_commands();
    ours.sort_unstable();
    assert_eq!(ours, device_owned);
    let phone = AdbPhone::open(AdbConfig::default());
    for name in &ours {
        assert!(phone.supports(name), "{name}");
    }
    assert!(!phone.supports("openphone.memory.search"));
    assert!(!phone.supports("no.such.tool"));
}
