//! Sender allowlists (seed 002 §2, layer 2 of OpenClaw's stack): which contacts' messages and
//! calls, and which apps' notifications, may wake a runtime — fire a watcher, and through it
//! raise an attention request or start a job.
//!
//! `[wake]` in the configuration: `contacts = [...]` (names or numbers, matched like a
//! watcher's `address`: the same name ignoring case, the same digits, or — seven digits or
//! more — one number ending with the other) and `apps = [...]` (an app's name ignoring case,
//! or its package exactly). A list that is absent admits everyone (the behaviour before the
//! table existed); a present list admits only its entries, so `contacts = []` lets no contact
//! wake anything.
//!
//! The runtime's own notifications (package `org.openphone.runtime`) are nobody's: every list
//! admits them.
//!
//! A phone event reaches a runtime's work along two paths, and both ask
//! [`ToolBridge::wake_admits`]: the watchers engine, before a device event fires a watcher
//! (whose reaction raises an attention request or starts a job), and the goal engine, before a
//! bus event (`phone.message.received`, `phone.call.received`, `phone.notification.posted`;
//! [`event_sender`]) ends a goal's `wait` or ticks a goal. Nothing else hands phone events to a
//! runtime: the bus sends them to operators only.
//!
//! A wake that is refused is never dropped silently: [`ToolBridge::record_wake_dropped`]
//! (watchers) and [`ToolBridge::record_goal_wake_dropped`] (goals) write a `wake.dropped`
//! audit record (the sender as a digest, the app's package, the watchers or goals it would
//! have woken; never the message's text) and log a line.

use std::sync::RwLock;

use openphone_protocol::endpoint::{AuditCaller, AuditEntry, AuditKind};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use openphone_device::world::OPENPHONE_PACKAGE;

use crate::ToolBridge;

/// `[wake]`: who may wake a runtime.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WakeConfig {
    /// Contacts whose messages and calls may wake a runtime (absent: everyone).
    pub contacts: Option<Vec<String>>,
    /// Apps whose notifications may wake a runtime (absent: every app).
    pub apps: Option<Vec<String>>,
}

/// Who an incoming event is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeSender<'a> {
    /// A message's or a call's party.
    Contact {
        /// The number or address.
        address: &'a str,
        /// The contact's name, when the phone knows it.
        name: Option<&'a str>,
    },
    /// A notification's app.
    App { app: &'a str, package: &'a str },
}

impl WakeSender<'_> {
    /// `contacts` or `apps`: the list that decides.
    pub fn list(&self) -> &'static str {
        match self {
            WakeSender::Contact { .. } => "contacts",
            WakeSender::App { .. } => "apps",
        }
    }
}

fn digits(text: &str) -> String {
    text.chars().filter(char::is_ascii_digit).collect()
}

/// Whether the allowlist entry `want` names the party `address` / `name`.
fn names_party(want: &str, address: &str, name: Option<&str>) -> bool {
    let want = want.trim();
    if want.is_empty() {
        return false;
    }
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

impl WakeConfig {
    /// Whether `sender` may wake a runtime.
    pub fn admits(&self, sender: &WakeSender<'_>) -> bool {
        match sender {
            WakeSender::Contact { address, name } => self
                .contacts
                .as_ref()
                .is_none_or(|list| list.iter().any(|want| names_party(want, address, *name))),
            WakeSender::App { package, .. } if *package == OPENPHONE_PACKAGE => true,
            WakeSender::App { app, package } => self.apps.as_ref().is_none_or(|list| {
                list.iter().any(|want| {
                    let want = want.trim();
                    !want.is_empty() && (want.eq_ignore_ascii_case(app.trim()) || want == *package)
                })
            }),
        }
    }
}

/// Who the bus event `event` (its manifest name and payload) is from, with its source name
/// (`message`, `call`, `notification`); `None` for events nobody sent (a notification action
/// is the user's own tap; `watcher.fired` and `runtime.message.final` come from the runtime).
/// A payload without the party's field names the empty address, which no list admits.
pub fn event_sender<'a>(event: &str, payload: &'a Value) -> Option<(&'static str, WakeSender<'a>)> {
    let field = |key: &str| payload.get(key).and_then(Value::as_str);
    match event {
        "phone.message.received" => Some((
            "message",
            WakeSender::Contact {
                address: field("address").unwrap_or_default(),
                name: field("name"),
            },
        )),
        "phone.call.received" => Some((
            "call",
            WakeSender::Contact {
                address: field("number").unwrap_or_default(),
                name: field("name"),
            },
        )),
        "phone.notification.posted" => Some((
            "notification",
            WakeSender::App {
                app: field("app").unwrap_or_default(),
                package: field("package").unwrap_or_default(),
            },
        )),
        _ => None,
    }
}

/// The bridge's `[wake]` table.
#[derive(Debug, Default)]
pub(crate) struct WakeState {
    config: RwLock<WakeConfig>,
}

impl ToolBridge {
    /// Replaces the `[wake]` configuration (at start).
    pub fn set_wake_config(&self, config: WakeConfig) {
        *self
            .gating
            .wake
            .config
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = config;
    }

    /// Whether `sender` may wake a runtime under the `[wake]` table. A refusal must be
    /// recorded with [`ToolBridge::record_wake_dropped`].
    pub fn wake_admits(&self, sender: &WakeSender<'_>) -> bool {
        self.gating
            .wake
            .config
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .admits(sender)
    }

    /// Records a wake the `[wake]` table refused: `source` (`message`, `call`,
    /// `notification`), the sender (a digest for a contact; the app's name and package) and
    /// the watchers it would have fired. The record holds no message text. Failing to write it
    /// is logged.
    pub fn record_wake_dropped(&self, source: &str, sender: &WakeSender<'_>, watchers: &[i64]) {
        self.record_dropped(source, sender, "watchers", ("watcher_ids", json!(watchers)));
    }

    /// Records a phone event the `[wake]` table kept from the goals it would have woken
    /// (`goal_ids`: goals whose `wait` it would have ended, or that it would have ticked). Like
    /// [`ToolBridge::record_wake_dropped`], the record holds no message text.
    pub fn record_goal_wake_dropped(
        &self,
        source: &str,
        sender: &WakeSender<'_>,
        goals: &[String],
    ) {
        self.record_dropped(source, sender, "goals", ("goal_ids", json!(goals)));
    }

    fn record_dropped(
        &self,
        source: &str,
        sender: &WakeSender<'_>,
        woken_by: &str,
        (key, woken): (&str, Value),
    ) {
        let now = self.now_ms();
        let who = match sender {
            WakeSender::Contact { address, name } => json!({
                "sender_digest": format!(
                    "sha256:{}",
                    openphone_protocol::digest::sha256_hex(&format!(
                        "{}|{}",
                        address.trim(),
                        name.unwrap_or_default().trim()
                    ))
                ),
            }),
            WakeSender::App { app, package } => json!({"app": app, "package": package}),
        };
        let mut proof = json!({
            "schema": "openphone.wake_dropped.v1",
            "source": source,
            "list": sender.list(),
            "sender": who,
        });
        proof[key] = woken;
        let entry = AuditEntry {
            audit_id: format!("wake:dropped:{now}"),
            kind: AuditKind::BackgroundEvent,
            at_ms: now,
            runtime: woken_by.to_owned(),
            caller: AuditCaller {
                runtime: woken_by.to_owned(),
                transport: "internal".to_owned(),
                principal: "wake-allowlist".to_owned(),
            },
            request_id: format!("wake-dropped-{}", uuid::Uuid::new_v4()),
            tool: Some("wake.dropped".to_owned()),
            policy_proof: Some(proof),
            ..AuditEntry::default()
        };
        tracing::info!(
            source,
            list = sender.list(),
            woken_by,
            "wake: a sender not on the [wake] allowlist woke nothing"
        );
        if let Err(e) = self.store().append_audit(&entry) {
            tracing::error!(error = %e, "recording a dropped wake");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_lists_admit_everyone_and_present_ones_only_their_entries() {
        let bob = WakeSender::Contact {
            address: "+49 170 555 0101",
            name: Some("Bob Nguyen"),
        };
        let maps = WakeSender::App {
            app: "Maps",
            package: "com.google.android.apps.maps",
        };
        let open = WakeConfig::default();
        assert!(open.admits(&bob) && open.admits(&maps));
        let closed = WakeConfig {
            contacts: Some(vec![]),
            apps: Some(vec![]),
        };
        assert!(!closed.admits(&bob) && !closed.admits(&maps));
        for entry in ["bob nguyen", "01705550101", "+491705550101"] {
            let list = WakeConfig {
                contacts: Some(vec![entry.to_owned()]),
                apps: None,
            };
            assert!(list.admits(&bob), "{entry}");
        }
        let other = WakeConfig {
            contacts: Some(vec!["Alice".into(), "+1 555 0100".into()]),
            apps: Some(vec!["maps".into()]),
        };
        assert!(!other.admits(&bob));
        assert!(other.admits(&maps));
        let by_package = WakeConfig {
            contacts: None,
            apps: Some(vec!["com.google.android.apps.maps".into()]),
        };
        assert!(by_package.admits(&maps));
    }

    #[test]
    fn bus_events_name_their_sender_and_the_runtimes_own_notifications_are_nobodys() {
        let message = json!({"thread_id": 1, "address": "+49 170 555 0101", "name": "Bob Nguyen",
                             "text": "hi", "at_ms": 1});
        assert_eq!(
            event_sender("phone.message.received", &message),
            Some((
                "message",
                WakeSender::Contact {
                    address: "+49 170 555 0101",
                    name: Some("Bob Nguyen")
                }
            ))
        );
        let call = json!({"number": "+1 555 0100", "name": null, "direction": "incoming"});
        assert_eq!(
            event_sender("phone.call.received", &call),
            Some((
                "call",
                WakeSender::Contact {
                    address: "+1 555 0100",
                    name: None
                }
            ))
        );
        let posted = json!({"key": "k", "app": "Maps", "package": "com.maps", "title": "t"});
        assert_eq!(
            event_sender("phone.notification.posted", &posted),
            Some((
                "notification",
                WakeSender::App {
                    app: "Maps",
                    package: "com.maps"
                }
            ))
        );
        for nobody in [
            "phone.notification.action",
            "watcher.fired",
            "runtime.message.final",
        ] {
            assert_eq!(event_sender(nobody, &posted), None, "{nobody}");
        }
        // A payload without its party names nobody on any list.
        let bare = json!({"text": "hi"});
        let (_, sender) = event_sender("phone.message.received", &bare).unwrap();
        let list = WakeConfig {
            contacts: Some(vec!["Bob Nguyen".into()]),
            apps: Some(vec![]),
        };
        assert!(!list.admits(&sender));
        let own = WakeSender::App {
            app: "OpenPhone",
            package: OPENPHONE_PACKAGE,
        };
        assert!(list.admits(&own));
    }
}
