//! Device events: which active `message`, `call` and `notification` watcher an event is
//! for ([`Watchers::handle_event`]) — the party matched by name or number, the deadline, the
//! evaluator (a `semantic_match` asks the judge) — and what a match does (fires it, or
//! satisfies and ends a `no_reply` / `no_call` watcher).

#![deny(clippy::wildcard_enum_match_arm)]

use openphone_core::WakeSender;
use openphone_device::{DeviceEvent, OPENPHONE_PACKAGE};
use serde_json::{Map, Value};

use super::fire::digest;
use super::{Fired, Watchers};
use crate::spec::{CallDirection, Evaluator, NotifyOn, Source, WatcherSpec};

pub(super) fn contains_ci(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

fn digits(text: &str) -> String {
    text.chars().filter(char::is_ascii_digit).collect()
}

/// Whether `want` (a number or a name) names the party `address` / `name`: the same name
/// (case-insensitive), the same digits, or (7 digits or more) one number ending with the
/// other (national and international spellings).
fn same_party(want: &str, address: &str, name: Option<&str>) -> bool {
    let want = want.trim();
    if want.eq_ignore_ascii_case(address.trim())
        || name.is_some_and(|n| n.trim().eq_ignore_ascii_case(want))
    {
        return true;
    }
    let (a, b) = (digits(want), digits(address));
    if a.len() < 3 || b.len() < 3 {
        return false;
    }
    if a == b {
        return true;
    }
    let (short, long) = if a.len() < b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let short = short.trim_start_matches('0');
    short.len() >= 7 && long.ends_with(short)
}

/// What an event means for one watcher.
enum Verdict {
    /// Not its business.
    No,
    /// A match.
    Yes,
    /// A match if the judge says the content meets the condition.
    Judge(String),
}

fn text_verdict(spec: &WatcherSpec, content: String) -> Verdict {
    match (spec.evaluator, spec.query.as_deref()) {
        (None | Some(Evaluator::HashChange), _) => Verdict::Yes,
        (Some(Evaluator::TextContains), Some(q)) => {
            if contains_ci(&content, q) {
                Verdict::Yes
            } else {
                Verdict::No
            }
        }
        (Some(Evaluator::TextContains), None) => Verdict::No,
        (Some(Evaluator::SemanticMatch), _) => Verdict::Judge(content),
    }
}

fn event_verdict(spec: &WatcherSpec, event: &DeviceEvent) -> Verdict {
    match (spec.source, event) {
        (
            Source::Message,
            DeviceEvent::MessageReceived {
                thread_id,
                address,
                name,
                text,
                at_ms,
            },
        ) => {
            if spec.thread_id.is_some_and(|t| t != *thread_id)
                || spec
                    .address
                    .as_deref()
                    .is_some_and(|want| !same_party(want, address, name.as_deref()))
                || spec.deadline_at.is_some_and(|d| *at_ms > d)
            {
                return Verdict::No;
            }
            text_verdict(spec, text.clone())
        }
        (
            Source::Call,
            DeviceEvent::CallReceived {
                number,
                name,
                direction,
                outcome,
                at_ms,
            },
        ) => {
            let direction_ok = match spec.direction {
                None | Some(CallDirection::Any) => true,
                Some(CallDirection::Incoming) => direction == "incoming",
                Some(CallDirection::Outgoing) => direction == "outgoing",
            };
            if !direction_ok
                || spec.deadline_at.is_some_and(|d| *at_ms > d)
                || (!spec.match_any
                    && !spec
                        .number
                        .as_deref()
                        .is_some_and(|want| same_party(want, number, name.as_deref())))
            {
                return Verdict::No;
            }
            text_verdict(
                spec,
                format!(
                    "{} call from {} {number}",
                    outcome,
                    name.as_deref().unwrap_or_default()
                ),
            )
        }
        (
            Source::Notification,
            DeviceEvent::NotificationPosted {
                app,
                package,
                title,
                text,
                ..
            },
        ) => {
            // The runtime's own notifications are not news from the world (and a watcher on
            // them could feed itself).
            if package == OPENPHONE_PACKAGE {
                return Verdict::No;
            }
            text_verdict(spec, format!("{app}: {title}\n{text}"))
        }
        // An event of another kind (every kind named: a new one must be decided here), or a
        // source that never looks at device events.
        (
            Source::Message | Source::Call | Source::Notification,
            DeviceEvent::MessageReceived { .. }
            | DeviceEvent::CallReceived { .. }
            | DeviceEvent::NotificationPosted { .. }
            | DeviceEvent::NotificationAction { .. },
        )
        | (Source::Screen | Source::Time | Source::Web, _) => Verdict::No,
    }
}

/// An event as a JSON object (the `{{event.*}}` names, the reaction's data).
fn event_object(event: &DeviceEvent) -> Map<String, Value> {
    match serde_json::to_value(event) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

impl Watchers {
    /// Lets every active `message`, `call` and `notification` watcher look at a device event;
    /// returns the firings.
    pub async fn handle_event(&self, event: &DeviceEvent) -> Vec<Fired> {
        let _serial = self.serial.lock().await;
        let now = self.bridge.now_ms();
        let object = event_object(event);
        let key = format!("event:{}", digest(&Value::Object(object.clone())));
        let mut fired = Vec::new();
        // The `[wake]` allowlists, asked once per event (`openphone_core::wake`): a sender
        // that may not wake a runtime fires no watcher, and the drop is audited.
        let sender = wake_sender(event);
        let admitted = sender
            .as_ref()
            .is_none_or(|(_, sender)| self.bridge.wake_admits(sender));
        let mut dropped = Vec::new();
        for (w, spec) in self.active() {
            let verdict = event_verdict(&spec, event);
            if matches!(verdict, Verdict::No) {
                continue;
            }
            // A reply that only ends a `no_reply` / `no_call` watcher wakes nobody; anything
            // else would.
            if !admitted && spec.notify_on != NotifyOn::Absence {
                dropped.push(w.watcher_id);
                continue;
            }
            // A creator that may no longer read what the watcher watches gets nothing from it.
            if let Some(why) = self.creators_refusal(&w, &spec) {
                tracing::warn!(watcher = w.watcher_id, runtime = %w.runtime, reason = %why,
                    "watchers: the creator may not read this event; the watcher skips it");
                continue;
            }
            let matched = match verdict {
                Verdict::No => false,
                Verdict::Yes => true,
                Verdict::Judge(content) => self.judged(&spec, &content).await,
            };
            if !matched {
                continue;
            }
            if spec.notify_on == NotifyOn::Absence {
                let reason = match spec.source {
                    Source::Call => "call_received",
                    Source::Message
                    | Source::Notification
                    | Source::Screen
                    | Source::Time
                    | Source::Web => "reply_received",
                };
                if let Err(e) = self.store.end_watcher(w.watcher_id, reason, now) {
                    tracing::error!(watcher = w.watcher_id, error = %e, "ending a satisfied watcher");
                }
                continue;
            }
            let end = !spec.recurring;
            match self
                .fire(
                    &w,
                    &spec,
                    "event",
                    object.clone(),
                    key.clone(),
                    end,
                    None,
                    now,
                )
                .await
            {
                Ok(Some(f)) => fired.push(f),
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(watcher = w.watcher_id, error = %e, "a watcher could not fire");
                }
            }
        }
        if let Some((source, sender)) = sender.filter(|_| !dropped.is_empty()) {
            self.bridge.record_wake_dropped(source, &sender, &dropped);
        }
        fired
    }
}

/// Who a device event is from, for the `[wake]` allowlists, with its source name; `None` for
/// events nobody sent (a notification action is the user's own tap).
fn wake_sender(event: &DeviceEvent) -> Option<(&'static str, WakeSender<'_>)> {
    match event {
        DeviceEvent::MessageReceived { address, name, .. } => Some((
            "message",
            WakeSender::Contact {
                address,
                name: name.as_deref(),
            },
        )),
        DeviceEvent::CallReceived { number, name, .. } => Some((
            "call",
            WakeSender::Contact {
                address: number,
                name: name.as_deref(),
            },
        )),
        DeviceEvent::NotificationPosted { app, package, .. } => {
            Some(("notification", WakeSender::App { app, package }))
        }
        DeviceEvent::NotificationAction { .. } => None,
    }
}
