//! Messages (search, draft, send) and calls (search, place).

use serde_json::{Value, json};

use crate::params::Params;
use crate::sim::actions::{find_contact, perform, place_call, send_sms};
use crate::sim::model::{
    contains_ci, looks_like_number, normalize_contains, numbers_match, snippet,
};
use crate::sim::state::{Action, CallType, Draft, Message, SimState, Thread};
use crate::{DeviceError, EntityKind};

use super::records::{call_json, message_json};
use super::{Exec, Outcome, check_len, screen_brief};

pub(crate) fn messages_search(x: &mut Exec<'_>, p: Params<'_>) -> Result<Outcome, DeviceError> {
    let query = p.ident_opt("query")?;
    let limit = p.limit("limit", 20, 200)?;
    let thread_id = match p.i64_opt("thread_id")? {
        None | Some(0) => None,
        Some(id) if x.st.thread(id).is_some() => Some(id),
        Some(id) => return Err(DeviceError::not_found(EntityKind::Thread, id)),
    };
    let st = &*x.st;
    let mut all: Vec<(&Thread, &Message)> = st
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
