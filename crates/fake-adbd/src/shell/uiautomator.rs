//! `uiautomator dump /dev/tty`: the simulated screen's tree as the XML Android's uiautomator
//! writes (one `<node>` per view, attributes in uiautomator's order, bounds as
//! `[left,top][right,bottom]`), followed by uiautomator's own closing line, typo included.
//!
//! A node's `resource-id` is `<package>:id/<element id of the simulator>`, so a backend that
//! takes the tail of a unique resource-id gets the simulator's element ids back.

use serde_json::Value;

/// What uiautomator prints after the XML (Android's spelling).
pub const DUMPED_TO_TTY: &str = "UI hierchary dumped to: /dev/tty\n";

/// The XML for a `screen.get` result (its `package` and `ui_tree`).
pub fn dump(screen: &Value) -> String {
    let package = screen["package"].as_str().unwrap_or("android");
    let mut out = String::from(
        "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">",
    );
    let tree = &screen["ui_tree"];
    if !tree.is_null() {
        node(
            &mut out,
            &dialog_window(tree).unwrap_or_else(|| tree.clone()),
            0,
            package,
        );
    }
    out.push_str("</hierarchy>");
    out
}

/// While an OS dialog is up, uiautomator dumps the active window: the dialog alone (its scrim
/// and panel, the simulator's `dialog_*` nodes), in a full-screen root of the dialog's package.
fn dialog_window(tree: &Value) -> Option<Value> {
    let children = tree["children"].as_array()?;
    let dialog: Vec<Value> = children
        .iter()
        .filter(|c| {
            c["element_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("dialog_"))
        })
        .cloned()
        .collect();
    if !dialog.iter().any(|c| c["element_id"] == "dialog_panel") {
        return None;
    }
    Some(serde_json::json!({
        "element_id": "",
        "class": "android.widget.FrameLayout",
        "enabled": true,
        "bounds": tree["bounds"].clone(),
        "children": dialog,
    }))
}

fn flag(node: &Value, key: &str) -> bool {
    node[key].as_bool().unwrap_or(false)
}

fn node(out: &mut String, n: &Value, index: usize, package: &str) {
    let text = n["text"].as_str().unwrap_or("");
    let id = n["element_id"].as_str().unwrap_or("");
    let resource_id = if id.is_empty() {
        String::new()
    } else {
        format!("{package}:id/{id}")
    };
    let b = &n["bounds"];
    let bound = |k: &str| b[k].as_i64().unwrap_or(0);
    let bounds = format!(
        "[{},{}][{},{}]",
        bound("left"),
        bound("top"),
        bound("right"),
        bound("bottom")
    );
    let clickable = flag(n, "clickable");
    let editable = flag(n, "editable");
    let attrs: [(&str, String); 17] = [
        ("index", index.to_string()),
        ("text", text.to_owned()),
        ("resource-id", resource_id),
        (
            "class",
            n["class"]
                .as_str()
                .unwrap_or("android.view.View")
                .to_owned(),
        ),
        ("package", package.to_owned()),
        (
            "content-desc",
            n["content_description"].as_str().unwrap_or("").to_owned(),
        ),
        ("checkable", flag(n, "checkable").to_string()),
        ("checked", flag(n, "checked").to_string()),
        ("clickable", clickable.to_string()),
        ("enabled", flag(n, "enabled").to_string()),
        ("focusable", (clickable || editable).to_string()),
        ("focused", flag(n, "focused").to_string()),
        ("scrollable", flag(n, "scrollable").to_string()),
        ("long-clickable", flag(n, "long_clickable").to_string()),
        ("password", "false".to_owned()),
        ("selected", "false".to_owned()),
        ("bounds", bounds),
    ];
    out.push_str("<node");
    for (key, value) in &attrs {
        out.push(' ');
        out.push_str(key);
        out.push_str("=\"");
        escape_into(out, value);
        out.push('"');
    }
    match n["children"].as_array() {
        Some(children) if !children.is_empty() => {
            out.push('>');
            for (i, child) in children.iter().enumerate() {
                node(out, child, i, package);
            }
            out.push_str("</node>");
        }
        _ => out.push_str(" />"),
    }
}

/// Escapes an attribute value the way Android's XmlSerializer does (`&amp;`, `&lt;`, `&gt;`,
/// `&quot;`, `&apos;`; newlines and tabs as character references). Characters XML 1.0 cannot
/// carry at all become U+FFFD, so the document always parses.
fn escape_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tree_becomes_nested_nodes_with_resource_ids() {
        let screen = json!({
            "package": "com.android.messaging",
            "ui_tree": {
                "element_id": "root", "class": "android.widget.FrameLayout", "enabled": true,
                "bounds": {"left": 0, "top": 0, "right": 1080, "bottom": 2400},
                "children": [{
                    "element_id": "send", "class": "android.widget.Button", "text": "Send <now> & \"go\"",
                    "clickable": true, "enabled": true,
                    "bounds": {"left": 10, "top": 20, "right": 110, "bottom": 120}
                }]
            }
        });
        let xml = dump(&screen);
        assert!(xml.starts_with("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\"><node index=\"0\" text=\"\" resource-id=\"com.android.messaging:id/root\""));
        assert!(xml.contains("<node index=\"0\" text=\"Send &lt;now&gt; &amp; &quot;go&quot;\" resource-id=\"com.android.messaging:id/send\" class=\"android.widget.Button\" package=\"com.android.messaging\" content-desc=\"\" checkable=\"false\" checked=\"false\" clickable=\"true\" enabled=\"true\" focusable=\"true\""));
        assert!(xml.contains("bounds=\"[10,20][110,120]\" /></node></hierarchy>"));
    }

    #[test]
    fn control_characters_never_break_the_document() {
        let mut out = String::new();
        escape_into(&mut out, "a\u{1}b\nc");
        assert_eq!(out, "a\u{fffd}b&#10;c");
    }
}
