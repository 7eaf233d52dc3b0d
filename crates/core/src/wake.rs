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
//! A wake that is refused is never dropped silently: [`ToolBridge::record_wake_dropped`]
//! writes a `wake.dropped` audit record (the sender as a digest, the app's package, the
//! watchers it would have woken) and logs a line. The watchers engine asks
//! [`ToolBridge::wake_admits`] before a device event fires a watcher.

use std::sync::RwLock;

use openphone_protocol::endpoint::{AuditCaller, AuditEntry, AuditKind};
use serde::{Deserialize, Serialize};
use serde_json::json;

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
            WakeSender::App { app, package } => self.apps.as_ref().is_none_or(|list| {
                list.iter().any(|want| {
                    let want = want.trim();
                    !want.is_empty() && (want.eq_ignore_ascii_case(app.trim()) || want == *package)
                })
            }),
        }
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
        let entry = AuditEntry {
            audit_id: format!("wake:dropped:{now}"),
            kind: AuditKind::BackgroundEvent,
            at_ms: now,
            runtime: "watchers".to_owned(),
            caller: AuditCaller {
                runtime: "watchers".to_owned(),
                transport: "internal".to_owned(),
                principal: "wake-allowlist".to_owned(),
            },
            request_id: format!("wake-dropped-{}", uuid::Uuid::new_v4()),
            tool: Some("wake.dropped".to_owned()),
            policy_proof: Some(json!({
                "schema": "openphone.wake_dropped.v1",
                "source": source,
                "list": sender.list(),
                "sender": who,
                "watcher_ids": watchers,
            })),
            ..AuditEntry::default()
        };
        tracing::info!(
            source,
            list = sender.list(),
            watchers = watchers.len(),
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
}
