//! The attached devices, as the adb server lists them (`host:devices-l`).

use openphone_device::DeviceError;
use serde::Serialize;

use crate::config::AdbConfig;
use crate::host::Server;

/// One device the adb server knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AdbDevice {
    /// Its serial (`HOST:PORT` for a phone over TCP).
    pub serial: String,
    /// Its state as adb names it: `device` (usable), `unauthorized`, `offline`,
    /// `authorizing`, `connecting`, `bootloader`, `recovery`, `sideload`,
    /// `no permissions (…)`, ….
    pub state: String,
    /// `ro.product.model` as adb reports it (underscores for spaces), when known.
    pub model: Option<String>,
    /// How it is attached: `usb` (with the port), `tcp`, or `unknown`.
    pub transport: String,
}

impl AdbDevice {
    /// Whether the backend can drive it (state `device`).
    pub fn is_ready(&self) -> bool {
        self.state == "device"
    }
}

/// Every device the adb server at `config` lists (starting the server once if none runs).
pub async fn list_devices(config: &AdbConfig) -> Result<Vec<AdbDevice>, DeviceError> {
    let text = Server::new(config).query("host:devices-l").await?;
    Ok(parse_devices(&text))
}

/// Parses the answer of `host:devices-l`: one device a line, `SERIAL  STATE key:value …`
/// (the state may hold spaces: `no permissions (…); see [URL]`).
pub fn parse_devices(text: &str) -> Vec<AdbDevice> {
    const KEYS: &[&str] = &["usb:", "product:", "model:", "device:", "transport_id:"];
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let (serial, rest) = line.split_once(char::is_whitespace)?;
            let rest = rest.trim();
            let mut state = Vec::new();
            let mut props = Vec::new();
            for word in rest.split_whitespace() {
                if props.is_empty() && !KEYS.iter().any(|k| word.starts_with(k)) {
                    state.push(word);
                } else {
                    props.push(word);
                }
            }
            let prop = |key: &str| {
                props
                    .iter()
                    .find_map(|p| p.strip_prefix(key))
                    .map(str::to_owned)
            };
            let transport = match prop("usb:") {
                Some(port) => format!("usb:{port}"),
                None if crate::config::is_network_serial(serial) => "tcp".to_owned(),
                None => "unknown".to_owned(),
            };
            Some(AdbDevice {
                serial: serial.to_owned(),
                state: state.join(" "),
                model: prop("model:"),
                transport,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_adb_prints_is_parsed() {
        let text = "R58M123ABC             device usb:1-1 product:a52qnsxx model:SM_A525F device:a52q transport_id:3\n\
                    127.0.0.1:40123        offline product:openphone_fake model:OpenPhone_Fake device:fake transport_id:4\n\
                    emulator-5554          unauthorized transport_id:1\n\
                    0123456789ABCDEF       no permissions (user in plugdev group; are your udev rules wrong?); see [http://developer.android.com/tools/device.html] usb:1-2 transport_id:5\n";
        let list = parse_devices(text);
        assert_eq!(list.len(), 4);
        assert_eq!(list[0].state, "device");
        assert_eq!(list[0].model.as_deref(), Some("SM_A525F"));
        assert_eq!(list[0].transport, "usb:1-1");
        assert!(list[0].is_ready());
        assert_eq!(list[1].state, "offline");
        assert_eq!(list[1].transport, "tcp");
        assert_eq!(list[2].state, "unauthorized");
        assert_eq!(list[2].model, None);
        assert!(
            list[3]
                .state
                .starts_with("no permissions (user in plugdev group;")
        );
        assert_eq!(list[3].transport, "usb:1-2");
    }

    #[test]
    fn no_devices_is_an_empty_list() {
        assert!(parse_devices("").is_empty());
        assert!(parse_devices("\n").is_empty());
    }
}
