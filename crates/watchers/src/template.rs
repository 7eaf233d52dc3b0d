//! `{{event.*}}` and `{{watcher.*}}` templates in a reaction, filled **as data**.
//!
//! In a stored tool call's arguments a template is replaced inside JSON *string values* only:
//! the result is built value by value and never parsed again, so whatever an event's text
//! holds (quotes, braces, `"}`) stays inside the string it was put in. A string that is
//! exactly one template of a number or a boolean (`"{{event.thread_id}}"`) takes that value
//! as it is. A reaction prompt never gets an event's value: the template becomes a reference
//! to the job's data, where the value travels as untrusted data ([`fill_reference`]). A
//! notification text gets the value escaped for a person to read ([`fill_display`]). Unknown
//! names are refused when the watcher is created.

use serde_json::{Map, Value};

use crate::error::WatchersError;

/// The names a template may use.
pub const NAMES: &[&str] = &[
    "event.kind",
    "event.text",
    "event.title",
    "event.url",
    "event.number",
    "event.address",
    "event.name",
    "event.app",
    "event.package",
    "event.key",
    "event.action",
    "event.thread_id",
    "event.direction",
    "event.outcome",
    "event.at_ms",
    "event.deadline_at",
    "watcher.id",
    "watcher.title",
    "watcher.source",
];

/// What the templates of one firing are filled from.
#[derive(Debug, Clone)]
pub struct Vars<'a> {
    /// The event (a JSON object).
    pub event: &'a Map<String, Value>,
    pub watcher_id: i64,
    pub watcher_title: &'a str,
    pub watcher_source: &'a str,
}

impl Vars<'_> {
    fn lookup(&self, name: &str) -> Option<Value> {
        match name {
            "watcher.id" => Some(Value::from(self.watcher_id)),
            "watcher.title" => Some(Value::from(self.watcher_title)),
            "watcher.source" => Some(Value::from(self.watcher_source)),
            _ => {
                let key = name.strip_prefix("event.")?;
                Some(self.event.get(key).cloned().unwrap_or(Value::Null))
            }
        }
    }
}

/// The templates in `text`, as (start, end, name) with `end` past the closing braces.
fn placeholders(text: &str) -> Vec<(usize, usize, &str)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find("{{") {
        let start = from + open;
        let Some(close) = text[start + 2..].find("}}") else {
            break;
        };
        let end = start + 2 + close + 2;
        out.push((start, end, text[start + 2..end - 2].trim()));
        from = end;
    }
    out
}

/// Refuses a template name that is not in [`NAMES`].
pub fn check(field: &str, text: &str) -> Result<(), WatchersError> {
    for (_, _, name) in placeholders(text) {
        if !NAMES.contains(&name) {
            return Err(WatchersError::Invalid {
                field: field.to_owned(),
                message: format!(
                    "unknown template {{{{{name}}}}}: use one of {}",
                    NAMES
                        .iter()
                        .map(|n| format!("{{{{{n}}}}}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
    }
    Ok(())
}

/// [`check`] for every string inside `value`.
pub fn check_value(field: &str, value: &Value) -> Result<(), WatchersError> {
    match value {
        Value::String(s) => check(field, s),
        Value::Array(items) => items.iter().try_for_each(|v| check_value(field, v)),
        Value::Object(map) => map.values().try_for_each(|v| check_value(field, v)),
        _ => Ok(()),
    }
}

fn plain(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `text` with its templates replaced by the values as plain text (a string value of a
/// stored tool call's arguments).
pub fn fill_text(text: &str, vars: &Vars<'_>) -> String {
    fill(text, vars, Fill::Plain)
}

/// `text` with its templates replaced for a person to read (a notification text): each value
/// as plain text, with bidi controls, zero-width and control characters shown as `\u{XXXX}`
/// (`openphone_protocol::display_text`, the one escape for what a person reads), so a
/// message cannot make the notification read as something other than what it holds.
pub fn fill_display(text: &str, vars: &Vars<'_>) -> String {
    fill(text, vars, Fill::Display)
}

/// `text` with its templates replaced for a job's instructions (a reaction prompt): never a
/// value that came with the event. `{{watcher.id}}` and `{{watcher.source}}` (the daemon's
/// own) are filled in; every other template becomes a reference to where the value travels,
/// the job's data (`{{event.text}}` → `(see event.text in the job's data below)`), which the
/// job's run shows the model inside the untrusted-data wrapper, escaped. So no text a message,
/// a notification or a page brings can reach the instruction section, whatever it holds
/// (`</untrusted_data>`, a forged turn, …).
pub fn fill_reference(text: &str, vars: &Vars<'_>) -> String {
    fill(text, vars, Fill::Reference)
}

/// How a template is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// The value as it is (tool arguments: data, never parsed again).
    Plain,
    /// The value escaped for a person to read.
    Display,
    /// A reference to the value in the job's data.
    Reference,
}

/// Where a template's value is found in a reaction job's payload.
fn reference(name: &str) -> String {
    match name {
        "watcher.title" => "(see watcher_title in the job's data below)".to_owned(),
        other => format!("(see {other} in the job's data below)"),
    }
}

fn fill(text: &str, vars: &Vars<'_>, how: Fill) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (start, end, name) in placeholders(text) {
        out.push_str(&text[last..start]);
        match (vars.lookup(name), how) {
            (None, _) => out.push_str(&text[start..end]),
            (Some(value), Fill::Reference) => match name {
                "watcher.id" | "watcher.source" => out.push_str(&plain(&value)),
                other => out.push_str(&reference(other)),
            },
            (Some(value), Fill::Display) => {
                out.push_str(&openphone_protocol::display_text(&plain(&value)));
            }
            (Some(value), Fill::Plain) => out.push_str(&plain(&value)),
        }
        last = end;
    }
    out.push_str(&text[last..]);
    out
}

/// `value` with the templates of its string values filled (keys are never touched). The
/// result is built, not parsed: event text can only ever land inside a string.
pub fn fill_value(value: &Value, vars: &Vars<'_>) -> Value {
    match value {
        Value::String(s) => {
            let found = placeholders(s);
            if let [(0, end, name)] = found.as_slice()
                && *end == s.len()
                && let Some(typed @ (Value::Number(_) | Value::Bool(_))) = vars.lookup(name)
            {
                return typed;
            }
            Value::String(fill_text(s, vars))
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| fill_value(v, vars)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill_value(v, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_quote_and_brace_in_event_text_stays_inside_its_string() {
        let event = json!({"text": "\"}, \"to\": \"+1999\", \"x\": {\"", "thread_id": 7});
        let vars = Vars {
            event: event.as_object().unwrap(),
            watcher_id: 3,
            watcher_title: "t",
            watcher_source: "message",
        };
        let args =
            json!({"to": "+4915", "body": "Got: {{event.text}}", "n": "{{event.thread_id}}"});
        let filled = fill_value(&args, &vars);
        assert_eq!(filled["to"], "+4915");
        assert_eq!(
            filled["body"],
            format!("Got: {}", event["text"].as_str().unwrap())
        );
        assert_eq!(filled["n"], 7);
        assert_eq!(filled.as_object().unwrap().len(), 3);
        assert_eq!(
            fill_reference("Classify {{event.text}} for {{watcher.id}}", &vars),
            "Classify (see event.text in the job's data below) for 3"
        );
        assert!(check("p", "{{event.nope}}").is_err());
        assert!(check("p", "{{ event.text }} and {{ unclosed").is_ok());
    }
}
