//! JSON views of the state's records, as the commands return them.

use serde_json::{Value, json};

use crate::sim::state::{Call, Contact, Direction, Event, Message, Notification, SimState};
use crate::sim::time;
use crate::world::{OPENPHONE_APP, OPENPHONE_PACKAGE};

pub(crate) fn app_label(st: &SimState, package: &str) -> String {
    if package == OPENPHONE_PACKAGE {
        return OPENPHONE_APP.to_string();
    }
    st.app(package)
        .map_or_else(|| package.to_string(), |a| a.label.clone())
}

pub(super) fn notification_json(st: &SimState, n: &Notification) -> Value {
    let mut v = json!({
        "notification_key": n.key,
        "package": n.package,
        "app_label": app_label(st, &n.package),
        "title": n.title,
        "text": n.text,
        "posted_at": n.posted_ms,
        "read": n.read,
    });
    // Shown as what they are (labels); no command presses them.
    if !n.actions.is_empty()
        && let Some(map) = v.as_object_mut()
    {
        let labels: Vec<&str> = n.actions.iter().map(|a| a.label.as_str()).collect();
        map.insert("action_labels".into(), json!(labels));
    }
    v
}

pub(super) fn event_json(st: &SimState, e: &Event) -> Value {
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

pub(super) fn call_json(st: &SimState, c: &Call) -> Value {
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

pub(super) fn message_json(st: &SimState, thread_id: i64, address: &str, m: &Message) -> Value {
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

pub(super) fn contact_json(c: &Contact, details: bool) -> Value {
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
