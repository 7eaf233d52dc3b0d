//! The screen as `uiautomator dump` shows it, turned into the shapes the simulated phone
//! answers `openphone.screen.get` with (elements with ids, labels, bounds and flags; the
//! visible text; the nested tree).
//!
//! Element ids: the tail of `resource-id` (`com.android.messaging:id/send` → `send`) when it is
//! unique on the screen, else `e<N>` (the node's position in document order), so an app's own
//! ids survive and every element still has one.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::xml::{self, Element};

/// An axis-aligned rectangle in screen pixels, as uiautomator prints it (`[l,t][r,b]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Bounds {
    pub left: i32,
    pub top: i32,
    pub right: i32,
    pub bottom: i32,
}

impl Bounds {
    /// Parses `[l,t][r,b]`.
    pub(crate) fn parse(text: &str) -> Option<Bounds> {
        let nums: Vec<i32> = text
            .split(['[', ']', ','])
            .filter(|s| !s.is_empty())
            .map(|s| s.trim().parse().ok())
            .collect::<Option<Vec<i32>>>()?;
        match nums.as_slice() {
            [left, top, right, bottom] => Some(Bounds {
                left: *left,
                top: *top,
                right: *right,
                bottom: *bottom,
            }),
            _ => None,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.right <= self.left || self.bottom <= self.top
    }

    pub(crate) fn center(&self) -> (i32, i32) {
        (
            self.left + (self.right - self.left) / 2,
            self.top + (self.bottom - self.top) / 2,
        )
    }
}

/// One element of the dump.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Node {
    pub id: String,
    pub resource_id: String,
    pub class: String,
    pub package: String,
    pub text: String,
    pub desc: String,
    pub hint: String,
    pub checkable: bool,
    pub checked: bool,
    pub clickable: bool,
    pub long_clickable: bool,
    pub enabled: bool,
    pub focused: bool,
    pub scrollable: bool,
    pub password: bool,
    pub editable: bool,
    pub bounds: Bounds,
    pub parent: Option<usize>,
}

/// A parsed UI dump: the nodes in document order (each knows its parent).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Screen {
    pub nodes: Vec<Node>,
    pub rotation: i32,
}

/// Classes that take typed text (uiautomator has no `editable` attribute).
fn is_editable_class(class: &str) -> bool {
    class.ends_with("EditText") || class.ends_with("AutoCompleteTextView")
}

impl Screen {
    /// Parses the output of `uiautomator dump /dev/tty`. Android prints `ERROR: …` when it
    /// cannot dump (no window yet, the screen never idles); that is an error.
    pub(crate) fn parse(output: &str) -> Result<Screen, String> {
        if !output.contains("<hierarchy") {
            let first = output.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(format!(
                "uiautomator printed no UI tree: {}",
                if first.is_empty() {
                    "nothing"
                } else {
                    first.trim()
                }
            ));
        }
        let root = xml::parse(output)?;
        if root.name != "hierarchy" {
            return Err(format!("uiautomator's root element is <{}>", root.name));
        }
        let mut screen = Screen {
            nodes: Vec::new(),
            rotation: root
                .attr("rotation")
                .and_then(|r| r.parse().ok())
                .unwrap_or(0),
        };
        for child in &root.children {
            screen.add(child, None);
        }
        screen.assign_ids();
        Ok(screen)
    }

    fn add(&mut self, el: &Element, parent: Option<usize>) {
        if el.name != "node" {
            return;
        }
        let flag = |name: &str| el.attr(name) == Some("true");
        let text = |name: &str| el.attr(name).unwrap_or("").to_owned();
        let class = text("class");
        let node = Node {
            id: String::new(),
            resource_id: text("resource-id"),
            editable: is_editable_class(&class),
            class,
            package: text("package"),
            text: text("text"),
            desc: text("content-desc"),
            hint: text("hint"),
            checkable: flag("checkable"),
            checked: flag("checked"),
            clickable: flag("clickable"),
            long_clickable: flag("long-clickable"),
            enabled: el.attr("enabled") != Some("false"),
            focused: flag("focused"),
            scrollable: flag("scrollable"),
            password: flag("password"),
            bounds: el
                .attr("bounds")
                .and_then(Bounds::parse)
                .unwrap_or_default(),
            parent,
        };
        self.nodes.push(node);
        let me = self.nodes.len() - 1;
        for child in &el.children {
            self.add(child, Some(me));
        }
    }

    fn assign_ids(&mut self) {
        let tail = |rid: &str| -> String {
            match rid.split_once(":id/") {
                Some((_, t)) => t.to_owned(),
                None => rid.to_owned(),
            }
        };
        let mut count: HashMap<String, usize> = HashMap::new();
        for n in &self.nodes {
            if !n.resource_id.is_empty() {
                *count.entry(tail(&n.resource_id)).or_default() += 1;
            }
        }
        for (i, n) in self.nodes.iter_mut().enumerate() {
            let t = tail(&n.resource_id);
            n.id = if !t.is_empty() && count.get(&t) == Some(&1) && !looks_generated(&t) {
                t
            } else {
                format!("e{i}")
            };
        }
    }

    pub(crate) fn find(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The foreground app: the package of the first node.
    pub(crate) fn package(&self) -> &str {
        self.nodes.first().map_or("", |n| n.package.as_str())
    }

    fn children(&self, idx: usize) -> impl Iterator<Item = usize> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(move |(_, n)| n.parent == Some(idx))
            .map(|(i, _)| i)
    }

    /// A node's label: its text, its description, its hint, or its descendants' labels.
    pub(crate) fn label(&self, idx: usize) -> String {
        let Some(n) = self.nodes.get(idx) else {
            return String::new();
        };
        for own in [&n.text, &n.desc, &n.hint] {
            if !own.is_empty() {
                return own.clone();
            }
        }
        self.children(idx)
            .map(|c| self.label(c))
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" · ")
    }

    pub(crate) fn is_interactive(n: &Node) -> bool {
        n.clickable || n.long_clickable || n.editable || n.scrollable
    }

    /// Texts on screen in document order (a field's hint stands in for an empty field).
    pub(crate) fn visible_text(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter_map(|n| {
                if !n.text.is_empty() {
                    Some(n.text.clone())
                } else if n.editable && !n.hint.is_empty() {
                    Some(n.hint.clone())
                } else {
                    None
                }
            })
            .collect()
    }

    /// One element as JSON, the simulated phone's shape.
    pub(crate) fn element_json(&self, idx: usize, with_label: bool) -> Value {
        let Some(n) = self.nodes.get(idx) else {
            return Value::Null;
        };
        let (cx, cy) = n.bounds.center();
        let mut m = Map::new();
        m.insert("element_id".into(), json!(n.id));
        m.insert("class".into(), json!(n.class));
        if !n.text.is_empty() || n.editable {
            m.insert("text".into(), json!(n.text));
        }
        if !n.desc.is_empty() {
            m.insert("content_description".into(), json!(n.desc));
        }
        if !n.hint.is_empty() {
            m.insert("hint".into(), json!(n.hint));
        }
        if with_label {
            m.insert("label".into(), json!(self.label(idx)));
        }
        m.insert(
            "bounds".into(),
            json!({"left": n.bounds.left, "top": n.bounds.top, "right": n.bounds.right, "bottom": n.bounds.bottom}),
        );
        m.insert("center".into(), json!({"x": cx, "y": cy}));
        m.insert("clickable".into(), json!(n.clickable));
        m.insert("long_clickable".into(), json!(n.long_clickable));
        m.insert("editable".into(), json!(n.editable));
        m.insert("enabled".into(), json!(n.enabled));
        m.insert("focused".into(), json!(n.focused));
        m.insert("scrollable".into(), json!(n.scrollable));
        if n.checkable {
            m.insert("checkable".into(), json!(true));
            m.insert("checked".into(), json!(n.checked));
        }
        if !n.resource_id.is_empty() {
            m.insert("resource_id".into(), json!(n.resource_id));
        }
        Value::Object(m)
    }

    /// The interactive elements, in document order.
    pub(crate) fn interactive(&self) -> Vec<Value> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| Self::is_interactive(n))
            .map(|(i, _)| self.element_json(i, true))
            .collect()
    }

    /// The nested tree (several top-level windows become children of a synthetic root).
    pub(crate) fn tree(&self) -> Value {
        let roots: Vec<usize> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.parent.is_none())
            .map(|(i, _)| i)
            .collect();
        match roots.as_slice() {
            [] => Value::Null,
            [one] => self.subtree(*one),
            many => json!({
                "element_id": "root",
                "class": "hierarchy",
                "children": many.iter().map(|&i| self.subtree(i)).collect::<Vec<_>>(),
            }),
        }
    }

    fn subtree(&self, idx: usize) -> Value {
        let mut value = self.element_json(idx, false);
        let children: Vec<Value> = self.children(idx).map(|c| self.subtree(c)).collect();
        if let Some(map) = value.as_object_mut()
            && !children.is_empty()
        {
            map.insert("children".into(), Value::Array(children));
        }
        value
    }

    /// The focused editable element.
    pub(crate) fn focused_field(&self) -> Option<&Node> {
        self.nodes.iter().find(|n| n.focused && n.editable)
    }

    /// The topmost element whose bounds contain the point and that takes a touch.
    pub(crate) fn hit(&self, x: i32, y: i32, long: bool) -> Option<usize> {
        self.nodes
            .iter()
            .enumerate()
            .rev()
            .find(|(_, n)| {
                x >= n.bounds.left
                    && x < n.bounds.right
                    && y >= n.bounds.top
                    && y < n.bounds.bottom
                    && (n.clickable || n.editable || (long && n.long_clickable))
            })
            .map(|(i, _)| i)
    }

    /// The screen's width and height: the union of the top-level bounds.
    pub(crate) fn extent(&self) -> (i32, i32) {
        self.nodes
            .iter()
            .filter(|n| n.parent.is_none())
            .fold((0, 0), |(w, h), n| {
                (w.max(n.bounds.right), h.max(n.bounds.bottom))
            })
    }
}

/// Resource-id tails some toolkits generate per view instance (`0x7f0a01b2`), useless as ids.
fn looks_generated(tail: &str) -> bool {
    tail.starts_with("0x") && tail[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">\
<node index=\"0\" text=\"\" resource-id=\"\" class=\"android.widget.FrameLayout\" package=\"com.android.messaging\" content-desc=\"\" checkable=\"false\" checked=\"false\" clickable=\"false\" enabled=\"true\" focusable=\"false\" focused=\"false\" scrollable=\"false\" long-clickable=\"false\" password=\"false\" selected=\"false\" bounds=\"[0,0][1080,2400]\">\
<node index=\"0\" text=\"Alice\" resource-id=\"com.android.messaging:id/title\" class=\"android.widget.TextView\" package=\"com.android.messaging\" content-desc=\"\" checkable=\"false\" checked=\"false\" clickable=\"false\" enabled=\"true\" focusable=\"false\" focused=\"false\" scrollable=\"false\" long-clickable=\"false\" password=\"false\" selected=\"false\" bounds=\"[48,120][600,200]\" />\
<node index=\"1\" text=\"\" resource-id=\"com.android.messaging:id/message_input\" class=\"android.widget.EditText\" package=\"com.android.messaging\" content-desc=\"\" checkable=\"false\" checked=\"false\" clickable=\"true\" enabled=\"true\" focusable=\"true\" focused=\"true\" scrollable=\"false\" long-clickable=\"true\" password=\"false\" selected=\"false\" bounds=\"[0,2100][900,2256]\" />\
<node index=\"2\" text=\"Send\" resource-id=\"com.android.messaging:id/send\" class=\"android.widget.Button\" package=\"com.android.messaging\" content-desc=\"\" checkable=\"false\" checked=\"false\" clickable=\"true\" enabled=\"false\" focusable=\"true\" focused=\"false\" scrollable=\"false\" long-clickable=\"false\" password=\"false\" selected=\"false\" bounds=\"[900,2100][1080,2256]\" />\
<node index=\"3\" text=\"Row\" resource-id=\"com.android.messaging:id/row\" class=\"android.view.ViewGroup\" package=\"com.android.messaging\" content-desc=\"\" checkable=\"false\" checked=\"false\" clickable=\"true\" enabled=\"true\" focusable=\"true\" focused=\"false\" scrollable=\"false\" long-clickable=\"false\" password=\"false\" selected=\"false\" bounds=\"[0,300][1080,400]\" />\
<node index=\"4\" text=\"Row\" resource-id=\"com.android.messaging:id/row\" class=\"android.view.ViewGroup\" package=\"com.android.messaging\" content-desc=\"\" checkable=\"true\" checked=\"true\" clickable=\"true\" enabled=\"true\" focusable=\"true\" focused=\"false\" scrollable=\"false\" long-clickable=\"false\" password=\"false\" selected=\"false\" bounds=\"[0,400][1080,500]\" />\
</node></hierarchy>UI hierchary dumped to: /dev/tty";

    #[test]
    fn a_dump_becomes_elements_with_ids() {
        let s = Screen::parse(DUMP).unwrap();
        assert_eq!(s.nodes.len(), 6);
        assert_eq!(s.package(), "com.android.messaging");
        let ids: Vec<&str> = s.nodes.iter().map(|n| n.id.as_str()).collect();
        // Unique resource-id tails survive; the repeated `row` and the id-less root do not.
        assert_eq!(ids, ["e0", "title", "message_input", "send", "e4", "e5"]);
        assert_eq!(
            s.focused_field().map(|n| n.id.as_str()),
            Some("message_input")
        );
        assert!(!s.find("send").unwrap().enabled);
        assert_eq!(s.visible_text(), ["Alice", "Send", "Row", "Row"]);
        let send = s.element_json(3, true);
        assert_eq!(send["center"], json!({"x": 990, "y": 2178}));
        assert_eq!(send["label"], "Send");
        assert_eq!(s.element_json(5, false)["checked"], true);
        assert_eq!(s.interactive().len(), 4);
        assert_eq!(s.tree()["children"].as_array().map(Vec::len), Some(5));
        assert_eq!(s.hit(950, 2200, false), Some(3));
        assert_eq!(s.hit(10, 10, false), None);
        assert_eq!(s.extent(), (1080, 2400));
    }

    #[test]
    fn androids_error_lines_are_errors() {
        let e = Screen::parse("ERROR: null root node returned by UiTestAutomationBridge.\n")
            .unwrap_err();
        assert!(e.contains("null root node"), "{e}");
        assert!(Screen::parse("").is_err());
    }

    #[test]
    fn bounds_parse_strictly() {
        assert_eq!(
            Bounds::parse("[0,96][1080,264]"),
            Some(Bounds {
                left: 0,
                top: 96,
                right: 1080,
                bottom: 264
            })
        );
        assert_eq!(Bounds::parse("[0,96]"), None);
        assert_eq!(Bounds::parse("[a,b][c,d]"), None);
    }
}
