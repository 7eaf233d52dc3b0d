//! The simulated phone's world: what an operator (or the scenario's timeline) makes happen —
//! a message arrives, a call comes in, an app posts a notification, the user presses a
//! notification's button — and the runtime's own notifications in the shade.
//!
//! Each function changes a [`SimState`] (the caller runs it on a copy that replaces the state
//! only on success) and returns the [`DeviceEvent`]s it raised, in order.

use crate::sim::model::{contains_ci, looks_like_number, normalize_number};
use crate::sim::state::{
    AppRole, Call, CallType, Direction, Message, Notification, NotificationButton,
    NotificationTarget, SimState, Thread, WebPage,
};
use crate::world::{DeviceEvent, Injection, OPENPHONE_APP, OPENPHONE_PACKAGE, SystemNotification};
use crate::{DeviceError, EntityKind};

/// Longest text an injection or a system notification may carry (characters).
const MAX_TEXT: usize = 10_000;
/// Most action buttons on one notification.
const MAX_ACTIONS: usize = 3;

fn required<'a>(field: &str, text: &'a str) -> Result<&'a str, DeviceError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(DeviceError::invalid(field, "must not be empty"));
    }
    if text.chars().count() > MAX_TEXT {
        return Err(DeviceError::invalid(
            field,
            format!("longer than {MAX_TEXT} characters"),
        ));
    }
    Ok(trimmed)
}

fn bounded(field: &str, text: &str) -> Result<(), DeviceError> {
    if text.chars().count() > MAX_TEXT {
        return Err(DeviceError::invalid(
            field,
            format!("longer than {MAX_TEXT} characters"),
        ));
    }
    Ok(())
}

/// Applies one injection; returns the events it raised (the first is the one it is about).
pub(crate) fn inject(
    st: &mut SimState,
    injection: &Injection,
    now: i64,
) -> Result<Vec<DeviceEvent>, DeviceError> {
    match injection {
        Injection::Message { address, text } => message(st, address, text, now),
        Injection::Call { number, outcome } => call(st, number, outcome.as_deref(), now),
        Injection::Notification { app, title, text } => notification(st, app, title, text, now),
        Injection::NotificationAction { key, action } => press_action(st, key, action, now),
    }
}

/// Where a message from `address` lands: (thread id if one exists, the thread address for a
/// new one, the sender's contact name).
fn sender(
    st: &SimState,
    address: &str,
) -> Result<(Option<i64>, String, Option<String>), DeviceError> {
    if looks_like_number(address) {
        let name = st.contact_for_number(address).map(|c| c.name.clone());
        return Ok(match st.thread_for_number(address) {
            Some(t) => (Some(t.id), t.address.clone(), name),
            None => (None, normalize_number(address), name),
        });
    }
    // A sender by name: a thread already shown under it (a short code, a business) …
    if let Some(t) = st.threads.iter().find(|t| {
        t.address.eq_ignore_ascii_case(address)
            || t.display_name
                .as_deref()
                .is_some_and(|n| n.eq_ignore_ascii_case(address))
    }) {
        let name = st.contact_for_number(&t.address).map(|c| c.name.clone());
        return Ok((Some(t.id), t.address.clone(), name));
    }
    // … a contact's name (their first number) …
    if let Some(contact) = st
        .contacts
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(address))
        .or_else(|| {
            let found: Vec<_> = st
                .contacts
                .iter()
                .filter(|c| contains_ci(&c.name, address))
                .collect();
            (found.len() == 1).then(|| found[0])
        })
    {
        let number = contact
            .phones
            .first()
            .map(|p| p.number.clone())
            .ok_or_else(|| {
                DeviceError::invalid(
                    "address",
                    format!("{} has no phone number to send from", contact.name),
                )
            })?;
        let thread = st.thread_for_number(&number).map(|t| t.id);
        return Ok((thread, number, Some(contact.name.clone())));
    }
    // … else a new sender named so (as a short code shows up).
    Ok((None, address.to_owned(), None))
}

/// Posts or updates (by key) a notification of an app, unread, newest.
fn upsert_notification(st: &mut SimState, n: Notification) {
    match st.notifications.iter_mut().find(|m| m.key == n.key) {
        Some(existing) => *existing = n,
        None => st.notifications.push(n),
    }
}

fn package_of(st: &SimState, role: AppRole) -> Result<(String, String), DeviceError> {
    st.app_by_role(role)
        .map(|a| (a.package.clone(), a.label.clone()))
        .ok_or_else(|| DeviceError::AppNotFound {
            query: format!("the {role:?} app").to_lowercase(),
        })
}

fn posted(n: &Notification, app: &str) -> DeviceEvent {
    DeviceEvent::NotificationPosted {
        key: n.key.clone(),
        app: app.to_owned(),
        package: n.package.clone(),
        title: n.title.clone(),
        text: n.text.clone(),
        at_ms: n.posted_ms,
    }
}

fn message(
    st: &mut SimState,
    address: &str,
    text: &str,
    now: i64,
) -> Result<Vec<DeviceEvent>, DeviceError> {
    let address = required("address", address)?;
    if text.trim().is_empty() {
        return Err(DeviceError::invalid("text", "must not be empty"));
    }
    bounded("text", text)?;
    let (package, app) = package_of(st, AppRole::Messages)?;
    let (thread, thread_address, name) = sender(st, address)?;
    let message_id = st.fresh_id();
    let message = Message {
        id: message_id,
        direction: Direction::Incoming,
        body: text.to_owned(),
        at_ms: now,
        read: false,
    };
    let thread_id = match thread.and_then(|id| st.threads.iter_mut().find(|t| t.id == id)) {
        Some(t) => {
            t.messages.push(message);
            t.id
        }
        None => {
            let id = st.fresh_id();
            st.threads.push(Thread {
                id,
                address: thread_address.clone(),
                display_name: None,
                messages: vec![message],
            });
            id
        }
    };
    let shown = st
        .thread(thread_id)
        .map_or_else(|| thread_address.clone(), |t| st.thread_name(t));
    // One notification per conversation, updated in place, as a phone's Messages app does.
    let n = Notification {
        key: format!("sms-thread-{thread_id}"),
        package,
        title: shown,
        text: text.to_owned(),
        posted_ms: now,
        read: false,
        target: NotificationTarget::Thread { thread_id },
        actions: Vec::new(),
    };
    upsert_notification(st, n.clone());
    Ok(vec![
        DeviceEvent::MessageReceived {
            thread_id,
            address: thread_address,
            name,
            text: text.to_owned(),
            at_ms: now,
        },
        posted(&n, &app),
    ])
}

fn call(
    st: &mut SimState,
    number: &str,
    outcome: Option<&str>,
    now: i64,
) -> Result<Vec<DeviceEvent>, DeviceError> {
    let given = required("number", number)?;
    let (number, name) = if looks_like_number(given) {
        (
            normalize_number(given),
            st.contact_for_number(given).map(|c| c.name.clone()),
        )
    } else {
        let contact = st
            .contacts
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(given))
            .ok_or_else(|| {
                DeviceError::invalid("number", "not a phone number nor a contact's name")
            })?;
        let number = contact
            .phones
            .first()
            .map(|p| p.number.clone())
            .ok_or_else(|| {
                DeviceError::invalid("number", format!("{} has no phone number", contact.name))
            })?;
        (number, Some(contact.name.clone()))
    };
    let outcome = outcome.map_or("missed".to_owned(), |o| o.trim().to_lowercase());
    let call_type = match outcome.as_str() {
        "missed" => CallType::Missed,
        "answered" => CallType::Incoming,
        "rejected" => CallType::Rejected,
        _ => {
            return Err(DeviceError::invalid(
                "outcome",
                "must be missed, answered or rejected",
            ));
        }
    };
    let call_id = st.fresh_id();
    st.calls.push(Call {
        id: call_id,
        number: number.clone(),
        call_type,
        at_ms: now,
        duration_s: 0,
    });
    let mut events = vec![DeviceEvent::CallReceived {
        number: number.clone(),
        name: name.clone(),
        direction: "incoming".to_owned(),
        outcome: outcome.clone(),
        at_ms: now,
    }];
    if call_type == CallType::Missed {
        let (package, app) = package_of(st, AppRole::Phone)?;
        let n = Notification {
            key: format!("missed-call-{call_id}"),
            package,
            title: "Missed call".to_owned(),
            text: name.unwrap_or(number),
            posted_ms: now,
            read: false,
            target: NotificationTarget::CallLog,
            actions: Vec::new(),
        };
        upsert_notification(st, n.clone());
        events.push(posted(&n, &app));
    }
    Ok(events)
}

fn notification(
    st: &mut SimState,
    app: &str,
    title: &str,
    text: &str,
    now: i64,
) -> Result<Vec<DeviceEvent>, DeviceError> {
    let app = required("app", app)?;
    let title = required("title", title)?;
    bounded("text", text)?;
    if app == OPENPHONE_PACKAGE || app.eq_ignore_ascii_case(OPENPHONE_APP) {
        return Err(DeviceError::invalid(
            "app",
            "the runtime's own notifications are posted by the runtime, not injected",
        ));
    }
    let (package, label) = st
        .apps
        .iter()
        .find(|a| a.package == app || a.label.eq_ignore_ascii_case(app))
        .map(|a| (a.package.clone(), a.label.clone()))
        .ok_or_else(|| DeviceError::AppNotFound {
            query: app.to_owned(),
        })?;
    let key = format!("sim-{}", st.fresh_id());
    let n = Notification {
        key,
        package,
        title: title.to_owned(),
        text: text.to_owned(),
        posted_ms: now,
        read: false,
        target: NotificationTarget::App,
        actions: Vec::new(),
    };
    upsert_notification(st, n.clone());
    Ok(vec![posted(&n, &label)])
}

fn press_action(
    st: &mut SimState,
    key: &str,
    action: &str,
    now: i64,
) -> Result<Vec<DeviceEvent>, DeviceError> {
    let key = required("key", key)?;
    let action = required("action", action)?;
    let n = st
        .notifications
        .iter_mut()
        .find(|n| n.key == key)
        .ok_or_else(|| DeviceError::not_found(EntityKind::Notification, key))?;
    if !n.actions.iter().any(|a| a.id == action) {
        let offered: Vec<&str> = n.actions.iter().map(|a| a.id.as_str()).collect();
        return Err(DeviceError::invalid(
            "action",
            if offered.is_empty() {
                format!("notification {key} has no action buttons")
            } else {
                format!(
                    "notification {key} has no action `{action}` (it offers {})",
                    offered.join(", ")
                )
            },
        ));
    }
    n.read = true;
    Ok(vec![DeviceEvent::NotificationAction {
        key: key.to_owned(),
        action: action.to_owned(),
        at_ms: now,
    }])
}

/// Posts (or updates in place) one of the runtime's own notifications.
pub(crate) fn post_system(
    st: &mut SimState,
    notification: &SystemNotification,
    now: i64,
) -> Result<Vec<DeviceEvent>, DeviceError> {
    let key = required("key", &notification.key)?;
    let title = required("title", &notification.title)?;
    bounded("body", &notification.body)?;
    if notification.actions.len() > MAX_ACTIONS {
        return Err(DeviceError::invalid(
            "actions",
            format!("at most {MAX_ACTIONS} action buttons"),
        ));
    }
    let mut actions: Vec<NotificationButton> = Vec::new();
    for (id, label) in &notification.actions {
        let id = required("actions", id)?;
        let label = required("actions", label)?;
        if actions.iter().any(|a| a.id == id) {
            return Err(DeviceError::invalid(
                "actions",
                format!("action `{id}` is given twice"),
            ));
        }
        actions.push(NotificationButton {
            id: id.to_owned(),
            label: label.to_owned(),
        });
    }
    if let Some(other) = st
        .notifications
        .iter()
        .find(|n| n.key == key && n.package != OPENPHONE_PACKAGE)
    {
        return Err(DeviceError::invalid(
            "key",
            format!(
                "{key} is a notification of {}, not of the runtime",
                other.package
            ),
        ));
    }
    let n = Notification {
        key: key.to_owned(),
        package: OPENPHONE_PACKAGE.to_owned(),
        title: title.to_owned(),
        text: notification.body.clone(),
        posted_ms: now,
        read: false,
        target: NotificationTarget::App,
        actions,
    };
    upsert_notification(st, n.clone());
    Ok(vec![posted(&n, OPENPHONE_APP)])
}

/// Removes one of the runtime's own notifications; whether it was there.
pub(crate) fn withdraw_system(st: &mut SimState, key: &str) -> bool {
    let before = st.notifications.len();
    st.notifications
        .retain(|n| !(n.key == key && n.package == OPENPHONE_PACKAGE));
    st.notifications.len() != before
}

/// Adds a web page, or replaces the one with the same URL.
pub(crate) fn put_page(st: &mut SimState, page: WebPage) {
    let url = page.url.trim_end_matches('/').to_owned();
    match st
        .web_pages
        .iter_mut()
        .find(|p| p.url.trim_end_matches('/') == url)
    {
        Some(existing) => *existing = page,
        None => st.web_pages.push(page),
    }
}
