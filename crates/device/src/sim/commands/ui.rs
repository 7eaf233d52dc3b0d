//! Input on the screen: taps, long presses and swipes (by point or by element), typing
//! into the focused field, and keys.

use serde_json::{Value, json};

use crate::DeviceError;
use crate::params::Params;
use crate::sim::actions::{self, page_mut, perform};
use crate::sim::screens::{self, current_page};
use crate::sim::state::{Action, Overlay, Route, SimState};
use crate::sim::view::{STATUS_H, View};

use super::{Exec, Outcome, check_len, screen_brief};

fn check_point(st: &SimState, fx: &str, fy: &str, x: f64, y: f64) -> Result<(), DeviceError> {
    let (w, h) = st.screen();
    if !(0.0..f64::from(w)).contains(&x) {
        return Err(DeviceError::invalid(
            fx,
            format!("{x} is outside the screen (0 to {})", w - 1),
        ));
    }
    if !(0.0..f64::from(h)).contains(&y) {
        return Err(DeviceError::invalid(
            fy,
            format!("{y} is outside the screen (0 to {})", h - 1),
        ));
    }
    Ok(())
}

/// Runs the tap action of the node at index `idx` of `view`.
fn activate(
    x: &mut Exec<'_>,
    view: &View,
    idx: usize,
    long: bool,
) -> Result<(Value, String), DeviceError> {
    let node = view.nodes.get(idx).ok_or_else(|| DeviceError::Internal {
        message: "node index out of range".into(),
    })?;
    if !node.enabled {
        return Err(DeviceError::ElementDisabled {
            element_id: node.id.clone(),
        });
    }
    let element = view.element_json(idx, true);
    let action = if long {
        node.long_press.clone()
    } else {
        Some(node.tap.clone())
    };
    let Some(action) = action else {
        return Ok((element, "no long-press action here".into()));
    };
    // Touching anything while a popup is open dismisses the popup first.
    if !matches!(action, Action::Back | Action::Home | Action::Recents)
        && matches!(
            x.st.nav.overlay,
            Some(Overlay::Menu { .. } | Overlay::ShareSheet { .. })
        )
        && !matches!(action, Action::Menu { .. })
    {
        x.st.nav.overlay = None;
    }
    let summary = perform(x.st, &action, x.now)?;
    Ok((element, summary))
}

pub(super) fn ui_result(
    x: &Exec<'_>,
    kind: &str,
    element: Value,
    effect: &str,
    extra: Value,
) -> Value {
    let mut out = json!({ "action": kind, "element": element, "effect": effect, "screen": screen_brief(x.st, x.now) });
    if let (Some(map), Value::Object(more)) = (out.as_object_mut(), extra) {
        map.extend(more);
    }
    out
}

fn press_at(
    x: &mut Exec<'_>,
    px: f64,
    py: f64,
    long: bool,
) -> Result<(Value, String), DeviceError> {
    let view = screens::build(x.st, x.now);
    let hit = view.nodes.iter().enumerate().rev().find(|(_, n)| {
        n.bounds.contains(px, py) && (n.clickable || n.editable || (long && n.long_clickable))
    });
    match hit {
        Some((idx, _)) => activate(x, &view, idx, long),
        None => Ok((Value::Null, "nothing to touch here".into())),
    }
}

fn press_element(x: &mut Exec<'_>, id: &str, long: bool) -> Result<(Value, String), DeviceError> {
    let view = screens::build(x.st, x.now);
    let Some(idx) = view.nodes.iter().position(|n| n.id == id) else {
        return Err(DeviceError::ElementNotFound {
            element_id: id.to_string(),
        });
    };
    let node = &view.nodes[idx];
    if node.bounds.is_empty() {
        return Err(DeviceError::ElementBoundsUnavailable {
            element_id: id.to_string(),
        });
    }
    let direct = if long {
        node.long_clickable || node.clickable
    } else {
        node.clickable || node.editable
    };
    if direct {
        return activate(x, &view, idx, long);
    }
    // A plain element (a label inside a row, something under a popup): a finger on its
    // centre touches whatever is on top there.
    if !node.enabled {
        return Err(DeviceError::ElementDisabled {
            element_id: id.to_string(),
        });
    }
    let (cx, cy) = node.bounds.center();
    press_at(x, f64::from(cx), f64::from(cy), long)
}

pub(crate) fn ui_tap(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let (px, py) = (p.f64_req("x")?, p.f64_req("y")?);
    check_point(x.st, "x", "y", px, py)?;
    let (element, effect) = press_at(x, px, py, false)?;
    let out = ui_result(x, "tap", element, &effect, json!({ "x": px, "y": py }));
    Ok(Outcome::act(out, format!("tap at ({px}, {py}): {effect}")))
}

pub(crate) fn ui_tap_element(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let id = p.ident_req("element_id")?;
    let (element, effect) = press_element(x, id, false)?;
    let out = ui_result(x, "tap", element, &effect, json!({}));
    Ok(Outcome::act(out, format!("tap {id}: {effect}")))
}

/// Android's long-press timeout: shorter presses are taps.
const LONG_PRESS_MS: i64 = 400;

fn press_duration(p: &Params<'_>) -> Result<i64, DeviceError> {
    match p.i64_opt("duration_ms")? {
        None => Ok(600),
        Some(d) if !(1..=10_000).contains(&d) => Err(DeviceError::invalid(
            "duration_ms",
            "must be between 1 and 10000",
        )),
        Some(d) => Ok(d),
    }
}

pub(crate) fn ui_long_press(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let (px, py) = (p.f64_req("x")?, p.f64_req("y")?);
    check_point(x.st, "x", "y", px, py)?;
    let duration = press_duration(&p)?;
    let long = duration >= LONG_PRESS_MS;
    let (element, effect) = press_at(x, px, py, long)?;
    let out = ui_result(
        x,
        if long { "long_press" } else { "tap" },
        element,
        &effect,
        json!({ "x": px, "y": py, "duration_ms": duration }),
    );
    Ok(Outcome::act(
        out,
        format!("long press at ({px}, {py}): {effect}"),
    ))
}

pub(crate) fn ui_long_press_element(
    x: &mut Exec<'_>,
    p: Params<'_>,
) -> Result<Outcome, DeviceError> {
    let id = p.ident_req("element_id")?;
    let duration = press_duration(&p)?;
    let long = duration >= LONG_PRESS_MS;
    let (element, effect) = press_element(x, id, long)?;
    let out = ui_result(
        x,
        if long { "long_press" } else { "tap" },
        element,
        &effect,
        json!({ "duration_ms": duration }),
    );
    Ok(Outcome::act(out, format!("long press {id}: {effect}")))
}

pub(crate) fn ui_swipe(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let (sx, sy, ex, ey) = (
        p.f64_req("start_x")?,
        p.f64_req("start_y")?,
        p.f64_req("end_x")?,
        p.f64_req("end_y")?,
    );
    check_point(x.st, "start_x", "start_y", sx, sy)?;
    check_point(x.st, "end_x", "end_y", ex, ey)?;
    let (dx, dy) = (ex - sx, ey - sy);
    let view = screens::build(x.st, x.now);
    let mut effect = "nothing to scroll here".to_string();
    let mut element = Value::Null;
    let vertical = dy.abs() >= dx.abs();
    if dx.abs() < 24.0 && dy.abs() < 24.0 {
        effect = "too short to be a swipe".into();
    } else if vertical && dy > 0.0 && sy < f64::from(STATUS_H) {
        // Pulling down from the status bar opens the notification shade.
        x.st.nav.overlay = Some(Overlay::Shade);
        effect = "opened the notification shade".into();
    } else if vertical && dy < 0.0 && matches!(x.st.nav.overlay, Some(Overlay::Shade)) {
        x.st.nav.overlay = None;
        effect = "closed the notification shade".into();
    } else if vertical {
        let target = view
            .nodes
            .iter()
            .enumerate()
            .rev()
            .find(|(_, n)| n.scrollable && n.bounds.contains(sx, sy))
            .or_else(|| view.nodes.iter().enumerate().find(|(_, n)| n.scrollable));
        if let Some((idx, node)) = target {
            element = view.element_json(idx, false);
            #[allow(clippy::cast_possible_truncation)]
            let delta = dy.round() as i32;
            let (current, max) = node.scroll;
            let next = if node.reverse {
                current + delta
            } else {
                current - delta
            }
            .clamp(0, max);
            if node.id == "app_grid" {
                x.st.nav.home_scroll = next;
            } else if let Some(page) = page_mut(x.st) {
                page.scroll = next;
            }
            effect = if next == current {
                "already at the end of the list".into()
            } else {
                format!("scrolled {} by {}px", node.id, (next - current).abs())
            };
        }
    } else if let Some((_, page, _)) = current_page(x.st)
        && matches!(page.route, Route::Agenda { .. })
        && x.st.nav.overlay.is_none()
    {
        // Horizontal swipes page through the calendar's days.
        let days = if dx < 0.0 { 1 } else { -1 };
        effect = perform(x.st, &Action::ShiftDay { days }, x.now)?;
    } else {
        effect = "nothing to swipe here".into();
    }
    let out = ui_result(
        x,
        "swipe",
        element,
        &effect,
        json!({ "start": {"x": sx, "y": sy}, "end": {"x": ex, "y": ey} }),
    );
    Ok(Outcome::act(out, format!("swipe: {effect}")))
}

/// The focused editable field, or `no_focused_field`.
pub(super) fn focused(x: &Exec<'_>) -> Result<(String, bool, Option<Action>, bool), DeviceError> {
    let view = screens::build(x.st, x.now);
    let node = view.focused_field().ok_or(DeviceError::NoFocusedField)?;
    Ok((
        node.id.clone(),
        node.multiline,
        node.submit.clone(),
        node.enabled,
    ))
}

pub(super) fn field_value(x: &Exec<'_>, id: &str) -> String {
    let view = screens::build(x.st, x.now);
    view.find(id)
        .and_then(|n| n.text.clone())
        .unwrap_or_default()
}

pub(crate) fn ui_type_text(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let text = p
        .str_opt("text")?
        .ok_or_else(|| DeviceError::invalid("text", "is required"))?;
    if text.is_empty() {
        return Err(DeviceError::invalid("text", "must not be empty"));
    }
    check_len("text", text)?;
    let (id, multiline, submit, enabled) = focused(x)?;
    if !enabled {
        return Err(DeviceError::ElementDisabled { element_id: id });
    }
    let mut submitted = false;
    if multiline {
        actions::type_into_focus(x.st, &id, text);
    } else {
        // A newline in a single-line field is the keyboard's action key.
        let mut parts = text.split('\n').peekable();
        while let Some(part) = parts.next() {
            actions::type_into_focus(x.st, &id, part);
            if parts.peek().is_some()
                && let Some(action) = &submit
            {
                perform(x.st, action, x.now)?;
                submitted = true;
                break;
            }
        }
    }
    let value = if submitted {
        Value::Null
    } else {
        json!(field_value(x, &id))
    };
    let out = ui_result(
        x,
        "type_text",
        json!({ "element_id": id }),
        if submitted {
            "typed and submitted"
        } else {
            "typed"
        },
        json!({ "typed": text, "value": value }),
    );
    Ok(Outcome::act(
        out,
        format!("typed {} characters into {id}", text.chars().count()),
    ))
}

pub(crate) fn press_key(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let key = p.ident_req("key")?.to_ascii_lowercase();
    let effect = match key.as_str() {
        "back" => actions::back(x.st, x.now),
        "home" => actions::home(x.st),
        "recents" | "app_switch" => perform(x.st, &Action::Recents, x.now)?,
        "enter" | "search" | "go" => match focused(x) {
            Ok((id, multiline, submit, _)) => match submit {
                Some(action) => perform(x.st, &action, x.now)?,
                None if multiline && key == "enter" => {
                    actions::type_into_focus(x.st, &id, "\n");
                    format!("new line in {id}")
                }
                None => "the focused field has no action for this key".into(),
            },
            Err(_) => "no focused field; the key did nothing".into(),
        },
        _ => {
            return Err(DeviceError::invalid(
                "key",
                "must be one of back, home, recents, enter, search, go",
            ));
        }
    };
    let out = ui_result(x, "press_key", Value::Null, &effect, json!({ "key": key }));
    Ok(Outcome::act(out, format!("pressed {key}: {effect}")))
}
