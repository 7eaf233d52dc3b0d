//! What a session grant (`accept_for_session`) covers: the same runtime, the same tool, in the
//! same phone session — and, where the command has a target, only the approved request's
//! target (`approvals.md` §7: "the same app or contact").
//!
//! A command's target is every param that decides what it acts on. The grant pins each one:
//! to the approved value when the request carried it, and to "absent" (a `null` constraint)
//! when it did not. Pinning only the first one present would not do: a later request could keep
//! that value and add another target param the device reads first (`to` beside
//! `contact_query`, `all` beside `watcher_id`). Commands without a target (a tap at a point,
//! typing, a key press) are covered for the session whatever their params: that is the
//! ten-step UI task the user approved once. Every state-changing command below the risk floor
//! is listed in exactly one of [`TARGETS`] and [`UNTARGETED`] (a test keeps it so).

use std::collections::BTreeMap;

use openphone_protocol::Command;
use serde_json::Value;

/// Target params by canonical command name: every param that names what the command acts on.
pub const TARGETS: &[(&str, &[&str])] = &[
    ("openphone.app.open", &["package_or_label", "label"]),
    ("openphone.url.open", &["url"]),
    (
        "openphone.notifications.open",
        &["notification_key", "package", "query"],
    ),
    ("openphone.calendar.add", &["calendar_id"]),
    ("openphone.calendar.update", &["event_id"]),
    ("openphone.messages.draft", &["to", "contact_query"]),
    (
        "openphone.watchers.stop",
        &["watcher_id", "scope", "all", "query"],
    ),
    ("openphone.jobs.stop", &["job_id"]),
    ("openphone.goals.plan", &["goal_id"]),
    ("openphone.goals.stop", &["goal_id", "action_id"]),
];

/// State-changing commands below the risk floor that act on no particular target: a grant
/// covers them whatever their params.
pub const UNTARGETED: &[&str] = &[
    "openphone.ui.tap",
    "openphone.ui.tap_element",
    "openphone.ui.long_press",
    "openphone.ui.long_press_element",
    "openphone.ui.swipe",
    "openphone.ui.type_text",
    "openphone.input.press_key",
    "openphone.clipboard.set",
    "openphone.clipboard.paste",
    "openphone.memory.save",
    "openphone.watchers.create",
    "openphone.jobs.create",
    "openphone.goals.create",
];

/// The target params of a command (empty when it has none).
pub fn target_params(command: &Command) -> &'static [&'static str] {
    TARGETS
        .iter()
        .find(|(name, _)| *name == command.name)
        .map_or(&[], |(_, params)| *params)
}

/// The constraints of a session grant made by approving `params` for `command`: every target
/// param, with the approved value, or `null` ("must be absent") when the request did not carry
/// it. Empty for a command without a target.
pub fn session_grant_constraints(command: &Command, params: &Value) -> BTreeMap<String, Value> {
    target_params(command)
        .iter()
        .map(|key| {
            let value = params.get(*key).cloned().unwrap_or(Value::Null);
            ((*key).to_owned(), value)
        })
        .collect()
}

/// The constraints of a goal's standing approval (`goals.md` §4, the approval package): every
/// param the command's schema declares, except the audit's `reason`, pinned to the approved
/// request's value or to "absent". Narrower than a session grant: the grant covers these exact
/// params and nothing else — the same step of the same goal, attempted again.
pub fn exact_params_constraints(command: &Command, params: &Value) -> BTreeMap<String, Value> {
    command
        .input_properties()
        .into_iter()
        .filter(|key| *key != "reason")
        .map(|key| {
            let value = params.get(key).cloned().unwrap_or(Value::Null);
            (key.to_owned(), value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use openphone_protocol::Registry;
    use serde_json::json;

    fn command(name: &str) -> &'static Command {
        Registry::embedded().unwrap().resolve(name).unwrap()
    }

    #[test]
    fn every_target_names_a_real_command_and_a_param_of_its_schema() {
        let registry = Registry::embedded().unwrap();
        for (name, params) in TARGETS {
            let cmd = registry
                .resolve(name)
                .unwrap_or_else(|| panic!("no command {name}"));
            assert_eq!(cmd.name, *name, "use the canonical name");
            let props = cmd.input_schema.get("properties").unwrap();
            for p in *params {
                assert!(props.get(*p).is_some(), "{name} has no param {p}");
            }
        }
    }

    #[test]
    fn every_target_is_pinned_to_its_value_or_to_absent() {
        let draft = command("openphone.messages.draft");
        assert_eq!(
            session_grant_constraints(draft, &json!({"contact_query": "Alice", "body": "x"})),
            BTreeMap::from([
                ("to".to_owned(), Value::Null),
                ("contact_query".to_owned(), json!("Alice")),
            ])
        );
        let tap = command("openphone.ui.tap");
        assert!(session_grant_constraints(tap, &json!({"x": 1, "y": 2})).is_empty());
    }

    #[test]
    fn exact_params_pin_every_declared_param_but_the_reason() {
        let update = command("openphone.calendar.update");
        let pinned = exact_params_constraints(
            update,
            &json!({"event_id": 7, "start_at": 5, "reason": "move it", "_extra": 1}),
        );
        assert_eq!(pinned.get("event_id"), Some(&json!(7)));
        assert_eq!(pinned.get("start_at"), Some(&json!(5)));
        assert_eq!(pinned.get("title"), Some(&Value::Null));
        assert!(!pinned.contains_key("reason"));
        assert!(!pinned.contains_key("_extra"));
    }

    #[test]
    fn every_approvable_command_is_classified_once() {
        let registry = Registry::embedded().unwrap();
        for cmd in registry.commands() {
            let approvable = crate::is_mutating(cmd) && !crate::is_risk_floor(cmd);
            let targeted = TARGETS.iter().any(|(n, _)| *n == cmd.name);
            let untargeted = UNTARGETED.contains(&cmd.name.as_str());
            assert!(!(targeted && untargeted), "{} is listed twice", cmd.name);
            assert_eq!(
                approvable,
                targeted || untargeted,
                "{}: a state-changing command below the risk floor must be in TARGETS or \
                 UNTARGETED, and nothing else may be",
                cmd.name
            );
        }
    }
}
