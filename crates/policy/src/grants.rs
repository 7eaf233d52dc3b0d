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
//! ten-step UI task the user approved once. The targets are the manifest's facts
//! (`grant_targets` on each command: the params, or `[]` for a command without a target);
//! every state-changing command below the risk floor declares them, and nothing else does (a
//! test keeps it so).

use std::collections::BTreeMap;

use openphone_protocol::Command;
use serde_json::Value;

/// The target params of a command (empty when it has none): the manifest's `grant_targets`.
pub fn target_params(command: &Command) -> &[String] {
    command.grant_targets.as_deref().unwrap_or_default()
}

/// The constraints of a session grant made by approving `params` for `command`: every target
/// param, with the approved value, or `null` ("must be absent") when the request did not carry
/// it. Empty for a command without a target (`grant_targets: []`). A command whose manifest
/// entry declares no `grant_targets` at all is pinned to its exact params, so a manifest that
/// forgets the field can only make a grant narrower, never cover every target.
pub fn session_grant_constraints(command: &Command, params: &Value) -> BTreeMap<String, Value> {
    let Some(targets) = command.grant_targets.as_deref() else {
        return exact_params_constraints(command, params);
    };
    targets
        .iter()
        .map(|key| {
            let value = params.get(key).cloned().unwrap_or(Value::Null);
            (key.clone(), value)
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
    fn every_target_names_a_param_of_its_schema() {
        let registry = Registry::embedded().unwrap();
        for cmd in registry.commands() {
            let props = cmd.input_schema.get("properties").unwrap();
            for p in target_params(cmd) {
                assert!(props.get(p).is_some(), "{} has no param {p}", cmd.name);
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
    fn a_command_without_declared_grant_targets_is_pinned_to_its_exact_params() {
        let registry = Registry::embedded().unwrap();
        let mut cmd = registry.resolve("openphone.ui.tap").unwrap().clone();
        let params = json!({"x": 10, "y": 20, "reason": "r"});
        assert!(session_grant_constraints(&cmd, &params).is_empty());
        cmd.grant_targets = None;
        let pinned = session_grant_constraints(&cmd, &params);
        assert_eq!(pinned, exact_params_constraints(&cmd, &params));
        assert_eq!(pinned.get("x"), Some(&json!(10)));
    }

    #[test]
    fn every_approvable_command_is_classified_once() {
        let registry = Registry::embedded().unwrap();
        for cmd in registry.commands() {
            let approvable = crate::is_mutating(cmd) && !crate::is_risk_floor(cmd);
            assert_eq!(
                approvable,
                cmd.grant_targets.is_some(),
                "{}: a state-changing command below the risk floor must declare grant_targets \
                 in the manifest, and nothing else may",
                cmd.name
            );
        }
    }
}
