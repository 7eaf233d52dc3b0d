//! Searching, adding, updating and deleting calendar events.

use serde_json::{Value, json};

use crate::params::Params;
use crate::sim::model::contains_ci;
use crate::sim::state::Event;
use crate::sim::time;
use crate::{DeviceError, EntityKind};

use super::records::event_json;
use super::{Exec, Outcome};

pub(crate) fn calendar_search(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let query = p.ident_opt("query")?;
    let start = p.time_bound("start_at")?;
    let end = p.time_bound("end_at")?;
    let limit = p.limit("limit", 50, 500)?;
    if let (Some(s), Some(e)) = (start, end)
        && e < s
    {
        return Err(DeviceError::invalid(
            "end_at",
            "must not be before start_at",
        ));
    }
    let st = &*x.st;
    let mut matches: Vec<_> = st
        .events
        .iter()
        .filter(|e| {
            start.is_none_or(|s| e.end_ms > s)
                && end.is_none_or(|en| e.start_ms < en || (e.start_ms == en && e.end_ms == en))
        })
        .filter(|e| {
            query.is_none_or(|q| {
                contains_ci(&e.title, q)
                    || contains_ci(&e.description, q)
                    || contains_ci(&e.location, q)
                    || e.attendees.iter().any(|a| contains_ci(a, q))
            })
        })
        .collect();
    matches.sort_by_key(|e| (e.start_ms, e.id));
    let list: Vec<Value> = matches
        .iter()
        .take(limit)
        .map(|e| event_json(st, e))
        .collect();
    Ok(Outcome::read(
        json!({ "count": list.len(), "total": matches.len(), "events": list }),
    ))
}

const MAX_DURATION_MIN: i64 = 60 * 24 * 366;

fn event_end(
    start: i64,
    end_at: Option<i64>,
    duration: Option<i64>,
    fallback_min: i64,
) -> Result<i64, DeviceError> {
    if let Some(end) = end_at {
        if end <= start {
            return Err(DeviceError::invalid("end_at", "must be after start_at"));
        }
        return Ok(end);
    }
    let minutes = match duration {
        None => fallback_min,
        Some(d) if d <= 0 || d > MAX_DURATION_MIN => {
            return Err(DeviceError::invalid(
                "duration_minutes",
                format!("must be between 1 and {MAX_DURATION_MIN}"),
            ));
        }
        Some(d) => d,
    };
    Ok(start + minutes * 60_000)
}

fn positive_time(p: &Params<'_>, field: &str) -> Result<Option<i64>, DeviceError> {
    match p.i64_opt(field)? {
        None => Ok(None),
        Some(t) if !(1..=crate::params::MAX_TIME_MS).contains(&t) => Err(DeviceError::invalid(
            field,
            "must be a positive Unix time in milliseconds (up to year 9999)",
        )),
        Some(t) => Ok(Some(t)),
    }
}

pub(crate) fn calendar_add(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let title = p.ident_req("title")?.to_string();
    let start = positive_time(&p, "start_at")?
        .ok_or_else(|| DeviceError::invalid("start_at", "is required"))?;
    let end_at = p.time_bound("end_at")?;
    let duration = p.i64_opt("duration_minutes")?;
    let all_day = p.bool_opt("all_day")?.unwrap_or(false);
    let calendar_id = match p.i64_opt("calendar_id")? {
        None => x.st.calendars.first().map_or(1, |c| c.id),
        Some(id) if x.st.calendars.iter().any(|c| c.id == id) => id,
        Some(id) => return Err(DeviceError::not_found(EntityKind::Calendar, id)),
    };
    let off = x.st.offset();
    let (start, end) = if all_day {
        let first = time::local_day(start, off);
        let last = match (end_at, duration) {
            (Some(e), _) if e > start => time::local_day(e - 1, off),
            (Some(_), _) => return Err(DeviceError::invalid("end_at", "must be after start_at")),
            (None, Some(d)) => time::local_day(event_end(start, None, Some(d), 0)? - 1, off),
            (None, None) => first,
        };
        (time::day_start(first, off), time::day_start(last + 1, off))
    } else {
        (start, event_end(start, end_at, duration, 60)?)
    };
    let id = x.st.fresh_id();
    let event = Event {
        id,
        calendar_id,
        title: title.clone(),
        description: p.str_opt("description")?.unwrap_or_default().to_string(),
        location: p.ident_opt("location")?.unwrap_or_default().to_string(),
        start_ms: start,
        end_ms: end,
        all_day,
        attendees: Vec::new(),
    };
    let json = event_json(x.st, &event);
    x.st.events.push(event);
    Ok(Outcome::act(
        json!({ "created": true, "event": json }),
        format!("added event {id} \"{title}\""),
    ))
}

pub(crate) fn calendar_update(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let event_id = p.i64_req("event_id")?;
    let current =
        x.st.event(event_id)
            .cloned()
            .ok_or_else(|| DeviceError::not_found(EntityKind::Event, event_id))?;
    let mut e = current.clone();
    let mut changed = Vec::new();
    if p.str_opt("title")?.is_some() {
        e.title = p.ident_req("title")?.to_string();
        changed.push("title");
    }
    if let Some(d) = p.str_opt("description")? {
        e.description = d.to_string();
        changed.push("description");
    }
    if let Some(l) = p.str_opt("location")? {
        e.location = l.trim().to_string();
        changed.push("location");
    }
    let start = positive_time(&p, "start_at")?;
    let end_at = p.time_bound("end_at")?;
    let duration = p.i64_opt("duration_minutes")?;
    let all_day = p.bool_opt("all_day")?;
    if let Some(s) = start {
        e.start_ms = s;
        changed.push("start_at");
    }
    if end_at.is_some() || duration.is_some() {
        e.end_ms = event_end(e.start_ms, end_at, duration, 60)?;
        changed.push("end_at");
    } else if start.is_some() {
        // Moving the start keeps the length.
        e.end_ms = e.start_ms + (current.end_ms - current.start_ms).max(60_000);
    }
    if let Some(a) = all_day {
        e.all_day = a;
        changed.push("all_day");
    }
    if e.all_day && (all_day == Some(true) || start.is_some()) {
        let off = x.st.offset();
        let first = time::local_day(e.start_ms, off);
        let last = time::local_day((e.end_ms - 1).max(e.start_ms), off);
        e.start_ms = time::day_start(first, off);
        e.end_ms = time::day_start(last + 1, off);
    }
    if changed.is_empty() {
        return Err(DeviceError::invalid(
            "event_id",
            "nothing to update: give at least one of title, description, location, start_at, end_at, duration_minutes, all_day",
        ));
    }
    if e.end_ms <= e.start_ms {
        return Err(DeviceError::invalid("end_at", "must be after start_at"));
    }
    let json = event_json(x.st, &e);
    if let Some(slot) = x.st.events.iter_mut().find(|s| s.id == event_id) {
        *slot = e;
    }
    Ok(Outcome::act(
        json!({ "updated": true, "changed": changed, "event": json }),
        format!("updated event {event_id}: {}", changed.join(", ")),
    ))
}

pub(crate) fn calendar_delete(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let event_id = p.i64_req("event_id")?;
    let event =
        x.st.event(event_id)
            .cloned()
            .ok_or_else(|| DeviceError::not_found(EntityKind::Event, event_id))?;
    x.st.events.retain(|e| e.id != event_id);
    Ok(Outcome::act(
        json!({ "deleted": true, "event_id": event_id, "title": event.title }),
        format!("deleted event {event_id} \"{}\"", event.title),
    ))
}
