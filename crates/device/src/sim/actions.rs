//! What taps, keys and menu items do: navigation between pages and the effects of in-app
//! buttons. Every function returns a one-line summary of what happened.

use crate::DeviceError;

use super::model::{contains_ci, looks_like_number};
use super::screens::{current_page, start_route};
use super::state::{
    Action, AppRole, Call, CallType, CameraFacing, Direction, Event, Message, Note, Overlay, Page,
    Photo, Route, SettingKey, SimState, Task, Thread,
};
use super::time;

/// The foreground task.
pub(crate) fn fg_task_mut(st: &mut SimState) -> Option<&mut Task> {
    let fg = st.nav.foreground.clone()?;
    st.nav.tasks.iter_mut().find(|t| t.package == fg)
}

/// The foreground page.
pub(crate) fn page_mut(st: &mut SimState) -> Option<&mut Page> {
    fg_task_mut(st).and_then(|t| t.stack.last_mut())
}

/// The package of the app with `role`, or `app_not_found`.
pub(crate) fn role_package(st: &SimState, role: AppRole) -> Result<String, DeviceError> {
    st.app_by_role(role)
        .map(|a| a.package.clone())
        .ok_or_else(|| DeviceError::AppNotFound {
            query: format!("{role:?}").to_lowercase(),
        })
}

/// The app role a built-in route belongs to.
fn route_role(route: &Route) -> Option<AppRole> {
    match route {
        Route::Settings | Route::SettingsAbout | Route::AppInfo { .. } => Some(AppRole::Settings),
        Route::Conversations | Route::Thread { .. } | Route::Compose => Some(AppRole::Messages),
        Route::CallLog | Route::Dialpad | Route::InCall { .. } => Some(AppRole::Phone),
        Route::Contacts | Route::ContactDetail { .. } => Some(AppRole::Contacts),
        Route::Agenda { .. } | Route::EventDetail { .. } | Route::EventForm { .. } => {
            Some(AppRole::Calendar)
        }
        Route::Browser => Some(AppRole::Browser),
        Route::Clock => Some(AppRole::Clock),
        Route::Notes | Route::NoteEditor { .. } => Some(AppRole::Notes),
        Route::Camera => Some(AppRole::Camera),
        Route::Custom { .. } | Route::Blank => None,
    }
}

/// A new page for `route`, with its fields pre-filled; entering a thread marks it read.
fn new_page(st: &mut SimState, route: Route, now: i64) -> Page {
    let off = st.offset();
    let mut page = Page::new(route.clone());
    match route {
        Route::Thread { thread_id } => mark_thread_read(st, thread_id),
        Route::EventForm { event_id } => {
            let existing = event_id.and_then(|id| st.event(id)).cloned();
            match existing {
                Some(e) => {
                    page.fields.insert("event_title".into(), e.title.clone());
                    page.fields.insert(
                        "event_date".into(),
                        time::iso_date(time::local_day(e.start_ms, off)),
                    );
                    page.fields
                        .insert("event_start".into(), time::hm(e.start_ms, off));
                    page.fields
                        .insert("event_end".into(), time::hm(e.end_ms, off));
                    page.fields
                        .insert("event_all_day".into(), e.all_day.to_string());
                    page.fields
                        .insert("event_location".into(), e.location.clone());
                    page.fields
                        .insert("event_description".into(), e.description.clone());
                }
                None => {
                    let today = time::local_day(now, off);
                    let day = match current_page(st).map(|(_, p, _)| &p.route) {
                        Some(Route::Agenda { day: Some(day) }) => *day,
                        _ => today,
                    };
                    let start = if day == today {
                        (time::minute_of_day(now, off) / 60 + 1).min(23) * 60
                    } else {
                        9 * 60
                    };
                    let end = (start + 60).min(23 * 60 + 59);
                    page.fields.insert("event_title".into(), String::new());
                    page.fields.insert("event_date".into(), time::iso_date(day));
                    page.fields.insert(
                        "event_start".into(),
                        format!("{:02}:{:02}", start / 60, start % 60),
                    );
                    page.fields.insert(
                        "event_end".into(),
                        format!("{:02}:{:02}", end / 60, end % 60),
                    );
                    page.fields.insert("event_all_day".into(), "false".into());
                }
            }
            page.focus = Some("event_title".into());
        }
        Route::NoteEditor { note_id } => {
            if let Some(note) = note_id.and_then(|id| st.notes.iter().find(|n| n.id == id)) {
                page.fields.insert("note_title".into(), note.title.clone());
                page.fields.insert("note_body".into(), note.body.clone());
            } else {
                page.focus = Some("note_body".into());
            }
        }
        _ => {}
    }
    page
}

/// Brings an app to the front: its existing task as it was, or a new one at its start page.
pub(crate) fn launch(st: &mut SimState, package: &str, now: i64) -> Result<String, DeviceError> {
    let app = st.app(package).ok_or_else(|| DeviceError::AppNotFound {
        query: package.to_string(),
    })?;
    let label = app.label.clone();
    st.nav.overlay = None;
    if let Some(pos) = st.nav.tasks.iter().position(|t| t.package == package) {
        let task = st.nav.tasks.remove(pos);
        st.nav.tasks.push(task);
    } else {
        let route = start_route(st, package);
        let page = new_page(st, route, now);
        st.nav.tasks.push(Task {
            package: package.to_string(),
            stack: vec![page],
        });
    }
    st.nav.foreground = Some(package.to_string());
    Ok(format!("opened {label}"))
}

/// Opens `route` in the app with `route`'s role on top of that app's start page (what
/// opening a notification or a deep link does): a fresh back stack `[start, route]`.
pub(crate) fn open_deep<'a>(
    st: &'a mut SimState,
    package: &str,
    route: Route,
    now: i64,
) -> Result<&'a mut Page, DeviceError> {
    if st.app(package).is_none() {
        return Err(DeviceError::AppNotFound {
            query: package.to_string(),
        });
    }
    st.nav.overlay = None;
    st.nav.tasks.retain(|t| t.package != package);
    let start = start_route(st, package);
    let mut stack = vec![new_page(st, start.clone(), now)];
    if route != start {
        let page = new_page(st, route, now);
        stack.push(page);
    }
    st.nav.tasks.push(Task {
        package: package.to_string(),
        stack,
    });
    st.nav.foreground = Some(package.to_string());
    page_mut(st).ok_or_else(|| DeviceError::Internal {
        message: "opened task has no page".into(),
    })
}

/// Pushes `route` in the foreground app if it belongs there, else opens it in its own app.
pub(crate) fn push(st: &mut SimState, route: Route, now: i64) -> Result<&mut Page, DeviceError> {
    let fg_role = st
        .nav
        .foreground
        .as_deref()
        .and_then(|p| st.app(p))
        .and_then(|a| a.role);
    match route_role(&route) {
        Some(role) if Some(role) != fg_role => {
            let package = role_package(st, role)?;
            if st.nav.tasks.iter().any(|t| t.package == package) {
                launch(st, &package, now)?;
            } else {
                return open_deep(st, &package, route, now);
            }
        }
        _ => {}
    }
    st.nav.overlay = None;
    let page = new_page(st, route, now);
    let task = fg_task_mut(st).ok_or_else(|| DeviceError::Internal {
        message: "no foreground app to navigate in".into(),
    })?;
    task.stack.push(page);
    task.stack.last_mut().ok_or_else(|| DeviceError::Internal {
        message: "empty stack".into(),
    })
}

/// Removes the top page (and the task when it was the root).
fn pop(st: &mut SimState) {
    let Some(fg) = st.nav.foreground.clone() else {
        return;
    };
    if let Some(task) = st.nav.tasks.iter_mut().find(|t| t.package == fg) {
        task.stack.pop();
        if !task.stack.is_empty() {
            return;
        }
    }
    st.nav.tasks.retain(|t| t.package != fg);
    st.nav.foreground = None;
}

/// The back key.
pub(crate) fn back(st: &mut SimState, now: i64) -> String {
    if st.nav.overlay.take().is_some() {
        return "closed the overlay".into();
    }
    let Some((_, page, _)) = current_page(st) else {
        return "already on the home screen".into();
    };
    match page.route.clone() {
        Route::Browser if st.browser.position > 0 => {
            st.browser.position -= 1;
            if let Some(p) = page_mut(st) {
                p.fields.remove("url_bar");
                p.focus = None;
                p.scroll = 0;
            }
            return format!("went back to {}", st.browser.current().unwrap_or_default());
        }
        Route::NoteEditor { .. } => {
            let saved = save_note(st, now);
            pop(st);
            return format!("left the note editor; {saved}");
        }
        _ => {}
    }
    pop(st);
    match current_page(st) {
        Some((_, page, _)) => format!("went back to {}", super::screens::route_name(&page.route)),
        None => "went back to the home screen".into(),
    }
}

/// The home key.
pub(crate) fn home(st: &mut SimState) -> String {
    st.nav.overlay = None;
    st.nav.foreground = None;
    "went to the home screen".into()
}

fn mark_thread_read(st: &mut SimState, thread_id: i64) {
    if let Some(t) = st.threads.iter_mut().find(|t| t.id == thread_id) {
        for m in &mut t.messages {
            m.read = true;
        }
    }
    for n in &mut st.notifications {
        if n.target == (super::state::NotificationTarget::Thread { thread_id }) {
            n.read = true;
        }
    }
}

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
) -> Result<&'a super::state::Contact, DeviceError> {
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
                || c.phones.iter().any(|p| {
                    looks_like_number(query) && super::model::numbers_match(&p.number, query)
                })
        })
        .collect();
    match matches.as_slice() {
        [] => Err(DeviceError::not_found(crate::EntityKind::Contact, query)),
        [one] => Ok(one),
        many => Err(DeviceError::Ambiguous {
            kind: crate::EntityKind::Contact,
            query: query.to_string(),
            candidates: many.iter().map(|c| c.name.clone()).collect(),
        }),
    }
}

/// Saves the note editor's fields; returns a summary.
fn save_note(st: &mut SimState, now: i64) -> String {
    let Some((_, page, _)) = current_page(st) else {
        return "nothing to save".into();
    };
    let Route::NoteEditor { note_id } = page.route else {
        return "nothing to save".into();
    };
    let title = page.fields.get("note_title").cloned().unwrap_or_default();
    let body = page.fields.get("note_body").cloned().unwrap_or_default();
    match note_id.and_then(|id| st.notes.iter_mut().find(|n| n.id == id)) {
        Some(note) => {
            if note.title == title && note.body == body {
                return "note unchanged".into();
            }
            note.title = title;
            note.body = body;
            note.updated_ms = now;
            "note saved".into()
        }
        None => {
            if title.trim().is_empty() && body.trim().is_empty() {
                return "empty note discarded".into();
            }
            let id = st.fresh_id();
            st.notes.push(Note {
                id,
                title,
                body,
                updated_ms: now,
            });
            if let Some(p) = page_mut(st) {
                p.route = Route::NoteEditor { note_id: Some(id) };
            }
            format!("note {id} created")
        }
    }
}

/// The event form's fields → an event (or a person-readable problem).
fn read_event_form(
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

fn set_notice(st: &mut SimState, text: &str) {
    if let Some(p) = page_mut(st) {
        p.notice = Some(text.to_string());
    }
}

/// Normalises what was typed in the URL bar into a URL.
pub(crate) fn url_from_bar(text: &str) -> String {
    let text = text.trim();
    if text.contains("://")
        || text.starts_with("tel:")
        || text.starts_with("mailto:")
        || text.starts_with("sms:")
    {
        return text.to_string();
    }
    if !text.contains(' ') && text.contains('.') {
        return format!("https://{text}");
    }
    let query: String = text
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b' ' => "+".to_string(),
            other => format!("%{other:02X}"),
        })
        .collect();
    format!("https://search.example/?q={query}")
}

/// Performs an action; returns a summary.
#[allow(clippy::too_many_lines)]
pub(crate) fn perform(st: &mut SimState, action: &Action, now: i64) -> Result<String, DeviceError> {
    match action {
        Action::None => Ok("nothing happened".into()),
        Action::Back => Ok(back(st, now)),
        Action::Home => Ok(home(st)),
        Action::Recents => {
            if matches!(st.nav.overlay, Some(Overlay::Recents)) {
                st.nav.overlay = None;
                Ok("closed recent apps".into())
            } else {
                st.nav.overlay = Some(Overlay::Recents);
                Ok("opened recent apps".into())
            }
        }
        Action::Launch { package } => launch(st, package, now),
        Action::Push { route } => {
            push(st, route.clone(), now)?;
            Ok(format!("opened {}", super::screens::route_name(route)))
        }
        Action::Focus { field } => {
            if let Some(p) = page_mut(st) {
                p.focus = Some(field.clone());
            }
            Ok(format!("focused {field}"))
        }
        Action::SetField { field, value } => {
            if let Some(p) = page_mut(st) {
                p.fields.insert(field.clone(), value.clone());
                p.focus = Some(field.clone());
                p.notice = None;
            }
            Ok(format!("set {field}"))
        }
        Action::ToggleField { field } => {
            if let Some(p) = page_mut(st) {
                let on = p.fields.get(field).is_some_and(|v| v == "true");
                p.fields.insert(field.clone(), (!on).to_string());
            }
            Ok(format!("toggled {field}"))
        }
        Action::Toggle { setting } => {
            let on = st.settings.toggle(*setting);
            if *setting == SettingKey::AirplaneMode && on {
                st.settings.wifi = false;
                st.settings.bluetooth = false;
            }
            Ok(format!(
                "{} turned {}",
                setting.label(),
                if on { "on" } else { "off" }
            ))
        }
        Action::ToggleAlarm { alarm_id } => {
            let alarm = st
                .alarms
                .iter_mut()
                .find(|a| a.id == *alarm_id)
                .ok_or_else(|| DeviceError::Internal {
                    message: format!("alarm {alarm_id} vanished"),
                })?;
            alarm.enabled = !alarm.enabled;
            Ok(format!(
                "alarm {:02}:{:02} turned {}",
                alarm.hour,
                alarm.minute,
                if alarm.enabled { "on" } else { "off" }
            ))
        }
        Action::SendInThread { thread_id } => {
            let body = current_page(st)
                .and_then(|(_, p, _)| p.fields.get("message_input").cloned())
                .unwrap_or_default();
            if body.trim().is_empty() {
                return Ok("nothing to send".into());
            }
            let address = st
                .thread(*thread_id)
                .map(|t| t.address.clone())
                .ok_or_else(|| DeviceError::not_found(crate::EntityKind::Thread, thread_id))?;
            let (_, message_id) = send_sms(st, &address, &body, now);
            if let Some(p) = page_mut(st) {
                p.fields.remove("message_input");
                p.scroll = 0;
            }
            Ok(format!("sent message {message_id} to {address}"))
        }
        Action::SendCompose => {
            let (to, body) = match current_page(st) {
                Some((_, p, _)) => (
                    p.fields.get("compose_to").cloned().unwrap_or_default(),
                    p.fields.get("compose_body").cloned().unwrap_or_default(),
                ),
                None => (String::new(), String::new()),
            };
            if to.trim().is_empty() || body.trim().is_empty() {
                return Ok("nothing to send".into());
            }
            let number = match resolve_recipient(st, &to, "compose_to") {
                Ok(number) => number,
                Err(err) => {
                    let text = match err {
                        DeviceError::Ambiguous { candidates, .. } => {
                            format!("Several contacts match: {}", candidates.join(", "))
                        }
                        _ => format!("No contact or number matches \"{}\"", to.trim()),
                    };
                    set_notice(st, &text);
                    return Ok(text);
                }
            };
            let (thread_id, message_id) = send_sms(st, &number, &body, now);
            pop(st);
            if st.nav.foreground.is_none() {
                let package = role_package(st, AppRole::Messages)?;
                open_deep(st, &package, Route::Thread { thread_id }, now)?;
            } else {
                push(st, Route::Thread { thread_id }, now)?;
            }
            Ok(format!("sent message {message_id} to {number}"))
        }
        Action::ComposeTo { address, body } => {
            let package = role_package(st, AppRole::Messages)?;
            let page = open_deep(st, &package, Route::Compose, now)?;
            page.fields.insert("compose_to".into(), address.clone());
            page.fields.insert("compose_body".into(), body.clone());
            page.focus = Some(
                if address.is_empty() {
                    "compose_to"
                } else {
                    "compose_body"
                }
                .into(),
            );
            Ok(format!("opened a new message to {address}"))
        }
        Action::Dial { digit } => {
            if let Some(p) = page_mut(st) {
                p.fields
                    .entry("dial_number".into())
                    .or_default()
                    .push_str(digit);
            }
            Ok(format!("dialed {digit}"))
        }
        Action::DialDelete => {
            if let Some(p) = page_mut(st)
                && let Some(number) = p.fields.get_mut("dial_number")
            {
                number.pop();
            }
            Ok("deleted a digit".into())
        }
        Action::DialNumber { number } => {
            let page = push(st, Route::Dialpad, now)?;
            page.fields.insert("dial_number".into(), number.clone());
            Ok(format!("opened the keypad with {number}"))
        }
        Action::CallFromDialpad => {
            let number = current_page(st)
                .and_then(|(_, p, _)| p.fields.get("dial_number").cloned())
                .unwrap_or_default();
            if number.trim().is_empty() {
                return Ok("no number to call".into());
            }
            let id = place_call(st, &number, now)?;
            Ok(format!("calling {number} (call {id})"))
        }
        Action::Call { number } => {
            let id = place_call(st, number, now)?;
            Ok(format!("calling {number} (call {id})"))
        }
        Action::EndCall { call_id } => {
            if end_call(st, *call_id, now) {
                if matches!(
                    current_page(st),
                    Some((
                        _,
                        Page {
                            route: Route::InCall { .. },
                            ..
                        },
                        _
                    ))
                ) {
                    pop(st);
                }
                Ok(format!("ended call {call_id}"))
            } else {
                Ok("no call in progress".into())
            }
        }
        Action::SaveEvent { event_id } => {
            let Some((_, page, _)) = current_page(st) else {
                return Ok("nothing to save".into());
            };
            let form = read_event_form(st, page);
            let (title, start, end, all_day, location, description) = match form {
                Ok(values) => values,
                Err(problem) => {
                    set_notice(st, &problem);
                    return Ok(format!("not saved: {problem}"));
                }
            };
            let day = time::local_day(start, st.offset());
            let id = match event_id.and_then(|id| st.events.iter_mut().find(|e| e.id == id)) {
                Some(e) => {
                    e.title = title.clone();
                    e.start_ms = start;
                    e.end_ms = end;
                    e.all_day = all_day;
                    e.location = location;
                    e.description = description;
                    e.id
                }
                None => {
                    let id = st.fresh_id();
                    let calendar_id = st.calendars.first().map_or(1, |c| c.id);
                    st.events.push(Event {
                        id,
                        calendar_id,
                        title: title.clone(),
                        description,
                        location,
                        start_ms: start,
                        end_ms: end,
                        all_day,
                        attendees: Vec::new(),
                    });
                    id
                }
            };
            pop(st);
            if let Some(p) = page_mut(st)
                && let Route::Agenda { day: shown } = &mut p.route
            {
                *shown = Some(day);
            }
            Ok(format!("saved event {id} \"{title}\""))
        }
        Action::DeleteEvent { event_id } => {
            let before = st.events.len();
            st.events.retain(|e| e.id != *event_id);
            if st.events.len() == before {
                return Err(DeviceError::not_found(crate::EntityKind::Event, event_id));
            }
            if matches!(
                current_page(st),
                Some((
                    _,
                    Page {
                        route: Route::EventDetail { .. },
                        ..
                    },
                    _
                ))
            ) {
                pop(st);
            }
            Ok(format!("deleted event {event_id}"))
        }
        Action::ShiftDay { days } => {
            let today = time::local_day(now, st.offset());
            if let Some(p) = page_mut(st)
                && let Route::Agenda { day } = &mut p.route
            {
                let next = day.unwrap_or(today) + days;
                *day = Some(next);
                p.scroll = 0;
                return Ok(format!("showing {}", time::day_title(next)));
            }
            Ok("nothing happened".into())
        }
        Action::OpenUrl { url } => super::commands::open_url(st, url, now).map(|v| {
            format!(
                "opened {}",
                v.get("url").and_then(|u| u.as_str()).unwrap_or(url)
            )
        }),
        Action::SubmitUrl => {
            let text = current_page(st)
                .and_then(|(_, p, _)| p.fields.get("url_bar").cloned())
                .unwrap_or_default();
            if text.trim().is_empty() {
                return Ok("nothing to open".into());
            }
            let url = url_from_bar(&text);
            match super::commands::open_url(st, &url, now) {
                Ok(_) => Ok(format!("opened {url}")),
                Err(err) => {
                    set_notice(st, &err.to_string());
                    Ok(format!("could not open {url}: {err}"))
                }
            }
        }
        Action::TakePhoto => {
            let id = st.fresh_id();
            st.photos.push(Photo {
                id,
                taken_ms: now,
                facing: st.camera_facing,
            });
            set_notice(st, "Photo saved");
            Ok(format!("took photo {id}"))
        }
        Action::SwitchCamera => {
            st.camera_facing = match st.camera_facing {
                CameraFacing::Back => CameraFacing::Front,
                CameraFacing::Front => CameraFacing::Back,
            };
            Ok("switched camera".into())
        }
        Action::SaveNote => {
            let saved = save_note(st, now);
            pop(st);
            Ok(saved)
        }
        Action::DeleteNote { note_id } => {
            st.notes.retain(|n| n.id != *note_id);
            Ok(format!("deleted note {note_id}"))
        }
        Action::Copy { text } => {
            st.clipboard = Some(text.clone());
            Ok("copied to the clipboard".into())
        }
        Action::PasteInto { field } => {
            let clip = st
                .clipboard
                .clone()
                .filter(|c| !c.is_empty())
                .ok_or(DeviceError::ClipboardEmpty)?;
            if let Some(p) = page_mut(st) {
                p.fields.entry(field.clone()).or_default().push_str(&clip);
                p.focus = Some(field.clone());
            }
            Ok(format!("pasted into {field}"))
        }
        Action::DeleteMessage {
            thread_id,
            message_id,
        } => {
            if let Some(t) = st.threads.iter_mut().find(|t| t.id == *thread_id) {
                t.messages.retain(|m| m.id != *message_id);
            }
            Ok(format!("deleted message {message_id}"))
        }
        Action::MarkThreadRead { thread_id } => {
            mark_thread_read(st, *thread_id);
            Ok(format!("marked thread {thread_id} read"))
        }
        Action::DeleteThread { thread_id } => {
            st.threads.retain(|t| t.id != *thread_id);
            Ok(format!("deleted thread {thread_id}"))
        }
        Action::Menu { title, items } => {
            st.nav.overlay = Some(Overlay::Menu {
                title: title.clone(),
                items: items.clone(),
            });
            Ok(format!("opened the menu for {title}"))
        }
        Action::ShareTo { share_id, target } => {
            st.nav.overlay = None;
            let text = st
                .shares
                .iter_mut()
                .find(|s| s.id == *share_id)
                .map(|s| {
                    s.target = Some(target.clone());
                    s.text.clone()
                })
                .unwrap_or_default();
            match target.as_str() {
                "messages" => perform(
                    st,
                    &Action::ComposeTo {
                        address: String::new(),
                        body: text,
                    },
                    now,
                ),
                "notes" => {
                    let package = role_package(st, AppRole::Notes)?;
                    let page = open_deep(st, &package, Route::NoteEditor { note_id: None }, now)?;
                    page.fields.insert("note_body".into(), text);
                    Ok("shared to Notes".into())
                }
                _ => {
                    st.clipboard = Some(text);
                    Ok("copied the shared text".into())
                }
            }
        }
        Action::SwitchTask { package } => launch(st, package, now),
        Action::ClearTasks => {
            st.nav.tasks.clear();
            st.nav.foreground = None;
            st.nav.overlay = None;
            Ok("cleared recent apps".into())
        }
        Action::CloseOverlay => {
            st.nav.overlay = None;
            Ok("closed the overlay".into())
        }
    }
}

/// Types `text` into the focused field of the current page.
pub(crate) fn type_into_focus(st: &mut SimState, field: &str, text: &str) {
    if let Some(p) = page_mut(st) {
        p.fields
            .entry(field.to_string())
            .or_default()
            .push_str(text);
        p.notice = None;
    }
}
