//! Device status, finding and opening apps, and opening URLs (in the browser or as deep
//! links into an app).

use serde_json::{Value, json};

use crate::params::Params;
use crate::sim::actions::{self, launch, open_deep, page_mut, perform, role_package};
use crate::sim::model::{contains_ci, looks_like_number, numbers_match};
use crate::sim::screens;
use crate::sim::state::{Action, AppRole, Message, Route, SimState, Thread};
use crate::sim::time;
use crate::{DeviceError, EntityKind};

use super::records::{
    app_label, call_json, contact_json, event_json, message_json, notification_json,
};
use super::status::{StatusArgs, device_json, plain_status};
use super::{Exec, Outcome, screen_brief};

pub(crate) fn device_status(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let st = &*x.st;
    let StatusArgs {
        limit,
        query,
        number,
    } = StatusArgs::parse(p)?;
    if query.is_none() && number.is_none() {
        return Ok(Outcome::read(plain_status(st, x.now)));
    }
    let off = st.offset();
    let today = time::local_day(x.now, off);
    let device = device_json(st, x.now);
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
    let mut msgs: Vec<(i64, &Thread, &Message)> = st
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
