//! The screen in the form a model reads: `openphone.screen.get` with `format: "compact"`.
//!
//! Every backend answers `screen.get` with the **full** form first — the foreground app
//! (`package`, `activity`, `title`, `screen`), `width`/`height`, `focused_element`,
//! `visible_text`, `interactive_elements` and the nested `ui_tree`, whose nodes carry
//! `element_id`, `class`, `text`, `content_description`, `hint`, `bounds {left, top, right,
//! bottom}`, `clickable`, `long_clickable`, `editable`, `enabled`, `focused`, `scrollable`,
//! `checkable`, `checked` and `children` — and then hands it to [`shape_screen`], so the
//! compact form is computed once, here, the same for the simulator and a real phone.
//!
//! The compact form keeps what a model acts on and nothing decorative:
//!
//! ```json
//! { "format": "compact", "package": "com.android.messaging", "title": "Alice",
//!   "size": [1080, 2400], "focused": "message_input",
//!   "elements": [
//!     { "id": "send", "role": "button", "text": "Send", "bounds": [912, 2136, 1032, 2256] },
//!     { "id": "message_input", "role": "field", "hint": "Text message",
//!       "bounds": [48, 2136, 888, 2256], "state": ["focused"] } ],
//!   "other_text": ["Today"] }
//! ```
//!
//! - `elements`: the interactive nodes (clickable, long-clickable, editable, scrollable or
//!   checkable), in screen order. `text` is the node's own text or description, else the
//!   texts of its plain (non-interactive) descendants joined with ` · ` (a list row reads as
//!   its title and subtitle); a field's `text` is its value and `hint` its placeholder.
//!   `role` is one of `button`, `field`, `switch`, `checkbox`, `list`, `item`. `state` lists
//!   only what is not the default: `disabled`, `focused`, `checked`, `unchecked`,
//!   `long_press` (has a long-press action), `scrolls` (an item that also scrolls).
//! - `other_text`: texts on screen that belong to no element (headings, message bodies of a
//!   plain transcript, notices), in reading order.
//! - Containers, layout nodes and the status and navigation bars' plain nodes are left out.
//!
//! A screenshot asked for with `include_screenshot` is kept.

use serde_json::{Map, Value, json};

use crate::DeviceError;

/// Which form of the screen `screen.get` answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScreenForm {
    /// Everything: the interactive elements with all their flags, the visible text and the
    /// nested tree (the default).
    #[default]
    Full,
    /// The interactive elements only, each with its id, role, text and bounds.
    Compact,
}

impl ScreenForm {
    /// The `format` param of `screen.get` (absent or `null`: full).
    pub fn from_params(params: &Value) -> Result<ScreenForm, DeviceError> {
        match params.get("format") {
            None | Some(Value::Null) => Ok(ScreenForm::Full),
            Some(Value::String(s)) => ScreenForm::parse(Some(s)),
            Some(_) => ScreenForm::parse(Some("")),
        }
    }

    /// `"full"`, `"compact"` or absent (full).
    pub fn parse(format: Option<&str>) -> Result<ScreenForm, DeviceError> {
        match format {
            None | Some("full") => Ok(ScreenForm::Full),
            Some("compact") => Ok(ScreenForm::Compact),
            Some(_) => Err(DeviceError::invalid(
                "format",
                "must be \"full\" or \"compact\"",
            )),
        }
    }
}

/// The answer of `screen.get` in the form `params` asks for, from the backend's full form.
/// The full form is returned as it is unless `format` is `"compact"`.
pub fn shape_screen(params: &Value, full: Value) -> Result<Value, DeviceError> {
    Ok(match ScreenForm::from_params(params)? {
        ScreenForm::Full => full,
        ScreenForm::Compact => compact_screen(&full),
    })
}

/// The compact form of a full `screen.get` answer (see the module docs).
pub fn compact_screen(full: &Value) -> Value {
    let mut out = Map::new();
    out.insert("format".into(), json!("compact"));
    for key in ["package", "activity", "title", "screen"] {
        if let Some(v) = full.get(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), v.clone());
        }
    }
    if let (Some(w), Some(h)) = (
        full.get("width").and_then(Value::as_i64),
        full.get("height").and_then(Value::as_i64),
    ) {
        out.insert("size".into(), json!([w, h]));
    }
    if let Some(f) = full.get("focused_element").filter(|v| !v.is_null()) {
        out.insert("focused".into(), f.clone());
    }
    let mut walk = Walk::default();
    match full.get("ui_tree").filter(|t| t.is_object()) {
        Some(tree) => walk.node(tree, false),
        // Without the tree: the flat list (its `label` already joins the row's texts).
        None => {
            for e in full
                .get("interactive_elements")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let label = e.get("label").and_then(Value::as_str).map(str::to_owned);
                walk.elements.push(element(e, label));
            }
        }
    }
    out.insert("elements".into(), Value::Array(walk.elements));
    if !walk.other_text.is_empty() {
        out.insert("other_text".into(), json!(walk.other_text));
    }
    if let Some(shot) = full.get("screenshot") {
        out.insert("screenshot".into(), shot.clone());
    }
    Value::Object(out)
}

fn flag(node: &Value, key: &str) -> bool {
    node.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn str_of<'a>(node: &'a Value, key: &str) -> Option<&'a str> {
    node.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn children(node: &Value) -> impl Iterator<Item = &Value> {
    node.get("children")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Acts on its own (a tap, a long press, typing, a toggle): its plain descendants are its
/// label.
fn actionable(node: &Value) -> bool {
    flag(node, "clickable")
        || flag(node, "long_clickable")
        || flag(node, "editable")
        || flag(node, "checkable")
}

fn interactive(node: &Value) -> bool {
    actionable(node) || flag(node, "scrollable")
}

/// Texts of `node`'s plain descendants, in order, stopping at interactive ones.
fn plain_texts(node: &Value, out: &mut Vec<String>) {
    for child in children(node) {
        if interactive(child) {
            continue;
        }
        if let Some(t) = str_of(child, "text").or_else(|| str_of(child, "content_description")) {
            out.push(t.to_owned());
        }
        plain_texts(child, out);
    }
}

#[derive(Debug, Default)]
struct Walk {
    elements: Vec<Value>,
    other_text: Vec<String>,
}

impl Walk {
    /// `labelled`: an actionable ancestor already reads this node's text as its label.
    fn node(&mut self, node: &Value, labelled: bool) {
        if interactive(node) {
            let label = if actionable(node) && !flag(node, "editable") {
                let own = str_of(node, "text").or_else(|| str_of(node, "content_description"));
                own.map(str::to_owned).or_else(|| {
                    let mut parts = Vec::new();
                    plain_texts(node, &mut parts);
                    (!parts.is_empty()).then(|| parts.join(" · "))
                })
            } else {
                None
            };
            self.elements.push(element(node, label));
        } else if !labelled
            && let Some(t) = str_of(node, "text").or_else(|| str_of(node, "content_description"))
        {
            self.other_text.push(t.to_owned());
        }
        let labels_children = labelled || actionable(node);
        for child in children(node) {
            self.node(child, labels_children && !interactive(child));
        }
    }
}

fn role(node: &Value) -> &'static str {
    let class = node.get("class").and_then(Value::as_str).unwrap_or("");
    if flag(node, "editable") {
        "field"
    } else if flag(node, "checkable") {
        if class.ends_with("CheckBox") {
            "checkbox"
        } else {
            "switch"
        }
    } else if class.ends_with("Button") {
        "button"
    } else if flag(node, "clickable") || flag(node, "long_clickable") {
        "item"
    } else if flag(node, "scrollable") {
        "list"
    } else {
        "item"
    }
}

/// One element: id, role, text (or, for a field, its value and hint), bounds, state.
fn element(node: &Value, label: Option<String>) -> Value {
    let mut m = Map::new();
    if let Some(id) = node.get("element_id").filter(|v| !v.is_null()) {
        m.insert("id".into(), id.clone());
    }
    let role = role(node);
    m.insert("role".into(), json!(role));
    if flag(node, "editable") {
        if let Some(value) = str_of(node, "text") {
            m.insert("text".into(), json!(value));
        }
        if let Some(hint) = str_of(node, "hint") {
            m.insert("hint".into(), json!(hint));
        }
    } else if let Some(label) = label
        .or_else(|| str_of(node, "text").map(str::to_owned))
        .or_else(|| str_of(node, "content_description").map(str::to_owned))
    {
        m.insert("text".into(), json!(label));
    }
    if let Some(b) = node.get("bounds") {
        let side = |k: &str| b.get(k).and_then(Value::as_i64).unwrap_or(0);
        m.insert(
            "bounds".into(),
            json!([side("left"), side("top"), side("right"), side("bottom")]),
        );
    }
    let mut state = Vec::new();
    if node.get("enabled").and_then(Value::as_bool) == Some(false) {
        state.push("disabled");
    }
    if flag(node, "focused") {
        state.push("focused");
    }
    if flag(node, "checkable") {
        state.push(if flag(node, "checked") {
            "checked"
        } else {
            "unchecked"
        });
    }
    if flag(node, "long_clickable") && flag(node, "clickable") {
        state.push("long_press");
    }
    if flag(node, "scrollable") && role != "list" {
        state.push("scrolls");
    }
    if !state.is_empty() {
        m.insert("state".into(), json!(state));
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, class: &str, extra: Value) -> Value {
        let mut n = json!({"element_id": id, "class": class,
            "bounds": {"left": 0, "top": 0, "right": 10, "bottom": 10},
            "clickable": false, "long_clickable": false, "editable": false,
            "enabled": true, "focused": false, "scrollable": false});
        if let (Some(m), Value::Object(e)) = (n.as_object_mut(), extra) {
            m.extend(e);
        }
        n
    }

    #[test]
    fn a_row_reads_as_its_texts_and_containers_disappear() {
        let row = {
            let mut r = node(
                "thread_1",
                "android.view.ViewGroup",
                json!({"clickable": true}),
            );
            r["children"] = json!([
                node(
                    "thread_1_title",
                    "android.widget.TextView",
                    json!({"text": "Alice"})
                ),
                node(
                    "thread_1_subtitle",
                    "android.widget.TextView",
                    json!({"text": "Hi"})
                ),
            ]);
            r
        };
        let mut list = node(
            "threads",
            "androidx.recyclerview.widget.RecyclerView",
            json!({"scrollable": true}),
        );
        list["children"] = json!([row]);
        let mut root = node("root", "android.widget.FrameLayout", json!({}));
        root["children"] = json!([
            node(
                "heading",
                "android.widget.TextView",
                json!({"text": "Messages"})
            ),
            list
        ]);
        let full = json!({"package": "p", "width": 10, "height": 20, "ui_tree": root,
            "focused_element": null});
        let c = compact_screen(&full);
        assert_eq!(
            c["elements"],
            json!([
                {"id": "threads", "role": "list", "bounds": [0, 0, 10, 10]},
                {"id": "thread_1", "role": "item", "text": "Alice · Hi", "bounds": [0, 0, 10, 10]},
            ])
        );
        assert_eq!(c["other_text"], json!(["Messages"]));
        assert_eq!(c["size"], json!([10, 20]));
        assert!(c.get("focused").is_none());
    }

    #[test]
    fn a_field_keeps_value_hint_and_state() {
        let field = node(
            "message_input",
            "android.widget.EditText",
            json!({"editable": true, "focused": true, "hint": "Text message", "text": ""}),
        );
        let full = json!({"ui_tree": field});
        assert_eq!(
            compact_screen(&full)["elements"],
            json!([{"id": "message_input", "role": "field", "hint": "Text message",
                "bounds": [0, 0, 10, 10], "state": ["focused"]}])
        );
    }

    #[test]
    fn an_unknown_format_is_an_invalid_input() {
        let err = ScreenForm::from_params(&json!({"format": "tiny"})).unwrap_err();
        assert_eq!(err.code(), "invalid_input");
        assert_eq!(
            ScreenForm::from_params(&json!({})).unwrap(),
            ScreenForm::Full
        );
    }
}
