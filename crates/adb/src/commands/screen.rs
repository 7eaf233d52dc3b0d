//! Reading the screen: `uiautomator dump` turned into the simulated phone's shapes, and a
//! screenshot from `screencap`.

use base64::Engine as _;
use openphone_device::DeviceError;
use serde_json::{Map, Value, json};

use super::params::Params;
use crate::phone::AdbPhone;
use crate::screen::Screen;

/// The brief of the foreground screen every state-changing command answers with.
pub(crate) fn brief(screen: &Screen) -> Value {
    json!({ "package": screen.package(), "activity": Value::Null, "title": Value::Null, "screen": Value::Null })
}

impl AdbPhone {
    /// `openphone.screen.get`.
    pub(crate) async fn screen_get(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let include_screenshot = p.bool_opt("include_screenshot")?.unwrap_or(false);
        let include_activity = p.bool_opt("include_activity")?.unwrap_or(true);
        // `format: "compact"` is computed from the full tree, as for every backend.
        let form = openphone_device::ScreenForm::parse(p.str_opt("format")?)?;
        let include_tree = form == openphone_device::ScreenForm::Compact
            || p.bool_opt("include_ui_tree")?.unwrap_or(true);
        let screen = self.dump().await?;
        let (width, height) = match self.info().await {
            Ok(info) if info.width > 0 => (i64::from(info.width), i64::from(info.height)),
            _ => {
                let (w, h) = screen.extent();
                (i64::from(w), i64::from(h))
            }
        };
        let mut out = Map::new();
        if include_activity && let Value::Object(b) = brief(&screen) {
            out.extend(b);
        }
        out.insert("width".into(), json!(width));
        out.insert("height".into(), json!(height));
        out.insert("captured_at".into(), json!(self.clock.now_ms()));
        out.insert(
            "focused_element".into(),
            json!(screen.focused_field().map(|n| n.id.clone())),
        );
        out.insert("visible_text".into(), json!(screen.visible_text()));
        out.insert(
            "interactive_elements".into(),
            Value::Array(screen.interactive()),
        );
        if include_tree {
            out.insert("ui_tree".into(), screen.tree());
        }
        if include_screenshot {
            out.insert("screenshot".into(), self.screenshot().await?);
        }
        self.memory().last_read = Some(screen);
        let full = Value::Object(out);
        Ok(match form {
            openphone_device::ScreenForm::Full => full,
            openphone_device::ScreenForm::Compact => openphone_device::compact_screen(&full),
        })
    }

    /// A PNG of the screen (`screencap -p` over `exec:`, binary-safe), downscaled so its
    /// longest side is the simulator's (`png_scale::MAX_SIDE`), base64; `scale` is image pixels
    /// per screen pixel, so a point on the image is `(x / scale, y / scale)` on the screen.
    pub(crate) async fn screenshot(&self) -> Result<Value, DeviceError> {
        let png = self.exec("screencap -p").await?;
        if !png.starts_with(b"\x89PNG\r\n\x1a\n") {
            let text = String::from_utf8_lossy(&png[..png.len().min(200)]).into_owned();
            return Err(DeviceError::Internal {
                message: format!("screencap gave no PNG: {}", text.trim()),
            });
        }
        let shot = crate::png_scale::downscale(&png, crate::png_scale::MAX_SIDE)
            .map_err(|message| DeviceError::Internal { message })?;
        Ok(json!({
            "mime_type": "image/png",
            "width": shot.width,
            "height": shot.height,
            "scale": shot.scale,
            "screen_width": shot.screen_width,
            "screen_height": shot.screen_height,
            "byte_length": shot.png.len(),
            "data_base64": base64::engine::general_purpose::STANDARD.encode(&shot.png),
        }))
    }
}

fn role_of(n: &crate::screen::Node) -> &'static str {
    if n.editable {
        "text_field"
    } else if n.checkable {
        "switch"
    } else if n.class.ends_with("Button") || n.class.ends_with("ImageButton") {
        "button"
    } else if n.clickable {
        "item"
    } else {
        "other"
    }
}

impl AdbPhone {
    /// `openphone.screen.understand_local`: a summary of the UI tree, computed here.
    pub(crate) async fn screen_understand(&self, p: Params<'_>) -> Result<Value, DeviceError> {
        let max_text = p.limit("max_visible_text", 40, 200)?;
        let max_elements = p.limit("max_interactive_elements", 30, 100)?;
        let timeout = match p.i64_opt("timeout_ms")? {
            None => 2_000,
            Some(t) if t < 0 => {
                return Err(DeviceError::invalid("timeout_ms", "must not be negative"));
            }
            Some(t) => t.min(5_000),
        };
        let screen = self.dump().await?;
        let texts = screen.visible_text();
        let elements: Vec<Value> = screen
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.clickable || n.editable || n.long_clickable)
            .map(|(i, n)| {
                let (cx, cy) = n.bounds.center();
                let mut e = json!({ "element_id": n.id, "label": screen.label(i), "role": role_of(n), "enabled": n.enabled, "center": {"x": cx, "y": cy} });
                if let Some(map) = e.as_object_mut() {
                    if n.editable {
                        map.insert("value".into(), json!(n.text));
                        map.insert("focused".into(), json!(n.focused));
                    }
                    if n.checkable {
                        map.insert("checked".into(), json!(n.checked));
                    }
                }
                e
            })
            .collect();
        let package = screen.package().to_owned();
        let mut summary = format!(
            "{package}. {} text items, {} interactive elements.",
            texts.len(),
            elements.len()
        );
        if let Some(f) = screen.focused_field() {
            summary.push_str(&format!(" Focused field: {}.", f.id));
        }
        let disabled: Vec<&str> = screen
            .nodes
            .iter()
            .filter(|n| (n.clickable || n.editable) && !n.enabled)
            .map(|n| n.id.as_str())
            .collect();
        if !disabled.is_empty() {
            summary.push_str(&format!(" Disabled: {}.", disabled.join(", ")));
        }
        let out = json!({
            "summary": summary,
            "app": package,
            "package": package,
            "activity": Value::Null,
            "title": Value::Null,
            "screen": Value::Null,
            "visible_text": texts.iter().take(max_text).collect::<Vec<_>>(),
            "interactive_elements": elements.iter().take(max_elements).collect::<Vec<_>>(),
            "truncated": { "visible_text": texts.len() > max_text, "interactive_elements": elements.len() > max_elements },
            "limits": { "max_visible_text": max_text, "max_interactive_elements": max_elements, "timeout_ms": timeout },
            "engine": "uiautomator-dump",
        });
        self.memory().last_read = Some(screen);
        Ok(out)
    }
}
