//! The device-owned commands of the manifest, mapped onto Android's shell: one `match` arm per
//! command in [`AdbPhone::dispatch`]; which commands exist, and whether they change state, is
//! read from the manifest.

use async_trait::async_trait;
use openphone_device::{DeviceCall, DeviceError, PhoneDevice, PhoneProfile};
use openphone_protocol::{Executor, Registry};
use serde_json::Value;

use crate::phone::AdbPhone;

mod apps;
mod data;
mod dialog_detect;
mod dialog_question;
mod params;
mod screen;
mod ui;

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
            "openphone.device.status" => self.device_status(p).await,
            "openphone.apps.search" => self.apps_search(p).await,
            "openphone.screen.get" => self.screen_get(p).await,
            "openphone.screen.understand_local" => self.screen_understand(p).await,
            "openphone.notifications.list" => self.notifications_list(p).await,
            "openphone.notifications.search" => self.notifications_search(p).await,
            "openphone.notifications.open" => self.notifications_open(p).await,
            "openphone.contacts.search" => self.contacts_search(p).await,
            "openphone.calendar.search" => self.calendar_search(p).await,
            "openphone.calendar.add" => self.calendar_add(p).await,
            "openphone.calendar.update" => self.calendar_update(p).await,
            "openphone.calendar.delete" => self.calendar_delete(p).await,
            "openphone.messages.search" => self.messages_search(p).await,
            "openphone.messages.draft" => self.messages_draft(p).await,
            "openphone.messages.send" => Err(apps::unsupported(
                name,
                apps::SEND_SMS_REASON,
                apps::SEND_SMS_WORKAROUND,
            )),
            "openphone.calls.search" => self.calls_search(p).await,
            "openphone.calls.place" => self.calls_place(p).await,
            "openphone.app.open" => self.app_open(p).await,
            "openphone.url.open" => self.url_open(p).await,
            "openphone.ui.tap" => self.ui_tap(p).await,
            "openphone.ui.tap_element" => self.ui_tap_element(p).await,
            "openphone.ui.long_press" => self.ui_long_press(p).await,
            "openphone.ui.long_press_element" => self.ui_long_press_element(p).await,
            "openphone.ui.swipe" => self.ui_swipe(p).await,
            "openphone.ui.type_text" => self.ui_type_text(p).await,
            "openphone.input.press_key" => self.press_key(p).await,
            "openphone.clipboard.set" => Err(apps::unsupported(
                name,
                apps::CLIPBOARD_REASON,
                apps::CLIPBOARD_WORKAROUND,
            )),
            "openphone.clipboard.paste" => self.clipboard_paste().await,
            "openphone.share.text" => self.share_text(p).await,
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
        // Known for every phone: Android has no shell mechanism for these.
        let fixed = match tool {
            "openphone.messages.send" => Some(apps::SEND_SMS_REASON),
            "openphone.clipboard.set" => Some(apps::CLIPBOARD_REASON),
            _ => None,
        };
        if let Some(reason) = fixed {
            return Some(reason.to_owned());
        }
        // Learnt from this phone: a provider that refused the shell user.
        self.memory().denied.get(tool).cloned()
    }

    async fn execute(&self, call: DeviceCall<'_>) -> Result<Value, DeviceError> {
        self.dispatch(call).await
    }

    async fn resolve_dialog(&self, dialog_id: &str, accept: bool) -> Result<Value, DeviceError> {
        self.answer_dialog(dialog_id, accept).await
    }
}
