//! The ADB device backend: [`AdbPhone`], a [`PhoneDevice`](openphone_device::PhoneDevice) that
//! drives a real Android phone (over USB, or `adb connect` over TCP) through the adb server.
//!
//! # Transport
//!
//! The backend speaks the ADB *host* protocol to the adb server's socket
//! (`127.0.0.1:$ANDROID_ADB_SERVER_PORT`, default 5037) rather than running the `adb` binary
//! per command: no process per command, binary-safe `exec:` output for screenshots, and the
//! server's distinct replies (`device 'X' not found`, `device unauthorized`, `device offline`)
//! map onto distinct error codes. The `adb` binary is only run to start a server that is not
//! running (`adb start-server`, once per refused connection). Every call resolves the transport
//! again, so a phone that was unplugged works again when it is back.
//!
//! # Commands
//!
//! Every device-owned command of the manifest is mapped to a shell mechanism (`docs/android.md`
//! names each one): `uiautomator dump` for the screen, `input` for touches, keys and ASCII
//! text, the ADB Keyboard's broadcast for Unicode text, `monkey`/`am start` for apps and
//! links, `dumpsys` for notifications and the battery, `content` for contacts, calendar, SMS
//! and the call log. What Android does not let the shell user do answers
//! `unsupported_on_device` with the reason and a workaround, and
//! [`PhoneDevice::unsupported_reason`](openphone_device::PhoneDevice::unsupported_reason) says
//! so before anyone tries, so tool lists can hide it.
//!
//! # Safety
//!
//! Element taps resolve against the last screen the caller read and refuse an element that
//! moved or changed since (`stale_element`). After every state-changing command the screen is
//! read again; an OS dialog on it (permission prompt, chooser, payment sheet) is answered with
//! `framework_confirmation_required` and never tapped by the backend.

mod commands;
mod config;
mod devices;
mod host;
mod parse;
mod phone;
mod png_scale;
mod screen;
mod shell;
mod xml;

pub use commands::{PLATFORM, device_commands};
pub use config::{AdbConfig, DEFAULT_SERVER_PORT, DEFAULT_TIMEOUT};
pub use devices::{AdbDevice, list_devices, parse_devices};
pub use phone::AdbPhone;
