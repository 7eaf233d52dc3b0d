//! The ADB *host* protocol, spoken to the adb server on its socket.
//!
//! A request is four hex digits of length and the request text; the server answers `OKAY`, or
//! `FAIL` with four hex digits of length and a message. Host queries (`host:devices-l`,
//! `host:connect:…`) answer `OKAY` and a length-prefixed text. A device service is reached by
//! `host:transport:<serial>` on the same socket, then the service (`shell:<cmd>`,
//! `exec:<cmd>`), whose output streams until the device closes it.
//!
//! Every call opens a fresh socket and resolves the transport again, so a device that went
//! away and came back just works (lazy recovery). When the server socket refuses, the server is
//! started once with `adb start-server` and the connection retried.

use std::net::SocketAddr;
use std::time::Duration;

use openphone_device::DeviceError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::config::AdbConfig;

/// The longest request the server accepts (its length field is four hex digits).
const MAX_REQUEST: usize = 0xffff;

/// The most a device command may print before the backend stops reading (a PNG screenshot of
/// a large screen is a few MiB).
const MAX_OUTPUT: usize = 64 * 1024 * 1024;

/// A client of one adb server.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    addr: SocketAddr,
    config: AdbConfig,
}

/// Why a host request failed below the device level.
#[derive(Debug)]
enum Wire {
    /// The socket failed.
    Io(std::io::Error),
    /// The server answered `FAIL` with this message.
    Fail(String),
    /// The server's answer is not the protocol.
    Garbled(String),
}

impl From<std::io::Error> for Wire {
    fn from(e: std::io::Error) -> Self {
        Wire::Io(e)
    }
}

impl Server {
    pub(crate) fn new(config: &AdbConfig) -> Self {
        Self {
            addr: config.server_addr(),
            config: config.clone(),
        }
    }

    fn unavailable(&self, reason: impl Into<String>) -> DeviceError {
        DeviceError::AdbServerUnavailable {
            address: self.addr.to_string(),
            reason: reason.into(),
        }
    }

    /// A connected socket to the server, starting the server once when nothing listens.
    async fn socket(&self) -> Result<TcpStream, DeviceError> {
        match self.connect_once().await {
            Ok(stream) => return Ok(stream),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(self.unavailable(e.to_string())),
        }
        self.start_server().await?;
        // `adb start-server` returns once the server listens; allow it a moment anyway.
        let mut last = None;
        for _ in 0..20 {
            match self.connect_once().await {
                Ok(stream) => return Ok(stream),
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(self.unavailable(format!(
            "started `adb start-server`, but the server still refuses: {}",
            last.map_or_else(|| "no answer".to_owned(), |e| e.to_string())
        )))
    }

    async fn connect_once(&self) -> std::io::Result<TcpStream> {
        let stream = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(self.addr))
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out")
            })??;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }

    async fn start_server(&self) -> Result<(), DeviceError> {
        let Some(adb) = self.config.adb_binary() else {
            return Err(self.unavailable(
                "nothing listens there and no `adb` binary was found (not on PATH, not under \
                 $ANDROID_HOME/platform-tools)",
            ));
        };
        let port = self.addr.port().to_string();
        tracing::info!(adb = %adb.display(), port = %port, "starting the adb server");
        let run = tokio::process::Command::new(&adb)
            .args(["-P", &port, "start-server"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .map_err(|_| self.unavailable(format!("`{} start-server` hung", adb.display())))?
            .map_err(|e| {
                self.unavailable(format!(
                    "could not run `{} start-server`: {e}",
                    adb.display()
                ))
            })?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(self.unavailable(format!(
                "`{} start-server` failed ({}): {}",
                adb.display(),
                output.status,
                stderr.trim()
            )));
        }
        Ok(())
    }

    /// A host query answered with a length-prefixed text (`host:devices-l`, `host:version`,
    /// `host:connect:HOST:PORT`).
    pub(crate) async fn query(&self, request: &str) -> Result<String, DeviceError> {
        let mut stream = self.socket().await?;
        let answer = async {
            send(&mut stream, request).await?;
            status(&mut stream).await?;
            read_hex_text(&mut stream).await
        };
        match tokio::time::timeout(self.config.timeout, answer).await {
            Err(_) => Err(self.unavailable(format!("no answer to `{request}` in time"))),
            Ok(Ok(text)) => Ok(text),
            Ok(Err(Wire::Fail(message))) => Err(DeviceError::Internal {
                message: format!("the adb server refused `{request}`: {message}"),
            }),
            Ok(Err(Wire::Io(e))) => Err(self.unavailable(e.to_string())),
            Ok(Err(Wire::Garbled(what))) => Err(self.unavailable(what)),
        }
    }

    /// Runs `service` (`shell:…`, `exec:…`) on device `serial` and returns everything it
    /// printed. Fails with the server's distinct device errors, or `device_timeout` when the
    /// device does not finish in time (`command` names the command in that error); the
    /// failure says whether it came after the service request reached the device (then the
    /// command may have run).
    pub(crate) async fn run(
        &self,
        serial: &str,
        service: &str,
        command: &str,
    ) -> Result<Vec<u8>, RunFailure> {
        let mut stream = self.socket().await.map_err(RunFailure::before)?;
        let sent = std::sync::atomic::AtomicBool::new(false);
        let exchange = async {
            send(&mut stream, &format!("host:transport:{serial}")).await?;
            status(&mut stream).await?;
            send(&mut stream, service).await?;
            sent.store(true, std::sync::atomic::Ordering::SeqCst);
            status(&mut stream).await?;
            let mut out = Vec::new();
            (&mut stream)
                .take(MAX_OUTPUT as u64 + 1)
                .read_to_end(&mut out)
                .await?;
            Ok::<_, Wire>(out)
        };
        let result = tokio::time::timeout(self.config.timeout, exchange).await;
        let after_sent = sent.load(std::sync::atomic::Ordering::SeqCst);
        let error = match result {
            Err(_) => DeviceError::DeviceTimeout {
                serial: serial.to_owned(),
                command: command.to_owned(),
                timeout_ms: u64::try_from(self.config.timeout.as_millis()).unwrap_or(u64::MAX),
            },
            Ok(Ok(out)) if out.len() > MAX_OUTPUT => DeviceError::Internal {
                message: format!(
                    "`{command}` printed more than {} MiB, more than the backend reads; its \
                     output was not used",
                    MAX_OUTPUT / (1024 * 1024)
                ),
            },
            Ok(Ok(out)) => return Ok(out),
            // The server's refusal is definite: the device never ran the command.
            Ok(Err(Wire::Fail(message))) => {
                return Err(RunFailure::before(device_failure(serial, &message)));
            }
            Ok(Err(Wire::Io(e))) => {
                tracing::debug!(error = %e, "the device connection broke");
                DeviceError::Offline {
                    serial: serial.to_owned(),
                }
            }
            Ok(Err(Wire::Garbled(what))) => self.unavailable(what),
        };
        Err(RunFailure { error, after_sent })
    }
}

/// Why [`Server::run`] failed, and whether the service request had reached the device.
#[derive(Debug)]
pub(crate) struct RunFailure {
    pub error: DeviceError,
    /// The service request was sent (the command may have started on the device).
    pub after_sent: bool,
}

impl RunFailure {
    fn before(error: DeviceError) -> Self {
        RunFailure {
            error,
            after_sent: false,
        }
    }
}

/// Maps the server's `FAIL` message for a device request onto the device errors: each state
/// has its own words in adb (`device 'X' not found`, `device unauthorized.…`, `device
/// offline`, `device still authorizing`, `device still connecting`).
pub(crate) fn device_failure(serial: &str, message: &str) -> DeviceError {
    let lower = message.to_ascii_lowercase();
    let serial = serial.to_owned();
    if lower.contains("unauthorized") || lower.contains("authorizing") {
        DeviceError::DeviceUnauthorized { serial }
    } else if lower.contains("not found") || lower.contains("no devices") {
        DeviceError::DeviceNotFound {
            serial: format!("`{serial}`"),
        }
    } else if lower.contains("offline") || lower.contains("connecting") {
        DeviceError::Offline { serial }
    } else {
        DeviceError::Internal {
            message: format!("the adb server refused the request for `{serial}`: {message}"),
        }
    }
}

async fn send(stream: &mut TcpStream, request: &str) -> Result<(), Wire> {
    if request.len() > MAX_REQUEST {
        return Err(Wire::Garbled(format!(
            "the request is {} bytes, longer than the adb protocol allows ({MAX_REQUEST})",
            request.len()
        )));
    }
    let mut frame = format!("{:04x}", request.len()).into_bytes();
    frame.extend_from_slice(request.as_bytes());
    stream.write_all(&frame).await?;
    Ok(())
}

/// Reads `OKAY`, or `FAIL` and its message.
async fn status(stream: &mut TcpStream) -> Result<(), Wire> {
    let mut word = [0u8; 4];
    stream.read_exact(&mut word).await?;
    match &word {
        b"OKAY" => Ok(()),
        b"FAIL" => Err(Wire::Fail(read_hex_text(stream).await?)),
        other => Err(Wire::Garbled(format!(
            "the adb server answered {:?} instead of OKAY/FAIL",
            String::from_utf8_lossy(other)
        ))),
    }
}

async fn read_hex_text(stream: &mut TcpStream) -> Result<String, Wire> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await?;
    let len = std::str::from_utf8(&len)
        .ok()
        .and_then(|s| usize::from_str_radix(s, 16).ok())
        .ok_or_else(|| Wire::Garbled("the adb server sent a bad length field".to_owned()))?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_words_map_to_distinct_errors() {
        assert_eq!(
            device_failure("X", "device 'X' not found").code(),
            "device_not_found"
        );
        assert_eq!(
            device_failure(
                "X",
                "device unauthorized.\nThis adb server's $ADB_VENDOR_KEYS is not set"
            )
            .code(),
            "device_unauthorized"
        );
        assert_eq!(
            device_failure("X", "device offline").code(),
            "device_offline"
        );
        assert_eq!(
            device_failure("X", "device still connecting").code(),
            "device_offline"
        );
        assert_eq!(device_failure("X", "closed").code(), "internal_error");
    }
}
