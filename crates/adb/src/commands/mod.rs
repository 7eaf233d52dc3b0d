//! The device-owned commands of the manifest, mapped onto Android's shell: one `match` arm per
//! command in [`AdbPhone::dispatch`]; which commands exist, and whether they change state, is
//! read from the manifest.

use async_trait::async_trait;
use openphone_device::{DeviceCall, DeviceError, PhoneDevice, PhoneProfile};
use openphone_protocol::{Executor, Registry};
use serde_json::Value;

use crate::phone::AdbPhone;

mod params;
mod screen;

use params::Params;

/// The profile's platform name.
pub const PLATFORM: &str = "android";

/// The canonical names of the manifest's device-owned commands (`executor: "device"`): the
/// commands this backend knows (some answer `unsupported_on_device` on some phones).
pub fn device_commands() -> Vec<String> {
    Registry::embedded()
        .map(|r| {
            r.commands()
                .filter(|c| c.executor == Executor::Device)
                .map(|c| c.name.clone())
                .collect()
        })
        .unwrap_or_default()
}

impl AdbPhone {
    async fn dispatch(&self, call: DeviceCall<'_>) -> Result<Value, DeviceError> {
        let name = call.command.name.as_str();
        let p = Params::new(call.params)?;
        match name {
            "openphone.screen.get" => self.screen_get(p).await,
            other => Err(DeviceError::UnsupportedTool {
                tool: other.to_owned(),
            }),
        }
    }
}

#[async_trait]
impl PhoneDevice for AdbPhone {
    fn profile(&self) -> PhoneProfile {
        let info = self.memory().info.clone().unwrap_or_default();
        PhoneProfile {
            platform: PLATFORM.to_owned(),
            model: if info.model.is_empty() {
                "Android phone (not reached yet)".to_owned()
            } else {
                info.model
            },
            os_version: if info.release.is_empty() {
                String::new()
            } else {
                format!("Android {} (API {})", info.release, info.sdk)
            },
            screen_width: info.width,
            screen_height: info.height,
            supported_tools: device_commands()
                .into_iter()
                .filter(|t| self.unsupported_reason(t).is_none())
                .collect(),
        }
    }

    fn supports(&self, tool: &str) -> bool {
        Registry::embedded()
            .ok()
            .and_then(|r| r.resolve(tool))
            .is_some_and(|c| c.name == tool && c.executor == Executor::Device)
    }

    fn unsupported_reason(&self, tool: &str) -> Option<String> {
        let _ = tool;
        None
    }

    async fn execute(&self, call: DeviceCall<'_>) -> Result<Value, DeviceError> {
        self.dispatch(call).await
    }
}
