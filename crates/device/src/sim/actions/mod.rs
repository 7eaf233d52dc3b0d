//! What taps, keys and menu items do: navigation between pages and the effects of in-app
//! buttons. Every function returns a one-line summary of what happened.
//!
//! `nav` moves between pages and apps, `effects` changes records; [`perform`] runs one
//! [`Action`] with both.

mod effects;
mod nav;

pub(crate) use effects::{end_call, find_contact, place_call, resolve_recipient, send_sms};
pub(crate) use nav::{back, fg_task_mut, home, launch, open_deep, page_mut, push, role_package};

use crate::sim::screens::{current_page, route_name};
use crate::sim::state::{
    Action, AppRole, CameraFacing, Event, Overlay, Page, Photo, Route, SettingKey, SimState,
};
use crate::sim::time;
use crate::{DeviceError, EntityKind};

use effects::read_event_form;
use nav::{mark_thread_read, pop, save_note};

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
            Ok(format!("opened {}", route_name(route)))
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
                .ok_or_else(|| DeviceError::not_found(EntityKind::Thread, thread_id))?;
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
                return Err(DeviceError::not_found(EntityKind::Event, event_id));
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
        Action::OpenNotification { key } => {
            let n = st
                .notifications
                .iter()
                .find(|n| &n.key == key)
                .cloned()
                .ok_or_else(|| DeviceError::not_found(EntityKind::Notification, key))?;
            crate::sim::commands::open_target(st, &n, now)?;
            Ok(format!("opened notification {} ({})", n.key, n.title))
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
