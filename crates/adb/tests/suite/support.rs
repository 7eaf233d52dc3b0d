//! The rig: the fake Android device in-process on a free port, a private adb server (its own
//! port, started by the backend itself with the real `/usr/bin/adb`, never the default 5037),
//! and an [`AdbPhone`] on `127.0.0.1:PORT`. Dropping the rig kills its adb server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use openphone_adb::{AdbConfig, AdbPhone};
use openphone_device::{CallOrigin, DeviceCall, DeviceError, PhoneDevice};
use openphone_fake_adbd::{FakeAdbd, Options};
use openphone_protocol::Registry;
use serde_json::Value;

/// The real adb client (Debian's `adb` package).
pub fn adb_binary() -> PathBuf {
    let adb = std::env::var_os("ADB").map_or_else(|| PathBuf::from("/usr/bin/adb"), PathBuf::from);
    assert!(
        adb.exists(),
        "these tests need the real adb client at {} (apt-get install adb, or set $ADB)",
        adb.display()
    );
    adb
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

pub struct Rig {
    pub fake: Option<FakeAdbd>,
    pub addr: SocketAddr,
    pub adb_port: u16,
    pub options: Options,
    pub phone: AdbPhone,
    pub dir: tempfile::TempDir,
}

impl Rig {
    /// A fake device with `options` (its log in the rig's directory) and a phone on it.
    pub async fn start(mut options: Options) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        options.log = Some(dir.path().join("input.log"));
        let fake = FakeAdbd::start("127.0.0.1:0".parse().unwrap(), options.clone())
            .await
            .unwrap();
        let addr = fake.addr();
        let adb_port = free_port();
        let phone = AdbPhone::open(Self::config_for(addr, adb_port));
        Rig {
            fake: Some(fake),
            addr,
            adb_port,
            options,
            phone,
            dir,
        }
    }

    pub async fn default() -> Rig {
        Rig::start(Options::default()).await
    }

    pub fn config_for(addr: SocketAddr, adb_port: u16) -> AdbConfig {
        AdbConfig {
            serial: Some(addr.to_string()),
            adb_path: Some(adb_binary()),
            server_port: Some(adb_port),
            timeout: Duration::from_secs(15),
        }
    }

    pub fn config(&self) -> AdbConfig {
        Self::config_for(self.addr, self.adb_port)
    }

    /// The input commands the device received, one per line.
    pub fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("input.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Stops the fake device (the phone is unplugged).
    pub fn unplug(&mut self) {
        self.fake = None;
    }

    /// A new fake device on the same address (the phone is plugged back in).
    pub async fn replug(&mut self) {
        let mut tries = 0;
        loop {
            match FakeAdbd::start(self.addr, self.options.clone()).await {
                Ok(fake) => {
                    self.fake = Some(fake);
                    return;
                }
                Err(e) if tries < 50 => {
                    tries += 1;
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("the fake device did not come back: {e}"),
            }
        }
    }

    /// Runs a manifest command on the phone.
    pub async fn call(&self, tool: &str, params: Value) -> Result<Value, DeviceError> {
        call(&self.phone, tool, params).await
    }
}

/// Runs a manifest command on any device, resolved from the embedded manifest.
pub async fn call(
    device: &dyn PhoneDevice,
    tool: &str,
    params: Value,
) -> Result<Value, DeviceError> {
    let registry = Registry::embedded().unwrap();
    let command = registry.resolve(tool).unwrap();
    let origin = CallOrigin::default();
    device
        .execute(DeviceCall {
            command,
            params: &params,
            origin: &origin,
        })
        .await
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = std::process::Command::new(adb_binary())
            .args(["-P", &self.adb_port.to_string(), "kill-server"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}
