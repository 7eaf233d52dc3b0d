//! The gateway view: what the gateway accepted last, written by the adapter to
//! [`GATEWAY_VIEW_FILE`](crate::GATEWAY_VIEW_FILE) in the data directory and read by
//! `openphone openclaw doctor` (with or without a running daemon). One type for the writer and
//! the reader; the fields are in key order, so the file's bytes are those of the JSON object.

use serde::{Deserialize, Serialize};

/// The contents of `openclaw-state.json` (pretty-printed, one trailing newline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayView {
    /// The tools the gateway accepted in its last `node.pluginTools.update` reply.
    pub accepted_tools: Vec<String>,
    /// This node's device id.
    pub device_id: String,
    /// The commands the phone offered that the gateway left out.
    pub dropped_commands: Vec<String>,
    /// When the view was written (Unix ms, the bridge's clock).
    pub updated_at_ms: i64,
    /// The gateway URL.
    pub url: String,
}

impl GatewayView {
    /// The file's text: the view pretty-printed, with a trailing newline.
    pub fn to_file_text(&self) -> serde_json::Result<String> {
        Ok(format!("{}\n", serde_json::to_string_pretty(self)?))
    }

    /// Reads the file's text; `None` when it is not a gateway view.
    pub fn from_file_text(text: &str) -> Option<GatewayView> {
        serde_json::from_str(text).ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::GatewayView;
    use serde_json::json;

    /// The typed view writes exactly the bytes the `json!` object it replaced wrote.
    #[test]
    fn the_file_text_is_the_json_objects() {
        let view = GatewayView {
            accepted_tools: vec!["a.b".to_owned(), "c".to_owned()],
            device_id: "dev".to_owned(),
            dropped_commands: Vec::new(),
            updated_at_ms: 7,
            url: "wss://gw".to_owned(),
        };
        let old = json!({
            "device_id": "dev",
            "url": "wss://gw",
            "accepted_tools": ["a.b", "c"],
            "dropped_commands": Vec::<&str>::new(),
            "updated_at_ms": 7,
        });
        let text = view.to_file_text().unwrap();
        assert_eq!(text, format!("{old:#}\n"));
        assert_eq!(GatewayView::from_file_text(&text), Some(view));
    }
}
