//! The phones the daemon drives, built from `serve --device` or the configuration's
//! `[device]` / `[[devices]]` tables (`config/devices.rs`): simulated phones and Android phones
//! through the adb server, each under its id, handed to the bridge as one
//! [`openphone_core::Devices`].
//!
//! An Android phone that cannot be reached at start does not stop the daemon: it starts, each
//! call on that phone answers the device's error (unplugged, unauthorised, offline, no adb
//! server) with its fix, and the phone works again as soon as it is back — the backend
//! resolves its transport on every call. The startup line says so ([`Phones::notes`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use openphone_core::Devices;
use openphone_device::{PhoneDevice, SimPhone};

use crate::config::{Config, ConfigError, DeviceKind, DeviceSpec};

/// Which phone `serve --device` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The simulated phone with its default scenario.
    Sim,
    /// The simulated phone seeded from a scenario file.
    SimScenario(PathBuf),
    /// An Android phone through the adb server: this serial (or `host:port`), else
    /// `$ANDROID_SERIAL`, else the only attached phone.
    Adb(Option<String>),
    /// What the configuration's `[device]` / `[[devices]]` say (a simulated phone without
    /// either): `serve` without `--device`.
    Config,
}

impl DeviceChoice {
    /// Parses `sim`, `sim:<scenario.json>`, `adb` or `adb:<serial>`.
    pub fn parse(raw: &str) -> Result<DeviceChoice, String> {
        match raw.split_once(':') {
            None if raw == "sim" => Ok(DeviceChoice::Sim),
            None if raw == "adb" => Ok(DeviceChoice::Adb(None)),
            Some(("sim", path)) if !path.is_empty() => Ok(DeviceChoice::SimScenario(path.into())),
            Some(("adb", serial)) if !serial.trim().is_empty() => {
                Ok(DeviceChoice::Adb(Some(serial.trim().to_owned())))
            }
            _ => Err(format!(
                "unknown device {raw:?}: use `sim`, `sim:<scenario.json>`, `adb` or \
                 `adb:<serial>` (a serial from `adb devices`, or host:port of a phone on the \
                 network)"
            )),
        }
    }

    /// The phones this choice means under `config`: the flag's one phone (keeping the id and
    /// `adb_path` of a `[device]` table), or the configuration's.
    pub fn specs(&self, config: &Config) -> Result<Vec<DeviceSpec>, ConfigError> {
        let table = config.device.as_ref();
        let id = table
            .and_then(|d| d.id.clone())
            .unwrap_or_else(|| openphone_core::DEFAULT_DEVICE_ID.to_owned());
        let one = |kind| Ok(vec![DeviceSpec { id, kind }]);
        match self {
            DeviceChoice::Sim => one(DeviceKind::Sim { scenario: None }),
            DeviceChoice::SimScenario(path) => one(DeviceKind::Sim {
                scenario: Some(path.clone()),
            }),
            DeviceChoice::Adb(serial) => one(DeviceKind::Adb {
                serial: serial.clone(),
                adb_path: table.and_then(|d| d.adb_path.clone()),
            }),
            DeviceChoice::Config => Ok(config.device_specs()?.unwrap_or_else(|| {
                vec![DeviceSpec {
                    id: openphone_core::DEFAULT_DEVICE_ID.to_owned(),
                    kind: DeviceKind::Sim { scenario: None },
                }]
            })),
        }
    }
}

/// The daemon's phones, built.
pub struct Phones {
    /// Every phone by id, for the bridge.
    pub devices: Devices,
    /// The simulated ones (their scenario timelines and savers run in the background).
    pub sims: Vec<Arc<SimPhone>>,
    /// What each phone is, by id (`devices.list`).
    pub specs: Vec<DeviceSpec>,
    /// One line per phone for the startup output: what it is, and whether it answers now.
    pub notes: Vec<String>,
}

impl std::fmt::Debug for Phones {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Phones")
            .field("specs", &self.specs)
            .field("notes", &self.notes)
            .finish_non_exhaustive()
    }
}

/// Opens a simulated phone: its id among several (`None` for the daemon's only phone: its
/// saved state keeps its usual file) and its scenario.
pub type OpenSim<'a> = &'a dyn Fn(Option<&str>, Option<&Path>) -> Result<Arc<SimPhone>, String>;

/// Builds every phone of `specs` (at least one). A simulated phone that cannot be opened is an
/// error; an Android phone that does not answer now is not (see the module's comment).
pub async fn build(specs: Vec<DeviceSpec>, open_sim: OpenSim<'_>) -> Result<Phones, String> {
    let several = specs.len() > 1;
    let mut list: Vec<(String, Arc<dyn PhoneDevice>)> = Vec::with_capacity(specs.len());
    let mut sims = Vec::new();
    let mut notes = Vec::new();
    for spec in &specs {
        let device: Arc<dyn PhoneDevice> = match &spec.kind {
            DeviceKind::Sim { scenario } => {
                let state_id = several.then_some(spec.id.as_str());
                let sim = open_sim(state_id, scenario.as_deref())
                    .map_err(|e| format!("device {:?}: {e}", spec.id))?;
                notes.push(format!("phone {:?}: {} (simulated)", spec.id, spec.label()));
                sims.push(Arc::clone(&sim));
                sim
            }
            DeviceKind::Adb { serial, adb_path } => {
                let (device, note) =
                    adb_phone(&spec.id, serial.as_deref(), adb_path.as_deref()).await?;
                notes.push(note);
                device
            }
        };
        list.push((spec.id.clone(), device));
    }
    let devices = Devices::new(list)?;
    Ok(Phones {
        devices,
        sims,
        specs,
        notes,
    })
}

/// The adb configuration of a phone: the environment `adb` honours
/// (`ANDROID_ADB_SERVER_PORT`, `ANDROID_SERIAL`, `adb` on `PATH` or under `ANDROID_HOME`),
/// then the configured serial and `adb_path` over it.
pub fn adb_config(serial: Option<&str>, adb_path: Option<&Path>) -> openphone_adb::AdbConfig {
    let mut config = openphone_adb::AdbConfig::from_env();
    if let Some(serial) = serial {
        config.serial = Some(serial.to_owned());
    }
    if let Some(path) = adb_path {
        config.adb_path = Some(path.to_path_buf());
    }
    config
}

/// An Android phone through the adb server (`openphone-adb`), and its startup note: it is
/// tried once now; one that does not answer is kept all the same (each call answers its
/// error until it is back).
async fn adb_phone(
    id: &str,
    serial: Option<&str>,
    adb_path: Option<&Path>,
) -> Result<(Arc<dyn PhoneDevice>, String), String> {
    let config = adb_config(serial, adb_path);
    let label = serial.map_or_else(|| "adb".to_owned(), |s| format!("adb:{s}"));
    match openphone_adb::AdbPhone::connect(config.clone()).await {
        Ok(phone) => {
            let serial = phone.serial().await.unwrap_or_else(|_| label.clone());
            let profile = phone.profile();
            let note = format!(
                "phone {id:?}: {label} — connected ({} {}, serial {serial})",
                profile.platform, profile.model
            );
            Ok((Arc::new(phone), note))
        }
        Err(e) => {
            tracing::warn!(device = %id, error = %e, "the phone does not answer at start");
            let note = format!(
                "phone {id:?}: {label} — not reachable now ({}: {e}); the daemon runs, calls on \
                 this phone answer that error until it is back, then it just works",
                e.code()
            );
            Ok((Arc::new(openphone_adb::AdbPhone::open(config)), note))
        }
    }
}

/// What the adb server says about a phone now (`devices.list`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdbProbe {
    /// The serial it resolves to, when known.
    pub serial: Option<String>,
    /// adb's state (`device`, `unauthorized`, `offline`), or `not_found` /
    /// `adb_server_unavailable`.
    pub state: String,
    /// What is wrong, with the fix, when it is not `device`.
    pub problem: Option<String>,
}

/// Looks the phone up in the adb server's device list.
pub async fn adb_state(serial: Option<&str>, adb_path: Option<&Path>) -> AdbProbe {
    let config = adb_config(serial, adb_path);
    let listed = match openphone_adb::list_devices(&config).await {
        Ok(listed) => listed,
        Err(e) => {
            return AdbProbe {
                serial: config.serial.clone(),
                state: e.code().to_owned(),
                problem: Some(e.to_string()),
            };
        }
    };
    let found = match &config.serial {
        Some(serial) => listed.iter().find(|d| &d.serial == serial),
        None => {
            let ready: Vec<_> = listed.iter().filter(|d| d.is_ready()).collect();
            match ready.as_slice() {
                [one] => Some(*one),
                _ => listed.first().filter(|_| listed.len() == 1),
            }
        }
    };
    match found {
        Some(d) if d.is_ready() => AdbProbe {
            serial: Some(d.serial.clone()),
            state: d.state.clone(),
            problem: None,
        },
        Some(d) => AdbProbe {
            serial: Some(d.serial.clone()),
            state: d.state.clone(),
            problem: Some(match d.state.as_str() {
                "unauthorized" => "the phone has not authorised this computer: unlock it and \
                                   accept the \"Allow USB debugging?\" prompt"
                    .to_owned(),
                "offline" => "the phone is attached but offline: reconnect the cable (or \
                              `adb reconnect`), or restart adb debugging on the phone"
                    .to_owned(),
                other => format!("adb lists it as {other:?}"),
            }),
        },
        None => AdbProbe {
            serial: config.serial.clone(),
            state: "not_found".to_owned(),
            problem: Some(match &config.serial {
                Some(serial) => format!(
                    "the adb server lists no device {serial:?}: plug it in (or `adb connect \
                     {serial}` for a phone on the network) and check `adb devices`"
                ),
                None if listed.is_empty() => "no phone is attached: plug one in with USB \
                                              debugging on, then check `adb devices`"
                    .to_owned(),
                None => "several phones are attached: name one with `serial` (or \
                         ANDROID_SERIAL)"
                    .to_owned(),
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_flag_parses_sim_and_adb() {
        assert_eq!(DeviceChoice::parse("sim").unwrap(), DeviceChoice::Sim);
        assert_eq!(DeviceChoice::parse("adb").unwrap(), DeviceChoice::Adb(None));
        assert_eq!(
            DeviceChoice::parse("adb:127.0.0.1:5555").unwrap(),
            DeviceChoice::Adb(Some("127.0.0.1:5555".into()))
        );
        assert_eq!(
            DeviceChoice::parse("sim:a.json").unwrap(),
            DeviceChoice::SimScenario("a.json".into())
        );
        for bad in ["adb:", "usb", "sim:", ""] {
            let e = DeviceChoice::parse(bad).unwrap_err();
            assert!(e.contains("adb:<serial>"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn the_flag_keeps_the_device_tables_id_and_adb_path() {
        let config = Config::parse(
            "[device]\nid = \"pixel\"\nkind = \"adb\"\nadb_path = \"/opt/adb\"\n",
            "x",
        )
        .unwrap();
        let specs = DeviceChoice::Adb(Some("X1".into())).specs(&config).unwrap();
        assert_eq!(
            specs,
            [DeviceSpec {
                id: "pixel".into(),
                kind: DeviceKind::Adb {
                    serial: Some("X1".into()),
                    adb_path: Some("/opt/adb".into())
                }
            }]
        );
        let none = DeviceChoice::Config.specs(&Config::default()).unwrap();
        assert_eq!(none[0].id, "default");
        assert_eq!(none[0].kind, DeviceKind::Sim { scenario: None });
    }
}
