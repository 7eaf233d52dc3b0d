//! The device-owned commands of the manifest, one function each, over the simulated state.

use serde_json::{Map, Value, json};

use crate::params::Params;
use crate::{DeviceError, EntityKind};

use super::actions::{
    self, find_contact, launch, open_deep, page_mut, perform, place_call, role_package, send_sms,
};
use super::model::{contains_ci, looks_like_number, numbers_match, snippet};
use super::render;
use super::screens::{self, current_page, route_name};
use super::state::{
    Action, AppRole, Call, CallType, Direction, Draft, Event, Notification, NotificationTarget,
    Overlay, Route, Share, SimState,
};
use super::time;
use super::view::View;

/// A command's result plus a one-line summary for the action log.
pub(crate) struct Outcome {
    pub result: Value,
    pub summary: String,
}

impl Outcome {
    fn read(result: Value) -> Self {
        Self {
            result,
            summary: String::new(),
        }
    }

    fn act(result: Value, summary: impl Into<String>) -> Self {
        Self {
            result,
            summary: summary.into(),
        }
    }
}

/// The state a command runs against.
pub(crate) struct Exec<'a> {
    pub st: &'a mut SimState,
    pub now: i64,
}

/// A command handler.
pub(crate) type Handler = fn(&mut Exec<'_>, Params<'_>) -> Result<Outcome, DeviceError>;

/// Longest text accepted for typing, clipboard and share (characters).
const MAX_TEXT: usize = 100_000;

fn check_len(field: &str, text: &str) -> Result<(), DeviceError> {
    if text.chars().count() > MAX_TEXT {
        return Err(DeviceError::invalid(
            field,
            format!("longer than {MAX_TEXT} characters"),
        ));
    }
    Ok(())
}

fn screen_brief(st: &SimState, now: i64) -> Value {
    let view = screens::build(st, now);
    let screen =
        current_page(st).map_or_else(|| "home".to_string(), |(_, p, _)| route_name(&p.route));
    let screen = match &st.nav.overlay {
        Some(Overlay::Recents) => "recents".to_string(),
        Some(Overlay::ShareSheet { .. }) => "share_sheet".to_string(),
        Some(Overlay::Menu { .. }) => format!("{screen}+menu"),
        None => screen,
    };
    json!({ "package": view.package, "activity": view.activity, "title": view.title, "screen": screen })
}

// ---------------------------------------------------------------- JSON views of records

fn app_label(st: &SimState, package: &str) -> String {
    st.app(package)
        .map_or_else(|| package.to_string(), |a| a.label.clone())
}

fn notification_json(st: &SimState, n: &Notification) -> Value {
    json!({
        "notification_key": n.key,
        "package": n.package,
        "app_label": app_label(st, &n.package),
        "title": n.title,
        "text": n.text,
        "posted_at": n.posted_ms,
        "read": n.read,
    })
}

fn event_json(st: &SimState, e: &Event) -> Value {
    let off = st.offset();
    json!({
        "event_id": e.id,
        "calendar_id": e.calendar_id,
        "calendar": st.calendars.iter().find(|c| c.id == e.calendar_id).map(|c| c.name.clone()),
        "title": e.title,
        "description": e.description,
        "location": e.location,
        "start_at": e.start_ms,
        "end_at": e.end_ms,
        "all_day": e.all_day,
        "attendees": e.attendees,
        "local_start": format!("{} {}", time::iso_date(time::local_day(e.start_ms, off)), time::hm(e.start_ms, off)),
        "local_end": format!("{} {}", time::iso_date(time::local_day(e.end_ms, off)), time::hm(e.end_ms, off)),
    })
}

fn call_json(st: &SimState, c: &Call) -> Value {
    json!({
        "call_id": c.id,
        "number": c.number,
        "contact_name": st.contact_for_number(&c.number).map(|k| k.name.clone()),
        "type": c.call_type.as_str(),
        "at": c.at_ms,
        "duration_s": c.duration_s,
        "in_progress": st.active_call == Some(c.id),
    })
}

fn message_json(st: &SimState, thread_id: i64, address: &str, m: &super::state::Message) -> Value {
    json!({
        "message_id": m.id,
        "thread_id": thread_id,
        "address": address,
        "contact_name": st.contact_for_number(address).map(|k| k.name.clone()),
        "direction": match m.direction { Direction::Incoming => "incoming", Direction::Outgoing => "outgoing" },
        "body": m.body,
        "at": m.at_ms,
        "read": m.read,
    })
}

fn contact_json(c: &super::state::Contact, details: bool) -> Value {
    let mut v = json!({ "contact_id": c.id, "name": c.name, "starred": c.starred });
    if let Some(map) = v.as_object_mut() {
        if let Some(org) = &c.organization {
            map.insert("organization".into(), json!(org));
        }
        if details {
            map.insert(
                "phones".into(),
                json!(
                    c.phones
                        .iter()
                        .map(|p| json!({"number": p.number, "label": p.label}))
                        .collect::<Vec<_>>()
                ),
            );
            map.insert(
                "emails".into(),
                json!(
                    c.emails
                        .iter()
                        .map(|e| json!({"address": e.address, "label": e.label}))
                        .collect::<Vec<_>>()
                ),
            );
            if let Some(note) = &c.note {
                map.insert("note".into(), json!(note));
            }
        }
    }
    v
}

// ---------------------------------------------------------------- device, apps

pub(crate) fn device_status(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let st = &*x.st;
    let limit = p.limit("limit", 5, 50)?;
    let query = p.ident_opt("query")?;
    let number = p.ident_opt("number")?;
    if let Some(n) = number
        && !looks_like_number(n)
    {
        return Err(DeviceError::invalid("number", "not a phone number"));
    }
    let off = st.offset();
    let today = time::local_day(x.now, off);
    let network = if st.settings.airplane_mode {
        "airplane_mode"
    } else if st.settings.wifi {
        "wifi"
    } else {
        "mobile"
    };
    let device = json!({
        "platform": "simulated",
        "model": st.device.model,
        "os_version": st.device.os_version,
        "battery_percent": st.device.battery_percent,
        "charging": st.device.charging,
        "network": network,
        "do_not_disturb": st.settings.do_not_disturb,
        "time": x.now,
        "local_time": format!("{} {}", time::iso_date(today), time::hm(x.now, off)),
        "utc_offset_minutes": off,
        "foreground": screen_brief(st, x.now),
        "unread_notifications": st.notifications.iter().filter(|n| !n.read).count(),
        "unread_messages": st.threads.iter().flat_map(|t| &t.messages).filter(|m| !m.read).count(),
        "missed_calls_today": st.calls.iter().filter(|c| c.call_type == CallType::Missed && time::local_day(c.at_ms, off) == today).count(),
        "call_in_progress": st.active_call,
    });
    if query.is_none() && number.is_none() {
        let next_event = st
            .events
            .iter()
            .filter(|e| e.end_ms > x.now)
            .min_by_key(|e| e.start_ms)
            .map(|e| event_json(st, e));
        return Ok(Outcome::read(
            json!({ "device": device, "next_event": next_event }),
        ));
    }
    // Who is this about: contacts matching the query or owning the number.
    let contacts: Vec<_> = st
        .contacts
        .iter()
        .filter(|c| {
            query.is_some_and(|q| {
                contains_ci(&c.name, q)
                    || c.organization.as_deref().is_some_and(|o| contains_ci(o, q))
                    || c.emails.iter().any(|e| contains_ci(&e.address, q))
                    || (looks_like_number(q)
                        && c.phones.iter().any(|ph| numbers_match(&ph.number, q)))
            }) || number.is_some_and(|n| c.phones.iter().any(|ph| numbers_match(&ph.number, n)))
        })
        .collect();
    let mut numbers: Vec<String> = contacts
        .iter()
        .flat_map(|c| c.phones.iter().map(|ph| ph.number.clone()))
        .collect();
    if let Some(n) = number {
        numbers.push(n.to_string());
    }
    if let Some(q) = query.filter(|q| looks_like_number(q)) {
        numbers.push(q.to_string());
    }
    let involves = |num: &str| numbers.iter().any(|n| numbers_match(n, num));
    let mut names: Vec<String> = contacts.iter().map(|c| c.name.clone()).collect();
    if let Some(q) = query {
        names.push(q.to_string());
    }
    let mut calls: Vec<_> = st.calls.iter().filter(|c| involves(&c.number)).collect();
    calls.sort_by_key(|c| std::cmp::Reverse(c.at_ms));
    let mut messages: Vec<Value> = Vec::new();
    let mut msgs: Vec<(i64, &super::state::Thread, &super::state::Message)> = st
        .threads
        .iter()
        .flat_map(|t| t.messages.iter().map(move |m| (m.at_ms, t, m)))
        .filter(|(_, t, m)| {
            involves(&t.address)
                || query.is_some_and(|q| {
                    contains_ci(&m.body, q)
                        || t.display_name.as_deref().is_some_and(|d| contains_ci(d, q))
                })
        })
        .collect();
    msgs.sort_by_key(|(at, _, _)| std::cmp::Reverse(*at));
    for (_, t, m) in msgs.iter().take(limit) {
        messages.push(message_json(st, t.id, &t.address, m));
    }
    let mut events: Vec<_> = st
        .events
        .iter()
        .filter(|e| {
            names.iter().any(|n| {
                contains_ci(&e.title, n)
                    || contains_ci(&e.description, n)
                    || contains_ci(&e.location, n)
                    || e.attendees.iter().any(|a| contains_ci(a, n))
            })
        })
        .collect();
    events.sort_by_key(|e| (e.end_ms <= x.now, e.start_ms));
    let notifications: Vec<Value> = st
        .notifications
        .iter()
        .filter(|n| {
            names
                .iter()
                .any(|q| contains_ci(&n.title, q) || contains_ci(&n.text, q))
        })
        .take(limit)
        .map(|n| notification_json(st, n))
        .collect();
    let mut summary = Vec::new();
    match contacts.as_slice() {
        [] => summary.push(format!(
            "No contact matches {}",
            query.or(number).unwrap_or_default()
        )),
        [one] => summary.push(format!(
            "{} ({})",
            one.name,
            one.phones
                .first()
                .map_or("no number", |p| p.number.as_str())
        )),
        many => summary.push(format!("{} contacts match", many.len())),
    }
    if let Some(last) = calls.first() {
        summary.push(format!(
            "{} calls, last {} {}",
            calls.len(),
            last.call_type.as_str(),
            time::when(last.at_ms, off, today)
        ));
    }
    if !msgs.is_empty() {
        let unread = msgs.iter().filter(|(_, _, m)| !m.read).count();
        summary.push(format!("{} messages ({unread} unread)", msgs.len()));
    }
    if let Some(next) = events.iter().find(|e| e.end_ms > x.now) {
        summary.push(format!(
            "next event \"{}\" {}",
            next.title,
            time::when(next.start_ms, off, today)
        ));
    }
    Ok(Outcome::read(json!({
        "query": query,
        "number": number,
        "summary": summary.join("; "),
        "contacts": contacts.iter().take(limit).map(|c| contact_json(c, true)).collect::<Vec<_>>(),
        "calls": calls.iter().take(limit).map(|c| call_json(st, c)).collect::<Vec<_>>(),
        "messages": messages,
        "events": events.iter().take(limit).map(|e| event_json(st, e)).collect::<Vec<_>>(),
        "notifications": notifications,
        "device": device,
    })))
}

fn app_activity(st: &SimState, package: &str) -> String {
    let activity = match st.app(package).and_then(|a| a.role) {
        Some(AppRole::Settings) => ".Settings",
        Some(AppRole::Messages) => ".ui.ConversationListActivity",
        Some(AppRole::Phone) => ".DialtactsActivity",
        Some(AppRole::Contacts) => ".activities.PeopleActivity",
        Some(AppRole::Calendar) => ".AllInOneActivity",
        Some(AppRole::Browser) => ".BrowserActivity",
        Some(AppRole::Clock) => ".DeskClock",
        Some(AppRole::Notes) => ".NotesActivity",
        Some(AppRole::Camera) => ".CameraActivity",
        None => ".MainActivity",
    };
    format!("{package}/{activity}")
}

pub(crate) fn apps_search(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let query = p.ident_opt("query")?;
    let limit = p.limit("limit", 50, 200)?;
    let include_system = p.bool_opt("include_system")?.unwrap_or(false);
    let st = &*x.st;
    let matches: Vec<Value> = st
        .apps
        .iter()
        .filter(|a| include_system || a.launchable)
        .filter(|a| {
            query.is_none_or(|q| {
                contains_ci(&a.label, q)
                    || contains_ci(&a.package, q)
                    || contains_ci(&app_activity(st, &a.package), q)
            })
        })
        .map(|a| {
            json!({
                "package": a.package,
                "label": a.label,
                "activity": app_activity(st, &a.package),
                "system": a.system,
                "launchable": a.launchable,
                "version": a.version,
            })
        })
        .collect();
    let total = matches.len();
    let apps: Vec<Value> = matches.into_iter().take(limit).collect();
    Ok(Outcome::read(
        json!({ "count": apps.len(), "total": total, "apps": apps }),
    ))
}

pub(crate) fn app_open(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let primary = p.ident_opt("package_or_label")?;
    let label = p.ident_opt("label")?;
    let Some(query) = primary.or(label) else {
        return Err(DeviceError::invalid(
            "package_or_label",
            "give package_or_label or label",
        ));
    };
    let st = &*x.st;
    let find = |q: &str| -> Result<Option<String>, DeviceError> {
        if let Some(a) = st.apps.iter().find(|a| a.package == q) {
            return Ok(Some(a.package.clone()));
        }
        if let Some(a) = st.apps.iter().find(|a| a.label.eq_ignore_ascii_case(q)) {
            return Ok(Some(a.package.clone()));
        }
        let partial: Vec<_> = st
            .apps
            .iter()
            .filter(|a| a.launchable && (contains_ci(&a.label, q) || contains_ci(&a.package, q)))
            .collect();
        match partial.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one.package.clone())),
            many => Err(DeviceError::Ambiguous {
                kind: EntityKind::App,
                query: q.to_string(),
                candidates: many
                    .iter()
                    .map(|a| format!("{} ({})", a.label, a.package))
                    .collect(),
            }),
        }
    };
    let mut package = find(query)?;
    if package.is_none()
        && let (Some(_), Some(label)) = (primary, label)
    {
        package = find(label)?;
    }
    let package = package.ok_or_else(|| DeviceError::AppNotFound {
        query: query.to_string(),
    })?;
    if st.app(&package).is_some_and(|a| !a.launchable) {
        return Err(DeviceError::invalid(
            "package_or_label",
            format!("{package} has no launcher entry and cannot be opened"),
        ));
    }
    let summary = launch(x.st, &package, x.now)?;
    let screen = screen_brief(x.st, x.now);
    Ok(Outcome::act(
        json!({ "opened": true, "package": package, "label": app_label(x.st, &package), "screen": screen }),
        summary,
    ))
}

/// Opens a URL the way the phone's intent resolution would; shared by `url.open`, links and
/// the Browser's URL bar.
pub(crate) fn open_url(st: &mut SimState, url: &str, now: i64) -> Result<Value, DeviceError> {
    let url = url.trim();
    let Some((scheme, rest)) = url.split_once(':') else {
        return Err(DeviceError::invalid(
            "url",
            "must be an absolute URL such as https://example.com",
        ));
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return Err(DeviceError::invalid(
            "url",
            "must be an absolute URL such as https://example.com",
        ));
    }
    match scheme.as_str() {
        "http" | "https" => {
            let host = screens::host_of(url);
            if !rest.starts_with("//") || host.is_empty() || url.chars().any(char::is_whitespace) {
                return Err(DeviceError::invalid("url", "not a valid http(s) URL"));
            }
            let package = role_package(st, AppRole::Browser)?;
            if st.nav.tasks.iter().any(|t| t.package == package) {
                launch(st, &package, now)?;
                if let Some(task) = actions::fg_task_mut(st) {
                    task.stack.truncate(1);
                }
            } else {
                open_deep(st, &package, Route::Browser, now)?;
            }
            let b = &mut st.browser;
            if b.current() != Some(url) {
                let keep = if b.history.is_empty() {
                    0
                } else {
                    b.position + 1
                };
                b.history.truncate(keep);
                b.history.push(url.to_string());
                b.position = b.history.len() - 1;
            }
            if let Some(page) = page_mut(st) {
                page.fields.remove("url_bar");
                page.focus = None;
                page.scroll = 0;
                page.notice = None;
            }
            let title =
                screens::find_page(st, url).map_or_else(|| host.to_string(), |p| p.title.clone());
            Ok(json!({ "url": url, "handled_by": package, "action": "view", "title": title }))
        }
        "tel" => {
            let number = rest.trim_start_matches("//");
            if !looks_like_number(number) {
                return Err(DeviceError::invalid(
                    "url",
                    "tel: URL without a phone number",
                ));
            }
            let package = role_package(st, AppRole::Phone)?;
            perform(
                st,
                &Action::DialNumber {
                    number: number.to_string(),
                },
                now,
            )?;
            Ok(
                json!({ "url": url, "handled_by": package, "action": "dial", "number": number, "note": "the number is on the keypad; nothing was called" }),
            )
        }
        "sms" | "smsto" => {
            let (number, query) = rest.split_once('?').unwrap_or((rest, ""));
            let body = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("body="))
                .map(percent_decode)
                .unwrap_or_default();
            let package = role_package(st, AppRole::Messages)?;
            perform(
                st,
                &Action::ComposeTo {
                    address: number.to_string(),
                    body: body.clone(),
                },
                now,
            )?;
            Ok(
                json!({ "url": url, "handled_by": package, "action": "compose", "to": number, "body": body, "note": "a message was prepared, not sent" }),
            )
        }
        "mailto" => Err(DeviceError::invalid(
            "url",
            "no installed app handles mailto: links (there is no email app)",
        )),
        "javascript" | "file" | "content" | "data" | "intent" | "about" | "chrome" => Err(
            DeviceError::invalid("url", format!("{scheme}: URLs are not allowed")),
        ),
        other => Err(DeviceError::invalid(
            "url",
            format!("no installed app handles {other}: links"),
        )),
    }
}

fn percent_decode(text: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            ) {
                (Some(hi), Some(lo)) => {
                    out.push(hi * 16 + lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn url_open(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let url = p.ident_req("url")?;
    let mut result = open_url(x.st, url, x.now)?;
    let screen = screen_brief(x.st, x.now);
    if let Some(map) = result.as_object_mut() {
        map.insert("screen".into(), screen);
    }
    Ok(Outcome::act(result, format!("opened {url}")))
}

// ---------------------------------------------------------------- screen

pub(crate) fn screen_get(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let include_screenshot = p.bool_opt("include_screenshot")?.unwrap_or(false);
    let include_activity = p.bool_opt("include_activity")?.unwrap_or(true);
    let include_tree = p.bool_opt("include_ui_tree")?.unwrap_or(true);
    let view = screens::build(x.st, x.now);
    let brief = screen_brief(x.st, x.now);
    let mut out = Map::new();
    if include_activity {
        for key in ["package", "activity", "title", "screen"] {
            out.insert(key.into(), brief.get(key).cloned().unwrap_or(Value::Null));
        }
    }
    out.insert("width".into(), json!(view.width));
    out.insert("height".into(), json!(view.height));
    out.insert("captured_at".into(), json!(x.now));
    out.insert(
        "focused_element".into(),
        json!(view.focused_field().map(|n| n.id.clone())),
    );
    out.insert("visible_text".into(), json!(view.visible_text()));
    out.insert(
        "interactive_elements".into(),
        Value::Array(view.interactive()),
    );
    if include_tree {
        out.insert("ui_tree".into(), view.tree());
    }
    if include_screenshot {
        out.insert(
            "screenshot".into(),
            render::screenshot(&view, x.st.settings.dark_theme)?,
        );
    }
    Ok(Outcome::read(Value::Object(out)))
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

fn role_of(n: &super::view::Node) -> &'static str {
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

// ---------------------------------------------------------------- notifications

fn sorted_notifications(st: &SimState) -> Vec<&Notification> {
    let mut list: Vec<_> = st.notifications.iter().collect();
    list.sort_by_key(|n| std::cmp::Reverse(n.posted_ms));
    list
}

pub(crate) fn notifications_list(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let limit = p.limit("limit", 20, 100)?;
    let st = &*x.st;
    let all = sorted_notifications(st);
    let list: Vec<Value> = all
        .iter()
        .take(limit)
        .map(|n| notification_json(st, n))
        .collect();
    Ok(Outcome::read(json!({
        "count": list.len(),
        "total": all.len(),
        "unread_count": all.iter().filter(|n| !n.read).count(),
        "notifications": list,
    })))
}

fn notification_matches(st: &SimState, n: &Notification, q: &str) -> bool {
    contains_ci(&n.title, q)
        || contains_ci(&n.text, q)
        || contains_ci(&n.package, q)
        || contains_ci(&app_label(st, &n.package), q)
}

pub(crate) fn notifications_search(
    x: &mut Exec<'_>,
    p: Params<'_>,
) -> Result<Outcome, DeviceError> {
    let query = p.ident_req("query")?;
    let limit = p.limit("limit", 20, 100)?;
    let st = &*x.st;
    let matches: Vec<_> = sorted_notifications(st)
        .into_iter()
        .filter(|n| notification_matches(st, n, query))
        .collect();
    let list: Vec<Value> = matches
        .iter()
        .take(limit)
        .map(|n| notification_json(st, n))
        .collect();
    Ok(Outcome::read(
        json!({ "query": query, "count": list.len(), "total": matches.len(), "notifications": list }),
    ))
}

pub(crate) fn notifications_open(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let key = p.ident_opt("notification_key")?;
    let package = p.ident_opt("package")?;
    let query = p.ident_opt("query")?;
    if key.is_none() && package.is_none() && query.is_none() {
        return Err(DeviceError::invalid(
            "notification_key",
            "give notification_key, package or query",
        ));
    }
    let st = &*x.st;
    let candidates: Vec<&Notification> = sorted_notifications(st)
        .into_iter()
        .filter(|n| key.is_none_or(|k| n.key == k))
        .filter(|n| {
            package.is_none_or(|pk| {
                n.package == pk || app_label(st, &n.package).eq_ignore_ascii_case(pk)
            })
        })
        .filter(|n| query.is_none_or(|q| notification_matches(st, n, q)))
        .collect();
    // Prefer the newest unread one, as a person would.
    let chosen = candidates
        .iter()
        .find(|n| !n.read)
        .or_else(|| candidates.first())
        .map(|n| (*n).clone());
    let Some(n) = chosen else {
        let what = key.or(query).or(package).unwrap_or_default();
        return Err(DeviceError::not_found(EntityKind::Notification, what));
    };
    let matched = candidates.len();
    if let Some(stored) = x.st.notifications.iter_mut().find(|m| m.key == n.key) {
        stored.read = true;
    }
    let now = x.now;
    let st = &mut *x.st;
    match &n.target {
        NotificationTarget::Thread { thread_id } if st.thread(*thread_id).is_some() => {
            let pkg = role_package(st, AppRole::Messages)?;
            open_deep(
                st,
                &pkg,
                Route::Thread {
                    thread_id: *thread_id,
                },
                now,
            )?;
        }
        NotificationTarget::Event { event_id } if st.event(*event_id).is_some() => {
            let pkg = role_package(st, AppRole::Calendar)?;
            open_deep(
                st,
                &pkg,
                Route::EventDetail {
                    event_id: *event_id,
                },
                now,
            )?;
        }
        NotificationTarget::CallLog => {
            let pkg = role_package(st, AppRole::Phone)?;
            open_deep(st, &pkg, Route::CallLog, now)?;
        }
        NotificationTarget::Url { url } => {
            open_url(st, url, now)?;
        }
        NotificationTarget::Screen { screen_id } => {
            open_deep(
                st,
                &n.package,
                Route::Custom {
                    screen_id: screen_id.clone(),
                },
                now,
            )?;
        }
        // The posting app's start page (also when the target record has since gone).
        NotificationTarget::App
        | NotificationTarget::Thread { .. }
        | NotificationTarget::Event { .. } => {
            let start = screens::start_route(st, &n.package);
            open_deep(st, &n.package, start, now)?;
        }
    }
    let mut shown = notification_json(st, &n);
    if let Some(map) = shown.as_object_mut() {
        map.insert("read".into(), json!(true));
    }
    let screen = screen_brief(st, now);
    let summary = format!("opened notification {} ({})", n.key, n.title);
    Ok(Outcome::act(
        json!({ "opened": true, "matched": matched, "notification": shown, "screen": screen }),
        summary,
    ))
}

// ---------------------------------------------------------------- contacts, calendar

pub(crate) fn contacts_search(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let query = p.ident_opt("query")?;
    let limit = p.limit("limit", 20, 200)?;
    let details = p.bool_opt("include_details")?.unwrap_or(false);
    let mut matches: Vec<_> =
        x.st.contacts
            .iter()
            .filter(|c| {
                query.is_none_or(|q| {
                    contains_ci(&c.name, q)
                        || c.organization.as_deref().is_some_and(|o| contains_ci(o, q))
                        || c.emails.iter().any(|e| contains_ci(&e.address, q))
                        || (looks_like_number(q)
                            && c.phones.iter().any(|ph| {
                                numbers_match(&ph.number, q) || normalize_contains(&ph.number, q)
                            }))
                })
            })
            .collect();
    matches.sort_by_key(|c| (!c.starred, c.name.to_lowercase()));
    let list: Vec<Value> = matches
        .iter()
        .take(limit)
        .map(|c| contact_json(c, details))
        .collect();
    Ok(Outcome::read(
        json!({ "count": list.len(), "total": matches.len(), "contacts": list }),
    ))
}

fn normalize_contains(number: &str, q: &str) -> bool {
    let n = super::model::normalize_number(number);
    let q = super::model::normalize_number(q);
    !q.trim_start_matches('+').is_empty() && n.contains(q.trim_start_matches('+'))
}

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

// ---------------------------------------------------------------- messages, calls

pub(crate) fn messages_search(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let query = p.ident_opt("query")?;
    let limit = p.limit("limit", 20, 200)?;
    let thread_id = match p.i64_opt("thread_id")? {
        None | Some(0) => None,
        Some(id) if x.st.thread(id).is_some() => Some(id),
        Some(id) => return Err(DeviceError::not_found(EntityKind::Thread, id)),
    };
    let st = &*x.st;
    let mut all: Vec<(&super::state::Thread, &super::state::Message)> = st
        .threads
        .iter()
        .filter(|t| thread_id.is_none_or(|id| t.id == id))
        .flat_map(|t| t.messages.iter().map(move |m| (t, m)))
        .filter(|(t, m)| {
            query.is_none_or(|q| {
                contains_ci(&m.body, q)
                    || contains_ci(&t.address, q)
                    || contains_ci(&st.thread_name(t), q)
                    || (looks_like_number(q) && numbers_match(&t.address, q))
            })
        })
        .collect();
    all.sort_by_key(|(_, m)| std::cmp::Reverse((m.at_ms, m.id)));
    let messages: Vec<Value> = all
        .iter()
        .take(limit)
        .map(|(t, m)| message_json(st, t.id, &t.address, m))
        .collect();
    let mut threads: Vec<_> = st
        .threads
        .iter()
        .filter(|t| all.iter().any(|(mt, _)| mt.id == t.id))
        .collect();
    threads.sort_by_key(|t| std::cmp::Reverse(t.messages.last().map_or(0, |m| m.at_ms)));
    let threads: Vec<Value> = threads
        .iter()
        .map(|t| {
            json!({
                "thread_id": t.id,
                "name": st.thread_name(t),
                "address": t.address,
                "message_count": t.messages.len(),
                "unread_count": t.messages.iter().filter(|m| !m.read).count(),
                "last_message": t.messages.last().map(|m| snippet(&m.body, 80)),
                "last_at": t.messages.last().map(|m| m.at_ms),
            })
        })
        .collect();
    Ok(Outcome::read(
        json!({ "count": messages.len(), "total": all.len(), "messages": messages, "threads": threads }),
    ))
}

fn recipient(
    st: &SimState,
    to: Option<&str>,
    contact_query: Option<&str>,
    to_field: &str,
) -> Result<Option<(String, Option<String>)>, DeviceError> {
    if let Some(to) = to {
        if looks_like_number(to) {
            let name = st.contact_for_number(to).map(|c| c.name.clone());
            return Ok(Some((to.to_string(), name)));
        }
        let contact = find_contact(st, to, to_field)?;
        let number = contact
            .phones
            .first()
            .map(|ph| ph.number.clone())
            .ok_or_else(|| {
                DeviceError::invalid(to_field, format!("{} has no phone number", contact.name))
            })?;
        return Ok(Some((number, Some(contact.name.clone()))));
    }
    if let Some(q) = contact_query {
        let contact = find_contact(st, q, "contact_query")?;
        let number = contact
            .phones
            .first()
            .map(|ph| ph.number.clone())
            .ok_or_else(|| {
                DeviceError::invalid(
                    "contact_query",
                    format!("{} has no phone number", contact.name),
                )
            })?;
        return Ok(Some((number, Some(contact.name.clone()))));
    }
    Ok(None)
}

pub(crate) fn messages_draft(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let body = p.text_req("body")?;
    check_len("body", body)?;
    let to = recipient(
        x.st,
        p.ident_opt("to")?,
        p.ident_opt("contact_query")?,
        "to",
    )?;
    let id = x.st.fresh_id();
    let number = to.as_ref().map(|(n, _)| n.clone());
    x.st.drafts.push(Draft {
        id,
        to: number.clone(),
        body: body.to_string(),
        at_ms: x.now,
    });
    perform(
        x.st,
        &Action::ComposeTo {
            address: number.clone().unwrap_or_default(),
            body: body.to_string(),
        },
        x.now,
    )?;
    let screen = screen_brief(x.st, x.now);
    Ok(Outcome::act(
        json!({
            "draft": { "draft_id": id, "to": number, "contact_name": to.and_then(|(_, n)| n), "body": body },
            "sent": false,
            "screen": screen,
        }),
        format!(
            "drafted a message to {}",
            number.as_deref().unwrap_or("(no recipient)")
        ),
    ))
}

pub(crate) fn messages_send(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let to = p.ident_req("to")?;
    let body = p.text_req("body")?;
    check_len("body", body)?;
    let (number, name) = recipient(x.st, Some(to), None, "to")?
        .ok_or_else(|| DeviceError::invalid("to", "is required"))?;
    let (thread_id, message_id) = send_sms(x.st, &number, body, x.now);
    let st = &*x.st;
    let message = st
        .thread(thread_id)
        .and_then(|t| {
            t.messages
                .iter()
                .find(|m| m.id == message_id)
                .map(|m| message_json(st, t.id, &t.address, m))
        })
        .unwrap_or(Value::Null);
    Ok(Outcome::act(
        json!({ "sent": true, "status": "sent", "to": number, "contact_name": name, "thread_id": thread_id, "message": message }),
        format!("sent message {message_id} to {number}"),
    ))
}

pub(crate) fn calls_search(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let query = p.ident_opt("query")?;
    let kind = match p.ident_opt("type")? {
        None => None,
        Some(t) => Some(CallType::parse(t).ok_or_else(|| {
            DeviceError::invalid(
                "type",
                "must be one of missed, incoming, outgoing, voicemail, rejected, blocked",
            )
        })?),
    };
    let since = p.time_bound("since")?;
    let until = p.time_bound("until")?;
    if let (Some(s), Some(u)) = (since, until)
        && u < s
    {
        return Err(DeviceError::invalid("until", "must not be before since"));
    }
    let limit = p.limit("limit", 20, 200)?;
    let st = &*x.st;
    let mut calls: Vec<_> = st
        .calls
        .iter()
        .filter(|c| kind.is_none_or(|k| c.call_type == k))
        .filter(|c| since.is_none_or(|s| c.at_ms >= s) && until.is_none_or(|u| c.at_ms <= u))
        .filter(|c| {
            query.is_none_or(|q| {
                numbers_match(&c.number, q)
                    || normalize_contains(&c.number, q)
                    || contains_ci(&st.name_for_number(&c.number), q)
            })
        })
        .collect();
    calls.sort_by_key(|c| std::cmp::Reverse((c.at_ms, c.id)));
    let list: Vec<Value> = calls.iter().take(limit).map(|c| call_json(st, c)).collect();
    Ok(Outcome::read(
        json!({ "count": list.len(), "total": calls.len(), "calls": list }),
    ))
}

pub(crate) fn calls_place(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let number = p.ident_opt("number")?;
    let contact_query = p.ident_opt("contact_query")?;
    if number.is_none() && contact_query.is_none() {
        return Err(DeviceError::invalid(
            "number",
            "give number or contact_query",
        ));
    }
    if let Some(n) = number
        && !looks_like_number(n)
    {
        return Err(DeviceError::invalid("number", "not a phone number"));
    }
    let (number, name) = recipient(x.st, number, contact_query, "number")?
        .ok_or_else(|| DeviceError::invalid("number", "is required"))?;
    let call_id = place_call(x.st, &number, x.now)?;
    let st = &*x.st;
    let call = st
        .calls
        .iter()
        .find(|c| c.id == call_id)
        .map_or(Value::Null, |c| call_json(st, c));
    let screen = screen_brief(st, x.now);
    Ok(Outcome::act(
        json!({ "placed": true, "state": "dialing", "number": number, "contact_name": name, "call": call, "screen": screen }),
        format!("called {number} (call {call_id})"),
    ))
}

// ---------------------------------------------------------------- UI input

fn check_point(st: &SimState, fx: &str, fy: &str, x: f64, y: f64) -> Result<(), DeviceError> {
    let (w, h) = st.screen();
    if !(0.0..f64::from(w)).contains(&x) {
        return Err(DeviceError::invalid(
            fx,
            format!("{x} is outside the screen (0 to {})", w - 1),
        ));
    }
    if !(0.0..f64::from(h)).contains(&y) {
        return Err(DeviceError::invalid(
            fy,
            format!("{y} is outside the screen (0 to {})", h - 1),
        ));
    }
    Ok(())
}

/// Runs the tap action of the node at index `idx` of `view`.
fn activate(
    x: &mut Exec<'_>,
    view: &View,
    idx: usize,
    long: bool,
) -> Result<(Value, String), DeviceError> {
    let node = view.nodes.get(idx).ok_or_else(|| DeviceError::Internal {
        message: "node index out of range".into(),
    })?;
    if !node.enabled {
        return Err(DeviceError::ElementDisabled {
            element_id: node.id.clone(),
        });
    }
    let element = view.element_json(idx, true);
    let action = if long {
        node.long_press.clone()
    } else {
        Some(node.tap.clone())
    };
    let Some(action) = action else {
        return Ok((element, "no long-press action here".into()));
    };
    // Touching anything while a popup is open dismisses the popup first.
    if !matches!(action, Action::Back | Action::Home | Action::Recents)
        && matches!(
            x.st.nav.overlay,
            Some(Overlay::Menu { .. } | Overlay::ShareSheet { .. })
        )
        && !matches!(action, Action::Menu { .. })
    {
        x.st.nav.overlay = None;
    }
    let summary = perform(x.st, &action, x.now)?;
    Ok((element, summary))
}

fn ui_result(x: &Exec<'_>, kind: &str, element: Value, effect: &str, extra: Value) -> Value {
    let mut out = json!({ "action": kind, "element": element, "effect": effect, "screen": screen_brief(x.st, x.now) });
    if let (Some(map), Value::Object(more)) = (out.as_object_mut(), extra) {
        map.extend(more);
    }
    out
}

fn press_at(
    x: &mut Exec<'_>,
    px: f64,
    py: f64,
    long: bool,
) -> Result<(Value, String), DeviceError> {
    let view = screens::build(x.st, x.now);
    let hit = view.nodes.iter().enumerate().rev().find(|(_, n)| {
        n.bounds.contains(px, py) && (n.clickable || n.editable || (long && n.long_clickable))
    });
    match hit {
        Some((idx, _)) => activate(x, &view, idx, long),
        None => Ok((Value::Null, "nothing to touch here".into())),
    }
}

fn press_element(x: &mut Exec<'_>, id: &str, long: bool) -> Result<(Value, String), DeviceError> {
    let view = screens::build(x.st, x.now);
    let Some(idx) = view.nodes.iter().position(|n| n.id == id) else {
        return Err(DeviceError::ElementNotFound {
            element_id: id.to_string(),
        });
    };
    let node = &view.nodes[idx];
    if node.bounds.is_empty() {
        return Err(DeviceError::ElementBoundsUnavailable {
            element_id: id.to_string(),
        });
    }
    let direct = if long {
        node.long_clickable || node.clickable
    } else {
        node.clickable || node.editable
    };
    if direct {
        return activate(x, &view, idx, long);
    }
    // A plain element (a label inside a row, something under a popup): a finger on its
    // centre touches whatever is on top there.
    if !node.enabled {
        return Err(DeviceError::ElementDisabled {
            element_id: id.to_string(),
        });
    }
    let (cx, cy) = node.bounds.center();
    press_at(x, f64::from(cx), f64::from(cy), long)
}

pub(crate) fn ui_tap(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let (px, py) = (p.f64_req("x")?, p.f64_req("y")?);
    check_point(x.st, "x", "y", px, py)?;
    let (element, effect) = press_at(x, px, py, false)?;
    let out = ui_result(x, "tap", element, &effect, json!({ "x": px, "y": py }));
    Ok(Outcome::act(out, format!("tap at ({px}, {py}): {effect}")))
}

pub(crate) fn ui_tap_element(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let id = p.ident_req("element_id")?;
    let (element, effect) = press_element(x, id, false)?;
    let out = ui_result(x, "tap", element, &effect, json!({}));
    Ok(Outcome::act(out, format!("tap {id}: {effect}")))
}

/// Android's long-press timeout: shorter presses are taps.
const LONG_PRESS_MS: i64 = 400;

fn press_duration(p: &Params<'_>) -> Result<i64, DeviceError> {
    match p.i64_opt("duration_ms")? {
        None => Ok(600),
        Some(d) if !(1..=10_000).contains(&d) => Err(DeviceError::invalid(
            "duration_ms",
            "must be between 1 and 10000",
        )),
        Some(d) => Ok(d),
    }
}

pub(crate) fn ui_long_press(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let (px, py) = (p.f64_req("x")?, p.f64_req("y")?);
    check_point(x.st, "x", "y", px, py)?;
    let duration = press_duration(&p)?;
    let long = duration >= LONG_PRESS_MS;
    let (element, effect) = press_at(x, px, py, long)?;
    let out = ui_result(
        x,
        if long { "long_press" } else { "tap" },
        element,
        &effect,
        json!({ "x": px, "y": py, "duration_ms": duration }),
    );
    Ok(Outcome::act(
        out,
        format!("long press at ({px}, {py}): {effect}"),
    ))
}

pub(crate) fn ui_long_press_element(
    x: &mut Exec<'_>,
    p: Params<'_>,
) -> Result<Outcome, DeviceError> {
    let id = p.ident_req("element_id")?;
    let duration = press_duration(&p)?;
    let long = duration >= LONG_PRESS_MS;
    let (element, effect) = press_element(x, id, long)?;
    let out = ui_result(
        x,
        if long { "long_press" } else { "tap" },
        element,
        &effect,
        json!({ "duration_ms": duration }),
    );
    Ok(Outcome::act(out, format!("long press {id}: {effect}")))
}

pub(crate) fn ui_swipe(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let (sx, sy, ex, ey) = (
        p.f64_req("start_x")?,
        p.f64_req("start_y")?,
        p.f64_req("end_x")?,
        p.f64_req("end_y")?,
    );
    check_point(x.st, "start_x", "start_y", sx, sy)?;
    check_point(x.st, "end_x", "end_y", ex, ey)?;
    let (dx, dy) = (ex - sx, ey - sy);
    let view = screens::build(x.st, x.now);
    let mut effect = "nothing to scroll here".to_string();
    let mut element = Value::Null;
    if dx.abs() < 24.0 && dy.abs() < 24.0 {
        effect = "too short to be a swipe".into();
    } else if dy.abs() >= dx.abs() {
        let target = view
            .nodes
            .iter()
            .enumerate()
            .rev()
            .find(|(_, n)| n.scrollable && n.bounds.contains(sx, sy))
            .or_else(|| view.nodes.iter().enumerate().find(|(_, n)| n.scrollable));
        if let Some((idx, node)) = target {
            element = view.element_json(idx, false);
            #[allow(clippy::cast_possible_truncation)]
            let delta = dy.round() as i32;
            let (current, max) = node.scroll;
            let next = if node.reverse {
                current + delta
            } else {
                current - delta
            }
            .clamp(0, max);
            if node.id == "app_grid" {
                x.st.nav.home_scroll = next;
            } else if let Some(page) = page_mut(x.st) {
                page.scroll = next;
            }
            effect = if next == current {
                "already at the end of the list".into()
            } else {
                format!("scrolled {} by {}px", node.id, (next - current).abs())
            };
        }
    } else if let Some((_, page, _)) = current_page(x.st)
        && matches!(page.route, Route::Agenda { .. })
        && x.st.nav.overlay.is_none()
    {
        // Horizontal swipes page through the calendar's days.
        let days = if dx < 0.0 { 1 } else { -1 };
        effect = perform(x.st, &Action::ShiftDay { days }, x.now)?;
    } else {
        effect = "nothing to swipe here".into();
    }
    let out = ui_result(
        x,
        "swipe",
        element,
        &effect,
        json!({ "start": {"x": sx, "y": sy}, "end": {"x": ex, "y": ey} }),
    );
    Ok(Outcome::act(out, format!("swipe: {effect}")))
}

/// The focused editable field, or `no_focused_field`.
fn focused(x: &Exec<'_>) -> Result<(String, bool, Option<Action>, bool), DeviceError> {
    let view = screens::build(x.st, x.now);
    let node = view.focused_field().ok_or(DeviceError::NoFocusedField)?;
    Ok((
        node.id.clone(),
        node.multiline,
        node.submit.clone(),
        node.enabled,
    ))
}

fn field_value(x: &Exec<'_>, id: &str) -> String {
    let view = screens::build(x.st, x.now);
    view.find(id)
        .and_then(|n| n.text.clone())
        .unwrap_or_default()
}

pub(crate) fn ui_type_text(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let text = p
        .str_opt("text")?
        .ok_or_else(|| DeviceError::invalid("text", "is required"))?;
    if text.is_empty() {
        return Err(DeviceError::invalid("text", "must not be empty"));
    }
    check_len("text", text)?;
    let (id, multiline, submit, enabled) = focused(x)?;
    if !enabled {
        return Err(DeviceError::ElementDisabled { element_id: id });
    }
    let mut submitted = false;
    if multiline {
        actions::type_into_focus(x.st, &id, text);
    } else {
        // A newline in a single-line field is the keyboard's action key.
        let mut parts = text.split('\n').peekable();
        while let Some(part) = parts.next() {
            actions::type_into_focus(x.st, &id, part);
            if parts.peek().is_some()
                && let Some(action) = &submit
            {
                perform(x.st, action, x.now)?;
                submitted = true;
                break;
            }
        }
    }
    let value = if submitted {
        Value::Null
    } else {
        json!(field_value(x, &id))
    };
    let out = ui_result(
        x,
        "type_text",
        json!({ "element_id": id }),
        if submitted {
            "typed and submitted"
        } else {
            "typed"
        },
        json!({ "typed": text, "value": value }),
    );
    Ok(Outcome::act(
        out,
        format!("typed {} characters into {id}", text.chars().count()),
    ))
}

pub(crate) fn press_key(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let key = p.ident_req("key")?.to_ascii_lowercase();
    let effect = match key.as_str() {
        "back" => actions::back(x.st, x.now),
        "home" => actions::home(x.st),
        "recents" | "app_switch" => perform(x.st, &Action::Recents, x.now)?,
        "enter" | "search" | "go" => match focused(x) {
            Ok((id, multiline, submit, _)) => match submit {
                Some(action) => perform(x.st, &action, x.now)?,
                None if multiline && key == "enter" => {
                    actions::type_into_focus(x.st, &id, "\n");
                    format!("new line in {id}")
                }
                None => "the focused field has no action for this key".into(),
            },
            Err(_) => "no focused field; the key did nothing".into(),
        },
        _ => {
            return Err(DeviceError::invalid(
                "key",
                "must be one of back, home, recents, enter, search, go",
            ));
        }
    };
    let out = ui_result(x, "press_key", Value::Null, &effect, json!({ "key": key }));
    Ok(Outcome::act(out, format!("pressed {key}: {effect}")))
}

// ---------------------------------------------------------------- clipboard, share

pub(crate) fn clipboard_set(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let text = p
        .str_opt("text")?
        .ok_or_else(|| DeviceError::invalid("text", "is required"))?;
    check_len("text", text)?;
    x.st.clipboard = Some(text.to_string());
    Ok(Outcome::act(
        json!({ "set": true, "length": text.chars().count() }),
        format!("clipboard set ({} characters)", text.chars().count()),
    ))
}

pub(crate) fn clipboard_paste(x: &mut Exec<'_>, _p: Params<'_>) -> Result<Outcome, DeviceError> {
    let (id, _, _, enabled) = focused(x)?;
    if !enabled {
        return Err(DeviceError::ElementDisabled { element_id: id });
    }
    let clip =
        x.st.clipboard
            .clone()
            .filter(|c| !c.is_empty())
            .ok_or(DeviceError::ClipboardEmpty)?;
    actions::type_into_focus(x.st, &id, &clip);
    let value = field_value(x, &id);
    let out = ui_result(
        x,
        "paste",
        json!({ "element_id": id }),
        "pasted",
        json!({ "pasted": clip, "value": value }),
    );
    Ok(Outcome::act(
        out,
        format!("pasted {} characters into {id}", clip.chars().count()),
    ))
}

pub(crate) fn share_text(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let text = p.text_req("text")?;
    check_len("text", text)?;
    let chooser_title = p.ident_opt("chooser_title")?.map(str::to_string);
    let id = x.st.fresh_id();
    x.st.shares.push(Share {
        id,
        text: text.to_string(),
        chooser_title: chooser_title.clone(),
        at_ms: x.now,
        target: None,
    });
    x.st.nav.overlay = Some(Overlay::ShareSheet { share_id: id });
    let screen = screen_brief(x.st, x.now);
    Ok(Outcome::act(
        json!({ "shared": true, "share_id": id, "chooser_title": chooser_title, "targets": ["messages", "notes", "copy"], "screen": screen }),
        format!("opened the share sheet for share {id}"),
    ))
}
