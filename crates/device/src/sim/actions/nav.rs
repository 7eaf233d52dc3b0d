//! Navigation: the foreground task and page, launching apps, deep links, pushing and
//! popping pages, and the back and home keys; with what opening or leaving a page does to the
//! records (a thread marked read when shown, the note editor saved when left).

use crate::DeviceError;
use crate::sim::screens::{current_page, route_name, start_route};
use crate::sim::state::{AppRole, Note, NotificationTarget, Page, Route, SimState, Task};
use crate::sim::time;

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
pub(super) fn pop(st: &mut SimState) {
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
        Some((_, page, _)) => format!("went back to {}", route_name(&page.route)),
        None => "went back to the home screen".into(),
    }
}

/// The home key.
pub(crate) fn home(st: &mut SimState) -> String {
    st.nav.overlay = None;
    st.nav.foreground = None;
    "went to the home screen".into()
}

/// Marks a thread and its notifications read (the thread was shown).
pub(super) fn mark_thread_read(st: &mut SimState, thread_id: i64) {
    if let Some(t) = st.threads.iter_mut().find(|t| t.id == thread_id) {
        for m in &mut t.messages {
            m.read = true;
        }
    }
    for n in &mut st.notifications {
        if n.target == (NotificationTarget::Thread { thread_id }) {
            n.read = true;
        }
    }
}

/// Saves the note editor's fields; returns a summary.
pub(super) fn save_note(st: &mut SimState, now: i64) -> String {
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
