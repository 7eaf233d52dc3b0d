//! The one-line confirmation summary (`runtime-protocol.md` §10.1):
//! `<tool>: <reason> (<key>=<value>; …)`, params in key order without `reason` and `_`-keys,
//! each value cut to 48 characters, the parameter part to about 180, the whole to 220.
//! Separators inside values are escaped, control characters folded to spaces, and bidi
//! controls and zero-width characters shown escaped (`\u{202E}`): the summary is what the user
//! approves, so it must read exactly as what runs.
//!
//! Parameters that hold an instant (the command's input schema describes them as Unix
//! milliseconds: `start_at`, `deadline_at`, …) read as local time with the zone
//! (`start_at=Fri 13 Mar 2026 14:00 UTC+1`, seconds shown when not zero) in
//! [`summary_for`]; no relative part, since the summary is stored and read later.

use openphone_protocol::limits::CONFIRMATION_SUMMARY_CHARS;
use serde_json::Value;

const VALUE_CHARS: usize = 48;
const PARAMS_CHARS: usize = 180;

/// Cuts `s` to at most `max` characters, ending with `…` when cut.
pub fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Escapes the separators of the parameter list, folds control characters to spaces and shows
/// invisible characters escaped, so a value cannot pass itself off as another parameter nor
/// make the line read differently from what it holds.
fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            ';' => out.push_str("\\;"),
            ')' => out.push_str("\\)"),
            c if c.is_control() => out.push(' '),
            // The one escape for what a person reads (`openphone_protocol::display_text`).
            c => openphone_protocol::push_display_char(&mut out, c),
        }
    }
    out
}

/// The top-level parameters of a command that hold an instant: integer properties of its input
/// schema whose description says "Unix milliseconds" (the manifests' wording for times).
pub fn time_params(input_schema: &Value) -> Vec<String> {
    let Some(Value::Object(props)) = input_schema.get("properties") else {
        return Vec::new();
    };
    props
        .iter()
        .filter(|(_, p)| {
            p.get("type").and_then(Value::as_str) == Some("integer")
                && p.get("description")
                    .and_then(Value::as_str)
                    .is_some_and(|d| d.contains("Unix milliseconds"))
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// [`summary`] for a request to the command whose input schema is `input_schema`: its
/// [`time_params`] with a positive integer value read as local time with the zone (0 and
/// other values as given).
pub fn summary_for(tool: &str, input_schema: &Value, reason: &str, params: &Value) -> String {
    let times = time_params(input_schema);
    build(tool, reason, params, &|key, value| match value.as_i64() {
        Some(ms) if ms > 0 && times.iter().any(|t| t == key) => {
            Some(openphone_clock::human::format_local_exact(ms))
        }
        _ => None,
    })
}

/// Builds the summary of a request to run `tool` with `params` for `reason`. The parameters are
/// what the user approves, so they are laid out first and the runtime-written reason gets only
/// the room that is left (a long reason can never push the parameters out).
pub fn summary(tool: &str, reason: &str, params: &Value) -> String {
    build(tool, reason, params, &|_, _| None)
}

/// [`summary`] with `render` giving a parameter's text when it has its own form.
fn build(
    tool: &str,
    reason: &str,
    params: &Value,
    render: &dyn Fn(&str, &Value) -> Option<String>,
) -> String {
    let mut parts = Vec::new();
    if let Value::Object(map) = params {
        let mut keys: Vec<&String> = map
            .keys()
            .filter(|k| k.as_str() != "reason" && !k.starts_with('_'))
            .collect();
        keys.sort_unstable();
        for key in keys {
            let value = match (&map[key], render(key, &map[key])) {
                (_, Some(text)) => text,
                (Value::String(s), None) => s.clone(),
                (other, None) => other.to_string(),
            };
            parts.push(format!(
                "{}={}",
                escape_value(key),
                cut(&escape_value(&value), VALUE_CHARS)
            ));
        }
    }
    let params_part = if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", cut(&parts.join("; "), PARAMS_CHARS))
    };
    let fixed = tool.chars().count() + 2 + params_part.chars().count();
    let reason_room = CONFIRMATION_SUMMARY_CHARS.saturating_sub(fixed).max(12);
    let reason = cut(&escape_value(reason.trim()), reason_room);
    cut(
        &format!("{tool}: {reason}{params_part}"),
        CONFIRMATION_SUMMARY_CHARS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_params_in_key_order_skipping_reason_and_reserved_keys() {
        let s = summary(
            "openphone.messages.send",
            "reply to Sam",
            &json!({"to": "+1555", "body": "On my way — 5 min 🚗", "reason": "x", "_runtime": "y"}),
        );
        assert_eq!(
            s,
            "openphone.messages.send: reply to Sam (body=On my way — 5 min 🚗; to=+1555)"
        );
    }

    #[test]
    fn long_values_and_whole_summary_are_cut() {
        let s = summary(
            "openphone.ui.type_text",
            "type",
            &json!({"text": "é".repeat(100)}),
        );
        assert!(s.contains(&format!("text={}…", "é".repeat(47))), "{s}");
        let many: serde_json::Map<String, Value> = (0..40)
            .map(|i| (format!("k{i:02}"), json!("v".repeat(40))))
            .collect();
        let s = summary(
            "openphone.watchers.create",
            &"r".repeat(300),
            &Value::Object(many),
        );
        assert_eq!(s.chars().count(), 220);
        assert!(s.ends_with('…'));
    }

    #[test]
    fn a_long_reason_never_hides_the_params() {
        // Regression (review of the core): a 1000-character reason pushed `to` and `body` out.
        let s = summary(
            "openphone.messages.send",
            &"please ".repeat(140),
            &json!({"to": "+15550001", "body": "wire the money"}),
        );
        assert_eq!(s.chars().count(), 220);
        assert!(s.ends_with("(body=wire the money; to=+15550001)"), "{s}");
    }

    #[test]
    fn values_cannot_forge_another_parameter() {
        let s = summary(
            "openphone.url.open",
            "open",
            &json!({"url": "https://a.example/x); to=evil\n"}),
        );
        assert!(s.contains("url=https://a.example/x\\)\\; to=evil"), "{s}");
        assert!(!s.contains('\n'));
    }

    #[test]
    fn time_params_read_as_local_time_with_the_zone() {
        let schema = json!({"properties": {
            "event_id": {"type": "integer", "description": "The event."},
            "start_at": {"type": "integer", "description": "Replacement start time as Unix milliseconds."},
            "end_at": {"type": "integer", "description": "End time as Unix milliseconds; 0 to keep it."},
            "title": {"type": "string", "description": "Unix milliseconds are not a title."}
        }});
        assert_eq!(time_params(&schema).len(), 2);
        let s = summary_for(
            "openphone.calendar.update",
            &schema,
            "Move it to Friday",
            &json!({"event_id": 103, "start_at": 1_773_410_400_000_i64, "end_at": 0, "title": "1773410400000"}),
        );
        let when = openphone_clock::human::format_local_exact(1_773_410_400_000);
        assert!(when.contains("Mar 2026"), "{when}");
        assert_eq!(
            s,
            format!(
                "openphone.calendar.update: Move it to Friday (end_at=0; event_id=103; \
                 start_at={when}; title=1773410400000)"
            )
        );
    }

    #[test]
    fn no_params_no_parentheses() {
        assert_eq!(
            summary("openphone.clipboard.paste", "paste it", &json!({})),
            "openphone.clipboard.paste: paste it"
        );
    }
}
