//! Effects on the records that taps and commands share: sending an SMS, placing and ending
//! calls, finding a recipient and reading the event form. (What opening or leaving a page does
//! to the records — a thread marked read, a note saved — is in `nav.rs`.)

use crate::sim::model::{contains_ci, looks_like_number, numbers_match};
use crate::sim::state::{
    AppRole, Call, CallType, Contact, Direction, Message, Page, Route, SimState, Thread,
};
use crate::sim::time;
use crate::{DeviceError, EntityKind};

use super::nav::{launch, open_deep, push, role_package};

/// Appends an outgoing SMS to the thread with `number` (created when needed).
pub(crate) fn send_sms(st: &mut SimState, number: &str, body: &str, now: i64) -> (i64, i64) {
    let message_id = st.fresh_id();
    let message = Message {
        id: message_id,
        direction: Direction::Outgoing,
        body: body.to_string(),
        at_ms: now,
        read: true,
    };
    if let Some(thread_id) = st.thread_for_number(number).map(|t| t.id)
        && let Some(thread) = st.threads.iter_mut().find(|t| t.id == thread_id)
    {
        thread.messages.push(message);
        return (thread_id, message_id);
    }
    let thread_id = st.fresh_id();
    st.threads.push(Thread {
        id: thread_id,
        address: number.trim().to_string(),
        display_name: None,
        messages: vec![message],
    });
    (thread_id, message_id)
}

/// Starts an outgoing call and shows the in-call screen.
pub(crate) fn place_call(st: &mut SimState, number: &str, now: i64) -> Result<i64, DeviceError> {
    let package = role_package(st, AppRole::Phone)?;
    if let Some(active) = st.active_call {
        end_call(st, active, now);
    }
    let id = st.fresh_id();
    st.calls.push(Call {
        id,
        number: number.trim().to_string(),
        call_type: CallType::Outgoing,
        at_ms: now,
        duration_s: 0,
    });
    st.active_call = Some(id);
    if st.nav.tasks.iter().any(|t| t.package == package) {
        launch(st, &package, now)?;
        push(st, Route::InCall { call_id: id }, now)?;
    } else {
        open_deep(st, &package, Route::InCall { call_id: id }, now)?;
    }
    Ok(id)
}

/// Hangs up; returns whether the call was active.
pub(crate) fn end_call(st: &mut SimState, call_id: i64, now: i64) -> bool {
    if st.active_call != Some(call_id) {
        return false;
    }
    st.active_call = None;
    if let Some(call) = st.calls.iter_mut().find(|c| c.id == call_id) {
        call.duration_s = (now.saturating_sub(call.at_ms) / 1000).max(0);
    }
    true
}

/// Resolves a recipient typed by a person or given by a tool: a number as is, else a
/// contact name (exact, else the only partial match) → the contact's first number.
pub(crate) fn resolve_recipient(
    st: &SimState,
    text: &str,
    field: &str,
) -> Result<String, DeviceError> {
    let text = text.trim();
    if looks_like_number(text) {
        return Ok(text.to_string());
    }
    let contact = find_contact(st, text, field)?;
    contact
        .phones
        .first()
        .map(|p| p.number.clone())
        .ok_or_else(|| DeviceError::invalid(field, format!("{} has no phone number", contact.name)))
}

/// One contact by name: an exact (case-insensitive) match, else the only partial match.
pub(crate) fn find_contact<'a>(
    st: &'a SimState,
    query: &str,
    _field: &str,
) -> Result<&'a Contact, DeviceError> {
    let query = query.trim();
    if let Some(c) = st
        .contacts
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(query))
    {
        return Ok(c);
    }
    let matches: Vec<_> = st
        .contacts
        .iter()
        .filter(|c| {
            contains_ci(&c.name, query)
                || c.phones
                    .iter()
                    .any(|p| looks_like_number(query) && numbers_match(&p.number, query))
        })
        .collect();
    match matches.as_slice() {
        [] => Err(DeviceError::not_found(EntityKind::Contact, query)),
        [one] => Ok(one),
        many => Err(DeviceError::Ambiguous {
            kind: EntityKind::Contact,
            query: query.to_string(),
            candidates: many.iter().map(|c| c.name.clone()).collect(),
        }),
    }
}

/// The event form's fields → an event (or a person-readable problem).
pub(super) fn read_event_form(
    st: &SimState,
    page: &Page,
) -> Result<(String, i64, i64, bool, String, String), String> {
    let off = st.offset();
    let get = |k: &str| page.fields.get(k).cloned().unwrap_or_default();
    let title = get("event_title").trim().to_string();
    if title.is_empty() {
        return Err("Enter a title".into());
    }
    let day = time::parse_date(&get("event_date")).ok_or("Enter the date as YYYY-MM-DD")?;
    let all_day = get("event_all_day") == "true";
    let (start, end) = if all_day {
        let start = time::day_start(day, off);
        (start, start + time::DAY_MS)
    } else {
        let s = time::parse_hm(&get("event_start")).ok_or("Enter the start time as HH:MM")?;
        let e = time::parse_hm(&get("event_end")).ok_or("Enter the end time as HH:MM")?;
        if e <= s {
            return Err("The end time must be after the start time".into());
        }
        let base = time::day_start(day, off);
        (base + s * 60_000, base + e * 60_000)
    };
    Ok((
        title,
        start,
        end,
        all_day,
        get("event_location").trim().to_string(),
        get("event_description"),
    ))
}
