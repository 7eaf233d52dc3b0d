//! `input tap|swipe|text|keyevent`: Android's input command, replayed on the simulated phone
//! (`ui.tap`, `ui.swipe` / `ui.long_press`, `ui.type_text`, `input.press_key`,
//! `clipboard.paste`). Success prints nothing, as on Android.

use serde_json::{Value, json};

use crate::Options;
use crate::phone::{DIALOG, Phone};

/// The shortest press that is a long press rather than a tap when a swipe stays in place.
const LONG_PRESS_MS: i64 = 500;
/// How far (pixels) a "swipe" may move and still be a press in place.
const TOUCH_SLOP: f64 = 8.0;

const USAGE: &str = "Usage: input [<source>] <command> [<arg>...]\n\nThe commands and default sources are:\n      text <string> (Default: touchscreen)\n      keyevent [--longpress] <key code number or name> ... (Default: keyboard)\n      tap <x> <y> (Default: touchscreen)\n      swipe <x1> <y1> <x2> <y2> [duration(ms)] (Default: touchscreen)\n";

fn invalid(command: &str) -> String {
    format!("Error: Invalid arguments for command: {command}\n{USAGE}")
}

fn number(arg: &str) -> Option<f64> {
    arg.parse::<f64>().ok().filter(|v| v.is_finite())
}

async fn act(phone: &Phone, tool: &str, params: Value) -> String {
    match phone.call(tool, params).await {
        Ok(_) => String::new(),
        Err(e) => format!("Error: {e}\n"),
    }
}

/// Runs `input <args>`; answers what Android prints (nothing on success).
pub async fn input(phone: &Phone, options: &Options, args: &[&str]) -> String {
    // An optional source first (`input touchscreen tap …`), as Android allows.
    let args = match args.first() {
        Some(&("touchscreen" | "touchpad" | "keyboard" | "dpad" | "mouse" | "stylus")) => {
            &args[1..]
        }
        _ => args,
    };
    let _ = options;
    match args {
        ["tap", x, y] => match (number(x), number(y)) {
            (Some(x), Some(y)) => tap(phone, x, y).await,
            _ => invalid("tap"),
        },
        ["swipe", x1, y1, x2, y2, rest @ ..] if rest.len() <= 1 => {
            let points = (number(x1), number(y1), number(x2), number(y2));
            let duration = match rest.first() {
                None => Some(300),
                Some(ms) => ms.parse::<i64>().ok().filter(|ms| *ms >= 0),
            };
            match (points, duration) {
                ((Some(x1), Some(y1), Some(x2), Some(y2)), Some(ms)) => {
                    swipe(phone, (x1, y1), (x2, y2), ms).await
                }
                _ => invalid("swipe"),
            }
        }
        ["text", text] => type_text(phone, text).await,
        ["keyevent", keys @ ..] if !keys.is_empty() => keyevents(phone, keys).await,
        [command, ..] => invalid(command),
        [] => USAGE.to_owned(),
    }
}

/// A tap. On a real phone a finger on a system dialog's button presses it (only the runtime
/// must never do that): a tap the simulator holds back on a dialog that was already showing is
/// pressed here, so a backend that taps through a dialog is caught by what changed.
async fn tap(phone: &Phone, x: f64, y: f64) -> String {
    let before = match phone.dialog_showing().await {
        Ok(showing) => showing,
        Err(e) => return format!("Error: {e}\n"),
    };
    match phone
        .call("openphone.ui.tap", json!({ "x": x, "y": y }))
        .await
    {
        Ok(result) => match result.get(DIALOG) {
            Some(dialog) if before => match phone.press_dialog(dialog).await {
                Ok(_) => String::new(),
                Err(e) => format!("Error: {e}\n"),
            },
            _ => String::new(),
        },
        Err(e) => format!("Error: {e}\n"),
    }
}

async fn swipe(phone: &Phone, from: (f64, f64), to: (f64, f64), ms: i64) -> String {
    let moved = (to.0 - from.0).hypot(to.1 - from.1);
    if moved <= TOUCH_SLOP {
        if ms >= LONG_PRESS_MS {
            let duration = ms.clamp(1, 10_000);
            return act(
                phone,
                "openphone.ui.long_press",
                json!({ "x": from.0, "y": from.1, "duration_ms": duration }),
            )
            .await;
        }
        return act(
            phone,
            "openphone.ui.tap",
            json!({ "x": from.0, "y": from.1 }),
        )
        .await;
    }
    act(
        phone,
        "openphone.ui.swipe",
        json!({ "start_x": from.0, "start_y": from.1, "end_x": to.0, "end_y": to.1 }),
    )
    .await
}

/// Android's `input text` decoding: `%s` is a space; every other character stands for itself.
pub fn decode_text(arg: &str) -> String {
    let mut out = String::with_capacity(arg.len());
    let mut chars = arg.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '%' && chars.peek() == Some(&'s') {
            chars.next();
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

async fn type_text(phone: &Phone, arg: &str) -> String {
    let text = decode_text(arg);
    if text.is_empty() {
        return String::new();
    }
    if !text.is_ascii() {
        // Android's key character map has no key events for these characters.
        return "Exception occurred while executing 'text':\njava.lang.NullPointerException: Attempt to get length of null array\n\tat com.android.server.input.InputShellCommand.sendText(InputShellCommand.java)\n".to_owned();
    }
    act(phone, "openphone.ui.type_text", json!({ "text": text })).await
}

/// The simulated phone's action for an Android key code (name or number).
fn key_action(key: &str) -> Option<(&'static str, Option<&'static str>)> {
    let name = key.strip_prefix("KEYCODE_").unwrap_or(key);
    let action = match name {
        "BACK" | "4" => ("openphone.input.press_key", Some("back")),
        "HOME" | "3" => ("openphone.input.press_key", Some("home")),
        "APP_SWITCH" | "187" => ("openphone.input.press_key", Some("recents")),
        "ENTER" | "66" | "NUMPAD_ENTER" | "160" => ("openphone.input.press_key", Some("enter")),
        "SEARCH" | "84" => ("openphone.input.press_key", Some("search")),
        "PASTE" | "279" => ("openphone.clipboard.paste", None),
        _ => return None,
    };
    Some(action)
}

async fn keyevents(phone: &Phone, keys: &[&str]) -> String {
    let mut keys = keys;
    if keys.first() == Some(&"--longpress") {
        keys = &keys[1..];
    }
    let mut out = String::new();
    for key in keys {
        match key_action(key) {
            Some((tool, Some(name))) => {
                out.push_str(&act(phone, tool, json!({ "key": name })).await);
            }
            Some((tool, None)) => out.push_str(&act(phone, tool, json!({})).await),
            None => out.push_str(&format!(
                "Error: openphone-fake-adbd: the simulated phone has no key {key} (it models BACK, HOME, APP_SWITCH, ENTER, SEARCH and PASTE)\n"
            )),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_s_is_a_space_and_nothing_else_changes() {
        assert_eq!(decode_text("hello%sworld"), "hello world");
        assert_eq!(decode_text("100%"), "100%");
        assert_eq!(decode_text("a%%sb"), "a% b");
        assert_eq!(decode_text("%t"), "%t");
    }

    #[test]
    fn key_names_and_numbers_map_to_the_same_action() {
        assert_eq!(key_action("KEYCODE_BACK"), key_action("4"));
        assert_eq!(
            key_action("KEYCODE_APP_SWITCH").map(|a| a.1),
            Some(Some("recents"))
        );
        assert_eq!(key_action("KEYCODE_VOLUME_UP"), None);
    }
}
