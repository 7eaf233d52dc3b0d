//! The phones of the configuration: `[device]` (the daemon's one phone) or `[[devices]]`
//! (several, each with an `id`), and what `serve --device` makes of them ([`DeviceSpec`]).
//!
//! ```toml
//! [device]
//! kind = "adb"            # "sim" (default) or "adb"
//! serial = "R58M123ABC"   # adb only; default: $ANDROID_SERIAL, else the only attached phone
//! adb_path = "/opt/platform-tools/adb"   # adb only; default: `adb` on PATH, else $ANDROID_HOME
//!
//! [[devices]]
//! id = "pixel"
//! kind = "adb"
//! serial = "127.0.0.1:5555"
//!
//! [[devices]]
//! id = "test"
//! kind = "sim"
//! scenario = "scenarios/busy.json"   # sim only
//! ```

use std::path::PathBuf;

use serde::Deserialize;

use super::ConfigError;

/// One phone as configured (`[device]` or a `[[devices]]` entry). Unknown keys are refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceConfig {
    /// The phone's id in requests (`device_id`), audit records and grants. Needed in
    /// `[[devices]]`; `[device]` defaults to `default`.
    #[serde(default)]
    pub id: Option<String>,
    /// `sim` (default) or `adb`.
    #[serde(default)]
    pub kind: Option<String>,
    /// adb: the device's serial (`adb devices`), or `host:port` of a phone on the network
    /// (connected as `adb connect` does).
    #[serde(default)]
    pub serial: Option<String>,
    /// adb: the `adb` binary that starts the adb server when it is not running.
    #[serde(default)]
    pub adb_path: Option<PathBuf>,
    /// sim: the scenario file that seeds the simulated phone.
    #[serde(default)]
    pub scenario: Option<PathBuf>,
}

/// What kind of phone a [`DeviceSpec`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceKind {
    /// The simulated phone, from a scenario file or the default scenario.
    Sim { scenario: Option<PathBuf> },
    /// An Android phone through the adb server.
    Adb {
        /// `None`: `$ANDROID_SERIAL`, else the only attached phone.
        serial: Option<String>,
        /// `None`: `adb` on PATH, else `$ANDROID_HOME/platform-tools/adb`.
        adb_path: Option<PathBuf>,
    },
}

/// One phone the daemon will drive, checked: its id and kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSpec {
    pub id: String,
    pub kind: DeviceKind,
}

impl DeviceSpec {
    /// How `devices list` and the startup line name it: `sim`, `sim:<file>`, `adb`,
    /// `adb:<serial>`.
    pub fn label(&self) -> String {
        match &self.kind {
            DeviceKind::Sim { scenario: None } => "sim".into(),
            DeviceKind::Sim {
                scenario: Some(path),
            } => format!("sim:{}", path.display()),
            DeviceKind::Adb { serial: None, .. } => "adb".into(),
            DeviceKind::Adb {
                serial: Some(serial),
                ..
            } => format!("adb:{serial}"),
        }
    }
}

fn err(table: &str, message: String) -> ConfigError {
    ConfigError::Parse {
        path: table.to_owned(),
        message,
    }
}

impl DeviceConfig {
    /// This entry as a spec with id `id`, its keys checked against its kind.
    fn spec(&self, table: &str, id: String) -> Result<DeviceSpec, ConfigError> {
        openphone_core::devices::check_device_id(&id).map_err(|m| err(table, m))?;
        let kind = match self.kind.as_deref().map(str::trim) {
            None | Some("sim") => {
                if self.serial.is_some() || self.adb_path.is_some() {
                    return Err(err(
                        table,
                        format!(
                            "device {id:?} is a simulated phone: `serial` and `adb_path` are for \
                             `kind = \"adb\"`"
                        ),
                    ));
                }
                DeviceKind::Sim {
                    scenario: self.scenario.clone(),
                }
            }
            Some("adb") => {
                if self.scenario.is_some() {
                    return Err(err(
                        table,
                        format!(
                            "device {id:?} is an adb phone: `scenario` is for `kind = \"sim\"`"
                        ),
                    ));
                }
                let serial = self
                    .serial
                    .as_deref()
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned);
                DeviceKind::Adb {
                    serial,
                    adb_path: self.adb_path.clone(),
                }
            }
            Some(other) => {
                return Err(err(
                    table,
                    format!("device {id:?}: kind {other:?} is not \"sim\" or \"adb\""),
                ));
            }
        };
        Ok(DeviceSpec { id, kind })
    }
}

/// The phones the configuration names: `[device]` (one, id `default` unless set) or
/// `[[devices]]` (each with a unique `id`), never both; neither: `None` (the daemon's
/// choice, a simulated phone).
pub fn configured(
    device: Option<&DeviceConfig>,
    devices: &[DeviceConfig],
) -> Result<Option<Vec<DeviceSpec>>, ConfigError> {
    match (device, devices) {
        (Some(_), [_, ..]) => Err(err(
            "device",
            "set `[device]` (one phone) or `[[devices]]` (several, each with an id), not both"
                .into(),
        )),
        (Some(one), []) => {
            let id = one
                .id
                .clone()
                .unwrap_or_else(|| openphone_core::DEFAULT_DEVICE_ID.to_owned());
            Ok(Some(vec![one.spec("device", id)?]))
        }
        (None, []) => Ok(None),
        (None, many) => {
            let mut out: Vec<DeviceSpec> = Vec::with_capacity(many.len());
            for entry in many {
                let Some(id) = entry.id.clone() else {
                    return Err(err(
                        "devices",
                        "every [[devices]] entry needs an `id` (e.g. `id = \"pixel\"`): requests \
                         name their phone by it"
                            .into(),
                    ));
                };
                if out.iter().any(|d| d.id == id) {
                    return Err(err(
                        "devices",
                        format!("device id {id:?} is configured twice"),
                    ));
                }
                out.push(entry.spec("devices", id)?);
            }
            Ok(Some(out))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::config::Config;

    #[test]
    fn one_device_table_defaults_its_id() {
        let c = Config::parse(
            "[device]\nkind = \"adb\"\nserial = \"emulator-5554\"\n",
            "x",
        )
        .unwrap();
        let specs = configured(c.device.as_ref(), &c.devices).unwrap().unwrap();
        assert_eq!(
            specs,
            [DeviceSpec {
                id: "default".into(),
                kind: DeviceKind::Adb {
                    serial: Some("emulator-5554".into()),
                    adb_path: None
                }
            }]
        );
        assert_eq!(specs[0].label(), "adb:emulator-5554");
    }

    #[test]
    fn several_devices_need_unique_ids() {
        let two = "[[devices]]\nid = \"a\"\n[[devices]]\nid = \"b\"\nkind = \"adb\"\n";
        let c = Config::parse(two, "x").unwrap();
        let specs = configured(c.device.as_ref(), &c.devices).unwrap().unwrap();
        assert_eq!(specs.len(), 2);
        for (text, needle) in [
            ("[[devices]]\nkind = \"sim\"\n", "needs an `id`"),
            (
                "[[devices]]\nid = \"a\"\n[[devices]]\nid = \"a\"\n",
                "configured twice",
            ),
            ("[device]\n[[devices]]\nid = \"a\"\n", "not both"),
            ("[device]\nkind = \"usb\"\n", "is not \"sim\" or \"adb\""),
            ("[device]\nserial = \"x\"\n", "are for `kind = \"adb\"`"),
            (
                "[device]\nkind = \"adb\"\nscenario = \"s.json\"\n",
                "is for `kind = \"sim\"`",
            ),
            ("[device]\nid = \"two words\"\n", "device id"),
        ] {
            // `Config::parse` checks the tables too.
            let e = Config::parse(text, "x").unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn unknown_device_keys_are_refused() {
        let e = Config::parse("[device]\nkind = \"adb\"\nport = 5037\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `port`"), "{e}");
    }
}
