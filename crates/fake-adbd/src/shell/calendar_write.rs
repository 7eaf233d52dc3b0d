//! `content insert|update|delete --uri content://com.android.calendar/events …`: calendar
//! writes through the calendar provider, replayed as `calendar.add|update|delete`. Like
//! Android's `content` tool they print nothing on success; the provider's own checks (a
//! calendar id, a start, a time zone, an end or a duration) answer its own messages.

use serde_json::{Map, Value, json};

use super::Shell;

fn error(uri: &str, exception: &str) -> String {
    let authority = uri
        .strip_prefix("content://")
        .unwrap_or(uri)
        .split('/')
        .next()
        .unwrap_or("");
    format!("Error while accessing provider:{authority}\n{exception}\n")
}

fn illegal(uri: &str, message: &str) -> String {
    error(
        uri,
        &format!("java.lang.IllegalArgumentException: {message}"),
    )
}

/// Minutes in an RFC 2445 duration as the calendar stores it (`P3600S`, `PT90M`, `PT1H`,
/// `P1D`, `P1W`).
fn duration_minutes(text: &str) -> Option<i64> {
    let rest = text.strip_prefix('P')?;
    let rest = rest.strip_prefix('T').unwrap_or(rest);
    let (number, unit) = rest.split_at(rest.len().checked_sub(1)?);
    let n: i64 = number.parse().ok()?;
    match unit {
        "S" => Some(n / 60),
        "M" => Some(n),
        "H" => Some(n * 60),
        "D" => Some(n * 24 * 60),
        "W" => Some(n * 7 * 24 * 60),
        _ => None,
    }
}

/// The manifest params a set of bindings stands for.
fn params(uri: &str, binds: &[(String, Value)]) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (name, value) in binds {
        let key = match name.as_str() {
            "title" => "title",
            "description" => "description",
            "eventLocation" => "location",
            "dtstart" => "start_at",
            "dtend" => "end_at",
            "calendar_id" => "calendar_id",
            "allDay" => {
                let on = value
                    .as_i64()
                    .map_or_else(|| value.as_bool().unwrap_or(false), |n| n != 0);
                out.insert("all_day".into(), json!(on));
                continue;
            }
            "duration" => {
                let text = value.as_str().unwrap_or("");
                let minutes = duration_minutes(text).ok_or_else(|| {
                    illegal(
                        uri,
                        &format!("Bad duration {text:?}: use an RFC 2445 duration such as P3600S"),
                    )
                })?;
                out.insert("duration_minutes".into(), json!(minutes));
                continue;
            }
            // Stored by Android, not modelled by the simulated calendar.
            "eventTimezone" | "eventEndTimezone" | "hasAlarm" | "accessLevel" | "availability" => {
                continue;
            }
            other => {
                return Err(illegal(
                    uri,
                    &format!("openphone-fake-adbd: the simulated calendar has no column {other}"),
                ));
            }
        };
        out.insert(key.into(), value.clone());
    }
    Ok(out)
}

/// The event id a write names: `events/N` in the URI or `_id=N` in `--where`.
fn event_id(uri: &str, wheres: &[(String, String)]) -> Option<i64> {
    let tail = uri.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    tail.parse().ok().or_else(|| {
        wheres
            .iter()
            .find(|(c, _)| c == "_id")
            .and_then(|(_, v)| v.parse().ok())
    })
}

/// Runs a write.
pub async fn write(
    shell: &Shell,
    verb: &str,
    uri: &str,
    wheres: &[(String, String)],
    binds: &[(String, Value)],
) -> String {
    let path = uri.strip_prefix("content://").unwrap_or(uri);
    if !path.starts_with("com.android.calendar/events") {
        return error(
            uri,
            &format!(
                "java.lang.UnsupportedOperationException: openphone-fake-adbd writes only content://com.android.calendar/events, not {uri}"
            ),
        );
    }
    let mut params = match params(uri, binds) {
        Ok(params) => params,
        Err(e) => return e,
    };
    let has = |name: &str| binds.iter().any(|(n, v)| n == name && !v.is_null());
    let (tool, check) = match verb {
        "insert" => {
            let problem = if !has("calendar_id") {
                Some("New events must specify a calendar id")
            } else if !has("dtstart") {
                Some("DTSTART cannot be empty.")
            } else if !has("eventTimezone") {
                Some("EVENT_TIMEZONE cannot be empty.")
            } else if !has("dtend") && !has("duration") {
                Some("DTEND and DURATION cannot both be null for an event.")
            } else {
                None
            };
            ("openphone.calendar.add", problem)
        }
        "update" | "delete" => {
            let Some(id) = event_id(uri, wheres) else {
                return illegal(
                    uri,
                    "openphone-fake-adbd needs the event: use --where \"_id=N\" or the URI .../events/N",
                );
            };
            if verb == "delete" {
                params.clear();
            }
            params.insert("event_id".into(), json!(id));
            let tool = if verb == "update" {
                "openphone.calendar.update"
            } else {
                "openphone.calendar.delete"
            };
            (tool, None)
        }
        other => return format!("Error: Unsupported operation: {other}\n"),
    };
    if let Some(message) = check {
        return illegal(uri, message);
    }
    match shell.phone().call(tool, Value::Object(params)).await {
        Ok(_) => String::new(),
        // Android updates or deletes zero rows without a word when no row matches.
        Err(e) if e.code == "not_found" && verb != "insert" => String::new(),
        Err(e) => illegal(uri, &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_ids_read_like_the_provider() {
        assert_eq!(duration_minutes("P3600S"), Some(60));
        assert_eq!(duration_minutes("PT90M"), Some(90));
        assert_eq!(duration_minutes("P1D"), Some(1440));
        assert_eq!(duration_minutes("1H"), None);
        assert_eq!(
            event_id("content://com.android.calendar/events/12", &[]),
            Some(12)
        );
        assert_eq!(
            event_id(
                "content://com.android.calendar/events",
                &[("_id".into(), "7".into())]
            ),
            Some(7)
        );
    }
}
