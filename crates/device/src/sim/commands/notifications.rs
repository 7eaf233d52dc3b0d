//! Listing, searching and opening notifications.

use serde_json::{Value, json};

use crate::params::Params;
use crate::sim::actions::{open_deep, role_package};
use crate::sim::model::contains_ci;
use crate::sim::screens;
use crate::sim::state::{AppRole, Notification, NotificationTarget, Route, SimState};
use crate::world::OPENPHONE_PACKAGE;
use crate::{DeviceError, EntityKind};

use super::apps::open_url;
use super::records::{app_label, notification_json};
use super::{Exec, Outcome, screen_brief};

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
    open_target(st, &n, now)?;
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

/// Goes where opening `n` leads (the shade closes): its thread, event, call log, page or
/// screen, else the posting app's start page. The runtime's own notifications lead nowhere:
/// opening one only marks it read (its decisions are taken elsewhere, never by a tap).
pub(crate) fn open_target(
    st: &mut SimState,
    n: &Notification,
    now: i64,
) -> Result<(), DeviceError> {
    if let Some(stored) = st.notifications.iter_mut().find(|m| m.key == n.key) {
        stored.read = true;
    }
    st.nav.overlay = None;
    if n.package == OPENPHONE_PACKAGE {
        return Ok(());
    }
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
    Ok(())
}
