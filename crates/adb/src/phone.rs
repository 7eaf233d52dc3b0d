//! [`AdbPhone`]: the connection to one phone — which device, what it is, the last screen the
//! caller read — and the primitives every command uses (run a shell command, dump the UI).

use std::sync::{Arc, Mutex, MutexGuard};

use openphone_clock::{Clock, SystemClock};
use openphone_device::DeviceError;

use crate::config::{AdbConfig, is_network_serial};
use crate::devices::parse_devices;
use crate::host::Server;
use crate::parse;
use crate::screen::Screen;
use crate::shell;

/// What the phone is, read once it answers (`getprop`, `wm size`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct DeviceInfo {
    pub model: String,
    pub manufacturer: String,
    pub release: String,
    pub sdk: u32,
    pub width: u32,
    pub height: u32,
}

#[derive(Debug, Default)]
pub(crate) struct Memory {
    /// What the phone is, once known.
    pub info: Option<DeviceInfo>,
    /// The last screen a caller read (`screen.get`, `screen.understand_local`): element taps
    /// resolve against it and refuse an element that changed since.
    pub last_read: Option<Screen>,
    /// Whether the ADB Keyboard IME is installed, once asked.
    pub adb_keyboard: Option<bool>,
    /// Whether the shell user may read these providers, once tried (`sms`, `call_log`).
    pub denied: std::collections::BTreeMap<String, String>,
    /// The serial found when none was configured (the only ready device at the first call):
    /// every later call goes to it, never to another phone that is the only one later.
    pub pinned: Option<String>,
}

/// A real Android phone driven through the adb server (see the crate docs).
#[derive(Debug, Clone)]
pub struct AdbPhone {
    pub(crate) config: AdbConfig,
    pub(crate) server: Server,
    pub(crate) memory: Arc<Mutex<Memory>>,
    pub(crate) clock: Arc<dyn Clock>,
}

impl AdbPhone {
    /// A phone that is contacted on first use: never fails, so a daemon starts while the
    /// phone is unplugged and works once it is there. Its profile is filled in on the first
    /// call that reaches it.
    pub fn open(config: AdbConfig) -> AdbPhone {
        AdbPhone {
            server: Server::new(&config),
            config,
            memory: Arc::new(Mutex::new(Memory::default())),
            clock: Arc::new(SystemClock),
        }
    }

    /// The same phone reading time (`captured_at`, calendar defaults) from `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> AdbPhone {
        self.clock = clock;
        self
    }

    /// Connects to the phone now (starting the adb server if none runs, `adb connect`ing a
    /// `HOST:PORT` serial) and reads what it is; fails with the device error that names the
    /// fix (`device_not_found`, `device_unauthorized`, `device_offline`,
    /// `adb_server_unavailable`, …).
    pub async fn connect(config: AdbConfig) -> Result<AdbPhone, DeviceError> {
        let phone = AdbPhone::open(config);
        phone.info().await?;
        Ok(phone)
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &AdbConfig {
        &self.config
    }

    /// The serial of the phone it drives: the configured one, else the only attached device
    /// in state `device` when first asked — pinned from then on, so a call after that phone
    /// went away fails naming it rather than reaching another phone.
    pub async fn serial(&self) -> Result<String, DeviceError> {
        if let Some(serial) = &self.config.serial {
            return Ok(serial.clone());
        }
        if let Some(pinned) = self.memory().pinned.clone() {
            return Ok(pinned);
        }
        let devices = parse_devices(&self.server.query("host:devices-l").await?);
        let ready: Vec<_> = devices.iter().filter(|d| d.is_ready()).collect();
        match ready.as_slice() {
            [one] => {
                let mut memory = self.memory();
                Ok(memory
                    .pinned
                    .get_or_insert_with(|| one.serial.clone())
                    .clone())
            }
            [] => match devices.as_slice() {
                // One device, not usable: say why (unauthorized, offline).
                [only] if only.state == "unauthorized" => Err(DeviceError::DeviceUnauthorized {
                    serial: only.serial.clone(),
                }),
                [only] => Err(DeviceError::Offline {
                    serial: only.serial.clone(),
                }),
                _ => Err(DeviceError::DeviceNotFound {
                    serial: "(none is attached)".to_owned(),
                }),
            },
            many => Err(DeviceError::invalid(
                "serial",
                format!(
                    "{} devices are attached ({}); choose one with `--device adb:SERIAL` or \
                     ANDROID_SERIAL",
                    many.len(),
                    many.iter()
                        .map(|d| d.serial.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    pub(crate) fn memory(&self) -> MutexGuard<'_, Memory> {
        self.memory
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `service` on the phone; a `HOST:PORT` phone the server does not know (yet, or any
    /// more) is connected first, as `adb connect` does. A failure after a state-changing
    /// command reached the device is `execution_result_unknown`, never run again.
    async fn service(&self, service: &str, command: &str) -> Result<Vec<u8>, DeviceError> {
        let serial = self.serial().await?;
        let mutating = !shell::is_read_only(command);
        let failure = match self.server.run(&serial, service, command).await {
            Ok(out) => return Ok(out),
            Err(failure) => failure,
        };
        if failure.after_sent && mutating {
            let reason = match &failure.error {
                DeviceError::DeviceTimeout { timeout_ms, .. } => {
                    format!("it did not answer within {timeout_ms} ms")
                }
                DeviceError::Offline { .. } => "the connection broke".to_owned(),
                other => format!("the exchange failed ({other})"),
            };
            return Err(DeviceError::ExecutionResultUnknown {
                serial,
                command: command.to_owned(),
                reason,
            });
        }
        match failure.error {
            DeviceError::DeviceNotFound { .. } | DeviceError::Offline { .. }
                if is_network_serial(&serial) =>
            {
                self.reconnect(&serial).await?;
                match self.server.run(&serial, service, command).await {
                    Ok(out) => Ok(out),
                    Err(again) if again.after_sent && mutating => {
                        Err(DeviceError::ExecutionResultUnknown {
                            serial,
                            command: command.to_owned(),
                            reason: "the connection broke after a reconnect".to_owned(),
                        })
                    }
                    Err(again) => Err(again.error),
                }
            }
            // The device side closed the stream: gone, or it refused the service.
            e @ DeviceError::Internal { .. } => Err(self.presence_error().await.unwrap_or(e)),
            other => Err(other),
        }
    }

    /// `host:connect:HOST:PORT`; the server answers `connected to …` or `already connected
    /// to …`, anything else is the reason it could not.
    async fn reconnect(&self, serial: &str) -> Result<(), DeviceError> {
        // A phone that went away stays listed (offline) while adb retries; drop it first.
        let _ = self
            .server
            .query(&format!("host:disconnect:{serial}"))
            .await;
        let answer = self.server.query(&format!("host:connect:{serial}")).await?;
        if answer.starts_with("connected to") || answer.starts_with("already connected") {
            // The server handshakes in the background; wait until it lists the phone ready.
            let waited = openphone_clock::Stopwatch::start();
            while waited.elapsed() < self.config.timeout.min(std::time::Duration::from_secs(10)) {
                let list = parse_devices(&self.server.query("host:devices-l").await?);
                match list.iter().find(|d| d.serial == serial) {
                    Some(d) if d.is_ready() => return Ok(()),
                    Some(d) if d.state == "unauthorized" => {
                        return Err(DeviceError::DeviceUnauthorized {
                            serial: serial.to_owned(),
                        });
                    }
                    _ => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
                }
            }
            return Err(DeviceError::Offline {
                serial: serial.to_owned(),
            });
        }
        if answer.contains("authenticate") || answer.contains("unauthorized") {
            // adb's own words when the phone never accepted this computer's key.
            return Err(DeviceError::DeviceUnauthorized {
                serial: serial.to_owned(),
            });
        }
        Err(DeviceError::DeviceNotFound {
            serial: format!("`{serial}` ({})", answer.trim()),
        })
    }

    /// Why the phone cannot be reached now, from the server's list: not listed, offline,
    /// unauthorized; `None` when it is listed ready.
    pub(crate) async fn presence_error(&self) -> Option<DeviceError> {
        let serial = match self.serial().await {
            Ok(serial) => serial,
            Err(e) => return Some(e),
        };
        let list = parse_devices(&self.server.query("host:devices-l").await.ok()?);
        match list.iter().find(|d| d.serial == serial) {
            None => Some(DeviceError::DeviceNotFound {
                serial: format!("`{serial}`"),
            }),
            Some(d) if d.is_ready() => None,
            Some(d) if d.state == "unauthorized" => {
                Some(DeviceError::DeviceUnauthorized { serial })
            }
            Some(_) => Some(DeviceError::Offline { serial }),
        }
    }

    /// Runs a shell command (`shell:`, v1: stdout and stderr interleaved) and returns its
    /// output as text.
    pub(crate) async fn shell(&self, command: &str) -> Result<String, DeviceError> {
        let out = self.service(&format!("shell:{command}"), command).await?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Runs a command with binary-safe output (`exec:`).
    pub(crate) async fn exec(&self, command: &str) -> Result<Vec<u8>, DeviceError> {
        self.service(&format!("exec:{command}"), command).await
    }

    /// What the phone is (read once, then remembered).
    pub(crate) async fn info(&self) -> Result<DeviceInfo, DeviceError> {
        if let Some(info) = self.memory().info.clone() {
            return Ok(info);
        }
        let props = parse::getprop(&self.shell("getprop").await?);
        let (width, height) = parse::wm_size(&self.shell("wm size").await?).unwrap_or((0, 0));
        let prop = |k: &str| props.get(k).cloned().unwrap_or_default();
        let info = DeviceInfo {
            model: prop("ro.product.model"),
            manufacturer: prop("ro.product.manufacturer"),
            release: prop("ro.build.version.release"),
            sdk: prop("ro.build.version.sdk").parse().unwrap_or(0),
            width,
            height,
        };
        self.memory().info = Some(info.clone());
        Ok(info)
    }

    /// Dumps the UI tree now (`uiautomator dump /dev/tty`; retried once when Android says it
    /// could not, which happens while the screen animates).
    pub(crate) async fn dump(&self) -> Result<Screen, DeviceError> {
        let mut last = String::new();
        for _ in 0..2 {
            let out = self.shell("uiautomator dump /dev/tty").await?;
            match Screen::parse(&out) {
                Ok(screen) => return Ok(screen),
                // Nothing at all: the connection closed under the command (unplugged).
                Err(_) if out.trim().is_empty() => {
                    if let Some(gone) = self.presence_error().await {
                        return Err(gone);
                    }
                    last = "it printed nothing".to_owned();
                }
                Err(e) => last = e,
            }
        }
        Err(DeviceError::Internal {
            message: format!("the phone did not give its UI tree: {last}"),
        })
    }
}
