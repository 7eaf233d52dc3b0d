//! What a session grant (`accept_for_session`) covers: the same runtime, the same tool, in the
//! same phone session — and, where the request names a target, only that target
//! (`approvals.md` §7: "the same app or contact").
//!
//! The target of a command is the first of its target params the approved request carries; the
//! grant then carries that param as an exact-match constraint, so approving a draft to Alice for
//! the session never covers a draft to Bob. Commands without a target param (a tap at a point,
//! typing, a key press) are covered for the session whatever their params: that is the
//! ten-step UI task the user approved once.

use std::collections::BTreeMap;

use openphone_protocol::Command;
use serde_json::Value;

/// Target params by canonical command name, in order of preference.
const TARGETS: &[(&str, &[&str])] = &[
    ("openphone.app.open", &["package_or_label", "label"]),
    ("openphone.url.open", &["url"]),
    (
        "openphone.notifications.open",
        &["package", "notification_key"],
    ),
    ("openphone.calendar.add", &["calendar_id"]),
    ("openphone.calendar.update", &["event_id"]),
    ("openphone.messages.draft", &["to", "contact_query"]),
    ("openphone.watchers.stop", &["watcher_id"]),
    ("openphone.jobs.stop", &["job_id"]),
];

/// The target params of a command (empty when it has none).
pub fn target_params(command: &Command) -> &'static [&'static str] {
    TARGETS
        .iter()
        .find(|(name, _)| *name == command.name)
        .map_or(&[], |(_, params)| *params)
}

/// The constraints of a session grant made by approving `params` for `command`: the first
/// target param present in the request, with its value; empty for a command without one.
pub fn session_grant_constraints(command: &Command, params: &Value) -> BTreeMap<String, Value> {
    target_params(command)
        .iter()
        .find_map(|key| {
            params
                .get(*key)
                .filter(|v| !v.is_null())
                .map(|v| BTreeMap::from([((*key).to_owned(), v.clone())]))
        })
        .unwrap_or_default()
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
    fn the_first_target_present_becomes_the_constraint() {
        let draft = command("openphone.messages.draft");
        assert_eq!(
            session_grant_constraints(
                draft,
                &json!({"to": "+1555", "contact_query": "Al", "body": "x"})
            ),
            BTreeMap::from([("to".to_owned(), json!("+1555"))])
        );
        assert_eq!(
            session_grant_constraints(draft, &json!({"contact_query": "Alice", "body": "x"})),
            BTreeMap::from([("contact_query".to_owned(), json!("Alice"))])
        );
        let tap = command("openphone.ui.tap");
        assert!(session_grant_constraints(tap, &json!({"x": 1, "y": 2})).is_empty());
    }
}
