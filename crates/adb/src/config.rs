//! Where the adb server is and which phone to drive: [`AdbConfig`], read from the environment
//! `adb` itself honours (`ANDROID_ADB_SERVER_PORT`, `ANDROID_SERIAL`, `adb` on `PATH` or under
//! `ANDROID_HOME`).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The adb server's default port.
pub const DEFAULT_SERVER_PORT: u16 = 5037;

/// How long one device command may take by default (a `uiautomator dump` on a slow phone
/// takes a few seconds).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// How to reach the phone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdbConfig {
    /// The device's serial (`adb devices`), or `HOST:PORT` of a phone on Wi-Fi debugging
    /// (connected with `host:connect` when the server does not list it yet). `None`: the only
    /// attached device in state `device`.
    pub serial: Option<String>,
    /// The `adb` binary to start the server with when none is running. `None`: `adb` on
    /// `PATH`, else `$ANDROID_HOME/platform-tools/adb`.
    pub adb_path: Option<PathBuf>,
    /// The adb server's port on 127.0.0.1. `None`: 5037.
    pub server_port: Option<u16>,
    /// How long one device command may take.
    pub timeout: Duration,
}

impl Default for AdbConfig {
    fn default() -> Self {
        Self {
            serial: None,
            adb_path: None,
            server_port: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl AdbConfig {
    /// The configuration `adb` itself would use: `ANDROID_SERIAL` and `ANDROID_ADB_SERVER_PORT`
    /// from the environment (an unparsable port is ignored, as by `adb`, with a warning).
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`AdbConfig::from_env`] over any variable lookup (tests pass their own).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let serial = var("ANDROID_SERIAL")
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty());
        let server_port =
            var("ANDROID_ADB_SERVER_PORT").and_then(|p| match p.trim().parse::<u16>() {
                Ok(0) | Err(_) => {
                    tracing::warn!(
                        value = %openphone_protocol::log_value(&p),
                        "ANDROID_ADB_SERVER_PORT is not a port number; using 5037"
                    );
                    None
                }
                Ok(port) => Some(port),
            });
        Self {
            serial,
            adb_path: None,
            server_port,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The same configuration for the device `serial`.
    pub fn with_serial(mut self, serial: impl Into<String>) -> Self {
        self.serial = Some(serial.into());
        self
    }

    /// The adb server's address.
    pub fn server_addr(&self) -> SocketAddr {
        SocketAddr::from((
            Ipv4Addr::LOCALHOST,
            self.server_port.unwrap_or(DEFAULT_SERVER_PORT),
        ))
    }

    /// The `adb` binary to start a server with: the configured one, else `adb` on `PATH`, else
    /// `$ANDROID_HOME/platform-tools/adb` (or `$ANDROID_SDK_ROOT/…`). `None` when none exists.
    pub fn adb_binary(&self) -> Option<PathBuf> {
        if let Some(path) = &self.adb_path {
            return Some(path.clone());
        }
        let on_path = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("adb"))
                .find(|candidate| is_file(candidate))
        });
        on_path.or_else(|| {
            ["ANDROID_HOME", "ANDROID_SDK_ROOT"]
                .iter()
                .filter_map(std::env::var_os)
                .map(|home| PathBuf::from(home).join("platform-tools").join("adb"))
                .find(|candidate| is_file(candidate))
        })
    }
}

fn is_file(path: &Path) -> bool {
    path.metadata().is_ok_and(|m| m.is_file())
}

/// Whether `serial` names a phone reached over TCP (`HOST:PORT`), which the server must be
/// told to connect to (`adb connect`).
pub(crate) fn is_network_serial(serial: &str) -> bool {
    match serial.rsplit_once(':') {
        Some((host, port)) => {
            !host.is_empty()
                && !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && port.parse::<u16>().is_ok()
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_adb_honours_is_read() {
        let c = AdbConfig::from_vars(|n| match n {
            "ANDROID_SERIAL" => Some(" emulator-5554 ".into()),
            "ANDROID_ADB_SERVER_PORT" => Some("5099".into()),
            _ => None,
        });
        assert_eq!(c.serial.as_deref(), Some("emulator-5554"));
        assert_eq!(c.server_addr().port(), 5099);
        let bad = AdbConfig::from_vars(|n| (n == "ANDROID_ADB_SERVER_PORT").then(|| "x".into()));
        assert_eq!(bad.server_addr().port(), 5037);
    }

    #[test]
    fn network_serials_are_told_from_usb_ones() {
        assert!(is_network_serial("127.0.0.1:5555"));
        assert!(is_network_serial("phone.local:40123"));
        assert!(!is_network_serial("R58M123ABC"));
        assert!(!is_network_serial("emulator-5554"));
        assert!(!is_network_serial("host:notaport"));
    }
}
