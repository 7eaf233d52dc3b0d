//! Which screens are OS dialogs only the user may answer: decided by the package in front and,
//! for packages that also draw ordinary screens (System UI, Settings, the Play Store), by the
//! resource ids of the window. An unknown System UI window counts as a dialog (fail closed):
//! refusing input on a harmless window costs a confirmation, tapping through a consent prompt
//! costs the user's consent.

use openphone_device::dialog::kind;

use crate::screen::{Node, Screen};

/// The tail of a node's resource id (`pkg:id/NAME` → `NAME`), else its element id.
fn name(n: &Node) -> &str {
    n.resource_id
        .rsplit_once(":id/")
        .map_or(n.id.as_str(), |(_, tail)| tail)
}

fn any_id(screen: &Screen, pred: impl Fn(&str) -> bool) -> bool {
    screen.nodes.iter().any(|n| {
        let id = name(n);
        !id.is_empty() && pred(id)
    })
}

/// System UI's consent windows: the biometric prompt, screen-recording / casting consent
/// (`MediaProjectionPermissionActivity`), USB debugging / USB device prompts, and any alert.
fn systemui_dialog_id(id: &str) -> bool {
    id.starts_with("biometric")
        || id.starts_with("auth_")
        || id.starts_with("screen_share")
        || id.starts_with("media_projection")
        || id.starts_with("usb_")
        || matches!(
            id,
            "button_negative"
                | "button_positive"
                | "button_use_credential"
                | "button_try_again"
                | "alertTitle"
                | "button1"
                | "button2"
                | "button3"
                | "message"
        )
}

/// System UI's ordinary windows: the shade, quick settings, the status bar, the lock screen,
/// the overview (recents) — the windows a phone shows without asking anything.
fn systemui_ordinary_id(id: &str) -> bool {
    id.starts_with("notification")
        || id.starts_with("shade")
        || id.starts_with("qs_")
        || id.starts_with("quick_settings")
        || id.starts_with("quick_qs")
        || id.starts_with("status_bar")
        || id.starts_with("keyguard")
        || id.starts_with("recents")
        || id.starts_with("expanded")
        || id.starts_with("scrim")
}

/// Settings' confirmation activities: device-admin activation (`DeviceAdminAdd`) and the
/// accessibility service's "Allow … full control?" prompt.
fn settings_dialog_id(id: &str) -> bool {
    matches!(
        id,
        "admin_name" | "admin_warning" | "add_msg" | "admin_policies" | "action_button"
    ) || id.starts_with("accessibility_permission")
        || id.starts_with("permission_enable_")
        || id.starts_with("accessibility_service_warning")
        || id == "enable_service_dialog"
}

/// A Play Store purchase sheet: its buy / subscribe / payment nodes.
fn vending_purchase(screen: &Screen) -> bool {
    any_id(screen, |id| {
        id.contains("purchase") || id.contains("buy_button") || id.contains("payment")
    }) || screen.nodes.iter().any(|n| {
        n.clickable
            && (matches!(n.text.as_str(), "Buy" | "Subscribe" | "1-tap buy" | "Pay")
                || n.text.starts_with("Buy "))
    })
}

/// The kind of OS dialog `screen` shows, if it is one.
pub(crate) fn dialog_kind(screen: &Screen) -> Option<&'static str> {
    match screen.package() {
        "com.android.permissioncontroller" | "com.google.android.permissioncontroller" => {
            Some(kind::PERMISSION)
        }
        "android" | "com.android.intentresolver" => Some(kind::CHOOSER),
        "com.google.android.gms" => Some(kind::PAYMENT),
        // Install / uninstall confirmations, and the permission prompts of Android 6–9.
        "com.android.packageinstaller" | "com.google.android.packageinstaller" => {
            if any_id(screen, |id| id.starts_with("permission_")) {
                Some(kind::PERMISSION)
            } else {
                Some(kind::SYSTEM)
            }
        }
        "com.android.vending" => vending_purchase(screen).then_some(kind::PAYMENT),
        "com.android.settings" => any_id(screen, settings_dialog_id).then_some(kind::SYSTEM),
        "com.android.systemui" => {
            if any_id(screen, systemui_dialog_id) || !any_id(screen, systemui_ordinary_id) {
                Some(kind::SYSTEM)
            } else {
                None
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Case<'a> = (&'a str, &'a [(&'a str, &'a str, bool)], Option<&'a str>);

    fn screen(package: &str, nodes: &[(&str, &str, bool)]) -> Screen {
        let mut xml = String::from("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>");
        xml.push_str("<hierarchy rotation=\"0\">");
        xml.push_str(&format!(
            "<node index=\"0\" text=\"\" resource-id=\"\" class=\"android.widget.FrameLayout\" \
             package=\"{package}\" content-desc=\"\" clickable=\"false\" enabled=\"true\" \
             bounds=\"[0,0][1080,2400]\">"
        ));
        for (i, (id, text, clickable)) in nodes.iter().enumerate() {
            let rid = if id.is_empty() {
                String::new()
            } else {
                format!("{package}:id/{id}")
            };
            xml.push_str(&format!(
                "<node index=\"{i}\" text=\"{text}\" resource-id=\"{rid}\" \
                 class=\"android.widget.Button\" package=\"{package}\" content-desc=\"\" \
                 clickable=\"{clickable}\" enabled=\"true\" bounds=\"[0,{t}][1080,{b}]\"/>",
                t = i * 100,
                b = i * 100 + 90
            ));
        }
        xml.push_str("</node></hierarchy>");
        Screen::parse(&xml).unwrap()
    }

    #[test]
    fn the_dialog_detector_knew_only_four_packages() {
        let cases: &[Case<'_>] = &[
            (
                "com.android.packageinstaller",
                &[
                    (
                        "install_confirm_question",
                        "Do you want to install this app?",
                        false,
                    ),
                    ("ok_button", "Install", true),
                ],
                Some("system"),
            ),
            (
                "com.google.android.packageinstaller",
                &[
                    (
                        "permission_message",
                        "Allow Maps to access location?",
                        false,
                    ),
                    ("permission_allow_button", "Allow", true),
                ],
                Some("permission"),
            ),
            (
                "com.android.vending",
                &[("title", "Pro upgrade", false), ("", "1-tap buy", true)],
                Some("payment"),
            ),
            (
                "com.android.vending",
                &[("search_bar", "Search apps", true)],
                None,
            ),
            (
                "com.android.systemui",
                &[
                    ("biometric_icon", "", false),
                    ("title", "Confirm it's you", false),
                    ("button_negative", "Cancel", true),
                ],
                Some("system"),
            ),
            (
                "com.android.systemui",
                &[
                    (
                        "alertTitle",
                        "Start recording or casting with Recorder?",
                        false,
                    ),
                    ("button1", "Start now", true),
                ],
                Some("system"),
            ),
            // The shade and the status bar are System UI too, and not dialogs.
            (
                "com.android.systemui",
                &[
                    ("notification_stack_scroller", "", false),
                    ("qs_frame", "", false),
                ],
                None,
            ),
            (
                "com.android.systemui",
                &[("notification_shade", "", false)],
                None,
            ),
            // A System UI window nobody described: closed.
            (
                "com.android.systemui",
                &[("mystery_panel", "Allow?", false)],
                Some("system"),
            ),
            (
                "com.android.settings",
                &[
                    ("admin_name", "Find My Device", false),
                    ("action_button", "Activate this device admin app", true),
                ],
                Some("system"),
            ),
            (
                "com.android.settings",
                &[(
                    "accessibility_permission_enable_allow_button",
                    "Allow",
                    true,
                )],
                Some("system"),
            ),
            (
                "com.android.settings",
                &[("search_action_bar", "Search settings", true)],
                None,
            ),
            (
                "com.android.messaging",
                &[("alertTitle", "Delete?", false)],
                None,
            ),
        ];
        for (package, nodes, want) in cases {
            assert_eq!(
                dialog_kind(&screen(package, nodes)),
                *want,
                "{package} {nodes:?}"
            );
        }
    }

    #[test]
    fn approving_a_location_prompt_pressed_allow_all_the_time() {
        // Android 10's location prompt: "Allow all the time" is permission_allow_button.
        let prompt = screen(
            "com.google.android.permissioncontroller",
            &[
                (
                    "permission_message",
                    "Allow Maps to access this device's location?",
                    false,
                ),
                ("permission_allow_button", "Allow all the time", true),
                (
                    "permission_allow_foreground_only_button",
                    "Allow only while using the app",
                    true,
                ),
                ("permission_deny_button", "Deny", true),
            ],
        );
        let pressed = super::super::ui::dialog_button(&prompt, true).unwrap();
        assert_eq!(
            prompt.nodes[pressed].id,
            "permission_allow_foreground_only_button"
        );
        let (_, _, summary) = super::super::ui::system_dialog(&prompt).unwrap();
        assert!(
            summary.contains("approving presses “Allow only while using the app”"),
            "{summary}"
        );
        assert!(summary.contains("not “Allow all the time”"), "{summary}");
        // Android 11+: one-time is the narrowest.
        let prompt = screen(
            "com.android.permissioncontroller",
            &[
                (
                    "permission_message",
                    "Allow Camera to take pictures?",
                    false,
                ),
                (
                    "permission_allow_foreground_only_button",
                    "While using the app",
                    true,
                ),
                ("permission_allow_one_time_button", "Only this time", true),
                ("permission_deny_button", "Don't allow", true),
            ],
        );
        let pressed = super::super::ui::dialog_button(&prompt, true).unwrap();
        assert_eq!(prompt.nodes[pressed].id, "permission_allow_one_time_button");
        // Only one way to allow: the question is the phone's words alone.
        let (_, _, summary) = super::super::ui::system_dialog(&prompt).unwrap();
        assert!(!summary.contains("approving presses"), "{summary}");
    }
}
