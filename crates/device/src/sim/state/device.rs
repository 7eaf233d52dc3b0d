//! The device itself: identity and hardware, the clock a scenario was written for, and the
//! quick settings.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Device identity and hardware.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DeviceInfo {
    /// Model name.
    pub model: String,
    /// OS version string.
    pub os_version: String,
    /// Screen size in pixels.
    pub screen: ScreenSize,
    /// Battery level, 0-100.
    pub battery_percent: u8,
    /// Whether the phone is charging.
    pub charging: bool,
    /// The phone owner's name, shown in Settings.
    pub owner_name: String,
    /// The phone's own number.
    pub own_number: String,
}

impl Default for DeviceInfo {
    fn default() -> Self {
        Self {
            model: "OpenPhone Sim".into(),
            os_version: "Android 15 (simulated)".into(),
            screen: ScreenSize::default(),
            battery_percent: 80,
            charging: false,
            owner_name: "Phone owner".into(),
            own_number: "+15550100".into(),
        }
    }
}

/// Screen size in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScreenSize {
    /// Width, 320-4096.
    pub width: u32,
    /// Height, 480-4096.
    pub height: u32,
}

impl Default for ScreenSize {
    fn default() -> Self {
        Self {
            width: 1080,
            height: 2400,
        }
    }
}

/// The time a scenario was written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ClockInfo {
    /// "Now" when the scenario starts, Unix ms. A manual clock for this scenario starts here.
    pub start_ms: i64,
    /// The phone's fixed offset from UTC in minutes (-720..=840), used for displayed times
    /// and day boundaries.
    pub utc_offset_minutes: i32,
}

impl Default for ClockInfo {
    fn default() -> Self {
        // 2026-03-12 08:30 UTC.
        Self {
            start_ms: 1_773_304_200_000,
            utc_offset_minutes: 0,
        }
    }
}

/// Quick settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
#[allow(clippy::struct_excessive_bools)]
pub struct Settings {
    /// Wi-Fi on.
    pub wifi: bool,
    /// Bluetooth on.
    pub bluetooth: bool,
    /// Airplane mode on.
    pub airplane_mode: bool,
    /// Do not disturb on.
    pub do_not_disturb: bool,
    /// Dark theme on.
    pub dark_theme: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            wifi: true,
            bluetooth: false,
            airplane_mode: false,
            do_not_disturb: false,
            dark_theme: false,
        }
    }
}

/// A quick setting, as named in actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SettingKey {
    /// Wi-Fi.
    Wifi,
    /// Bluetooth.
    Bluetooth,
    /// Airplane mode.
    AirplaneMode,
    /// Do not disturb.
    DoNotDisturb,
    /// Dark theme.
    DarkTheme,
}

impl SettingKey {
    /// All settings in display order.
    pub const ALL: [SettingKey; 5] = [
        SettingKey::Wifi,
        SettingKey::Bluetooth,
        SettingKey::AirplaneMode,
        SettingKey::DoNotDisturb,
        SettingKey::DarkTheme,
    ];

    /// Display label.
    pub fn label(self) -> &'static str {
        match self {
            SettingKey::Wifi => "Wi-Fi",
            SettingKey::Bluetooth => "Bluetooth",
            SettingKey::AirplaneMode => "Airplane mode",
            SettingKey::DoNotDisturb => "Do not disturb",
            SettingKey::DarkTheme => "Dark theme",
        }
    }

    /// Stable id fragment.
    pub fn id(self) -> &'static str {
        match self {
            SettingKey::Wifi => "wifi",
            SettingKey::Bluetooth => "bluetooth",
            SettingKey::AirplaneMode => "airplane_mode",
            SettingKey::DoNotDisturb => "do_not_disturb",
            SettingKey::DarkTheme => "dark_theme",
        }
    }
}

impl Settings {
    /// The value of one setting.
    pub fn get(&self, key: SettingKey) -> bool {
        match key {
            SettingKey::Wifi => self.wifi,
            SettingKey::Bluetooth => self.bluetooth,
            SettingKey::AirplaneMode => self.airplane_mode,
            SettingKey::DoNotDisturb => self.do_not_disturb,
            SettingKey::DarkTheme => self.dark_theme,
        }
    }

    /// Flips one setting and returns its new value.
    pub fn toggle(&mut self, key: SettingKey) -> bool {
        let slot = match key {
            SettingKey::Wifi => &mut self.wifi,
            SettingKey::Bluetooth => &mut self.bluetooth,
            SettingKey::AirplaneMode => &mut self.airplane_mode,
            SettingKey::DoNotDisturb => &mut self.do_not_disturb,
            SettingKey::DarkTheme => &mut self.dark_theme,
        };
        *slot = !*slot;
        *slot
    }
}
