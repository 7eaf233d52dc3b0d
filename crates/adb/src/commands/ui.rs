//! Input on the screen: taps, long presses, swipes (`input tap|swipe`), text (`input text`, or
//! the ADB Keyboard's broadcast for Unicode), keys (`input keyevent`); element taps resolved
//! against the last screen the caller read; every action followed by a look at the screen for
//! an OS dialog.

use openphone_device::DeviceError;
use serde_json::{Value, json};

use super::params::Params;
use super::screen::brief;
use crate::phone::AdbPhone;
use crate::screen::{Node, Screen};
use crate::shell;

/// Android's long-press timeout: shorter presses are taps.
const LONG_PRESS_MS: i64 = 400;

/// The OS dialog on `screen`, if one is in front: its kind, package and what it asks.
pub(crate) fn system_dialog(screen: &Screen) -> Option<(String, String, String)> {
    let package = screen.package();
    let kind = super::dialog_detect::dialog_kind(screen)?;
    // A chooser is a dialog only when it shows a resolver or chooser list (the `android`
    // package also draws other system windows).
    let message = screen
        .nodes
        .iter()
        .find(|n| {
            let id = n.id.as_str();
            (id.ends_with("permission_message") || id == "message" || id == "alertTitle")
                && !n.text.is_empty()
        })
        .map(|n| n.text.clone());
    let summary = super::dialog_question::question(screen)
        .or(message)
        .unwrap_or_else(|| {
            let texts: Vec<&str> = screen
                .nodes
                .iter()
                .filter(|n| !n.clickable && !n.text.is_empty())
                .map(|n| n.text.as_str())
                .collect();
            let joined = texts.join(" — ");
            joined.chars().take(200).collect()
        });
    let summary = match accept_note(screen) {
        Some(note) => format!("{summary}{note}"),
        None => summary,
    };
    Some((kind.to_owned(), package.to_owned(), summary))
}

/// Refuses input while an OS dialog is in front: the dialog is reported (the same id the
/// bridge answers it by) and nothing is sent, so no input can answer it — only
/// [`AdbPhone::answer_dialog`], on the user's word, presses its buttons.
pub(crate) fn refuse_if_dialog(screen: &Screen) -> Result<(), DeviceError> {
    match system_dialog(screen) {
        Some((kind, package, summary)) => Err(DeviceError::FrameworkConfirmationRequired {
            kind,
            package,
            summary,
        }),
        None => Ok(()),
    }
}

/// The comparable identity of an element: what must not have changed for a tap on it to mean
/// what the caller saw.
fn same_element(a: &Node, b: &Node) -> Result<(), String> {
    if a.class != b.class {
        return Err(format!("its class changed from {} to {}", a.class, b.class));
    }
    if a.text != b.text {
        return Err(format!(
            "its text changed from {:?} to {:?}",
            a.text, b.text
        ));
    }
    if a.bounds != b.bounds {
        return Err("it moved".to_owned());
    }
    Ok(())
}

impl AdbPhone {
    /// After a state-changing command: reads the screen; an OS dialog in front is reported
    /// (never tapped), else the brief of the screen for the result.
    pub(crate) async fn settle(&self) -> Result<Value, DeviceError> {
        let screen = self.dump().await?;
        if let Some((kind, package, summary)) = system_dialog(&screen) {
            return Err(DeviceError::FrameworkConfirmationRequired {
                kind,
                package,
                summary,
            });
        }
        Ok(brief(&screen))
    }

    /// Reads the screen before an input command; an OS dialog in front refuses the input.
    pub(crate) async fn before_input(&self) -> Result<Screen, DeviceError> {
        let screen = self.dump().await?;
        refuse_if_dialog(&screen)?;
        Ok(screen)
    }

    async fn check_point(
        &self,
        fx: &str,
        fy: &str,
        x: f64,
        y: f64,
    ) -> Result<(i32, i32), DeviceError> {
        let info = self.info().await?;
        let (w, h) = (f64::from(info.width), f64::from(info.height));
        if x < 0.0 || (w > 0.0 && x >= w) {
            return Err(DeviceError::invalid(fx, format!("must be within 0..{w}")));
        }
        if y < 0.0 || (h > 0.0 && y >= h) {
            return Err(DeviceError::invalid(fy, format!("must be within 0..{h}")));
        }
        // `input` takes integer pixels; the simulated phone's screen is pixels too.
        Ok((x.round() as i32, y.round() as i32))
    }

    /// The element `id` of the last screen the caller read, checked against the screen now.
    async fn resolve_element(&self, id: &str) -> Result<(Screen, usize), DeviceError> {
        let read = self.memory().last_read.clone();
        let now = self.before_input().await?;
        let read = read.unwrap_or_else(|| now.clone());
        let then = read.find(id);
        let current = now.nodes.iter().position(|n| n.id == id);
        let idx = match (then, current) {
            (None, None) => {
                return Err(DeviceError::ElementNotFound {
                    element_id: id.to_owned(),
                });
            }
            (None, Some(_)) => {
                return Err(DeviceError::StaleElement {
                    element_id: id.to_owned(),
                    reason: "it was not on the screen you last read".to_owned(),
                });
            }
            (Some(_), None) => {
                return Err(DeviceError::StaleElement {
                    element_id: id.to_owned(),
                    reason: "it is no longer on the screen".to_owned(),
                });
            }
            (Some(then), Some(idx)) => {
                if let Err(reason) = same_element(then, &now.nodes[idx]) {
                    return Err(DeviceError::StaleElement {
                        element_id: id.to_owned(),
                        reason,
                    });
                }
                idx
            }
        };
        Ok((now, idx))
    }

    async fn press_element(&self, id: &str, long: Option<i64>) -> Result<Value, DeviceError> {
        let (screen, idx) = self.resolve_element(id).await?;
        let node = &screen.nodes[idx];
        if node.bounds.is_empty() {
            return Err(DeviceError::ElementBoundsUnavailable {
                element_id: id.to_owned(),
            });
        }
        if !node.enabled {
            return Err(DeviceError::ElementDisabled {
                element_id: id.to_owned(),
            });
        }
        let (x, y) = node.bounds.center();
        let element = screen.element_json(idx, true);
        match long {
            None => self.shell(&format!("input tap {x} {y}")).await?,
            Some(ms) => {
                self.shell(&format!("input swipe {x} {y} {x} {y} {ms}"))
                    .await?
            }
        };
        Ok(element)
    }

    fn ui_result(kind: &str, element: Value, effect: String, screen: Value, extra: Value) -> Value {
        let mut out =
            json!({ "action": kind, "element": element, "effect": effect, "screen": screen });
        if let (Some(map), Value::Object(more)) = (out.as_object_mut(), extra) {
            map.extend(more);
        }
        out
    }

    /// The element a touch at (x, y) lands on, from a fresh dump (for the result only).
    /// An OS dialog in front refuses the touch.
    async fn element_at(&self, x: i32, y: i32, long: bool) -> Result<Value, DeviceError> {
        let screen = self.before_input().await?;
        Ok(screen
            .hit(x, y, long)
            .map_or(Value::Null, |i| screen.element_json(i, true)))
    }

    pub(crate) async fn ui_tap(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let (fx, fy) = (p.f64_req("x")?, p.f64_req("y")?);
        let (x, y) = self.check_point("x", "y", fx, fy).await?;
        let element = self.element_at(x, y, false).await?;
        self.shell(&format!("input tap {x} {y}")).await?;
        let screen = self.settle().await?;
        let effect = format!("tapped ({x}, {y})");
        Ok(Self::ui_result(
            "tap",
            element,
            effect,
            screen,
            json!({ "x": fx, "y": fy }),
        ))
    }

    pub(crate) async fn ui_tap_element(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let id = p.ident_req("element_id")?;
        let element = self.press_element(id, None).await?;
        let screen = self.settle().await?;
        Ok(Self::ui_result(
            "tap",
            element,
            format!("tapped {id}"),
            screen,
            json!({}),
        ))
    }

    fn duration(p: &Params<'_>) -> Result<i64, DeviceError> {
        match p.i64_opt("duration_ms")? {
            None => Ok(800),
            Some(d) if !(LONG_PRESS_MS..=10_000).contains(&d) => Err(DeviceError::invalid(
                "duration_ms",
                format!("must be between {LONG_PRESS_MS} and 10000"),
            )),
            Some(d) => Ok(d),
        }
    }

    pub(crate) async fn ui_long_press(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let (fx, fy) = (p.f64_req("x")?, p.f64_req("y")?);
        let ms = Self::duration(&p)?;
        let (x, y) = self.check_point("x", "y", fx, fy).await?;
        let element = self.element_at(x, y, true).await?;
        self.shell(&format!("input swipe {x} {y} {x} {y} {ms}"))
            .await?;
        let screen = self.settle().await?;
        Ok(Self::ui_result(
            "long_press",
            element,
            format!("pressed ({x}, {y}) for {ms} ms"),
            screen,
            json!({ "x": fx, "y": fy, "duration_ms": ms }),
        ))
    }

    pub(crate) async fn ui_long_press_element(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let id = p.ident_req("element_id")?;
        let ms = Self::duration(&p)?;
        let element = self.press_element(id, Some(ms)).await?;
        let screen = self.settle().await?;
        Ok(Self::ui_result(
            "long_press",
            element,
            format!("pressed {id} for {ms} ms"),
            screen,
            json!({ "duration_ms": ms }),
        ))
    }

    pub(crate) async fn ui_swipe(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let (sx, sy) = (p.f64_req("start_x")?, p.f64_req("start_y")?);
        let (ex, ey) = (p.f64_req("end_x")?, p.f64_req("end_y")?);
        let (x1, y1) = self.check_point("start_x", "start_y", sx, sy).await?;
        let (x2, y2) = self.check_point("end_x", "end_y", ex, ey).await?;
        self.before_input().await?;
        self.shell(&format!("input swipe {x1} {y1} {x2} {y2} 300"))
            .await?;
        let screen = self.settle().await?;
        Ok(Self::ui_result(
            "swipe",
            Value::Null,
            format!("swiped from ({x1}, {y1}) to ({x2}, {y2})"),
            screen,
            json!({ "start": {"x": sx, "y": sy}, "end": {"x": ex, "y": ey} }),
        ))
    }

    /// Whether the phone has the ADB Keyboard (asked once).
    async fn adb_keyboard(&self) -> Result<bool, DeviceError> {
        if let Some(known) = self.memory().adb_keyboard {
            return Ok(known);
        }
        let has = crate::parse::has_adb_keyboard(&self.shell("ime list -s").await?);
        self.memory().adb_keyboard = Some(has);
        Ok(has)
    }

    pub(crate) async fn ui_type_text(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let text = p
            .str_opt("text")?
            .ok_or_else(|| DeviceError::invalid("text", "is required"))?;
        if text.is_empty() {
            return Err(DeviceError::invalid("text", "must not be empty"));
        }
        if text.chars().count() > 100_000 {
            return Err(DeviceError::invalid(
                "text",
                "longer than 100000 characters",
            ));
        }
        let screen = self.before_input().await?;
        let Some(field) = screen.focused_field() else {
            return Err(DeviceError::NoFocusedField);
        };
        if !field.enabled {
            return Err(DeviceError::ElementDisabled {
                element_id: field.id.clone(),
            });
        }
        let id = field.id.clone();
        let ascii = text.split('\n').all(shell::input_text_can_type);
        if ascii {
            // `input text` cannot type a newline: each line, then the Enter key.
            let mut lines = text.split('\n').peekable();
            while let Some(line) = lines.next() {
                if !line.is_empty() {
                    self.shell(&shell::input_text(line)).await?;
                }
                if lines.peek().is_some() {
                    self.shell("input keyevent KEYCODE_ENTER").await?;
                }
            }
        } else if self.adb_keyboard().await? {
            self.shell(&shell::adb_keyboard_text(text)).await?;
        } else {
            return Err(DeviceError::UnsupportedOnDevice {
                tool: "openphone.ui.type_text".to_owned(),
                reason: "this text has characters `input text` cannot type (non-ASCII, control \
                         characters or `%s`), and the ADB Keyboard IME that types any Unicode \
                         is not installed"
                    .to_owned(),
                workaround: "install the ADB Keyboard (package com.android.adbkeyboard) and \
                             enable it (`adb shell ime enable com.android.adbkeyboard/.AdbIME`, \
                             `adb shell ime set com.android.adbkeyboard/.AdbIME`), or type \
                             ASCII only"
                    .to_owned(),
            });
        }
        let after = self.dump().await?;
        if let Some((kind, package, summary)) = system_dialog(&after) {
            return Err(DeviceError::FrameworkConfirmationRequired {
                kind,
                package,
                summary,
            });
        }
        let value = after.find(&id).map_or(Value::Null, |n| json!(n.text));
        Ok(Self::ui_result(
            "type_text",
            json!({ "element_id": id }),
            "typed".to_owned(),
            brief(&after),
            json!({ "typed": text, "value": value }),
        ))
    }

    pub(crate) async fn press_key(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let key = p.ident_req("key")?.to_ascii_lowercase();
        let code = match key.as_str() {
            "back" => "KEYCODE_BACK",
            "home" => "KEYCODE_HOME",
            "recents" | "app_switch" => "KEYCODE_APP_SWITCH",
            "enter" | "go" => "KEYCODE_ENTER",
            "search" => "KEYCODE_SEARCH",
            "delete" | "backspace" => "KEYCODE_DEL",
            "tab" => "KEYCODE_TAB",
            "volume_up" => "KEYCODE_VOLUME_UP",
            "volume_down" => "KEYCODE_VOLUME_DOWN",
            _ => {
                return Err(DeviceError::invalid(
                    "key",
                    "must be one of back, home, recents, enter, search, go",
                ));
            }
        };
        self.before_input().await?;
        self.shell(&format!("input keyevent {code}")).await?;
        let screen = self.settle().await?;
        Ok(Self::ui_result(
            "press_key",
            Value::Null,
            format!("pressed {code}"),
            screen,
            json!({ "key": key }),
        ))
    }
}

/// The button that answers a dialog: its positive one (the narrowest grant a permission
/// prompt offers — Only this time, While using the app, then Allow; Just once, Pay, the first
/// share target) or its negative one (Don't allow, Cancel).
pub(crate) fn dialog_button(screen: &Screen, accept: bool) -> Option<usize> {
    let (ids, labels): (&[&str], &[&str]) = if accept {
        (
            &[
                "permission_allow_one_time_button",
                "permission_allow_foreground_only_button",
                "permission_allow_button",
                "button_once",
                "pay_button",
                "button1",
                "share_target_messages",
            ],
            &[
                "Only this time",
                "While using the app",
                "Allow only while using the app",
                "Allow",
                "Just once",
                "Pay",
                "OK",
            ],
        )
    } else {
        (
            &["permission_deny_button", "cancel_button", "button2"],
            &["Don't allow", "Deny", "Cancel"],
        )
    };
    ids.iter()
        .find_map(|id| screen.nodes.iter().position(|n| n.id == *id && n.enabled))
        .or_else(|| {
            labels.iter().find_map(|label| {
                screen
                    .nodes
                    .iter()
                    .position(|n| n.clickable && n.enabled && n.text == *label)
            })
        })
}

/// A permission prompt that offers a broader grant (Android 10's "Allow all the time") next to
/// the narrower one approval presses: the words the user is asked, naming both, so their yes
/// says which button.
fn accept_note(screen: &Screen) -> Option<String> {
    let broad = screen
        .nodes
        .iter()
        .position(|n| n.id == "permission_allow_button" && n.enabled)?;
    let pressed = dialog_button(screen, true)?;
    if pressed == broad {
        return None;
    }
    Some(format!(
        " (approving presses “{}”, not “{}”)",
        screen.label(pressed),
        screen.label(broad)
    ))
}

impl AdbPhone {
    /// Answers the OS dialog on screen once the user decided (the bridge calls this, never the
    /// backend on its own): presses its positive or negative button once, only when the dialog
    /// on screen is still `dialog_id`.
    pub(crate) async fn answer_dialog(
        &self,
        dialog_id: &str,
        accept: bool,
    ) -> Result<Value, DeviceError> {
        let screen = self.dump().await?;
        let Some((kind, package, summary)) = system_dialog(&screen) else {
            return Err(openphone_device::PendingDialog::gone(dialog_id));
        };
        if openphone_device::PendingDialog::id_of(&kind, &package, &summary) != dialog_id {
            return Err(openphone_device::PendingDialog::gone(dialog_id));
        }
        let (pressed, pressed_label) = match dialog_button(&screen, accept) {
            Some(idx) => {
                let (x, y) = screen.nodes[idx].bounds.center();
                self.shell(&format!("input tap {x} {y}")).await?;
                (json!(screen.nodes[idx].id), json!(screen.label(idx)))
            }
            None if !accept => {
                self.shell("input keyevent KEYCODE_BACK").await?;
                (json!("back"), json!("Back"))
            }
            None => {
                return Err(DeviceError::Internal {
                    message: format!("the {kind} dialog of {package} shows no button to accept it"),
                });
            }
        };
        let after = self.settle().await?;
        Ok(
            json!({ "dialog_id": dialog_id, "accepted": accept, "pressed": pressed, "pressed_label": pressed_label, "screen": after }),
        )
    }
}
