//! Reading the screen: the element tree, an optional screenshot, and a local summary.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::DeviceError;
use crate::params::Params;
use crate::screen_form::{ScreenForm, compact_screen};
use crate::sim::render;
use crate::sim::screens;
use crate::sim::state::SimState;
use crate::sim::view::Node;

use super::records::app_label;
use super::stamp::Kept;
use super::{Exec, Outcome, screen_brief};

/// The `screen.get` params that shape its answer (the `reason` does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ScreenArgs {
    screenshot: bool,
    activity: bool,
    tree: bool,
    form: ScreenForm,
}

impl ScreenArgs {
    fn parse(p: Params<'_>) -> Result<ScreenArgs, DeviceError> {
        let screenshot = p.bool_opt("include_screenshot")?.unwrap_or(false);
        let activity = p.bool_opt("include_activity")?.unwrap_or(true);
        let form = ScreenForm::parse(p.str_opt("format")?)?;
        // The compact form is computed from the full tree.
        let tree = form == ScreenForm::Compact || p.bool_opt("include_ui_tree")?.unwrap_or(true);
        Ok(ScreenArgs {
            screenshot,
            activity,
            tree,
            form,
        })
    }
}

pub(crate) fn screen_get(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let args = ScreenArgs::parse(p)?;
    build_answer(x.st, x.now, args).map(Outcome::read)
}

/// Most `screen.get` answers kept (one per combination of params in use).
const SCREEN_CACHE_ENTRIES: usize = 4;

/// The last `screen.get` answers, each for one [`ScreenArgs`], all built from the state of
/// one generation (the journal's count of changes: every change bumps it under the state
/// lock) in one time bucket ([`screens::time_bucket`]: the screen shows nothing finer). A
/// hit hands out the kept answer (shared: the caller stamps it with its own time after letting
/// go of the locks, see [`Kept`]); a miss builds it fresh and starts a new cache when the
/// generation or the bucket moved.
#[derive(Debug, Default)]
pub(crate) struct ScreenCache {
    generation: u64,
    bucket: (i64, i64),
    answers: Vec<(ScreenArgs, Arc<Kept>)>,
}

impl ScreenCache {
    /// `screen.get` on `st` (generation `generation`) at `now`: from the cache when it holds
    /// this answer, else built and kept. [`Kept::stamped`] with `now` makes it equal to
    /// [`screen_get`]'s answer.
    pub(crate) fn screen_get(
        &mut self,
        st: &SimState,
        now: i64,
        generation: u64,
        p: Params<'_>,
    ) -> Result<Arc<Kept>, DeviceError> {
        let args = ScreenArgs::parse(p)?;
        let bucket = screens::time_bucket(st, now);
        if self.generation != generation || self.bucket != bucket {
            self.generation = generation;
            self.bucket = bucket;
            self.answers.clear();
        }
        if let Some((_, answer)) = self.answers.iter().find(|(a, _)| *a == args) {
            return Ok(Arc::clone(answer));
        }
        let answer = Arc::new(Kept::new(build_answer(st, now, args)?, CAPTURED_AT));
        if self.answers.len() >= SCREEN_CACHE_ENTRIES {
            self.answers.remove(0);
        }
        self.answers.push((args, Arc::clone(&answer)));
        Ok(answer)
    }
}

/// Where a `screen.get` answer holds its time (the compact form has none).
const CAPTURED_AT: &[&str] = &["captured_at"];

/// The answer of `screen.get` with `args` on `st` at `now`, built fresh.
fn build_answer(st: &SimState, now: i64, args: ScreenArgs) -> Result<Value, DeviceError> {
    let view = screens::build(st, now);
    let brief = screen_brief(st, now);
    let mut out = Map::new();
    if args.activity {
        for key in ["package", "activity", "title", "screen"] {
            out.insert(key.into(), brief.get(key).cloned().unwrap_or(Value::Null));
        }
    }
    out.insert("width".into(), json!(view.width));
    out.insert("height".into(), json!(view.height));
    out.insert("captured_at".into(), json!(now));
    out.insert(
        "focused_element".into(),
        json!(view.focused_field().map(|n| n.id.clone())),
    );
    out.insert("visible_text".into(), json!(view.visible_text()));
    out.insert(
        "interactive_elements".into(),
        Value::Array(view.interactive()),
    );
    if args.tree {
        out.insert("ui_tree".into(), view.tree());
    }
    if args.screenshot {
        out.insert(
            "screenshot".into(),
            render::screenshot(&view, st.settings.dark_theme)?,
        );
    }
    let full = Value::Object(out);
    Ok(match args.form {
        ScreenForm::Full => full,
        ScreenForm::Compact => compact_screen(&full),
    })
}

pub(crate) fn screen_understand(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let max_text = p.limit("max_visible_text", 40, 200)?;
    let max_elements = p.limit("max_interactive_elements", 30, 100)?;
    let timeout = match p.i64_opt("timeout_ms")? {
        None => 2_000,
        Some(t) if t < 0 => return Err(DeviceError::invalid("timeout_ms", "must not be negative")),
        Some(t) => t.min(5_000),
    };
    let view = screens::build(x.st, x.now);
    let brief = screen_brief(x.st, x.now);
    let texts = view.visible_text();
    let elements: Vec<Value> = view
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.clickable || n.editable || n.long_clickable)
        .map(|(i, n)| {
            let (cx, cy) = n.bounds.center();
            let mut e = json!({ "element_id": n.id, "label": view.label(i), "role": role_of(n), "enabled": n.enabled, "center": {"x": cx, "y": cy} });
            if let Some(map) = e.as_object_mut() {
                if n.editable {
                    map.insert("value".into(), json!(n.text.clone().unwrap_or_default()));
                    map.insert("focused".into(), json!(n.focused));
                }
                if let Some(c) = n.checked {
                    map.insert("checked".into(), json!(c));
                }
            }
            e
        })
        .collect();
    let app = if view.package == screens::LAUNCHER {
        "Home screen".to_string()
    } else {
        app_label(x.st, &view.package)
    };
    let disabled: Vec<String> = view
        .nodes
        .iter()
        .filter(|n| (n.clickable || n.editable) && !n.enabled)
        .map(|n| n.id.clone())
        .collect();
    let mut summary = format!(
        "{app} — {} ({}). {} text items, {} interactive elements.",
        view.title,
        brief["screen"].as_str().unwrap_or(""),
        texts.len(),
        elements.len()
    );
    if let Some(f) = view.focused_field() {
        summary.push_str(&format!(" Focused field: {}.", f.id));
    }
    if !disabled.is_empty() {
        summary.push_str(&format!(" Disabled: {}.", disabled.join(", ")));
    }
    if let Some(notice) = view.find("notice").and_then(|n| n.text.clone()) {
        summary.push_str(&format!(" Notice: {notice}."));
    }
    Ok(Outcome::read(json!({
        "summary": summary,
        "app": app,
        "package": view.package,
        "activity": view.activity,
        "title": view.title,
        "screen": brief["screen"],
        "visible_text": texts.iter().take(max_text).collect::<Vec<_>>(),
        "interactive_elements": elements.iter().take(max_elements).collect::<Vec<_>>(),
        "truncated": { "visible_text": texts.len() > max_text, "interactive_elements": elements.len() > max_elements },
        "limits": { "max_visible_text": max_text, "max_interactive_elements": max_elements, "timeout_ms": timeout },
        "engine": "simulated-accessibility-tree",
    })))
}

fn role_of(n: &Node) -> &'static str {
    if n.editable {
        "text_field"
    } else if n.checked.is_some() {
        "switch"
    } else if n.class.ends_with("Button") || n.class.ends_with("ImageButton") {
        "button"
    } else if n.clickable {
        "item"
    } else {
        "other"
    }
}
